"""The colours of a cluster layer: one source for the QGIS style, the HTML map and the PNG.

Clusters are categorised on ``cluster_id``: the sorted distinct ids take the
colours of :data:`CLUSTER_COLOURS` in turn (cycling after 12), filled
semi-transparently (:data:`FILL_ALPHA`) and outlined in a darker shade of the
same hue (:data:`OUTLINE_COLOURS`, what Qt's ``QColor.darker(130)`` gives).
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "CLUSTER_COLOURS",
    "OUTLINE_COLOURS",
    "FILL_ALPHA",
    "FILL_OPACITY",
    "OUTLINE_WIDTH_MM",
    "STUDY_AREA_COLOUR",
    "colour_index",
    "hex_to_rgb",
    "HOTSPOT_COLOURS",
    "SEQUENTIAL_COLOURS",
    "layer_style",
]

#: Qualitative palette (12 well separated hues), cycled over the clusters.
CLUSTER_COLOURS = (
    "#1f78b4", "#e31a1c", "#33a02c", "#ff7f00", "#6a3d9a", "#b15928",
    "#a6cee3", "#fb9a99", "#b2df8a", "#fdbf6f", "#cab2d6", "#ffff99",
)
#: Outline of each palette colour: the same hue with its HSV value divided by 1.3
#: (exactly Qt's ``QColor(c).darker(130)``, which the QGIS style uses).
OUTLINE_COLOURS = (
    "#185c8a", "#af1416", "#277b22", "#c46200", "#522f76", "#88441f",
    "#809eaf", "#c17676", "#89ac6a", "#c39355", "#9b89a5", "#c4c476",
)
#: Fill opacity on Qt's 0–255 scale: semi-transparent, so what lies below stays readable.
FILL_ALPHA = 110
#: The same as a fraction (CSS, matplotlib).
FILL_OPACITY = FILL_ALPHA / 255
#: Outline width in millimetres (about 1.5 CSS pixels).
OUTLINE_WIDTH_MM = 0.4
#: Colour of the study-area outline (dashed, unfilled) on the HTML map and the PNG.
STUDY_AREA_COLOUR = "#3c3c3c"


def colour_index(cluster_id) -> np.ndarray:
    """Palette position of each cluster: the rank of its id among the sorted distinct ids, mod 12.

    Parameters
    ----------
    cluster_id : array_like of int
        One id per feature (missing values are not allowed).

    Returns
    -------
    numpy.ndarray of int
        Index into :data:`CLUSTER_COLOURS` / :data:`OUTLINE_COLOURS`.

    Examples
    --------
    >>> colour_index([3, 1, 2, 14]).tolist()
    [2, 0, 1, 3]
    >>> [CLUSTER_COLOURS[i] for i in colour_index(range(1, 15))][-2:]
    ['#1f78b4', '#e31a1c']
    """
    ids = np.asarray(cluster_id).ravel()
    _, rank = np.unique(ids, return_inverse=True)
    return rank.reshape(-1) % len(CLUSTER_COLOURS)


def hex_to_rgb(colour: str) -> tuple:
    """``"#rrggbb"`` as a tuple of three ints in 0–255.

    Examples
    --------
    >>> hex_to_rgb("#1f78b4")
    (31, 120, 180)
    """
    c = colour.lstrip("#")
    return tuple(int(c[i:i + 2], 16) for i in (0, 2, 4))


#: The classic hot-spot palette (ArcGIS's Hot Spot Analysis), ``gi_bin`` 3 … -3.
HOTSPOT_COLOURS = {3: "#d62f27", 2: "#ed7551", 1: "#fab984", 0: "#f2f2ee", -1: "#c0ccbe", -2: "#849eba",
                   -3: "#4575b5"}
#: Sequential palette (ColorBrewer YlOrRd) for graduated counts and density bands, low to high.
SEQUENTIAL_COLOURS = ("#ffffb2", "#fecc5c", "#fd8d3c", "#f03b20", "#bd0026")


def _darker(colour: str) -> str:
    """The outline of a fill: the same hue with its HSV value divided by 1.3 (as Qt's ``darker(130)``)."""
    import colorsys

    r, g, b = (v / 255 for v in hex_to_rgb(colour))
    h, s, v = colorsys.rgb_to_hsv(r, g, b)
    r, g, b = colorsys.hsv_to_rgb(h, s, v / 1.3)
    return "#%02x%02x%02x" % tuple(int(round(c * 255)) for c in (r, g, b))


def layer_style(gdf):
    """How a release's features are coloured: ``(fills, outlines, index, legend, title)``.

    Clusters (``cluster_id``): the qualitative palette. Hot spots (``gi_bin``):
    the hot-spot palette, one class per ``gi_bin``. Density bands (``band``)
    and count layers (``dp_count`` only): the sequential palette, bands by
    number, counts in five classes of equal counts of features (quantiles of
    ``dp_count``, a function of the released values only). ``legend`` is a
    list of ``(colour index, label)``.

    Examples
    --------
    >>> import geopandas as gpd, shapely
    >>> g = gpd.GeoDataFrame({"gi_bin": [3, 0]}, geometry=[shapely.box(0, 0, 1, 1)] * 2)
    >>> fills, _, idx, legend, title = layer_style(g)
    >>> [fills[i] for i in idx], title
    (['#d62f27', '#f2f2ee'], 'Gi* hot and cold spots')
    """
    cols = set(gdf.columns)
    n = len(gdf)
    if "cluster_id" in cols or "dp_count" not in cols and "gi_bin" not in cols and "band" not in cols:
        ids = gdf["cluster_id"].to_numpy() if "cluster_id" in cols and n else np.zeros(0, int)
        return CLUSTER_COLOURS, OUTLINE_COLOURS, (colour_index(ids) if ids.size else np.zeros(0, int)), None, None
    if "gi_bin" in cols:
        keys = list(range(3, -4, -1))
        fills = tuple(HOTSPOT_COLOURS[k] for k in keys)
        idx = np.array([keys.index(int(b)) for b in gdf["gi_bin"]], dtype=int) if n else np.zeros(0, int)
        labels = ["hot spot 99%", "hot spot 95%", "hot spot 90%", "not significant", "cold spot 90%",
                  "cold spot 95%", "cold spot 99%"]
        legend = [(i, f"{labels[i]} ({int((idx == i).sum()):,})") for i in range(7)]
        return fills, tuple(_darker(c) for c in fills), idx, legend, "Gi* hot and cold spots"
    fills = SEQUENTIAL_COLOURS
    if "band" in cols:
        b = gdf["band"].to_numpy().astype(int) if n else np.zeros(0, int)
        k = max(int(b.max()) if b.size else 1, 1)
        idx = np.minimum(((b - 1) * len(fills)) // k, len(fills) - 1) if b.size else b
        legend = [(int(i), f"band {int(bb)}: dp_count {c}") for i, bb, c in zip(idx, b, gdf["dp_count"])]
        return fills, tuple(_darker(c) for c in fills), idx, legend, "density bands"
    v = gdf["dp_count"].to_numpy().astype(float) if n else np.zeros(0)
    edges = np.unique(np.quantile(v, np.linspace(0, 1, len(fills) + 1)[1:-1])) if v.size else np.zeros(0)
    idx = np.searchsorted(edges, v, side="right") if v.size else np.zeros(0, int)
    bounds = np.concatenate([[v.min() if v.size else 0], edges, [v.max() if v.size else 0]])
    legend = [(i, f"dp_count {bounds[i]:g} – {bounds[i + 1]:g}") for i in range(edges.size + 1)]
    return fills, tuple(_darker(c) for c in fills), idx, legend, "dp_count per cell"
