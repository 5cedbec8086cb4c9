"""Each cell's own noise, for histograms whose cells do not carry one noise each (cells of different sizes).

Part of :mod:`dpgeo.mechanisms.levels` (post-processing; no budget). An
adaptive decomposition (:mod:`dpgeo.mechanisms.privtree`) releases one noisy
count per *leaf*, a block of ``A`` cells of the finest grid, and spreads it
over those cells (:func:`~dpgeo.mechanisms.privtree.rasterise_leaves`). A
cell's level is a weighted 3×3 sum of the spread values (weights ``w_o``: 1
for the box, ``(2-|dx|)(2-|dy|)·9/16`` for the binomial kernel), so its noise
is a weighted sum of the noises of the leaves the window touches, each leaf's
share the sum of the weights of the window's cells in it over ``A``:

    Var = σ² Σ_j (Σ_{o ∈ leaf j} w_o / A_j)²  =  σ² Σ_{o, o'} w_o w_o' [leaf(o) = leaf(o')] / A²,

cells of one leaf being fully correlated (their weights are summed first,
then squared). A window of 1-cell leaves gives ``σ² Σ w_o²``, the uniform
grid's :func:`~dpgeo.mechanisms.level_floor.level_noise`; a window inside a
leaf of ``A ≥ 9`` cells ``σ² (Σ w_o)² / A²``. The points' Poisson variation per
unit of level (the dip rule's ``level_variance``) is, for a density even over
the window's leaves, ``Σ_{o, o'} w_o w_o' [same leaf] / A / Σ_o w_o`` (1 for
the box on 1-cell leaves, ``9/A`` inside a large leaf: a level read from
many cells varies less). The spread rounds each cell to an integer (the
ordered dither); its error is counted as independent per cell, variance
``f(1-f)`` for a leaf density of fractional part ``f`` (0 for 1-cell leaves).

Everything is a function of the released leaves and counts (public).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import ParameterError
from .level_floor import KERNELS
from .level_tree import BOX_OFFSETS

__all__ = ["CellNoise", "kernel_weights", "leaf_cell_noise", "uniform_reading"]


@dataclass
class CellNoise:
    """Each cell's noise on a grid of spread leaf counts (flat arrays over the grid's ``ny·nx`` cells; public).

    Attributes
    ----------
    level_sd : numpy.ndarray
        s.d. of the noise of the cell's level (the kernel's weighted 3×3 sum).
    level_variance : numpy.ndarray
        The points' Poisson variance of the cell's level per unit of level.
    box_sd : numpy.ndarray
        s.d. of the noise of the cell's 3×3 box sum (the floor's statistic, the smallest cluster's mass).
    count_z : numpy.ndarray
        The cell's leaf's noisy count in s.d. of its noise (``c/σ``; the same as the cell's unrounded
        value ``c/A`` against its share ``σ/A`` of the noise): the gap rule's "a significant count".
    """

    level_sd: np.ndarray
    level_variance: np.ndarray
    box_sd: np.ndarray
    count_z: np.ndarray


def kernel_weights(kernel: str) -> np.ndarray:
    """The 9 weights of a kernel in the order of :data:`~dpgeo.mechanisms.level_tree.BOX_OFFSETS` (box units).

    Examples
    --------
    >>> kernel_weights("binomial").reshape(3, 3).tolist()
    [[0.5625, 1.125, 0.5625], [1.125, 2.25, 1.125], [0.5625, 1.125, 0.5625]]
    """
    if kernel not in KERNELS:
        raise ParameterError(f"kernel must be one of {KERNELS}, got {kernel!r}")
    if kernel == "box":
        return np.ones(BOX_OFFSETS.shape[0])
    return np.array([(2 - abs(dx)) * (2 - abs(dy)) * 9 / 16 for dx, dy in BOX_OFFSETS.tolist()])


def _window_moments(leaf_of_cell: np.ndarray, leaf_cells: np.ndarray, inside: np.ndarray, frac_var: np.ndarray,
                    weights: np.ndarray):
    """``(Σ_j s_j², Σ_j s_j² A_j, Σ_o w_o, Σ_o w_o² f(1-f))`` per cell, ``s_j`` leaf ``j``'s share of the window."""
    ny, nx = leaf_of_cell.shape
    pad_l = np.full((ny + 2, nx + 2), -1, dtype=np.int64)
    pad_l[1:-1, 1:-1] = np.where(inside, leaf_of_cell, -1)
    pad_a = np.ones((ny + 2, nx + 2))
    pad_a[1:-1, 1:-1] = leaf_cells[leaf_of_cell]
    pad_f = np.zeros((ny + 2, nx + 2))
    pad_f[1:-1, 1:-1] = frac_var
    win = [(slice(1 + dy, 1 + dy + ny), slice(1 + dx, 1 + dx + nx)) for dx, dy in BOX_OFFSETS.tolist()]
    leaf = [pad_l[w] for w in win]
    inv = [(leaf[i] >= 0) / pad_a[w] for i, w in enumerate(win)]  # 1/A, 0 outside
    s2 = np.zeros((ny, nx))
    s2a = np.zeros((ny, nx))
    wsum = np.zeros((ny, nx))
    rnd = np.zeros((ny, nx))
    tmp = np.empty((ny, nx))
    for i, wi in enumerate(weights.tolist()):
        ok = leaf[i] >= 0
        wsum += wi * ok
        rnd += wi * wi * ok * pad_f[win[i]]
        # the pair (o, o) and, once for (o, o') and (o', o), every other cell of the window in the same leaf
        # (fully correlated): Σ_o' w_o' [same leaf] over A, times w_o over A and over 1
        acc = np.full((ny, nx), wi)
        for j in range(i + 1, len(win)):
            np.equal(leaf[j], leaf[i], out=tmp, casting="unsafe")
            acc += (2.0 * weights[j]) * tmp
        np.multiply(acc, inv[i], out=tmp)
        tmp *= wi
        s2a += tmp
        tmp *= inv[i]
        s2 += tmp
    return s2, s2a, wsum, rnd


def leaf_cell_noise(leaf_of_cell: np.ndarray, leaf_cells: np.ndarray, leaf_count: np.ndarray, sd_leaf: float, *,
                    kernel: str = "box", inside: np.ndarray | None = None) -> CellNoise:
    """Each cell's noise on a grid of spread leaf counts (the module's formulas; vectorised over the cells).

    Parameters
    ----------
    leaf_of_cell : numpy.ndarray
        ``(ny, nx)`` leaf of every cell.
    leaf_cells, leaf_count : numpy.ndarray
        Per leaf: its number of cells ``A`` and its noisy count ``c``.
    sd_leaf : float
        s.d. ``σ`` of one leaf count's noise.
    kernel : {"box", "binomial"}
        The density of the tree of levels (``level_sd``, ``level_variance``); ``box_sd`` is always the box's.
    inside : numpy.ndarray, optional
        ``(ny, nx)`` mask of the cells whose values are released (the universe); others add nothing.

    Examples
    --------
    >>> import numpy as np
    >>> lc = np.zeros((6, 6), int); lc[:, 3:] = np.arange(1, 19).reshape(6, 3)   # one leaf of 18 cells, 18 of 1
    >>> n = leaf_cell_noise(lc, np.r_[18, np.ones(18, int)], np.r_[36, np.full(18, 2)], 1.0)
    >>> round(float(n.box_sd.reshape(6, 6)[2, 1]), 3), round(float(n.box_sd.reshape(6, 6)[2, 4]), 3)   # 9/18, √9
    (0.5, 3.0)
    >>> round(float(n.level_variance.reshape(6, 6)[2, 1]), 3), float(n.level_variance.reshape(6, 6)[2, 4])
    (0.5, 1.0)
    """
    leaf_of_cell = np.asarray(leaf_of_cell, dtype=np.int64)
    leaf_cells = np.asarray(leaf_cells)
    c = np.asarray(leaf_count, dtype=np.int64)
    inside = np.ones(leaf_of_cell.shape, dtype=bool) if inside is None else np.asarray(inside, dtype=bool)
    dens = c / leaf_cells
    f = (dens - np.floor(dens))[leaf_of_cell]
    frac_var = f * (1.0 - f)
    var0 = float(sd_leaf) ** 2
    out = {}
    for name, kern in (("box", "box"), ("level", kernel)):
        if name == "level" and kern == "box":
            out["level"] = out["box"]
            continue
        s2, s2a, wsum, rnd = _window_moments(leaf_of_cell, leaf_cells, inside, frac_var, kernel_weights(kern))
        out[name] = (np.sqrt(var0 * s2 + rnd).ravel(), (s2a / np.maximum(wsum, 1e-12)).ravel())
    z = (c / max(float(sd_leaf), 1e-12))[leaf_of_cell].ravel()
    return CellNoise(out["level"][0], out["level"][1], out["box"][0], z)


def uniform_reading(q_sd: float, kernel: str) -> tuple[float, float]:
    """``(level s.d., Poisson variance per unit of level)`` of a window of 1-cell leaves (the uniform grid's).

    Examples
    --------
    >>> [round(v, 3) for v in uniform_reading(1.0, "binomial")]
    [3.375, 1.266]
    """
    w = kernel_weights(kernel)
    return math.sqrt(float((w * w).sum())) * q_sd, float((w * w).sum() / w.sum())
