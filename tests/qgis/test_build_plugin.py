"""dev/build-plugin makes a zip with one top-level folder that QGIS recognises as a plugin."""

from __future__ import annotations

import configparser
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def plugin_zip(tmp_path_factory):
    out = tmp_path_factory.mktemp("dist")
    # a cache inside the plugin folder must not end up in the zip
    cache = ROOT / "qgis_plugin" / "dpgeo_qgis" / "__pycache__"
    cache.mkdir(exist_ok=True)
    proc = subprocess.run([sys.executable, str(ROOT / "dev" / "build-plugin"), "--out", str(out)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    zips = list(out.glob("dpgeo_qgis-*.zip"))
    assert len(zips) == 1
    return zips[0]


def test_zip_layout(plugin_zip):
    cp = configparser.ConfigParser()
    cp.read(ROOT / "qgis_plugin" / "dpgeo_qgis" / "metadata.txt", encoding="utf-8")
    assert plugin_zip.name == f"dpgeo_qgis-{cp['general']['version']}.zip"
    with zipfile.ZipFile(plugin_zip) as zf:
        names = zf.namelist()
    assert {n.split("/")[0] for n in names} == {"dpgeo_qgis"}
    for required in ("metadata.txt", "__init__.py", "icon.svg", "LICENSE", "plugin.py", "provider.py"):
        assert f"dpgeo_qgis/{required}" in names
    assert not [n for n in names if "__pycache__" in n or n.endswith((".pyc", ".pyo")) or "/." in n]


@pytest.mark.qgis
def test_qgis_finds_the_unzipped_plugin(plugin_zip, qgis_app, tmp_path):
    import qgis.utils

    with zipfile.ZipFile(plugin_zip) as zf:
        zf.extractall(tmp_path)
    found = dict(qgis.utils.findPlugins(str(tmp_path)))
    assert "dpgeo_qgis" in found and found["dpgeo_qgis"] is not None
    assert found["dpgeo_qgis"].get("general", "hasProcessingProvider") == "yes"
