"""The grid of a run without a radius: its cell width from ε and a noisy total, in one pass over the data.

When no radius is given (``auto``), the cell width must still come from
public inputs and DP outputs only. The run

1. counts the points once, on the *finest* grid of the public study area
   (:func:`fine_grid`: at most :data:`FINE_CELLS_PER_SIDE` cells along the
   longer side; a function of the study area alone);
2. releases the total ``n̂ = n + Z`` with a share :data:`TOTAL_SHARE` of ε
   (``Z`` discrete Laplace of decay ``exp(-ε₀/Δ)``; ``n`` changes by at most
   ``Δ`` when one record is added or removed);
3. chooses, from ``n̂`` and the rest of the budget ``ε₁`` only, an integer
   factor ``k`` (:func:`coarsening_factor`) and adds the exact counts up into
   cells ``k`` times wider (:func:`coarsen_counts`), which share the finest
   grid's origin, so every fine cell lies in exactly one coarse cell;
4. releases the histogram of the coarse cells with ``ε₁`` (the next step,
   :mod:`dpgeo.histogram`).

**The rule.** Spread evenly over the study area, ``n̂`` points would put
``n̂/M`` points in each of ``M`` cells. ``M`` is chosen so that this equals
:data:`POINTS_PER_NOISE_SD` times the standard deviation ``σ`` of one cell's
noise: ``M = n̂ / (ρ σ)``. With ``ρ = 1`` such evenly spread points would make
each 3×3 neighbourhood (:mod:`dpgeo.mechanisms.levels`) stand three noise
standard deviations above an empty one — the finest grid at which thinly
spread data are still visible; where points cluster, cells hold many times
more. It is Qardaji, Yang & Li's uniform-grid rule (``M = Nε/c``, ICDE 2013)
read for clustering (``σ ≈ √2/ε``, so ``M ≈ n̂ε/√2``), and ``ρ = 1`` was
chosen by validation (``benchmarks/utility_auto.py``, ``docs/results.md``).

Privacy: ``n̂`` is ε₀-DP, the histogram ε₁-DP given any ``k``, and ``k`` is a
function of ``n̂`` and public inputs, so the run is (ε₀ + ε₁)-DP by
sequential composition; the ε the two noises are drawn with sum to at most the charged ``ε``, as
rationals (:func:`dpgeo.noise.split_epsilon`, :func:`dpgeo.noise.noise_epsilon`).
Memory is bounded by cells: the finest grid's count (at most
:data:`MAX_FINE_CELLS`) and the coarse histogram (at most ``max_cells``).
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import ParameterError
from ..grid import Grid
from ..noise import (
    discrete_laplace_q,
    discrete_laplace_variance,
    sample_discrete_laplace,
    split_epsilon,
)

__all__ = [
    "AUTO_MAX_CELLS",
    "FINE_CELLS_PER_SIDE",
    "MAX_FINE_CELLS",
    "POINTS_PER_NOISE_SD",
    "TOTAL_SHARE",
    "auto_budget",
    "cached_grid",
    "coarse_grid",
    "coarsen_counts",
    "coarsening_factor",
    "fine_grid",
    "fine_width",
    "release_total",
    "target_cells",
]

#: Share of ε spent on the noisy total ``n̂``.
TOTAL_SHARE = 0.05
#: ``ρ``: evenly spread points per cell, in standard deviations of one cell's noise.
POINTS_PER_NOISE_SD = 1.0
#: The finest grid has at most this many cells along the longer side of the study area's bounding box ...
FINE_CELLS_PER_SIDE = 2048
#: ... and at most this many cells in all (the counting step keeps one number per cell).
MAX_FINE_CELLS = 1 << 22
#: The released grid has at most this many cells (about 1000 x 1000): the map's memory and time are bounded
#: by it whatever the number of points; a finer map needs a radius.
AUTO_MAX_CELLS = 1 << 20


def fine_width(area) -> float:
    """Cell width (metres) of the finest grid of ``area``: a function of the study area alone.

    Examples
    --------
    >>> from dpgeo.domain import StudyArea
    >>> fine_width(StudyArea.from_bbox((0, 0, 4096, 1024), "EPSG:32615", working_crs="EPSG:32615"))
    2.0
    """
    minx, miny, maxx, maxy = area.polygon.bounds
    w, h = maxx - minx, maxy - miny
    width = max(w, h) / FINE_CELLS_PER_SIDE
    return float(max(width, math.sqrt(w * h / MAX_FINE_CELLS)))


def fine_grid(area) -> Grid:
    """The finest grid of ``area`` (:func:`fine_width`), on which the points are counted."""
    return Grid(area, fine_width(area))


def auto_budget(epsilon: float, share: float = TOTAL_SHARE) -> tuple[float, float]:
    """``(ε₀, ε₁)``: the budget of the noisy total and of the histogram, ``ε₀ + ε₁ ≤ ε`` exactly.

    Examples
    --------
    >>> auto_budget(1.0)
    (0.05, 0.95)
    """
    if not 0 < share < 1:
        raise ParameterError(f"the share of epsilon for the total must be in (0, 1), got {share!r}")
    return split_epsilon(epsilon, share)


def release_total(n: int, *, epsilon: float, sensitivity: int = 1, rng) -> int:
    """``n + Z``: the number of points with discrete Laplace noise of decay ``exp(-ε/Δ)`` (ε-DP).

    Adding or removing one record changes ``n`` by at most ``Δ`` (its points
    inside the study area), so this is the geometric mechanism at sensitivity
    ``Δ``.

    Examples
    --------
    >>> from dpgeo.noise import NoiseSource
    >>> isinstance(release_total(100, epsilon=0.05, rng=NoiseSource(seed=1)), int)
    True
    """
    return int(n) + int(sample_discrete_laplace(rng, 1, epsilon=epsilon, sensitivity=sensitivity)[0])


def target_cells(n_hat: float, *, epsilon: float, sensitivity: int = 1, rho: float = POINTS_PER_NOISE_SD) -> float:
    """``M = n̂ / (ρ σ)``: how many cells the study area should have (at least 1).

    ``σ = sqrt(2q)/(1-q)``, ``q = exp(-ε/Δ)``, is the standard deviation of one
    cell's noise in the histogram released with ``epsilon``.

    Examples
    --------
    >>> round(target_cells(10_000, epsilon=0.95))
    6973
    """
    sd = math.sqrt(discrete_laplace_variance(discrete_laplace_q(epsilon, sensitivity)))
    return max(float(n_hat) / (rho * sd), 1.0)


def coarsening_factor(area, fine_w: float, n_cells: float, *, max_cells: int) -> int:
    """The integer factor ``k`` whose cells (``k`` fine cells wide) come closest to ``n_cells`` cells.

    Closest in width, ``k = round(sqrt(area / n_cells) / w₀)``, then raised
    until the coarse grid has at most ``max_cells`` universe cells.

    Examples
    --------
    >>> from dpgeo.domain import StudyArea
    >>> a = StudyArea.from_bbox((0, 0, 1000, 1000), "EPSG:32615", working_crs="EPSG:32615")
    >>> coarsening_factor(a, 1.0, 100, max_cells=1 << 22)
    100
    """
    target_w = math.sqrt(area.polygon.area / max(float(n_cells), 1.0))
    k = max(1, round(target_w / fine_w))
    minx, miny, maxx, maxy = area.polygon.bounds
    while math.ceil((maxx - minx) / (k * fine_w)) * math.ceil((maxy - miny) / (k * fine_w)) > max_cells:
        k += 1
    return k


def coarse_grid(area, fine_w: float, factor: int) -> Grid:
    """The grid of cells ``factor`` fine cells wide, with the same origin."""
    return Grid(area, factor * fine_w)


def cached_grid(grids: dict, area, fine_w: float, factor: int) -> Grid:
    """:func:`coarse_grid`, made once per ``factor`` and kept in ``grids`` (a grid's universe is the study area
    cut into cells: not free at 2²⁰ cells). ``functools.partial(cached_grid, {}, area, fine_w)`` is a maker."""
    if factor not in grids:
        grids[factor] = coarse_grid(area, fine_w, factor)
    return grids[factor]


def coarsen_counts(fine: Grid, cell_id: np.ndarray, count: np.ndarray, coarse: Grid, factor: int):
    """Exact counts of the fine cells added up into the coarse cells that hold them — **private**.

    Fine cell ``(ix, iy)`` lies in coarse cell ``(ix // k, iy // k)``. A fine
    cell whose coarse cell is not in the coarse universe (possible only for
    points on the study area's boundary) is dropped: a rule about a point's
    position alone, so the sensitivity is unchanged.

    Returns
    -------
    ids, counts : numpy.ndarray
        Sorted coarse ids and their int64 counts.

    Examples
    --------
    >>> from dpgeo.domain import StudyArea
    >>> a = StudyArea.from_bbox((0, 0, 40, 40), "EPSG:32615", working_crs="EPSG:32615")
    >>> f, c = Grid(a, 10.0), Grid(a, 20.0)
    >>> [v.tolist() for v in coarsen_counts(f, np.array([0, 1, 5, 15]), np.array([1, 2, 3, 4]), c, 2)]
    [[0, 3], [6, 4]]
    """
    from ..counting.accumulate import sum_by_id

    if factor == 1 and (coarse.nx, coarse.ny) == (fine.nx, fine.ny):  # the same cells: nothing to add up
        return np.asarray(cell_id, dtype=np.int64), np.asarray(count, dtype=np.int64)
    ix, iy = fine.cell_xy(np.asarray(cell_id, dtype=np.int64))
    cx, cy = ix // factor, iy // factor
    ok = (cx < coarse.nx) & (cy < coarse.ny)
    cid = cy[ok] * coarse.nx + cx[ok]
    cnt = np.asarray(count, dtype=np.int64)[ok]
    if coarse.nx * coarse.ny <= 1 << 26:  # the universe as a raster: one gather
        keep = coarse.universe_mask().ravel()[cid]
    else:
        keep = coarse.in_universe(cid)
    return sum_by_id(cid[keep], cnt[keep], coarse.nx * coarse.ny)
