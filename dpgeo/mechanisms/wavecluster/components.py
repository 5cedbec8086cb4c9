"""Clusters from significant coefficients: 8-connected components, mapped back to grid cells.

*Mapping to cells.* Coefficient ``o`` (per axis) covers cells ``2o - d`` and
``2o - d + 1`` where ``d = floor(c)`` and ``c`` is the centre of mass of the
filter's taps (``d = 0`` for Haar, 3 for bior2.2, 2 for bior1.3 and db2),
so that the labelled cells sit where the coefficient's support is centred.

Everything here is post-processing of a significance mask, which every
mechanism computes from its DP outputs and public parameters only.

DP-DBSCAN (:mod:`dpgeo.mechanisms.dbscan`) also takes connected components,
but of another graph: sorted sparse cell ids joined when closer than α (κ
offsets, more than the 8 neighbours), which ``scipy.ndimage.label`` cannot
express (its neighbourhoods are 3×3), so it builds a sparse graph for
``scipy.sparse.csgraph``. That route gives the same labels on a dense
coefficient grid, numbered alike, but is an order of magnitude slower than
``ndimage.label``, so the two do not share a helper.
"""

from __future__ import annotations

import numpy as np
from scipy import ndimage

from ._checks import _check_shape
from .transform import _filter

__all__ = ["label_coefficients", "coefficients_to_cells"]

_EIGHT = np.ones((3, 3), dtype=bool)


def label_coefficients(significant) -> tuple[np.ndarray, int]:
    """8-connected components of a boolean coefficient grid (1..n, 0 = none)."""
    lab, n = ndimage.label(np.asarray(significant, dtype=bool), structure=_EIGHT)
    return lab.astype(np.int32, copy=False), int(n)


def coefficients_to_cells(coef_labels, shape, *, wavelet: str = "haar") -> np.ndarray:
    """Map coefficient labels back to grid cells and renumber them 1..n.

    Cell ``r`` (per axis) takes the label of coefficient ``(r + d) // 2``
    with the wavelet's offset ``d``; components left without cells are
    dropped and the others renumbered 1..n in their original order (raster
    order of first appearance on the coefficient grid).

    Examples
    --------
    >>> coefficients_to_cells([[0, 1], [2, 0]], (3, 4))
    array([[0, 0, 1, 1],
           [0, 0, 1, 1],
           [2, 2, 0, 0]], dtype=int32)
    """
    lab = np.asarray(coef_labels)
    filt = _filter(wavelet)
    ny, nx = _check_shape(shape)
    d = filt.offset
    ri = (np.arange(ny) + d) // 2
    ci = (np.arange(nx) + d) // 2
    okr = ri < lab.shape[0]
    okc = ci < lab.shape[1]
    out = np.zeros((ny, nx), dtype=np.int32)
    if not okr.any() or not okc.any():
        return out
    sub = lab[np.ix_(ri[okr], ci[okc])]
    # renumber: labels present among mapped coefficients, in label order
    used_rows = np.unique(ri[okr])
    used_cols = np.unique(ci[okc])
    present = np.zeros(int(lab.max(initial=0)) + 1, dtype=bool)
    present[lab[np.ix_(used_rows, used_cols)].ravel()] = True
    present[0] = False
    remap = np.zeros(present.size, dtype=np.int32)
    remap[present] = np.arange(1, int(present.sum()) + 1, dtype=np.int32)
    out[np.ix_(okr, okc)] = remap[sub]
    return out
