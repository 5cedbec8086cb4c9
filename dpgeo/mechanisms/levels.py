"""Density levels: every density threshold of one released histogram, as a tree of clusters.

Post-processing of one ε-DP histogram (:mod:`dpgeo.histogram`) with public
parameters only; no budget is spent here. The steps:

1. **Density.** ``S̃(X)``, the sum of the released counts over the 3×3 cells
   around ``X`` (a box kernel of three cell widths).
2. **Floor: which cells hold anything at all.** Every cell of the universe is
   a test of "no point in this neighbourhood" with the exact p-value
   ``Pr[N ≥ S̃(X)]``, ``N`` the sum of the neighbourhood's noise; the
   Benjamini–Hochberg procedure at level ``fdr`` keeps the cells it rejects.
   Among the kept cells the expected share of truly empty neighbourhoods is
   at most ``fdr`` (the statistics are positively dependent, see
   ``docs/privacy.md``). With ``floor_line_cells`` (few cells, from
   :func:`~dpgeo.mechanisms.auto.auto_spans_cells`) the floor also keeps its
   bridges: cells that a second test along lines through them keeps where they
   join pieces of the floor (:func:`~dpgeo.mechanisms.level_floor.floor_bridges`).
3. **The tree of levels.** For every threshold ``t`` the kept cells with
   ``S̃ ≥ t`` fall into connected components (8-neighbour adjacency). As ``t``
   rises a component shrinks and splits; the components over all ``t`` form a
   tree (Hartigan's cluster tree of the released density). It is built by a
   sweep from the highest threshold down: a union-find over the cells, and one
   ``scipy`` connected-components call per threshold on the cells and edges
   that appear and the components above that they touch, so each cell and
   edge is handled once (O(cells + edges) in numpy, a constant number of calls
   per threshold).
4. **Which clusters.** A branch of a split counts as a cluster only if it
   holds at least ``min_mass`` noisy points and rises at least
   ``min_prominence`` above the level where it joins its sibling (both in
   noisy counts, derived from the noise of one neighbourhood sum), and at
   least ``dip_ratio`` times that level (a ridge whose density dips by less
   stays whole) and ``dip_z`` standard deviations of that level's noise and
   Poisson variation (a dip counts only where it is significant); with the
   highest-of-many correction (off by default) a branch of many cells that
   does not split further, whose peak is the highest of many noisy sums, is
   read with that many s.d. more unless its cells' mean rises above the
   split. A branch
   much longer than wide that lies along its long axis from its parent is a
   piece of a ridge (a road, a trail): it counts only where the ridge's
   density falls to half, beyond the noise of both ends (the ridge rule),
   unless it splits into round branches each significant by the dip rule
   (a row of round clusters, not a ridge).
   Smaller branches are points "falling out" of their parent, as in HDBSCAN's
   condensed tree. Among the clusters, those of greatest *excess of mass*
   (HDBSCAN's stability: every point contributes the range of levels over
   which it stays in the cluster) are chosen, never two nested ones, and never
   the root (the whole of the kept cells).
5. **Extent.** ``core``: a chosen cluster is its component at the level where
   it separates (its birth). ``grown`` (default): each chosen cluster then
   takes the kept cells up to :data:`GROW_STEPS` steps away, a cell going to
   the nearest cluster (clusters never merge) — the fringe that the 3×3
   kernel and the noise blur, as DBSCAN's border points are the fringe of its
   core points. Where cells of two clusters would be neighbours, the grown
   one of lower density is left out: no two clusters share a boundary.

Everything is a function of the released counts, the grid and the public
parameters, so the output has the histogram's ε. Steps 3–5 live in
:mod:`~dpgeo.mechanisms.level_tree`, :mod:`~dpgeo.mechanisms.level_select` and
:mod:`~dpgeo.mechanisms.level_ridges` (the dip and ridge rules);
their names are exported here too.
"""

from __future__ import annotations

import math

import numpy as np

from ..histogram import NoisyHistogram
from ..noise import discrete_laplace_variance
from .level_chains import CHAIN_ELONGATION, CHAIN_PIECE_ELONGATION
from .level_floor import (
    BRIDGE_MIN_PIECE_CELLS,
    DEFAULT_FDR,
    FLOOR_LINE_CELLS,
    KERNELS,
    _neighbours_in_universe,
    binomial_sums,
    box_sums,
    fdr_cells,
    floor_bridges,
    level_noise,
    sum_noise_sd,
)
from .level_select import (
    EXTENTS,
    GROW_STEPS,
    SELECTIONS,
    LevelClusters,
    grow_labels,
    select_clusters,
)
from .level_tree import (
    BOX_OFFSETS,
    MAX_THRESHOLDS,
    LevelTree,
    adjacent_pairs,
    build_level_tree,
)

__all__ = [
    "BOX_OFFSETS",
    "BRIDGE_MIN_PIECE_CELLS",
    "DEEP_DIP_RATIO",
    "DEFAULT_FDR",
    "EXTENTS",
    "EOM_MARGIN",
    "FEW_CELLS_KERNEL",
    "FEW_CELLS_SCALE",
    "FLOOR_LINE_CELLS",
    "GAP_Z",
    "GROW_STEPS",
    "MAX_THRESHOLDS",
    "MIN_MASS_SD",
    "MIN_MASS_SHARE",
    "MIN_DIP_RATIO",
    "MIN_DIP_Z",
    "DIP_MAX_CORRECTION",
    "DIP_MEAN_Z",
    "MIN_PROMINENCE_SD",
    "KERNELS",
    "RIDGE_ALIGNMENT",
    "RIDGE_DIP_RATIO",
    "RIDGE_DIP_Z",
    "RIDGE_ELONGATION",
    "RIDGE_END_SHARE",
    "RIDGE_MIN_LENGTH_CELLS",
    "RIDGE_PATH_SHARE",
    "RIDGE_THINNESS",
    "SELECTIONS",
    "LevelClusters",
    "LevelTree",
    "adjacent_pairs",
    "binomial_sums",
    "box_sums",
    "build_level_tree",
    "density_levels",
    "fdr_cells",
    "floor_bridges",
    "level_noise",
    "grow_labels",
    "scale_mass",
    "select_clusters",
    "sum_noise_sd",
]

#: A cluster holds at least this many standard deviations of one neighbourhood sum's noise, in noisy points ...
MIN_MASS_SD = 2.0
#: ... and rises at least this many standard deviations above the level where it joins its sibling ...
MIN_PROMINENCE_SD = 1.0
#: ... and by at least this share of that level (its peak at least 1.25 times the level where it joins its
#: sibling: a ridge whose density dips by less than a fifth stays whole). Both chosen on the generated sets
#: (docs/results.md §1b): a larger share keeps dipping bands whole but merges touching shapes of different
#: density; this one is the best compromise of the grid compared there.
MIN_DIP_RATIO = 0.25
#: ... and by at least this many standard deviations of the split level ``t`` itself — its noise and the
#: points' Poisson variation, ``√(σ₉² + t)`` — so that a dip counts only where it is significant given the
#: noise. One s.d. since the ridge rule below holds long bands and corridors to their own, stricter rule
#: (two before it, which kept the sparse ends of bands whole at the cost of touching shapes).
MIN_DIP_Z = 1.0
#: The highest-of-many correction of the dip rule: a branch of ``m`` cells that does not split further is
#: read with ``MIN_DIP_Z`` plus this many times the expected excess of the highest of its ``m/9`` independent
#: neighbourhood sums over their mean (Blom's ``Φ⁻¹((k - 3/8)/(k + 1/4))``, ``k = m/9``:
#: :func:`~dpgeo.mechanisms.level_ridges.max_excess_sd`) — on a flat shape noise alone lifts the highest of
#: many sums that far, and cuts the shape into pieces whose peaks pass the dip rule. 1: the expectation
#: itself; 0 (the default): the peak read as one sum. Off by default: on the generated sets it is neutral
#: at ε = 1 and gains at ε = 2, but the labelled sets kept apart lose with it (docs/results.md §1b, seventh
#: comparison) ...
DIP_MAX_CORRECTION = 0.0
#: ... unless the branch's cells' mean ``S̃`` lies at least this many s.d. of the split level above it: a
#: piece of a flat shape is the cells above a cut through the shape's noise, and their mean exceeds the cut
#: by the mean of a normal tail beyond it (0.73 s.d. for a cut 0.2 s.d. above the shape's level, less for a
#: higher one); a plateau beside a real dip (a sparse shape beside a gap) rises across its cells. With the
#: correction at 1, 0.75 is the setting the generated sets chose (docs/results.md §1b, seventh comparison).
DIP_MEAN_Z = 0.75
#: A branch whose cells' coordinates vary at least this many times as much along its long axis as across it
#: (a ratio of variances: 6 is about 2.5 times longer than wide), and which lies along that axis from its
#: parent, is a piece of a ridge — a road, a trail, a river bank — whose density varies along it ...
RIDGE_ELONGATION = 6.0
#: ... "lies along": the cosine of the angle between the long axis and the way from the parent's centre to the
#: branch's is at least this (30 degrees; two parallel ridges side by side are not one ridge) ...
RIDGE_ALIGNMENT = 0.87
#: ... at least this many cells long along that axis (a length in cells changes meaning as the cells get
#: finer; the test below is what tells a row of round clusters from a ridge, this only keeps the shortest
#: branches out; 0 for no shortest length) ...
RIDGE_MIN_LENGTH_CELLS = 6.0
#: ... unless it is a row of round blobs: it splits into branches significant by the dip rule whose elongation
#: is below this — not long enough to be pieces of a ridge themselves — or into rows of such blobs; such a
#: branch is held to the dip rule of round branches (None: every long thin branch is a ridge) ...
RIDGE_BLOB_ELONGATION = 4.0
#: ... and counts only where the ridge dips deeply and significantly: its peak, less ``RIDGE_DIP_Z`` s.d. of
#: it (noise and Poisson variation), at least ``1 + RIDGE_DIP_RATIO`` times the split level plus as many s.d.
#: of it — the density along the ridge falls to at most half of the lower peak, beyond the noise. All six
#: chosen on the generated sets, with a class of corridors (docs/results.md §1b, third and fifth comparison
#: and the check of the fifth on every generated set).
RIDGE_DIP_RATIO = 1.0
RIDGE_DIP_Z = 2.0
#: A branch this many times longer than wide, bends and all (a trail that turns, a ring's arc), is a piece of a
#: ridge too (:func:`~dpgeo.mechanisms.level_ridges.bent_ridges`; docs/results.md §1b, tenth comparison) ...
RIDGE_THINNESS = None
#: ... if it and its siblings are one line (the share of their length one path covers; a cross reads ½) ...
RIDGE_PATH_SHARE = 0.75
#: ... met at an end (its farthest cell from where it meets the rest: this share of its length; 0: anywhere).
RIDGE_END_SHARE = 0.0
#: ... and at least √n̂ noisy points, ``n̂`` the noisy total (the map's scale: :func:`scale_mass`).
MIN_MASS_SHARE = "sqrt"
#: The gap rule: a cluster two of whose child clusters are compact groups (half their points or more in one
#: component of cells whose own released count is at least this many s.d. of one cell's noise, 8 neighbours)
#: in different such components is never chosen over its children — nothing but cells without a significant
#: count lies between them; what joins them in the tree is the 3×3 sums' blur across a gap about a cell wide
#: (generated ``clumps``: five groups 1–1.5 km apart in one cluster at 450 m cells). Chosen on the generated
#: sets (docs/results.md §1b, seventh comparison: 0.75–1 give the same counts at ε = 1, ≥ 2 at ε ≈ 0.7;
#: 1.5 and 2 cut rings and thin curves into their pieces). None: excess of mass alone, the rule before.
GAP_Z = 1.0
#: Excess of mass chooses a cluster over its child clusters only when its excess of mass is larger than
#: theirs together by more than this share: a near-tie is within the noise of the released levels, and then
#: the children are shown (the levels layer keeps the cluster they make together). Chosen on the generated
#: sets with the binomial kernel on few cells (docs/results.md §1b, seventh comparison: 0.05–0.25 all pass
#: the criterion written there, 0.1 the best mean at ε = 1); 0: excess of mass alone, the rule before.
EOM_MARGIN = 0.1
#: The deep-dip rule: a cluster whose child clusters are all compact groups (round and not thin:
#: :data:`~dpgeo.mechanisms.level_ridges.DEEP_DIP_ELONGATION`, :data:`~dpgeo.mechanisms.level_ridges.DEEP_DIP_THINNESS`)
#: rising to at least twice the level where they split off is never chosen over them: places whose density
#: falls below half of theirs between them, which excess of mass would join because the parent lives long
#: below the split (generated ``touching``: three discs side by side as one cluster). Chosen on the
#: generated sets (docs/results.md §1b, eleventh comparison: 0.5 and 0.6 pass the criterion written there,
#: 0.5 the better mean at ε = 1; without the compactness tests rings, moons and trails' curls are cut).
#: None: the rule before.
DEEP_DIP_RATIO = 0.5
#: Spans without a radius with few cells (the uniform rule's grid has at most 1,024 cells) read the levels
#: through the binomial kernel (:func:`binomial_sums`): their cells are wide (hundreds of metres in a 10 km
#: study area), and the box's 3×3 sums fill a gap about one cell wide between small groups. Chosen on the
#: generated sets (docs/results.md §1b, seventh comparison; on every map it costs trails, gradients and
#: touching shapes); ``box`` is the rule before.
FEW_CELLS_KERNEL = "binomial"
#: Spans without a radius with few cells (the uniform rule's grid has at most 1,024 cells: a small noisy
#: total) ask a cluster to hold this share of that scale, ``0.6 √n̂`` (still at least ``MIN_MASS_SD`` s.d.):
#: few points in many small groups (generated ``clumps``: 8–20 groups of 25–60 points) hold fewer than
#: ``√n̂`` each. Chosen on the generated sets (docs/results.md §1b, sixth comparison: any share from 0 to
#: 0.8 gave the same mean within 0.0006; 1 the rule before).
FEW_CELLS_SCALE = 0.6


def scale_mass(n_hat, rule=MIN_MASS_SHARE) -> float:
    """The map's scale: the fewest noisy points of a cluster given the noisy total (0 without one).

    ``rule`` is ``"sqrt"`` (``√n̂``: at most about ``√n̂`` clusters of ``√n̂``
    points) or a share of ``n̂``.

    Examples
    --------
    >>> scale_mass(10_000, "sqrt"), scale_mass(10_000, 0.01), scale_mass(None)
    (100.0, 100.0, 0.0)
    """
    if n_hat is None:
        return 0.0
    n = max(float(n_hat), 0.0)
    return math.sqrt(n) if rule == "sqrt" else float(rule) * n


def _reading(a) -> float:
    """A setting for the metadata: the number, or the median of a per-cell array (0 when empty)."""
    return float(a) if np.ndim(a) == 0 else float(np.median(a)) if np.size(a) else 0.0


def density_levels(hist: NoisyHistogram, *, fdr: float = DEFAULT_FDR, n_hat: float | None = None,
                   min_mass: float | None = None, min_prominence: float | None = None, extent: str = "grown",
                   selection: str = "eom", min_mass_share: float = MIN_MASS_SHARE,
                   grow_steps: int | None = GROW_STEPS,
                   max_thresholds: int = MAX_THRESHOLDS, dip_ratio: float = MIN_DIP_RATIO,
                   merge_ratio: float | None = None, dip_z: float = MIN_DIP_Z,
                   ridge_elongation: float | None = RIDGE_ELONGATION, ridge_dip_ratio: float = RIDGE_DIP_RATIO,
                   ridge_dip_z: float = RIDGE_DIP_Z, ridge_alignment: float | None = RIDGE_ALIGNMENT,
                   ridge_min_length_cells: float = RIDGE_MIN_LENGTH_CELLS,
                   ridge_blob_elongation: float | None = RIDGE_BLOB_ELONGATION,
                   ridge_thinness: float | None = RIDGE_THINNESS, ridge_path_share: float = RIDGE_PATH_SHARE,
                   ridge_end_share: float = RIDGE_END_SHARE,
                   kernel: str = "box",
                   gap_z: float | None = GAP_Z, eom_margin: float = EOM_MARGIN,
                   deep_dip_ratio: float | None = DEEP_DIP_RATIO,
                   chain_elongation: float | None = CHAIN_ELONGATION,
                   chain_piece_elongation: float = CHAIN_PIECE_ELONGATION,
                   dip_max_correction: float = DIP_MAX_CORRECTION, dip_mean_z: float = DIP_MEAN_Z,
                   floor_line_cells: int | None = None, floor_cells=None, noise_sd: float | None = None,
                   cell_noise=None):
    """The flat cluster map and the tree of levels from one released dense histogram (post-processing).

    Parameters
    ----------
    hist : NoisyHistogram
        Dense ε-DP histogram.
    fdr : float
        False-discovery rate of the floor (:func:`fdr_cells`).
    n_hat : float, optional
        A DP estimate of the number of points; with it the smallest cluster
        also holds ``√n̂`` of them (:func:`scale_mass`).
    min_mass, min_prominence : float, optional
        Override the defaults ``max(2σ, √n̂)`` and ``σ``, where ``σ`` is the
        standard deviation of one 3×3 sum's noise.
    extent : {"grown", "core"}
    selection : {"eom", "leaf"}
    grow_steps : int or None
        How far ``grown`` reaches (default :data:`GROW_STEPS`; None: every
        connected cell of the floor).
    min_mass_share : "sqrt" or float
        The map's scale (:func:`scale_mass`): the smallest cluster holds
        ``√n̂`` points, or this share of ``n̂``.
    max_thresholds : int
    dip_ratio, dip_z, dip_max_correction, dip_mean_z, merge_ratio
        The dip rule (with its highest-of-many correction, :data:`DIP_MAX_CORRECTION` and
        :data:`DIP_MEAN_Z`) and the joining of touching clusters
        (:func:`~dpgeo.mechanisms.level_select.select_clusters`).
    ridge_elongation, ridge_alignment, ridge_dip_ratio, ridge_dip_z, ridge_min_length_cells, ridge_blob_elongation
        The ridge rule (:data:`RIDGE_ELONGATION` and after; ``ridge_elongation=None``: none).
    ridge_thinness, ridge_path_share, ridge_end_share
        ... and a branch this many times longer than wide, bends and all, is a piece of a ridge too
        (:data:`RIDGE_THINNESS`; None: the ratio of variances alone) if it and its siblings are one line
        (:data:`RIDGE_PATH_SHARE`) met at an end (:data:`RIDGE_END_SHARE`).
    chain_elongation, chain_piece_elongation : float or None
        Chosen clusters that lie end to end along a line are one corridor
        (:func:`~dpgeo.mechanisms.level_chains.chain_merges`; None: never).
    kernel : {"box", "binomial"}
        The density of the tree of levels (:data:`KERNELS`); the floor is always the box's test.
        ``min_prominence`` is then in the kernel's levels (:func:`level_noise`).
    gap_z : float or None
        A cluster whose child clusters are joined only through cells whose released count is below this
        many s.d. of one cell's noise is never chosen over them
        (:func:`~dpgeo.mechanisms.level_ridges.gap_joined`); None: no such rule.
    eom_margin : float
        A cluster is chosen over its child clusters only when its excess of mass exceeds theirs by more
        than this share (:data:`EOM_MARGIN`; 0: excess of mass alone).
    deep_dip_ratio : float or None
        A cluster whose child clusters are all compact groups rising to at least ``1 / deep_dip_ratio``
        times the level where they split off is never chosen over them (:data:`DEEP_DIP_RATIO`; None:
        no such rule), as for :func:`~dpgeo.mechanisms.level_select.select_clusters`.
    floor_line_cells : int, optional
        The floor also tests the lines of this many cells through each cell (:func:`fdr_cells`;
        None: the 3×3 box's test alone, the rule before).
    floor_cells, noise_sd : optional
        For histograms whose cells do not carry one noise each (an experiment:
        :mod:`dpgeo.mechanisms.privtree_auto`): ``floor_cells(sums, fdr)`` returns
        ``(cells, p_cut)`` instead of :func:`fdr_cells`, and ``noise_sd`` is the
        s.d. of a 3×3 sum's noise the rules use.
    cell_noise : CellNoise, optional
        ... or each cell's own noise (:class:`~dpgeo.mechanisms.cell_noise.CellNoise`, in the ``kernel``'s
        levels): the rules read a branch's at its peak cell and a split's at its saddle
        (:func:`~dpgeo.mechanisms.level_select.select_clusters`), the gap rule a cell's leaf's count; then
        ``min_mass`` and ``min_prominence`` may be arrays over the grid's cells too (default ``2σ`` and
        ``σ`` of each cell's own 3×3 box sum, as the scalars').

    Returns
    -------
    LevelClusters, dict
        The clusters and the public settings used (for the metadata).

    Examples
    --------
    >>> import numpy as np
    >>> from dpgeo.domain import StudyArea
    >>> from dpgeo.grid import Grid
    >>> from dpgeo.histogram import noisy_histogram
    >>> from dpgeo.noise import NoiseSource
    >>> rng = np.random.default_rng(0)
    >>> x = np.r_[rng.normal(250, 15, 400), rng.normal(750, 15, 400)]
    >>> y = np.r_[rng.normal(500, 15, 400), rng.normal(500, 15, 400)]
    >>> g = Grid(StudyArea.from_bbox((0, 0, 1000, 1000), "EPSG:32615", working_crs="EPSG:32615"), 20.0)
    >>> h = noisy_histogram(g, g.assign(x, y).cell_id, epsilon=1.0, rng=NoiseSource(seed=3), method="dense")
    >>> clusters, settings = density_levels(h)
    >>> clusters.n_clusters, settings["level_unit"]
    (2, 'noisy points in the 3x3 cells around a cell')
    """
    sums = box_sums(hist)
    sd = sum_noise_sd(hist.q) if noise_sd is None else float(noise_sd)
    if cell_noise is not None:  # each cell's own noise: the defaults per cell
        sd = cell_noise.box_sd
    if min_mass is None:
        min_mass = np.maximum(MIN_MASS_SD * sd, scale_mass(n_hat, min_mass_share)) if np.ndim(sd) else \
            max(MIN_MASS_SD * sd, scale_mass(n_hat, min_mass_share))
    if min_prominence is None:
        min_prominence = MIN_PROMINENCE_SD * sd
    around = _neighbours_in_universe(hist.grid)
    cells, p_cut = fdr_cells(hist, sums, fdr, around) if floor_cells is None else floor_cells(sums, fdr)
    bridges = (floor_bridges(hist, sums, cells, fdr, floor_line_cells, around)
               if floor_line_cells is not None and floor_cells is None else cells[:0])
    level_sd, level_var = level_noise(hist.q, kernel)
    if noise_sd is not None:  # an experimental resolution's one s.d. of a 3x3 sum's noise, in the kernel's levels
        level_sd *= float(noise_sd) / sum_noise_sd(hist.q)
    if kernel != "box":  # the floor's cells stay those of the box's test; their levels are the kernel's
        sums = binomial_sums(hist)
    value = sums.ravel()[cells]
    # the floor: the lowest kept sum of the cells whose whole neighbourhood is in the universe (cells on the
    # study area's edge sum fewer noises and may be kept lower; they must not lower where clusters are born;
    # nor do the bridges, whose sums are low)
    full = around.ravel()[cells] == BOX_OFFSETS.shape[0]
    floor = float(value[full].min()) if full.any() else (float(value.min()) if value.size else None)
    if bridges.size:
        cells = np.sort(np.concatenate([cells, bridges]))
        value = sums.ravel()[cells]
    counts = hist.to_dense().ravel()[cells]  # the released counts of the kept cells (universe cells)
    tree = build_level_tree(hist.grid, cells, value, counts, max_thresholds=max_thresholds)
    per_cell, occupied = {}, None
    if cell_noise is not None:  # arrays over the grid, read at the tree's cells (sorted: the tree's order)
        per_cell = {"noise_sd": cell_noise.level_sd[cells], "level_variance": cell_noise.level_variance[cells]}
        occupied = None if gap_z is None else cell_noise.count_z[cells] >= gap_z
    min_mass, min_prominence = (a if np.ndim(a) == 0 else np.asarray(a, dtype=float)[cells]
                                for a in (min_mass, min_prominence))
    clusters = select_clusters(tree, min_mass=min_mass, min_prominence=min_prominence, extent=extent,
                               selection=selection, base_level=None if floor is None else floor - 1.0,
                               grow_steps=grow_steps, dip_ratio=dip_ratio, merge_ratio=merge_ratio,
                               dip_z=dip_z, gap_z=gap_z, occupied=occupied,
                               **{"noise_sd": level_sd, "level_variance": level_var, **per_cell},
                               cell_noise_sd=math.sqrt(discrete_laplace_variance(hist.q)), eom_margin=eom_margin,
                               deep_dip_ratio=deep_dip_ratio,
                               ridge_elongation=ridge_elongation,
                               ridge_dip_ratio=ridge_dip_ratio, ridge_dip_z=ridge_dip_z,
                               ridge_alignment=ridge_alignment, ridge_min_length_cells=ridge_min_length_cells,
                               ridge_blob_elongation=ridge_blob_elongation, ridge_thinness=ridge_thinness,
                               ridge_path_share=ridge_path_share, ridge_end_share=ridge_end_share,
                               chain_elongation=chain_elongation, chain_piece_elongation=chain_piece_elongation,
                               dip_max_correction=dip_max_correction, dip_mean_z=dip_mean_z)
    settings = {
        "level_unit": "noisy points in the 3x3 cells around a cell",
        "density_kernel": "3x3 cells (sum of released counts)" if kernel == "box" else
        "3x3 cells (binomial weights 1-2-1 x 1-2-1 of the released counts, scaled by 9/16)",
        "noise_sd_of_level": level_sd,
        "floor_rule": "Benjamini-Hochberg over all universe cells, null: no point in the 3x3 neighbourhood"
        + ("" if floor_line_cells is None else
           f"; bridges: cells kept by a second Benjamini-Hochberg procedure (null: no point in the 3x3 "
           f"neighbourhood nor on the 4 lines of {floor_line_cells} cells through the cell; the smallest of "
           "the 5 exact p-values times 5) that join two or more pieces of the floor"),
        **({} if floor_line_cells is None else {"floor_line_cells": int(floor_line_cells),
                                                "n_floor_bridge_cells": int(bridges.size)}),
        "floor_fdr": float(fdr),
        "floor_p_value_cut": p_cut,
        "floor_level": floor,
        "n_floor_cells": int(cells.size),
        "n_thresholds": int(tree.thresholds.size),
        "min_cluster_mass": _reading(min_mass),
        "min_prominence": _reading(min_prominence),
        **({} if cell_noise is None else {"noise_per_cell": "each cell's own (cells of different sizes): "
                                          "mass and prominence at a branch's peak cell, a split at its saddle; "
                                          "the figures above are the medians over the kept cells"}),
        "min_dip_ratio": float(dip_ratio),
        "min_dip_z": float(dip_z),
        **({"dip_max_correction": float(dip_max_correction), "dip_mean_z": float(dip_mean_z)}
           if dip_max_correction else {}),
        "gap_z": None if gap_z is None else float(gap_z),
        "eom_margin": float(eom_margin),
        "deep_dip_ratio": None if deep_dip_ratio is None else float(deep_dip_ratio),
        **({} if ridge_elongation is None else {
            "ridge_elongation": float(ridge_elongation),
            "ridge_alignment": None if ridge_alignment is None else float(ridge_alignment),
            "ridge_dip_ratio": float(ridge_dip_ratio),
            "ridge_dip_z": float(ridge_dip_z),
            "ridge_min_length_cells": float(ridge_min_length_cells),
            "ridge_blob_elongation": None if ridge_blob_elongation is None else float(ridge_blob_elongation),
            **({} if ridge_thinness is None else {"ridge_thinness": float(ridge_thinness),
                                                  "ridge_path_share": float(ridge_path_share),
                                                  "ridge_end_share": float(ridge_end_share)}),
        }),
        **({} if chain_elongation is None else {
            "chain_elongation": float(chain_elongation),
            "chain_piece_elongation": float(chain_piece_elongation),
        }),
        "selection": ("excess of mass (HDBSCAN stability, point-weighted); the root is never chosen"
                      if selection == "eom" else "leaves of the tree of significant clusters"),
        "extent": extent if extent == "core" else
        f"grown: up to {grow_steps} cells around each cluster" if grow_steps is not None else "grown: whole floor",
    }
    return clusters, settings
