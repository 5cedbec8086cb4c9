"""Spans without a radius (``auto``): the grid from a noisy total, then density levels of one histogram.

The mechanism on counts (no I/O): exact counts of the finest public grid in,
a released noisy total, an occupancy histogram, one released histogram and the
clusters chosen from it out. The steps and their privacy argument are in
:mod:`dpgeo.mechanisms.resolution`, :mod:`dpgeo.mechanisms.concentration` and
:mod:`dpgeo.mechanisms.levels`; the proof sketch in ``docs/privacy.md``
("Spans without a radius").

Budget: ``ε₀ = TOTAL_SHARE·ε`` for the total; of the rest ``ε_h``,
``ε_c = CONCENTRATION_SHARE·ε_h`` (few cells) or ``LARGE_CONCENTRATION_SHARE·ε_h`` for the
occupancy histogram and ``ε₁ = ε_h - ε_c``
for the histogram the clusters are read from (the ε the three noises are drawn
with sum to at most the charged ε, as rationals); nothing else is released.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from ..errors import ParameterError
from ..grid import Grid
from ..histogram import NoisyHistogram, dense_histogram
from ..noise import (
    discrete_laplace_q,
    discrete_laplace_variance,
    sum_abs_bound,
)
from .concentration import (
    CONCENTRATION_SHARE,
    FALLBACK_REFINEMENT,
    LARGE_CONCENTRATION_SHARE,
    LARGE_MAX_REFINEMENT,
    MAX_OCCUPIED_AREA_SHARE,
    MAX_REFINEMENT,
    OCCUPANCY_MAX_CELLS,
    OCCUPIED_MASS_SHARE,
    SPARSE_MASS_SHARE,
    concentration_budget,
    occupancy_setting,
    occupied_width,
)
from .level_chains import CHAIN_ELONGATION, CHAIN_PIECE_ELONGATION
from .level_floor import FLOOR_LINE_CELLS
from .levels import (
    DEEP_DIP_RATIO,
    DEFAULT_FDR,
    EOM_MARGIN,
    FEW_CELLS_KERNEL,
    FEW_CELLS_SCALE,
    GAP_Z,
    GROW_STEPS,
    MIN_MASS_SD,
    MIN_DIP_RATIO,
    MIN_DIP_Z,
    DIP_MAX_CORRECTION,
    DIP_MEAN_Z,
    RIDGE_ALIGNMENT,
    RIDGE_BLOB_ELONGATION,
    RIDGE_DIP_RATIO,
    RIDGE_DIP_Z,
    RIDGE_ELONGATION,
    RIDGE_END_SHARE,
    RIDGE_MIN_LENGTH_CELLS,
    RIDGE_PATH_SHARE,
    RIDGE_THINNESS,
    MIN_MASS_SHARE,
    MIN_PROMINENCE_SD,
    LevelClusters,
    density_levels,
    level_noise,
    scale_mass,
    sum_noise_sd,
)
from .privtree_auto import (
    PRIVTREE_CELL_NOISE,
    PRIVTREE_REFINEMENT,
    PRIVTREE_ROOT,
    PRIVTREE_SD,
    PRIVTREE_SHARE,
    PRIVTREE_THETA_SD,
    privtree_histogram,
)
from .resolution import (
    cached_grid,
    AUTO_MAX_CELLS,
    POINTS_PER_NOISE_SD,
    TOTAL_SHARE,
    auto_budget,
    coarse_grid,
    coarsen_counts,
    coarsening_factor,
    release_total,
    target_cells,
)

__all__ = ["AutoSpans", "OccupancyPlan", "auto_plan", "auto_spans_cells", "gamma_all_levels", "occupancy_plan"]


@dataclass
class AutoSpans:
    """What an ``auto`` run releases and chooses (public, except nothing: every field is DP output or public).

    Attributes
    ----------
    grid : Grid
        The grid of the released histogram (cells ``factor`` fine cells wide).
    hist : NoisyHistogram
        The released histogram (dense, ``epsilon_histogram``).
    n_hat : int
        The released noisy total (``epsilon_total``).
    factor : int
        Coarsening factor chosen from ``n_hat``.
    clusters : LevelClusters
        The flat map and the tree of levels.
    settings : dict
        Every public choice, for the metadata.
    occupancy : NoisyHistogram or None
        The released occupancy histogram (``epsilon_occupancy``) that chose
        the width (None without one).
    """

    grid: Grid
    hist: NoisyHistogram
    n_hat: int
    factor: int
    clusters: LevelClusters
    settings: dict = field(default_factory=dict)
    occupancy: NoisyHistogram | None = None


@functools.lru_cache(maxsize=256)
def gamma_all_levels(q: float, n_cells: int, beta: float) -> int:
    """Γ: with probability ``1 - β`` every 3×3 sum of the ``n_cells`` cells is within Γ of its true value.

    Examples
    --------
    >>> import math
    >>> gamma_all_levels(math.exp(-0.95), 38_470, 0.05)
    26
    """
    return sum_abs_bound(9, q, beta / n_cells)



def auto_plan(area, fine_w: float, n_hat: float, *, epsilon_histogram: float, sensitivity: int = 1,
              rho: float = POINTS_PER_NOISE_SD, max_cells: int = AUTO_MAX_CELLS) -> tuple[int, float]:
    """``(factor, cell width in metres)`` that ``auto`` uses for a noisy total ``n_hat`` (public).

    Examples
    --------
    >>> from dpgeo.domain import StudyArea
    >>> a = StudyArea.from_bbox((0, 0, 2048, 2048), "EPSG:32615", working_crs="EPSG:32615")
    >>> auto_plan(a, 1.0, 5000, epsilon_histogram=0.95)
    (35, 35.0)
    """
    m = target_cells(n_hat, epsilon=epsilon_histogram, sensitivity=sensitivity, rho=rho)
    k = coarsening_factor(area, fine_w, m, max_cells=max_cells)
    return k, k * fine_w


class OccupancyPlan(NamedTuple):
    """What ``auto`` decides from ``n̂`` alone before it reads a histogram (public: post-processing of ``n̂``).

    ``factor`` is the uniform rule's grid at ``epsilon_histogram`` (what is left after the occupancy
    histogram's share ``epsilon_occupancy``); ``few`` whether the uniform grid at the whole histogram
    budget has few cells (at most ``OCCUPANCY_MAX_CELLS``); ``share`` and ``refinement`` the occupancy
    step's (0 and 1 where the uniform grid is already the largest allowed, ``k_min``).
    """

    factor: int
    few: bool
    share: float
    refinement: float
    epsilon_occupancy: float
    epsilon_histogram: float
    k_min: int


def occupancy_plan(area, fine_w: float, n_hat: float, *, epsilon_histogram: float, sensitivity: int = 1,
                   rho: float = POINTS_PER_NOISE_SD, max_cells: int = AUTO_MAX_CELLS,
                   small_share: float = CONCENTRATION_SHARE, large_share: float = LARGE_CONCENTRATION_SHARE,
                   small_refinement: float = MAX_REFINEMENT, large_refinement: float = LARGE_MAX_REFINEMENT,
                   grid_of=None) -> OccupancyPlan:
    """The occupancy step's split of ``epsilon_histogram`` and the uniform grid, for a noisy total ``n_hat``.

    One rule for the run (:func:`auto_spans_cells`) and its preview. ``grid_of(k)`` makes the grid ``k``
    fine cells wide (a cache may be passed; default :func:`coarse_grid`).

    Examples
    --------
    >>> from dpgeo.domain import StudyArea
    >>> a = StudyArea.from_bbox((0, 0, 10_000, 10_000), "EPSG:32615", working_crs="EPSG:32615")
    >>> p = occupancy_plan(a, 5.0, 300, epsilon_histogram=0.95)
    >>> p.few, p.share, p.refinement
    (True, 0.2, 3)
    """
    grid_of = grid_of or (lambda k: coarse_grid(area, fine_w, k))
    factor, _ = auto_plan(area, fine_w, n_hat, epsilon_histogram=epsilon_histogram, sensitivity=sensitivity,
                          rho=rho, max_cells=max_cells)
    g_u = grid_of(factor)
    few = bool(g_u.nx * g_u.ny <= 64 * OCCUPANCY_MAX_CELLS and g_u.n_cells <= OCCUPANCY_MAX_CELLS)
    share, refinement = occupancy_setting(few, small_share, large_share, small_refinement, large_refinement)
    k_min = coarsening_factor(area, fine_w, float("inf"), max_cells=max_cells)
    if factor <= k_min:  # the uniform grid is the largest allowed already: no finer cells to find, no share
        share, refinement = 0.0, 1
    eps_c, eps1 = 0.0, epsilon_histogram
    if share > 0:  # a share of the histogram's budget finds where the points are
        eps_c, eps1 = concentration_budget(epsilon_histogram, share)
        factor, _ = auto_plan(area, fine_w, n_hat, epsilon_histogram=eps1, sensitivity=sensitivity, rho=rho,
                              max_cells=max_cells)
    return OccupancyPlan(factor, few, share, refinement, eps_c, eps1, k_min)


def auto_spans_cells(fine: Grid, cell_id: np.ndarray, count: np.ndarray, *, epsilon: float, rng,
                     sensitivity: int = 1, fdr: float = DEFAULT_FDR, extent: str = "grown",
                     total_share: float = TOTAL_SHARE, rho: float = POINTS_PER_NOISE_SD,
                     max_cells: int = AUTO_MAX_CELLS, beta: float = 0.05, selection: str = "eom",
                     min_mass_share: float = MIN_MASS_SHARE, grow_steps: int | None = GROW_STEPS,
                     concentration_share: float = CONCENTRATION_SHARE,
                     occupied_mass_share: float = OCCUPIED_MASS_SHARE,
                     large_share: float = LARGE_CONCENTRATION_SHARE, max_refinement: float = MAX_REFINEMENT,
                     large_refinement: float = LARGE_MAX_REFINEMENT, max_area_share: float = MAX_OCCUPIED_AREA_SHARE,
                     sparse_share: float | None = SPARSE_MASS_SHARE,
                     prominence_sd: float = MIN_PROMINENCE_SD, dip_ratio: float = MIN_DIP_RATIO,
                     merge_ratio: float | None = None, dip_z: float = MIN_DIP_Z,
                     ridge_elongation: float | None = RIDGE_ELONGATION, ridge_alignment: float | None = RIDGE_ALIGNMENT,
                     ridge_dip_ratio: float = RIDGE_DIP_RATIO, ridge_dip_z: float = RIDGE_DIP_Z,
                     ridge_min_length_cells: float = RIDGE_MIN_LENGTH_CELLS,
                     ridge_blob_elongation: float | None = RIDGE_BLOB_ELONGATION,
                     ridge_thinness: float | None = RIDGE_THINNESS, ridge_path_share: float = RIDGE_PATH_SHARE,
                     ridge_end_share: float = RIDGE_END_SHARE,
                     fallback_refinement: float = FALLBACK_REFINEMENT,
                     few_cells_scale: float = FEW_CELLS_SCALE, kernel: str = "box",
                     few_cells_kernel: str = FEW_CELLS_KERNEL, gap_z: float | None = GAP_Z,
                     eom_margin: float = EOM_MARGIN, deep_dip_ratio: float | None = DEEP_DIP_RATIO,
                     chain_elongation: float | None = CHAIN_ELONGATION,
                     chain_piece_elongation: float = CHAIN_PIECE_ELONGATION,
                     dip_max_correction: float = DIP_MAX_CORRECTION, dip_mean_z: float = DIP_MEAN_Z,
                     resolution: str = "uniform", privtree_share: float = PRIVTREE_SHARE,
                     privtree_theta_sd: float = PRIVTREE_THETA_SD, privtree_refinement: int = PRIVTREE_REFINEMENT,
                     privtree_root: int = PRIVTREE_ROOT, privtree_sd: str = PRIVTREE_SD,
                     privtree_float_floor: bool = True, privtree_cell_noise: bool = PRIVTREE_CELL_NOISE,
                     floor_line_cells: int | None = FLOOR_LINE_CELLS,
                     large_floor_line_cells: int | None = None) -> AutoSpans:
    """Release ``n̂`` and one histogram from exact fine-grid counts, then choose the clusters (ε-DP in all).

    Parameters
    ----------
    fine : Grid
        The finest public grid (:func:`dpgeo.mechanisms.resolution.fine_grid`)
        the counts are on.
    cell_id, count : numpy.ndarray
        Exact counts of its non-empty cells — **private**.
    epsilon : float
        The whole budget; :data:`~dpgeo.mechanisms.resolution.TOTAL_SHARE` of it
        goes to ``n̂``.
    rng : dpgeo.noise.NoiseSource
        Randomness of both noises (a seed makes the output not private).
    sensitivity : int
        Points per record (or per person).
    fdr, extent, selection, min_mass_share, grow_steps
        As for :func:`dpgeo.mechanisms.levels.density_levels`.
    total_share, rho, max_cells
        The budget share of ``n̂``, the points per noise standard deviation of
        the resolution rule and the largest histogram (cells).
    beta : float
        Failure probability of the all-cells bound Γ reported for the
        sandwich statement (utility only).
    concentration_share, large_share, max_refinement, large_refinement
        The share of the histogram's budget the occupancy histogram takes and
        how many times finer than the uniform rule's the cells may be, when
        the uniform rule's grid has few cells and when it has more (a share of
        0: no occupancy step).
    fallback_refinement
        How many times finer than the uniform rule's the cells are, with few
        cells, where no block size's occupied blocks hold enough of ``n̂``
        (1: the uniform width, the rule before;
        :data:`~dpgeo.mechanisms.concentration.FALLBACK_REFINEMENT`).
    kernel, few_cells_kernel
        The density of the tree of levels on maps with more cells and with few (the uniform rule's grid
        has at most 1,024): ``box`` (the sum of the 3×3 released counts, the rule before) or ``binomial``
        (their 1-2-1 weighted sum, which blurs a gap about one cell wide less;
        :func:`~dpgeo.mechanisms.levels.binomial_sums`; with few cells the default,
        :data:`~dpgeo.mechanisms.levels.FEW_CELLS_KERNEL`). Post-processing of the released histogram.
    gap_z
        The gap rule (:data:`~dpgeo.mechanisms.levels.GAP_Z`): a cluster whose child clusters are
        compact groups with only cells of no significant count between them is never chosen over
        them (None: excess of mass alone, the rule before), as for
        :func:`~dpgeo.mechanisms.level_select.select_clusters`.
    eom_margin
        A cluster is chosen over its child clusters only when its excess of mass exceeds theirs by more
        than this share (:data:`~dpgeo.mechanisms.levels.EOM_MARGIN`; 0: excess of mass alone, the rule
        before).
    deep_dip_ratio
        A cluster whose child clusters are all compact groups rising to at least ``1 / deep_dip_ratio``
        times the level where they split off is never chosen over them
        (:data:`~dpgeo.mechanisms.levels.DEEP_DIP_RATIO`; None: excess of mass decides, the rule before).
    few_cells_scale
        With few cells (the uniform rule's grid has at most 1,024), a cluster
        holds at least this share of the map's scale ``min_mass_share``
        (and at least two s.d. of a 3×3 sum's noise; 1: the rule before;
        :data:`~dpgeo.mechanisms.levels.FEW_CELLS_SCALE`).
    floor_line_cells, large_floor_line_cells
        With few cells and with more: the floor's bridges (:func:`~dpgeo.mechanisms.level_floor.floor_bridges`)
        test the lines of this many cells through each cell and add the cells that join two or more pieces of the
        floor (None: the box's test alone, the rule before; with few cells
        :data:`~dpgeo.mechanisms.level_floor.FLOOR_LINE_CELLS`, with more none). Post-processing of the released
        histogram.
    occupied_mass_share, max_area_share, sparse_share
        The share of ``n̂`` the occupied blocks must hold, the largest share of
        the study area they may cover, and the share of the occupied points
        whose sparsest blocks set the density
        (:mod:`dpgeo.mechanisms.concentration`).
    prominence_sd, dip_ratio, dip_z, merge_ratio
        How far a branch must rise above its split (in s.d. of a 3×3 sum's
        noise, as a share of the split level, and in s.d. of the split level's
        noise and Poisson variation), and when chosen clusters
        that meet are joined (None: never), as for
        :func:`dpgeo.mechanisms.level_select.select_clusters`.
    dip_max_correction, dip_mean_z
        The dip rule's highest-of-many correction: a branch of ``m`` cells that
        does not split further is read with this many times the expected excess
        of the highest of ``m/9`` noisy sums more, unless its mean rises
        ``dip_mean_z`` s.d. above the split (0: the rule before;
        :data:`~dpgeo.mechanisms.levels.DIP_MAX_CORRECTION`,
        :data:`~dpgeo.mechanisms.levels.DIP_MEAN_Z`).
    ridge_elongation, ridge_alignment, ridge_dip_ratio, ridge_dip_z, ridge_min_length_cells, ridge_blob_elongation
        The ridge rule: a branch this elongated (a ratio of variances), lying along
        its long axis from its parent, is cut off only where the ridge dips
        deeply and significantly (None: no ridge rule), as for
        :func:`dpgeo.mechanisms.levels.density_levels`.
    ridge_thinness, ridge_path_share, ridge_end_share
        ... and so is a branch this many times longer than wide, bends and all (its cells against the square of
        their width; :data:`~dpgeo.mechanisms.levels.RIDGE_THINNESS`; None: the ratio of variances alone), if it
        and its siblings are one line (:data:`~dpgeo.mechanisms.levels.RIDGE_PATH_SHARE`) and it meets them at an
        end (:data:`~dpgeo.mechanisms.levels.RIDGE_END_SHARE`).
    chain_elongation, chain_piece_elongation
        Chosen clusters whose grown cells meet and that lie end to end along
        a line are one corridor (None: never), as for
        :func:`dpgeo.mechanisms.levels.density_levels`.
    resolution : {"uniform", "privtree", "privtree_few"}
        ``uniform`` (default): one grid, as above. ``privtree`` (an experiment):
        ``privtree_share`` of the histogram's budget decides a PrivTree
        decomposition (:mod:`dpgeo.mechanisms.privtree`) of the grid
        ``privtree_refinement`` times finer than the uniform rule's, with roots
        ``privtree_root`` uniform cells wide and threshold ``privtree_theta_sd``
        s.d. of a leaf's noise; the noisy leaf counts, spread over the fine
        cells, are the histogram the levels are read from (no occupancy step).
        ``privtree_few``: ``privtree`` where the uniform grid has few cells, else ``uniform``.
        ``privtree_cell_noise``: the selection rules read each cell's own noise (a share of its leaf's;
        :mod:`dpgeo.mechanisms.cell_noise`); False: one s.d. for all cells (``privtree_sd``, the rule before).

    Returns
    -------
    AutoSpans

    Examples
    --------
    >>> import numpy as np
    >>> from dpgeo.domain import StudyArea
    >>> from dpgeo.mechanisms.resolution import fine_grid
    >>> rng = np.random.default_rng(0)
    >>> x = np.r_[rng.normal(600, 40, 3000), rng.normal(1400, 40, 3000), rng.uniform(0, 2000, 600)]
    >>> y = np.r_[rng.normal(1000, 40, 3000), rng.normal(1000, 40, 3000), rng.uniform(0, 2000, 600)]
    >>> f = fine_grid(StudyArea.from_bbox((0, 0, 2000, 2000), "EPSG:32615", working_crs="EPSG:32615"))
    >>> from dpgeo.noise import NoiseSource
    >>> ids, counts = np.unique(f.assign(x, y).cell_id, return_counts=True)
    >>> r = auto_spans_cells(f, ids, counts, epsilon=1.0, rng=NoiseSource(seed=2))
    >>> r.clusters.n_clusters, r.settings["epsilon_total"] + r.settings["epsilon_histogram"] <= 1.0
    (2, True)
    """
    if resolution not in ("uniform", "privtree", "privtree_few"):
        raise ParameterError(f"resolution must be 'uniform', 'privtree' or 'privtree_few', got {resolution!r}")
    if resolution != "uniform" and sensitivity != 1:
        raise ParameterError("resolution='privtree' covers records of one point only (sensitivity 1); "
                             "use resolution='uniform'")
    src = rng
    eps0, eps_h = auto_budget(epsilon, total_share)
    n = int(np.asarray(count, dtype=np.int64).sum())
    n_hat = release_total(n, epsilon=eps0, sensitivity=sensitivity, rng=src)
    grid_of = functools.partial(cached_grid, {}, fine.area, fine.cell_m)  # each grid made once
    plan = occupancy_plan(fine.area, fine.cell_m, n_hat, epsilon_histogram=eps_h, sensitivity=sensitivity,
                          rho=rho, max_cells=max_cells, small_share=concentration_share, large_share=large_share,
                          small_refinement=max_refinement, large_refinement=large_refinement, grid_of=grid_of)
    factor, few, share, refinement = plan.factor, plan.few, plan.share, plan.refinement
    eps_c, eps1, k_min = plan.epsilon_occupancy, plan.epsilon_histogram, plan.k_min
    uniform_factor, occ_info, hist_c, levels_kw = factor, {}, None, {}
    if resolution == "privtree_few":  # the adaptive resolution only where the uniform grid has few cells
        resolution = "privtree" if few else "uniform"
    kern = few_cells_kernel if few else kernel
    if resolution == "privtree":
        grid, hist, factor, uniform_factor, eps_c, eps1, occ_info, levels_kw = privtree_histogram(
            fine, cell_id, count, eps_h, rng=src, sensitivity=sensitivity,
            factor_of=lambda e: auto_plan(fine.area, fine.cell_m, n_hat, epsilon_histogram=e, sensitivity=sensitivity,
                                          rho=rho, max_cells=max_cells)[0],
            share=privtree_share, theta_sd=privtree_theta_sd, refinement=privtree_refinement, root=privtree_root,
            sd_rule=privtree_sd, float_floor=privtree_float_floor,
            grid_of=grid_of, k_min=k_min, cell_noise=privtree_cell_noise, kernel=kern)
    if resolution == "uniform" and eps_c > 0:  # where the points are: an occupancy histogram on the uniform grid
        g_u = grid_of(factor)
        ids, counts = coarsen_counts(fine, cell_id, count, g_u, factor)
        hist_c = dense_histogram(g_u, ids, counts, epsilon=eps_c, sensitivity=sensitivity, rng=src)
        del ids, counts
        sd1 = math.sqrt(discrete_laplace_variance(discrete_laplace_q(eps1, sensitivity)))
        width, occ_info = occupied_width(hist_c, n_hat, final_sd=sd1, rho=rho, mass_share=occupied_mass_share,
                                         max_area_share=max_area_share, max_refinement=refinement,
                                         sparse_share=sparse_share)
        if width is None and few:  # the histogram cannot tell where the points are: somewhat finer cells
            width = factor * fine.cell_m / fallback_refinement
            occ_info["fallback_refinement"] = fallback_refinement
        if width is not None:
            factor = int(min(factor, max(k_min, round(width / fine.cell_m))))
    if resolution != "privtree":
        grid = grid_of(factor)
        ids, counts = coarsen_counts(fine, cell_id, count, grid, factor)
        hist = dense_histogram(grid, ids, counts, epsilon=eps1, sensitivity=sensitivity, rng=src)
        del ids, counts
    q = discrete_laplace_q(eps1, sensitivity)
    scale = few_cells_scale if few else 1.0  # few cells: a small noisy total, whose groups hold fewer than √n̂
    lines = floor_line_cells if few else large_floor_line_cells
    ratio = levels_kw.get("noise_sd", sum_noise_sd(q)) / sum_noise_sd(q)  # 1 but for the experimental resolution
    min_mass = max(MIN_MASS_SD * sum_noise_sd(q) * ratio, scale * scale_mass(max(n_hat, 0), min_mass_share))
    min_prominence = prominence_sd * level_noise(q, kern)[0] * ratio
    if "cell_noise" in levels_kw:  # cells of different sizes: each cell's own noise
        cn = levels_kw["cell_noise"]
        min_mass = np.maximum(MIN_MASS_SD * cn.box_sd, scale * scale_mass(max(n_hat, 0), min_mass_share))
        min_prominence = prominence_sd * cn.level_sd
    clusters, settings = density_levels(hist, fdr=fdr, n_hat=max(n_hat, 0), min_mass=min_mass,
                                        extent=extent, selection=selection,
                                        min_mass_share=min_mass_share, grow_steps=grow_steps,
                                        min_prominence=min_prominence,
                                        dip_ratio=dip_ratio,
                                        merge_ratio=merge_ratio, dip_z=dip_z,
                                        ridge_elongation=ridge_elongation, ridge_alignment=ridge_alignment,
                                        ridge_dip_ratio=ridge_dip_ratio, ridge_dip_z=ridge_dip_z,
                                        ridge_min_length_cells=ridge_min_length_cells,
                                        ridge_blob_elongation=ridge_blob_elongation,
                                        ridge_thinness=ridge_thinness, ridge_path_share=ridge_path_share,
                                        ridge_end_share=ridge_end_share,
                                        kernel=kern,
                                        gap_z=gap_z, eom_margin=eom_margin, deep_dip_ratio=deep_dip_ratio,
                                        chain_elongation=chain_elongation,
                                        chain_piece_elongation=chain_piece_elongation,
                                        dip_max_correction=dip_max_correction, dip_mean_z=dip_mean_z,
                                        floor_line_cells=lines, **levels_kw)
    gamma = gamma_all_levels(q, grid.n_cells, beta)
    settings.update({
        "resolution_rule": f"cells = noisy total / ({rho:g} x sd of one cell's noise), spread over the study "
                           "area, or finer (at most the largest refinement) where an occupancy histogram finds "
                           "the sparser parts of the points denser than that",
        "points_per_noise_sd": rho,
        "few_cells_scale": scale,
        "noisy_total": int(n_hat),
        "epsilon_total": eps0,
        "epsilon_occupancy": eps_c,
        "concentration_share": share,
        "epsilon_histogram": eps1,
        "uniform_cell_width_m": uniform_factor * fine.cell_m,
        **occ_info,
        "total_share": total_share,
        "fine_cell_width_m": fine.cell_m,
        "coarsening_factor": factor,
        "cell_width_m": grid.cell_m,
        "n_cells": grid.n_cells,
        "noise_sd_of_cell": math.sqrt(discrete_laplace_variance(q)),
        "noise_sd_of_level": level_noise(q, kern)[0],
        "gamma_all_levels": float(gamma),
        "gamma_beta": beta,
    })
    return AutoSpans(grid, hist, n_hat, factor, clusters, settings, hist_c)
