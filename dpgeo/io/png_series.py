"""Small multiples of a map series on one PNG: one panel per period, the same extent and colours in each.

Used by :func:`dpgeo.io.png.write_png` when the release is a series (its
metadata lists ``periods``). Every panel shows the public study area and that
period's features, coloured by their ``cluster_id`` (which persists across
periods, so a cluster keeps its colour), labelled with their ``dp_count``
(or ``dp_total`` for running totals) when few; the panel's title is the
period. A period without features is an empty panel, like any other.
"""

from __future__ import annotations

import math
import textwrap

import numpy as np

from . import palette
from .statement import privacy_line, privacy_statement

__all__ = ["series_figure", "MAX_PANEL_LABELS"]

#: Features labelled with their count in one panel (more would clutter it).
MAX_PANEL_LABELS = 25


def series_figure(gdf, metadata, crs, width_in, title):
    """The matplotlib figure of the small multiples (see the module)."""
    import shapely
    from matplotlib import patheffects
    from matplotlib.colors import to_rgba
    from matplotlib.figure import Figure
    from matplotlib.patches import PathPatch

    from .drawing import _PT_PER_MM, _drawing_crs, _path_of, draw_labels, study_area_outline
    from .drawing import map_heading as _heading

    md = metadata or {}
    periods = [str(p.get("label")) for p in md.get("periods", [])]
    dcrs = _drawing_crs(gdf, md, crs)
    layer = gdf.to_crs(dcrs) if gdf.crs is not None and len(gdf) else gdf
    area, _ = study_area_outline(md, dcrs)
    b = area.bounds if area is not None else (tuple(layer.total_bounds) if len(layer) else (0.0, 0.0, 1.0, 1.0))
    w, h = max(b[2] - b[0], 1e-9), max(b[3] - b[1], 1e-9)
    n = max(len(periods), 1)
    ncols = max(1, min(n, round(math.sqrt(n * 1.4 * h / w)) or 1, 6)) if w < h else max(1, min(n, math.ceil(
        math.sqrt(n * w / h)), 6))
    ncols = min(max(ncols, math.ceil(n / 6)), n)
    nrows = math.ceil(n / ncols)
    panel_w = width_in / ncols
    panel_h = panel_w * h / w
    head_in, foot_in = 0.6, 0.9
    fig = Figure(figsize=(width_in, nrows * (panel_h + 0.3) + head_in + foot_in))
    total_h = fig.get_figheight()
    ids_all = layer["cluster_id"].to_numpy() if "cluster_id" in layer and len(layer) else np.zeros(0, int)
    uniq = np.unique(ids_all)
    idx_all = palette.colour_index(ids_all, np.asarray(layer.geometry.values)) if uniq.size else []
    colour = dict(zip(ids_all.tolist(), np.asarray(idx_all).tolist()))  # one colour per cluster; neighbours differ
    value = "dp_total" if "dp_total" in layer else "dp_count"
    width_pt = palette.OUTLINE_WIDTH_MM * _PT_PER_MM
    pad = 0.03 * max(w, h)
    halo = [patheffects.withStroke(linewidth=1.8, foreground="white")]
    for k, label in enumerate(periods or [""]):
        r, c = divmod(k, ncols)
        bottom = total_h - head_in - (r + 1) * (panel_h + 0.3)
        ax = fig.add_axes((c * panel_w / width_in + 0.005, bottom / total_h, panel_w / width_in - 0.01,
                           panel_h / total_h))
        ax.set_aspect("equal")
        ax.set_axis_off()
        ax.set_title(label, fontsize=8.5, weight="bold", pad=2)
        part = layer[layer["period"].astype(str) == label] if "period" in layer and len(layer) else layer.iloc[0:0]
        for geom, cid in zip(part.geometry.values, part["cluster_id"] if "cluster_id" in part else [0] * len(part)):
            path = None if geom is None or geom.is_empty else _path_of(geom)
            if path is None:
                continue
            i = colour.get(int(cid), 0)
            ax.add_patch(PathPatch(path, facecolor=to_rgba(palette.CLUSTER_COLOURS[i], palette.FILL_OPACITY),
                                   edgecolor=palette.OUTLINE_COLOURS[i], lw=width_pt * 0.7))
        if area is not None:
            for poly in getattr(area, "geoms", [area]):
                if poly.geom_type == "Polygon":
                    xy = np.asarray(poly.exterior.coords)
                    ax.plot(xy[:, 0], xy[:, 1], color=palette.STUDY_AREA_COLOUR, lw=0.6, ls=(0, (5, 3)))
        ax.set_xlim(b[0] - pad, b[2] + pad)
        ax.set_ylim(b[1] - pad, b[3] + pad)
        if 0 < len(part) <= MAX_PANEL_LABELS and value in part:  # labels that never run together
            draw_labels(fig, ax, shapely.point_on_surface(np.asarray(part.geometry.values)), part[value],
                        fontsize=5.5, halo=halo)
    s = privacy_statement(md)
    heading = _heading(md, title)
    what = "running totals" if "dp_total" in layer else "one panel per period; a cluster keeps its colour"
    fig.text(0.01, 1 - 0.1 / total_h, f"{heading} ({what})", ha="left", va="top", fontsize=11, weight="bold")
    col = ("#9a5b00" if s.weak else "#1b5e20") if s.private else "#c00000"  # amber: private, but ε is weak
    line = privacy_line(md)
    fig.text(0.01, (foot_in - 0.1) / total_h, s.headline, ha="left", va="top", fontsize=9, weight="bold",
             color="white" if not s.private else col,
             bbox=None if s.private else dict(boxstyle="square,pad=0.25", facecolor=col, edgecolor="none"))
    fig.text(0.01, (foot_in - 0.35) / total_h, textwrap.fill(line[len(s.headline) + 2:], int(width_in * 14)),
             ha="left", va="top", fontsize=7, color=col if not s.private else "#202020", linespacing=1.3)
    return fig
