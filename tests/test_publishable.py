"""Outputs a city could publish as they come: count classes chosen on the release (clear of the noise, the peak
on top), neighbours in different colours, labels that never run together, legends that count right — in the
PNG and the HTML (the QGIS style: tests/qgis/test_gpkg_styles_qgis.py; the page in Chromium: tests/test_webmap.py)."""

from __future__ import annotations

import json
import re
import warnings

import geopandas as gpd
import numpy as np
import pytest
import shapely

from helpers import SAMPLE_AREA, SAMPLE_POINTS

import dpgeo
from dpgeo.io import palette
from dpgeo.io.html import html_document

MD = {"mechanism": "test layer", "differentially_private": True, "epsilon": 1.0}


@pytest.fixture(scope="module")
def sample_heat():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return dpgeo.heat(str(SAMPLE_POINTS), epsilon=1.0, h3_resolution=9, domain=str(SAMPLE_AREA))


def test_sample_heat_classes_show_the_peak_clear_of_the_noise(sample_heat):
    """The sample's H3 heat layer: five classes, the lowest the counts within the noise of an empty cell, the top
    one a few cells holding the peak (not "31–993" beside a quiet street), every limit at least the noise's
    interval above the one below."""
    layer = sample_heat.layer
    counts = layer["dp_count"].to_numpy()
    h = palette.count_noise_halfwidth(layer)
    assert h > 0
    c = palette.count_classes(counts, noise_halfwidth=h)
    assert len(c.lower) == 5, c
    assert c.upper[0] == int(h)  # lowest class: within the noise of 0
    assert c.upper[-1] == counts.max() and (counts >= c.lower[-1]).sum() <= 0.05 * counts.size  # the peak alone
    assert (np.diff(c.lower[1:]) >= 2 * h).all()  # every limit clear of the noise
    assert "no privacy cost" in c.note
    fills, _, idx, legend, title, note = palette.layer_style(layer, sample_heat.metadata)
    assert int(idx[np.argmax(counts)]) == len(palette.SEQUENTIAL_COLOURS) - 1  # the peak in the darkest colour
    assert len(legend) == 5 and note == c.note


def test_fewer_classes_only_with_the_reason():
    counts = [0, 2, 3, 5, 6, 8, 9, 11, 14, 15]
    c = palette.count_classes(counts, noise_halfwidth=5)  # a wide noise: limits merge
    assert len(c.lower) < 5 and "not 5" in c.note and "noise (±5)" in c.note
    assert (np.diff(c.lower[1:]) >= 10).all()
    c = palette.count_classes([0, 0, 4])  # no noise, but two values above zero
    assert len(c.lower) < 5 and "too few values" in c.note
    assert palette.band_note({"bands_requested": 5}, 3).startswith("3 bands, not 5: the noise")


def _row(n, size=100.0, gap=0.0):
    return gpd.GeoSeries([shapely.box(i * (size + gap), 0, i * (size + gap) + size, size) for i in range(n)],
                         crs=32615)


def _clusters(n, **kw):
    return gpd.GeoDataFrame({"cluster_id": np.arange(1, n + 1), "dp_count": 700 + np.arange(n) * 37 % 300,
                             "dp_count_low": 600, "dp_count_high": 1100}, geometry=_row(n, **kw))


def test_touching_clusters_never_share_a_colour_in_html_and_png():
    """Colours by rank repeated every 12, so clusters 1 and 13 of a row of touching clusters shared one."""
    from dpgeo.io.png import _figure

    g = _clusters(33)
    page = html_document(g, MD, basemap="none")
    cfg = json.loads(re.search(r'id="dpgeo-config">(.*?)</script>', page, re.S).group(1))
    colour = cfg["colourOf"]
    assert all(colour[str(i)] != colour[str(i + 1)] for i in range(1, 33))
    assert len(set(colour.values())) > 3  # the palette is spread, not two colours alternating
    fig = _figure(g, MD, None, 10.0, None)
    faces = [tuple(p.get_facecolor()) for p in fig.axes[0].patches][:33]
    assert all(faces[i] != faces[i + 1] for i in range(32))


def test_legends_count_what_they_leave_out():
    from dpgeo.io.png import MAX_LEGEND_ROWS as PNG_ROWS, _figure
    from dpgeo.io.html import MAX_LEGEND_ROWS as HTML_ROWS

    g = _clusters(33)
    texts = [t.get_text() for t in _figure(g, MD, None, 10.0, None).legends[0].get_texts()]
    assert f"… and {33 - PNG_ROWS} more clusters" in " ".join(texts)  # 13 unlisted of 33 with 20 listed
    assert f"… and {33 - HTML_ROWS} more clusters" in html_document(g, MD, basemap="none")


def test_png_labels_never_run_together():
    """Downtown's small clusters side by side: labels that would overlap are moved beside or dropped."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from dpgeo.io.png import _figure

    g = _clusters(30, size=20.0, gap=2.0)  # narrow clusters: their labels are wider than they are
    fig = _figure(g, MD, None, 10.0, None)
    FigureCanvasAgg(fig).draw()
    r = fig.canvas.get_renderer()
    boxes = [t.get_window_extent(r) for t in fig.axes[0].texts if re.fullmatch(r"\d+", t.get_text())]
    assert 0 < len(boxes) < 30
    assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:])


# -- messages in each layer's and each front end's own words ---------------------------------------------------

def test_a_decimal_comma_csv_says_so(tmp_path, capsys):
    from dpgeo.cli import main

    p = tmp_path / "comma.csv"
    p.write_text("id;lon;lat\n" + "".join(f"{i};-93,{2651 + i};44,{9778 + i}\n" for i in range(30)))
    code = main(["spans", str(p), "-o", str(tmp_path / "c.gpkg"), "--epsilon", "1", "--radius", "100",
                 "--min-points", "5", "--domain", str(SAMPLE_AREA)])
    err = capsys.readouterr().err
    assert code == 2 and "30 with a decimal comma in a coordinate" in err and "point for decimals" in err
    assert not (tmp_path / "c.gpkg").exists()


def test_command_line_errors_name_command_line_options(tmp_path, capsys):
    from dpgeo.cli import main

    code = main(["spans", str(SAMPLE_POINTS), "-o", str(tmp_path / "x.gpkg"), "--epsilon", "1", "--radius", "100",
                 "--domain", str(SAMPLE_AREA)])
    err = capsys.readouterr().err
    assert code == 2 and "--radius and --min-points" in err
    assert "radius_m" not in err and "min_points" not in err


def test_bands_and_cells_speak_of_bands_and_cells(sample_heat, tmp_path, capsys):
    from dpgeo.cli import main
    from dpgeo.io.statement import privacy_statement

    counts = dict(privacy_statement(sample_heat.metadata).items)["Counts"]
    assert "of the cell" in counts and "cluster" not in counts
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bands = dpgeo.heat(str(SAMPLE_POINTS), epsilon=1.0, h3_resolution=9, bands=5, domain=str(SAMPLE_AREA))
    src = bands.to_file(tmp_path / "bands.gpkg")
    assert main(["export", str(src), "-o", str(tmp_path / "bands.geojson")]) == 0
    err = capsys.readouterr().err
    assert f"{len(bands.layer)} band" in err and "cluster" not in err
    assert "band's cells" in dict(privacy_statement(bands.metadata).items)["Counts"]


def test_series_panels_labels_never_run_together():
    """The small multiples of a series place their labels the same way (one panel per period)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from dpgeo.io.png_series import series_figure

    g = _clusters(20, size=20.0, gap=2.0)
    g["period"] = ["2017-01"] * 10 + ["2017-02"] * 10
    md = dict(MD, periods=[{"label": "2017-01"}, {"label": "2017-02"}])
    fig = series_figure(g, md, None, 10.0, None)
    FigureCanvasAgg(fig).draw()
    r = fig.canvas.get_renderer()
    for ax in fig.axes:
        boxes = [t.get_window_extent(r) for t in ax.texts if re.fullmatch(r"\d+", t.get_text())]
        assert 0 < len(boxes) <= 10
        assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:])


def test_cli_writes_both_layers_into_one_styled_geopackage(tmp_path, capsys):
    """--levels: the map and its tree of levels, two layers of one GeoPackage, each with its QGIS style."""
    import sqlite3

    from dpgeo.cli import main

    out = tmp_path / "auto.gpkg"
    assert main(["spans", str(SAMPLE_POINTS), "-o", str(out), "--epsilon", "1", "--levels", "--domain",
                 str(SAMPLE_AREA)]) == 0
    with sqlite3.connect(out) as conn:
        layers = {r[0] for r in conn.execute("SELECT table_name FROM gpkg_contents WHERE data_type = 'features'")}
        styles = dict(conn.execute("SELECT f_table_name, styleQML FROM layer_styles WHERE useAsDefault = 1"))
    assert layers == {"auto", "auto_levels"} and set(styles) == layers
    assert 'attr="cluster_id"' in styles["auto"] and 'attr="level"' in styles["auto_levels"]


# -- the sample as a real city ----------------------------------------------------------------------------------

CITY = SAMPLE_AREA.parent / "minneapolis_city_limits.geojson"


def test_the_sample_carries_the_city_limits_with_source_and_licence():
    area = gpd.read_file(CITY)
    assert len(area) == 1 and area.geometry.iloc[0].geom_type == "Polygon"
    km2 = float(area.to_crs(32615).area.iloc[0]) / 1e6
    box_km2 = float(gpd.read_file(SAMPLE_AREA).to_crs(32615).area.iloc[0]) / 1e6
    assert 140 < km2 < 160 and km2 < 0.75 * box_km2  # the city, not its bounding box
    readme = " ".join((SAMPLE_AREA.parent / "README.md").read_text().split())
    assert "minneapolis_city_limits.geojson" in readme and "Licence" in readme and "Department of Education" in readme
    from helpers import ROOT

    for doc in ("README.md", "docs/heat.md"):
        assert "minneapolis_city_limits.geojson" in (ROOT / doc).read_text()
    assert "minneapolis_city_limits.geojson" in (ROOT / "dev" / "run-sample").read_text()


def test_hot_spots_over_the_city_limits_have_no_cold_suburbs():
    """Over the rectangle, the land outside the city along its edges came out as cold spots (about 1,060 cold
    cells at ε = 1 against about 600 over the city limits); a difference of hundreds of cells, so this fails
    by chance far less than once in a million runs."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        kw = dict(epsilon=1.0, cell_m=250, radius_m=400, fdr=True)
        box = dpgeo.hotspots(str(SAMPLE_POINTS), domain=str(SAMPLE_AREA), **kw).layer
        city = dpgeo.hotspots(str(SAMPLE_POINTS), domain=str(CITY), **kw).layer
    cold_box, cold_city = int((box["gi_bin"] < 0).sum()), int((city["gi_bin"] < 0).sum())
    assert cold_city < cold_box - 200, (cold_city, cold_box)
    limits = gpd.read_file(CITY).to_crs(city.crs).geometry.iloc[0]
    assert city.geometry.intersects(limits).all()  # every cell of the map touches the city


@pytest.mark.parametrize("n", [20, 50])  # 400 clusters (DSATUR order) and 2,500 (by degree)
def test_a_grid_of_touching_clusters_keeps_neighbours_apart(n):
    boxes = [shapely.box(i, j, i + 1, j + 1) for i in range(n) for j in range(n)]  # 8 neighbours each
    idx = palette.colour_index(np.arange(n * n), boxes)
    i, j = palette.neighbour_pairs(boxes)
    assert len(i) > 3 * n * n and (idx[i] != idx[j]).all()
