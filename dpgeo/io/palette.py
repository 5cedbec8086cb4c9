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
