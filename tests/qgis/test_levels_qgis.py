"""Spans without a radius in real QGIS: the tree of density levels as a second output, styled as graduated
levels, and the noise preview's numbers for auto."""

from __future__ import annotations

import json
import sqlite3
import warnings

import pytest

pytestmark = pytest.mark.qgis

LEVEL_FIELDS = ["level_id", "parent_id", "level", "level_top", "stability", "cluster_id", "depth", "n_cells",
                "area_m2", "dp_count", "dp_count_low", "dp_count_high"]


def _run(processing_module, sample_points, sample_study_area, feedback, **extra):
    path, name = sample_points
    params = {"INPUT": f"{path}|layername={name}", "EPSILON": 1.0, "STUDY_AREA_LAYER": sample_study_area,
              "SEED": 7}
    params.update(extra)
    return processing_module.run("dpgeo:dbscanspans", params, feedback=feedback)


def _library_levels(sample_points, sample_study_area):
    """The same release made by the library (the same seed and study area): its levels layer."""
    import dpgeo

    path, name = sample_points
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = dpgeo.dbscan_spans(str(path), epsilon=1.0, domain=sample_study_area, seed=7,
                               ledger=False)
    return r


def _check_levels_style(layer):
    from qgis.core import QgsGraduatedSymbolRenderer

    from dpgeo.io import palette

    r = layer.renderer()
    assert isinstance(r, QgsGraduatedSymbolRenderer) and r.classAttribute() == "level"
    levels = sorted({float(f["level"]) for f in layer.getFeatures()})
    _, classes = palette.level_classes(levels)
    assert [(rg.lowerValue(), rg.upperValue()) for rg in r.ranges()] == [(lo, hi) for lo, hi, _ in classes]
    assert [rg.symbol().color().name() for rg in r.ranges()] == [palette.LEVEL_COLOURS[c] for _, _, c in classes]
    assert r.orderByEnabled() and "depth" in r.orderBy().dump()  # the nested polygons, shallow ones first
    assert not layer.labelsEnabled()


def test_the_tree_of_levels_goes_into_the_same_geopackage(plugin, processing_module, sample_points,
                                                         sample_study_area, feedback, tmp_path):
    from qgis.core import QgsVectorLayer

    out = tmp_path / "auto.gpkg"
    res = _run(processing_module, sample_points, sample_study_area, feedback, OUTPUT=str(out),
               OUTPUT_LEVELS=f"ogr:dbname='{out}' table=\"auto_levels\" (geom)")
    with sqlite3.connect(out) as conn:
        tables = {r[0] for r in conn.execute("SELECT table_name FROM gpkg_contents WHERE data_type = 'features'")}
    assert tables == {"auto", "auto_levels"}, tables
    levels = QgsVectorLayer(f"{out}|layername=auto_levels", "levels", "ogr")
    assert levels.isValid()
    assert [f.name() for f in levels.fields() if f.name() != "fid"] == LEVEL_FIELDS
    lib = _library_levels(sample_points, sample_study_area)
    feats = sorted(levels.getFeatures(), key=lambda f: f["level_id"])
    assert len(feats) == len(lib.levels) > 10
    assert [f["level_id"] for f in feats] == lib.levels["level_id"].tolist()
    assert [f["level"] for f in feats] == pytest.approx(lib.levels["level"].tolist())
    parents = [None if f["parent_id"] is None or str(f["parent_id"]) == "NULL" else int(f["parent_id"])
               for f in feats]
    assert parents == [None if p is None else int(p)
                       for p in lib.levels["parent_id"].astype(object).where(lib.levels["parent_id"].notna(), None)]
    # each layer carries the release's metadata; the levels say what they are
    meta = json.loads(res["METADATA_JSON"])
    stored = levels.customProperty("dpgeo/metadata")
    assert stored is None or json.loads(stored)["release_id"] == meta["release_id"]
    abstract = QgsVectorLayer(str(out), "main", "ogr").metadata().abstract()
    assert "dpgeo metadata (JSON)" in abstract
    lv_meta = json.loads(levels.metadata().abstract().split("dpgeo metadata (JSON):\n", 1)[1])
    assert lv_meta["layer"] == "levels" and lv_meta["release_id"] == meta["release_id"]
    # the graduated style is stored in the GeoPackage with the layer
    _check_levels_style(levels)
    assert res["N_CLUSTERS"] == len(lib.layer)
    assert any("no further privacy cost" in line for line in feedback.infos)


def test_the_tree_of_levels_as_a_temporary_layer(plugin, processing_module, sample_points, sample_study_area,
                                                 feedback):
    res = _run(processing_module, sample_points, sample_study_area, feedback, OUTPUT="TEMPORARY_OUTPUT",
               OUTPUT_LEVELS="TEMPORARY_OUTPUT")
    layer = res["OUTPUT_LEVELS"]
    assert layer.isValid() and layer.featureCount() == len(_library_levels(sample_points, sample_study_area).levels)
    assert [f.name() for f in layer.fields()] == LEVEL_FIELDS
    _check_levels_style(layer)
    # the flat map keeps its categorised style
    from qgis.core import QgsCategorizedSymbolRenderer

    assert isinstance(res["OUTPUT"].renderer(), QgsCategorizedSymbolRenderer)


def test_levels_are_skipped_unless_asked_and_refused_with_a_radius(plugin, processing_module, sample_points,
                                                                   sample_study_area, feedback, tmp_path):
    from qgis.core import QgsProcessingException

    out = tmp_path / "flat.gpkg"
    res = _run(processing_module, sample_points, sample_study_area, feedback, OUTPUT=str(out))
    assert res.get("OUTPUT_LEVELS") is None
    with sqlite3.connect(out) as conn:
        names = [r[0] for r in conn.execute("SELECT table_name FROM gpkg_contents WHERE data_type = 'features'")]
    assert names == ["flat"]
    assert json.loads(res["METADATA_JSON"]).get("levels_layer") is None
    with pytest.raises(QgsProcessingException, match="levels"):
        _run(processing_module, sample_points, sample_study_area, feedback, RADIUS=200, MIN_POINTS=100,
             OUTPUT="TEMPORARY_OUTPUT", OUTPUT_LEVELS="TEMPORARY_OUTPUT")


def test_noise_preview_outputs_for_auto(plugin, processing_module, sample_study_area, feedback):
    import dpgeo

    res = processing_module.run("dpgeo:noisepreview", {
        "EPSILON": 1.0, "STUDY_AREA_LAYER": sample_study_area, "N_POINTS": 50_000, "COMPARE_EPSILONS": ""},
        feedback=feedback)
    direct = dpgeo.noise_preview(epsilon=1.0, domain=sample_study_area, n_points=50_000)
    row = direct["by_points"][0]
    assert res["N_POINTS"] == 50_000
    assert res["CELL_WIDTH_M"] == pytest.approx(row["cell_width_m"])
    assert res["N_CELLS"] == row["n_cells"]
    assert res["SMALLEST_CLUSTER_POINTS"] == row["smallest_cluster_points"]
    assert [res["LOWEST_LEVEL_MIN"], res["LOWEST_LEVEL_MAX"]] == row["floor_level_range"]
    assert res["NOISE_SD_OF_LEVEL"] == pytest.approx(direct["noise_sd_of_level"])
    assert res["GAMMA_ALL_LEVELS"] == row["gamma_all_levels"]
    for name in ("GAMMA", "MIN_POINTS_PRIME", "CORE_THRESHOLD", "EXTENT_THRESHOLD", "COUNT_ERROR_95", "KAPPA"):
        assert res[name] is None, name  # numbers of a run with a radius
    # without a number of points: a line per number of points in the table, the per-points outputs empty
    feedback.infos.clear()
    res = processing_module.run("dpgeo:noisepreview", {
        "EPSILON": 1.0, "STUDY_AREA_LAYER": sample_study_area, "COMPARE_EPSILONS": ""}, feedback=feedback)
    assert res["CELL_WIDTH_M"] is None and res["SMALLEST_CLUSTER_POINTS"] is None
    assert res["NOISE_SD_OF_LEVEL"] == pytest.approx(direct["noise_sd_of_level"])
    table = [line for line in feedback.infos if line.strip().startswith("1 ")]
    assert len(table) == len(dpgeo.noise_preview(epsilon=1.0, domain=sample_study_area)["by_points"]) == 5
