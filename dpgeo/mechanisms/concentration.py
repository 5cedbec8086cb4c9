"""Where the points are: the cell width of a run without a radius from a noisy histogram of occupancy.

The uniform rule of :mod:`dpgeo.mechanisms.resolution` spreads the noisy total
``n̂`` over the whole study area, as if the points filled it. When they fill a
part of it (compact groups in a large study area, many small groups, trails),
its cells are too wide. This step spends a stated share of the histogram's
budget on finding out where the points are and how dense their sparser parts
are, for every ``n̂``:

1. a dense histogram of the grid the uniform rule picks (width ``w_u``),
   released with ``ε_c`` (discrete Laplace of decay ``exp(-ε_c/Δ)``): a share
   :data:`CONCENTRATION_SHARE` of the histogram's budget when that grid has at
   most :data:`OCCUPANCY_MAX_CELLS` cells (few points for the budget), else
   :data:`LARGE_CONCENTRATION_SHARE` (the counts are larger there, and the
   cells already finer) — a function of ``n̂`` and public inputs;
2. for blocks of ``b × b`` of its cells, ``b`` in :data:`BLOCKS` (finest
   first), the blocks that hold points at false-discovery rate
   :data:`OCCUPANCY_FDR` (Benjamini–Hochberg, null "no point in the block",
   exact p-values of a sum of ``b²`` noises) — the *occupied* blocks — and
   the noisy points they hold;
3. at the first ``b`` whose occupied blocks hold at least
   :data:`OCCUPIED_MASS_SHARE` of ``n̂``: the occupied blocks sorted by noisy
   density (points per m²), the sparsest of them that together hold
   :data:`SPARSE_MASS_SHARE` of the occupied points give the density ``d`` of
   the points' sparser parts, and the cell width is ``w = sqrt(ρ σ₁ / d)``:
   the uniform rule (``ρ σ₁`` evenly spread points per cell, ``σ₁`` one final
   cell's noise) at the density of the sparser occupied parts instead of the
   whole study area's mean, clipped to ``[max(w₀, w_u / r), w_u]`` with ``r``
   :data:`MAX_REFINEMENT` (few cells) or :data:`LARGE_MAX_REFINEMENT`. Points
   that fill the study area, or whose sparser parts are as thin as the mean
   (a gradient, the suburbs of a city), keep ``w_u``; compact groups get
   finer cells. Where no ``b`` qualifies (the points are spread thinly, no
   block stands out of the noise, or many small groups each too small to
   stand out) the width stays ``w_u`` with many cells, and is ``w_u`` /
   :data:`FALLBACK_REFINEMENT` with few: with few points for the budget the
   uniform rule's cells are wide, and small groups that fill the study area
   (the case the histogram cannot see) were merged by them (the generated
   ``clumps`` and ``groups`` classes of ``benchmarks/utility_auto.py``).

(Before, the step ran only with at most :data:`OCCUPANCY_MAX_CELLS` cells, used
the mean density of the occupied blocks, cells at most 4 times finer, and only
when the occupied blocks covered at most a tenth of the study area:
``sparse_share=None, max_refinement=4, max_area_share=0.1`` and a large share of
0 give it back; the fallback of :data:`FALLBACK_REFINEMENT` came later, 1 gives
the uniform width back.)

**Privacy.** The occupancy histogram is ε_c-DP (the geometric mechanism on a
histogram of a public grid: one record moves at most ``Δ`` points, the L1
change of the counts is at most ``Δ``); the grid it is drawn on and ``ε_c`` are
functions of ``n̂`` and public inputs; the width is a function of the released
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
    "FALLBACK_REFINEMENT",
    "LARGE_CONCENTRATION_SHARE",
    "LARGE_MAX_REFINEMENT",
    "MAX_OCCUPIED_AREA_SHARE",
    "MAX_REFINEMENT",
    "OCCUPANCY_FDR",
    "OCCUPANCY_MAX_CELLS",
    "OCCUPIED_MASS_SHARE",
    "SPARSE_MASS_SHARE",
    "concentration_budget",
    "occupancy_setting",
    "occupied_blocks",
    "occupied_width",
]

#: Share of the histogram's budget (ε minus the total's share) spent on where the points are, when the uniform
#: rule's grid has at most :data:`OCCUPANCY_MAX_CELLS` cells (few points for the budget: wide cells) ...
CONCENTRATION_SHARE = 0.2
#: ... and when it has more (the counts are larger, the uniform cells finer already).
LARGE_CONCENTRATION_SHARE = 0.1
#: The grid size (cells) up to which the uniform rule's grid counts as few cells.
OCCUPANCY_MAX_CELLS = 1024
#: Blocks of b x b occupancy cells tried, finest first.
BLOCKS = (1, 2, 4)
#: False-discovery rate of the occupied blocks.
OCCUPANCY_FDR = 0.1
#: The occupied blocks must hold at least this share of the noisy total for their density to set the width.
OCCUPIED_MASS_SHARE = 0.8
#: The width follows the density of the sparsest occupied blocks that hold this share of the occupied points
#: (None: the mean density of all occupied blocks, the rule before).
SPARSE_MASS_SHARE = 0.1
#: The cells are at most this many times finer than the uniform rule's with few cells, ...
MAX_REFINEMENT = 3
#: ... and at most this many times with more (finer cells cut ridges and lose sparse parts sooner).
LARGE_MAX_REFINEMENT = 1.5
#: The occupied blocks may cover at most this share of the study area for the cells to follow them (1: no
#: limit; the sparse parts' density replaced the limit of 0.1 of the rule before).
MAX_OCCUPIED_AREA_SHARE = 1.0
#: With few cells, where no block size's occupied blocks hold :data:`OCCUPIED_MASS_SHARE` of ``n̂`` (the
#: histogram cannot tell where the points are), the cells are this many times finer than the uniform rule's:
#: the uniform rule at ``ρ/2`` (1: the uniform width, the rule before).
FALLBACK_REFINEMENT = math.sqrt(2)


def occupancy_setting(few_cells: bool, small_share: float = CONCENTRATION_SHARE,
                      large_share: float = LARGE_CONCENTRATION_SHARE, small_refinement: float = MAX_REFINEMENT,
                      large_refinement: float = LARGE_MAX_REFINEMENT) -> tuple[float, float]:
    """``(share of the histogram's ε, largest refinement)`` of the occupancy step (public: from ``n̂``'s grid).

    Examples
    --------
    >>> occupancy_setting(True), occupancy_setting(False)
    ((0.2, 3), (0.1, 1.5))
    """
    return (small_share, small_refinement) if few_cells else (large_share, large_refinement)


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
    from .level_floor import _p_values

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
                   max_area_share: float = MAX_OCCUPIED_AREA_SHARE,
                   max_refinement: float = MAX_REFINEMENT,
                   sparse_share: float | None = SPARSE_MASS_SHARE) -> tuple[float | None, dict]:
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
    blocks, fdr, mass_share, max_area_share, max_refinement, sparse_share
        The block sizes tried, the occupied blocks' false-discovery rate, the
        share of ``n̂`` they must hold, the largest share of the study area they
        may cover, how many times finer than the occupancy grid the cells may
        be, and the share of the occupied points whose sparsest blocks set the
        density (None: the mean density of all occupied blocks).

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
            "max_occupied_area_share": max_area_share, "sparse_mass_share": sparse_share,
            "max_refinement": max_refinement}
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
            density = mass / area
            if sparse_share is not None:  # the density of the sparsest occupied blocks holding this share of the mass
                c = s[inside][occ].astype(float)
                a = k[inside][occ].astype(float) * g.cell_m ** 2
                order = np.argsort(c / a)
                cum = np.cumsum(c[order])
                j = int(np.searchsorted(cum, sparse_share * cum[-1]))
                sel = order[: j + 1]
                density = max(float(c[sel].sum() / a[sel].sum()), 1e-300)
            width = max(math.sqrt(rho * final_sd / density), g.cell_m / max_refinement)
            info.update({"occupancy_block": b, "occupied_area_m2": area, "occupied_mass": mass,
                         "occupied_share_of_area": area / whole, "sparse_density_per_km2": density * 1e6})
            return width, info
    info.update({"occupancy_block": None})
    return None, info
