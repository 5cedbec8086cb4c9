"""``auto`` with ``resolution="privtree"``: the histogram the levels are read from, from a PrivTree (experiment).

The uniform rule's grid (at the leaf counts' budget) sets the scale; the
decomposition runs on the grid ``refinement`` times finer (at most the largest
histogram allowed), from roots ``root`` uniform cells wide. The noisy leaf
counts are spread over the fine cells (:func:`~dpgeo.mechanisms.privtree.rasterise_leaves`)
and the result is read as a dense histogram. The selection rules read each
cell's own noise (:mod:`~dpgeo.mechanisms.cell_noise`: a cell's share of its
leaf's noise, the shares of one leaf summed before they are squared); with
``cell_noise=False`` (the rule before) one s.d. for all cells: a 3×3 sum of
fine cells has noise variance at most that of nine independent leaf noises
(a window's cells from a leaf of ``A`` cells carry ``k/A ≤ 1`` of its noise
each, and ``Σ (k_j/A_j)² ≤ Σ k_j = 9``), so ``sd_rule="max"`` is conservative.
The floor tests each cell against its own s.d. (:func:`window_noise_sd`) with
normal p-values, an approximation of the law of a weighted sum of discrete
Laplace noises: its false-discovery rate is approximate, not the exact bound
of the uniform grid (utility only: all of this is post-processing of the
released tree and counts).
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import ParameterError
from ..histogram import NoisyHistogram
from ..noise import discrete_laplace_q, discrete_laplace_variance, split_epsilon
from .cell_noise import leaf_cell_noise
from .privtree import privtree_leaves, rasterise_leaves, release_leaf_counts
from .resolution import coarsen_counts

__all__ = ["PRIVTREE_CELL_NOISE", "PRIVTREE_REFINEMENT", "PRIVTREE_ROOT", "PRIVTREE_SD", "PRIVTREE_SHARE", "PRIVTREE_THETA_SD",
           "gaussian_fdr_floor", "privtree_histogram", "window_noise_sd"]

#: Share of the histogram's budget the split decisions take.
PRIVTREE_SHARE = 0.3
#: Split threshold θ in standard deviations of one leaf count's noise.
PRIVTREE_THETA_SD = 3.0
#: The finest cells are this many times narrower than the uniform rule's (a power of two).
PRIVTREE_REFINEMENT = 4
#: The roots are blocks this many uniform cells wide (a power of two).
PRIVTREE_ROOT = 2
#: The selection rules read each cell's own noise (:mod:`~dpgeo.mechanisms.cell_noise`); False: one s.d. ...
PRIVTREE_CELL_NOISE = True
#: ... for all cells, the one s.d. of a 3×3 sum the selection rules use: the largest over the cells (conservative) or the
#: mean over the cells weighted by their released sums (where the points are; not conservative).
PRIVTREE_SD = "max"


def window_noise_sd(leaf_of_cell: np.ndarray, leaf_cells: np.ndarray, sd_leaf: float) -> np.ndarray:
    """``(ny, nx)`` s.d. of the noise of each cell's 3×3 sum of spread leaf counts: ``σ·√Σ_j (k_j/A_j)²``.

    ``k_j`` of the window's cells lie in leaf ``j`` of ``A_j`` cells (rounding of the spread ignored).
    """
    ny, nx = leaf_of_cell.shape
    n_leaves = leaf_cells.size
    pad_l = np.full((ny + 2, nx + 2), n_leaves, dtype=np.int64)  # n_leaves: outside the grid
    pad_l[1:-1, 1:-1] = leaf_of_cell
    w = np.r_[1.0 / leaf_cells, 0.0]
    centre = np.arange(ny * nx, dtype=np.int64)
    keys = []
    for dy in (-1, 0, 1):
        for dx in (-1, 0, 1):
            keys.append(centre * (n_leaves + 1) + pad_l[1 + dy:1 + dy + ny, 1 + dx:1 + dx + nx].ravel())
    key = np.concatenate(keys)
    uk, inv = np.unique(key, return_inverse=True)
    share = np.bincount(inv, weights=w[key % (n_leaves + 1)], minlength=uk.size)
    var = np.bincount(uk // (n_leaves + 1), weights=share ** 2, minlength=ny * nx)
    return sd_leaf * np.sqrt(var).reshape(ny, nx)


def gaussian_fdr_floor(sd_cells: np.ndarray, universe: np.ndarray, unrounded_sums: np.ndarray | None = None):
    """A floor function for :func:`~dpgeo.mechanisms.levels.density_levels`: Benjamini–Hochberg with
    each cell's own noise s.d. and normal p-values (an approximation of the discrete law), on the 3×3 sums
    of the leaves' noisy densities before rounding (``unrounded_sums``) when given."""
    from scipy.special import ndtr

    def floor(sums, fdr):
        if unrounded_sums is None:
            s = sums.ravel()[universe].astype(np.float64) - 0.5
        else:
            s = unrounded_sums.ravel()[universe]
        sd = sd_cells.ravel()[universe]
        p = ndtr(-s / np.maximum(sd, 1e-12))
        order = np.argsort(p, kind="stable")
        m = p.size
        ok = np.flatnonzero(p[order] <= fdr * np.arange(1, m + 1) / m)
        if ok.size == 0:
            return np.zeros(0, dtype=np.int64), 0.0
        p_cut = float(p[order[ok[-1]]])
        return universe[p <= p_cut], p_cut
    return floor


def privtree_histogram(fine, cell_id, count, epsilon_histogram, *, rng, sensitivity=1, factor_of,
                       share=PRIVTREE_SHARE, theta_sd=PRIVTREE_THETA_SD, refinement=PRIVTREE_REFINEMENT,
                       root=PRIVTREE_ROOT, sd_rule=PRIVTREE_SD, float_floor=True, grid_of, k_min,
                       cell_noise=PRIVTREE_CELL_NOISE, kernel="box"):
    """``(grid, hist, factor, uniform_factor, ε_tree, ε_leaf, settings, levels_kw)`` of a PrivTree run.

    ``ε_tree + ε_leaf ≤ ε_h`` exactly (:func:`~dpgeo.noise.split_epsilon`).

    ``factor_of(ε)`` is the uniform rule's coarsening factor at a histogram budget ``ε`` (public: from ``n̂``).
    ``cell_noise``: the selection rules read each cell's own noise in the ``kernel``'s levels
    (:func:`~dpgeo.mechanisms.cell_noise.leaf_cell_noise`; ``levels_kw["cell_noise"]``); False: one s.d.
    for all cells, chosen by ``sd_rule`` (the rule before).
    """
    if sensitivity != 1:
        raise ParameterError("resolution='privtree' covers records of one point only (sensitivity 1); "
                             "use resolution='uniform'")
    for name, v in (("privtree_refinement", refinement), ("privtree_root", root)):
        if int(v) != v or v < 1 or (int(v) & (int(v) - 1)):
            raise ParameterError(f"{name} must be a power of two >= 1, got {v!r}")
    eps_t, eps_l = split_epsilon(epsilon_histogram, share)
    uniform_factor = factor_of(eps_l)
    k_f = max(k_min, 1, uniform_factor // int(refinement))
    depth = max(0, round(math.log2(max(1.0, uniform_factor * int(root) / k_f))))
    grid = grid_of(k_f)
    ids, counts = coarsen_counts(fine, cell_id, count, grid, k_f)
    q = discrete_laplace_q(eps_l, sensitivity)
    theta = math.ceil(theta_sd * math.sqrt(discrete_laplace_variance(q)))
    leaves = privtree_leaves(grid, ids, counts, depth=depth, epsilon_tree=eps_t, theta=theta, rng=rng)
    release_leaf_counts(leaves, grid, ids, counts, epsilon=eps_l, rng=rng)
    del ids, counts
    vals = rasterise_leaves(leaves, depth).ravel()
    uni = grid.universe_ids()
    hist = NoisyHistogram(grid, "dense", uni, vals[uni], float(eps_l), float(sensitivity), q, None,
                          sampler="privtree leaves")
    sd_cells = window_noise_sd(leaves.leaf_of_cell, leaves.leaf_cells, math.sqrt(discrete_laplace_variance(q)))
    sums = np.zeros(grid.ny * grid.nx)
    if sd_rule == "max":
        sd = float(sd_cells.ravel()[uni].max())
    elif sd_rule == "mass":
        from .levels import box_sums
        sums = np.maximum(box_sums(hist).ravel()[uni], 0).astype(np.float64)
        sd = float((sd_cells.ravel()[uni] * sums).sum() / max(sums.sum(), 1.0))
    else:
        raise ParameterError(f"privtree_sd must be 'max' or 'mass', got {sd_rule!r}")
    dens = (leaves.leaf_count / leaves.leaf_cells)[leaves.leaf_of_cell]
    pad = np.zeros((grid.ny + 2, grid.nx + 2))
    pad[1:-1, 1:-1] = dens
    unrounded = sum(pad[1 + dy:1 + dy + grid.ny, 1 + dx:1 + dx + grid.nx] for dy in (-1, 0, 1) for dx in (-1, 0, 1))
    levels_kw = {"floor_cells": gaussian_fdr_floor(sd_cells, uni, unrounded if float_floor else None), "noise_sd": sd}
    if cell_noise:
        levels_kw["cell_noise"] = leaf_cell_noise(leaves.leaf_of_cell, leaves.leaf_cells, leaves.leaf_count,
                                                  math.sqrt(discrete_laplace_variance(q)), kernel=kernel,
                                                  inside=grid.universe_mask())
    info = {
        "resolution": "privtree (experimental adaptive resolution)",
        "privtree_sd_rule": "each cell's own" if cell_noise else sd_rule,
        "privtree_noise_sd": sd,
        "privtree_share": share,
        "privtree_theta": theta,
        "privtree_bias": leaves.bias,
        "privtree_depth": depth,
        "privtree_leaves": int(leaves.leaf_cells.size),
        "privtree_refinement": refinement,
        "privtree_root": root,
    }
    return grid, hist, k_f, uniform_factor, eps_t, eps_l, info, levels_kw
