"""dev/build-plugin makes a zip with one top-level folder that QGIS recognises as a plugin."""

from __future__ import annotations

import configparser
import os
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


def test_zip_holds_every_plugin_module(plugin_zip):
    with zipfile.ZipFile(plugin_zip) as zf:
        names = set(zf.namelist())
    plugin = ROOT / "qgis_plugin" / "dpgeo_qgis"
    modules = {f"dpgeo_qgis/{p.relative_to(plugin).as_posix()}" for p in plugin.rglob("*.py")
               if "__pycache__" not in p.parts}
    assert modules and modules <= names, sorted(modules - names)


@pytest.mark.qgis
def test_unzipped_plugin_imports(plugin_zip, tmp_path):
    """Every module of the unzipped plugin imports in QGIS's Python, from the unzipped folder."""
    with zipfile.ZipFile(plugin_zip) as zf:
        zf.extractall(tmp_path)
        modules = sorted(n[:-3].replace("/", ".").removesuffix(".__init__") for n in zf.namelist() if n.endswith(".py"))
    code = (
        "import importlib, sys\n"
        f"sys.path.insert(0, {str(tmp_path)!r})\n"
        f"for name in {modules!r}:\n"
        "    m = importlib.import_module(name)\n"
        f"    assert m.__file__.startswith({str(tmp_path)!r}), m.__file__\n"
        "from dpgeo_qgis.provider import DpgeoProvider\n"
        "from dpgeo_qgis.algorithms import algorithms\n"
        "print(sorted(alg.name() for alg in algorithms()))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # only the unzipped plugin
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env,
                          cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "['dbscanspans', 'heat', 'hotspots', 'kmeans', 'noisepreview', 'wavecluster']"
