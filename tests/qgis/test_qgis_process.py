"""The command line: ``qgis_process.bin`` finds the plugin in a temporary profile and runs its algorithms."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.qgis

ROOT = Path(__file__).resolve().parents[2]


def _json(proc):
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    text = proc.stdout
    return json.loads(text[text.index("{"):])


def test_plugin_enabled_and_algorithms_listed(qgis_process):
    plugins = qgis_process("plugins")
    assert plugins.returncode == 0, plugins.stderr
    assert "* dpgeo_qgis" in plugins.stdout, plugins.stdout + plugins.stderr
    listing = qgis_process("list")
    assert listing.returncode == 0, listing.stderr
    for alg in ("dpgeo:dbscanspans", "dpgeo:wavecluster", "dpgeo:heat", "dpgeo:hotspots", "dpgeo:noisepreview"):
        assert alg in listing.stdout
    helptext = qgis_process("help", "dpgeo:dbscanspans")
    assert "RADIUS" in helptext.stdout and "metres" in helptext.stdout


def test_run_noise_preview(qgis_process, sample_study_area):
    out = _json(qgis_process("--json", "run", "dpgeo:noisepreview", "--", "EPSILON=1", "RADIUS=200",
                             "MIN_POINTS=100", f"STUDY_AREA_LAYER={sample_study_area}"))
    results = out["results"]
    assert results["GAMMA"] > 0 and results["MIN_POINTS_PRIME"] > 100
    assert json.loads(results["PREVIEW_JSON"])["kappa"] > 0


def test_noise_preview_prints_the_comparison_rows_by_default(qgis_process, sample_study_area):
    """Without COMPARE_EPSILONS the default list applies (it did only in the dialog): a row per ε in the log."""
    proc = qgis_process("run", "dpgeo:noisepreview", "--", "EPSILON=1", "RADIUS=200", "MIN_POINTS=100",
                        f"STUDY_AREA_LAYER={sample_study_area}")
    assert proc.returncode == 0, proc.stderr
    firsts = [line.split()[0] for line in proc.stdout.splitlines() if line.strip()]
    for eps in ("0.1", "0.5", "1", "2"):
        assert eps in firsts, proc.stdout


def test_run_dbscan_spans_writes_a_private_geopackage(qgis_process, qgis_app, sample_points, sample_study_area,
                                                       tmp_path):
    from qgis.core import QgsVectorLayer, QgsWkbTypes

    path, name = sample_points
    out_path = tmp_path / "spans.gpkg"
    out = _json(qgis_process("--json", "run", "dpgeo:dbscanspans", "--", f"INPUT={path}|layername={name}",
                             "EPSILON=1", "RADIUS=200", "MIN_POINTS=100", f"STUDY_AREA_LAYER={sample_study_area}",
                             "OUTPUT_CRS=EPSG:4326", f"OUTPUT={out_path}"))
    assert out["results"]["DIFFERENTIALLY_PRIVATE"] is True
    layer = QgsVectorLayer(str(out_path), "spans", "ogr")
    assert layer.isValid() and layer.geometryType() == QgsWkbTypes.PolygonGeometry
    assert layer.crs().authid() == "EPSG:4326"
    assert {"cluster_id", "dp_count", "dp_count_low", "dp_count_high"} <= set(layer.fields().names())
    meta = json.loads(layer.metadata().abstract().split("dpgeo metadata (JSON):\n", 1)[1])
    assert meta["differentially_private"] is True and meta["epsilon"] == 1
    assert layer.featureCount() == out["results"]["N_CLUSTERS"]


def test_run_heat_on_h3_cells_in_lon_lat(qgis_process, qgis_app, sample_points, sample_study_area, tmp_path):
    """qgis_process runs the heat layer too: H3 hexagons written in EPSG:4326, one feature per cell."""
    from qgis.core import QgsVectorLayer

    path, name = sample_points
    out_path = tmp_path / "heat.gpkg"
    out = _json(qgis_process("--json", "run", "dpgeo:heat", "--", f"INPUT={path}|layername={name}", "EPSILON=1",
                             "H3_RESOLUTION=8", f"STUDY_AREA_LAYER={sample_study_area}", "OUTPUT_CRS=EPSG:4326",
                             f"OUTPUT={out_path}"))
    assert out["results"]["DIFFERENTIALLY_PRIVATE"] is True
    layer = QgsVectorLayer(str(out_path), "heat", "ogr")
    assert layer.isValid() and layer.crs().authid() == "EPSG:4326"
    meta = json.loads(layer.metadata().abstract().split("dpgeo metadata (JSON):\n", 1)[1])
    assert meta["cells"] == "H3" and layer.featureCount() == meta["n_cells"] == out["results"]["N_CLUSTERS"]
    assert all(f.geometry().boundingBox().width() < 0.1 for f in layer.getFeatures())  # hexagons, in degrees


def test_missing_dpgeo_says_how_to_fix_it(qgis_process, sample_study_area, tmp_path):
    """Without a venv, QGIS's own Python cannot import dpgeo: the error gives the commands to run."""
    proc = qgis_process("run", "dpgeo:noisepreview", "--", "EPSILON=1", "RADIUS=200", "MIN_POINTS=100",
                        f"STUDY_AREA_LAYER={sample_study_area}", venv=False, home=tmp_path)
    text = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "-m venv --system-site-packages" in text and "-m pip install" in text
    assert str(tmp_path / ".local" / "share" / "dpgeo" / "qgis-venv") in text


@pytest.mark.skipif(sys.prefix == sys.base_prefix, reason="the tests do not run in a venv")
def test_default_venv_location_is_found(qgis_process, sample_study_area, tmp_path):
    """A venv at the default location (~/.local/share/dpgeo/qgis-venv) is used without any setting."""
    target = tmp_path / ".local" / "share" / "dpgeo"
    target.mkdir(parents=True)
    os.symlink(sys.prefix, target / "qgis-venv")
    out = _json(qgis_process("--json", "run", "dpgeo:noisepreview", "--", "EPSILON=1", "RADIUS=200",
                             "MIN_POINTS=100", f"STUDY_AREA_LAYER={sample_study_area}", venv=False,
                             home=tmp_path))
    assert out["results"]["GAMMA"] > 0


def test_both_outputs_into_one_geopackage(qgis_process, qgis_app, sample_points, sample_study_area, tmp_path):
    """OUTPUT=x.gpkg OUTPUT_LEVELS=x.gpkg: two layers in one file, each styled (it hung: both sinks created the
    file anew, and QGIS waited on the one the other had deleted)."""
    import subprocess

    from qgis.core import QgsCategorizedSymbolRenderer, QgsGraduatedSymbolRenderer, QgsVectorLayer

    path, name = sample_points
    out_path = tmp_path / "same.gpkg"
    try:
        proc = qgis_process("--json", "run", "dpgeo:dbscanspans", "--", f"INPUT={path}|layername={name}",
                            "EPSILON=1", f"STUDY_AREA_LAYER={sample_study_area}", f"OUTPUT={out_path}",
                            f"OUTPUT_LEVELS={out_path}", timeout=200)
    except subprocess.TimeoutExpired:
        pytest.fail("qgis_process did not finish with both outputs in one GeoPackage")
    out = _json(proc)
    assert out["results"]["DIFFERENTIALLY_PRIVATE"] is True
    main = QgsVectorLayer(f"{out_path}|layername=same", "main", "ogr")
    levels = QgsVectorLayer(f"{out_path}|layername=same_levels", "levels", "ogr")
    assert main.isValid() and levels.isValid()
    assert main.featureCount() == out["results"]["N_CLUSTERS"] and levels.featureCount() > main.featureCount()
    assert isinstance(main.renderer(), QgsCategorizedSymbolRenderer)
    assert isinstance(levels.renderer(), QgsGraduatedSymbolRenderer)
    assert "dpgeo metadata (JSON)" in main.metadata().abstract()
