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
   ``docs/privacy.md``).
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

import functools
import math

import numpy as np

from ..errors import ParameterError
from ..grid import Grid
from ..histogram import NoisyHistogram
from ..noise import discrete_laplace_variance, gamma_difference_sf, interval_fft_size
from .dbscan import neighbourhood_sums
from .level_chains import CHAIN_ELONGATION, CHAIN_PIECE_ELONGATION
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
    "DEFAULT_FDR",
    "EXTENTS",
    "EOM_MARGIN",
    "FEW_CELLS_KERNEL",
    "FEW_CELLS_SCALE",
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
    "level_noise",
    "grow_labels",
    "scale_mass",
    "select_clusters",
    "sum_noise_sd",
]

#: The density kernel of the tree of levels: ``box`` (the sum of the 3×3 released counts) or ``binomial``
#: (their ``[1, 2, 1] ⊗ [1, 2, 1]`` weighted sum, in the box's units: :func:`binomial_sums`).
KERNELS = ("box", "binomial")
#: Default false-discovery rate of the floor (the share of shown cells whose neighbourhood is truly empty).
DEFAULT_FDR = 0.1
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


def box_sums(hist: NoisyHistogram) -> np.ndarray:
    """``(ny, nx)`` int64 sums of the released counts over each cell's 3×3 neighbourhood (dense histograms).

    Examples
    --------
    >>> import numpy as np
    >>> from dpgeo.domain import StudyArea
    >>> from dpgeo.grid import Grid
    >>> from dpgeo.histogram import NoisyHistogram
    >>> g = Grid(StudyArea.from_bbox((0, 0, 40, 30), "EPSG:32615", working_crs="EPSG:32615"), 10.0)
    >>> h = NoisyHistogram(g, "dense", np.arange(12), np.r_[5, np.zeros(11, int)], 1.0, 1, 0.37)
    >>> box_sums(h).tolist()
    [[5, 5, 0, 0], [5, 5, 0, 0], [0, 0, 0, 0]]
    """
    if hist.kind != "dense":
        raise ParameterError("density levels need a dense histogram")
    return neighbourhood_sums(hist, BOX_OFFSETS)


def binomial_sums(hist: NoisyHistogram) -> np.ndarray:
    """``(ny, nx)`` int64 binomial-weighted 3×3 sums of the released counts, in box units (dense histograms).

    The weights ``[1, 2, 1] ⊗ [1, 2, 1]`` (a cell 4, its edge neighbours 2, its corners 1) scaled by 9/16 so
    that a uniform density has the level of :func:`box_sums`, rounded to the nearest integer: a kernel that
    blurs a gap about one cell wide less than the box.

    Examples
    --------
    >>> import numpy as np
    >>> from dpgeo.domain import StudyArea
    >>> from dpgeo.grid import Grid
    >>> from dpgeo.histogram import NoisyHistogram
    >>> g = Grid(StudyArea.from_bbox((0, 0, 40, 30), "EPSG:32615", working_crs="EPSG:32615"), 10.0)
    >>> h = NoisyHistogram(g, "dense", np.arange(12), np.r_[16, np.zeros(11, int)], 1.0, 1, 0.37)
    >>> binomial_sums(h).tolist()
    [[36, 18, 0, 0], [18, 9, 0, 0], [0, 0, 0, 0]]
    """
    if hist.kind != "dense":
        raise ParameterError("density levels need a dense histogram")
    ny, nx = hist.grid.ny, hist.grid.nx
    pad = np.zeros((ny + 2, nx + 2), dtype=np.int64)
    pad[1:-1, 1:-1] = hist.to_dense()
    w16 = np.zeros((ny, nx), dtype=np.int64)
    for dx, dy in BOX_OFFSETS.tolist():
        w16 += (2 - abs(dx)) * (2 - abs(dy)) * pad[1 + dy:1 + dy + ny, 1 + dx:1 + dx + nx]
    return (9 * w16 + 8) // 16


def level_noise(q: float, kernel: str = "box") -> tuple[float, float]:
    """``(s.d. of a level's noise, Poisson variance of a level per unit of level)`` of a kernel's sums.

    ``box``: ``√(9 Var)`` and 1 (a sum of counts). ``binomial``: the weights ``9w/16`` give
    ``√(Σ(9w/16)² Var)`` (1.125 times the box's) and ``Σ(9w/16)² / Σ(9w/16)`` = 1.27 for a uniform density.

    Examples
    --------
    >>> import math
    >>> [round(v, 3) for v in level_noise(math.exp(-1.0), "binomial")]
    [4.58, 1.266]
    """
    if kernel not in KERNELS:
        raise ParameterError(f"kernel must be one of {KERNELS}, got {kernel!r}")
    if kernel == "box":
        return sum_noise_sd(q), 1.0
    w2 = sum(((2 - abs(dx)) * (2 - abs(dy)) * 9 / 16) ** 2 for dx, dy in BOX_OFFSETS.tolist())
    return math.sqrt(w2 * discrete_laplace_variance(q)), w2 / 9.0


def sum_noise_sd(q: float, kappa: int = 9) -> float:
    """Standard deviation of the noise of a sum of ``kappa`` released counts (decay ``q``)."""
    return math.sqrt(kappa * discrete_laplace_variance(q))


def _neighbours_in_universe(grid: Grid) -> np.ndarray:
    """``(ny, nx)`` number of universe cells in each cell's 3×3 neighbourhood (the noises in its sum)."""
    mask = grid.universe_mask().astype(np.int64)
    ny, nx = mask.shape
    pad = np.zeros((ny + 2, nx + 2), dtype=np.int64)
    pad[1:-1, 1:-1] = mask
    out = np.zeros_like(mask)
    for dx, dy in BOX_OFFSETS.tolist():
        out += pad[1 + dy:1 + dy + ny, 1 + dx:1 + dx + nx]
    return out


@functools.lru_cache(maxsize=64)
def _tail_table(k: int, q: float) -> np.ndarray | None:
    """``T[s] = Pr[N ≥ s]`` for ``s = 0, 1, ...`` (N the sum of ``k`` noises), or None where too large.

    Exact law through the characteristic function of the law cut where one
    noise's mass is below 1e-17 (as :func:`dpgeo.noise.sum_interval_halfwidth`);
    beyond the table the tail is below 1e-16.
    """
    n = interval_fft_size(k, q)
    if n > 1 << 22:
        return None
    L = math.ceil(-39.2 / math.log(q)) + 1
    z = np.arange(-L, L + 1)
    pmf = np.zeros(n)
    pmf[z % n] = (1.0 - q) / (1.0 + q) * q ** np.abs(z)
    dist = np.clip(np.fft.irfft(np.fft.rfft(pmf) ** k, n), 0.0, None)
    top = min(L * k, n // 2 - 1)
    pos = dist[:top + 1]  # Pr[N = 0..top]
    tail = np.cumsum(pos[::-1])[::-1]  # Pr[top >= N >= s] ~ Pr[N >= s] for s >= 1
    tail[0] = 0.5 * (1.0 + pos[0])  # Pr[N >= 0] by symmetry
    tail = np.minimum(tail, 1.0)
    tail.setflags(write=False)  # shared by the cache
    return tail


def _p_values(sums: np.ndarray, kappa: np.ndarray, q: float) -> np.ndarray:
    """``Pr[N_κ ≥ s]`` for each released sum ``s`` and its number of noises ``κ`` (1 for ``s ≤ 0``)."""
    p = np.ones(sums.size)
    b = 1.0 / -math.log(q)
    for k in np.unique(kappa[sums > 0]).tolist():
        sel = np.flatnonzero((kappa == k) & (sums > 0))
        table = _tail_table(int(k), q)
        if table is not None:
            p[sel] = table[np.minimum(sums[sel], table.size - 1)]
        else:  # tiny ε: a valid bound through the continuous law (|N - C| < k)
            vals, inv = np.unique(sums[sel], return_inverse=True)
            bound = [min(1.0, gamma_difference_sf(max(v - k, 0) / b, int(k))) for v in vals.tolist()]
            p[sel] = np.asarray(bound)[inv]
    return p


def fdr_cells(hist: NoisyHistogram, sums: np.ndarray, fdr: float = DEFAULT_FDR, neighbours=None):
    """Universe cells whose neighbourhood holds points, at false-discovery rate ``fdr`` (Benjamini–Hochberg).

    Parameters
    ----------
    hist : NoisyHistogram
        Dense released histogram.
    sums : numpy.ndarray
        ``(ny, nx)`` 3×3 sums of its counts (:func:`box_sums`).
    fdr : float
        Level ``q`` in (0, 1) of the procedure.
    neighbours : numpy.ndarray, optional
        ``(ny, nx)`` number of universe cells around each cell, if already known.

    Returns
    -------
    cells : numpy.ndarray
        Sorted flat ids of the kept cells.
    p_cut : float
        The largest p-value kept (0 when none).

    Notes
    -----
    The test of cell ``X`` is "no point lies in its 3×3 neighbourhood"; under
    it ``S̃(X)`` is a sum of ``κ_X ≤ 9`` discrete Laplace noises (the universe
    cells of the neighbourhood), and the p-value ``Pr[N_κ ≥ S̃(X)]`` is exact.
    Benjamini–Hochberg over all ``m`` universe cells keeps the cells with the
    ``r`` smallest p-values, ``r`` the largest rank with ``p_(r) ≤ q·r/m``.

    Examples
    --------
    >>> import numpy as np
    >>> from dpgeo.domain import StudyArea
    >>> from dpgeo.grid import Grid
    >>> from dpgeo.histogram import NoisyHistogram
    >>> g = Grid(StudyArea.from_bbox((0, 0, 100, 100), "EPSG:32615", working_crs="EPSG:32615"), 10.0)
    >>> c = np.zeros(100, int); c[55] = 60
    >>> h = NoisyHistogram(g, "dense", np.arange(100), c, 1.0, 1, float(np.exp(-1)))
    >>> cells, _ = fdr_cells(h, box_sums(h))
    >>> cells.tolist()   # the cell with 60 points and its eight neighbours
    [44, 45, 46, 54, 55, 56, 64, 65, 66]
    """
    if not (isinstance(fdr, (int, float)) and 0 < fdr < 1):
        raise ParameterError(f"fdr (false-discovery rate of the floor) must be in (0, 1), got {fdr!r}")
    g = hist.grid
    uni = hist.cell_id if hist.kind == "dense" else g.universe_ids()
    s = sums.ravel()[uni]
    kappa = (_neighbours_in_universe(g) if neighbours is None else neighbours).ravel()[uni]
    # p-values take one value per (κ, sum): sort those distinct values, not the m cells
    span = int(s.max() - s.min()) + 1
    key = kappa.astype(np.int64) * span + (s - s.min())  # ordered as (κ, sum)
    if key.max() < 4 * key.size + 1024:  # a table of the keys' presence instead of a sort
        tally = np.bincount(key)
        ukey = np.flatnonzero(tally)
        inv = (np.cumsum(tally > 0) - 1)[key]
        cnt = tally[ukey]
    else:
        ukey, inv, cnt = np.unique(key, return_inverse=True, return_counts=True)
    pu = _p_values(ukey % span + s.min(), ukey // span, hist.q)
    m = s.size
    order = np.argsort(pu, kind="stable")
    rank = np.cumsum(cnt[order])  # cells with a p-value <= pu[order[i]] (ties counted fully)
    ok = np.flatnonzero(pu[order] <= fdr * rank / m)
    if ok.size == 0:
        return np.zeros(0, dtype=np.int64), 0.0
    p_cut = float(pu[order[ok[-1]]])
    return uni[(pu <= p_cut)[inv]], p_cut


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
                   chain_elongation: float | None = CHAIN_ELONGATION,
                   chain_piece_elongation: float = CHAIN_PIECE_ELONGATION,
                   dip_max_correction: float = DIP_MAX_CORRECTION, dip_mean_z: float = DIP_MEAN_Z,
                   floor_cells=None, noise_sd: float | None = None):
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
    floor_cells, noise_sd : optional
        For histograms whose cells do not carry one noise each (an experiment:
        :mod:`dpgeo.mechanisms.privtree_auto`): ``floor_cells(sums, fdr)`` returns
        ``(cells, p_cut)`` instead of :func:`fdr_cells`, and ``noise_sd`` is the
        s.d. of a 3×3 sum's noise the rules use.

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
    if min_mass is None:
        min_mass = max(MIN_MASS_SD * sd, scale_mass(n_hat, min_mass_share))
    if min_prominence is None:
        min_prominence = MIN_PROMINENCE_SD * sd
    around = _neighbours_in_universe(hist.grid)
    cells, p_cut = fdr_cells(hist, sums, fdr, around) if floor_cells is None else floor_cells(sums, fdr)
    level_sd, level_var = level_noise(hist.q, kernel)
    if noise_sd is not None:  # an experimental resolution's one s.d. of a 3x3 sum's noise, in the kernel's levels
        level_sd *= float(noise_sd) / sum_noise_sd(hist.q)
    if kernel != "box":  # the floor's cells stay those of the box's test; their levels are the kernel's
        sums = binomial_sums(hist)
    value = sums.ravel()[cells]
    # the floor: the lowest kept sum of the cells whose whole neighbourhood is in the universe (cells on the
    # study area's edge sum fewer noises and may be kept lower; they must not lower where clusters are born)
    full = around.ravel()[cells] == BOX_OFFSETS.shape[0]
    floor = float(value[full].min()) if full.any() else (float(value.min()) if value.size else None)
    counts = hist.to_dense().ravel()[cells]  # the released counts of the kept cells (universe cells)
    tree = build_level_tree(hist.grid, cells, value, counts, max_thresholds=max_thresholds)
    clusters = select_clusters(tree, min_mass=min_mass, min_prominence=min_prominence, extent=extent,
                               selection=selection, base_level=None if floor is None else floor - 1.0,
                               grow_steps=grow_steps, dip_ratio=dip_ratio, merge_ratio=merge_ratio,
                               dip_z=dip_z, noise_sd=level_sd, level_variance=level_var, gap_z=gap_z,
                               cell_noise_sd=math.sqrt(discrete_laplace_variance(hist.q)), eom_margin=eom_margin,
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
        "floor_rule": "Benjamini-Hochberg over all universe cells, null: no point in the 3x3 neighbourhood",
        "floor_fdr": float(fdr),
        "floor_p_value_cut": p_cut,
        "floor_level": floor,
        "n_floor_cells": int(cells.size),
        "n_thresholds": int(tree.thresholds.size),
        "min_cluster_mass": float(min_mass),
        "min_prominence": float(min_prominence),
        "min_dip_ratio": float(dip_ratio),
        "min_dip_z": float(dip_z),
        **({"dip_max_correction": float(dip_max_correction), "dip_mean_z": float(dip_mean_z)}
           if dip_max_correction else {}),
        "gap_z": None if gap_z is None else float(gap_z),
        "eom_margin": float(eom_margin),
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
