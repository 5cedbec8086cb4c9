"""The level switch of the HTML map and the levels in the PNG (spans without a radius), in a real browser.

Debian's headless Chromium through playwright's Python API, as in test_webmap.py (its MapPage: nothing
reaches the network, page errors and CSP violations are recorded). ``DPGEO_REQUIRE_BROWSER=1`` turns a
missing browser into a failure.
"""

from __future__ import annotations

import os
import shutil
import warnings

import numpy as np
import pytest

from helpers import SAMPLE_AREA, SAMPLE_POINTS, browser_missing, launch_chromium
from test_webmap import DOCS_IMG, MAP_BG, PHONE, UPDATE, VIEW, MapPage, _blend, _has_colour

import dpgeo
from dpgeo.io import palette
from dpgeo.io.html import html_document, write_html
from dpgeo.io.html_levels import LEVEL_FILL_OPACITY, level_views

AUTO = {"epsilon": 1.0, "domain": str(SAMPLE_AREA)}


@pytest.fixture(scope="module")
def auto():
    """A reproducible release of the sample without a radius (seeded: not private), with its levels."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = dpgeo.dbscan_spans(str(SAMPLE_POINTS), seed=1, levels=True, **AUTO)
    assert r.levels is not None and len(r.levels) > 10
    return r


@pytest.fixture(scope="module")
def browser():
    why = browser_missing()
    if why:
        if os.environ.get("DPGEO_REQUIRE_BROWSER") == "1":
            pytest.fail(f"DPGEO_REQUIRE_BROWSER=1 but {why}")
        pytest.skip(why)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = launch_chromium(p)
        yield b
        b.close()


@pytest.fixture
def open_map(browser):
    pages = []

    def _open(path, viewport=VIEW):
        pages.append(MapPage(browser, path, viewport))
        return pages[-1]

    yield _open
    for p in pages:
        p.close()


def _drawn(m):
    """``[(level_id, class attribute)]`` of the level paths in the page, in drawing (DOM) order."""
    return m.page.evaluate("""() => {
        const layer = window.dpgeoLevels.layer();
        if (!layer) return [];
        const byPath = new Map(layer.getLayers().map(l => [l._path, l.feature.properties.level_id]));
        return Array.from(document.querySelectorAll('path.dp-level'))
            .map(p => [byPath.get(p), p.getAttribute('class')]);
    }""")


def _rect(m, sel):
    r = m.page.evaluate(f"(() => {{ const r = document.querySelector({sel!r}).getBoundingClientRect(); "
                        "return [r.left, r.top, r.right, r.bottom]; })()")
    return r


def _overlap(a, b):
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


# -- the views (no browser) -----------------------------------------------------------------

def test_views_show_the_clusters_that_exist_at_each_density_over_their_ancestors(auto):
    lv = auto.levels
    views = level_views(lv)
    assert views[0]["value"] == "all" and sorted(views[0]["ids"]) == sorted(lv["level_id"].tolist())
    assert [v["threshold"] for v in views[1:]] == sorted(set(lv["level"].tolist()))
    parent = dict(zip(lv["level_id"].tolist(), lv["parent_id"].astype("Float64").fillna(-1).astype(int).tolist()))
    depth = dict(zip(lv["level_id"].tolist(), lv["depth"].tolist()))
    low = dict(zip(lv["level_id"].tolist(), lv["level"].tolist()))
    top = dict(zip(lv["level_id"].tolist(), lv["level_top"].tolist()))
    has_child = {p for p in parent.values() if p >= 0}

    def ancestors(i):
        out = []
        while parent[i] >= 0:
            i = parent[i]
            out.append(i)
        return out

    for v in views[1:]:
        t, shown, ids = v["threshold"], v["shown"], v["ids"]
        assert shown, t
        for i in shown:  # exists at t: born at or below t, not yet split (or, a peak, not yet passed)
            assert low[i] <= t and (t < top[i] or (i not in has_child and t <= top[i]))
            assert not set(ancestors(i)) & set(shown)  # the clusters at one density are disjoint
        assert set(ids) == set(shown) | {a for i in shown for a in ancestors(i)}
        assert [depth[i] for i in ids] == sorted(depth[i] for i in ids)  # ancestors drawn first
    # the map's clusters are among the tree's
    assert set(lv["cluster_id"].dropna().astype(int)) == set(auto.layer["cluster_id"].tolist())


def test_map_without_levels_has_no_switch(auto):
    page = html_document(auto.layer, auto.metadata, basemap="none")
    assert "dpgeo-levels" not in page and "Density levels" not in page
    assert page.count("sha256-") == 2  # Leaflet and the map's own script
    page = html_document(auto.layer, auto.metadata, basemap="none", levels=auto.levels)
    assert 'id="dpgeo-level-switch"' in page and page.count("sha256-") == 3


def test_to_file_writes_the_switch_and_the_png_levels_when_asked(auto, tmp_path):
    from PIL import Image

    auto.to_file(tmp_path / "map.html", basemap="none")  # made with levels=True: the levels come along
    assert 'id="dpgeo-level-switch"' in (tmp_path / "map.html").read_text(encoding="utf-8")
    auto.to_file(tmp_path / "flat.html", basemap="none", levels=False)
    assert "dpgeo-level-switch" not in (tmp_path / "flat.html").read_text(encoding="utf-8")
    auto.to_file(tmp_path / "levels.png", levels=True)
    auto.to_file(tmp_path / "flat.png", levels=False)
    with_lv = np.asarray(Image.open(tmp_path / "levels.png").convert("RGB"))
    flat = np.asarray(Image.open(tmp_path / "flat.png").convert("RGB"))
    assert with_lv.shape != flat.shape or (with_lv != flat).any()  # another legend, another picture
    assert dpgeo.io.read_layer_metadata(tmp_path / "levels.png")["release_id"] == auto.metadata["release_id"]
    # what the PNG draws: every level, filled in its graduated colour, shallow ones first, then the clusters
    # outlined over them
    import matplotlib
    from matplotlib.colors import to_rgba

    from dpgeo.io.png import _figure

    with matplotlib.rc_context({"font.family": "sans-serif"}):
        ax = _figure(auto.layer, auto.metadata, None, 10.0, None, auto.levels).axes[0]
    faces = [tuple(p.get_facecolor()) for p in ax.patches]
    lv = auto.levels
    classes, _ = palette.level_classes(lv["level"].to_numpy(dtype=float))
    order = np.lexsort((lv["level_id"].to_numpy(), lv["depth"].to_numpy()))
    want = [to_rgba(palette.LEVEL_COLOURS[classes[k]], LEVEL_FILL_OPACITY) for k in order]
    assert faces[:len(lv)] == want
    assert len(faces) == len(lv) + len(auto.layer) and all(f[3] == 0 for f in faces[len(lv):])


# -- in the browser ------------------------------------------------------------------------

def test_switch_shows_the_map_every_level_and_each_density(auto, tmp_path, open_map):
    path = tmp_path / "map.html"
    write_html(auto.layer, path, auto.metadata, basemap="none", levels=auto.levels)
    m = open_map(path)
    lv = auto.levels
    views = level_views(lv)
    switch = m.page.locator("#dpgeo-level-switch")
    assert switch.is_visible()
    values = m.page.evaluate("Array.from(document.querySelectorAll('#dpgeo-level-switch option')).map(o => o.value)")
    assert values == ["flat"] + [v["value"] for v in views]
    # the flat map first
    assert m.page.get_attribute("html", "data-dpgeo-level") == "flat"
    assert m.page.locator("path.dp-cluster").count() == len(auto.layer) and m.page.locator("path.dp-level").count() == 0
    classes, _ = palette.level_classes(lv["level"].to_numpy(dtype=float))
    colour = dict(zip(lv["level_id"].tolist(), classes.tolist()))
    # every level, nested: shallow ones drawn first, each in its graduated colour
    switch.select_option("all")
    drawn = _drawn(m)
    assert [i for i, _ in drawn] == views[0]["ids"]
    assert m.page.locator("path.dp-cluster").count() == 0  # the flat map is off
    assert all(f"dp-level dp-lv{colour[i]}" in cls and "dp-level-on" not in cls for i, cls in drawn)
    last = colour[drawn[-1][0]]
    fill = m.page.evaluate(f"getComputedStyle(document.querySelector('path.dp-lv{last}')).fill")
    assert fill == "rgb({}, {}, {})".format(*palette.hex_to_rgb(palette.LEVEL_COLOURS[last]))
    assert m.page.locator(".dp-level-ramp").is_visible()
    assert not m.page.locator(".leaflet-tooltip.dp-label").first.is_visible()  # the map's labels are the map's
    # one density: the clusters there, outlined, over the levels they are nested in
    for v in (views[1], views[len(views) // 2], views[-1]):
        switch.select_option(v["value"])
        drawn = _drawn(m)
        assert [i for i, _ in drawn] == v["ids"], v["value"]
        assert sorted(i for i, cls in drawn if "dp-level-on" in cls) == sorted(v["shown"])
        assert f"{len(v['shown'])} cluster" in m.page.inner_text("#dpgeo-levels-shown")
    # a level's popup says what it is
    p = m.page.evaluate("""() => {
        const ls = window.dpgeoLevels.layer().getLayers().filter(l => l._path.classList.contains('dp-level-on'));
        for (const l of ls) {
            const r = l._path.getBoundingClientRect();
            for (let i = 1; i < 8; i++) for (let j = 1; j < 8; j++) {
                const x = r.left + r.width * i / 8, y = r.top + r.height * j / 8;
                if (document.elementFromPoint(x, y) === l._path) return [x, y, l.feature.properties];
            }
        }
        return null;
    }""")
    assert p is not None
    m.page.mouse.click(p[0], p[1])
    m.page.wait_for_selector(".leaflet-popup-content .dp-level-popup", timeout=5000)
    text = m.page.inner_text(".leaflet-popup-content")
    assert f"Level {p[2]['level_id']}" in text and "density" in text and str(p[2]["dp_count"]) in text
    # and back to the map
    switch.select_option("flat")
    assert m.page.locator("path.dp-cluster").count() == len(auto.layer) and m.page.locator("path.dp-level").count() == 0
    assert m.page.locator(".leaflet-tooltip.dp-label").first.is_visible()
    assert m.other_requests() == [] and m.errors == [] and m.page.evaluate("window.cspViolations") == []


def test_privacy_panel_says_what_the_levels_are(auto, tmp_path, open_map):
    path = tmp_path / "map.html"
    write_html(auto.layer, path, auto.metadata, basemap="none", levels=auto.levels)
    m = open_map(path)
    text = m.page.inner_text("#dpgeo-privacy")
    assert "Density levels." in text and f"{len(auto.levels)} nested clusters" in text
    assert "same noisy histogram" in text and "no further privacy cost" in text
    assert f"within {auto.metadata['gamma_all_levels']:g} of its true value" in text
    assert m.errors == []


def test_switch_on_a_phone(auto, tmp_path, open_map):
    path = tmp_path / "map.html"
    write_html(auto.layer, path, auto.metadata, levels=auto.levels)
    m = open_map(path, viewport=PHONE)
    switch = m.page.locator("#dpgeo-level-switch")
    assert switch.is_visible()
    panel = _rect(m, "#dpgeo-levels")
    assert 0 <= panel[0] and panel[2] <= PHONE["width"] and 0 <= panel[1] and panel[3] <= PHONE["height"]
    size = m.page.evaluate("parseFloat(getComputedStyle(document.querySelector('#dpgeo-level-switch')).fontSize)")
    assert size >= 12  # readable without zooming
    for other in ("#dpgeo-privacy", "#dpgeo-legend", ".leaflet-control-zoom"):  # collapsed panels, the zoom buttons
        assert not _overlap(panel, _rect(m, other)), other
    switch.select_option("all")
    panel = _rect(m, "#dpgeo-levels")  # with its legend of colours, still small and away from the centre
    assert panel[2] <= PHONE["width"]
    assert (panel[2] - panel[0]) * (panel[3] - panel[1]) < 0.15 * PHONE["width"] * PHONE["height"]
    cx, cy = PHONE["width"] / 2, PHONE["height"] / 2
    assert not (panel[0] <= cx <= panel[2] and panel[1] <= cy <= panel[3])
    assert m.page.locator("path.dp-level").count() == len(auto.levels)
    m.page.click("#dpgeo-legend > summary")  # the legend opened does not cover the switch
    assert not _overlap(_rect(m, "#dpgeo-levels"), _rect(m, "#dpgeo-legend"))
    assert m.errors == [] and m.page.evaluate("window.cspViolations") == []


def test_level_outline_colours_are_qt_darker_130():
    QtGui = pytest.importorskip("PyQt5.QtGui", reason="needs PyQt5 (installed with python3-qgis) for QColor")
    assert [QtGui.QColor(c).darker(130).name() for c in palette.LEVEL_COLOURS] == list(palette.LEVEL_OUTLINE_COLOURS)


def test_screenshot_shows_the_graduated_levels(auto, tmp_path, open_map):
    """Every level at once: the light and the dark ends of the ramp are on the screen (docs/img/webmap_levels.png,
    rewritten with DPGEO_UPDATE_SCREENSHOTS=1)."""
    from PIL import Image

    path = tmp_path / "map.html"
    write_html(auto.layer, path, auto.metadata, basemap="none", levels=auto.levels)
    m = open_map(path)
    m.page.select_option("#dpgeo-level-switch", "all")
    m.page.wait_for_timeout(200)
    shot = tmp_path / "levels.png"
    m.page.screenshot(path=str(shot))
    img = np.asarray(Image.open(shot).convert("RGB"))
    assert _has_colour(img, _blend(palette.LEVEL_COLOURS[0], MAP_BG, LEVEL_FILL_OPACITY), tol=8)
    assert m.errors == []
    if UPDATE:
        shutil.copyfile(shot, DOCS_IMG / "webmap_levels.png")
    ref = np.asarray(Image.open(DOCS_IMG / "webmap_levels.png").convert("RGB"))  # the picture in the docs
    assert ref.shape == img.shape and _has_colour(ref, MAP_BG)
