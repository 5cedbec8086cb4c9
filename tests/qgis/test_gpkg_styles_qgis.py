"""The style inside every GeoPackage the library writes, read by real QGIS 3.22 as the layer's default style:
clusters, count cells, density bands, hot spots, density levels and a series, each with its renderer and classes,
the same as the plugin applies (the plugin reads the library's QML)."""

from __future__ import annotations

import geopandas as gpd
import numpy as np
import pandas as pd
import pytest
import shapely

from dpgeo.io import palette, write_layer

pytestmark = pytest.mark.qgis

MD = {"mechanism": "test layer", "differentially_private": True, "epsilon": 1.0}


def _open(path, layer=None):
    from qgis.core import QgsVectorLayer

    uri = str(path) if layer is None else f"{path}|layername={layer}"
    v = QgsVectorLayer(uri, "x", "ogr")  # a plain open applies the GeoPackage's default style
    assert v.isValid()
    return v


def _boxes(n, crs=32615):
    return gpd.GeoSeries([shapely.box(480000 + 100 * i, 4980000, 480100 + 100 * i, 4980100) for i in range(n)],
                         crs=crs)


def _fill(symbol):
    return symbol.color().name()


def test_clusters_categorised_labelled_and_neighbours_apart(qgis_app, tmp_path):
    from qgis.core import QgsCategorizedSymbolRenderer

    # 14 touching squares in a row: with colours by rank, clusters 1 and 13 would share a colour
    g = gpd.GeoDataFrame({"cluster_id": np.arange(1, 15), "dp_count": np.arange(14) * 10 + 5}, geometry=_boxes(14))
    path = write_layer(g, tmp_path / "c.gpkg", MD)
    v = _open(path)
    r = v.renderer()
    assert isinstance(r, QgsCategorizedSymbolRenderer) and r.classAttribute() == "cluster_id"
    cats = {int(c.value()): _fill(c.symbol()) for c in r.categories()}
    assert sorted(cats) == list(range(1, 15))
    assert all(cats[i] != cats[i + 1] for i in range(1, 14))  # touching clusters differ
    assert v.labelsEnabled() and v.labeling().settings().fieldName == "dp_count"


def test_counts_graduated_in_classes_from_the_release(qgis_app, tmp_path):
    from qgis.core import QgsGraduatedSymbolRenderer

    counts = np.r_[np.zeros(60, int), np.round(np.geomspace(1, 993, 200)).astype(int)]  # heavy-tailed, as a city
    h = 6
    g = gpd.GeoDataFrame({"cell_id": np.arange(counts.size), "dp_count": counts,
                          "dp_count_low": np.maximum(counts - h, 0), "dp_count_high": counts + h,
                          "dp_count_raw": counts}, geometry=_boxes(counts.size))
    v = _open(write_layer(g, tmp_path / "h.gpkg", MD))
    r = v.renderer()  # owned by the layer
    assert isinstance(r, QgsGraduatedSymbolRenderer) and r.classAttribute() == "dp_count"
    ranges = r.ranges()
    c = palette.count_classes(counts, noise_halfwidth=h)
    assert len(ranges) == len(c.lower) == 5
    assert ranges[0].lowerValue() < 0 < h < ranges[0].upperValue()  # the lowest class: within the noise of 0
    top = ranges[-1]
    assert top.lowerValue() < 993 <= top.upperValue() and (counts > top.lowerValue()).sum() < 20  # the peak
    assert _fill(top.symbol()) == palette.SEQUENTIAL_COLOURS[-1]


def test_bands_hotspots_and_levels(qgis_app, tmp_path):
    from qgis.core import QgsCategorizedSymbolRenderer, QgsGraduatedSymbolRenderer

    bands = gpd.GeoDataFrame({"band": [1, 2, 3], "density_low": [1.0, 5.0, 20.0], "density_high": [5.0, 20.0, None],
                              "dp_count": [100, 200, 300]}, geometry=_boxes(3))
    v = _open(write_layer(bands, tmp_path / "b.gpkg", MD))
    r = v.renderer()
    assert isinstance(r, QgsCategorizedSymbolRenderer) and r.classAttribute() == "band"
    assert [int(c.value()) for c in r.categories()] == [1, 2, 3]
    assert "band 3" in r.categories()[2].label()

    hot = gpd.GeoDataFrame({"gi_bin": [3, 0, -2], "dp_count": [9, 1, 0]}, geometry=_boxes(3))
    v = _open(write_layer(hot, tmp_path / "s.gpkg", MD))
    r = v.renderer()
    assert isinstance(r, QgsCategorizedSymbolRenderer) and r.classAttribute() == "gi_bin"
    assert [c.label() for c in r.categories()][:2] == ["hot spot 99%", "hot spot 95%"]
    assert _fill(r.categories()[0].symbol()) == palette.HOTSPOT_COLOURS[3]

    clusters = gpd.GeoDataFrame({"cluster_id": [1], "dp_count": [50]}, geometry=_boxes(1))
    levels = gpd.GeoDataFrame({"level_id": [1, 2, 3], "parent_id": pd.array([pd.NA, 1, 2], dtype="Int64"),
                               "depth": [0, 1, 2], "level": [4.0, 9.0, 30.0], "dp_count": [80, 50, 20]},
                              geometry=_boxes(3))
    path = write_layer(clusters, tmp_path / "l.gpkg", MD, levels=levels)
    v = _open(path, "l")
    assert isinstance(v.renderer(), QgsCategorizedSymbolRenderer)
    v = _open(path, "l_levels")
    r = v.renderer()
    assert isinstance(r, QgsGraduatedSymbolRenderer) and r.classAttribute() == "level"
    assert len(r.ranges()) == 3 and r.orderByEnabled()


def test_a_series_keeps_its_time_and_gets_its_colours(qgis_app, tmp_path):
    from qgis.core import QgsCategorizedSymbolRenderer, QgsGraduatedSymbolRenderer

    t0, t1, t2 = (pd.Timestamp(f"2017-0{m}-01", tz="UTC") for m in (1, 2, 3))
    g = gpd.GeoDataFrame({"period": ["2017-01", "2017-02"] * 3, "period_start": [t0, t1] * 3,
                          "period_end": [t1, t2] * 3, "cell_id": np.arange(6),
                          "dp_count": [0, 3, 40, 90, 7, 400], "dp_count_low": [0, 0, 34, 84, 1, 394],
                          "dp_count_high": [6, 9, 46, 96, 13, 406], "dp_count_raw": [-2, 3, 40, 90, 7, 400]},
                         geometry=_boxes(6))
    v = _open(write_layer(g, tmp_path / "t.gpkg", MD))
    assert isinstance(v.renderer(), QgsGraduatedSymbolRenderer)
    clusters = gpd.GeoDataFrame({"period": ["2017-01", "2017-02"], "period_start": [t0, t1],
                                 "period_end": [t1, t2], "cluster_id": [1, 1], "dp_count": [5, 6]},
                                geometry=_boxes(2))
    v = _open(write_layer(clusters, tmp_path / "tc.gpkg", MD))
    assert isinstance(v.renderer(), QgsCategorizedSymbolRenderer)
