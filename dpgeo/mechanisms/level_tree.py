"""The tree of density levels: the connected components of ``{S̃ ≥ t}`` for every threshold ``t``.

Part of :mod:`dpgeo.mechanisms.levels` (post-processing of one released
histogram; no budget). :func:`build_level_tree` is a union-find over the cells,
fed one threshold at a time from the highest; each cell and each adjacency is
handled once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

from ..grid import Grid
from .dbscan import _offset_pairs

__all__ = ["BOX_OFFSETS", "MAX_THRESHOLDS", "LevelTree", "adjacent_pairs", "build_level_tree"]

#: The 3×3 neighbourhood of a cell (density kernel and adjacency of the level sets).
BOX_OFFSETS = np.array([(dx, dy) for dy in (-1, 0, 1) for dx in (-1, 0, 1)], dtype=np.int64)
#: Thresholds of the tree: every distinct released value up to this many, else this many spaced geometrically.
MAX_THRESHOLDS = 512


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


