"""Where the points are: the cell width of a run without a radius from a noisy histogram of occupancy.

The uniform rule of :mod:`dpgeo.mechanisms.resolution` spreads the noisy total
``n̂`` over the whole study area, as if the points filled it. When they fill a
small part of it (a few compact groups in a large study area: small data), its
cells are far too wide. This step spends a stated share of the histogram's
budget on finding out how much of the study area the points occupy, when the
uniform rule's grid has at most :data:`OCCUPANCY_MAX_CELLS` cells (a function
of ``n̂`` and public inputs; otherwise the share stays with the histogram):

1. a dense histogram of the grid the uniform rule picks (width ``w_u``),
   released with ``ε_c`` (:data:`CONCENTRATION_SHARE` of the histogram's
   budget; discrete Laplace of decay ``exp(-ε_c/Δ)``);
2. for blocks of ``b × b`` of its cells, ``b`` in :data:`BLOCKS` (finest
   first), the blocks that hold points at false-discovery rate
   :data:`OCCUPANCY_FDR` (Benjamini–Hochberg, null "no point in the block",
   exact p-values of a sum of ``b²`` noises) — the *occupied* blocks — and
   the noisy points they hold;
3. at the first ``b`` whose occupied blocks hold at least
   :data:`OCCUPIED_MASS_SHARE` of ``n̂``, the density of the occupied part
   ``d = mass / area`` gives the cell width ``w = sqrt(ρ σ₁ / d)``: the
   uniform rule (``ρ σ₁`` evenly spread points per cell, ``σ₁`` one final
   cell's noise) on the occupied area instead of the whole study area,
   clipped to ``[max(w₀, w_u / MAX_REFINEMENT), w_u]``, provided the occupied blocks cover at most
   :data:`MAX_OCCUPIED_AREA_SHARE` of the study area. Where no ``b``
   qualifies (the points are spread thinly, no block stands out of the
   noise, or they occupy much of the study area: a city, a gradient, whose
   sparser parts finer cells would lose) the width stays ``w_u``.

**Privacy.** The occupancy histogram is ε_c-DP (the geometric mechanism on a
histogram of a public grid: one record moves at most ``Δ`` points, the L1
change of the counts is at most ``Δ``); the grid it is drawn on is a function
of ``n̂`` and public inputs; the width is a function of the released
occupancy histogram, ``n̂`` and public inputs. So the width is post-processing
and the run composes: ``ε₀ + ε_c + ε₁ ≤ ε`` (``docs/privacy.md``).
"""

from __future__ import annotations

import math

import numpy as np

from ..noise import split_epsilon

__all__ = [
    "BLOCKS",
    "CONCENTRATION_SHARE",
    "OCCUPANCY_FDR",
    "OCCUPANCY_MAX_CELLS",
    "MAX_OCCUPIED_AREA_SHARE",
    "MAX_REFINEMENT",
    "OCCUPIED_MASS_SHARE",
    "concentration_budget",
    "occupied_blocks",
    "occupied_width",
]

#: Share of the histogram's budget (ε minus the total's share) spent on where the points are.
CONCENTRATION_SHARE = 0.2
#: The occupancy step runs only where the uniform rule's grid has at most this many cells (small data: its
#: cells are then wide; with more, they are fine already, and finer cells would cut ridges and lose sparse
#: parts); otherwise its share stays with the histogram.
OCCUPANCY_MAX_CELLS = 1024
#: Blocks of b x b occupancy cells tried, finest first.
BLOCKS = (1, 2, 4)
#: False-discovery rate of the occupied blocks.
OCCUPANCY_FDR = 0.1
#: The occupied blocks must hold at least this share of the noisy total for their density to set the width ...
OCCUPIED_MASS_SHARE = 0.8
#: The cells are at most this many times finer than the uniform rule's (the occupancy histogram shows where
#: the points are at its own cell width, not how they lie inside its cells).
MAX_REFINEMENT = 4
#: ... and cover at most this share of the study area (points in a few places of a large study area: where
#: else they are spread enough for the uniform rule, and finer cells would lose their sparser parts).
MAX_OCCUPIED_AREA_SHARE = 0.1


def concentration_budget(epsilon_histogram: float, share: float = CONCENTRATION_SHARE) -> tuple[float, float]:
    """``(ε_c, ε₁)``: the occupancy histogram's budget and the final histogram's, ``ε_c + ε₁ ≤ ε_h`` exactly.

    Examples
    --------
    >>> e_c, e_1 = concentration_budget(0.95)
    >>> round(e_c, 6), round(e_1, 6)
    (0.19, 0.76)
    """
    return split_epsilon(epsilon_histogram, share)


def _block_sums(dense: np.ndarray, b: int) -> np.ndarray:
    """Sums of the ``b x b`` blocks of ``dense`` (ny, nx), the last row and column of blocks padded with 0."""
    ny, nx = dense.shape
    py, px = -ny % b, -nx % b
    v = np.pad(dense, ((0, py), (0, px)))
    return v.reshape((ny + py) // b, b, (nx + px) // b, b).sum(axis=(1, 3))


def occupied_blocks(values: np.ndarray, kappa: np.ndarray, q: float, fdr: float = OCCUPANCY_FDR) -> np.ndarray:
    """Which released block sums reject "no point in the block" at false-discovery rate ``fdr``.

    ``values`` are sums of ``kappa`` released counts each (decay ``q``); the
    p-value of a sum ``s`` is ``Pr[N_κ ≥ s]`` exactly; Benjamini–Hochberg over
    all of them.

    Examples
    --------
    >>> import math
    >>> occupied_blocks(np.array([0, 1, 40, -2, 25, 12]), np.ones(6, int), math.exp(-0.19)).tolist()
    [False, False, True, False, True, False]
    """
    from .levels import _p_values

    values = np.asarray(values, dtype=np.int64)
    if values.size == 0:
        return np.zeros(0, dtype=bool)
    p = _p_values(values, np.asarray(kappa, dtype=np.int64), q)
    m = p.size
    order = np.argsort(p, kind="stable")
    ok = np.flatnonzero(p[order] <= fdr * np.arange(1, m + 1) / m)
    if ok.size == 0:
        return np.zeros(m, dtype=bool)
    return p <= p[order[ok[-1]]]


def occupied_width(hist, n_hat: float, *, final_sd: float, rho: float, blocks=BLOCKS, fdr: float = OCCUPANCY_FDR,
                   mass_share: float = OCCUPIED_MASS_SHARE,
                   max_area_share: float = MAX_OCCUPIED_AREA_SHARE) -> tuple[float | None, dict]:
    """The cell width (metres) that spreads the points over the part of the study area they occupy.

    Parameters
    ----------
    hist : NoisyHistogram
        The released occupancy histogram (dense).
    n_hat : float
        The noisy total.
    final_sd : float
        ``σ₁``, the standard deviation of one cell's noise in the final histogram.
    rho : float
        Evenly spread points per final cell, in ``σ₁`` (the uniform rule's ρ).

    Returns
    -------
    width, info
        ``None`` where no block size qualifies (keep the uniform width), and
        the public figures of the choice (for the metadata).
    """
    g = hist.grid
    dense = hist.to_dense().astype(np.int64)
    uni = g.universe_mask()
    n_hat = max(float(n_hat), 1.0)
    info = {"occupancy_blocks": list(blocks), "occupancy_fdr": fdr, "occupied_mass_share": mass_share,
            "max_occupied_area_share": max_area_share}
    whole = float(uni.sum()) * g.cell_m ** 2
    for b in blocks:
        if b > 1 and (g.nx < 2 * b or g.ny < 2 * b):
            break
        s = _block_sums(np.where(uni, dense, 0), b)
        k = _block_sums(uni.astype(np.int64), b)
        inside = k > 0
        occ = occupied_blocks(s[inside], k[inside], hist.q, fdr)
        mass = float(s[inside][occ].sum())
        area = float(k[inside][occ].sum()) * g.cell_m ** 2
        if occ.any() and mass >= mass_share * n_hat:
            if area > max_area_share * whole:  # the points are spread: the uniform rule
                break
            width = max(math.sqrt(rho * final_sd * area / mass), g.cell_m / MAX_REFINEMENT)
            info.update({"occupancy_block": b, "occupied_area_m2": area, "occupied_mass": mass,
                         "occupied_share_of_area": area / whole})
            return width, info
    info.update({"occupancy_block": None})
    return None, info
