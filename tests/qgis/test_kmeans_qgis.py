"""DP k-means in real QGIS: processing.run("dpgeo:kmeans") with the real dpgeo library on the sample layer."""

from __future__ import annotations

import json
import math

import pytest

pytestmark = pytest.mark.qgis

FIELDS = ["cluster_id", "dp_count", "dp_count_low", "dp_count_high", "area_m2", "centroid_x", "centroid_y"]


def _check_kmeans_layer(layer, *, private):
    from qgis.core import NULL, QgsCategorizedSymbolRenderer, QgsWkbTypes

    assert layer is not None and layer.isValid()
    assert layer.geometryType() == QgsWkbTypes.PolygonGeometry
    assert [f.name() for f in layer.fields() if f.name() != "fid"] == FIELDS
    md = layer.metadata()
    meta = json.loads(md.abstract().split("dpgeo metadata (JSON):\n", 1)[1])
    assert meta["differentially_private"] is private and meta["method"] == "kmeans"
    assert ("differentially private" if private else "NOT differentially private") in md.keywords()["dpgeo"]
    # the same style as every dpgeo layer: one colour per cluster, dp_count as label
    assert isinstance(layer.renderer(), QgsCategorizedSymbolRenderer)
    assert layer.renderer().classAttribute() == "cluster_id" and layer.labelsEnabled()
    for f in layer.getFeatures():
        assert f.geometry().area() > 0 and f["dp_count"] != NULL
        assert f["dp_count_low"] <= f["dp_count"] <= f["dp_count_high"]
    return meta


def test_kmeans_on_the_sample_layer(plugin, processing_module, sample_points, sample_study_area, feedback,
                                    tmp_path):
    from qgis.core import QgsVectorLayer

    from dpgeo.budget import Ledger

    path, name = sample_points
    out = str(tmp_path / "kmeans.gpkg")
    res = processing_module.run("dpgeo:kmeans", {
        "INPUT": f"{path}|layername={name}", "EPSILON": 1.0, "K": 4, "STUDY_AREA_LAYER": sample_study_area,
        "OUTPUT": out}, feedback=feedback)
    assert res["DIFFERENTIALLY_PRIVATE"] is True and res["OUTPUT"] == out
    layer = QgsVectorLayer(out, "kmeans", "ogr")  # metadata and style are in the GeoPackage itself
    meta = _check_kmeans_layer(layer, private=True)
    assert res["N_CLUSTERS"] == layer.featureCount() == meta["n_clusters"] == 4
    assert json.loads(res["METADATA_JSON"]) == meta
    assert meta["k"] == 4 and meta["iterations"] == 5 and meta["epsilon"] == 1.0
    # the Voronoi cells partition the study area (working CRS, metres)
    study = QgsVectorLayer(sample_study_area, "area", "ogr")
    from qgis.core import QgsCoordinateTransform, QgsProject

    tr = QgsCoordinateTransform(study.crs(), layer.crs(), QgsProject.instance())
    area = 0.0
    for f in study.getFeatures():
        g = f.geometry()
        g.transform(tr)
        area += g.area()
    assert sum(f.geometry().area() for f in layer.getFeatures()) == pytest.approx(area, rel=1e-6)
    # the centroid attributes lie in their own cell
    from qgis.core import QgsGeometry, QgsPointXY

    for f in layer.getFeatures():
        assert f.geometry().contains(QgsGeometry.fromPointXY(QgsPointXY(f["centroid_x"], f["centroid_y"])))
    # charged once, to the default ledger, as from the command line and the API
    rec = [r for b in Ledger().history() for r in b.releases if r.release_id == meta["release_id"]]
    assert len(rec) == 1 and rec[0].mechanism == "dp-kmeans" and rec[0].status == "completed"


def test_kmeans_per_person_and_advanced_parameters(plugin, processing_module, sample_points, sample_study_area,
                                                   feedback):
    """The 'neighborhood' field stands in for a person id (87 "persons"); K = 20 scales every sensitivity."""
    path, name = sample_points
    res = processing_module.run("dpgeo:kmeans", {
        "INPUT": f"{path}|layername={name}", "EPSILON": 2.0, "K": 3, "ITERATIONS": 4, "LAYER_SHARE": 0.25,
        "PERSON_FIELD": "neighborhood", "MAX_POINTS_PER_PERSON": 20, "STUDY_AREA_LAYER": sample_study_area,
        "OUTPUT": "TEMPORARY_OUTPUT"}, feedback=feedback)
    meta = _check_kmeans_layer(res["OUTPUT"], private=True)
    assert meta["privacy_unit"] == "person" and "identified by column 'neighborhood'" in meta["neighbouring_relation"]
    assert meta["iterations"] == 4 and meta["epsilon_split"]["layer_counts"] == pytest.approx(0.5)
    assert meta["sensitivity_count"] == 20
    assert meta["noise_q_layer"] == pytest.approx(math.exp(-0.5 / 20))


def test_kmeans_seed_is_not_private_and_no_study_area_is_refused(plugin, processing_module, sample_points,
                                                                  sample_study_area, feedback):
    from qgis.core import QgsProcessingException

    path, name = sample_points
    res = processing_module.run("dpgeo:kmeans", {
        "INPUT": f"{path}|layername={name}", "EPSILON": 1.0, "K": 3, "SEED": 3, "STUDY_AREA_LAYER": sample_study_area,
        "OUTPUT": "TEMPORARY_OUTPUT"}, feedback=feedback)
    assert res["DIFFERENTIALLY_PRIVATE"] is False
    meta = _check_kmeans_layer(res["OUTPUT"], private=False)
    assert len(meta["not_private_reasons"]) == 1 and "dataset_spent_epsilon" not in meta
    assert any("NOT" in e for e in feedback.errors)
    with pytest.raises(QgsProcessingException, match="no study area given"):
        processing_module.run("dpgeo:kmeans", {"INPUT": f"{path}|layername={name}", "EPSILON": 1.0, "K": 3,
                                               "OUTPUT": "TEMPORARY_OUTPUT"})


def test_kmeans_bad_k_is_a_processing_error(plugin, processing_module, sample_points, sample_study_area):
    from qgis.core import QgsProcessingException

    path, name = sample_points
    with pytest.raises(QgsProcessingException, match="LAYER_SHARE|layer_share|[Ii]ncorrect parameter"):
        processing_module.run("dpgeo:kmeans", {
            "INPUT": f"{path}|layername={name}", "EPSILON": 1.0, "K": 3, "LAYER_SHARE": 1.5,
            "STUDY_AREA_LAYER": sample_study_area, "OUTPUT": "TEMPORARY_OUTPUT"})
