"""A release as one self-contained HTML map (Leaflet, no network).

The page holds everything it needs: the vendored Leaflet (``vendor/leaflet``,
its licence in a comment), the release's GeoJSON exactly as
:func:`dpgeo.io.geojson_collection` makes it (RFC 7946, the privacy metadata
in its ``"dpgeo"`` member), the study-area outline, a legend and a privacy
panel, under a basemap: OpenStreetMap's standard tiles by default
(``basemap="osm"``, credited "© OpenStreetMap contributors" with a link to
its copyright page, as OpenStreetMap's tile usage policy asks), any XYZ tile
URL template, or ``basemap="none"`` for a map that requests nothing from any
host. Its Content-Security-Policy allows no connection, no font, no image
other than ``data:`` and the basemap's tiles (that host alone), and no
script but its own (by hash). On a small screen (a phone) the privacy
panel and the legend start collapsed, in opposite corners, and can be opened
without covering each other. A release with its tree of density levels (spans
without a radius) gets a switch between the map and its levels
(:mod:`dpgeo.io.html_levels`).

Every string that comes from the metadata or the caller is HTML-escaped; the
GeoJSON is embedded as JSON data (``<`` ``>`` ``&`` written as ``\\u`` escapes),
never as code.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import html
import json
import os
import re
from importlib import resources

import numpy as np

from ..errors import InputError
from . import palette
from .atomic import atomic_write
from .basemap import DEFAULT_BASEMAP, OSM_ATTRIBUTION, OSM_TILES, basemap_config, check_basemap  # noqa: F401
from .drawing import map_heading as _heading
from .drawing import study_area_outline
from .geojson import geojson_collection
from .html_series import SERIES_CSS, SERIES_JS, label_periods, series_config, series_controls_html, series_legend_html
from .statement import privacy_statement

__all__ = ["write_html", "html_document", "read_html_metadata", "check_basemap", "basemap_config", "leaflet_version",
           "study_area_outline", "OSM_TILES", "OSM_ATTRIBUTION", "DEFAULT_BASEMAP"]

#: Features labelled with their ``dp_count`` on the map (more would only clutter it).
MAX_LABELS = 200
#: Clusters listed one by one in the legend.
MAX_LEGEND_ROWS = 24
#: CSS pixels per millimetre (96 dpi).
_PX_PER_MM = 96 / 25.4
#: Screens this small (CSS pixels) start with the panels collapsed.
SMALL_SCREEN = "(max-width: 640px), (max-height: 500px)"


@functools.lru_cache(maxsize=1)
def _vendor() -> dict:
    """The vendored Leaflet: code, stylesheet, licence text and VERSION fields."""
    root = resources.files("dpgeo.io").joinpath("vendor", "leaflet")

    def read(name):
        return root.joinpath(name).read_text(encoding="utf-8")

    js = re.sub(r"\n//# sourceMappingURL=\S+\s*$", "\n", read("leaflet.js"))
    # the only url()s in leaflet.css are images of controls and markers this page never shows
    # (layer switcher, default marker) and an old-IE VML behaviour: drop them, so nothing can be fetched
    css = re.sub(r"url\([^)]*\)", "none", read("leaflet.css"))
    info = dict(line.split(": ", 1) for line in read("VERSION").splitlines() if ": " in line)
    return {**info, "js": js, "css": css, "licence_text": read("LICENSE")}


def leaflet_version() -> str:
    """Version of the vendored Leaflet (from ``vendor/leaflet/VERSION``).

    Examples
    --------
    >>> leaflet_version().count(".")
    2
    """
    return _vendor()["version"]


# -- the page's own code and style (constant, so their CSP hashes are fixed) ------------

_APP_JS = r"""
(function () {
  "use strict";
  function data(id) { return JSON.parse(document.getElementById(id).textContent); }
  var release = data("dpgeo-layer");
  var cfg = data("dpgeo-config");
  var map = L.map("map", {zoomSnap: 0.25});
  map.attributionControl.addAttribution("dpgeo");
  if (cfg.bounds) { map.fitBounds(cfg.bounds, {padding: [12, 12]}); } else { map.setView([0, 0], 1); }
  if (cfg.basemap) {
    var credit = cfg.basemap.attribution;
    if (cfg.basemap.link) { credit = '<a href="' + cfg.basemap.link + '">' + credit + "</a>"; }
    L.tileLayer(cfg.basemap.url, {attribution: credit, maxZoom: 19,
                                  referrerPolicy: cfg.basemap.referrerPolicy}).addTo(map);
  }
  // a phone: the panels start collapsed (a tap on their heading opens them)
  if (window.matchMedia && window.matchMedia(cfg.smallScreen).matches) {
    ["dpgeo-privacy", "dpgeo-legend"].forEach(function (id) {
      var e = document.getElementById(id);
      if (e) { e.open = false; }
    });
  }
  if (cfg.studyArea) {
    L.geoJSON(cfg.studyArea, {interactive: false, style: {color: cfg.studyAreaColour, weight: 1.5,
      dashArray: "6 4", fill: false, className: "dp-study-area"}}).addTo(map);
  }
  function fmt(v) { return (v === null || v === undefined) ? "n/a" : String(v); }
  function popup(p) {
    var box = document.createElement("div");
    box.className = "dp-popup";
    var head = document.createElement("strong");
    head.textContent = (p.hotspot ? p.hotspot : p.h3 ? "H3 cell " + p.h3 : p.band !== undefined ? "Band " + fmt(p.band)
      : p.cluster_id !== undefined ? "Cluster " + fmt(p.cluster_id) : "Cell " + fmt(p.cell_id)) +
      (p.period ? " \u2014 " + p.period : "");
    box.appendChild(head);
    var table = document.createElement("table");
    function row(k, v, cls) {
      var tr = table.insertRow(), th = document.createElement("th"), td = tr.insertCell(-1);
      th.textContent = k; tr.insertBefore(th, td); td.textContent = v;
      if (cls) { td.className = cls; }
    }
    if (p.period) { row("period", p.period + (p.period_start ? " (" + String(p.period_start).slice(0, 10) + " to " +
                                               String(p.period_end).slice(0, 10) + ")" : ""), "dp-period"); }
    if (p.dp_total !== undefined) {
      row("dp_total", fmt(p.dp_total), "dp-count");
      row("95% interval", fmt(p.dp_total_low) + " \u2013 " + fmt(p.dp_total_high), "dp-interval");
    } else {
      row("dp_count", fmt(p.dp_count), "dp-count");
      row("95% interval", (p.dp_count_low === null || p.dp_count_low === undefined) ? cfg.noInterval
          : fmt(p.dp_count_low) + " \u2013 " + fmt(p.dp_count_high), "dp-interval");
    }
    if (p.gi_z !== undefined) { row("Gi* z", Number(p.gi_z).toFixed(2)); row("p", Number(p.gi_p).toPrecision(3)); }
    if (p.n_cells !== undefined) {
      row("cells", fmt(p.n_cells) + (cfg.cellWidth ? " of " + cfg.cellWidth + " \u00d7 " + cfg.cellWidth + " m" : ""));
    }
    if (typeof p.area_m2 === "number") { row("area", (p.area_m2 / 1e6).toFixed(3) + " km\u00b2"); }
    box.appendChild(table);
    return box;
  }
  // One SVG path per feature through Leaflet's own renderer, events and popups, but with the
  // geometry kept in typed arrays of Web Mercator unit coordinates and the colours in CSS classes
  // (L.Polygon keeps one LatLng and several Point objects per vertex and sets eight presentation
  // attributes per path: a 10 MB layer then took several seconds to open).
  var MAXLAT = 85.0511287798, RAD = Math.PI / 180, FOURPI = 4 * Math.PI;
  var ClusterShape = L.Path.extend({
    initialize: function (feature, options) {
      L.setOptions(this, options);
      this.feature = feature;
      var g = feature.geometry, polys = !g ? [] : g.type === "MultiPolygon" ? g.coordinates
        : g.type === "Polygon" ? [g.coordinates] : [];
      var rings = [], u0 = Infinity, v0 = Infinity, u1 = -Infinity, v1 = -Infinity, p, r, i, n, ring, a, c, sn, u, v;
      for (p = 0; p < polys.length; p++) {
        for (r = 0; r < polys[p].length; r++) {
          ring = polys[p][r]; n = ring.length; a = new Float64Array(2 * n);
          for (i = 0; i < n; i++) {
            c = ring[i];
            sn = Math.sin(Math.max(-MAXLAT, Math.min(MAXLAT, c[1])) * RAD);
            u = (c[0] + 180) / 360; v = 0.5 - Math.log((1 + sn) / (1 - sn)) / FOURPI;
            a[2 * i] = u; a[2 * i + 1] = v;
            if (u < u0) { u0 = u; } if (u > u1) { u1 = u; } if (v < v0) { v0 = v; } if (v > v1) { v1 = v; }
          }
          rings.push(a);
        }
      }
      this._unitRings = rings;
      this._unitBox = rings.length ? [u0, v0, u1, v1] : null;
    },
    getBounds: function () {
      var b = this._unitBox;
      if (!b) { return null; }
      function lat(v) { return Math.atan(Math.sinh(Math.PI * (1 - 2 * v))) / RAD; }
      return L.latLngBounds([lat(b[3]), b[0] * 360 - 180], [lat(b[1]), b[2] * 360 - 180]);
    },
    getCenter: function () { var b = this.getBounds(); return b ? b.getCenter() : null; },
    _project: function () {
      // relative moves (h, v, l) between vertices rounded to pixels; a vertex within 1 px of the
      // last one drawn is skipped (Leaflet's default smoothing, radial part)
      var map = this._map, k = 256 * Math.pow(2, map.getZoom()), o = map.getPixelOrigin(), ox = o.x, oy = o.y;
      var parts = [], rings = this._unitRings, r, a, i, x, y, lx, ly, dx, dy, s;
      for (r = 0; r < rings.length; r++) {
        a = rings[r];
        lx = Math.round(a[0] * k); ly = Math.round(a[1] * k);
        s = "M" + (lx - ox) + " " + (ly - oy);
        for (i = 2; i < a.length - 2; i += 2) {
          x = Math.round(a[i] * k); y = Math.round(a[i + 1] * k); dx = x - lx; dy = y - ly;
          if (dx * dx + dy * dy <= 1) { continue; }
          if (dy === 0) { s += "h" + dx; } else if (dx === 0) { s += "v" + dy; } else { s += "l" + dx + " " + dy; }
          lx = x; ly = y;
        }
        parts.push(s + "z");
      }
      this._d = parts.join("");
      var b = this._unitBox;
      this._pxBounds = b ? L.bounds([Math.round(b[0] * k) - ox, Math.round(b[1] * k) - oy],
                                    [Math.round(b[2] * k) - ox, Math.round(b[3] * k) - oy]) : null;
    },
    _update: function () {
      if (!this._map) { return; }
      var b = this._renderer._bounds, w = this.options.weight || 0;
      var show = this._pxBounds && b && L.bounds(b.min.subtract([w, w]), b.max.add([w, w])).intersects(this._pxBounds);
      this._renderer._setPath(this, show ? this._d : "");
    },
    _empty: function () { return !this._d; },
    _containsPoint: function () { return false; }
  });
  // stroke and fill come from the classes dp-cluster and dp-c0 ... dp-c11 (the palette), not from
  // per-path attributes: the renderer only creates the element with its classes
  var renderer = new (L.SVG.extend({
    _initPath: function (layer) {
      var path = layer._path = L.SVG.create("path");
      path.setAttribute("class", layer.options.className + " leaflet-interactive");
      this._layers[L.stamp(layer)] = layer;
    }
  }))();
  var clusters = L.featureGroup(release.features.map(function (f, k) {
    var i = cfg.featureColour ? cfg.featureColour[k] : (cfg.colourOf[String(f.properties.cluster_id)] || 0);
    return new ClusterShape(f, {renderer: renderer, weight: cfg.weight, className: "dp-cluster dp-c" + i});
  }));
  clusters.bindPopup(function (layer) { return popup(layer.feature.properties); });
  clusters.addTo(map);
  window.dpgeoLabels = cfg.labels.map(function (l) {
    var s = document.createElement("span");
    s.textContent = l[2];
    var t = L.tooltip({permanent: true, direction: "center", className: "dp-label", interactive: false})
      .setLatLng([l[0], l[1]]).setContent(s).addTo(map);
    return {period: l[3], tooltip: t};
  });
  // labels that would overlap one placed before (a larger count: they come largest first) are hidden
  window.dpgeoDeclutter = function () {
    var boxes = [];
    window.dpgeoLabels.forEach(function (l) {
      var el = l.tooltip.getElement();
      if (!el || !map.hasLayer(l.tooltip)) { return; }
      el.classList.remove("dp-label-hidden");
      var r = el.getBoundingClientRect();
      var hit = boxes.some(function (b) {
        return r.left < b.right && b.left < r.right && r.top < b.bottom && b.top < r.bottom;
      });
      if (hit) { el.classList.add("dp-label-hidden"); } else { boxes.push(r); }
    });
  };
  map.on("zoomend", window.dpgeoDeclutter);
  window.dpgeoMap = map;
  window.dpgeoClusters = clusters;
  // the same lean shapes for other layers of the page (the density levels: dpgeo/io/html_levels.py)
  window.dpgeoShape = function (feature, className) {
    return new ClusterShape(feature, {renderer: renderer, weight: cfg.weight, className: className});
  };
  map.whenReady(function () {
    requestAnimationFrame(function () { requestAnimationFrame(function () {
      window.dpgeoDeclutter();
      window.dpgeoDrawnAt = performance.now();
      document.documentElement.setAttribute("data-dpgeo-drawn", String(release.features.length));
    }); });
  });
})();
"""

_PAGE_CSS = """
html, body { margin: 0; height: 100%; font: 13px/1.35 system-ui, -apple-system, "Segoe UI", Roboto, Arial, sans-serif; }
#map { position: absolute; inset: 0; background: #f3f3ef; }
.dp-panel { position: absolute; z-index: 1000; background: rgba(255,255,255,0.95); color: #222;
  border-radius: 6px; box-shadow: 0 1px 5px rgba(0,0,0,0.35); padding: 8px 10px; }
#dpgeo-privacy { top: 10px; right: 10px; width: 24em; max-width: calc(100vw - 80px); max-height: calc(100vh - 60px);
  overflow: auto; }
.dp-panel summary { cursor: pointer; font-weight: 600; }
#dpgeo-legend { bottom: 24px; left: 10px; max-height: 45vh; max-width: calc(100vw - 20px); overflow: auto; }
#dpgeo-legend summary { list-style-position: outside; margin-left: 1em; }
.dp-title { font-size: 14px; margin: 0 0 2px; display: inline; }
.dp-title::after { content: ""; display: block; }
@media SMALL_SCREEN {
  /* a phone: the privacy panel at the top right, the legend at the bottom left, each at most half the height */
  .dp-panel { padding: 6px 8px; }
  #dpgeo-privacy { width: auto; max-width: calc(100vw - 70px); max-height: calc(50vh - 24px); }
  #dpgeo-legend { max-height: calc(50vh - 44px); }
}
.dp-status { display: inline-block; padding: 2px 6px; border-radius: 3px; font-weight: 700; }
.dp-private { background: #e6f2e6; color: #1b5e20; }
.dp-not-private { background: #c00000; color: #fff; }
.dp-weak { background: #fff0c2; color: #7a4a00; }
.dp-reasons { color: #c00000; margin: 6px 0 6px 1.2em; padding: 0; }
.dp-summary { margin: 6px 0; }
.dp-panel dl { display: grid; grid-template-columns: 7.5em 1fr; gap: 3px 8px; margin: 6px 0 0; }
.dp-panel dt { font-weight: 600; color: #555; }
.dp-panel dd { margin: 0; overflow-wrap: anywhere; }
.dp-legend-title { font-weight: 600; margin-bottom: 4px; }
.dp-legend-row { display: flex; align-items: center; gap: 6px; white-space: nowrap; }
.dp-swatch { display: inline-block; width: 14px; height: 10px; border: 1.5px solid; }
.dp-swatch-area { display: inline-block; width: 14px; height: 0; border-top: 1.5px dashed; }
.dp-legend-note { color: #555; margin-top: 4px; max-width: 18em; white-space: normal; }
.dp-popup table { border-collapse: collapse; margin-top: 4px; }
.dp-popup th { text-align: left; font-weight: 600; padding-right: 8px; color: #555; }
.leaflet-tooltip.dp-label { background: transparent; border: none; box-shadow: none; padding: 0;
  font-weight: 700; font-size: 11px; color: #202020;
  text-shadow: 0 0 2px #fff, 0 0 2px #fff, 0 0 3px #fff; }
.leaflet-tooltip.dp-label::before { display: none; }
.leaflet-tooltip.dp-label.dp-label-hidden { visibility: hidden; }
""".replace("SMALL_SCREEN", SMALL_SCREEN)


def _palette_css(fills=palette.CLUSTER_COLOURS, outlines=palette.OUTLINE_COLOURS, *, opacity=palette.FILL_OPACITY,
                 width_mm=palette.OUTLINE_WIDTH_MM) -> str:
    """CSS of the feature paths: the shared style and one class per palette colour."""
    rules = [f".dp-cluster {{ fill-opacity: {opacity:.4f}; stroke-opacity: 1; "
             f"stroke-width: {width_mm * _PX_PER_MM:.2f}px; stroke-linecap: round; "
             "stroke-linejoin: round; fill-rule: evenodd; }"]
    rules += [f".dp-c{i} {{ fill: {f}; stroke: {o}; }}"
              for i, (f, o) in enumerate(zip(fills, outlines))]
    return "\n".join(rules) + "\n"


def _sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii") + "'"


def _json_data(obj) -> str:
    """JSON that is safe inside a ``<script type="application/json">`` element."""
    text = json.dumps(obj, separators=(",", ":"), allow_nan=False, ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _esc(v) -> str:
    return html.escape(str(v), quote=True)


# -- the page ---------------------------------------------------------------------------

def _style_legend_html(fills, outlines, legend, title, area_kind, n_total, heading, classes_note="") -> str:
    """The legend of a layer coloured by what its features hold (counts, bands, hot-spot classes)."""
    rows = [f'<div class="dp-legend-row"><span class="dp-swatch" style="background:{fills[i]}'
            f'{int(palette.FILL_ALPHA):02x};border-color:{outlines[i]}"></span>{_esc(label)}</div>'
            for i, label in legend[:MAX_LEGEND_ROWS]]
    if area_kind:
        rows.append(f'<div class="dp-legend-row"><span class="dp-swatch-area" '
                    f'style="border-color:{palette.STUDY_AREA_COLOUR}"></span>study area ({_esc(area_kind)})</div>')
    if classes_note:  # what the classes are (and why fewer than asked)
        rows.append(f'<div class="dp-legend-note dp-classes-note">{_esc(classes_note)}</div>')
    note = '<div class="dp-legend-note">Click a feature for its 95% interval.</div>' if n_total else ""
    return (f'<details id="dpgeo-legend" class="dp-panel" open><summary><h1 class="dp-title">{_esc(heading)}</h1>'
            f'<span class="dp-legend-title">{_esc(title)} ({n_total:,} features)</span></summary>'
            + "".join(rows) + note + "</details>")


def _legend_html(cluster_ids, idx, counts, area_kind, n_total, heading) -> str:
    rows = []
    order = np.argsort(cluster_ids, kind="stable")
    for j in order[:MAX_LEGEND_ROWS]:
        i = int(idx[j])
        c = counts[j]
        rows.append(
            f'<div class="dp-legend-row"><span class="dp-swatch" style="background:{palette.CLUSTER_COLOURS[i]}'
            f'{int(palette.FILL_ALPHA):02x};border-color:{palette.OUTLINE_COLOURS[i]}"></span>'
            f'cluster {_esc(cluster_ids[j])}: {_esc(c if c is not None else "n/a")}</div>')
    more = n_total - min(n_total, MAX_LEGEND_ROWS)
    if more:
        rows.append(f'<div class="dp-legend-note">… and {more:,} more clusters '
                    '(touching clusters never share a colour)</div>')
    if area_kind:
        rows.append(f'<div class="dp-legend-row"><span class="dp-swatch-area" '
                    f'style="border-color:{palette.STUDY_AREA_COLOUR}"></span>study area ({_esc(area_kind)})</div>')
    title = "No clusters" if n_total == 0 else f"{n_total:,} cluster{'s' if n_total != 1 else ''}: dp_count"
    note = '<div class="dp-legend-note">Click a cluster for its 95% interval.</div>' if n_total else ""
    return (f'<details id="dpgeo-legend" class="dp-panel" open><summary><h1 class="dp-title">{_esc(heading)}</h1>'
            f'<span class="dp-legend-title">{title}</span></summary>' + "".join(rows) + note + "</details>")


def _privacy_html(metadata, extra: str = "") -> str:
    s = privacy_statement(metadata)
    cls = ("dp-weak" if s.weak else "dp-private") if s.private else "dp-not-private"
    parts = [f'<details id="dpgeo-privacy" class="dp-panel" open>'
             f'<summary><span class="dp-status {cls}">{_esc(s.headline)}</span></summary>',
             f'<p class="dp-summary">{_esc(s.summary)}</p>']
    if not s.private:
        parts.append('<ul class="dp-reasons">' + "".join(f"<li>{_esc(r)}</li>" for r in s.reasons) + "</ul>")
    parts.append("<dl>" + "".join(f"<dt>{_esc(k)}</dt><dd>{_esc(v)}</dd>" for k, v in s.items) + "</dl>")
    parts.append(extra)  # what other parts of the page add (the density levels)
    parts.append("</details>")
    return "".join(parts)


def html_document(gdf, metadata: dict, *, basemap=DEFAULT_BASEMAP, attribution=None, title=None,
                  levels=None) -> str:
    """The self-contained HTML map of a cluster layer, as text.

    Parameters
    ----------
    gdf : geopandas.GeoDataFrame
        The cluster layer (any CRS): ``cluster_id``, ``dp_count``,
        ``dp_count_low``, ``dp_count_high``, ``n_cells``, ``area_m2``, geometry.
    metadata : dict
        The release's privacy metadata (shown in the panel, embedded in the
        GeoJSON's ``"dpgeo"`` member).
    basemap : str or None
        ``"osm"`` (default): OpenStreetMap's standard tiles; ``"none"`` (or
        None): no basemap, and the page requests nothing from any host; or an
        XYZ tile URL template. See :func:`basemap_config`.
    attribution : str, optional
        Text credited for a URL template's tiles (escaped, shown in the corner).
    title : str, optional
        The page's title and the map's heading (default: the mechanism).
    levels : geopandas.GeoDataFrame, optional
        The tree of density levels of the same release (spans without a
        radius): the page then has a switch between the map and its levels
        (:mod:`dpgeo.io.html_levels`).

    Returns
    -------
    str
        The page (UTF-8 text).

    Examples
    --------
    >>> import geopandas as gpd, shapely
    >>> g = gpd.GeoDataFrame({"cluster_id": [1], "dp_count": [42]}, geometry=[shapely.box(10, 50, 10.1, 50.1)],
    ...                      crs=4326)
    >>> page = html_document(g, {"differentially_private": True, "epsilon": 1.0, "mechanism": "<demo>"})
    >>> "&lt;demo&gt;" in page and "<demo>" not in page, "Differentially private" in page
    (True, True)
    >>> "tile.openstreetmap.org" in page, "tile.openstreetmap.org" in html_document(g, {}, basemap="none")
    (True, False)
    """
    md = dict(metadata or {})
    tiles = basemap_config(basemap, attribution)
    img_src = ["data:"] + ([tiles["csp"]] if tiles else [])
    fc = geojson_collection(gdf, md)
    props = [f["properties"] for f in fc["features"]]
    ids = np.array([p.get("cluster_id", 0) for p in props]) if props else np.zeros(0, int)
    fills, outlines, fidx, legend, legend_title, legend_note = palette.layer_style(gdf, md)
    idx = np.asarray(fidx, dtype=int) if legend is None else np.zeros(len(ids), int)  # neighbours differ
    colour_of = {str(k): int(i) for k, i in zip(ids.tolist(), idx.tolist())}
    counts = [p.get("dp_count") for p in props]

    area, area_kind = study_area_outline(md)
    bounds = None
    if area is not None:
        b = area.bounds
    elif len(gdf):
        b = tuple(gdf.to_crs(4326).total_bounds)
    else:
        b = None
    if b is not None and np.isfinite(b).all():
        bounds = [[b[1], b[0]], [b[3], b[2]]]
    series = series_config(md, clusters=legend is None, legend_title=legend_title)
    labels = []
    value = "dp_total" if "dp_total" in gdf else "dp_count"
    n_frames = len(series["periods"]) if series else 1
    if 0 < len(gdf) <= MAX_LABELS * n_frames and value in gdf:
        import shapely

        pts = shapely.point_on_surface(np.asarray(gdf.to_crs(4326).geometry.values))
        labels = [[round(float(p.y), 7), round(float(p.x), 7), str(c), per, c]
                  for p, c, per in zip(pts, gdf[value], label_periods(gdf))
                  if p is not None and not p.is_empty and c is not None]
        labels = [lab[:4] for lab in sorted(labels, key=lambda lab: -float(lab[4]))]  # the biggest kept in a crowd

    interval = md.get("dp_count_interval")
    cfg = {
        "weight": round((palette.OUTLINE_WIDTH_MM if legend is None else palette.CELL_OUTLINE_WIDTH_MM)
                        * _PX_PER_MM, 2),
        "colourOf": colour_of,
        "featureColour": None if legend is None else [int(i) for i in fidx],
        "studyArea": None if area is None else json.loads(_geom_json(area)),
        "studyAreaColour": palette.STUDY_AREA_COLOUR,
        "bounds": bounds,
        "labels": labels,
        "cellWidth": (f"{md['cell_width_m']:.4g}" if isinstance(md.get("cell_width_m"), (int, float)) else None),
        "noInterval": (str(interval) if interval and not str(interval).startswith("95%") else "none"),
        "basemap": None if tiles is None else {k: tiles[k] for k in ("url", "attribution", "referrerPolicy")}
        | {"link": None if tiles["link"] is None else html.escape(tiles["link"], quote=True)},
        "smallScreen": SMALL_SCREEN,
        "series": series,
    }

    addons = []  # parts of the page kept in their own modules: each adds style, HTML, a privacy note, a script
    if levels is not None and len(levels):
        from .html_levels import level_switch

        addons.append(level_switch(levels, md, _json_data))
    v = _vendor()
    csp = "; ".join([
        "default-src 'none'",
        " ".join([f"script-src {_sha256(v['js'])} {_sha256(_APP_JS)}" + (f" {_sha256(SERIES_JS)}" if series else "")]
                 + [_sha256(a.js) for a in addons]),
        "style-src 'unsafe-inline'",
        "img-src " + " ".join(img_src),
        "base-uri 'none'",
        "form-action 'none'",
    ])
    page_title = _heading(md, title)
    licence = v["licence_text"].replace("--", "- -")
    return "".join([
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n",
        f'<meta http-equiv="Content-Security-Policy" content="{_esc(csp)}">\n',
        '<meta name="referrer" content="no-referrer">\n',
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n',
        f'<meta name="generator" content="dpgeo {_esc(md.get("dpgeo_version", ""))}">\n',
        f"<title>{_esc(page_title)} — dpgeo map</title>\n",
        f"<!-- Leaflet {_esc(v.get('version', ''))} ({_esc(v.get('license', ''))}), inlined below under its licence:\n",
        licence, "-->\n",
        "<style>\n", v["css"], "\n</style>\n<style>", _PAGE_CSS,
        _palette_css(fills, outlines) if legend is None else
        _palette_css(fills, outlines, opacity=palette.CELL_FILL_OPACITY, width_mm=palette.CELL_OUTLINE_WIDTH_MM),
        SERIES_CSS if series else "", *[a.css for a in addons],
        "</style>\n</head>\n<body>\n",
        '<div id="map"></div>\n',
        "<noscript><p>This map needs JavaScript. The clusters and their privacy metadata are in the "
        "GeoJSON inside this file (element dpgeo-layer).</p></noscript>\n",
        _privacy_html(md, "".join(a.privacy for a in addons)), "\n",
        (series_legend_html(props, page_title, area_kind, palette.STUDY_AREA_COLOUR, colour_of) if series and legend is None
         else _legend_html(ids.tolist(), idx, counts, area_kind, len(props), page_title) if legend is None else
         _style_legend_html(fills, outlines, legend, legend_title, area_kind, len(props), page_title, legend_note)),
        ("\n" + series_controls_html(series)) if series else "", "\n",
        *[a.body for a in addons],
        '<script type="application/json" id="dpgeo-layer">', _json_data(fc), "</script>\n",
        '<script type="application/json" id="dpgeo-config">', _json_data(cfg), "</script>\n",
        "<script>", v["js"], "</script>\n",
        "<script>", _APP_JS, "</script>\n",
        ("<script>" + SERIES_JS + "</script>\n") if series else "",
        *[f"<script>{a.js}</script>\n" for a in addons],
        "</body>\n</html>\n",
    ])


def _geom_json(geom) -> str:
    import shapely

    return shapely.to_geojson(shapely.set_precision(geom, 1e-7))


def write_html(gdf, path, metadata: dict, *, basemap=DEFAULT_BASEMAP, attribution=None, title=None,
               levels=None) -> str:
    """Write the self-contained HTML map of a cluster layer, atomically.

    See :func:`html_document` for the parameters. The page works from
    ``file://``; with ``basemap="none"`` it needs no network at all.

    Returns
    -------
    str
        The path written.
    """
    path = os.fspath(path)
    page = html_document(gdf, metadata, basemap=basemap, attribution=attribution, title=title, levels=levels)

    def _w(tmp):
        with open(tmp, "w", encoding="utf-8", newline="\n") as f:
            f.write(page)

    atomic_write(path, _w)
    return path


_LAYER_RE = re.compile(r'<script type="application/json" id="dpgeo-layer">(.*?)</script>', re.S)


def read_html_metadata(path) -> dict:
    """The privacy metadata embedded in an HTML map written by dpgeo.

    Raises
    ------
    InputError
        The file is not an HTML map written by dpgeo.
    """
    p = os.fspath(path)
    try:
        with open(p, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read {p!r}: {exc}") from None
    m = _LAYER_RE.search(text)
    try:
        doc = json.loads(m.group(1)) if m else None
    except json.JSONDecodeError:
        doc = None
    md = doc.get("dpgeo") if isinstance(doc, dict) else None
    if not isinstance(md, dict):
        raise InputError(f"{p!r} has no dpgeo metadata (was it written by dpgeo?)")
    return md
