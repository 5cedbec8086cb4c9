"""Heat layers and hot spots in real QGIS: processing.run("dpgeo:heat") and ("dpgeo:hotspots") with the real dpgeo
library on the sample layer, their styles, metadata and ledger records."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.qgis

CELL_FIELDS = ["cell_id", "h3", "dp_count", "dp_count_low", "dp_count_high", "dp_count_raw"]


def _meta(layer):
    return json.loads(layer.metadata().abstract().split("dpgeo metadata (JSON):\n", 1)[1])


def _records(release_id):
    from dpgeo.budget import Ledger

    return [r for b in Ledger().history() for r in b.releases if r.release_id == release_id]


def test_heat_on_h3_cells_with_a_graduated_style(plugin, processing_module, sample_points, sample_study_area,
                                                 feedback, tmp_path):
    from qgis.core import QgsGraduatedSymbolRenderer, QgsVectorLayer

    from dpgeo.io import palette

    path, name = sample_points
    out = str(tmp_path / "heat.gpkg")
    res = processing_module.run("dpgeo:heat", {
        "INPUT": f"{path}|layername={name}", "EPSILON": 1.0, "H3_RESOLUTION": 8,
        "STUDY_AREA_LAYER": sample_study_area, "OUTPUT": out}, feedback=feedback)
    assert res["DIFFERENTIALLY_PRIVATE"] is True
    layer = QgsVectorLayer(out, "heat", "ogr")  # style and metadata are in the GeoPackage
    assert layer.isValid()
    assert [f.name() for f in layer.fields() if f.name() != "fid"] == CELL_FIELDS
    meta = _meta(layer)
    assert meta["method"] == "dp_heat" and meta["cells"] == "H3" and meta["h3_resolution"] == 8
    assert layer.featureCount() == meta["n_cells"] == res["N_CLUSTERS"]
    assert all(len(f["h3"]) == 15 and f["dp_count"] >= 0 for f in layer.getFeatures())
    # graduated on dp_count with the library's classes and colours
    r = layer.renderer()
    assert isinstance(r, QgsGraduatedSymbolRenderer) and r.classAttribute() == "dp_count"
    counts = [f["dp_count"] for f in layer.getFeatures()]
    h = max(f["dp_count_high"] - f["dp_count"] for f in layer.getFeatures() if f["dp_count"] > 0)
    lower, upper, _, _ = palette.count_classes(counts, noise_halfwidth=h)
    assert [(rg.lowerValue(), rg.upperValue()) for rg in r.ranges()] == [(a - 0.5, b + 0.5) for a, b in
                                                                          zip(lower, upper)]
    assert r.ranges()[-1].symbol().color().name() == palette.SEQUENTIAL_COLOURS[-1]  # the peak in the darkest
    # the classes of the release: five, the lowest within the noise of an empty cell, the top one a peak
    assert len(r.ranges()) == 5 and upper[0] == int(h)
    assert sum(c >= lower[-1] for c in counts) <= 0.05 * len(counts) and max(counts) == upper[-1]
    rec = _records(meta["release_id"])
    assert len(rec) == 1 and rec[0].mechanism == "dp-heat" and rec[0].status == "completed"


def test_density_bands_of_square_cells(plugin, processing_module, sample_points, sample_study_area, feedback):
    from qgis.core import QgsCategorizedSymbolRenderer

    path, name = sample_points
    res = processing_module.run("dpgeo:heat", {
        "INPUT": f"{path}|layername={name}", "EPSILON": 1.0, "CELL_SIZE": 250.0, "BANDS": 4,
        "STUDY_AREA_LAYER": sample_study_area, "OUTPUT": "TEMPORARY_OUTPUT"}, feedback=feedback)
    layer = res["OUTPUT"]
    meta = json.loads(res["METADATA_JSON"])
    assert meta["method"] == "dp_heat_bands" and 1 <= layer.featureCount() == meta["bands"] <= 4
    assert [f["band"] for f in layer.getFeatures()] == list(range(1, layer.featureCount() + 1))
    layer.setName("bands")
    from dpgeo_qgis.style import style_layer

    assert style_layer(layer, "heat")
    r = layer.renderer()
    assert isinstance(r, QgsCategorizedSymbolRenderer) and r.classAttribute() == "band"
    assert len(r.categories()) == layer.featureCount()
    assert _records(meta["release_id"])[0].mechanism == "dp-heat-bands"


def test_hotspots_with_the_seven_class_palette(plugin, processing_module, sample_points, sample_study_area,
                                               feedback, tmp_path):
    from qgis.core import QgsCategorizedSymbolRenderer, QgsVectorLayer

    from dpgeo.io import palette

    path, name = sample_points
    out = str(tmp_path / "hot.gpkg")
    res = processing_module.run("dpgeo:hotspots", {
        "INPUT": f"{path}|layername={name}", "EPSILON": 1.0, "CELL_SIZE": 250.0, "RADIUS": 400.0, "FDR": True,
        "STUDY_AREA_LAYER": sample_study_area, "OUTPUT": out}, feedback=feedback)
    layer = QgsVectorLayer(out, "hot", "ogr")
    meta = _meta(layer)
    assert meta["method"] == "dp_hotspots" and meta["hotspot_fdr"] is True
    assert meta["hotspot_neighbourhood"] == "cells whose centre is within 400 m"
    names = [f.name() for f in layer.fields() if f.name() != "fid"]
    assert names == [c for c in CELL_FIELDS if c != "h3"] + ["gi_z", "gi_p", "gi_bin", "hotspot"]
    bins = [f["gi_bin"] for f in layer.getFeatures()]
    assert max(bins) == 3  # the sample's downtown is a hot spot at 99%
    r = layer.renderer()
    assert isinstance(r, QgsCategorizedSymbolRenderer) and r.classAttribute() == "gi_bin"
    assert [(str(c.value()), c.label(), c.symbol().color().name()) for c in r.categories()] == \
        [(str(k), palette.HOTSPOT_LABELS[k], palette.HOTSPOT_COLOURS[k]) for k in range(3, -4, -1)]
    # every cell drawn in its class's colour (the style stored in the GeoPackage, as QGIS reloads it)
    from qgis.core import QgsRenderContext

    ctx = QgsRenderContext()
    r.startRender(ctx, layer.fields())
    try:
        colours = {(f["gi_bin"], r.symbolForFeature(f, ctx).color().name()) for f in layer.getFeatures()}
    finally:
        r.stopRender(ctx)
    assert colours == {(b, palette.HOTSPOT_COLOURS[b]) for b in set(bins)}
    rec = _records(meta["release_id"])
    assert len(rec) == 1 and rec[0].mechanism == "dp-hotspots"
    assert res["DIFFERENTIALLY_PRIVATE"] is True


def test_cells_given_twice_are_refused_before_reading(plugin, processing_module, sample_points, sample_study_area,
                                                      feedback):
    from qgis.core import QgsProcessingException

    path, name = sample_points
    with pytest.raises(QgsProcessingException, match="at most one"):
        processing_module.run("dpgeo:heat", {
            "INPUT": f"{path}|layername={name}", "EPSILON": 1.0, "CELL_SIZE": 250.0, "H3_RESOLUTION": 8,
            "STUDY_AREA_LAYER": sample_study_area, "OUTPUT": "TEMPORARY_OUTPUT"}, feedback=feedback)


def test_hotspots_without_a_cell_size_choose_their_cells(plugin, processing_module, sample_points,
                                                         sample_study_area, feedback, tmp_path):
    from qgis.core import QgsVectorLayer

    path, name = sample_points
    out = str(tmp_path / "hot.gpkg")
    res = processing_module.run("dpgeo:hotspots", {
        "INPUT": f"{path}|layername={name}", "EPSILON": 1.0, "STUDY_AREA_LAYER": sample_study_area,
        "OUTPUT": out}, feedback=feedback)
    assert res["DIFFERENTIALLY_PRIVATE"] is True
    meta = _meta(QgsVectorLayer(out, "hot", "ogr"))
    assert meta["cells_chosen"] is True and meta["cells"] == "square" and meta["cell_width_m"] > 100
