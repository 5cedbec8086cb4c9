"""The web map page of a release: one self-contained HTML document.

Uses the library's HTML map writer (``dpgeo.io.html``) when it is installed;
otherwise a small page with the polygons drawn as inline SVG, ``dp_count`` and
its interval as tooltips, and the privacy parameters. Either way the page
loads nothing from any host, and every string from the metadata is escaped.
"""

from __future__ import annotations

import html
import math

__all__ = ["map_html"]


def map_html(gdf, metadata: dict, *, title: str, basemap=None, attribution=None) -> str:
    """The map page of a release layer (any CRS) with its privacy metadata."""
    try:
        from ..io.html import html_document
    except ImportError:
        return _svg_page(gdf, metadata, title)
    return html_document(gdf, metadata, basemap=basemap, attribution=attribution, title=title)


def _svg_page(gdf, metadata, title):
    import shapely

    g = gdf.to_crs(4326) if len(gdf) else gdf
    b = (metadata.get("domain") or {}).get("bounds") or (list(g.total_bounds) if len(g) else [0, 0, 1, 1])
    minx, miny, maxx, maxy = (float(v) for v in b)
    kx = math.cos(math.radians((miny + maxy) / 2))
    w, h = max((maxx - minx) * kx, 1e-9), max(maxy - miny, 1e-9)
    scale = 1000.0 / max(w, h)

    def pt(x, y):
        return f"{(x - minx) * kx * scale:.2f},{(maxy - y) * scale:.2f}"

    def ring(coords):
        return "M" + "L".join(pt(x, y) for x, y in coords[:-1]) + "Z"

    paths = []
    for _, row in g.iterrows():
        d = []
        for poly in shapely.get_parts(row.geometry):
            d.append(ring(list(poly.exterior.coords)))
            d += [ring(list(r.coords)) for r in poly.interiors]
        tip = (f"cluster {int(row['cluster_id'])}: dp_count {int(row['dp_count'])} "
               f"(95% interval {int(row['dp_count_low'])} to {int(row['dp_count_high'])})")
        paths.append(f'<path class="dp-cluster" d="{"".join(d)}"><title>{html.escape(tip)}</title></path>')
    rows = "".join(f"<tr><th>{html.escape(str(k))}</th><td>{html.escape(_fmt(metadata.get(k)))}</td></tr>"
                   for k in ("mechanism", "differentially_private", "epsilon", "delta", "neighbouring_relation",
                             "dataset", "release_id", "n_clusters", "dpgeo_version") if k in metadata)
    t = html.escape(title)
    vw, vh = w * scale, h * scale
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<title>{t}</title>
<style>body{{font-family:sans-serif;margin:1em}} svg{{border:1px solid #888;max-width:100%;height:auto}}
path.dp-cluster{{fill:#d95f02;fill-opacity:.55;stroke:#7f3400;stroke-width:1;fill-rule:evenodd}}
th{{text-align:left;padding-right:1em}}</style></head>
<body><h1>{t}</h1>
<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {vw:.2f} {vh:.2f}" width="{vw:.0f}" height="{vh:.0f}">
<rect class="dp-study-area" x="0" y="0" width="{vw:.2f}" height="{vh:.2f}" fill="none" stroke="#444"/>
{"".join(paths)}</svg>
<p>Each polygon is a cluster; hover for its noisy count (dp_count) and 95% interval.</p>
<table id="dpgeo-privacy">{rows}</table></body></html>
"""


def _fmt(v):
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)
