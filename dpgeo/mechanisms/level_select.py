"""Choosing clusters from the tree of density levels.

Part of :mod:`dpgeo.mechanisms.levels` (post-processing; no budget): the
significant branches, the clusters of greatest excess of mass (or the leaves)
and the condensed tree of every cluster; their growth and separation are
:mod:`dpgeo.mechanisms.level_extent`'s (its functions are importable from here too).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

from ..errors import ParameterError
from .level_chains import CHAIN_PIECE_ELONGATION, chain_merges
from .level_extent import grow_labels, grow_labels_raster, separate_clusters, touching_merges
from .level_ridges import (blob_chains, bent_ridges, branch_elongation, deep_dips, dip_significant, gap_joined,
                           max_excess_sd, splits_below)
from .level_tree import BOX_OFFSETS, RASTER_MAX_CELLS, LevelTree, adjacent_pairs

__all__ = ["EXTENTS", "GROW_STEPS", "SELECTIONS", "LevelClusters", "grow_labels", "grow_labels_raster",
           "select_clusters", "separate_clusters", "touching_merges"]

#: ``core``: each cluster at the level where it separates; ``grown``: the kept cells shared out among them.
EXTENTS = ("grown", "core")
#: ``eom``: the clusters of greatest excess of mass (HDBSCAN's default); ``leaf``: the clusters that do not split.
SELECTIONS = ("eom", "leaf")
#: ``grown``: a chosen cluster takes the floor's cells at most this many steps (8 neighbours) from it.
GROW_STEPS = 2


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
        separates (nested: a child's cells are among its parent's), sorted;
        made on first use.
    cell_entry : numpy.ndarray
        For each cell of the tree (``tree.cell_id``), the deepest
        condensed-tree entry it belongs to (an index into ``nodes``): an
        entry's cells are those of its own and of every entry below it. The
        levels layer draws every entry's polygon from this one array.
    """

    tree: LevelTree
    cell_id: np.ndarray
    label: np.ndarray
    n_clusters: int
    cluster_level: np.ndarray
    cluster_top: np.ndarray
    nodes: dict = field(default_factory=dict)
    #: the cells of each entry, or a function that makes them (they are needed for the levels layer only)
    entries: Any = field(default=None, repr=False)
    n_core_cells: int = 0
    cell_entry: np.ndarray = field(default=None, repr=False)

    @property
    def node_cells(self) -> list:
        if callable(self.entries):
            self.entries = self.entries()
        return [] if self.entries is None else self.entries


def _by_level(tree: LevelTree, ascending: bool):
    """Node ids grouped by the threshold where they appear (ascending: parents before children)."""
    order = np.argsort(tree.node_level if ascending else -tree.node_level, kind="stable")
    keys = tree.node_level[order]
    cuts = np.flatnonzero(np.diff(keys)) + 1
    return np.split(order, cuts)


def select_clusters(tree: LevelTree, *, min_mass: float, min_prominence: float, extent: str = "grown",
                    selection: str = "eom", offsets=BOX_OFFSETS, base_level: float | None = None,
                    grow_steps: int | None = GROW_STEPS, dip_ratio: float = 0.0, dip_z: float = 0.0, noise_sd: float = 0.0,
                    merge_ratio: float | None = None, ridge_elongation: float | None = None,
                    ridge_dip_ratio: float = 1.0, ridge_dip_z: float = 1.0, ridge_alignment: float | None = None,
                    ridge_min_length_cells: float = 0.0, ridge_blob_elongation: float | None = None,
                    ridge_thinness: float | None = None, ridge_path_share: float = 0.0, ridge_end_share: float = 0.0,
                    level_variance: float = 1.0, gap_z: float | None = None,
                    cell_noise_sd: float = 0.0, eom_margin: float = 0.0, deep_dip_ratio: float | None = None,
                    chain_elongation: float | None = None,
                    chain_piece_elongation: float = CHAIN_PIECE_ELONGATION,
                    dip_max_correction: float = 0.0, dip_mean_z: float = 0.0,
                    occupied: np.ndarray | None = None) -> LevelClusters:
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
    dip_ratio : float
        ... and only if its peak rises above the split level by at least this
        share of the split level (a ridge whose density dips by less stays one
        cluster; ``0``: no such rule).
    dip_z, noise_sd : float
        ... and by at least ``dip_z`` standard deviations of the split level
        ``t`` itself, ``√(noise_sd² + t)`` (its noise, ``noise_sd`` the s.d. of
        one level value's noise, and the points' Poisson variation): a dip
        counts only where it is significant given the noise (``0``: no such rule).
    dip_max_correction, dip_mean_z : float
        The highest-of-many correction: a branch of ``m`` cells that does not
        split further is read with ``dip_z`` plus ``dip_max_correction`` times
        the expected excess of the highest of ``m/9`` independent normal values
        over their mean (:func:`~dpgeo.mechanisms.level_ridges.max_excess_sd`):
        its peak is the highest of many noisy sums, which noise alone lifts
        that far above the rest of a flat shape. A branch that falls short of
        it still counts if its cells' mean ``S̃`` lies ``dip_mean_z`` s.d. of
        the split level above it (the whole branch rises, not its highest
        cell), or if it splits below into two or more branches that count
        (:func:`~dpgeo.mechanisms.level_ridges.splits_below`).
        ``dip_max_correction=0``: the peak read as one sum (the rule before).
    gap_z, cell_noise_sd : float or None, float
        A cluster two of whose child clusters are compact groups with only cells whose own released count
        is below ``gap_z`` standard deviations of one cell's noise (``cell_noise_sd``) between them is
        never chosen over its children: what joins them is the 3×3 kernel's blur across a gap, not points
        (:func:`~dpgeo.mechanisms.level_ridges.gap_joined`, the gap rule). None: no such rule (excess of mass alone).
    eom_margin : float
        ``eom``: a cluster is chosen over its child clusters only when its excess of mass exceeds the sum of
        theirs by more than this share (a near-tie is within the noise; 0: HDBSCAN's rule).
    deep_dip_ratio : float or None
        The deep-dip rule: a cluster whose child clusters are all compact groups rising to at least
        ``1 / deep_dip_ratio`` times the level where they split off is never chosen over them
        (:func:`~dpgeo.mechanisms.level_ridges.deep_dips`). None: no such rule.
    level_variance : float
        The points' Poisson variance of a level ``t`` is ``level_variance · t`` (1: a sum of counts).
    ridge_elongation, ridge_alignment, ridge_min_length_cells : float or None
        A branch whose cells' coordinates vary at least ``ridge_elongation``
        times as much along its long axis as across it (a variance ratio)
        and ``ridge_min_length_cells`` cells long, lying along its long
        axis from its parent (the cosine of the angle at least
        ``ridge_alignment``), is a piece of a ridge (:func:`~dpgeo.mechanisms.level_ridges.branch_elongation`);
        ``ridge_elongation=None``: no ridge rule.
    ridge_dip_ratio, ridge_dip_z : float
        ... and counts only if the ridge dips deeply and significantly where
        it joins its sibling (:func:`~dpgeo.mechanisms.level_ridges.dip_significant`): a road or a trail whose
        density varies along it stays one cluster.
    ridge_blob_elongation : float or None
        ... unless it is a row of round blobs (:func:`~dpgeo.mechanisms.level_ridges.blob_chains`): it splits
        into branches significant by the dip rule and less elongated than this (or rows of such blobs
        themselves), which holds it to the dip rule of round branches; None: every long thin branch is a ridge.
    ridge_thinness, ridge_path_share, ridge_end_share : float or None
        A branch this many times longer than wide, bends and all, whose parent is one line as thin, met at
        an end (:func:`~dpgeo.mechanisms.level_ridges.bent_ridges`), is a piece of a ridge too. None: no such test.
    merge_ratio : float or None
        Two chosen clusters whose grown cells meet are one cluster when the
        density where they meet is at least this share of the lower of their
        peaks (:func:`touching_merges`); None: never. Clusters that stay apart
        are kept a cell apart (:func:`separate_clusters`).
    chain_elongation, chain_piece_elongation : float or None
        Two chosen clusters whose grown cells meet are one cluster when they
        lie end to end along a line, pieces of one corridor
        (:func:`~dpgeo.mechanisms.level_chains.chain_merges`); None: never.

    occupied : numpy.ndarray, optional
        The gap rule's cells of a significant count (a mask of the tree's cells), instead of
        ``tree.count >= gap_z * cell_noise_sd`` (cells whose count is a share of a larger noisy count).

    ``min_mass``, ``min_prominence``, ``noise_sd`` and ``level_variance`` may each be one number or an array
    over the tree's cells (``tree.cell_id``'s order): each cell's own noise, for histograms whose cells do not
    carry one noise each (:mod:`~dpgeo.mechanisms.cell_noise`). A branch then reads the smallest mass, the
    prominence and its peak's noise at its peak cell (the highest ``S̃`` of its subtree), and the level where
    it joins its sibling at the saddle: among the cells that join the parent at the level of the split, the
    one of largest ``noise_sd`` (conservative where several); a branch of the root (the floor) reads it at
    its own lowest cell. One number: every cell the same, the rule as before.

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
    >>> from dpgeo.mechanisms.level_tree import build_level_tree
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
                                                       "selected")}, cell_entry=empty)
    thr = tree.thresholds.astype(float)
    base = thr[0] - 1.0 if base_level is None else float(base_level)
    R = nn  # the root: every cell of the tree
    parent = np.r_[np.where(tree.node_parent < 0, R, tree.node_parent), R]
    lam = np.r_[thr[tree.node_level], base]  # each node's level: where it merges, or a peak's top
    w = np.maximum(tree.count, 0).astype(float)  # a point's weight in the excess of mass (never negative)
    # noisy masses (the unbiased sum of released counts), weights and peaks of every subtree
    mass = np.bincount(tree.cell_node, weights=tree.count.astype(float), minlength=nn + 1)
    wsum = np.bincount(tree.cell_node, weights=w, minlength=nn + 1)
    ncell = np.bincount(tree.cell_node, minlength=nn + 1).astype(float)  # cells of every subtree, their S̃
    vsum = np.bincount(tree.cell_node, weights=tree.value.astype(float), minlength=nn + 1)
    peak = np.full(nn + 1, -np.inf)
    own = slice(None)
    if tree.cell_level is not None:
        # the peak of a node with children is one of theirs (they lie above it); a node without children
        # has its highest cells where it appears: only those cells count
        leaf = np.ones(nn, dtype=bool)
        leaf[tree.node_parent[tree.node_parent >= 0]] = False
        own = np.flatnonzero(leaf[tree.cell_node] & (tree.cell_level == tree.node_level[tree.cell_node]))
    np.maximum.at(peak, tree.cell_node[own], tree.value[own].astype(float))
    down, up = _by_level(tree, ascending=False), _by_level(tree, ascending=True)
    for grp in down:  # children appear at higher thresholds than their parents
        np.add.at(mass, parent[grp], mass[grp])
        np.add.at(wsum, parent[grp], wsum[grp])
        np.add.at(ncell, parent[grp], ncell[grp])
        np.add.at(vsum, parent[grp], vsum[grp])
        np.maximum.at(peak, parent[grp], peak[grp])
    # each cell's own noise (cells of different sizes): a branch reads its peak cell's, a split its saddle's
    peak_noise_sd, peak_variance = noise_sd, level_variance
    if any(np.ndim(a) for a in (min_mass, min_prominence, noise_sd, level_variance)):
        at_peak, at_saddle = _peak_and_saddle_cells(tree, parent, own, down, peak, noise_sd)
        min_mass, min_prominence, peak_noise_sd, peak_variance = (
            a if np.ndim(a) == 0 else np.asarray(a, dtype=float)[at_peak]
            for a in (min_mass, min_prominence, noise_sd, level_variance))
        noise_sd, level_variance = (a if np.ndim(a) == 0 else np.asarray(a, dtype=float)[at_saddle]
                                    for a in (noise_sd, level_variance))
    # significant branches; a cluster of the condensed tree starts where two or more branches are significant
    sig = np.zeros(nn + 1, dtype=bool)
    raw_elong = None  # every node's ratio of variances, where the ridge rule computes it
    split = lam[parent[:nn]]
    split_sd = np.sqrt(noise_sd ** 2 + level_variance * np.maximum(split, 0.0))
    sig[:nn] = ((mass[:nn] >= min_mass) & (peak[:nn] - split >= min_prominence)
                & (peak[:nn] - split >= dip_ratio * np.maximum(split, 0.0))
                & (peak[:nn] - split >= dip_z * split_sd))
    if dip_max_correction > 0:  # a flat branch's peak is the highest of its noisy sums: the dip read for that
        flat = (sig[:nn] & (peak[:nn] - split < (dip_z + dip_max_correction * max_excess_sd(ncell[:nn])) * split_sd)
                & (vsum[:nn] / np.maximum(ncell[:nn], 1.0) - split < dip_mean_z * split_sd))
        sig[:nn] = splits_below(parent, down, sig[:nn], weak=flat)
    if ridge_elongation is not None and np.isfinite(ridge_elongation):
        # a branch much longer than wide is a piece of a ridge (a road, a trail): cut only where the ridge's
        # density falls deeply and significantly
        elong, raw = branch_elongation(tree, parent, down, ridge_alignment, ridge_min_length_cells, raw=True)
        raw_elong = raw
        ridge = elong >= ridge_elongation
        if ridge_thinness is not None and np.isfinite(ridge_thinness):  # a long thin branch that bends
            ridge |= bent_ridges(tree, parent, down, sig[:nn] & ~ridge, ridge_thinness, ridge_min_length_cells,
                                 ridge_path_share, ridge_end_share)
        if ridge_blob_elongation is not None and np.isfinite(ridge_blob_elongation):
            # a row of round blobs, each significant by the dip rule, is not a ridge
            ridge &= ~blob_chains(parent, down, sig[:nn] & (raw < ridge_blob_elongation))
        sig[:nn] &= ~ridge | dip_significant(peak[:nn], split, dip_ratio=ridge_dip_ratio, dip_z=ridge_dip_z,
                                             noise_sd=noise_sd, level_variance=level_variance,
                                             peak_noise_sd=peak_noise_sd, peak_level_variance=peak_variance)
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
    gapped = np.zeros(starts.size, dtype=bool)
    if gap_z is not None and ch.size:
        gapped = gap_joined(tree, cell_cluster, cpar,
                            tree.count >= gap_z * cell_noise_sd if occupied is None else occupied)
    deep = np.zeros(starts.size, dtype=bool)  # compact groups far above their split: places apart
    if deep_dip_ratio is not None and ch.size:
        # the cheap tests for every cluster; the thinness (a distance transform for each child) below, only
        # where excess of mass would choose the cluster over its children
        if raw_elong is None:  # the ridge rule is off: the ratios of variances once, not at every call below
            _, raw_elong = branch_elongation(tree, parent, down, None, 0.0, raw=True)
        deep_of = partial(deep_dips, tree, parent, down, starts, cpar, birth, peak, deep_dip_ratio, raw=raw_elong)
        deep = deep_of(thinness=None)
    # excess-of-mass selection, bottom-up; the root is never chosen
    chosen = np.zeros(starts.size, dtype=bool)
    value = stab.copy()
    child_sum = np.zeros(starts.size)
    for i in range(starts.size - 1):
        if has_child[i] and (selection == "leaf" or (1.0 + eom_margin) * child_sum[i] > stab[i] or gapped[i]
                             or (deep[i] and deep_of(only=np.arange(starts.size) == i)[i])):
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
        g = tree.grid
        if grow_steps is not None and g.nx * g.ny <= RASTER_MAX_CELLS:
            label = grow_labels_raster(g, tree.cell_id, label, steps=grow_steps, offsets=offsets)
        else:
            pairs = tree.pairs if tree.pairs is not None else adjacent_pairs(g, tree.cell_id, offsets)
            label = grow_labels(tree.cell_id.size, pairs, label, steps=grow_steps)
    new_id = np.arange(chosen_nodes.size + 1)
    if merge_ratio is not None and chosen_nodes.size > 1:
        new_id = touching_merges(tree.grid, tree.cell_id, label, tree.value, merge_ratio, offsets=offsets)
    if chain_elongation is not None and np.isfinite(chain_elongation) and new_id.max() > 1:
        new_id = chain_merges(tree.grid, tree.cell_id, new_id[label], core, tree.value, elongation=chain_elongation,
                              piece_elongation=chain_piece_elongation, offsets=offsets)[new_id]
    if new_id.max() < chosen_nodes.size:  # some clusters were joined
        label = new_id[label]
        k = int(new_id.max())
        lv, tp = np.full(k, np.inf), np.full(k, -np.inf)
        np.minimum.at(lv, new_id[1:] - 1, np.asarray(level, dtype=float))
        np.maximum.at(tp, new_id[1:] - 1, np.asarray(ctop, dtype=float))
        level, ctop = lv, tp
    label = separate_clusters(tree.grid, tree.cell_id, label, core, value=tree.value, offsets=offsets)
    inside = label > 0
    # the condensed tree: one entry per cluster start, the root (all cells of the tree) last
    flat = np.zeros(starts.size, dtype=np.int64)
    flat[idx[chosen_nodes]] = new_id[1:] if (idx[chosen_nodes] >= 0).all() else 0
    nodes = {"node": starts, "parent": cpar, "level": birth, "top": top, "stability": stab,
             "mass": mass[starts], "selected": flat}
    return LevelClusters(tree, tree.cell_id[inside], label[inside], int(new_id.max()),
                         np.asarray(level, dtype=float), np.asarray(ctop, dtype=float), nodes,
                         partial(_entry_cells, tree.cell_id, cell_cluster, cpar), int(core.sum()), cell_cluster)


def _peak_and_saddle_cells(tree: LevelTree, parent: np.ndarray, own, down: list, peak: np.ndarray,
                           noise_sd) -> tuple[np.ndarray, np.ndarray]:
    """For each node of the tree, the index (into the tree's cells) of its peak cell and of its split's saddle.

    The peak cell: the highest of the cells ``own`` counts for the node (a node without children: those at its
    own level), then carried up from child to parent as the peaks are (ties: any highest). The saddle of a
    node whose parent is not the root: among the parent's cells that join it at its own level (where its
    children meet), the one of largest ``noise_sd``; a node of the root: its own lowest cell.
    """
    nn = tree.n_nodes
    node = tree.cell_node
    val = tree.value.astype(float)
    own = np.arange(node.size) if isinstance(own, slice) else np.asarray(own)
    peak_cell = np.zeros(nn + 1, dtype=np.int64)
    o = own[np.lexsort((val[own], node[own]))]  # by node, then value: the last of each node is its highest
    last = np.r_[node[o][1:] != node[o][:-1], True]
    peak_cell[node[o[last]]] = o[last]
    for grp in down:  # children before parents; a child whose peak is the parent's gives its cell
        hit = grp[peak[grp] >= peak[parent[grp]]]
        peak_cell[parent[hit]] = peak_cell[hit]
    nsd = np.broadcast_to(np.asarray(noise_sd, dtype=float), node.shape)
    lowest = np.zeros(nn, dtype=np.int64)
    o = np.lexsort((val, node))
    first = np.r_[True, node[o][1:] != node[o][:-1]]
    lowest[node[o[first]]] = o[first]
    at = (np.arange(node.size) if tree.cell_level is None
          else np.flatnonzero(tree.cell_level == tree.node_level[node]))
    saddle_of = lowest.copy()  # fallback: a node's lowest cell
    o = at[np.lexsort((-nsd[at], node[at]))]  # by node, the largest noise first
    first = np.r_[True, node[o][1:] != node[o][:-1]]
    saddle_of[node[o[first]]] = o[first]
    par = parent[:nn]
    saddle = np.where(par < nn, saddle_of[np.minimum(par, nn - 1)], lowest)
    return peak_cell[:nn], saddle


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
        out[e] = np.sort(np.concatenate(parts), kind="stable") if len(parts) > 1 else own[e]  # sorted runs: merged
    return out
