"""A release as a static PNG map (matplotlib, Agg, no network), for reports and slides.

Same styling as the QGIS style and the HTML map (:mod:`dpgeo.io.palette`):
clusters categorised on ``cluster_id``, semi-transparent fills with darker
outlines, ``dp_count`` labels, the dashed study-area outline, a legend, a
scale bar and the privacy line under the map (red when the release is not
differentially private). With the tree of density levels (spans without a
radius, ``levels=``) the levels are drawn nested in graduated colours and the
clusters outlined over them. The metadata travels in the file as the PNG text
chunk ``dpgeo`` (JSON), so :func:`dpgeo.io.read_layer_metadata` reads it back.
"""

from __future__ import annotations

import json
import math
import os
import textwrap

import numpy as np

from ..errors import InputError, OutputError
from . import palette
from .atomic import atomic_write
from .statement import privacy_line, privacy_statement

from .drawing import _PT_PER_MM, _drawing_crs, _path_of, draw_labels  # noqa: F401 (shared with the small multiples)

__all__ = ["write_png", "read_png_metadata", "require_matplotlib", "font_path", "FONT_FAMILY"]

#: Features labelled with their ``dp_count`` (more would only clutter the picture).
MAX_LABELS = 200
#: Clusters listed one by one in the legend.
MAX_LEGEND_ROWS = 20
#: The font of every text in the picture: it ships with matplotlib and has every glyph dpgeo writes
#: (ε, δ, ×, ², ±, –, …), whatever font a matplotlibrc prefers.
FONT_FAMILY = "DejaVu Sans"


def require_matplotlib():
    """Raise :class:`~dpgeo.errors.OutputError` naming the install command when matplotlib is missing."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise OutputError("writing a .png map needs matplotlib: pip install matplotlib") from None


def font_path() -> str:
    """The file of :data:`FONT_FAMILY` that matplotlib draws with.

    Examples
    --------
    >>> from matplotlib.ft2font import FT2Font
    >>> all(FT2Font(font_path()).get_char_index(ord(c)) for c in "εδ×²±")
    True
    """
    from matplotlib import font_manager

    return font_manager.findfont(font_manager.FontProperties(family=FONT_FAMILY), fallback_to_default=True)


def _font_rc() -> dict:
    """matplotlib settings that draw every text of the picture in :data:`FONT_FAMILY`."""
    return {"font.family": "sans-serif", "font.sans-serif": [FONT_FAMILY], "mathtext.fontset": "dejavusans"}


def _nice_length(span):
    """A round length (1, 2 or 5 × 10^k) near a fifth of ``span``."""
    target = span / 5
    if not target > 0:
        return None
    k = 10 ** math.floor(math.log10(target))
    return max((m * k for m in (1, 2, 5) if m * k <= target), default=k)


def _figure(gdf, metadata, crs, width_in, title, levels=None):
    import shapely
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch, PathPatch
    from matplotlib import patheffects
    from matplotlib.colors import to_rgba

    from .drawing import study_area_outline

    md = metadata or {}
    dcrs = _drawing_crs(gdf, md, crs)
    layer = gdf.to_crs(dcrs) if gdf.crs is not None and len(gdf) else gdf
    area, area_kind = study_area_outline(md, dcrs)
    if area is not None:
        b = area.bounds
    elif len(layer):
        b = tuple(layer.total_bounds)
    else:
        b = (0.0, 0.0, 1.0, 1.0)
    w, h = max(b[2] - b[0], 1e-9), max(b[3] - b[1], 1e-9)
    aspect = w / h
    map_h = 6.5
    map_w = min(max(map_h * aspect, 3.0), width_in - 3.2)
    if map_w < map_h * aspect:  # wide areas: keep the width, shrink the height
        map_h = map_w / aspect
    fig = Figure(figsize=(width_in, map_h + 1.9))
    ax = fig.add_axes((0.02, 1.5 / (map_h + 1.9), map_w / width_in, map_h / (map_h + 1.9)))
    ax.set_aspect("equal")
    ax.set_axis_off()

    ids = layer["cluster_id"].to_numpy() if "cluster_id" in layer and len(layer) else np.zeros(0, int)
    fills, outlines, idx, style_legend, style_title, style_note = palette.layer_style(layer, md)
    width_pt = palette.OUTLINE_WIDTH_MM * _PT_PER_MM
    fill_opacity = palette.FILL_OPACITY if style_legend is None else palette.CELL_FILL_OPACITY
    line_pt = width_pt if style_legend is None else palette.CELL_OUTLINE_WIDTH_MM * _PT_PER_MM
    level_ranges = []
    if levels is not None and len(levels):  # the tree of levels, nested (shallow first), under the clusters' outlines
        lv = levels.to_crs(dcrs) if levels.crs is not None else levels
        cls, level_ranges = palette.level_classes(lv["level"].to_numpy(dtype=float))
        for k in np.lexsort((lv["level_id"].to_numpy(), lv["depth"].to_numpy())):
            geom = lv.geometry.values[k]
            path = None if geom is None or geom.is_empty else _path_of(geom)
            if path is not None:
                c = int(cls[k])
                ax.add_patch(PathPatch(path, edgecolor=palette.LEVEL_OUTLINE_COLOURS[c], lw=0.5 * width_pt,
                                       facecolor=to_rgba(palette.LEVEL_COLOURS[c], palette.LEVEL_FILL_OPACITY)))
    for geom, i in zip(layer.geometry.values if len(layer) else [], idx):
        path = None if geom is None or geom.is_empty else _path_of(geom)
        if path is None:
            continue
        face = "none" if level_ranges else to_rgba(fills[i], fill_opacity)  # over the levels: outlined only
        ax.add_patch(PathPatch(path, facecolor=face, edgecolor=outlines[i], lw=line_pt, joinstyle="miter"))
    if area is not None:
        for poly in getattr(area, "geoms", [area]):
            if poly.geom_type == "Polygon":
                for ring in [poly.exterior, *poly.interiors]:
                    xy = np.asarray(ring.coords)
                    ax.plot(xy[:, 0], xy[:, 1], color=palette.STUDY_AREA_COLOUR, lw=1.0, ls=(0, (6, 4)))
    pad = 0.03 * max(w, h)
    ax.set_xlim(b[0] - pad, b[2] + pad)
    ax.set_ylim(b[1] - pad, b[3] + pad)
    if 0 < len(layer) <= MAX_LABELS and "dp_count" in layer:  # labels that never run together
        draw_labels(fig, ax, shapely.point_on_surface(np.asarray(layer.geometry.values)), layer["dp_count"],
                    fontsize=7, halo=[patheffects.withStroke(linewidth=2.2, foreground="white")])

    # scale bar (projected CRS in metres only)
    unit = dcrs.axis_info[0].unit_name if dcrs.axis_info else ""
    if not dcrs.is_geographic and unit in ("metre", "meter"):
        length = _nice_length(w)
        if length:
            x0, y0 = b[0], b[1] - pad * 0.45
            ax.plot([x0, x0 + length], [y0, y0], color="#202020", lw=2.5, solid_capstyle="butt")
            ax.text(x0 + length + pad * 0.2, y0, f"{length / 1000:g} km" if length >= 1000 else f"{length:g} m",
                    ha="left", va="center", fontsize=7)

    # legend
    order = np.argsort(ids, kind="stable") if style_legend is None else np.zeros(0, int)
    handles = [Patch(facecolor=to_rgba(fills[i], fill_opacity), edgecolor=outlines[i], lw=width_pt, label=label)
               for i, label in (style_legend or [])[:MAX_LEGEND_ROWS]]
    if level_ranges:
        from .html_levels import _num

        for lo, hi, c in level_ranges:
            handles.append(Patch(facecolor=to_rgba(palette.LEVEL_COLOURS[c], palette.LEVEL_FILL_OPACITY),
                                 edgecolor=palette.LEVEL_OUTLINE_COLOURS[c], lw=0.5 * width_pt,
                                 label=f"density {_num(lo)}" + ("" if lo == hi else f"–{_num(hi)}")))
        handles.append(Patch(facecolor="none", edgecolor="none", label="the map's clusters, outlined: dp_count"))
    for j in order[:MAX_LEGEND_ROWS]:
        i = int(idx[j])
        c = layer["dp_count"].iloc[j] if "dp_count" in layer else None
        handles.append(Patch(facecolor="none" if level_ranges else to_rgba(palette.CLUSTER_COLOURS[i],
                                                                            palette.FILL_OPACITY),
                             edgecolor=palette.OUTLINE_COLOURS[i], lw=width_pt,
                             label=f"cluster {ids[j]}: {c if c is not None else 'n/a'}"))
    more = len(ids) - min(len(ids), MAX_LEGEND_ROWS) if style_legend is None else 0
    if more:
        handles.append(Patch(facecolor="none", edgecolor="none", label=f"… and {more:,} more clusters "
                             "(touching clusters never share a colour)"))
    if area is not None:
        handles.append(Line2D([], [], color=palette.STUDY_AREA_COLOUR, lw=1.0, ls=(0, (6, 4)),
                              label=f"study area ({area_kind})"))
    n = len(ids)
    leg_title = "No clusters" if n == 0 else f"{n:,} cluster{'s' if n != 1 else ''}: dp_count"
    if style_legend is not None:
        leg_title = f"{style_title} ({len(layer):,} features)"
        if style_note:
            handles.append(Patch(facecolor="none", edgecolor="none", label=textwrap.fill(style_note, 48)))
    if level_ranges:
        leg_title = (f"{len(levels):,} nested levels: density where each separates\n"
                     "(noisy points in the 3 × 3 cells around a cell)")
    fig.legend(handles=handles, title=leg_title, loc="upper left", fontsize=7.5, title_fontsize=8.5,
               bbox_to_anchor=(0.04 + map_w / width_in, 1 - 0.35 / (map_h + 1.9)), frameon=False,
               alignment="left")

    # title and the privacy line
    s = privacy_statement(md)
    from .drawing import map_heading as _heading

    heading = _heading(md, title)
    fig.text(0.02, 1 - 0.08 / (map_h + 1.9), heading, ha="left", va="top", fontsize=11, weight="bold")
    colour = ("#9a5b00" if s.weak else "#1b5e20") if s.private else "#c00000"  # amber: private, but ε is weak
    line = privacy_line(md)
    body = line[len(s.headline) + 2:]
    wrap = max(int((map_w + 3.0) * 14), 60)
    fig.text(0.02, 1.25 / (map_h + 1.9), s.headline, ha="left", va="top", fontsize=9, weight="bold",
             color="white" if not s.private else colour,
             bbox=None if s.private else dict(boxstyle="square,pad=0.25", facecolor=colour, edgecolor="none"))
    fig.text(0.02, 0.98 / (map_h + 1.9), textwrap.fill(body, wrap), ha="left", va="top", fontsize=7.5,
             color=colour if not s.private else "#202020", linespacing=1.3)
    return fig


def write_png(gdf, path, metadata: dict, *, crs=None, dpi=150, width_in=10.0, title=None, levels=None) -> str:
    """Write a static PNG map of a cluster layer, atomically.

    Parameters
    ----------
    gdf : geopandas.GeoDataFrame
        The cluster layer (any CRS).
    path : str or os.PathLike
    metadata : dict
        The release's privacy metadata (privacy line; embedded as the
        ``dpgeo`` text chunk).
    crs : optional
        CRS to draw in. Default: the layer's when projected, else the
        release's ``working_crs``.
    dpi : int
        Resolution (default 150).
    width_in : float
        Figure width in inches (default 10); the height follows the study area.
    title : str, optional
        Heading (default: the mechanism).
    levels : geopandas.GeoDataFrame, optional
        The tree of density levels of the same release (spans without a
        radius): drawn nested, in graduated colours
        (:func:`dpgeo.io.palette.level_classes`), under the clusters, which
        are then outlined only.

    Returns
    -------
    str
        The path written.

    Raises
    ------
    OutputError
        matplotlib is missing or the file cannot be written (nothing is left behind).

    Examples
    --------
    >>> import tempfile, os, geopandas as gpd, shapely
    >>> g = gpd.GeoDataFrame({"cluster_id": [1], "dp_count": [42]}, geometry=[shapely.box(0, 0, 500, 300)],
    ...                      crs="EPSG:32615")
    >>> d = tempfile.mkdtemp()
    >>> p = write_png(g, os.path.join(d, "map.png"), {"differentially_private": True, "epsilon": 1.0})
    >>> read_png_metadata(p)["epsilon"]
    1.0
    """
    require_matplotlib()
    import matplotlib

    from .._version import __version__

    path = os.fspath(path)
    # text chunks that are not Latin-1 (ε, δ) are written as UTF-8 iTXt chunks by Pillow
    info = {"dpgeo": json.dumps(metadata, separators=(",", ":"), ensure_ascii=True),
            "Software": f"dpgeo {__version__}", "Description": privacy_line(metadata)}
    from .html_series import series_config

    with matplotlib.rc_context(_font_rc()):
        if series_config(metadata):  # a map series: one panel per period
            from .png_series import series_figure

            fig = series_figure(gdf, metadata, crs, float(width_in), title)
        else:
            fig = _figure(gdf, metadata, crs, float(width_in), title, levels)
        atomic_write(path, lambda tmp: fig.savefig(tmp, dpi=dpi, format="png", bbox_inches="tight",
                                                   pad_inches=0.15, facecolor="white", metadata=info))
    return path


def read_png_metadata(path) -> dict:
    """The privacy metadata embedded in a PNG map written by dpgeo (its ``dpgeo`` text chunk).

    Raises
    ------
    InputError
        Not a PNG written by dpgeo, or Pillow (a matplotlib dependency) is missing.
    """
    p = os.fspath(path)
    try:
        from PIL import Image
    except ImportError:
        raise InputError("reading a PNG's metadata needs Pillow: pip install pillow") from None
    try:
        with Image.open(p) as im:
            text = dict(getattr(im, "text", {}) or {})
    except Exception as exc:
        raise InputError(f"cannot read {p!r} as PNG: {exc}") from None
    try:
        md = json.loads(text["dpgeo"]) if "dpgeo" in text else None
    except json.JSONDecodeError:
        md = None
    if not isinstance(md, dict):
        raise InputError(f"{p!r} has no dpgeo metadata (was it written by dpgeo?)")
    return md
