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
   sweep from the highest threshold down, one ``scipy`` connected-components
   call per threshold on the components of the threshold above and the cells
   and edges that appear, so the work is O(cells × thresholds) in numpy.
4. **Which clusters.** A branch of a split counts as a cluster only if it
   holds at least ``min_mass`` noisy points and rises at least
   ``min_prominence`` above the level where it joins its sibling (both in
   noisy counts, derived from the noise of one neighbourhood sum); smaller
   branches are points "falling out" of their parent, as in HDBSCAN's
   condensed tree. Among the clusters, those of greatest *excess of mass*
   (HDBSCAN's stability: every point contributes the range of levels over
   which it stays in the cluster) are chosen, never two nested ones, and never
   the root (the whole of the kept cells).
5. **Extent.** ``core``: a chosen cluster is its component at the level where
   it separates (its birth). ``grown`` (default): each chosen cluster then
   takes the kept cells up to :data:`GROW_STEPS` steps away, a cell going to
   the nearest cluster (clusters never merge) — the fringe that the 3×3
   kernel and the noise blur, as DBSCAN's border points are the fringe of its
   core points.

Everything is a function of the released counts, the grid and the public
parameters, so the output has the histogram's ε.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

from ..errors import ParameterError
from ..grid import Grid
from ..histogram import NoisyHistogram
from ..noise import discrete_laplace_variance, gamma_difference_sf, interval_fft_size
from .dbscan import _offset_pairs, neighbourhood_sums

__all__ = [
    "BOX_OFFSETS",
    "DEFAULT_FDR",
    "EXTENTS",
    "MIN_MASS_SD",
    "MIN_MASS_SHARE",
    "MIN_PROMINENCE_SD",
    "SELECTIONS",
    "LevelClusters",
    "LevelTree",
    "box_sums",
    "build_level_tree",
    "density_levels",
    "fdr_cells",
    "select_clusters",
    "sum_noise_sd",
]

#: The 3×3 neighbourhood of a cell (density kernel and adjacency of the level sets).
BOX_OFFSETS = np.array([(dx, dy) for dy in (-1, 0, 1) for dx in (-1, 0, 1)], dtype=np.int64)
#: Default false-discovery rate of the floor (the share of shown cells whose neighbourhood is truly empty).
DEFAULT_FDR = 0.1
#: A cluster holds at least this many standard deviations of one neighbourhood sum's noise, in noisy points ...
MIN_MASS_SD = 2.0
#: ... and rises at least this many standard deviations above the level where it joins its sibling.
MIN_PROMINENCE_SD = 1.0
#: ... and at least √n̂ noisy points, ``n̂`` the noisy total (the map's scale: :func:`scale_mass`).
MIN_MASS_SHARE = "sqrt"
#: ``core``: each cluster at the level where it separates; ``grown``: the kept cells shared out among them.
EXTENTS = ("grown", "core")
#: ``eom``: the clusters of greatest excess of mass (HDBSCAN's default); ``leaf``: the clusters that do not split.
SELECTIONS = ("eom", "leaf")
#: ``grown``: a chosen cluster takes the floor's cells at most this many steps (8 neighbours) from it.
GROW_STEPS = 2
#: Thresholds of the tree: every distinct released value up to this many, else this many spaced geometrically.
MAX_THRESHOLDS = 512


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


def fdr_cells(hist: NoisyHistogram, sums: np.ndarray, fdr: float = DEFAULT_FDR):
    """Universe cells whose neighbourhood holds points, at false-discovery rate ``fdr`` (Benjamini–Hochberg).

    Parameters
    ----------
    hist : NoisyHistogram
        Dense released histogram.
    sums : numpy.ndarray
        ``(ny, nx)`` 3×3 sums of its counts (:func:`box_sums`).
    fdr : float
        Level ``q`` in (0, 1) of the procedure.

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
    kappa = _neighbours_in_universe(g).ravel()[uni]
    # p-values take one value per (κ, sum): sort those distinct values, not the m cells
    key = (kappa.astype(np.int64) << 40) + (s - s.min())
    ukey, inv, cnt = np.unique(key, return_inverse=True, return_counts=True)
    first = np.zeros(ukey.size, dtype=np.int64)
    first[inv] = np.arange(inv.size)
    pu = _p_values(s[first], kappa[first], hist.q)
    m = s.size
    order = np.argsort(pu, kind="stable")
    rank = np.cumsum(cnt[order])  # cells with a p-value <= pu[order[i]] (ties counted fully)
    ok = np.flatnonzero(pu[order] <= fdr * rank / m)
    if ok.size == 0:
        return np.zeros(0, dtype=np.int64), 0.0
    p_cut = float(pu[order[ok[-1]]])
    return uni[(pu <= p_cut)[inv]], p_cut


def _thresholds(values: np.ndarray, max_thresholds: int = MAX_THRESHOLDS) -> np.ndarray:
    """Increasing integer thresholds of the tree: every distinct value, or a geometric grid of them."""
    u = np.unique(values)
    if u.size <= max_thresholds:
        return u
    lo, hi = float(u[0]), float(u[-1])
    shift = 1.0 - min(lo, 1.0)  # geometric spacing needs positive values
    t = np.exp(np.linspace(math.log(lo + shift), math.log(hi + shift), max_thresholds)) - shift
    t = np.unique(np.r_[lo, np.ceil(t)]).astype(np.int64)
    return t[t <= hi]


@dataclass
class LevelTree:
    """The tree of connected components of ``{S̃ ≥ t}`` over the thresholds ``t`` (public).

    Attributes
    ----------
    grid : Grid
    cell_id : numpy.ndarray
        Sorted flat ids of the kept cells.
    value : numpy.ndarray
        Their 3×3 sums ``S̃`` (int64).
    count : numpy.ndarray
        Their released counts.
    thresholds : numpy.ndarray
        Increasing thresholds ``t_0 < t_1 < ...`` (``t_0`` the lowest kept sum).
    cell_node : numpy.ndarray
        For each kept cell, the node it joins at its own threshold.
    node_level : numpy.ndarray
        For each node, the index of the threshold where it appears: the
        highest threshold of a new component, or where components merge.
    node_parent : numpy.ndarray
        The node it merges into as the threshold falls (-1: a root, one of the
        components of the lowest threshold).
    pairs : tuple of numpy.ndarray
        Index pairs of adjacent cells (for growing the clusters).
    """

    grid: Grid
    cell_id: np.ndarray
    value: np.ndarray
    count: np.ndarray
    thresholds: np.ndarray
    cell_node: np.ndarray
    node_level: np.ndarray
    node_parent: np.ndarray
    pairs: tuple = field(default=None, repr=False)

    @property
    def n_nodes(self) -> int:
        return int(self.node_level.size)


def adjacent_pairs(grid: Grid, cell_id: np.ndarray, offsets=BOX_OFFSETS):
    """Index pairs ``(i, j)`` of ``cell_id`` (sorted) that are neighbours (each pair once, int64)."""
    a_list, b_list = [], []
    for a, b, _ in _offset_pairs(grid, cell_id, offsets):
        a_list.append(a)
        b_list.append(b)
    if not a_list:
        z = np.zeros(0, dtype=np.int64)
        return z, z.copy()
    return np.concatenate(a_list).astype(np.int64), np.concatenate(b_list).astype(np.int64)


def _group_desc(level: np.ndarray, n_lev: int):
    """Indices ordered by ``level`` from the highest, and the bounds of each level's group."""
    small = (n_lev - 1 - level).astype(np.int16 if n_lev < (1 << 15) else np.int64)
    order = np.argsort(small, kind="stable")
    bounds = np.searchsorted(small[order], np.arange(n_lev + 1), side="left")
    return order, bounds


def _dedupe(ids: np.ndarray, slot: np.ndarray):
    """``(unique ids, index of each id among them)`` without sorting; ``slot`` is scratch (all -1 after)."""
    k = ids.size
    slot[ids] = np.arange(k)  # the last occurrence of each id wins
    last = slot[ids] == np.arange(k)
    uniq = ids[last]
    rank = np.cumsum(last) - 1
    inv = rank[slot[ids]]
    slot[ids] = -1
    return uniq, inv


def _find(root: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Union-find roots of ``x`` (vectorised; compresses the paths of ``x``)."""
    r = root[x]
    while True:
        rr = root[r]
        if np.array_equal(rr, r):
            break
        r = rr
    root[x] = r
    return r


def build_level_tree(grid: Grid, cell_id, value, count, *, offsets=BOX_OFFSETS, pairs=None,
                     max_thresholds: int = MAX_THRESHOLDS) -> LevelTree:
    """Components of ``{S̃ ≥ t}`` for every threshold ``t``, as a tree (one sweep from the top).

    A union-find over the cells, fed one threshold at a time from the highest:
    the cells and adjacencies that appear at a threshold are joined to the
    components above it (one ``scipy`` connected-components call on the
    components they touch). Every cell and every adjacency is handled once:
    O((cells + adjacencies)·α) after sorting, in numpy.

    Parameters
    ----------
    grid : Grid
    cell_id : numpy.ndarray
        Sorted flat ids of the cells that may belong to a level set.
    value : numpy.ndarray
        Their densities ``S̃`` (integers).
    count : numpy.ndarray
        Their released counts (carried along for the masses).
    offsets : numpy.ndarray
        Adjacency of cells (default 8 neighbours).
    pairs : tuple of numpy.ndarray, optional
        The adjacent pairs (:func:`adjacent_pairs`), if already known.
    max_thresholds : int
        Every distinct value is a threshold when there are at most this many,
        else this many geometrically spaced ones (merges within one step of
        the grid become one merge).

    Returns
    -------
    LevelTree

    Examples
    --------
    >>> import numpy as np
    >>> from dpgeo.domain import StudyArea
    >>> from dpgeo.grid import Grid
    >>> g = Grid(StudyArea.from_bbox((0, 0, 50, 10), "EPSG:32615", working_crs="EPSG:32615"), 10.0)
    >>> t = build_level_tree(g, np.arange(5), np.array([9, 3, 2, 5, 7]), np.ones(5, int))
    >>> t.thresholds.tolist(), t.node_parent.tolist()   # two peaks (9 and 7) merge at threshold 2
    ([2, 3, 5, 7, 9], [2, 2, -1])
    """
    cell_id = np.asarray(cell_id, dtype=np.int64)
    value = np.asarray(value, dtype=np.int64)
    count = np.asarray(count, dtype=np.int64)
    n = cell_id.size
    empty = np.zeros(0, dtype=np.int64)
    if n == 0:
        return LevelTree(grid, cell_id, value, count, empty, empty, empty, empty, (empty, empty))
    thr = _thresholds(value, max_thresholds)
    lev = np.searchsorted(thr, value, side="right") - 1  # index of the highest threshold the cell reaches
    ea, eb = adjacent_pairs(grid, cell_id, offsets) if pairs is None else pairs
    elev = np.minimum(lev[ea], lev[eb])
    n_lev = thr.size
    # cells and adjacencies grouped by the threshold where they appear, from the top (a stable sort of
    # small integers: numpy's radix sort, linear)
    c_order, c_bounds = _group_desc(lev, n_lev)
    e_order, e_bounds = _group_desc(elev, n_lev)
    del elev
    slot = np.full(n, -1, dtype=np.int64)  # scratch: position of a root among this threshold's roots

    root = np.arange(n, dtype=np.int64)  # union-find over cells; a root stands for its component
    node_of = np.full(n, -1, dtype=np.int64)  # the tree node of each root's component
    cell_node = np.full(n, -1, dtype=np.int64)
    node_level, node_parent = [], []
    n_nodes = 0
    for step, j in enumerate(range(n_lev - 1, -1, -1)):
        new = c_order[c_bounds[step]:c_bounds[step + 1]]
        edges = e_order[e_bounds[step]:e_bounds[step + 1]]
        if edges.size:
            ra, rb = _find(root, ea[edges]), _find(root, eb[edges])
            roots, inv = _dedupe(np.concatenate([ra, rb, new]), slot)
            m = edges.size
            graph = csr_matrix((np.ones(m, dtype=bool), (inv[:m], inv[m:2 * m])), shape=(roots.size, roots.size))
            n_comp, lab = connected_components(graph, directed=False)
            new_lab = lab[inv[2 * m:]]
        else:
            roots = new
            n_comp, lab = new.size, np.arange(new.size)
            new_lab = lab
        if roots.size == 0:
            continue
        old = node_of[roots] >= 0  # components that existed above this threshold
        n_old = np.bincount(lab[old], minlength=n_comp)
        group_node = np.full(n_comp, -1, dtype=np.int64)
        cont = old & (n_old[lab] == 1)  # a component that only grew keeps its node
        group_node[lab[cont]] = node_of[roots[cont]]
        fresh = np.flatnonzero(n_old != 1)  # a new peak (no old part) or a merge (two or more)
        group_node[fresh] = n_nodes + np.arange(fresh.size)
        node_level.append(np.full(fresh.size, j, dtype=np.int64))
        node_parent.append(np.full(fresh.size, -1, dtype=np.int64))
        n_nodes += fresh.size
        merged = old & ~cont
        if merged.any():  # nodes of components that merged: their parent is the new node
            _set_parents(node_parent, (node_of[roots[merged]], group_node[lab[merged]]))
        # one representative root per component
        rep = np.full(n_comp, -1, dtype=np.int64)
        np.maximum.at(rep, lab, roots)
        root[roots] = rep[lab]
        node_of[roots] = -1
        node_of[rep] = group_node
        cell_node[new] = group_node[new_lab]
    node_level = np.concatenate(node_level) if node_level else empty
    node_parent = np.concatenate(node_parent) if node_parent else empty
    return LevelTree(grid, cell_id, value, count, thr, cell_node, node_level, node_parent, (ea, eb))


def _set_parents(chunks, fix):
    """Write ``parent[old] = new`` into the list of per-level parent arrays (node ids are consecutive)."""
    old, new = fix
    starts = np.cumsum([0] + [c.size for c in chunks[:-1]])
    which = np.searchsorted(starts, old, side="right") - 1
    for w in np.unique(which).tolist():
        sel = which == w
        chunks[w][old[sel] - starts[w]] = new[sel]


@dataclass
class LevelClusters:
    """Clusters chosen from a :class:`LevelTree` (public).

    Attributes
    ----------
    tree : LevelTree
    cell_id, label : numpy.ndarray
        The cells of the flat map and their cluster id (1..k), sorted by id.
    n_clusters : int
    cluster_level, cluster_top : numpy.ndarray
        For cluster ``i`` (index ``i - 1``): the density where it separates
        from its sibling (or from the floor) and the highest density in it
        (noisy points per 3×3 cells).
    nodes : dict of numpy.ndarray
        The condensed tree, one entry per cluster of the tree (chosen or not):
        ``node`` (tree node where it starts), ``parent`` (index of its parent
        entry, -1 for a top entry), ``level`` and ``top`` (where it separates
        and where it splits or peaks), ``stability`` (excess of mass),
        ``mass`` (noisy points), ``selected`` (its flat cluster id, 0 if not
        chosen).
    node_cells : list of numpy.ndarray
        The cells of each condensed-tree entry at the level where it
        separates (nested: a child's cells are among its parent's).
    """

    tree: LevelTree
    cell_id: np.ndarray
    label: np.ndarray
    n_clusters: int
    cluster_level: np.ndarray
    cluster_top: np.ndarray
    nodes: dict = field(default_factory=dict)
    node_cells: list = field(default_factory=list, repr=False)
    n_core_cells: int = 0


def _by_level(tree: LevelTree, ascending: bool):
    """Node ids grouped by the threshold where they appear (ascending: parents before children)."""
    order = np.argsort(tree.node_level if ascending else -tree.node_level, kind="stable")
    keys = tree.node_level[order]
    cuts = np.flatnonzero(np.diff(keys)) + 1
    return np.split(order, cuts)


def select_clusters(tree: LevelTree, *, min_mass: float, min_prominence: float, extent: str = "grown",
                    selection: str = "eom", offsets=BOX_OFFSETS, base_level: float | None = None,
                    grow_steps: int | None = GROW_STEPS) -> LevelClusters:
    """Clusters of greatest excess of mass, each significant against the noise; then their extent.

    Parameters
    ----------
    tree : LevelTree
    min_mass : float
        A branch of a split is a cluster only with at least this many noisy
        points (the sum of its cells' released counts at the split).
    min_prominence : float
        ... and only if its highest density exceeds the split level by at
        least this much (noisy points per 3×3 cells).
    extent : {"grown", "core"}
        ``core``: each chosen cluster is its component at the level where it
        separates. ``grown``: each then takes the tree's cells at most
        ``grow_steps`` steps from it, the nearest cluster first, never merging.
    selection : {"eom", "leaf"}
        ``eom``: the clusters of greatest excess of mass, never two nested
        ones. ``leaf``: every cluster that does not split further.
    offsets : numpy.ndarray
        Adjacency used to grow.
    base_level : float, optional
        The level of the root, where the components of the lowest threshold
        are born (default ``t_0 - 1``).
    grow_steps : int or None
        How far ``grown`` reaches (None: every cell connected to a cluster).

    Returns
    -------
    LevelClusters

    Notes
    -----
    The root (all cells of the tree, at ``base_level``) is never
    chosen. When nothing else is (no significant split anywhere), the
    significant components of the lowest threshold are shown.

    Examples
    --------
    >>> import numpy as np
    >>> from dpgeo.domain import StudyArea
    >>> from dpgeo.grid import Grid
    >>> g = Grid(StudyArea.from_bbox((0, 0, 70, 10), "EPSG:32615", working_crs="EPSG:32615"), 10.0)
    >>> v = np.array([30, 60, 30, 12, 30, 50, 30])      # two bumps joined at density 12
    >>> t = build_level_tree(g, np.arange(7), v, np.array([5, 20, 5, 1, 5, 15, 5]))
    >>> c = select_clusters(t, min_mass=10, min_prominence=5, extent="core")
    >>> c.label.tolist(), c.cluster_level.tolist(), c.nodes["parent"].tolist()
    ([1, 1, 1, 2, 2, 2], [12.0, 12.0], [2, 2, -1])
    """
    if extent not in EXTENTS:
        raise ParameterError(f"extent must be 'grown' or 'core', got {extent!r}")
    if selection not in SELECTIONS:
        raise ParameterError(f"selection must be 'eom' or 'leaf', got {selection!r}")
    nn = tree.n_nodes
    empty = np.zeros(0, dtype=np.int64)
    if nn == 0:
        return LevelClusters(tree, empty, empty, 0, np.zeros(0), np.zeros(0),
                             nodes={k: empty for k in ("node", "parent", "level", "top", "stability", "mass",
                                                       "selected")})
    thr = tree.thresholds.astype(float)
    base = thr[0] - 1.0 if base_level is None else float(base_level)
    R = nn  # the root: every cell of the tree
    parent = np.r_[np.where(tree.node_parent < 0, R, tree.node_parent), R]
    lam = np.r_[thr[tree.node_level], base]  # each node's level: where it merges, or a peak's top
    w = np.maximum(tree.count, 0).astype(float)  # a point's weight in the excess of mass (never negative)
    # noisy masses (the unbiased sum of released counts), weights and peaks of every subtree
    mass = np.bincount(tree.cell_node, weights=tree.count.astype(float), minlength=nn + 1)
    wsum = np.bincount(tree.cell_node, weights=w, minlength=nn + 1)
    peak = np.full(nn + 1, -np.inf)
    np.maximum.at(peak, tree.cell_node, tree.value.astype(float))
    down, up = _by_level(tree, ascending=False), _by_level(tree, ascending=True)
    for grp in down:  # children appear at higher thresholds than their parents
        np.add.at(mass, parent[grp], mass[grp])
        np.add.at(wsum, parent[grp], wsum[grp])
        np.maximum.at(peak, parent[grp], peak[grp])
    # significant branches; a cluster of the condensed tree starts where two or more branches are significant
    sig = np.zeros(nn + 1, dtype=bool)
    sig[:nn] = (mass[:nn] >= min_mass) & (peak[:nn] - lam[parent[:nn]] >= min_prominence)
    n_sig = np.bincount(parent[:nn][sig[:nn]], minlength=nn + 1)
    start = np.zeros(nn + 1, dtype=bool)
    start[:nn] = sig[:nn] & (n_sig[parent[:nn]] >= 2)
    start[R] = True
    # head: the cluster a node belongs to; cap: the level where its cells fall out of it (a branch too small)
    head = np.arange(nn + 1)
    cap = np.full(nn + 1, np.inf)
    fall = np.where(sig, np.inf, lam[parent])
    for grp in up:
        inner = grp[~start[grp]]
        p = parent[inner]
        head[inner] = head[p]
        cap[inner] = np.minimum(fall[inner], cap[p])
    starts = np.flatnonzero(start)  # ascending: a cluster comes before the cluster it is part of; R last
    idx = np.full(nn + 1, -1, dtype=np.int64)
    idx[starts] = np.arange(starts.size)
    birth = lam[parent[starts]]
    birth[-1] = base
    cpar = idx[head[parent[starts]]]
    cpar[-1] = -1
    # excess of mass: each point counts the levels over which it stays in the cluster ...
    cell_cluster = idx[head[tree.cell_node]]
    exit_lvl = np.minimum(tree.value.astype(float), cap[tree.cell_node])
    stab = np.bincount(cell_cluster, weights=w * np.maximum(exit_lvl - birth[cell_cluster], 0.0),
                       minlength=starts.size)
    # ... and the points of a child cluster count up to where it splits off
    ch = np.flatnonzero(cpar >= 0)
    np.add.at(stab, cpar[ch], wsum[starts[ch]] * np.maximum(birth[ch] - birth[cpar[ch]], 0.0))
    top = peak[starts].copy()
    has_child = np.zeros(starts.size, dtype=bool)
    has_child[cpar[ch]] = True
    top[cpar[ch]] = birth[ch]  # a cluster that splits ends where it splits
    # excess-of-mass selection, bottom-up; the root is never chosen
    chosen = np.zeros(starts.size, dtype=bool)
    value = stab.copy()
    child_sum = np.zeros(starts.size)
    for i in range(starts.size - 1):
        if has_child[i] and (selection == "leaf" or child_sum[i] > stab[i]):
            value[i] = child_sum[i]
        else:
            chosen[i] = True
        if cpar[i] >= 0:
            child_sum[cpar[i]] += value[i]
    below_chosen = np.zeros(starts.size, dtype=bool)  # some ancestor is chosen: parents come later
    for i in range(starts.size - 2, -1, -1):
        p = cpar[i]
        below_chosen[i] = p >= 0 and (chosen[p] or below_chosen[p])
    chosen &= ~below_chosen
    chosen_nodes = starts[chosen]
    level, ctop = birth[chosen], top[chosen]
    if chosen_nodes.size == 0:  # no significant split anywhere: the significant components at the floor
        chosen_nodes = np.flatnonzero((parent[:nn] == R) & sig[:nn])
        level, ctop = np.full(chosen_nodes.size, base), peak[chosen_nodes]
    # the flat map: the cells of each chosen cluster's subtree, then grown
    member = np.full(nn + 1, -1, dtype=np.int64)
    member[chosen_nodes] = np.arange(chosen_nodes.size)
    for grp in up:
        unset = grp[member[grp] < 0]
        member[unset] = member[parent[unset]]
    label = member[tree.cell_node] + 1
    core = label > 0
    if extent == "grown" and core.any():
        pairs = tree.pairs if tree.pairs is not None else adjacent_pairs(tree.grid, tree.cell_id, offsets)
        label = grow_labels(tree.cell_id.size, pairs, label, steps=grow_steps)
    inside = label > 0
    # the condensed tree: one entry per cluster start, the root (all cells of the tree) last
    flat = np.zeros(starts.size, dtype=np.int64)
    flat[idx[chosen_nodes]] = np.arange(1, chosen_nodes.size + 1) if (idx[chosen_nodes] >= 0).all() else 0
    nodes = {"node": starts, "parent": cpar, "level": birth, "top": top, "stability": stab,
             "mass": mass[starts], "selected": flat}
    return LevelClusters(tree, tree.cell_id[inside], label[inside], int(chosen_nodes.size),
                         np.asarray(level, dtype=float), np.asarray(ctop, dtype=float), nodes,
                         _entry_cells(tree.cell_id, cell_cluster, cpar), int(core.sum()))


def grow_labels(n: int, pairs, label: np.ndarray, steps: int | None = None) -> np.ndarray:
    """Every cell reached from a labelled one takes the label of the nearest (fewest steps between
    adjacent cells); labelled cells keep theirs, labels never merge.

    With ``steps``: that many rounds of dilation, a cell reached by two labels
    in the same round taking the larger (O(steps × adjacencies)). Without: one
    breadth-first search from a virtual source joined to every labelled cell
    (``scipy.sparse.csgraph.breadth_first_order``; ties by its order), then
    each cell takes the label its search path starts from (pointer jumping),
    O(cells + adjacencies).

    Examples
    --------
    >>> import numpy as np
    >>> a, b = np.arange(6), np.arange(1, 7)            # a row of 7 cells
    >>> grow_labels(7, (a, b), np.array([1, 0, 0, 0, 0, 0, 2])).tolist()
    [1, 1, 1, 1, 2, 2, 2]
    >>> grow_labels(7, (a, b), np.array([1, 0, 0, 0, 0, 0, 2]), steps=2).tolist()
    [1, 1, 1, 0, 2, 2, 2]
    """
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import breadth_first_order

    label = np.asarray(label, dtype=np.int64)
    seeds = np.flatnonzero(label > 0)
    if seeds.size == 0 or seeds.size == n:
        return label.copy()
    a, b = pairs
    if steps is not None:  # at most this many steps from a labelled cell: one dilation per step
        out = label.copy()
        for _ in range(int(steps)):
            la, lb = out[a], out[b]
            grow_b, grow_a = (la > 0) & (lb == 0), (lb > 0) & (la == 0)
            if not (grow_a.any() or grow_b.any()):
                break
            nxt = out.copy()
            np.maximum.at(nxt, b[grow_b], la[grow_b])  # ties: the larger label (deterministic)
            np.maximum.at(nxt, a[grow_a], lb[grow_a])
            out = nxt
        return out
    src = np.full(seeds.size, n, dtype=np.int64)
    rows = np.concatenate([a, b, src])
    cols = np.concatenate([b, a, seeds])
    g = csr_matrix((np.ones(rows.size, dtype=bool), (rows, cols)), shape=(n + 1, n + 1))
    _, pred = breadth_first_order(g, n, directed=True, return_predecessors=True)
    # jump along the predecessors until a labelled cell (or the source: unreached) is met
    up = np.where(label > 0, np.arange(n), pred[:n])
    up = np.where(up < 0, n, up)
    up = np.r_[up, n]
    stop = np.r_[label > 0, True]
    while True:
        nxt = np.where(stop[up], up, up[up])
        if np.array_equal(nxt, up):
            break
        up = nxt
    out = np.r_[label, 0][up[:n]]
    return out


def _entry_cells(cell_id: np.ndarray, cell_entry: np.ndarray, par: np.ndarray) -> list:
    """The cells of each condensed-tree entry: its own and those of every entry below it (nested)."""
    n = par.size
    order = np.argsort(cell_entry, kind="stable")
    bounds = np.searchsorted(cell_entry[order], np.arange(n + 1))
    own = [cell_id[order[bounds[e]:bounds[e + 1]]] for e in range(n)]
    kids = [[] for _ in range(n)]
    for i in range(n):
        if par[i] >= 0:
            kids[par[i]].append(i)
    out = [None] * n
    for e in range(n):  # children have smaller indices than their parents
        parts = [own[e]] + [out[c] for c in kids[e]]
        out[e] = np.sort(np.concatenate(parts)) if len(parts) > 1 else own[e]
    return out


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
                   max_thresholds: int = MAX_THRESHOLDS):
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
    sd = sum_noise_sd(hist.q)
    if min_mass is None:
        min_mass = max(MIN_MASS_SD * sd, scale_mass(n_hat, min_mass_share))
    if min_prominence is None:
        min_prominence = MIN_PROMINENCE_SD * sd
    cells, p_cut = fdr_cells(hist, sums, fdr)
    value = sums.ravel()[cells]
    # the floor: the lowest kept sum of the cells whose whole neighbourhood is in the universe (cells on the
    # study area's edge sum fewer noises and may be kept lower; they must not lower where clusters are born)
    full = _neighbours_in_universe(hist.grid).ravel()[cells] == BOX_OFFSETS.shape[0]
    floor = float(value[full].min()) if full.any() else (float(value.min()) if value.size else None)
    tree = build_level_tree(hist.grid, cells, value, hist.lookup(cells), max_thresholds=max_thresholds)
    clusters = select_clusters(tree, min_mass=min_mass, min_prominence=min_prominence, extent=extent,
                               selection=selection, base_level=None if floor is None else floor - 1.0,
                               grow_steps=grow_steps)
    settings = {
        "level_unit": "noisy points in the 3x3 cells around a cell",
        "density_kernel": "3x3 cells (sum of released counts)",
        "noise_sd_of_level": sd,
        "floor_rule": "Benjamini-Hochberg over all universe cells, null: no point in the 3x3 neighbourhood",
        "floor_fdr": float(fdr),
        "floor_p_value_cut": p_cut,
        "floor_level": floor,
        "n_floor_cells": int(cells.size),
        "n_thresholds": int(tree.thresholds.size),
        "min_cluster_mass": float(min_mass),
        "min_prominence": float(min_prominence),
        "selection": ("excess of mass (HDBSCAN stability, point-weighted); the root is never chosen"
                      if selection == "eom" else "leaves of the tree of significant clusters"),
        "extent": extent if extent == "core" else
        f"grown: up to {grow_steps} cells around each cluster" if grow_steps is not None else "grown: whole floor",
    }
    return clusters, settings
