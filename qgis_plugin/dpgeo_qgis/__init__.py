"""dpgeo QGIS plugin: differentially private cluster map layers from sensitive point data.

A thin shell around the dpgeo Python library: a Processing provider "dpgeo"
with the algorithms ``dpgeo:dbscanspans``, ``dpgeo:wavecluster`` and
``dpgeo:noisepreview``, a toolbar button and a Vector-menu entry.
"""

import configparser
import os

__all__ = ["classFactory", "plugin_version"]


def plugin_version() -> str:
    """The version in metadata.txt."""
    cp = configparser.ConfigParser()
    cp.read(os.path.join(os.path.dirname(__file__), "metadata.txt"), encoding="utf-8")
    return cp.get("general", "version", fallback="?")


def classFactory(iface):  # noqa: N802 (QGIS API)
    """Entry point called by QGIS."""
    from .plugin import DpgeoPlugin

    return DpgeoPlugin(iface)
