"""The plugin's plumbing, with the library's functions replaced by recorders.

These tests check what the plugin hands to dpgeo (coordinate arrays and CRS,
selected features only, study area, progress callback) and what it makes of
the result (sink features in the requested CRS, log, metadata, style,
errors, cancellation), independently of the mechanisms themselves.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

pytestmark = pytest.mark.qgis

UTM15 = "EPSG:32615"


class FakeResult:
    def __init__(self, layer, metadata):
        self.layer = layer
        self.metadata = metadata
        self.diagnostics = {"n_read": 0, "n_dropped": 0, "n_outside_domain": 0}

    def summary(self):
        state = "differentially private" if self.metadata["differentially_private"] else "NOT PRIVATE"
        return f"fake mechanism, epsilon={self.metadata['epsilon']}: {state}"


def _fake_layer():
    import geopandas as gpd
    import shapely

    # two clusters in central Minneapolis (UTM zone 15N), one of them in two parts
    a = shapely.MultiPolygon([shapely.box(478000, 4980000, 478500, 4980500)])
    b = shapely.MultiPolygon([shapely.box(480000, 4975000, 480200, 4975200), shapely.box(480400, 4975000,
                                                                                         480600, 4975200)])
    return gpd.GeoDataFrame(
        {"cluster_id": np.array([1, 2], dtype=np.int64), "n_cells": np.array([4, 2], dtype=np.int64),
         "area_m2": [250000.0, 80000.0], "dp_count": np.array([120, 37], dtype=np.int64),
         "dp_count_low": np.array([100, 20], dtype=np.int64), "dp_count_high": np.array([140, 54], dtype=np.int64)},
        geometry=[a, b], crs=UTM15)


class Recorder:
    """Stands in for dpgeo.dbscan_spans / dpgeo.wavecluster and records its call."""

    def __init__(self, mechanism="fake", raises=None):
        self.calls = []
        self.mechanism = mechanism
        self.raises = raises
        self.progress_raised = None

    def __call__(self, points, **kwargs):
        self.calls.append((points, kwargs))
        progress = kwargs.get("progress")
        if progress is not None:
            try:
                progress(0.0, "building the noisy histogram")
                progress(0.5, "merging core cells")
                progress(1.0, "polygons")
            except BaseException as exc:  # the plugin cancels by raising from the callback
                self.progress_raised = exc
                raise
        if self.raises is not None:
            raise self.raises
        private = not kwargs.get("domain_from_data") and kwargs.get("seed") is None
        md = {"mechanism": self.mechanism, "epsilon": kwargs["epsilon"], "delta": 0.0,
              "differentially_private": private,
              "not_private_reasons": [] if private else ["study area derived from the data"],
              "working_crs": UTM15, "dpgeo_version": "test"}
        return FakeResult(_fake_layer(), md)


@pytest.fixture
def fake_dpgeo(monkeypatch, plugin):
    import dpgeo

    spans, wave = Recorder("dp-dbscan-spans"), Recorder("wavecluster")
    monkeypatch.setattr(dpgeo, "dbscan_spans", spans, raising=False)
    monkeypatch.setattr(dpgeo, "wavecluster", wave, raising=False)
    return spans, wave


def _params(points_layer, **extra):
    p = {"INPUT": points_layer, "EPSILON": 0.5, "RADIUS": 150, "MIN_POINTS": 30,
         "STUDY_AREA_EXTENT": "-93.34,-93.19,44.88,45.06 [EPSG:4326]", "OUTPUT": "TEMPORARY_OUTPUT"}
    p.update(extra)
    return p


def test_points_study_area_and_parameters_reach_the_library(fake_dpgeo, processing_module, points_layer,
                                                             feedback):
    spans, _ = fake_dpgeo
    res = processing_module.run("dpgeo:dbscanspans", _params(points_layer, BETA=0.1, ETA=0.5, GAMMA_BOUND=1),
                                feedback=feedback)
    (points, kwargs), = spans.calls
    x, y, crs = points
    assert isinstance(x, np.ndarray) and x.dtype == float and x.shape == y.shape
    assert x.size == points_layer.featureCount()
    assert crs == "EPSG:4326"
    assert -93.4 < x.min() and x.max() < -93.1 and 44.8 < y.min() and y.max() < 45.1
    assert kwargs["epsilon"] == 0.5 and kwargs["radius_m"] == 150 and kwargs["min_points"] == 30
    assert kwargs["beta"] == 0.1 and kwargs["eta"] == 0.5 and kwargs["histogram"] == "auto"
    assert kwargs["gamma"] == "exact"
    assert kwargs["extent"] == "grown"  # the default span extent
    assert kwargs["domain"] == pytest.approx((-93.34, 44.88, -93.19, 45.06))
    assert kwargs["domain_crs"] == "EPSG:4326"
    assert kwargs["domain_from_data"] is False
    assert "seed" not in kwargs and "crs" not in kwargs
    assert res["DIFFERENTIALLY_PRIVATE"] is True
    assert res["N_CLUSTERS"] == 2
    # the library's progress reached the QGIS feedback, with its messages
    assert "merging core cells" in feedback.texts
    assert max(feedback.progress_values) == pytest.approx(100.0)
    assert "fake mechanism, epsilon=0.5: differentially private" in feedback.infos


def test_output_layer_fields_crs_metadata_and_style(fake_dpgeo, processing_module, points_layer, feedback):
    from qgis.core import QgsCategorizedSymbolRenderer, QgsWkbTypes

    res = processing_module.run("dpgeo:dbscanspans", _params(points_layer), feedback=feedback)
    layer = res["OUTPUT"]
    assert layer.isValid()
    assert layer.geometryType() == QgsWkbTypes.PolygonGeometry
    assert QgsWkbTypes.isMultiType(layer.wkbType())
    assert [f.name() for f in layer.fields()] == ["cluster_id", "n_cells", "area_m2", "dp_count",
                                                 "dp_count_low", "dp_count_high"]
    assert layer.crs().authid() == UTM15  # default: the working CRS
    feats = sorted(layer.getFeatures(), key=lambda f: f["cluster_id"])
    assert [f["dp_count"] for f in feats] == [120, 37]
    assert feats[1].geometry().constGet().numGeometries() == 2
    assert feats[0].geometry().area() == pytest.approx(250000.0)
    md = layer.metadata()
    assert "fake mechanism" in md.abstract()
    assert json.loads(md.abstract().split("dpgeo metadata (JSON):\n", 1)[1])["differentially_private"] is True
    assert "differentially private" in md.keywords()["dpgeo"]
    assert json.loads(layer.customProperty("dpgeo/metadata"))["mechanism"] == "dp-dbscan-spans"
    assert json.loads(res["METADATA_JSON"])["epsilon"] == 0.5
    renderer = layer.renderer()
    assert isinstance(renderer, QgsCategorizedSymbolRenderer) and renderer.classAttribute() == "cluster_id"
    assert len(renderer.categories()) == 2
    assert 0 < renderer.categories()[0].symbol().color().alpha() < 255
    assert layer.labelsEnabled() and layer.labeling().settings().fieldName == "dp_count"


def test_output_crs_reprojects(fake_dpgeo, processing_module, points_layer):
    res = processing_module.run("dpgeo:dbscanspans", _params(points_layer, OUTPUT_CRS="EPSG:4326"))
    layer = res["OUTPUT"]
    assert layer.crs().authid() == "EPSG:4326"
    box = layer.extent()
    assert -93.4 < box.xMinimum() < box.xMaximum() < -93.1 and 44.8 < box.yMinimum() < box.yMaximum() < 45.1


def test_selected_features_only(fake_dpgeo, processing_module, points_layer):
    from qgis.core import QgsProcessingFeatureSourceDefinition, QgsProject

    spans, _ = fake_dpgeo
    QgsProject.instance().addMapLayer(points_layer)
    try:
        ids = [f.id() for f in points_layer.getFeatures()][:1234]
        points_layer.selectByIds(ids)
        src = QgsProcessingFeatureSourceDefinition(points_layer.id(), True)
        processing_module.run("dpgeo:dbscanspans", _params(points_layer, INPUT=src))
        (x, y, _), _ = spans.calls[-1]
        assert x.size == 1234
    finally:
        QgsProject.instance().removeMapLayer(points_layer.id())


def test_study_area_polygon_layer(fake_dpgeo, processing_module, points_layer, sample_study_area):
    import shapely

    spans, _ = fake_dpgeo
    processing_module.run("dpgeo:dbscanspans", _params(points_layer, STUDY_AREA_EXTENT=None,
                                                       STUDY_AREA_LAYER=sample_study_area))
    _, kwargs = spans.calls[-1]
    assert isinstance(kwargs["domain"], shapely.Geometry) and kwargs["domain"].area > 0
    assert kwargs["domain_crs"] == "EPSG:4326" and kwargs["domain_from_data"] is False


def test_a_run_without_a_study_area_is_refused_with_the_command_lines_message(fake_dpgeo, processing_module,
                                                                              points_layer, feedback, tmp_path):
    """No fallback to the private layer's extent: it would be written into the output's metadata."""
    from qgis.core import QgsProcessingException

    from dpgeo.domain import as_study_area
    from dpgeo.errors import DomainError

    with pytest.raises(DomainError) as cli:
        as_study_area(None)
    spans, _ = fake_dpgeo
    out = tmp_path / "spans.gpkg"
    with pytest.raises(QgsProcessingException) as exc:
        processing_module.run("dpgeo:dbscanspans", _params(points_layer, STUDY_AREA_EXTENT=None, OUTPUT=str(out)),
                              feedback=feedback)
    assert str(cli.value) in str(exc.value)
    assert not spans.calls and not out.exists()


def test_an_extent_taken_from_the_private_layer_is_refused(fake_dpgeo, processing_module, points_layer, feedback,
                                                           tmp_path):
    from qgis.core import QgsProcessingException

    spans, _ = fake_dpgeo
    e = points_layer.extent()
    extent = f"{e.xMinimum()!r},{e.xMaximum()!r},{e.yMinimum()!r},{e.yMaximum()!r} [EPSG:4326]"
    out = tmp_path / "spans.gpkg"
    with pytest.raises(QgsProcessingException, match="private layer's own extent"):
        processing_module.run("dpgeo:dbscanspans", _params(points_layer, STUDY_AREA_EXTENT=extent, OUTPUT=str(out)),
                              feedback=feedback)
    assert not spans.calls and not out.exists()


def test_both_study_areas_is_an_error(fake_dpgeo, processing_module, points_layer, sample_study_area):
    from qgis.core import QgsProcessingException

    with pytest.raises(QgsProcessingException, match="either as an extent or as a polygon layer"):
        processing_module.run("dpgeo:dbscanspans", _params(points_layer, STUDY_AREA_LAYER=sample_study_area))


def test_seed_working_crs_and_sensitivity_are_passed(fake_dpgeo, processing_module, points_layer, feedback):
    spans, _ = fake_dpgeo
    res = processing_module.run("dpgeo:dbscanspans", _params(points_layer, SEED=7, WORKING_CRS="EPSG:26915",
                                                             MAX_POINTS_PER_RECORD=3, HISTOGRAM=2,
                                                             SPAN_EXTENT=1),
                                feedback=feedback)
    _, kwargs = spans.calls[-1]
    assert kwargs["seed"] == 7 and kwargs["crs"] == "EPSG:26915" and kwargs["max_points_per_record"] == 3
    assert kwargs["histogram"] == "sparse" and kwargs["extent"] == "core"
    assert res["DIFFERENTIALLY_PRIVATE"] is False
    assert any("test seed" in e for e in feedback.errors)


def test_library_errors_become_processing_exceptions(monkeypatch, plugin, processing_module, points_layer):
    import dpgeo
    from dpgeo.errors import ParameterError
    from qgis.core import QgsProcessingException

    msg = "epsilon must be > 0; got -1 (choose a positive privacy budget)"
    monkeypatch.setattr(dpgeo, "dbscan_spans", Recorder(raises=ParameterError(msg)), raising=False)
    with pytest.raises(QgsProcessingException) as info:
        processing_module.run("dpgeo:dbscanspans", _params(points_layer))
    assert msg in str(info.value)


def test_cancellation_is_honoured(fake_dpgeo, processing_module, points_layer, feedback):
    from qgis.core import QgsProcessingException

    spans, _ = fake_dpgeo
    # cancel while the library runs: the progress callback raises, nothing is written
    feedback.progressChanged.connect(lambda v: feedback.cancel() if v >= 50 else None)
    with pytest.raises(QgsProcessingException, match="Cancelled"):
        processing_module.run("dpgeo:dbscanspans", _params(points_layer), feedback=feedback)
    assert spans.calls and spans.progress_raised is not None


def test_cancel_before_start_reads_nothing(fake_dpgeo, processing_module, points_layer, feedback):
    from qgis.core import QgsProcessingException

    spans, _ = fake_dpgeo
    feedback.cancel()
    with pytest.raises(QgsProcessingException, match="Cancelled"):
        processing_module.run("dpgeo:dbscanspans", _params(points_layer), feedback=feedback)
    assert not spans.calls


def test_wavecluster_method_and_grid(fake_dpgeo, processing_module, points_layer, feedback):
    _, wave = fake_dpgeo
    params = {"INPUT": points_layer, "METHOD": 2, "EPSILON": 1.0, "CELL_SIZE": 250, "PERCENTILE": 70,
              "STUDY_AREA_EXTENT": "-93.34,-93.19,44.88,45.06 [EPSG:4326]", "OUTPUT": "TEMPORARY_OUTPUT"}
    res = processing_module.run("dpgeo:wavecluster", params, feedback=feedback)
    (x, _, crs), kwargs = wave.calls[-1]
    assert kwargs["method"] == "privqt" and kwargs["cell_m"] == 250 and kwargs["percentile"] == 70
    assert "grid_size" not in kwargs and x.size == points_layer.featureCount()
    assert res["OUTPUT"].featureCount() == 2

    params.update({"METHOD": 4, "CELL_SIZE": None, "GRID_SIZE": 64})
    processing_module.run("dpgeo:wavecluster", params, feedback=feedback)
    _, kwargs = wave.calls[-1]
    assert kwargs["method"] == "exact" and kwargs["grid_size"] == 64 and "cell_m" not in kwargs
    assert kwargs["epsilon"] is None  # exact spends no budget
    assert any("NOT private" in e for e in feedback.errors)


def test_wavecluster_needs_exactly_one_grid_parameter(fake_dpgeo, processing_module, points_layer):
    from qgis.core import QgsProcessingException

    _, wave = fake_dpgeo
    params = {"INPUT": points_layer, "METHOD": 0, "EPSILON": 1.0, "OUTPUT": "TEMPORARY_OUTPUT",
              "STUDY_AREA_EXTENT": "-93.34,-93.19,44.88,45.06 [EPSG:4326]"}
    for extra in ({}, {"CELL_SIZE": 100, "GRID_SIZE": 50}):
        with pytest.raises(QgsProcessingException, match="exactly one of the cell size"):
            processing_module.run("dpgeo:wavecluster", dict(params, **extra))
    assert not wave.calls


def test_noise_preview_reads_no_data(monkeypatch, plugin, processing_module, feedback, tmp_path):
    import dpgeo

    calls = []

    def fake_preview(**kwargs):
        calls.append(kwargs)
        eps = kwargs["epsilon"]
        return {"kappa": 21, "n_cells": 40000, "gamma": 30.0 / eps, "min_points_prime": 50 + 30.0 / eps,
                "core_threshold": 50 + 20.0 / eps, "extent_threshold": 50 + 15.0 / eps, "extent": kwargs["extent"],
                "theta": 0.0, "histogram": "dense", "cell_width_m": 26.5, "count_error_95": 9.0 / eps}

    monkeypatch.setattr(dpgeo, "noise_preview", fake_preview, raising=False)
    html = tmp_path / "preview.html"
    res = processing_module.run("dpgeo:noisepreview", {
        "EPSILON": 1.0, "RADIUS": 100, "MIN_POINTS": 50, "COMPARE_EPSILONS": "0.5, 2",
        "STUDY_AREA_EXTENT": "-93.34,-93.19,44.88,45.06 [EPSG:4326]", "OUTPUT_HTML": str(html)},
        feedback=feedback)
    assert [c["epsilon"] for c in calls] == [1.0, 0.5, 2.0]
    assert all(c["extent"] == "grown" for c in calls)  # the default span extent
    assert all("points" not in c for c in calls)
    assert calls[0]["domain"] == pytest.approx((-93.34, 44.88, -93.19, 45.06))
    assert res["GAMMA"] == 30.0 and res["MIN_POINTS_PRIME"] == 80.0 and res["COUNT_ERROR_95"] == 9.0
    assert json.loads(res["PREVIEW_JSON"])["kappa"] == 21
    assert res["CORE_THRESHOLD"] == 70.0 and res["EXTENT_THRESHOLD"] == 65.0
    assert "Γ" in html.read_text(encoding="utf-8") and "extent threshold" in html.read_text(encoding="utf-8")
    assert any("MinPts′" in line and "extent threshold" in line for line in feedback.infos)
    # the core span extent reaches the library too
    processing_module.run("dpgeo:noisepreview", {
        "EPSILON": 1.0, "RADIUS": 100, "MIN_POINTS": 50, "SPAN_EXTENT": 1,
        "STUDY_AREA_EXTENT": "-93.34,-93.19,44.88,45.06 [EPSG:4326]"})
    assert calls[-1]["extent"] == "core"


def test_run_and_load_results_styles_the_loaded_layer(fake_dpgeo, processing_module, points_layer):
    """The layer QGIS adds to the project gets the metadata, style and a telling name (post-processor)."""
    from qgis.core import QgsCategorizedSymbolRenderer, QgsProject

    res = processing_module.runAndLoadResults("dpgeo:dbscanspans", _params(points_layer))
    layer = QgsProject.instance().mapLayer(res["OUTPUT"])
    try:
        assert layer is not None
        assert layer.name() == "DP-DBSCAN cluster spans (ε=0.5, differentially private)"
        assert isinstance(layer.renderer(), QgsCategorizedSymbolRenderer) and layer.labelsEnabled()
        assert "dpgeo metadata (JSON)" in layer.metadata().abstract()
        assert layer.metadata().title() == layer.name()
    finally:
        QgsProject.instance().removeAllMapLayers()


def _memory_points(wkts, kind="MultiPoint"):
    from qgis.core import QgsFeature, QgsGeometry, QgsVectorLayer

    layer = QgsVectorLayer(f"{kind}?crs=EPSG:4326", "mp", "memory")
    feats = []
    for wkt in wkts:
        f = QgsFeature()
        if wkt is not None:
            f.setGeometry(QgsGeometry.fromWkt(wkt))
        feats.append(f)
    layer.dataProvider().addFeatures(feats)
    return layer


def test_multipoint_layers(fake_dpgeo, processing_module, feedback):
    spans, _ = fake_dpgeo
    layer = _memory_points(["MultiPoint((-93.25 44.97))", "MultiPoint((-93.26 44.98))", None,
                            "MultiPoint EMPTY"])
    processing_module.run("dpgeo:dbscanspans", _params(layer), feedback=feedback)
    (x, y, _), _ = spans.calls[-1]
    assert sorted(x.tolist()) == [-93.26, -93.25] and sorted(y.tolist()) == [44.97, 44.98]
    assert any("2 features without a point geometry" in i for i in feedback.infos)

    # a multipoint of several points is one record that is not one point: skipped alone, the run goes on
    two = _memory_points(["MultiPoint((-93.25 44.97),(-93.2 44.9))", "MultiPoint((-93.26 44.98))"])
    processing_module.run("dpgeo:dbscanspans", _params(two), feedback=feedback)
    (x, y, _), _ = spans.calls[-1]
    assert x.tolist() == [-93.26]


def _memory_points_with_person(rows, kind="Point"):
    """A memory layer with an integer field 'driver' (None = NULL) from (wkt or None, driver) rows."""
    from qgis.core import QgsFeature, QgsField, QgsGeometry, QgsVectorLayer
    from qgis.PyQt.QtCore import QVariant

    layer = QgsVectorLayer(f"{kind}?crs=EPSG:4326", "trips", "memory")
    layer.dataProvider().addAttributes([QgsField("driver", QVariant.Int)])
    layer.updateFields()
    feats = []
    for wkt, driver in rows:
        f = QgsFeature(layer.fields())
        if wkt is not None:
            f.setGeometry(QgsGeometry.fromWkt(wkt))
        if driver is not None:
            f["driver"] = driver
        feats.append(f)
    layer.dataProvider().addFeatures(feats)
    return layer


def test_person_field_and_cap_reach_the_library(fake_dpgeo, processing_module, points_layer, feedback):
    spans, wave = fake_dpgeo
    processing_module.run("dpgeo:dbscanspans", _params(points_layer, PERSON_FIELD="precinct",
                                                       MAX_POINTS_PER_PERSON=4), feedback=feedback)
    (x, _, _), kwargs = spans.calls[-1]
    person = kwargs["person"]
    assert kwargs["max_points_per_person"] == 4 and "sensitivity" not in kwargs
    assert person.name == "precinct" and len(person) == x.size == points_layer.featureCount()
    # aligned with the coordinates: the same feature order as the layer
    expected = [f["precinct"] for f in points_layer.getFeatures()]
    assert person.tolist() == expected
    processing_module.run("dpgeo:wavecluster", _params(points_layer, GRID_SIZE=64, PERSON_FIELD="neighborhood",
                                                       MAX_POINTS_PER_PERSON=2), feedback=feedback)
    _, kwargs = wave.calls[-1]
    assert kwargs["person"].name == "neighborhood" and kwargs["max_points_per_person"] == 2


def test_person_rows_without_geometry_or_person_are_skipped_in_step(fake_dpgeo, processing_module, feedback):
    spans, _ = fake_dpgeo
    rows = [("Point(-93.25 44.97)", 1), ("Point(-93.26 44.98)", None), (None, 2), ("Point(-93.27 44.99)", 3),
            ("Point(-93.28 45.0)", 1)]
    processing_module.run("dpgeo:dbscanspans", _params(_memory_points_with_person(rows), PERSON_FIELD="driver",
                                                       MAX_POINTS_PER_PERSON=1), feedback=feedback)
    (x, _, _), kwargs = spans.calls[-1]
    assert x.tolist() == [-93.25, -93.27, -93.28] and kwargs["person"].tolist() == [1, 3, 1]
    assert any("1 features without a person (NULL in 'driver') were skipped" in i for i in feedback.infos)
    assert any("1 features without a point geometry were skipped" in i for i in feedback.infos)
    # multipoints are decoded in bulk: the person ids must stay aligned, empty ones dropped with their id
    mrows = [("MultiPoint((-93.25 44.97))", 5), ("MultiPoint EMPTY", 6), ("MultiPoint((-93.26 44.98))", 7),
             ("MultiPoint((-93.27 44.99))", None)]
    processing_module.run("dpgeo:dbscanspans", _params(_memory_points_with_person(mrows, "MultiPoint"),
                                                       PERSON_FIELD="driver", MAX_POINTS_PER_PERSON=1),
                          feedback=feedback)
    (x, _, _), kwargs = spans.calls[-1]
    assert x.tolist() == [-93.25, -93.26] and kwargs["person"].tolist() == [5, 7]


@pytest.mark.parametrize("extra, message", [
    ({"PERSON_FIELD": "precinct"}, "also set 'Maximum points per person'"),
    ({"MAX_POINTS_PER_PERSON": 3}, "needs a person field"),
    ({"PERSON_FIELD": "precinct", "MAX_POINTS_PER_PERSON": 3, "MAX_POINTS_PER_RECORD": 2},
     "leave 'Maximum points per record' at 1"),
])
def test_person_parameter_mistakes_are_refused_before_reading(fake_dpgeo, processing_module, points_layer,
                                                              extra, message):
    from qgis.core import QgsProcessingException

    spans, _ = fake_dpgeo
    with pytest.raises(QgsProcessingException, match=message):
        processing_module.run("dpgeo:dbscanspans", _params(points_layer, **extra))
    assert spans.calls == []


def test_a_weak_epsilon_names_the_layer_so_and_one_above_the_range_is_refused(fake_dpgeo, processing_module,
                                                                             points_layer):
    """ε above the declared weak threshold (dpgeo.shared_params): the loaded layer's name says so; ε above the
    declared range is refused by the dialog's own check, before the library is called."""
    from dpgeo.shared_params import EPSILON_MAX, WEAK_EPSILON
    from qgis.core import QgsProcessingException, QgsProject

    spans, _ = fake_dpgeo
    res = processing_module.runAndLoadResults("dpgeo:dbscanspans", _params(points_layer, EPSILON=WEAK_EPSILON * 2))
    try:
        name = QgsProject.instance().mapLayer(res["OUTPUT"]).name()
        assert name == f"DP-DBSCAN cluster spans (ε={WEAK_EPSILON * 2}, differentially private, WEAK ε)", name
    finally:
        QgsProject.instance().removeAllMapLayers()
    n = len(spans.calls)
    with pytest.raises(QgsProcessingException):
        processing_module.run("dpgeo:dbscanspans", _params(points_layer, EPSILON=EPSILON_MAX * 1.5))
    assert len(spans.calls) == n
