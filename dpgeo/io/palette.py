"""The colours of a cluster layer: one source for the QGIS style, the HTML map and the PNG.

Clusters are categorised on ``cluster_id``: neighbouring clusters always take
different colours of :data:`CLUSTER_COLOURS` (:func:`colour_index` colours
the clusters' adjacency graph), filled
semi-transparently (:data:`FILL_ALPHA`) and outlined in a darker shade of the
same hue (:data:`OUTLINE_COLOURS`, what Qt's ``QColor.darker(130)`` gives).

The tree of density levels (spans without a radius) is graduated on its
``level`` field: :func:`level_classes` puts the distinct levels into at most
five classes of equal numbers of levels, coloured light to dark in the
sequential palette (:data:`LEVEL_COLOURS` is :data:`SEQUENTIAL_COLOURS`,
ColorBrewer's YlOrRd), outlined likewise (:data:`LEVEL_OUTLINE_COLOURS`).
"""

from __future__ import annotations

import collections
from typing import NamedTuple

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
    "neighbour_pairs",
    "colour_graph",
    "hex_to_rgb",
    "HOTSPOT_COLOURS",
    "HOTSPOT_LABELS",
    "SEQUENTIAL_COLOURS",
    "CELL_FILL_ALPHA",
    "CELL_FILL_OPACITY",
    "CELL_OUTLINE_WIDTH_MM",
    "count_classes",
    "count_noise_halfwidth",
    "CountClasses",
    "band_colour",
    "layer_style",
    "layer_kind",
    "feature_words",
    "band_note",
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


def colour_index(cluster_id, geometry=None) -> np.ndarray:
    """Palette position of each cluster: neighbours never share a colour.

    Without geometries: the rank of its id among the sorted distinct ids, mod 12
    (the colours then repeat every 12). With the features' geometries: the
    clusters' adjacency graph (two ids are neighbours when a feature of one
    touches or overlaps a feature of the other, :func:`neighbour_pairs`) is
    coloured greedily in DSATUR order (:func:`colour_graph`), so touching
    clusters always differ; a cluster with several features (the periods of a
    series) keeps one colour.

    Parameters
    ----------
    cluster_id : array_like of int
        One id per feature (missing values are not allowed).
    geometry : array_like of shapely geometries, optional
        One per feature, in one projected or geographic CRS.

    Returns
    -------
    numpy.ndarray of int
        Index into :data:`CLUSTER_COLOURS` / :data:`OUTLINE_COLOURS`.

    Examples
    --------
    >>> colour_index([3, 1, 2, 14]).tolist()
    [2, 0, 1, 3]
    >>> import shapely
    >>> boxes = [shapely.box(i, 0, i + 1, 1) for i in range(14)]  # a row of 14 touching squares
    >>> idx = colour_index(range(1, 15), boxes)
    >>> bool((idx[1:] != idx[:-1]).all())
    True
    """
    ids = np.asarray(cluster_id).ravel()
    uniq, rank = np.unique(ids, return_inverse=True)
    rank = rank.reshape(-1)
    if geometry is None or uniq.size <= 1:
        return rank % len(CLUSTER_COLOURS)
    i, j = neighbour_pairs(geometry)
    a, b = rank[i], rank[j]
    keep = a != b
    return colour_graph(uniq.size, a[keep], b[keep])[rank]


def neighbour_pairs(geometry):
    """Index pairs ``(i, j)``, ``i < j``, of the geometries that touch or overlap (an STR-tree query).

    Examples
    --------
    >>> import shapely
    >>> [p.tolist() for p in neighbour_pairs([shapely.box(0, 0, 1, 1), shapely.box(1, 0, 2, 1),
    ...                                       shapely.box(5, 5, 6, 6)])]
    [[0], [1]]
    """
    import shapely

    geoms = np.asarray(geometry, dtype=object).ravel()
    if geoms.size < 2:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    tree = shapely.STRtree(geoms)
    i, j = tree.query(geoms, predicate="intersects")
    keep = i < j
    return i[keep].astype(np.int64), j[keep].astype(np.int64)


#: Largest graph coloured in DSATUR order (larger ones: by degree, see :func:`colour_graph`).
_DSATUR_MAX = 600


def colour_graph(n_nodes: int, a, b, n_colours: int = None) -> np.ndarray:
    """Colours of a graph's nodes such that the ends of every edge differ (DSATUR, Brélaz 1979).

    The next node coloured is the one with the most distinct colours among its
    neighbours (then the most neighbours, then the lowest number); it takes the
    colour its neighbours do not use that is used least so far (then the lowest
    index), so the palette is spread over the map. A graph that needs more than
    ``n_colours`` colours (never a map of clusters: a planar graph needs four)
    reuses the colour least used among the neighbours.

    Parameters
    ----------
    n_nodes : int
    a, b : array_like of int
        The edges' ends (node numbers below ``n_nodes``).
    n_colours : int, optional
        Default: the number of :data:`CLUSTER_COLOURS`.

    Examples
    --------
    >>> colour_graph(4, [0, 1, 2, 3], [1, 2, 3, 0]).tolist()  # a square: two colours would do, four are spread
    [0, 1, 2, 3]
    """
    k = n_colours or len(CLUSTER_COLOURS)
    nbrs = [set() for _ in range(n_nodes)]
    for u, v in zip(np.asarray(a, dtype=np.int64).tolist(), np.asarray(b, dtype=np.int64).tolist()):
        if u != v:
            nbrs[u].add(v)
            nbrs[v].add(u)
    colour = np.full(n_nodes, -1, dtype=np.int64)
    used = np.zeros(k, dtype=np.int64)
    seen = [set() for _ in range(n_nodes)]  # the colours among each node's coloured neighbours
    # DSATUR picks the next node among all uncoloured ones (quadratic); past a few thousand clusters the
    # nodes are taken by degree instead (linear), which still keeps neighbours apart with 12 colours
    static = iter(sorted(range(n_nodes), key=lambda u: (-len(nbrs[u]), u))) if n_nodes > _DSATUR_MAX else None
    for _ in range(n_nodes):  # one step per cluster (not per point)
        node = next(static) if static is not None else max(
            (u for u in range(n_nodes) if colour[u] < 0), key=lambda u: (len(seen[u]), len(nbrs[u]), -u))
        free = [c for c in range(k) if c not in seen[node]]
        if free:
            c = min(free, key=lambda c: (used[c], c))
        else:
            around = collections.Counter(int(colour[v]) for v in nbrs[node] if colour[v] >= 0)
            c = min(range(k), key=lambda c: (around[c], c))
        colour[node] = c
        used[c] += 1
        for v in nbrs[node]:
            seen[v].add(c)
    return colour


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


class CountClasses(NamedTuple):
    """Classes of released counts (:func:`count_classes`)."""

    #: Lowest and highest integer count of each class, increasing.
    lower: np.ndarray
    upper: np.ndarray
    #: The class of each value.
    index: np.ndarray
    #: What the classes are and, when fewer than asked, why (for the legend).
    note: str


def count_classes(dp_count, n_classes: int = len(SEQUENTIAL_COLOURS), *, noise_halfwidth: float = 0.0) -> CountClasses:
    """Classes of released counts whose limits stand clear of the noise and whose top class holds the peak.

    * The lowest class holds the counts that cannot be told from an empty
      cell: ``0 … ⌊noise_halfwidth⌋`` (0 alone when there is no noise).
    * The counts above it are cut by head/tail breaks (Jiang 2013): the mean
      of the counts splits them; the mean of those above it splits those; and
      so on, ``n_classes - 1`` classes, so the top class holds the few cells of
      the peak (a city's counts are heavy-tailed: quantiles would put
      downtown's peak in one class with quiet streets).
    * A limit closer to the one below it than the width of the noise's
      interval (``2 × noise_halfwidth``) is dropped: the two classes merge, as
      a cell on either side could have been on the other by noise alone.

    The classes are computed from the released counts and public parameters
    only (post-processing of the DP release: no privacy cost).

    Parameters
    ----------
    dp_count : array_like of int
        The released counts (≥ 0).
    n_classes : int
        How many classes are asked (at most; fewer when the noise or the data
        allow no more, the reason in ``note``).
    noise_halfwidth : float
        Half the width of a count's 95% noise interval (the layer's
        ``dp_count_high - dp_count`` of a positive count).

    Returns
    -------
    CountClasses
        ``(lower, upper, index, note)``: class ``i`` holds the integer counts
        ``lower[i] ≤ v ≤ upper[i]``.

    Examples
    --------
    >>> c = count_classes([0, 0, 1, 2, 3, 5, 8, 13, 21, 34, 400, 993, 1210, 2], noise_halfwidth=6)
    >>> [f"{a}–{b}" for a, b in zip(c.lower, c.upper)], c.index.tolist()
    (['0–6', '7–382', '383–867', '868–1101', '1102–1210'], [0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 3, 4, 0])
    >>> c = count_classes([0, 3, 9, 12, 14], noise_halfwidth=4)
    >>> [f"{a}–{b}" for a, b in zip(c.lower, c.upper)], c.note
    (['0–4', '5–13', '14–14'], '3 classes, not 5: limits closer than the noise (±4) were merged')
    """
    v = np.asarray(dp_count, dtype=np.float64).ravel()
    v = v[np.isfinite(v)]
    h = max(float(noise_halfwidth or 0.0), 0.0)
    rule = ("lowest class: within the noise of an empty cell; above it, head/tail breaks on the released counts"
            if h > 0 else "head/tail breaks on the released counts")
    if v.size == 0:
        z = np.zeros(0, np.int64)
        return CountClasses(z, z, np.zeros(0, int), "")
    vmin, vmax = int(np.floor(v.min())), int(np.ceil(v.max()))
    floor = max(int(np.floor(h)), vmin)  # the top of the lowest class
    edges = []  # the lowest count of each class above the first
    above = v[v > floor]
    if above.size:
        edges.append(floor + 1)
        head = above
        while len(edges) < n_classes - 1:
            m = head.mean()
            nxt = head[head > m]
            if nxt.size == 0 or nxt.size == head.size:
                break
            edges.append(int(np.floor(m)) + 1)
            head = nxt
    merged = False
    kept = []
    for e in edges:
        prev = kept[-1] if kept else vmin
        if kept and e - prev < 2 * h or not kept and h > 0 and e - vmin < 1:
            merged = True
            continue
        kept.append(e)
    # the top class must be clear of the one below: drop the highest limits until it is
    edges = np.asarray(sorted(set(kept)), dtype=np.int64)
    edges = edges[(edges > vmin) & (edges <= vmax)]
    lower = np.r_[vmin, edges].astype(np.int64)
    upper = np.r_[edges - 1, vmax].astype(np.int64)
    idx = np.searchsorted(edges, np.asarray(dp_count, dtype=np.float64).ravel(), side="right")
    n = len(lower)
    if n >= n_classes:
        note = f"{rule} (post-processing of the release: no privacy cost)"
    elif merged:
        note = (f"{n} class{'es' if n != 1 else ''}, not {n_classes}: limits closer than the noise (±{h:g}) "
                "were merged")
    else:
        note = f"{n} class{'es' if n != 1 else ''}, not {n_classes}: the released counts take too few values"
    return CountClasses(lower, upper, idx, note)


def count_noise_halfwidth(gdf) -> float:
    """Half the width of a count's 95% noise interval, read from a count layer (0 when it has none).

    The count layers dpgeo writes hold each cell's interval; for a positive
    count it is ``dp_count ± h`` with one public ``h`` (the noise law's, not the
    data's).
    """
    if "dp_count_high" not in gdf.columns or "dp_count" not in gdf.columns or not len(gdf):
        return 0.0
    c = np.asarray(gdf["dp_count"], dtype=np.float64)
    hi = np.asarray(gdf["dp_count_high"], dtype=np.float64)
    pos = (c > 0) & np.isfinite(hi)
    return float(np.max(hi[pos] - c[pos])) if pos.any() else 0.0


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


def layer_kind(gdf) -> str:
    """What a layer dpgeo wrote holds, by its columns: ``"hotspots"``, ``"bands"``, ``"levels"``,
    ``"clusters"`` or ``"counts"`` (cells).

    Examples
    --------
    >>> import pandas as pd
    >>> layer_kind(pd.DataFrame({"band": [1], "dp_count": [3]})), layer_kind(pd.DataFrame({"dp_count": [3]}))
    ('bands', 'counts')
    """
    cols = set(gdf.columns)
    if "gi_bin" in cols:
        return "hotspots"
    if "band" in cols:
        return "bands"
    if "level" in cols and ("level_id" in cols or "cluster_id" not in cols):
        return "levels"
    if "cluster_id" in cols or "dp_count" not in cols:
        return "clusters"
    return "counts"


def feature_words(gdf, n: int) -> str:
    """``n`` features of a layer in its own words: "5 bands", "1 cluster", "2,310 cells", "65 levels".

    Examples
    --------
    >>> import pandas as pd
    >>> feature_words(pd.DataFrame({"band": [1], "dp_count": [3]}), 5)
    '5 bands'
    """
    noun = {"hotspots": "cell", "bands": "band", "levels": "level", "clusters": "cluster", "counts": "cell"}[
        layer_kind(gdf)]
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def layer_style(gdf, metadata=None):
    """How a release's features are coloured: ``(fills, outlines, index, legend, title, note)``.

    Clusters (``cluster_id``): the qualitative palette, neighbours in different
    colours (:func:`colour_index`), ``legend`` None (the map lists the
    clusters). Hot spots (``gi_bin``): the hot-spot palette, one class per
    ``gi_bin``. Density bands (``band``): the sequential palette spread over
    the bands. Count layers (``dp_count`` only): the sequential palette in the
    classes of :func:`count_classes` (clear of the noise, the peak on top).
    ``legend`` is a list of ``(colour index, label)``; ``note`` says what the
    classes are and why there are fewer than asked ("" when there is nothing
    to say). The QGIS style (:mod:`dpgeo.io.qgis_style`) uses the same classes
    and colours.

    Examples
    --------
    >>> import geopandas as gpd, shapely
    >>> g = gpd.GeoDataFrame({"gi_bin": [3, 0]}, geometry=[shapely.box(0, 0, 1, 1)] * 2)
    >>> fills, _, idx, legend, title, note = layer_style(g)
    >>> [fills[i] for i in idx], title
    (['#d62f27', '#f2f2ee'], 'Gi* hot and cold spots')
    """
    md = metadata or {}
    cols = set(gdf.columns)
    n = len(gdf)
    if "cluster_id" in cols or "dp_count" not in cols and "gi_bin" not in cols and "band" not in cols:
        ids = gdf["cluster_id"].to_numpy() if "cluster_id" in cols and n else np.zeros(0, int)
        idx = colour_index(ids, np.asarray(gdf.geometry.values)) if ids.size else np.zeros(0, int)
        return CLUSTER_COLOURS, OUTLINE_COLOURS, idx, None, None, ""
    if "gi_bin" in cols:
        keys = list(range(3, -4, -1))
        fills = tuple(HOTSPOT_COLOURS[k] for k in keys)
        b = gdf["gi_bin"].to_numpy().astype(np.int64) if n else np.zeros(0, np.int64)
        idx = 3 - b
        legend = [(i, f"{HOTSPOT_LABELS[k]} ({int((idx == i).sum()):,})") for i, k in enumerate(keys)]
        return fills, tuple(_darker(c) for c in fills), idx, legend, "Gi* hot and cold spots", ""
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
        return fills, outlines, idx, legend[::-1], "density bands (smoothed count per km²)", band_note(md, n)
    c = count_classes(gdf["dp_count"].to_numpy() if n else [], noise_halfwidth=count_noise_halfwidth(gdf))
    colour = band_colour(np.arange(1, len(c.lower) + 1), len(c.lower)) if len(c.lower) else np.zeros(0, int)
    legend = [(int(colour[i]), f"dp_count {a:,}" if a == b else f"dp_count {a:,}–{b:,}") for i, (a, b) in
              enumerate(zip(c.lower.tolist(), c.upper.tolist()))][::-1]
    idx = colour[c.index] if len(c.lower) else np.zeros(0, int)
    return fills, outlines, idx, legend, "dp_count per cell", c.note


def band_note(metadata, n_bands: int) -> str:
    """What a density-band layer's limits are, and why there are fewer bands than asked (for its legend).

    Examples
    --------
    >>> band_note({"bands_requested": 5}, 3)
    '3 bands, not 5: the noise allows no more (each limit at least two noise standard deviations above the one below)'
    """
    asked = (metadata or {}).get("bands_requested")
    if isinstance(asked, int) and n_bands < asked:
        return (f"{n_bands} band{'s' if n_bands != 1 else ''}, not {asked}: the noise allows no more (each limit at "
                "least two noise standard deviations above the one below)")
    return ("limits on the smoothed release, at least two noise standard deviations apart "
            "(post-processing of the release: no privacy cost)")


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
