"""End to end in real QGIS: processing.run("dpgeo:...") with the real dpgeo library on the sample layer."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.qgis

FIELDS = ["cluster_id", "n_cells", "area_m2", "dp_count", "dp_count_low", "dp_count_high"]


def _check_cluster_layer(layer, *, private):
    from qgis.core import QgsCategorizedSymbolRenderer, QgsWkbTypes

    assert layer is not None and layer.isValid()
    assert layer.geometryType() == QgsWkbTypes.PolygonGeometry
    assert [f.name() for f in layer.fields() if f.name() != "fid"] == FIELDS
    md = layer.metadata()
    meta = json.loads(md.abstract().split("dpgeo metadata (JSON):\n", 1)[1])
    assert meta["differentially_private"] is private
    assert "mechanism" in meta and (meta["epsilon"] > 0 if private else True)
    assert ("differentially private" if private else "NOT differentially private") in md.keywords()["dpgeo"]
    assert isinstance(layer.renderer(), QgsCategorizedSymbolRenderer)
    assert layer.labelsEnabled()
    from qgis.core import NULL

    for f in layer.getFeatures():
        assert f.geometry().area() > 0
        assert f["dp_count"] != NULL
        if f["dp_count_low"] != NULL:  # no interval when the counts are not noisy cell counts
            assert f["dp_count_low"] <= f["dp_count"] <= f["dp_count_high"]
    return meta


def test_dbscan_spans_on_the_sample_layer(plugin, processing_module, sample_points, sample_study_area, feedback,
                                          tmp_path):
    import dpgeo

    assert hasattr(dpgeo, "dbscan_spans"), "dpgeo.dbscan_spans is not available yet"
    path, name = sample_points
    out = str(tmp_path / "spans.gpkg")
    res = processing_module.run("dpgeo:dbscanspans", {
        "INPUT": f"{path}|layername={name}", "EPSILON": 1.0, "RADIUS": 200, "MIN_POINTS": 100,
        "STUDY_AREA_LAYER": sample_study_area, "OUTPUT_CRS": "EPSG:4326", "OUTPUT": out}, feedback=feedback)
    assert res["DIFFERENTIALLY_PRIVATE"] is True
    assert res["OUTPUT"] == out
    # metadata and style are stored in the GeoPackage itself: a fresh layer has them
    from qgis.core import QgsVectorLayer

    layer = QgsVectorLayer(out, "spans", "ogr")
    meta = _check_cluster_layer(layer, private=True)
    assert layer.crs().authid() == "EPSG:4326"
    assert meta["radius_m"] == 200 and meta["min_points"] == 100
    assert res["N_CLUSTERS"] == layer.featureCount() >= 1
    assert json.loads(res["METADATA_JSON"]) == meta
    assert any("differentially_private" in line for line in feedback.infos)  # the summary is logged


def test_dbscan_spans_without_radius_and_min_points(plugin, processing_module, sample_points, sample_study_area,
                                                    feedback, tmp_path):
    """The fields left empty: auto (the cell width and the levels chosen from ε), one layer with its levels."""
    path, name = sample_points
    out = str(tmp_path / "auto.gpkg")
    res = processing_module.run("dpgeo:dbscanspans", {
        "INPUT": f"{path}|layername={name}", "EPSILON": 1.0, "STUDY_AREA_LAYER": sample_study_area,
        "OUTPUT": out}, feedback=feedback)
    from qgis.core import QgsVectorLayer

    layer = QgsVectorLayer(out, "auto", "ogr")
    assert layer.isValid() and res["DIFFERENTIALLY_PRIVATE"] is True
    names = [f.name() for f in layer.fields() if f.name() != "fid"]
    assert names == ["cluster_id", "level", "level_top"] + FIELDS[1:] + ["parts"]
    meta = json.loads(res["METADATA_JSON"])
    assert meta["auto"] is True and meta["radius_m"] is None and meta["cell_width_m"] > 0
    assert res["N_CLUSTERS"] == layer.featureCount() >= 2


def test_dbscan_spans_without_study_area_is_refused(plugin, processing_module, sample_points, feedback, tmp_path):
    from qgis.core import QgsProcessingException

    path, name = sample_points
    out = tmp_path / "spans.gpkg"
    with pytest.raises(QgsProcessingException, match="no study area given"):
        processing_module.run("dpgeo:dbscanspans", {
            "INPUT": f"{path}|layername={name}", "EPSILON": 1.0, "RADIUS": 200, "MIN_POINTS": 100,
            "OUTPUT": str(out)}, feedback=feedback)
    assert not out.exists()  # nothing written, and so no extent of the data anywhere


def test_library_error_is_a_processing_exception(plugin, processing_module, sample_points, sample_study_area):
    from qgis.core import QgsProcessingException

    path, name = sample_points
    # a geographic working CRS is refused by the library (DomainError); QGIS shows its message
    with pytest.raises(QgsProcessingException, match="must be a projected CRS"):
        processing_module.run("dpgeo:dbscanspans", {
            "INPUT": f"{path}|layername={name}", "EPSILON": 1.0, "RADIUS": 200, "MIN_POINTS": 100,
            "WORKING_CRS": "EPSG:4326", "STUDY_AREA_LAYER": sample_study_area, "OUTPUT": "TEMPORARY_OUTPUT"})


@pytest.mark.parametrize("method", [0, 1, 2, 3, 4])
def test_wavecluster_on_the_sample_layer(plugin, processing_module, sample_points, sample_study_area, feedback,
                                         method):
    import dpgeo

    assert hasattr(dpgeo, "wavecluster"), "dpgeo.wavecluster is not available yet"
    path, name = sample_points
    res = processing_module.run("dpgeo:wavecluster", {
        "INPUT": f"{path}|layername={name}", "METHOD": method, "EPSILON": 1.0, "CELL_SIZE": 250,
        "STUDY_AREA_LAYER": sample_study_area, "OUTPUT": "TEMPORARY_OUTPUT"}, feedback=feedback)
    exact = method == 4
    assert res["DIFFERENTIALLY_PRIVATE"] is (not exact)
    meta = _check_cluster_layer(res["OUTPUT"], private=not exact)
    assert meta["method"] == ["privthr", "privthr-em", "privqt", "baseline", "exact"][method]
    assert res["N_CLUSTERS"] == res["OUTPUT"].featureCount()


def test_noise_preview(plugin, processing_module, sample_study_area, feedback):
    import dpgeo

    res = processing_module.run("dpgeo:noisepreview", {
        "EPSILON": 1.0, "RADIUS": 200, "MIN_POINTS": 100, "STUDY_AREA_LAYER": sample_study_area,
        "COMPARE_EPSILONS": "0.5, 2"}, feedback=feedback)
    direct = dpgeo.noise_preview(epsilon=1.0, radius_m=200, min_points=100, domain=sample_study_area)
    assert res["GAMMA"] == pytest.approx(direct["gamma"])
    assert res["MIN_POINTS_PRIME"] == pytest.approx(direct["min_points_prime"])
    assert res["COUNT_ERROR_95"] == pytest.approx(direct["count_error_95"])
    assert res["CORE_THRESHOLD"] == pytest.approx(direct["core_threshold"])
    assert res["EXTENT_THRESHOLD"] == pytest.approx(direct["extent_threshold"])  # default extent: grown
    assert json.loads(res["PREVIEW_JSON"])["extent"] == "grown"
    assert json.loads(res["PREVIEW_JSON"])["kappa"] == direct["kappa"]
    # the comparison table has a row per ε, Γ shrinking as ε grows
    rows = [line for line in feedback.infos if line.strip().split(" ")[0] in ("0.5", "1", "2")]
    assert len(rows) == 3


def test_dbscan_span_extent_grown_covers_core(plugin, processing_module, sample_points, sample_study_area):
    """Grown spans contain the core spans, cluster for cluster, and the metadata says which extent was used.

    Both runs use the same test seed, hence the same noisy histogram: the clusters (decided by the core
    cells) are the same, and growing only adds cells. Deterministic, no statistical tolerance needed.
    """
    from qgis.core import QgsGeometry

    path, name = sample_points
    layers, metas = {}, {}
    for option, extent in ((1, "core"), (0, "grown")):
        res = processing_module.run("dpgeo:dbscanspans", {
            "INPUT": f"{path}|layername={name}", "EPSILON": 0.5, "RADIUS": 150, "MIN_POINTS": 40,
            "STUDY_AREA_LAYER": sample_study_area, "SPAN_EXTENT": option, "SEED": 11,
            "OUTPUT": "TEMPORARY_OUTPUT"})
        layer = res["OUTPUT"]
        meta = _check_cluster_layer(layer, private=False)  # a test seed makes it not private
        assert meta["extent"] == extent and json.loads(res["METADATA_JSON"])["extent"] == extent
        assert res["N_CLUSTERS"] == layer.featureCount()
        layers[extent], metas[extent] = layer, meta
    core, grown = layers["core"], layers["grown"]
    assert core.featureCount() == grown.featureCount() >= 2
    # the grown threshold (MinPts + Γ_exact) is below the core one (MinPts + Γ_laplace, the default)
    assert metas["grown"]["extent_threshold"] < metas["core"]["extent_threshold"] == metas["core"]["core_threshold"]
    core_geoms = [f.geometry() for f in core.getFeatures()]
    grown_geoms = [f.geometry() for f in grown.getFeatures()]
    core_union, grown_union = QgsGeometry.unaryUnion(core_geoms), QgsGeometry.unaryUnion(grown_geoms)
    tolerance = 1e-6 * core_union.area()  # m² (working CRS): rounding of the cell corners only
    assert core_union.difference(grown_union).area() <= tolerance
    assert grown_union.area() > core_union.area() + tolerance  # the fringe was actually grown
    # never merged: each core cluster lies within exactly one grown cluster
    for g in core_geoms:
        hosts = [h for h in grown_geoms if g.difference(h).area() <= tolerance]
        assert len(hosts) == 1


def test_per_person_guarantee_with_the_real_library(plugin, processing_module, sample_points, sample_study_area,
                                                    feedback):
    """A person field makes the published guarantee per person, with the noise scaled to the cap K.

    The sample layer has no person ids, so its 'neighborhood' field stands in for one (87 "persons" with
    hundreds of points each): the cap keeps at most K of each and the rest is dropped.
    """
    import math

    path, name = sample_points
    k = 20
    res = processing_module.run("dpgeo:dbscanspans", {
        "INPUT": f"{path}|layername={name}", "EPSILON": 1.0, "RADIUS": 300, "MIN_POINTS": 20,
        "PERSON_FIELD": "neighborhood", "MAX_POINTS_PER_PERSON": k,
        "STUDY_AREA_LAYER": sample_study_area, "OUTPUT": "TEMPORARY_OUTPUT"}, feedback=feedback)
    meta = json.loads(res["METADATA_JSON"])
    assert res["DIFFERENTIALLY_PRIVATE"] is True
    assert meta["privacy_unit"] == "person"
    assert "identified by column 'neighborhood'" in meta["neighbouring_relation"]
    assert f"at most {k} point(s) per person" in meta["neighbouring_relation"]
    assert meta["sensitivity_points_per_record"] == k
    assert meta["noise_q"] == pytest.approx(math.exp(-1.0 / k))  # discrete Laplace scale K/ε
    assert meta == _check_cluster_layer(res["OUTPUT"], private=True)
