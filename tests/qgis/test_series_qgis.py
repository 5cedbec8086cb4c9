"""Map series in real QGIS: the temporal controller animates a series, from the library's GeoPackage and from
the plugin's algorithm (time field, period, public bounds)."""

from __future__ import annotations

import json
import warnings

import pytest

pytestmark = pytest.mark.qgis


def _as_desktop_adds_it(path):
    """A layer of a GeoPackage loaded as QGIS desktop adds one (QgsAppLayerHandling.postProcessAddedLayer):
    created without its default style, then ``loadDefaultStyle``. (A plain ``QgsVectorLayer(path)`` applies the
    style inside its constructor and then resets the temporal properties to the provider's, which the desktop
    does not do.)"""
    from qgis.core import QgsVectorLayer

    options = QgsVectorLayer.LayerOptions()
    options.loadDefaultStyle = False
    layer = QgsVectorLayer(str(path), "series", "ogr", options)
    assert layer.isValid(), path
    _, ok = layer.loadDefaultStyle()
    assert ok
    return layer


def _in_range(layer, start, end):
    """Features the temporal controller draws for the range [start, end) (ISO 8601 UTC)."""
    from qgis.core import QgsDateTimeRange, QgsFeatureRequest, QgsVectorLayerTemporalContext
    from qgis.PyQt.QtCore import QDateTime, Qt

    rng = QgsDateTimeRange(QDateTime.fromString(start, Qt.ISODate), QDateTime.fromString(end, Qt.ISODate),
                           True, False)
    ctx = QgsVectorLayerTemporalContext()
    ctx.setLayer(layer)
    expr = layer.temporalProperties().createFilterString(ctx, rng)
    return [f["period"] for f in layer.getFeatures(QgsFeatureRequest().setFilterExpression(expr))]


def _check_temporal(layer, periods):
    from qgis.core import QgsCategorizedSymbolRenderer, QgsVectorLayerTemporalProperties

    tp = layer.temporalProperties()
    assert tp.isActive()
    assert tp.mode() == QgsVectorLayerTemporalProperties.ModeFeatureDateTimeStartAndEndFromExpressions
    assert (tp.startExpression(), tp.endExpression()) == ('to_datetime("period_start")', 'to_datetime("period_end")')
    assert layer.fields().field("period_start").typeName().lower().startswith("datetime")
    assert isinstance(layer.renderer(), QgsCategorizedSymbolRenderer)
    # each period's frame holds that period's features only (the end of a period is excluded)
    for p in periods:
        got = _in_range(layer, p["period_start"], p["period_end"])
        assert set(got) <= {p["label"]}, (p, got)


def test_a_series_geopackage_written_by_the_library_animates_in_qgis(qgis_app, sample_points, sample_study_area,
                                                                    tmp_path):
    import dpgeo

    path, _ = sample_points  # one layer of points with a text 'date' field (ISO 8601, UTC)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = dpgeo.dbscan_spans(path, epsilon=1.0, radius_m=200, min_points=60, domain=sample_study_area,
                                 time="date", period="quarter", period_start="2017-01-01", period_end="2018-01-01",
                                 timezone="America/Chicago", seed=1)
    out = res.to_file(tmp_path / "series.gpkg")
    layer = _as_desktop_adds_it(out)
    assert layer.featureCount() == len(res.layer) > 0
    _check_temporal(layer, res.metadata["periods"])
    spring = _in_range(layer, "2017-04-15T00:00:00Z", "2017-04-16T00:00:00Z")
    assert spring and set(spring) == {"2017-Q2"}


def test_the_algorithm_releases_a_series_that_animates(plugin, processing_module, sample_points, sample_study_area,
                                                       feedback, tmp_path):
    path, name = sample_points
    out = str(tmp_path / "series.gpkg")
    from qgis.PyQt.QtCore import QDate, QDateTime, QTime

    res = processing_module.run("dpgeo:dbscanspans", {
        "INPUT": f"{path}|layername={name}", "EPSILON": 1.0, "RADIUS": 200, "MIN_POINTS": 60,
        "STUDY_AREA_LAYER": sample_study_area, "TIME_FIELD": "date", "PERIOD": 4,  # quarter
        "PERIOD_START": QDateTime(QDate(2017, 1, 1), QTime(0, 0)),
        "PERIOD_END": QDateTime(QDate(2018, 1, 1), QTime(0, 0)), "TIMEZONE": "America/Chicago",
        "OUTPUT": out}, feedback=feedback)
    meta = json.loads(res["METADATA_JSON"])
    assert meta["series"]["period"] == "quarter" and meta["series"]["timezone"] == "America/Chicago"
    assert [p["label"] for p in meta["periods"]] == ["2017-Q1", "2017-Q2", "2017-Q3", "2017-Q4"]
    assert meta["differentially_private"] is True
    assert any("Map series" in line for line in feedback.infos)
    layer = _as_desktop_adds_it(out)
    _check_temporal(layer, meta["periods"])


def test_a_series_needs_its_bounds_and_both_time_and_period(plugin, processing_module, sample_points,
                                                           sample_study_area, tmp_path):
    from qgis.core import QgsProcessingException

    path, name = sample_points
    base = {"INPUT": f"{path}|layername={name}", "EPSILON": 1.0, "RADIUS": 200, "MIN_POINTS": 60,
            "STUDY_AREA_LAYER": sample_study_area, "OUTPUT": str(tmp_path / "x.gpkg")}
    with pytest.raises(QgsProcessingException, match="public start and end"):
        processing_module.run("dpgeo:dbscanspans", {**base, "TIME_FIELD": "date", "PERIOD": 3})
    with pytest.raises(QgsProcessingException, match="both a time field and a period"):
        processing_module.run("dpgeo:dbscanspans", {**base, "PERIOD": 3})
