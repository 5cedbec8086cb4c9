"""The time slider of a map series on the HTML map (:mod:`dpgeo.io.html`).

A series layer (:mod:`dpgeo.series`: every feature has its ``period``) is
drawn one period at a time: a slider over the periods (from the release's
metadata, so a period with no feature is a frame like any other), a play /
pause button that steps through them, the period shown in the map's heading
and the page title, the legend's counts and the labels of the period shown,
and popups that say the period of the feature. The script is a constant of
its own (its hash joins the page's Content-Security-Policy only when a series
is drawn); everything the page shows comes from the release's data as text.
"""

from __future__ import annotations

import html
import json

import numpy as np

from . import palette

__all__ = ["SERIES_JS", "series_config", "series_controls_html", "series_legend_html", "FRAME_MS"]

#: Milliseconds per period while the series plays.
FRAME_MS = 1200

SERIES_JS = r"""
(function () {
  "use strict";
  var cfg = JSON.parse(document.getElementById("dpgeo-config").textContent);
  var s = cfg.series;
  if (!s || !s.periods.length) { return; }
  var map = window.dpgeoMap, group = window.dpgeoClusters, labels = window.dpgeoLabels || [];
  var byPeriod = {};
  group.getLayers().forEach(function (l) {
    var p = l.feature.properties.period;
    (byPeriod[p] = byPeriod[p] || []).push(l);
  });
  var slider = document.getElementById("dpgeo-slider"), play = document.getElementById("dpgeo-play");
  var shown = document.getElementById("dpgeo-period"), heading = document.querySelector("#dpgeo-legend .dp-title");
  var legendTitle = document.querySelector("#dpgeo-legend .dp-legend-title");
  var base = heading.textContent, baseTitle = document.title, timer = null, current = -1;
  function show(i) {
    current = i;
    var p = s.periods[i], layers = byPeriod[p.label] || [];
    group.clearLayers();
    layers.forEach(function (l) { group.addLayer(l); });
    labels.forEach(function (t) {
      if (t.period === p.label) { if (!map.hasLayer(t.tooltip)) { t.tooltip.addTo(map); } }
      else { t.tooltip.remove(); }
    });
    slider.value = String(i);
    shown.textContent = p.label + " (" + p.range + ")";
    heading.textContent = base + " \u2014 " + p.label;
    document.title = p.label + " \u2014 " + baseTitle;
    var n = 0;
    document.querySelectorAll("[data-dp-counts]").forEach(function (row) {
      var v = JSON.parse(row.getAttribute("data-dp-counts"))[p.label];
      row.querySelector(".dp-legend-count").textContent = (v === undefined || v === null) ? "\u2013" : String(v);
      row.classList.toggle("dp-absent", v === undefined);
      if (v !== undefined) { n += 1; }
    });
    legendTitle.textContent = s.cumulative ? layers.length + " cells with a running total above its 95% bound, " +
      "to the end of " + p.label : !s.clusters ? s.legendTitle + " (" + layers.length + " features in " + p.label +
      ")" : (n === 0 ? "No clusters" : n + " cluster" + (n === 1 ? "" : "s")) + " in " + p.label +
      (n ? ": dp_count" : "");
    if (window.dpgeoDeclutter) { window.dpgeoDeclutter(); }  // labels of this period that collide
    document.documentElement.setAttribute("data-dpgeo-period", p.label);
  }
  function stop() {
    if (timer) { clearInterval(timer); timer = null; }
    play.textContent = "\u25b6 Play";
    play.setAttribute("aria-pressed", "false");
  }
  slider.addEventListener("input", function () { stop(); show(Number(slider.value)); });
  play.addEventListener("click", function () {
    if (timer) { stop(); return; }
    play.textContent = "\u275a\u275a Pause";
    play.setAttribute("aria-pressed", "true");
    timer = setInterval(function () { show((current + 1) % s.periods.length); }, s.frameMs);
  });
  window.dpgeoShowPeriod = show;
  show(0);
})();
"""

SERIES_CSS = """
#dpgeo-time { bottom: 24px; right: 10px; width: 22em; max-width: calc(100vw - 40px); }
#dpgeo-time .dp-time-row { display: flex; align-items: center; gap: 8px; }
#dpgeo-slider { flex: 1; }
#dpgeo-play { font: inherit; padding: 2px 8px; cursor: pointer; min-width: 5.5em; }
#dpgeo-period { font-weight: 600; margin-top: 4px; display: block; }
.dp-absent { color: #999; }
@media (max-width: 640px), (max-height: 500px) {
  /* a phone: the time panel across the bottom, the legend (bottom left) just above it, never under it */
  #dpgeo-time { left: 10px; right: 10px; width: auto; max-width: none; }
  #dpgeo-legend { bottom: 104px; max-height: calc(50vh - 124px); }
}
"""


def _esc(v) -> str:
    return html.escape(str(v), quote=True)


def series_config(metadata, clusters=True, legend_title="") -> dict | None:
    """The slider's configuration from a series' metadata (its ``periods``), or None for a single release.

    ``clusters``: the layer's features are clusters (their legend lists each cluster's count in the period
    shown); else cells or bands, whose legend (``legend_title``) stays as it is."""
    periods = (metadata or {}).get("periods")
    if not isinstance(periods, list) or not periods or not isinstance(metadata.get("series"), dict):
        return None
    out = []
    for p in periods:
        start, end = str(p.get("period_start", "")), str(p.get("period_end", ""))
        out.append({"label": str(p.get("label")), "range": f"{start[:10]} to {end[:10]}, end excluded"})
    return {"periods": out, "frameMs": FRAME_MS, "cumulative": bool(metadata["series"].get("cumulative")),
            "clusters": bool(clusters), "legendTitle": str(legend_title or "")}


def series_controls_html(cfg) -> str:
    """The slider panel: play/pause, the slider over the periods, the period shown."""
    n = len(cfg["periods"])
    return ('<div id="dpgeo-time" class="dp-panel" role="group" aria-label="periods">'
            '<div class="dp-time-row"><button id="dpgeo-play" type="button" aria-pressed="false">&#9654; Play'
            f'</button><input id="dpgeo-slider" type="range" min="0" max="{n - 1}" step="1" value="0" '
            'aria-label="period"></div><span id="dpgeo-period"></span></div>')


def series_legend_html(props, heading, area_kind, area_colour, colour_of=None) -> str:
    """The legend of a series: every cluster id (one colour through the periods), its count in the period shown.

    ``colour_of`` maps each id (as text) to its colour (the page's: neighbours differ)."""
    ids = sorted({int(p["cluster_id"]) for p in props if p.get("cluster_id") is not None})
    idx = ([int((colour_of or {}).get(str(c), 0)) for c in ids] if colour_of
           else palette.colour_index(ids).tolist() if ids else [])
    counts = {c: {} for c in ids}
    for p in props:
        if p.get("cluster_id") is not None:
            counts[int(p["cluster_id"])][str(p.get("period"))] = p.get("dp_count")
    rows = []
    for c, i in zip(ids[:60], idx[:60]):
        data = _esc(json.dumps(counts[c], separators=(",", ":")))
        rows.append(f'<div class="dp-legend-row" data-dp-counts="{data}"><span class="dp-swatch" '
                    f'style="background:{palette.CLUSTER_COLOURS[i]}{int(palette.FILL_ALPHA):02x};'
                    f'border-color:{palette.OUTLINE_COLOURS[i]}"></span>cluster {c}: '
                    '<span class="dp-legend-count">–</span></div>')
    if len(ids) > 60:
        rows.append(f'<div class="dp-legend-note">… and {len(ids) - 60:,} more clusters</div>')
    if area_kind:
        rows.append(f'<div class="dp-legend-row"><span class="dp-swatch-area" style="border-color:{area_colour}">'
                    f'</span>study area ({_esc(area_kind)})</div>')
    note = ('<div class="dp-legend-note">A cluster keeps its id and colour from period to period. Click a cluster '
            'for its 95% interval.</div>') if ids else ""
    return (f'<details id="dpgeo-legend" class="dp-panel" open><summary><h1 class="dp-title">{_esc(heading)}</h1>'
            f'<span class="dp-legend-title"></span></summary>' + "".join(rows) + note + "</details>")


def label_periods(gdf) -> list:
    """The period of each feature (for its label), or Nones."""
    if "period" not in gdf.columns:
        return [None] * len(gdf)
    return [None if v is None else str(v) for v in np.asarray(gdf["period"], dtype=object)]
