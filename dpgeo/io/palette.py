"""The colours of a cluster layer: one source for the QGIS style, the HTML map and the PNG.

Clusters are categorised on ``cluster_id``: the sorted distinct ids take the
colours of :data:`CLUSTER_COLOURS` in turn (cycling after 12), filled
semi-transparently (:data:`FILL_ALPHA`) and outlined in a darker shade of the
same hue (:data:`OUTLINE_COLOURS`, what Qt's ``QColor.darker(130)`` gives).

The tree of density levels (spans without a radius) is graduated on its
``level`` field: :func:`level_classes` puts the distinct levels into at most
seven classes of equal numbers of levels, coloured light to dark
(:data:`LEVEL_COLOURS`, from ColorBrewer's YlOrRd), outlined likewise
(:data:`LEVEL_OUTLINE_COLOURS`).
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
    "colour_index",
    "hex_to_rgb",
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
#: Sequential palette of the density levels, from the floor (light) to the densest (dark): ColorBrewer YlOrRd's
#: nine classes without the two lightest, which vanish under a semi-transparent fill (Cynthia Brewer,
#: colorbrewer2.org, Apache License 2.0).
LEVEL_COLOURS = ("#fed976", "#feb24c", "#fd8d3c", "#fc4e2a", "#e31a1c", "#bd0026", "#800026")
#: Outline of each level colour (Qt's ``QColor(c).darker(130)``, as :data:`OUTLINE_COLOURS`).
LEVEL_OUTLINE_COLOURS = ("#c3a75b", "#c3893a", "#c36c2e", "#c23c20", "#af1416", "#91001d", "#62001d")


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


def level_classes(level) -> tuple:
    """Graduated classes of density levels: each value's class and each class's range.

    The distinct values, sorted, are cut into ``min(7, how many there are)``
    classes of (nearly) equal numbers of distinct values; class ``c`` takes
    ``LEVEL_COLOURS[c * 7 // n_classes]`` (light to dark, the darkest always
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
    [0, 1, 1, 2, 3, 4, 5, 6]
    >>> level_classes([3, 5, 3])[1]
    [(3.0, 3.0, 0), (5.0, 5.0, 6)]
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
