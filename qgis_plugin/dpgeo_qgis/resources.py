"""The plugin's own files: its icon and the version in its metadata.txt."""

from __future__ import annotations

import configparser
import os

__all__ = ["ICON_PATH", "plugin_icon", "plugin_version"]

ICON_PATH = os.path.join(os.path.dirname(__file__), "icon.svg")


def plugin_icon():
    """The plugin's icon (a ``QIcon``)."""
    from qgis.PyQt.QtGui import QIcon

    return QIcon(ICON_PATH)


def plugin_version() -> str:
    """The version in metadata.txt."""
    cp = configparser.ConfigParser()
    cp.read(os.path.join(os.path.dirname(__file__), "metadata.txt"), encoding="utf-8")
    return cp.get("general", "version", fallback="?")
