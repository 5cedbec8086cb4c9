"""Web maps: the self-contained HTML map in a real browser, the PNG, and GeoJSON as RFC 7946.

The browser tests open the HTML from a ``file://`` URL in Debian's headless
Chromium, driven by playwright's Python API (never a downloaded browser), and
skip with the reason when either is missing. They never reach the network:
OpenStreetMap's tiles are answered from here (and recorded), any other remote
request is aborted and fails the test. ``DPGEO_REQUIRE_BROWSER=1``
(set by CI) turns that skip into a failure. ``DPGEO_UPDATE_SCREENSHOTS=1``
rewrites the pictures kept in docs/img (``webmap.png``, ``webmap_static.png``)
instead of comparing against them.
"""

from __future__ import annotations

import ast
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import warnings

import numpy as np
import pytest
import shapely

from helpers import ROOT, SAMPLE_AREA, SAMPLE_POINTS, browser_missing, launch_chromium

import dpgeo
from dpgeo.errors import DpgeoError, InputError, OutputError, ParameterError
from dpgeo.io import geojson_collection, read_layer_metadata, write_layer
from dpgeo.io import palette
from dpgeo.io.html import html_document, leaflet_version, study_area_outline, write_html
from dpgeo.io.png import write_png

DOCS_IMG = ROOT / "docs" / "img"
UPDATE = os.environ.get("DPGEO_UPDATE_SCREENSHOTS") == "1"
SPANS = dict(epsilon=1.0, radius_m=150, min_points=40, domain=str(SAMPLE_AREA))
VIEW = {"width": 1200, "height": 800}
#: A phone's screen (CSS pixels).
PHONE = {"width": 390, "height": 844}
#: Background of the map without a basemap (#map in the page's CSS).
MAP_BG = (0xF3, 0xF3, 0xEF)


# -- fixtures --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def seeded():
    """A reproducible release of the sample (marked NOT private: fixed seed)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return dpgeo.dbscan_spans(str(SAMPLE_POINTS), seed=3, **SPANS)


@pytest.fixture(scope="module")
def private():
    """A real private release of the sample (OS-seeded noise), as a data team would publish it."""
    return dpgeo.dbscan_spans(str(SAMPLE_POINTS), **SPANS)


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


def _tile_png():
    from PIL import Image
    import io

    buf = io.BytesIO()
    Image.new("RGB", (256, 256), (200, 220, 240)).save(buf, format="PNG")
    return buf.getvalue()


class MapPage:
    """A page that opened an HTML map, with what it requested and any error or CSP violation.

    Nothing reaches the network: OpenStreetMap's tiles are answered with a plain tile (``osm_tiles`` records
    the requests with their Referer policy), a local server (127.0.0.1) is let through, anything else is aborted
    and recorded in ``errors``.
    """

    def __init__(self, browser, path, viewport=VIEW):
        self.context = browser.new_context(viewport=viewport)
        self.page = self.context.new_page()
        self.requests, self.errors, self.osm_tiles = [], [], []
        png = _tile_png()

        def guard(route):
            req = route.request
            if req.url.startswith("https://tile.openstreetmap.org/"):
                self.osm_tiles.append((req.url, req.headers.get("referer")))
                route.fulfill(status=200, content_type="image/png", body=png)
            elif re.match(r"^https?://127\.0\.0\.1[:/]", req.url):
                route.continue_()
            else:
                self.errors.append(f"network request: {req.url}")
                route.abort()

        self.context.route(re.compile(r"^https?://"), guard)
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.on("pageerror", lambda e: self.errors.append(f"pageerror: {e}"))
        self.page.on("console", lambda m: self.errors.append(f"console {m.type}: {m.text}")
                     if m.type in ("error", "warning") else None)
        self.page.add_init_script("window.cspViolations = []; document.addEventListener("
                                  "'securitypolicyviolation', e => window.cspViolations.push(e.blockedURI + ' ' + "
                                  "e.violatedDirective));")
        self.url = path.resolve().as_uri()
        self.page.goto(self.url)
        self.page.wait_for_selector("html[data-dpgeo-drawn]", state="attached", timeout=30_000)

    def other_requests(self):
        return [u for u in self.requests if u != self.url]

    def close(self):
        self.context.close()


@pytest.fixture
def open_map(browser):
    pages = []

    def _open(path, viewport=VIEW):
        pages.append(MapPage(browser, path, viewport))
        return pages[-1]

    yield _open
    for p in pages:
        p.close()


def _private_metadata(res, **extra):
    md = dict(res.metadata)
    md.update(extra)
    return md


# -- GeoJSON (RFC 7946) and the HTML document, no browser ----------------------------------

def test_geojson_is_rfc7946_with_counts_and_metadata(seeded, tmp_path):
    path = seeded.to_file(tmp_path / "spans.geojson")
    doc = json.loads(open(path, encoding="utf-8").read())
    assert doc["type"] == "FeatureCollection" and "crs" not in doc
    assert doc["dpgeo"] == seeded.metadata  # the privacy metadata as top-level foreign member
    assert len(doc["features"]) == len(seeded.layer) > 0
    for f in doc["features"]:
        assert set(f["properties"]) == {"cluster_id", "n_cells", "area_m2", "dp_count", "dp_count_low",
                                        "dp_count_high"}
        assert f["properties"]["dp_count_low"] <= f["properties"]["dp_count"] <= f["properties"]["dp_count_high"]
        g = shapely.geometry.shape(f["geometry"])
        assert g.geom_type == "MultiPolygon" and g.is_valid
        lon, lat = np.asarray(shapely.get_coordinates(g)).T
        assert (np.abs(lon) <= 180).all() and (np.abs(lat) <= 90).all() and lon.mean() < -90  # lon, lat order
        for poly in g.geoms:  # right-hand rule: exteriors counter-clockwise, holes clockwise
            assert poly.exterior.is_ccw
            assert all(not ring.is_ccw for ring in poly.interiors)
    assert any(len(p.interiors) for f in doc["features"]
               for p in shapely.geometry.shape(f["geometry"]).geoms)  # the sample has holes: the rule is tested


def test_geojson_fast_path_equals_geopandas(seeded):
    """Coordinates taken in one vectorised call give the same document as geopandas' writer."""
    out = seeded.layer.to_crs(4326)
    out["geometry"] = shapely.set_precision(shapely.orient_polygons(np.asarray(out.geometry.values)), 1e-7,
                                            mode="pointwise")
    ref = json.loads(out.to_json(drop_id=True))
    ref.pop("crs", None)
    ref["dpgeo"] = seeded.metadata
    assert json.dumps(geojson_collection(seeded.layer, seeded.metadata)) == json.dumps(ref)
    mixed = seeded.layer.copy()  # a Polygon among MultiPolygons takes geopandas' general path
    mixed.loc[0, "geometry"] = mixed.geometry.iloc[0].geoms[0]
    fc = geojson_collection(mixed, {})
    assert fc["features"][0]["geometry"]["type"] == "Polygon"


def test_html_is_self_contained(seeded):
    page = html_document(seeded.layer, seeded.metadata, basemap="none")
    # no external resource of any kind: no src/href to load, no @import, no url() but none
    assert not re.search(r"<(link|img|iframe|object|embed)\b", page, re.I)
    assert not re.search(r"<script[^>]*\bsrc=", page, re.I)
    assert "@import" not in page and not re.search(r"url\((?!none)", page.split('id="dpgeo-layer"')[0])
    assert "sourceMappingURL" not in page
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', page).group(1)
    assert "default-src &#x27;none&#x27;" in csp and "img-src data:;" in csp
    # the vendored library, its version and licence travel in the page
    assert f"Leaflet {leaflet_version()} (BSD-2-Clause)" in page and "Redistribution and use" in page
    # the release's GeoJSON, with its metadata, is embedded as data and reads back
    m = re.search(r'<script type="application/json" id="dpgeo-layer">(.*?)</script>', page, re.S)
    assert json.loads(m.group(1)) == json.loads(json.dumps(geojson_collection(seeded.layer, seeded.metadata)))


def test_vendored_leaflet_matches_its_version_file():
    folder = ROOT / "dpgeo" / "io" / "vendor" / "leaflet"
    info = dict(line.split(": ", 1) for line in (folder / "VERSION").read_text().splitlines())
    assert info["license"] == "BSD-2-Clause" and info["integrity"].startswith("sha512-")
    assert f"Leaflet {info['version']}," in (folder / "leaflet.js").read_text()[:200]
    assert "BSD 2-Clause License" in (folder / "LICENSE").read_text()
    assert (ROOT / "dev" / "update-leaflet").stat().st_mode & 0o111
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert '"dpgeo.io" = ["vendor/leaflet/*"]' in pyproject  # shipped in the wheel


def test_html_escapes_metadata_strings(seeded):
    evil = '</script><script>window.pwned = 1</script><img src=x onerror="window.pwned = 2">'
    md = _private_metadata(seeded, mechanism=evil, dataset=evil, release_id="<b>r1</b>",
                           not_private_reasons=[evil])
    page = html_document(seeded.layer, md)
    assert evil not in page and "<b>r1</b>" not in page
    assert "&lt;/script&gt;&lt;script&gt;window.pwned = 1&lt;/script&gt;" in page
    assert "&lt;b&gt;r1&lt;/b&gt;" in page
    # in the embedded JSON, '<' is written \u003c: no '</script' can close the data element early
    data = page.split('id="dpgeo-layer">', 1)[1].split("</script>", 1)[0]
    assert "<" not in data and json.loads(data)["dpgeo"]["dataset"] == evil


def test_study_area_outline_from_metadata(private):
    g, kind = study_area_outline(private.metadata)
    assert kind == "outline" and g.bounds == pytest.approx((-93.33, 44.89, -93.19, 45.06))
    utm, _ = study_area_outline(private.metadata, "EPSG:32615")  # densified, then projected
    assert utm.area == pytest.approx(dpgeo.domain.as_study_area(str(SAMPLE_AREA)).polygon.area, rel=1e-4)
    assert study_area_outline({}) == (None, "")
    box, kind = study_area_outline({"domain": {"crs": "EPSG:4326", "bounds": [0, 0, 1, 1], "wkt": None}})
    assert kind == "bounding box" and box.area == 1


def test_large_study_area_keeps_a_simplified_outline():
    t = np.linspace(0, 2 * np.pi, 6000)
    ring = np.c_[-93.26 + 0.07 * np.cos(t) * (1 + 0.1 * np.sin(40 * t)), 44.97 + 0.08 * np.sin(t)]
    area = dpgeo.domain.StudyArea.from_geometry(shapely.Polygon(ring), "EPSG:4326")
    md = area.to_metadata()
    assert md["wkt"] is None and md["simplify_tolerance"] > 0
    simple = shapely.from_wkt(md["wkt_simplified"])
    assert shapely.get_num_coordinates(simple) <= 2000
    assert simple.symmetric_difference(area.geometry).area < 0.01 * area.geometry.area
    g, kind = study_area_outline({"domain": md})
    assert kind == "simplified outline" and g.equals_exact(simple, 1e-6)


def test_basemap_is_checked():
    from dpgeo.io.html import check_basemap

    assert check_basemap("https://tile.example.org/{z}/{x}/{y}.png") == "https://tile.example.org"
    assert check_basemap("https://{s}.tile.example.org/{z}/{x}/{-y}.png") == "https://*.tile.example.org"
    for bad in ("tile.example.org/{z}/{x}/{y}.png", "ftp://t.org/{z}/{x}/{y}.png", "https://t.org/tiles.png", ""):
        with pytest.raises(ParameterError):
            check_basemap(bad)
    with pytest.raises(ParameterError, match="basemap"):
        check_basemap(None, "© someone")


def test_default_basemap_is_openstreetmap_with_its_attribution(seeded):
    from dpgeo.io.html import OSM_TILES, basemap_config

    page = html_document(seeded.layer, seeded.metadata)
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', page).group(1)
    assert "img-src data: https://tile.openstreetmap.org;" in csp  # that host's images, nothing else
    cfg = json.loads(page.split('id="dpgeo-config">', 1)[1].split("</script>", 1)[0])
    assert cfg["basemap"] == {"url": "https://tile.openstreetmap.org/{z}/{x}/{y}.png",
                              "attribution": "© OpenStreetMap contributors",
                              "link": "https://www.openstreetmap.org/copyright",
                              "referrerPolicy": "strict-origin-when-cross-origin"}  # the policy asks for a Referer
    assert basemap_config("osm")["url"] == OSM_TILES and basemap_config(None) is None
    assert basemap_config("none") is None and basemap_config(" NONE ") is None
    with pytest.raises(ParameterError, match="its own attribution"):
        basemap_config("osm", "© me")
    with pytest.raises(ParameterError, match="'osm', 'none' or"):
        basemap_config("satellite")
    none = html_document(seeded.layer, seeded.metadata, basemap="none")
    assert "openstreetmap" not in none.lower() and '"basemap":null' in none


def test_empty_release_and_a_layer_read_back(seeded, tmp_path):
    """No cluster still makes a map (study area, 'No clusters'); a layer read from GeoJSON draws in metres."""
    import geopandas as gpd

    empty = seeded.layer.iloc[:0]
    page = html_document(empty, seeded.metadata)
    assert "No clusters" in page and '"colourOf":{}' in page
    write_png(empty, tmp_path / "empty.png", seeded.metadata)
    back = gpd.read_file(seeded.to_file(tmp_path / "spans.geojson"))  # EPSG:4326
    write_png(back, tmp_path / "back.png", seeded.metadata)
    assert read_layer_metadata(tmp_path / "back.png")["working_crs"] == "EPSG:32615"


# -- routing by extension: write_layer, to_file, read back -------------------------------

def test_write_layer_routes_html_and_png(seeded, tmp_path):
    for name in ("m.html", "m.htm", "m.png"):
        p = write_layer(seeded.layer, tmp_path / name, seeded.metadata)
        assert read_layer_metadata(p) == seeded.metadata
    write_layer(seeded.layer, tmp_path / "m.dat", seeded.metadata, driver="html")
    assert (tmp_path / "m.dat").read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    p = seeded.to_file(tmp_path / "t.html", basemap="https://tile.example.org/{z}/{x}/{y}.png",
                       attribution="© Example")
    assert "https://tile.example.org" in open(p, encoding="utf-8").read()
    assert read_layer_metadata(seeded.to_file(tmp_path / "t.png")) == seeded.metadata


def test_output_mistakes_leave_no_file(seeded, tmp_path, monkeypatch):
    with pytest.raises(OutputError, match="basemap is drawn only on an HTML map"):
        seeded.to_file(tmp_path / "a.png", basemap="https://t.org/{z}/{x}/{y}.png")
    with pytest.raises(OutputError, match="always EPSG:4326"):
        seeded.to_file(tmp_path / "a.html", crs="EPSG:32615")
    with pytest.raises(ParameterError):
        seeded.to_file(tmp_path / "a.html", basemap="not a url")
    with pytest.raises(OutputError, match="does not exist"):
        seeded.to_file(tmp_path / "nodir" / "a.html")
    import matplotlib.figure

    def boom(*a, **k):
        raise RuntimeError("disk full")

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", boom)
    with pytest.raises(OutputError, match="disk full"):
        seeded.to_file(tmp_path / "a.png")
    assert os.listdir(tmp_path) == []  # no partial or temporary file
    with pytest.raises(DpgeoError):
        read_layer_metadata(tmp_path / "a.png")


def test_read_metadata_refuses_foreign_html_and_png(tmp_path):
    (tmp_path / "x.html").write_text("<html><body>hello</body></html>")
    with pytest.raises(InputError, match="no dpgeo metadata"):
        read_layer_metadata(tmp_path / "x.html")
    from PIL import Image

    Image.new("RGB", (4, 4)).save(tmp_path / "x.png")
    with pytest.raises(InputError, match="no dpgeo metadata"):
        read_layer_metadata(tmp_path / "x.png")


def _run_cli(*args):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "dpgeo", *map(str, args)], capture_output=True, text=True,
                          env=env, timeout=300)


def test_cli_writes_html_and_png(tmp_path):
    base = ["spans", SAMPLE_POINTS, "--epsilon", 1, "--radius", 150, "--min-points", 40, "--domain", SAMPLE_AREA,
            "--seed", 3, "-q"]
    r = _run_cli(*base, "-o", tmp_path / "map.html", "--basemap", "https://tile.example.org/{z}/{x}/{y}.png",
                 "--basemap-attribution", "© Example <contributors>")
    assert r.returncode == 0, r.stderr
    page = (tmp_path / "map.html").read_text(encoding="utf-8")
    assert "img-src data: https://tile.example.org" in page
    cfg = json.loads(page.split('id="dpgeo-config">', 1)[1].split("</script>", 1)[0])
    assert cfg["basemap"]["attribution"] == "© Example &lt;contributors&gt;"  # escaped: Leaflet inserts HTML
    r = _run_cli(*base, "-o", tmp_path / "map.png")
    assert r.returncode == 0, r.stderr
    r = _run_cli("info", tmp_path / "map.png", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["differentially_private"] is False
    r = _run_cli(*base, "-o", tmp_path / "osm.html", "-o", tmp_path / "bare.html", "--basemap", "none",
                 "-o", tmp_path / "x.gpkg")  # one --basemap for every .html; none is fine beside a .gpkg
    assert r.returncode == 0, r.stderr
    assert "tile.openstreetmap.org" not in (tmp_path / "bare.html").read_text(encoding="utf-8")
    r = _run_cli(*base, "-o", tmp_path / "osm.html")  # the default
    assert r.returncode == 0, r.stderr
    assert "img-src data: https://tile.openstreetmap.org" in (tmp_path / "osm.html").read_text(encoding="utf-8")


def test_cli_title_names_the_html_and_the_png(tmp_path, monkeypatch, capsys):
    from dpgeo.cli import main
    from dpgeo.io import png

    drawn = []
    real = png._figure
    monkeypatch.setattr(png, "_figure", lambda *a: drawn.append(a[4]) or real(*a))
    monkeypatch.setenv("DPGEO_LEDGER", str(tmp_path / "ledger.sqlite"))
    title = "Police stops <2017>, ε = 1"
    args = ["spans", str(SAMPLE_POINTS), "--epsilon", "1", "--radius", "150", "--min-points", "40", "--domain",
            str(SAMPLE_AREA), "--seed", "3", "-q", "-o", str(tmp_path / "m.html"), "-o", str(tmp_path / "m.png"),
            "-o", str(tmp_path / "m.gpkg"), "--basemap", "none", "--title", title]
    assert main(args) == 0, capsys.readouterr().err
    page = (tmp_path / "m.html").read_text(encoding="utf-8")
    assert "<title>Police stops &lt;2017&gt;, ε = 1 — dpgeo map</title>" in page
    assert '<h1 class="dp-title">Police stops &lt;2017&gt;, ε = 1</h1>' in page
    assert drawn == [title]
    assert main(["export", str(tmp_path / "m.gpkg"), "-o", str(tmp_path / "e.html"), "--title", "Again",
                 "--basemap", "none", "-q"]) == 0
    assert '<h1 class="dp-title">Again</h1>' in (tmp_path / "e.html").read_text(encoding="utf-8")
    assert main(args[:10] + ["-q", "--seed", "3", "-o", str(tmp_path / "n.html")]) == 0  # no --title: the mechanism
    assert '<h1 class="dp-title">DP-DBSCAN spans' in (tmp_path / "n.html").read_text(encoding="utf-8")


@pytest.mark.parametrize("extra, message", [
    (["-o", "map.png", "--basemap", "https://t.org/{z}/{x}/{y}.png"], "basemap is drawn only on an HTML map"),
    (["-o", "map.html", "--basemap", "https://t.org/tiles"], "{z}, {x} and {y}"),
    (["-o", "map.html", "--out-crs", "EPSG:32615"], "always EPSG:4326"),
])
def test_cli_output_mistakes_fail_before_reading(tmp_path, extra, message):
    missing = tmp_path / "no_such_input.gpkg"  # never read: the output is refused first
    args = ["wavecluster", missing, "--epsilon", 1, "--cell", 250, "--domain", SAMPLE_AREA]
    r = _run_cli(*args, *[str(tmp_path / a) if a.startswith("map.") else a for a in extra])
    assert r.returncode == 2 and message in r.stderr and "no_such_input" not in r.stderr
    assert os.listdir(tmp_path) == []


# -- the palette: one source -------------------------------------------------------------

def test_outline_colours_are_qt_darker_130():
    QtGui = pytest.importorskip("PyQt5.QtGui", reason="needs PyQt5 (installed with python3-qgis) for QColor")
    assert [QtGui.QColor(c).darker(130).name() for c in palette.CLUSTER_COLOURS] == list(palette.OUTLINE_COLOURS)


def test_qgis_style_uses_the_same_palette():
    text = (ROOT / "qgis_plugin" / "dpgeo_qgis" / "style.py").read_text()
    literal = {n.targets[0].id: n.value for n in ast.parse(text).body
               if isinstance(n, ast.Assign) and isinstance(n.targets[0], ast.Name)}
    if "CLUSTER_COLOURS" in literal and isinstance(literal["CLUSTER_COLOURS"], (ast.List, ast.Tuple)):
        assert tuple(ast.literal_eval(literal["CLUSTER_COLOURS"])) == palette.CLUSTER_COLOURS
        assert ast.literal_eval(literal["FILL_ALPHA"]) == palette.FILL_ALPHA
    else:  # the plugin takes them from the library
        assert "dpgeo.io.palette" in text or "from dpgeo.io import palette" in text


# -- the PNG -------------------------------------------------------------------------------

def _blend(hex_colour, bg, alpha=palette.FILL_OPACITY):
    c = np.array(palette.hex_to_rgb(hex_colour), float)
    return np.round(np.asarray(bg, float) * (1 - alpha) + c * alpha)


def _has_colour(img, rgb, tol=6, min_pixels=20):
    d = np.abs(img[..., :3].astype(int) - np.asarray(rgb, int)).max(axis=-1)
    return int((d <= tol).sum()) >= min_pixels


def _expected_fills(res, top=4):
    """Blended fill colours of the ``top`` largest clusters (they cover many pixels)."""
    idx = palette.layer_style(res.layer)[2]  # the neighbour-aware colours the PNG uses
    order = np.argsort(-res.layer["area_m2"].to_numpy())[:top]
    return {palette.CLUSTER_COLOURS[idx[j]] for j in order}


def test_png_styling_legend_and_privacy_line(seeded, private, tmp_path):
    from PIL import Image

    for res, name in ((seeded, "seeded.png"), (private, "private.png")):
        p = write_png(res.layer, tmp_path / name, res.metadata)
        img = np.asarray(Image.open(p).convert("RGB"))
        assert img.shape[0] > 600 and img.shape[1] > 600
        assert len(np.unique(img.reshape(-1, 3), axis=0)) > 50  # not blank
        for c in _expected_fills(res):
            assert _has_colour(img, _blend(c, (255, 255, 255))), c
        red = _has_colour(img, (0xC0, 0, 0), tol=3, min_pixels=200)  # the red NOT-private banner
        assert red == (not res.differentially_private)
        assert read_layer_metadata(p) == res.metadata
    if UPDATE:
        shutil.copyfile(tmp_path / "private.png", DOCS_IMG / "webmap_static.png")
    assert (DOCS_IMG / "webmap_static.png").exists()


def test_png_text_is_drawn_with_epsilon_and_delta(private, tmp_path, monkeypatch):
    """Every text in DejaVu Sans, which has the glyphs (whatever font the user's matplotlibrc prefers), no
    missing-glyph warning while drawing, and the privacy line in the PNG's Description as UTF-8 (not '?')."""
    import matplotlib
    from matplotlib.ft2font import FT2Font
    from PIL import Image

    from dpgeo.io import png

    font = FT2Font(png.font_path())
    assert font.family_name == "DejaVu Sans"
    assert all(font.get_char_index(ord(c)) for c in "εδ×²±–…≈")
    figures = []
    real = png._figure
    monkeypatch.setattr(png, "_figure", lambda *a: figures.append(real(*a)) or figures[-1])
    with warnings.catch_warnings(record=True) as caught, \
            matplotlib.rc_context({"font.family": "monospace", "font.monospace": ["Courier 10 Pitch"]}):
        warnings.simplefilter("always")
        p = write_png(private.layer, tmp_path / "m.png", private.metadata, title="Stops, ε = 1 and δ = 0")
    assert not [w for w in caught if "missing from" in str(w.message) or "Glyph" in str(w.message)], caught
    texts = [t for t in figures[0].findobj(matplotlib.text.Text) if t.get_text()]
    assert {t.get_fontname() for t in texts} == {"DejaVu Sans"}
    drawn = " ".join(t.get_text() for t in texts)
    assert "Stops, ε = 1 and δ = 0" in drawn and "ε = 1, δ = 0" in drawn
    description = Image.open(p).text["Description"]
    assert "ε = 1, δ = 0" in description and "?" not in description


# -- in a real browser ---------------------------------------------------------------------

def test_browser_draws_every_cluster_and_requests_nothing(seeded, tmp_path, open_map):
    path = tmp_path / "map.html"
    write_html(seeded.layer, path, seeded.metadata, basemap="none")
    m = open_map(path)
    assert m.page.locator("path.dp-cluster").count() == len(seeded.layer) > 1
    assert m.page.locator("path.dp-study-area").count() == 1
    assert m.page.get_attribute("html", "data-dpgeo-drawn") == str(len(seeded.layer))
    assert m.other_requests() == [] and m.osm_tiles == []  # nothing but the file itself
    assert m.errors == [] and m.page.evaluate("window.cspViolations") == []
    # every cluster path carries the palette class of the library's colouring (the QGIS categories too)
    classes = m.page.evaluate("window.dpgeoClusters.getLayers().map(l => "
                              "[l.feature.properties.cluster_id, l._path.getAttribute('class')])")
    idx = dict(zip(seeded.layer["cluster_id"].tolist(), palette.layer_style(seeded.layer)[2].tolist()))
    assert all(f"dp-cluster dp-c{idx[c]}" in cls for c, cls in classes)
    fill = m.page.evaluate("getComputedStyle(document.querySelector('path.dp-c0')).fill")
    assert fill == "rgb(%d, %d, %d)" % palette.hex_to_rgb(palette.CLUSTER_COLOURS[0])
    # zoomed to the study area: its outline fills most of the viewport's height
    box = m.page.locator("path.dp-study-area").bounding_box()
    assert box["height"] > 0.8 * VIEW["height"]
    # zooming in redraws the clusters at the new scale (the lean drawing reprojects on zoom)
    big = m.page.locator("path.dp-cluster").nth(int(np.argmax(seeded.layer["area_m2"].to_numpy())))
    before = big.bounding_box()
    m.page.evaluate("window.dpgeoMap.setZoom(window.dpgeoMap.getZoom() + 1, {animate: false})")
    m.page.wait_for_timeout(300)
    after = big.bounding_box()
    assert after["width"] == pytest.approx(2 * before["width"], rel=0.05)
    assert m.errors == []


def _click_cluster(m):
    """Click a point inside some cluster that no panel covers; return that cluster's properties."""
    props = m.page.evaluate("""() => {
        const layers = window.dpgeoClusters.getLayers();
        for (const l of layers.sort((a, b) => b.feature.properties.area_m2 - a.feature.properties.area_m2)) {
            const r = l._path.getBoundingClientRect();
            for (let i = 1; i < 8; i++) for (let j = 1; j < 8; j++) {
                const x = r.left + r.width * i / 8, y = r.top + r.height * j / 8;
                if (document.elementFromPoint(x, y) === l._path) return [x, y, l.feature.properties];
            }
        }
        return null;
    }""")
    assert props is not None, "no clickable cluster"
    x, y, p = props
    m.page.mouse.click(x, y)
    m.page.wait_for_selector(".leaflet-popup-content .dp-popup", timeout=5000)
    return p


def test_popup_shows_dp_count_interval_and_cell_size(private, tmp_path, open_map):
    path = tmp_path / "map.html"
    write_html(private.layer, path, private.metadata, basemap="none")
    m = open_map(path)
    p = _click_cluster(m)
    text = m.page.inner_text(".leaflet-popup-content")
    assert f"Cluster {p['cluster_id']}" in text
    assert m.page.inner_text(".leaflet-popup-content .dp-count") == str(p["dp_count"])
    assert m.page.inner_text(".leaflet-popup-content .dp-interval") == f"{p['dp_count_low']} – {p['dp_count_high']}"
    assert f"of {private.metadata['cell_width_m']:.4g} × {private.metadata['cell_width_m']:.4g} m" in text
    assert m.other_requests() == [] and m.errors == []


def test_privacy_panel_in_plain_words(private, tmp_path, open_map):
    md = _private_metadata(private, dataset="Minneapolis police stops 2017", release_id="r-0042")
    path = tmp_path / "map.html"
    write_html(private.layer, path, md)
    m = open_map(path)
    panel = m.page.inner_text("#dpgeo-privacy")
    assert private.differentially_private
    assert "Differentially private" in panel and "NOT" not in panel
    for fact in ("DP-DBSCAN spans (Qiu & Yi, Algorithm 1)", "ε = 1, δ = 0", "add or remove one record",
                 "at most 1 point(s)", "Minneapolis police stops 2017", "r-0042", "bounds what anyone can learn"):
        assert fact in panel, fact
    legend = m.page.inner_text("#dpgeo-legend")
    assert f"{len(private.layer)} cluster" in legend and "study area" in legend


def test_person_cap_in_the_panel(tmp_path, open_map):
    import geopandas as gpd

    stops = gpd.read_file(SAMPLE_POINTS)
    stops["person"] = np.arange(len(stops)) % 5000
    res = dpgeo.dbscan_spans(stops, person="person", max_points_per_person=3, **SPANS)
    path = tmp_path / "map.html"
    write_html(res.layer, path, res.metadata)
    panel = open_map(path).page.inner_text("#dpgeo-privacy")
    assert "Person cap" in panel and "at most 3 point(s) per person" in panel and "one person" in panel


def test_not_private_release_is_marked_red(seeded, tmp_path, open_map):
    assert seeded.metadata["differentially_private"] is False
    path = tmp_path / "map.html"
    write_html(seeded.layer, path, seeded.metadata)
    m = open_map(path)
    status = m.page.locator("#dpgeo-privacy .dp-status")
    assert status.inner_text() == "NOT differentially private"
    assert status.evaluate("e => getComputedStyle(e).backgroundColor") == "rgb(192, 0, 0)"
    reasons = m.page.inner_text("#dpgeo-privacy .dp-reasons")
    assert "fixed random seed" in reasons
    # the same for a release whose metadata says nothing about privacy
    path2 = tmp_path / "unknown.html"
    write_html(seeded.layer, path2, {"mechanism": "unknown"})
    assert "does not state" in open_map(path2).page.inner_text("#dpgeo-privacy .dp-reasons")


def test_hostile_metadata_stays_text_in_the_browser(seeded, tmp_path, open_map):
    evil = '</script><script>window.pwned = 1</script><img src=x onerror="window.pwned = 2">'
    md = _private_metadata(seeded, dataset=evil, mechanism=evil)
    path = tmp_path / "map.html"
    write_html(seeded.layer, path, md, basemap="none")
    m = open_map(path)
    assert m.page.evaluate("window.pwned") is None
    assert m.page.locator("#dpgeo-privacy img, #dpgeo-privacy script").count() == 0
    assert evil in m.page.inner_text("#dpgeo-privacy")
    assert m.page.title().startswith(evil[:20])
    assert m.other_requests() == [] and m.page.evaluate("window.cspViolations") == []


@pytest.fixture
def tile_server():
    """A local XYZ tile server (a 1×1 PNG for any path) that records what it was asked."""
    from PIL import Image
    import io

    buf = io.BytesIO()
    Image.new("RGB", (256, 256), (200, 220, 240)).save(buf, format="PNG")
    png, seen = buf.getvalue(), []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            seen.append((self.path, self.headers.get("Referer")))
            self.send_response(200)
            self.send_header("Content-Type", "image/png")
            self.send_header("Content-Length", str(len(png)))
            self.end_headers()
            self.wfile.write(png)

        def log_message(self, *a):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_port}", seen
    srv.shutdown()


def test_basemap_adds_tiles_from_its_host_only(seeded, tmp_path, open_map, tile_server):
    host, seen = tile_server
    path = tmp_path / "map.html"
    write_html(seeded.layer, path, seeded.metadata, basemap=host + "/{z}/{x}/{y}.png",
               attribution='Tiles <a href="x">© Local</a>')
    m = open_map(path)
    m.page.wait_for_function("document.querySelectorAll('img.leaflet-tile-loaded').length > 0", timeout=10_000)
    others = m.other_requests()
    assert others and all(u.startswith(host + "/") for u in others)
    assert seen and all(ref is None for _, ref in seen)  # no Referer: the tile host is not told which map
    attribution = m.page.inner_text(".leaflet-control-attribution")
    assert 'Tiles <a href="x">© Local</a>' in attribution  # shown as text, not as a link
    assert m.page.evaluate("window.cspViolations") == [] and m.errors == []


def test_default_map_asks_openstreetmap_for_tiles_and_credits_it(seeded, tmp_path, open_map):
    path = tmp_path / "map.html"
    write_html(seeded.layer, path, seeded.metadata)
    m = open_map(path)
    m.page.wait_for_function("document.querySelectorAll('img.leaflet-tile-loaded').length > 0", timeout=10_000)
    assert m.osm_tiles and all(re.fullmatch(r"https://tile\.openstreetmap\.org/\d+/\d+/\d+\.png", u)
                               for u, _ in m.osm_tiles)
    assert len(m.osm_tiles) < 60  # only the tiles in view: no bulk download
    assert m.other_requests() == [u for u, _ in m.osm_tiles]
    # the tile policy asks for a Referer from a web page: the tiles carry the policy that sends the page's origin
    # (a file:// page has none to send)
    assert m.page.evaluate("[...document.querySelectorAll('img.leaflet-tile')].every(i => "
                           "i.referrerPolicy === 'strict-origin-when-cross-origin')")
    link = m.page.locator(".leaflet-control-attribution a", has_text="© OpenStreetMap contributors")
    assert link.get_attribute("href") == "https://www.openstreetmap.org/copyright"
    assert m.errors == [] and m.page.evaluate("window.cspViolations") == []


def _rect(m, selector):
    return m.page.evaluate(f"(() => {{ const r = document.querySelector({selector!r}).getBoundingClientRect(); "
                           "return [r.left, r.top, r.right, r.bottom]; })()")


def _overlap(a, b):
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def test_phone_screen_panels_start_collapsed_and_leave_the_map_free(private, tmp_path, open_map):
    path = tmp_path / "map.html"
    write_html(private.layer, path, private.metadata)
    m = open_map(path, viewport=PHONE)
    for panel in ("#dpgeo-privacy", "#dpgeo-legend"):
        assert m.page.evaluate(f"document.querySelector({panel!r}).open") is False, panel
    privacy, legend = _rect(m, "#dpgeo-privacy"), _rect(m, "#dpgeo-legend")
    assert not _overlap(privacy, legend)
    cx, cy = PHONE["width"] / 2, PHONE["height"] / 2
    for r in (privacy, legend):  # small: a heading each, away from the centre
        assert (r[2] - r[0]) * (r[3] - r[1]) < 0.08 * PHONE["width"] * PHONE["height"], r
        assert not (r[0] <= cx <= r[2] and r[1] <= cy <= r[3])
    # the map's centre is the map's: a click there reaches it
    assert m.page.evaluate(f"document.getElementById('map').contains(document.elementFromPoint({cx}, {cy}))")
    m.page.evaluate("window.mapClicks = 0; window.dpgeoMap.on('click', () => window.mapClicks++)")
    m.page.mouse.click(cx, cy)
    clicked = m.page.evaluate("window.mapClicks") == 1 or m.page.locator(".leaflet-popup-content").count() == 1
    assert clicked
    # opened, the two panels still do not cover each other, and they close again
    m.page.click("#dpgeo-privacy > summary")
    m.page.click("#dpgeo-legend > summary")
    assert m.page.evaluate("document.querySelector('#dpgeo-privacy').open && "
                           "document.querySelector('#dpgeo-legend').open")
    privacy, legend = _rect(m, "#dpgeo-privacy"), _rect(m, "#dpgeo-legend")
    assert not _overlap(privacy, legend), (privacy, legend)
    assert "Differentially private" in m.page.inner_text("#dpgeo-privacy")
    assert "cluster" in m.page.inner_text("#dpgeo-legend")
    m.page.click("#dpgeo-privacy > summary")
    assert m.page.evaluate("document.querySelector('#dpgeo-privacy').open") is False
    assert m.errors == [] and m.page.evaluate("window.cspViolations") == []


def test_large_screen_panels_start_open(private, tmp_path, open_map):
    path = tmp_path / "map.html"
    write_html(private.layer, path, private.metadata, basemap="none")
    m = open_map(path)
    assert m.page.evaluate("document.querySelector('#dpgeo-privacy').open && "
                           "document.querySelector('#dpgeo-legend').open")
    assert not _overlap(_rect(m, "#dpgeo-privacy"), _rect(m, "#dpgeo-legend"))


def test_screenshot_shows_the_palette(private, tmp_path, open_map):
    from PIL import Image

    path = tmp_path / "map.html"
    write_html(private.layer, path, private.metadata, basemap="none")
    m = open_map(path)
    shot = tmp_path / "webmap.png"
    m.page.screenshot(path=str(shot))
    img = np.asarray(Image.open(shot).convert("RGB"))
    assert img.shape[:2] == (VIEW["height"], VIEW["width"])
    assert len(np.unique(img.reshape(-1, 3), axis=0)) > 50  # not blank
    for c in _expected_fills(private):
        assert _has_colour(img, _blend(c, MAP_BG)), c
    if UPDATE:
        shutil.copyfile(shot, DOCS_IMG / "webmap.png")
    ref = np.asarray(Image.open(DOCS_IMG / "webmap.png").convert("RGB"))  # the picture in the docs
    assert ref.shape == img.shape
    # loosely the same picture: the same background, the blended palette and the panels
    for c in (MAP_BG, _blend(palette.CLUSTER_COLOURS[0], MAP_BG), (255, 255, 255)):
        assert _has_colour(ref, c) and _has_colour(img, c), c


def test_firefox_opens_the_map(private, tmp_path):
    firefox = shutil.which("firefox-esr") or shutil.which("firefox")
    if firefox is None:
        pytest.skip("no Firefox (Debian: apt-get install firefox-esr); playwright cannot drive Debian's Firefox, "
                    "so this test only checks its --headless --screenshot of the map")
    from PIL import Image

    path = tmp_path / "map.html"
    write_html(private.layer, path, private.metadata, basemap="none")  # Firefox cannot be kept off the network
    shot = tmp_path / "firefox.png"
    (tmp_path / "profile").mkdir()
    env = dict(os.environ, HOME=str(tmp_path), MOZ_HEADLESS="1")
    subprocess.run([firefox, "--headless", "--no-remote", "--profile", str(tmp_path / "profile"),
                    "--window-size=1200,800", "--screenshot", str(shot), path.as_uri()],
                   env=env, capture_output=True, timeout=180)
    assert shot.exists(), "Firefox wrote no screenshot"
    img = np.asarray(Image.open(shot).convert("RGB"))
    assert len(np.unique(img.reshape(-1, 3), axis=0)) > 50
    for c in _expected_fills(private, top=2):
        assert _has_colour(img, _blend(c, MAP_BG), tol=8), c


# -- a map series: the time slider and the small multiples -----------------------------------------------------------

@pytest.fixture(scope="module")
def series():
    """A monthly series of the sample (three months of 2017; marked NOT private: fixed seed)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = dpgeo.read_points(SAMPLE_POINTS)
        rng = np.random.default_rng(5)
        month = rng.integers(0, 3, t.x.size)  # the sample has no time column: months at random
        times = np.array(["2017-01-15", "2017-02-15", "2017-03-15"])[month]
        return dpgeo.dbscan_spans((t.x, t.y, t.crs), seed=3, time=times, period="month", period_start="2017-01-01",
                                  period_end="2017-05-01", **SPANS)


def test_series_html_has_a_time_slider_that_shows_one_period_at_a_time(series, tmp_path, open_map):
    series.to_file(tmp_path / "series.html", basemap="none")
    m = open_map(tmp_path / "series.html")
    assert m.errors == [] and m.page.evaluate("window.cspViolations") == [] and m.other_requests() == []
    per = series.layer.groupby("period").size().to_dict()
    assert series.periods == ["2017-01", "2017-02", "2017-03", "2017-04"] and "2017-04" not in per

    def state():
        return (m.page.get_attribute("html", "data-dpgeo-period"), m.page.evaluate(
            "window.dpgeoClusters.getLayers().map(l => l.feature.properties.period)"), m.page.title(),
                m.page.text_content("#dpgeo-legend .dp-title"))

    period, shown, title, heading = state()
    assert period == "2017-01" and set(shown) == {"2017-01"} and len(shown) == per["2017-01"]
    assert title.startswith("2017-01 — ") and heading.endswith("— 2017-01")
    m.page.fill("#dpgeo-slider", "3")
    m.page.dispatch_event("#dpgeo-slider", "input")
    period, shown, title, heading = state()
    assert period == "2017-04" and shown == [] and "No clusters in 2017-04" in m.page.text_content(
        "#dpgeo-legend")  # an empty period is a frame like any other
    m.page.click("#dpgeo-play")
    assert "Pause" in m.page.text_content("#dpgeo-play")
    m.page.wait_for_selector("html[data-dpgeo-period='2017-01']", state="attached", timeout=10_000)  # wrapped
    m.page.click("#dpgeo-play")
    assert "Play" in m.page.text_content("#dpgeo-play")
    # the popup names the period and gives that period's dp_count
    m.page.fill("#dpgeo-slider", "1")
    m.page.dispatch_event("#dpgeo-slider", "input")
    props = _click_cluster(m)
    text = m.page.text_content(".leaflet-popup-content")
    assert props["period"] == "2017-02"
    assert f"— {props['period']}" in text and str(props["dp_count"]) in text and "period" in text
    # the legend gives each cluster's count in the period shown
    row = m.page.text_content("[data-dp-counts] >> nth=0")
    assert row.startswith("cluster ")


def test_series_png_has_one_panel_per_period(series, tmp_path):
    from PIL import Image

    from dpgeo.io.png import read_png_metadata

    path = series.to_file(tmp_path / "series.png")
    assert read_png_metadata(path)["series"]["n_periods"] == 4
    one = series.releases[0].to_file(tmp_path / "one.png")
    with Image.open(path) as a, Image.open(one) as b:
        assert a.size != b.size  # four panels, not one map
    # the colour of cluster 1 appears (it persists through the panels)
    img = np.asarray(Image.open(path).convert("RGB")).astype(int)
    ids = series.layer["cluster_id"].to_numpy()
    i = int(palette.colour_index(ids, np.asarray(series.layer.geometry.values))[np.argmin(ids)])
    assert _has_colour(img, _blend(palette.CLUSTER_COLOURS[i], (255, 255, 255)), tol=8)
# -- heat layers and hot spots on the map -----------------------------------------------------

def test_browser_draws_hot_spot_cells_in_their_classes(tmp_path, open_map):
    """Every H3 cell is one path coloured by its gi_bin (the hot-spot palette); the legend lists the seven classes
    with their counts, and a cell's popup names its class and its Gi* z-score."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = dpgeo.hotspots(str(SAMPLE_POINTS), epsilon=1.0, h3_resolution=8, domain=str(SAMPLE_AREA), seed=4)
    path = tmp_path / "hot.html"
    write_html(res.layer, path, res.metadata, basemap="none")
    m = open_map(path)
    assert m.page.locator("path.dp-cluster").count() == len(res.layer) > 100
    cells = m.page.evaluate("window.dpgeoClusters.getLayers().map(l => [l.feature.properties.gi_bin, "
                            "getComputedStyle(l._path).fill])")
    for b, fill in cells:
        assert fill == "rgb(%d, %d, %d)" % palette.hex_to_rgb(palette.HOTSPOT_COLOURS[b])
    legend = m.page.inner_text("#dpgeo-legend")
    for b, label in palette.HOTSPOT_LABELS.items():
        assert f"{label} ({int((res.layer['gi_bin'] == b).sum()):,})" in legend
    hot = m.page.evaluate("""() => {
        for (const l of window.dpgeoClusters.getLayers()) {
            if (l.feature.properties.gi_bin !== 3) continue;
            const r = l._path.getBoundingClientRect();
            const x = r.left + r.width / 2, y = r.top + r.height / 2;
            if (document.elementFromPoint(x, y) === l._path) return [x, y];
        }
        return null;
    }""")
    assert hot is not None
    m.page.mouse.click(*hot)
    m.page.wait_for_selector(".leaflet-popup-content .dp-popup", timeout=5000)
    text = m.page.inner_text(".leaflet-popup-content")
    assert "hot spot 99%" in text and "Gi* z" in text and "dp_count" in text
    assert m.other_requests() == [] and m.errors == []


def test_browser_draws_h3_hexagons_far_north_and_a_count_legend(tmp_path, open_map):
    """At 70° N (Tromsø) every hexagon is drawn as one six-sided path, near-regular on the web map's
    Mercator, and the legend gives the dp_count classes of the library's palette."""
    rng = np.random.default_rng(6)
    lon, lat = rng.normal(18.95, 0.02, 4000), rng.normal(69.65, 0.008, 4000)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = dpgeo.heat((lon, lat, "EPSG:4326"), epsilon=1.0, h3_resolution=8, domain=(18.85, 69.6, 19.05, 69.7),
                         seed=2)
    path = tmp_path / "north.html"
    write_html(res.layer, path, res.metadata, basemap="none")
    m = open_map(path)
    assert m.page.locator("path.dp-cluster").count() == len(res.layer) > 20
    shapes = m.page.evaluate("window.dpgeoClusters.getLayers().map(l => [l._path.getAttribute('d'), "
                             "l._path.getBBox().width, l._path.getBBox().height])")
    for d, w, h in shapes:
        assert len(re.findall("[Ll]", d)) == 5 and len(re.findall("[Mm]", d)) == 1  # one ring of six corners
        assert 0.8 < w / h < 1.3  # Mercator is conformal: the hexagon keeps its shape
    lower, upper, _, note = palette.count_classes(res.layer["dp_count"].to_numpy(),
                                                  noise_halfwidth=palette.count_noise_halfwidth(res.layer))
    legend = m.page.inner_text("#dpgeo-legend")
    assert note in legend  # what the classes are, or why fewer than five
    for a, b in zip(lower.tolist(), upper.tolist()):
        assert (f"dp_count {a:,}" if a == b else f"dp_count {a:,}–{b:,}") in legend
    assert m.errors == []


def test_png_of_hot_spots_and_bands_uses_their_palettes(tmp_path):
    """The PNG fills hot-spot cells with the hot-spot palette and bands with the sequential one (the same
    colours as the HTML map and QGIS), over white."""
    from PIL import Image

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        hot = dpgeo.hotspots(str(SAMPLE_POINTS), epsilon=1.0, cell_m=300.0, domain=str(SAMPLE_AREA), seed=4)
        bands = dpgeo.heat(str(SAMPLE_POINTS), epsilon=1.0, h3_resolution=9, bands=4, domain=str(SAMPLE_AREA),
                           seed=4)
    img = np.asarray(Image.open(write_png(hot.layer, tmp_path / "hot.png", hot.metadata)).convert("RGB"))
    for b in (3, 0, -2):
        assert (hot.layer["gi_bin"] == b).sum() > 3
        assert _has_colour(img, _blend(palette.HOTSPOT_COLOURS[b], (255, 255, 255), palette.CELL_FILL_OPACITY),
                           tol=8), b
    img = np.asarray(Image.open(write_png(bands.layer, tmp_path / "bands.png", bands.metadata)).convert("RGB"))
    idx = palette.band_colour(bands.layer["band"].to_numpy(), len(bands.layer))
    for i in idx:
        assert _has_colour(img, _blend(palette.SEQUENTIAL_COLOURS[i], (255, 255, 255), palette.CELL_FILL_OPACITY),
                           tol=8), i
    assert read_layer_metadata(tmp_path / "bands.png")["bands"] == len(bands.layer)


def test_series_time_panel_never_covers_the_legend_on_a_phone_or_a_desktop(series, tmp_path, open_map):
    """At 390 × 844 the time slider took the bottom right at 22em (the whole width) and covered the collapsed
    legend at the bottom left."""
    from dpgeo.io.html import SMALL_SCREEN
    from dpgeo.io.html_series import SERIES_CSS

    assert SMALL_SCREEN in SERIES_CSS  # the page's own idea of a phone
    series.to_file(tmp_path / "series.html", basemap="none")
    for view in (PHONE, VIEW):
        m = open_map(tmp_path / "series.html", viewport=view)
        time, legend = _rect(m, "#dpgeo-time"), _rect(m, "#dpgeo-legend")
        assert not _overlap(time, legend), (view, time, legend)
        if view is PHONE:
            assert m.page.evaluate("document.querySelector('#dpgeo-legend').open") is False
            m.page.click("#dpgeo-legend > summary")  # opened, it grows upwards, still clear of the slider
            time, legend = _rect(m, "#dpgeo-time"), _rect(m, "#dpgeo-legend")
            assert not _overlap(time, legend), (time, legend)
            assert not _overlap(time, _rect(m, "#dpgeo-privacy"))
        assert m.errors == []


def test_labels_that_would_run_together_are_hidden(tmp_path, open_map):
    """Small clusters side by side (downtown): the page shows a label only where it overlaps no larger one."""
    import geopandas as gpd

    g = gpd.GeoDataFrame({"cluster_id": np.arange(1, 31), "dp_count": 700 + np.arange(30) * 37 % 300},
                         geometry=[shapely.box(480000 + 22 * i, 4980000, 480020 + 22 * i, 4980020) for i in range(30)],
                         crs=32615)
    write_html(g, tmp_path / "crowd.html", {"mechanism": "test", "differentially_private": True, "epsilon": 1.0},
               basemap="none")
    for view in (VIEW, PHONE):
        m = open_map(tmp_path / "crowd.html", viewport=view)
        shown = ("Array.from(document.querySelectorAll('.dp-label')).filter(e => "
                 "getComputedStyle(e).visibility !== 'hidden').map(e => { const r = "
                 "e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; })")
        opened = m.page.evaluate(shown)  # opened zoomed to the clusters (all 30 on a desktop)
        assert not any(_overlap(a, b) for i, a in enumerate(opened) for b in opened[i + 1:])
        assert len(opened) == 30 or view is PHONE and len(opened) > 5
        m.page.evaluate("window.dpgeoMap.setZoom(window.dpgeoMap.getZoom() - 3, {animate: false})")
        m.page.wait_for_timeout(300)
        boxes = m.page.evaluate(shown)  # zoomed out, they would run together
        assert 0 < len(boxes) < len(opened)
        assert not any(_overlap(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1:])
        m.page.evaluate("window.dpgeoMap.setZoom(window.dpgeoMap.getZoom() + 3, {animate: false})")
        m.page.wait_for_timeout(300)
        more = len(m.page.evaluate(shown))
        assert more > len(boxes)
        assert m.errors == []
