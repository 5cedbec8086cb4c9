"""The colours of a cluster layer: one source for the QGIS style, the HTML map and the PNG.

Clusters are categorised on ``cluster_id``: the sorted distinct ids take the
colours of :data:`CLUSTER_COLOURS` in turn (cycling after 12), filled
semi-transparently (:data:`FILL_ALPHA`) and outlined in a darker shade of the
same hue (:data:`OUTLINE_COLOURS`, what Qt's ``QColor.darker(130)`` gives).

The tree of density levels (spans without a radius) is graduated on its
``level`` field: :func:`level_classes` puts the distinct levels into at most
five classes of equal numbers of levels, coloured light to dark in the
sequential palette (:data:`LEVEL_COLOURS` is :data:`SEQUENTIAL_COLOURS`,
ColorBrewer's YlOrRd), outlined likewise (:data:`LEVEL_OUTLINE_COLOURS`).
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
    "LEVEL_COLOURS",
    "LEVEL_OUTLINE_COLOURS",
    "LEVEL_FILL_ALPHA",
    "LEVEL_FILL_OPACITY",
    "colour_index",
    "hex_to_rgb",
    "HOTSPOT_COLOURS",
    "HOTSPOT_LABELS",
    "SEQUENTIAL_COLOURS",
    "CELL_FILL_ALPHA",
    "CELL_FILL_OPACITY",
    "CELL_OUTLINE_WIDTH_MM",
    "count_classes",
    "band_colour",
    "layer_style",
    "level_classes",
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
#: The seven classes in words, hottest first (as the layer's ``hotspot`` attribute).
HOTSPOT_LABELS = {3: "hot spot 99%", 2: "hot spot 95%", 1: "hot spot 90%", 0: "not significant",
                  -1: "cold spot 90%", -2: "cold spot 95%", -3: "cold spot 99%"}
#: Sequential palette (ColorBrewer YlOrRd) for graduated counts and density bands, low to high.
SEQUENTIAL_COLOURS = ("#ffffb2", "#fecc5c", "#fd8d3c", "#f03b20", "#bd0026")
#: Fill opacity (0–255) of cells and bands: opaque enough to read the classes, the base map still visible.
CELL_FILL_ALPHA = 191
#: The same as a fraction.
CELL_FILL_OPACITY = CELL_FILL_ALPHA / 255
#: Outline width (mm) of cells and bands: hairlines, so that small cells keep their colour.
CELL_OUTLINE_WIDTH_MM = 0.13


def _darker(colour: str) -> str:
    """The outline of a fill: the same hue with its HSV value divided by 1.3 (as Qt's ``darker(130)``)."""
    import colorsys

    r, g, b = (v / 255 for v in hex_to_rgb(colour))
    h, s, v = colorsys.rgb_to_hsv(r, g, b)
    r, g, b = colorsys.hsv_to_rgb(h, s, v / 1.3)
    return "#%02x%02x%02x" % tuple(int(round(c * 255)) for c in (r, g, b))


#: The density levels of spans without a radius are graduated in the sequential palette too, from the floor
#: (light) to the densest (dark) ...
LEVEL_COLOURS = SEQUENTIAL_COLOURS
#: ... outlined in a darker shade (Qt's ``QColor(c).darker(130)``, as :data:`OUTLINE_COLOURS`) ...
LEVEL_OUTLINE_COLOURS = tuple(_darker(c) for c in SEQUENTIAL_COLOURS)
#: ... and filled lighter than cells (0–255), as they are drawn nested, one over the other.
LEVEL_FILL_ALPHA = 128
#: The same as a fraction.
LEVEL_FILL_OPACITY = LEVEL_FILL_ALPHA / 255


def count_classes(dp_count, n_classes: int = len(SEQUENTIAL_COLOURS)):
    """Classes of released counts with about equal numbers of features: ``(lower, upper, index)``.

    Class ``i`` holds the integer counts ``lower[i] ≤ v ≤ upper[i]``; the
    limits are rounded quantiles of the released values themselves (a
    function of the DP output only). Fewer classes when the values are few.

    Examples
    --------
    >>> lo, hi, idx = count_classes([0, 0, 1, 2, 3, 5, 8, 13, 21, 34])
    >>> [f"{a}–{b}" for a, b in zip(lo, hi)], idx.tolist()
    (['0–0', '1–2', '3–6', '7–14', '15–34'], [0, 0, 1, 1, 2, 2, 3, 3, 4, 4])
    """
    v = np.asarray(dp_count, dtype=np.float64).ravel()
    if v.size == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, int)
    vmin, vmax = int(np.floor(v.min())), int(np.ceil(v.max()))
    qs = np.ceil(np.quantile(v, np.linspace(0, 1, n_classes + 1)[1:-1])).astype(np.int64)
    edges = np.unique(qs[(qs > vmin) & (qs <= vmax)])  # a class starts at each edge
    lower = np.r_[vmin, edges].astype(np.int64)
    upper = np.r_[edges - 1, vmax].astype(np.int64)
    idx = np.searchsorted(edges, v, side="right")
    return lower, upper, idx


def band_colour(band, n_bands: int) -> np.ndarray:
    """Index into :data:`SEQUENTIAL_COLOURS` of density bands ``1 … n_bands`` (spread over the palette).

    Examples
    --------
    >>> band_colour([1, 2, 3], 3).tolist(), band_colour([1, 2, 3, 4, 5, 6, 7], 7).tolist()
    ([0, 2, 4], [0, 1, 1, 2, 3, 3, 4])
    """
    b = np.asarray(band, dtype=np.int64)
    n = len(SEQUENTIAL_COLOURS)
    if n_bands <= 1:
        return np.full(b.shape, n - 1, dtype=np.int64)
    return np.rint((b - 1) * (n - 1) / (n_bands - 1)).astype(np.int64)


def _fmt_density(v) -> str:
    return f"{v:,.0f}" if v >= 100 else f"{v:.3g}"


def layer_style(gdf):
    """How a release's features are coloured: ``(fills, outlines, index, legend, title)``.

    Clusters (``cluster_id``): the qualitative palette, ``legend`` None (the
    map lists the clusters). Hot spots (``gi_bin``): the hot-spot palette,
    one class per ``gi_bin``. Density bands (``band``): the sequential palette
    spread over the bands. Count layers (``dp_count`` only): the sequential
    palette in classes of about equal numbers of cells (:func:`count_classes`).
    ``legend`` is a list of ``(colour index, label)``. The QGIS plugin's styles
    use the same classes and colours.

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
        b = gdf["gi_bin"].to_numpy().astype(np.int64) if n else np.zeros(0, np.int64)
        idx = 3 - b
        legend = [(i, f"{HOTSPOT_LABELS[k]} ({int((idx == i).sum()):,})") for i, k in enumerate(keys)]
        return fills, tuple(_darker(c) for c in fills), idx, legend, "Gi* hot and cold spots"
    fills = SEQUENTIAL_COLOURS
    outlines = tuple(_darker(c) for c in fills)
    if "band" in cols:
        b = gdf["band"].to_numpy().astype(np.int64) if n else np.zeros(0, np.int64)
        idx = band_colour(b, int(b.max()) if b.size else 1)
        legend = []
        for i, bb, lo, hi, c in zip(idx, b, gdf.get("density_low", [None] * n), gdf.get("density_high", [None] * n),
                                    gdf["dp_count"]):
            rng = "" if lo is None else (f"{_fmt_density(lo)}+ per km²" if hi is None or not np.isfinite(hi) else
                                         f"{_fmt_density(lo)}–{_fmt_density(hi)} per km²")
            legend.append((int(i), f"band {int(bb)}: {rng}{'; ' if rng else ''}dp_count {int(c):,}"))
        return fills, outlines, idx, legend[::-1], "density bands (smoothed count per km²)"
    lower, upper, idx = count_classes(gdf["dp_count"].to_numpy() if n else [])
    legend = [(i, f"dp_count {a:,}" if a == b else f"dp_count {a:,}–{b:,}") for i, (a, b) in
              enumerate(zip(lower.tolist(), upper.tolist()))][::-1]
    return fills, outlines, idx, legend, "dp_count per cell"


def level_classes(level) -> tuple:
    """Graduated classes of density levels: each value's class and each class's range.

    The distinct values, sorted, are cut into ``min(5, how many there are)``
    classes of (nearly) equal numbers of distinct values; class ``c`` takes
    ``LEVEL_COLOURS[c * 5 // n_classes]`` (light to dark, the darkest always
    used).

    Parameters
    ----------
    level : array_like of float
        One density level per feature (the levels layer's ``level``).

    Returns
    -------
    classes : numpy.ndarray of int
        Index into :data:`LEVEL_COLOURS` of each value.
    ranges : list of (float, float, int)
        ``(lowest, highest, colour index)`` of each class, in increasing order.

    Examples
    --------
    >>> classes, ranges = level_classes([8, 12, 12, 15, 19, 26, 40, 105])
    >>> classes.tolist()
    [0, 0, 0, 1, 2, 2, 3, 4]
    >>> level_classes([3, 5, 3])[1]
    [(3.0, 3.0, 0), (5.0, 5.0, 4)]
    """
    v = np.asarray(level, dtype=float).ravel()
    if v.size == 0:
        return np.zeros(0, dtype=int), []
    distinct = np.unique(v)
    k = len(distinct)
    n_classes = min(len(LEVEL_COLOURS), k)
    cls_of_distinct = np.arange(k) * n_classes // k  # equal numbers of distinct values per class
    colour = cls_of_distinct * len(LEVEL_COLOURS) // n_classes
    colour = np.where(cls_of_distinct == n_classes - 1, len(LEVEL_COLOURS) - 1, colour)
    ranges = []
    for c in range(n_classes):
        members = distinct[cls_of_distinct == c]
        ranges.append((float(members[0]), float(members[-1]), int(colour[cls_of_distinct == c][0])))
    return colour[np.searchsorted(distinct, v)].astype(int), ranges
