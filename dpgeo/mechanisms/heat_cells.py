"""Cells of a heat or hot-spot layer without a cell size: the width chosen from ε and a noisy total.

When neither a cell size nor an H3 resolution is given, a heat layer
(:func:`dpgeo.heat`) or a hot-spot layer (:func:`dpgeo.hotspots`) chooses its
square cells the way spans without a radius do (:mod:`dpgeo.mechanisms.resolution`):

1. the points are counted once, on the finest grid of the public study area
   (:func:`~dpgeo.mechanisms.resolution.fine_grid`);
2. a share :data:`~dpgeo.mechanisms.resolution.TOTAL_SHARE` of ε releases the
   total ``n̂ = n + Z`` (discrete Laplace, sensitivity Δ: the points one record
   may have in the study area);
3. from ``n̂``, the rest of the budget ``ε₁`` and public inputs only, the cells
   are made so that evenly spread points would put ``ρ`` noise standard
   deviations in each (``M = n̂ / (ρ σ)`` cells, :func:`auto_cells_plan`); the
   exact counts are added up into those cells, which share the finest grid's
   origin;
4. the cell counts are released with ``ε₁`` (the layer's one count release).

``ρ`` depends on what the layer is for:

* **heat** (:data:`HEAT_POINTS_PER_NOISE_SD` = 2): the density a reader sees.
  On generated city-like data (``benchmarks/bench_heat.py --auto``), the
  squared error of the released density against the true one at a fine
  reference is smallest for ρ between 1 and 2 (finer cells: noise; coarser:
  smoothing); 2 is the coarser end, for a map read by eye.
* **hot spots** (:data:`HOTSPOT_POINTS_PER_NOISE_SD` = 100): Gi* classes
  decide significance from sums of 3 × 3 cells, and the classes of a city's
  sparse parts flip when the noise is not small next to their counts. On two
  generated families (blocks over a uniform background; a coastal city whose
  downtown holds half the points), 5,000 to 200,000 points each, ρ = 100 is the
  smallest tried that keeps Cohen's κ against Gi* on the exact counts at
  0.75 or more in every family and size (ρ = 50: 0.64 on the concentrated
  family; ρ = 200 gains little and halves the map's detail).

Privacy: ``n̂`` is ε₀-DP; the counts are ε₁-DP on any grid; the grid is a
function of ``n̂`` and public inputs, so the layer is (ε₀ + ε₁)-DP by sequential
composition (the two ε sum to at most the charged ε, as rationals:
:func:`dpgeo.noise.split_epsilon`). ``docs/privacy.md`` §9.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..counting.cells import CellCounts
from ..errors import ParameterError
from ..noise import discrete_laplace_q, discrete_laplace_variance
from .resolution import (
    TOTAL_SHARE,
    auto_budget,
    coarse_grid,
    coarsen_counts,
    coarsening_factor,
    release_total,
    target_cells,
)

__all__ = [
    "AUTO_MAX_HEAT_CELLS",
    "FINE_H3_CELLS",
    "HEAT_POINTS_PER_NOISE_SD",
    "HOTSPOT_POINTS_PER_NOISE_SD",
    "MIN_AUTO_CELLS",
    "AutoCells",
    "auto_cells_plan",
    "auto_h3_plan",
    "choose_cells",
    "choose_h3_cells",
    "fine_h3_resolution",
    "h3_parents",
]

#: ``ρ`` of a heat layer (cell counts or density bands): evenly spread points per cell, in noise standard deviations.
HEAT_POINTS_PER_NOISE_SD = 2.0
#: ``ρ`` of a hot-spot layer.
HOTSPOT_POINTS_PER_NOISE_SD = 100.0
#: The most cells a layer without a cell size may choose (a heat map of more cells is not read cell by cell, and
#: the service can then bound the layer's size before it accepts the request).
AUTO_MAX_HEAT_CELLS = 1 << 17
#: The fewest cells a layer without a cell size is made of (a 4 × 4 map): fewer points than that many noise
#: standard deviations still get a map, each cell with its (then wide) interval.
MIN_AUTO_CELLS = 16


#: H3 cells chosen from ε: the points are counted on the finest resolution with about this many cells over the
#: study area (or resolution 15), then added up into the parents of the resolution chosen.
FINE_H3_CELLS = 1 << 21


@dataclass
class AutoCells:
    """What a layer without a cell size released and chose: the coarse cells' exact counts (**private**), and
    the noisy total and the cells chosen from it (public: DP output and public inputs)."""

    counts: CellCounts
    n_hat: int
    factor: int
    settings: dict


def auto_cells_plan(area, fine_w: float, n_hat: float, *, epsilon_counts: float, sensitivity: int = 1,
                    rho: float, max_cells: int, min_factor: int = 1, max_factor: int | None = None) -> int:
    """The factor ``k`` (cells ``k`` fine cells wide) for a noisy total ``n_hat`` (public inputs only).

    ``M = max(n̂ / (ρ σ), MIN_AUTO_CELLS)`` cells (:func:`~dpgeo.mechanisms.resolution.target_cells`), the
    closest integer factor, raised until the study area has at most ``max_cells`` cells, then kept within
    ``[min_factor, max_factor]`` (a hot-spot neighbourhood's public bounds).

    Examples
    --------
    >>> from dpgeo.domain import StudyArea
    >>> a = StudyArea.from_bbox((0, 0, 2048, 2048), "EPSG:32615", working_crs="EPSG:32615")
    >>> auto_cells_plan(a, 1.0, 5000, epsilon_counts=0.95, rho=2, max_cells=1 << 20)
    49
    >>> auto_cells_plan(a, 1.0, 10, epsilon_counts=0.95, rho=2, max_cells=1 << 20)  # at least 16 cells
    512
    """
    m = max(target_cells(n_hat, epsilon=epsilon_counts, sensitivity=sensitivity, rho=rho), float(MIN_AUTO_CELLS))
    k = max(coarsening_factor(area, fine_w, m, max_cells=max_cells), int(min_factor))
    if max_factor is not None:
        if max_factor < min_factor:
            raise ParameterError("no cell width fits both the neighbourhood and the largest number of cells")
        k = min(k, int(max_factor))
    return k


def choose_cells(counts: CellCounts, *, epsilon: float, sensitivity: int, rho: float, max_cells: int, rng,
                 min_factor: int = 1, max_factor: int | None = None, total_share: float = TOTAL_SHARE) -> AutoCells:
    """Release ``n̂`` from the finest grid's exact counts and add them up into the cells it picks.

    The one private step here is the noisy total (ε₀ = ``total_share`` × ε);
    the returned counts are exact (**private**) and are released next with
    ε₁ = ε − ε₀ by the layer's count release.

    Examples
    --------
    >>> from dpgeo.domain import StudyArea
    >>> from dpgeo.grid import Grid
    >>> from dpgeo.noise import NoiseSource
    >>> a = StudyArea.from_bbox((0, 0, 2048, 2048), "EPSG:32615", working_crs="EPSG:32615")
    >>> fine = Grid(a, 1.0)
    >>> c = CellCounts(fine, np.array([0, 5000, 70000]), np.array([3000, 1000, 1000]))
    >>> out = choose_cells(c, epsilon=1.0, sensitivity=1, rho=2, max_cells=1 << 20, rng=NoiseSource(seed=1))
    >>> out.counts.grid.cell_m == out.factor, int(out.counts.count.sum())
    (True, 5000)
    """
    fine = counts.grid
    eps0, eps1 = auto_budget(epsilon, total_share)
    n = int(np.asarray(counts.count, dtype=np.int64).sum())
    n_hat = release_total(n, epsilon=eps0, sensitivity=sensitivity, rng=rng)
    factor = auto_cells_plan(fine.area, fine.cell_m, n_hat, epsilon_counts=eps1, sensitivity=sensitivity, rho=rho,
                             max_cells=max_cells, min_factor=min_factor, max_factor=max_factor)
    grid = coarse_grid(fine.area, fine.cell_m, factor)
    ids, cnt = coarsen_counts(fine, counts.cell_id, counts.count, grid, factor)
    coarse = CellCounts(grid, ids, cnt, diagnostics=counts.diagnostics)
    q = discrete_laplace_q(eps1, sensitivity)
    settings = {
        "cells_rule": (f"square cells chosen from epsilon: cells = max(noisy total / ({rho:g} x sd of one cell's "
                       f"noise), {MIN_AUTO_CELLS}), the width a whole number of the finest grid's cells"),
        "cells_points_per_noise_sd": rho,
        "noisy_total": int(n_hat),
        "total_share": total_share,
        "epsilon_total": eps0,
        "epsilon_counts": eps1,
        "fine_cell_width_m": fine.cell_m,
        "coarsening_factor": factor,
        "noise_sd_of_cell": math.sqrt(discrete_laplace_variance(q)),
    }
    return AutoCells(coarse, int(n_hat), factor, settings)


# -- H3 cells -----------------------------------------------------------------------------------------------------

def fine_h3_resolution(area, *, max_cells: int = FINE_H3_CELLS) -> int:
    """The finest H3 resolution with about ``max_cells`` cells or fewer over ``area`` (a function of the study area
    alone): the points are counted on it.

    Examples
    --------
    >>> from dpgeo.domain import StudyArea
    >>> fine_h3_resolution(StudyArea.from_bbox((-93.33, 44.89, -93.19, 45.05)))
    12
    """
    from ..h3cells import h3_cells_estimate

    r = 0
    while r < 15 and h3_cells_estimate(area, r + 1) <= max_cells:
        r += 1
    return r


def auto_h3_plan(area, n_hat: float, *, finest: int, epsilon_counts: float, sensitivity: int = 1, rho: float,
                 max_cells: int) -> int:
    """The H3 resolution (at most ``finest``) whose cells over ``area`` come closest, in ratio, to
    ``M = max(n̂ / (ρ σ), MIN_AUTO_CELLS)``, among those with at most ``max_cells`` cells (public inputs only).

    Examples
    --------
    >>> from dpgeo.domain import StudyArea
    >>> a = StudyArea.from_bbox((-93.33, 44.89, -93.19, 45.05))
    >>> auto_h3_plan(a, 50_000, finest=12, epsilon_counts=0.95, rho=2, max_cells=1 << 20)
    10
    >>> auto_h3_plan(a, 50_000, finest=12, epsilon_counts=0.95, rho=100, max_cells=1 << 20)
    8
    """
    from ..h3cells import h3_cells_estimate

    m = max(target_cells(n_hat, epsilon=epsilon_counts, sensitivity=sensitivity, rho=rho), float(MIN_AUTO_CELLS))
    ok = [r for r in range(finest + 1) if h3_cells_estimate(area, r) <= max_cells] or [0]
    return min(ok, key=lambda r: (abs(math.log(h3_cells_estimate(area, r) / m)), -r))


def h3_parents(cells: np.ndarray, resolution: int) -> np.ndarray:
    """The H3 index of the parent at ``resolution`` of each cell of a finer resolution (uint64; H3's
    ``cellToParent``, from the index bits alone: the resolution field set, the finer digits set to 7).

    Examples
    --------
    >>> hex(int(h3_parents(np.array([0x8b262cd05a45fff], dtype=np.uint64), 9)[0]))
    '0x89262cd05a7ffff'
    """
    c = np.asarray(cells, dtype=np.uint64)
    res_field = np.uint64(0xF) << np.uint64(52)
    low = np.uint64((1 << (3 * (15 - resolution))) - 1)
    return (c & ~res_field) | (np.uint64(resolution) << np.uint64(52)) | low


def choose_h3_cells(counts: CellCounts, *, epsilon: float, sensitivity: int, rho: float, max_cells: int, rng,
                    total_share: float = TOTAL_SHARE) -> AutoCells:
    """Release ``n̂`` from exact counts of fine H3 cells, pick a resolution from it and add the counts up into the
    parents of that resolution (**private** counts; released next with the rest of ε).

    A point's coarse cell is its fine cell's parent in H3's index hierarchy (exact, unlike the ground, where a
    parent only approximately covers its children); a parent outside the study area's cell set is dropped, by
    a rule on the point's position alone.
    """
    from ..counting.accumulate import sum_by_id
    from ..h3cells import H3Cells

    fine = counts.grid
    eps0, eps1 = auto_budget(epsilon, total_share)
    n = int(np.asarray(counts.count, dtype=np.int64).sum())
    n_hat = release_total(n, epsilon=eps0, sensitivity=sensitivity, rng=rng)
    res = auto_h3_plan(fine.area, n_hat, finest=fine.resolution, epsilon_counts=eps1, sensitivity=sensitivity,
                       rho=rho, max_cells=max_cells)
    grid = fine if res == fine.resolution else H3Cells(fine.area, res)
    if grid is fine:
        ids, cnt = np.asarray(counts.cell_id, dtype=np.int64), np.asarray(counts.count, dtype=np.int64)
    else:
        parent = h3_parents(fine.cells[np.asarray(counts.cell_id, dtype=np.int64)], res)
        pos = np.minimum(np.searchsorted(grid.cells, parent), grid.n_cells - 1)
        keep = grid.cells[pos] == parent
        ids, cnt = sum_by_id(pos[keep].astype(np.int64), np.asarray(counts.count, dtype=np.int64)[keep],
                             grid.n_cells)
    q = discrete_laplace_q(eps1, sensitivity)
    settings = {
        "cells_rule": (f"H3 resolution chosen from epsilon: the one whose cell count over the study area is closest "
                       f"to max(noisy total / ({rho:g} x sd of one cell's noise), {MIN_AUTO_CELLS}); points counted "
                       f"at resolution {fine.resolution} and added up into their parents"),
        "cells_points_per_noise_sd": rho,
        "noisy_total": int(n_hat),
        "total_share": total_share,
        "epsilon_total": eps0,
        "epsilon_counts": eps1,
        "fine_h3_resolution": fine.resolution,
        "noise_sd_of_cell": math.sqrt(discrete_laplace_variance(q)),
    }
    return AutoCells(CellCounts(grid, ids, cnt, diagnostics=counts.diagnostics), int(n_hat), res, settings)
