"""The level switch of the HTML map: the tree of density levels of a release without a radius.

A release of spans without a radius (``auto``) carries, besides its flat map,
the tree of its clusters over every density level (:attr:`dpgeo.Release.levels`:
nested polygons with ``level_id``, ``parent_id``, ``level``, ``level_top``,
``depth``, ``cluster_id``). When the map is written with its levels,
:func:`dpgeo.io.html.html_document` adds what :func:`level_switch` makes: a
control that shows the flat map (the default), every level at once, or the
map at one density threshold ``t`` — the clusters of the tree that exist at
``t``, drawn over the levels they are nested in — in graduated colours
(:func:`dpgeo.io.palette.level_classes`), a legend of the colours, and a
paragraph of the privacy panel that says what the levels are.

The switch is its own script (a constant, so the page's Content-Security-Policy
names it by hash) and its own JSON data; it draws with the map's own shapes
(``window.dpgeoShape``), so the levels open as fast as the clusters.
"""

from __future__ import annotations

import html
from dataclasses import dataclass

import numpy as np

from . import palette
from .geojson import geojson_collection

__all__ = ["PageAddon", "level_switch", "level_views", "LEVELS_JS"]

#: CSS pixels per millimetre (96 dpi), as the map's outlines.
_PX_PER_MM = 96 / 25.4
#: Fill opacity of a level (the palette's: lower than a cell's, as the levels are drawn nested, one over the other).
LEVEL_FILL_OPACITY = palette.LEVEL_FILL_OPACITY


@dataclass(frozen=True)
class PageAddon:
    """What a part of the HTML map adds to the page (all of it text the page embeds as is).

    Attributes
    ----------
    css : str
        Style rules (inline ``<style>``).
    body : str
        HTML placed after the map's panels: controls and ``application/json`` data elements.
    privacy : str
        HTML appended to the privacy panel.
    js : str
        A constant script run after the map's own (the page's CSP lists its hash).
    """

    css: str
    body: str
    privacy: str
    js: str


LEVELS_JS = r"""
(function () {
  "use strict";
  var map = window.dpgeoMap, flat = window.dpgeoClusters, box = document.getElementById("dpgeo-levels");
  if (!map || !box || !window.dpgeoShape) { return; }
  function data(id) { return JSON.parse(document.getElementById(id).textContent); }
  var fc = data("dpgeo-levels-layer"), cfg = data("dpgeo-levels-config");
  var byId = {}, shapes = {}, current = null, select = document.getElementById("dpgeo-level-switch");
  fc.features.forEach(function (f) { byId[String(f.properties.level_id)] = f; });
  function fmt(v) { return (v === null || v === undefined) ? "n/a" : String(v); }
  function popup(p) {
    var box = document.createElement("div");
    box.className = "dp-popup dp-level-popup";
    var head = document.createElement("strong");
    head.textContent = "Level " + fmt(p.level_id) + " (depth " + fmt(p.depth) + ")";
    box.appendChild(head);
    var table = document.createElement("table");
    function row(k, v, cls) {
      var tr = table.insertRow(), th = document.createElement("th"), td = tr.insertCell(-1);
      th.textContent = k; tr.insertBefore(th, td); td.textContent = v;
      if (cls) { td.className = cls; }
    }
    row("density", "\u2265 " + fmt(p.level) + (p.level_top > p.level ? " (up to " + fmt(p.level_top) + ")" : ""),
        "dp-density");
    row("dp_count", fmt(p.dp_count), "dp-count");
    row("95% interval", (p.dp_count_low === null || p.dp_count_low === undefined) ? "none"
        : fmt(p.dp_count_low) + " \u2013 " + fmt(p.dp_count_high), "dp-interval");
    if (p.n_cells !== undefined) { row("cells", fmt(p.n_cells)); }
    if (typeof p.area_m2 === "number") { row("area", (p.area_m2 / 1e6).toFixed(3) + " km\u00b2"); }
    if (p.parent_id !== null && p.parent_id !== undefined) { row("inside", "level " + fmt(p.parent_id)); }
    if (p.cluster_id !== null && p.cluster_id !== undefined) { row("on the map", "cluster " + fmt(p.cluster_id)); }
    box.appendChild(table);
    return box;
  }
  function shape(id) {
    if (!shapes[id]) {
      var f = byId[id];
      shapes[id] = window.dpgeoShape(f, "dp-level dp-lv" + cfg.classOf[id]);
      shapes[id].bindPopup(function () { return popup(f.properties); });
    }
    return shapes[id];
  }
  function show(value) {
    var view = null;
    cfg.views.forEach(function (v) { if (v.value === value) { view = v; } });
    map.closePopup();
    if (current) {
      current.eachLayer(function (l) { if (l._path) { L.DomUtil.removeClass(l._path, "dp-level-on"); } });
      map.removeLayer(current); current = null;
    }
    if (!view) {  // the flat map
      value = "flat";
      if (!map.hasLayer(flat)) { flat.addTo(map); }
    } else {
      map.removeLayer(flat);
      current = L.featureGroup(view.ids.map(function (id) { return shape(String(id)); })).addTo(map);
      // the clusters that exist at the chosen density: outlined (the others are the levels they are nested in)
      view.shown.forEach(function (id) { L.DomUtil.addClass(shape(String(id))._path, "dp-level-on"); });
    }
    document.documentElement.classList.toggle("dp-levels-view", value !== "flat");
    document.documentElement.setAttribute("data-dpgeo-level", value);
    document.getElementById("dpgeo-levels-shown").textContent = view ? view.note : "";
    if (select.value !== value) { select.value = value; }
  }
  select.addEventListener("change", function () { show(select.value); });
  window.dpgeoLevels = {show: show, layer: function () { return current; }};
  show("flat");
})();
"""


def _esc(v) -> str:
    return html.escape(str(v), quote=True)


def _num(v) -> str:
    """A density or count for people: an integer without decimals, else 4 significant digits."""
    v = float(v)
    return f"{v:.0f}" if v == round(v) else f"{v:.4g}"


def level_views(levels) -> list:
    """The views of the switch: every level at once, then one per density threshold.

    The thresholds are the distinct ``level`` values (where the clusters of the
    tree separate). At a threshold ``t`` a cluster of the tree *exists* when
    ``level <= t`` and ``t < level_top`` (where it splits), or ``t <= level_top``
    for one without children (``level_top`` is its peak). The view of ``t``
    draws the clusters that exist at ``t`` over the levels they are nested in
    (their ancestors), ancestors first.

    Parameters
    ----------
    levels : pandas.DataFrame
        The levels layer (``level_id``, ``parent_id``, ``level``, ``level_top``, ``depth``).

    Returns
    -------
    list of dict
        ``{"value", "threshold", "ids", "shown"}``: the option's value (``"all"``
        or ``"t<threshold>"``), the threshold (None for all), the level ids to
        draw in order, and the ids of the clusters that exist there.

    Examples
    --------
    >>> import pandas as pd
    >>> lv = pd.DataFrame({"level_id": [1, 2, 3], "parent_id": pd.array([None, 1, 1], dtype="Int64"),
    ...                    "level": [8.0, 12.0, 12.0], "level_top": [12.0, 30.0, 15.0], "depth": [0, 1, 1]})
    >>> [(v["value"], v["ids"], v["shown"]) for v in level_views(lv)]
    [('all', [1, 2, 3], [1, 2, 3]), ('t8', [1], [1]), ('t12', [1, 2, 3], [2, 3])]
    """
    ids = np.asarray(levels["level_id"], dtype=np.int64)
    parent = np.asarray(levels["parent_id"].astype("Float64").fillna(-1).to_numpy(dtype=float), dtype=np.int64)
    lo = np.asarray(levels["level"], dtype=float)
    top = np.asarray(levels["level_top"], dtype=float)
    depth = np.asarray(levels["depth"], dtype=np.int64)
    leaf = ~np.isin(ids, parent[parent >= 0])
    pos = {int(i): k for k, i in enumerate(ids.tolist())}
    draw = np.lexsort((ids, depth))  # ancestors (shallower) first
    views = [{"value": "all", "threshold": None, "ids": ids[draw].tolist(), "shown": ids[draw].tolist()}]
    for t in np.unique(lo).tolist():
        exists = (lo <= t) & ((t < top) | (leaf & (t <= top)))
        keep = exists.copy()
        for k in np.flatnonzero(exists).tolist():  # and every level it is nested in
            p = int(parent[k])
            while p >= 0 and not keep[pos[p]]:
                keep[pos[p]] = True
                p = int(parent[pos[p]])
        order = draw[keep[draw]]
        views.append({"value": f"t{_num(t)}", "threshold": t, "ids": ids[order].tolist(),
                      "shown": ids[draw[exists[draw]]].tolist()})
    return views


def _per_km2(t, cell_m) -> str:
    """A density of ``t`` noisy points in 3×3 cells of ``cell_m`` metres, per km², for people (2 digits).

    Examples
    --------
    >>> _per_km2(12, 74.0), _per_km2(12, None)
    (' (≈ 240 per km²)', '')
    """
    if not isinstance(cell_m, (int, float)) or not cell_m > 0 or not t > 0:
        return ""
    v = float(f"{t / (9 * cell_m * cell_m) * 1e6:.2g}")
    return f" (≈ {v:,.0f} per km²)" if v >= 10 else f" (≈ {v:g} per km²)"


def _css() -> str:
    width = f"{palette.OUTLINE_WIDTH_MM * _PX_PER_MM * 0.75:.2f}px"
    rules = [
        "#dpgeo-levels { top: 84px; left: 10px; max-width: calc(100vw - 40px); }",
        "#dpgeo-levels label { font-weight: 600; margin-right: 4px; }",
        "#dpgeo-levels select { font: inherit; max-width: min(22em, calc(100vw - 110px)); }",
        ".dp-level-ramp { display: none; margin-top: 4px; max-width: 20em; }",
        ".dp-levels-view .dp-level-ramp { display: block; }",
        ".dp-ramp { display: flex; flex-wrap: wrap; gap: 2px 3px; margin-top: 2px; }",
        (".dp-ramp-step { display: inline-flex; flex-direction: column; align-items: flex-start; "
         "font-size: 11px; min-width: 2.2em; }"),
        ".dp-level-shown { color: #555; margin-top: 2px; }",
        # the flat map's labels and cluster list belong to the flat map
        ".dp-levels-view .leaflet-tooltip.dp-label { display: none; }",
        (".dp-levels-view #dpgeo-legend > :not(summary), .dp-levels-view #dpgeo-legend .dp-legend-title "
         "{ display: none; }"),
        (f".dp-level {{ fill-opacity: {LEVEL_FILL_OPACITY}; stroke-opacity: 1; stroke-width: {width}; "
         "stroke-linecap: round; stroke-linejoin: round; fill-rule: evenodd; }"),
        (f".dp-level.dp-level-on {{ stroke: #202020; "
         f"stroke-width: {2 * palette.OUTLINE_WIDTH_MM * _PX_PER_MM:.2f}px; }}"),
    ]
    rules += [f".dp-lv{i} {{ fill: {f}; stroke: {o}; }}"
              for i, (f, o) in enumerate(zip(palette.LEVEL_COLOURS, palette.LEVEL_OUTLINE_COLOURS))]
    return "\n".join(rules) + "\n"


def level_switch(levels, metadata: dict, json_data) -> PageAddon:
    """What the HTML map adds for a release with levels: the switch, its legend, its data and the
    privacy panel's paragraph.

    Parameters
    ----------
    levels : geopandas.GeoDataFrame
        The levels layer (:attr:`dpgeo.Release.levels`), any CRS.
    metadata : dict
        The release's metadata (the unit of the levels, the cell width and the
        statement of what holds at every level).
    json_data : callable
        Makes JSON safe inside a ``<script type="application/json">`` element
        (the map's own).

    Returns
    -------
    PageAddon
    """
    md = metadata or {}
    lv = levels.reset_index(drop=True)
    fc = geojson_collection(lv, {"layer": "levels", "release_id": md.get("release_id")})
    classes, ranges = palette.level_classes(lv["level"].to_numpy(dtype=float))
    class_of = {str(int(i)): int(c) for i, c in zip(lv["level_id"].tolist(), classes.tolist())}
    cell = md.get("cell_width_m")
    views = level_views(lv)
    options = ['<option value="flat" selected>clusters (the map)</option>']
    cfg_views = []
    for v in views:
        n = len(v["shown"])
        if v["threshold"] is None:
            label = f"every level ({len(lv):,} nested clusters)"
            note = f"{len(lv):,} clusters over {len(views) - 1:,} density levels, nested"
        else:
            t = v["threshold"]
            label = f"density ≥ {_num(t)}{_per_km2(t, cell)}: {n:,} cluster{'s' if n != 1 else ''}"
            note = (f"{n:,} cluster{'s' if n != 1 else ''} at density ≥ {_num(t)}, over the "
                    f"level{'s' if len(v['ids']) - n != 1 else ''} {'they are' if n != 1 else 'it is'} nested in "
                    "(outlined: the clusters at this density)")
        options.append(f'<option value="{_esc(v["value"])}">{_esc(label)}</option>')
        cfg_views.append({"value": v["value"], "ids": v["ids"], "note": note,
                          "shown": [] if v["threshold"] is None else v["shown"]})
    unit = md.get("level_unit") or "noisy points in the 3x3 cells around a cell"
    cells_of = f" (cells of {cell:.0f} m)" if isinstance(cell, (int, float)) else ""
    ramp = [f'<div class="dp-legend-title">density: {_esc(unit.replace("3x3", "3 × 3"))}{_esc(cells_of)}</div>',
            '<div class="dp-ramp">']
    for lo, hi, c in ranges:
        text = _num(lo) if lo == hi else f"{_num(lo)}–{_num(hi)}"
        ramp.append(f'<span class="dp-ramp-step" title="{_esc(text)}"><span class="dp-swatch" style="background:'
                    f'{palette.LEVEL_COLOURS[c]}{round(LEVEL_FILL_OPACITY * 255):02x};border-color:'
                    f'{palette.LEVEL_OUTLINE_COLOURS[c]}"></span>{_esc(_num(lo))}</span>')
    ramp.append("</div>")
    body = (
        '<div id="dpgeo-levels" class="dp-panel" role="group" aria-label="Density levels">'
        '<label for="dpgeo-level-switch">Show</label>'
        '<select id="dpgeo-level-switch">' + "".join(options) + "</select>"
        '<div class="dp-level-ramp">' + "".join(ramp)
        + '<div class="dp-legend-note dp-level-shown" id="dpgeo-levels-shown"></div></div></div>\n'
        '<script type="application/json" id="dpgeo-levels-layer">' + json_data(fc) + "</script>\n"
        '<script type="application/json" id="dpgeo-levels-config">'
        + json_data({"views": cfg_views, "classOf": class_of}) + "</script>\n")
    lows = lv["level"].to_numpy(dtype=float)
    tops = lv["level_top"].to_numpy(dtype=float)
    width = f", {cell:.4g} m wide" if isinstance(cell, (int, float)) else ""
    text = (f"The switch at the top left also shows the tree of {len(lv):,} nested clusters of this release over "
            f"{len(views) - 1:,} density levels, from {_num(lows.min())} to {_num(tops.max())} {unit}{width}. "
            "A density level is a threshold: its clusters are the connected areas whose density reaches it, each "
            "inside the one of the level below; the map's clusters are among them. They are read off the same "
            "noisy histogram as the map: no further privacy cost.")
    guarantee = md.get("levels_guarantee")
    if guarantee:
        text += f" {str(guarantee)[:1].upper()}{str(guarantee)[1:]}."
    privacy = f'<p class="dp-summary dp-levels-note"><strong>Density levels.</strong> {_esc(text)}</p>'
    return PageAddon(css=_css(), body=body, privacy=privacy, js=LEVELS_JS)
