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

__all__ = ["BOX_OFFSETS", "MAX_THRESHOLDS", "RASTER_MAX_CELLS", "LevelTree", "adjacent_pairs", "build_level_tree"]

#: The 3×3 neighbourhood of a cell (density kernel and adjacency of the level sets).
BOX_OFFSETS = np.array([(dx, dy) for dy in (-1, 0, 1) for dx in (-1, 0, 1)], dtype=np.int64)
#: Thresholds of the tree: every distinct released value up to this many, else this many spaced geometrically.
MAX_THRESHOLDS = 512
#: Grids of at most this many cells are handled as rasters (one int64 per cell; ``auto`` has at most 2**20).
RASTER_MAX_CELLS = 1 << 24


def _distinct(values: np.ndarray) -> np.ndarray:
    """Sorted distinct integers (a table of presence when their range is small, else a sort)."""
    lo, hi = int(values.min()), int(values.max())
    if hi - lo <= 4 * values.size + 1024:
        return np.flatnonzero(np.bincount(values - lo, minlength=hi - lo + 1)) + lo
    return np.unique(values)


def _thresholds(values: np.ndarray, max_thresholds: int = MAX_THRESHOLDS) -> np.ndarray:
    """Increasing integer thresholds of the tree: every distinct value, or a geometric grid of them."""
    u = _distinct(values)
    if u.size <= max_thresholds:
        return u
    lo, hi = float(u[0]), float(u[-1])
    shift = 1.0 - min(lo, 1.0)  # geometric spacing needs positive values
    t = np.exp(np.linspace(math.log(lo + shift), math.log(hi + shift), max_thresholds)) - shift
    t = np.unique(np.r_[lo, np.ceil(t)]).astype(np.int64)
    return t[t <= hi]


def _level_index(thr: np.ndarray, values: np.ndarray) -> np.ndarray:
    """For each value, the index of the highest threshold ``<= value`` (int16 or int32: a small table for
    the gathers); every value is at least ``thr[0]``."""
    dt = np.int16 if thr.size < (1 << 15) else np.int32
    lo, hi = int(thr[0]), int(values.max())
    if hi - lo <= 4 * values.size + 1024:  # a table of every value in range
        table = (np.searchsorted(thr, np.arange(lo, hi + 1), side="right") - 1).astype(dt)
        return table[values - lo]
    return (np.searchsorted(thr, values, side="right") - 1).astype(dt)


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
    cell_level : numpy.ndarray, optional
        For each kept cell, the index of the highest threshold it reaches.
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
    cell_level: np.ndarray = field(default=None, repr=False)

    @property
    def n_nodes(self) -> int:
        return int(self.node_level.size)


def adjacent_pairs(grid: Grid, cell_id: np.ndarray, offsets=BOX_OFFSETS):
    """Index pairs ``(i, j)`` of ``cell_id`` (sorted) that are neighbours (each pair once, int64).

    The pairs of each offset in turn, each offset's pairs ordered by ``i``. On
    a grid of at most :data:`RASTER_MAX_CELLS` cells a cell's neighbour is
    found in a raster of positions (one gather), else by binary search.

    Examples
    --------
    >>> from dpgeo.domain import StudyArea
    >>> g = Grid(StudyArea.from_bbox((0, 0, 30, 20), "EPSG:32615", working_crs="EPSG:32615"), 10.0)
    >>> a, b = adjacent_pairs(g, np.array([0, 1, 4, 5]))   # cells (0, 0), (1, 0), (1, 1), (2, 1) of a 3 x 2 grid
    >>> a.tolist(), b.tolist()   # offset (1, 0): 0-1, 2-3; (0, 1): 1-2; (1, 1): 0-2, 1-3
    ([0, 2, 1, 0, 1], [1, 3, 2, 2, 3])
    """
    cell_id = np.asarray(cell_id, dtype=np.int64)
    if cell_id.size == 0 or grid.nx * grid.ny > RASTER_MAX_CELLS:
        a_list, b_list = [], []
        for a, b, _ in _offset_pairs(grid, cell_id, offsets):
            a_list.append(a)
            b_list.append(b)
        if not a_list:
            z = np.zeros(0, dtype=np.int64)
            return z, z.copy()
        return np.concatenate(a_list).astype(np.int64), np.concatenate(b_list).astype(np.int64)
    nx, ny = grid.nx, grid.ny
    pos = np.full(nx * ny, -1, dtype=np.int64)
    pos[cell_id] = np.arange(cell_id.size)
    ix, iy = cell_id % nx, cell_id // nx
    a_list, b_list = [], []
    for dx, dy in offsets.tolist():
        if (dy, dx) <= (0, 0):  # each unordered pair once; skip self (the order of _offset_pairs)
            continue
        ok = (ix + dx >= 0) & (ix + dx < nx) & (iy + dy < ny)  # dy >= 0 here
        src = np.flatnonzero(ok)
        nb = pos[cell_id[src] + (dy * nx + dx)]
        hit = nb >= 0
        a_list.append(src[hit])
        b_list.append(nb[hit])
    return np.concatenate(a_list), np.concatenate(b_list)


def _group_desc(level: np.ndarray, n_lev: int):
    """Indices ordered by ``level`` from the highest, and the bounds of each level's group."""
    small = (n_lev - 1 - level).astype(np.int16 if n_lev < (1 << 15) else np.int64)
    order = np.argsort(small, kind="stable")
    bounds = np.searchsorted(small[order], np.arange(n_lev + 1), side="left")
    return order, bounds


def _dedupe(ids: np.ndarray, slot: np.ndarray):
    """``(unique ids, index of each id among them)`` without sorting, the ids in the order of their last
    occurrence; ``slot`` is scratch (all -1 after)."""
    k = ids.size
    pos = np.arange(k, dtype=slot.dtype)
    slot[ids] = pos  # the last occurrence of each id wins
    where = slot[ids]
    last = where == pos
    uniq = ids[last]
    inv = (np.cumsum(last) - 1)[where]
    slot[uniq] = -1
    return uniq, inv


def _find(root: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Union-find roots of ``x`` (vectorised; each step follows only the pointers not yet at a root, and
    the paths of ``x`` are compressed)."""
    r = root[x]
    nxt = root[r]
    moved = np.flatnonzero(nxt != r)
    if moved.size == 0:  # every one at its root already (most look-ups)
        return r
    todo, cur = moved, nxt[moved]
    r[todo] = cur
    while True:
        nxt = root[cur]
        step = nxt != cur
        if not step.any():
            break
        todo, cur = todo[step], nxt[step]
        r[todo] = cur
    root[x[moved]] = r[moved]
    return r


def _argsort_small(keys: np.ndarray, bound: int) -> np.ndarray:
    """Stable argsort of integers in ``[0, bound)``: numpy's radix sort on 16-bit keys (two passes above
    2**16), linear in the number of keys."""
    if bound <= (1 << 16):
        return np.argsort(keys.astype(np.uint16), kind="stable")
    if bound <= (1 << 32):
        low = np.argsort((keys & 0xFFFF).astype(np.uint16), kind="stable")
        return low[np.argsort((keys[low] >> 16).astype(np.uint16), kind="stable")]
    return np.argsort(keys, kind="stable")


def _components(n_vertices: int, ia: np.ndarray, ib: np.ndarray):
    """Connected components of the graph with edges ``(ia[k], ib[k])``: labels numbered in the order of
    each component's smallest vertex (``scipy.sparse.csgraph.connected_components``), and their number."""
    order = _argsort_small(ia, n_vertices)
    indptr = np.zeros(n_vertices + 1, dtype=np.int64 if ia.size >= (1 << 31) else np.int32)
    np.cumsum(np.bincount(ia, minlength=n_vertices), out=indptr[1:])
    graph = csr_matrix((np.ones(ia.size), ib[order].astype(indptr.dtype), indptr), shape=(n_vertices, n_vertices))
    return connected_components(graph, directed=False)


def build_level_tree(grid: Grid, cell_id, value, count, *, offsets=BOX_OFFSETS, pairs=None,
                     max_thresholds: int = MAX_THRESHOLDS) -> LevelTree:
    """Components of ``{S̃ ≥ t}`` for every threshold ``t``, as a tree (one sweep from the top).

    A union-find over the cells (union by size), fed one threshold at a time
    from the highest: the cells and adjacencies that appear at a threshold are
    joined to the components above it by one ``scipy`` connected-components
    call on a graph of the new cells and the old components they touch. An
    adjacency appears with its lower cell, so only its other end is looked up
    in the union-find. The cells and adjacencies are grouped by threshold with
    numpy's radix sort, and each is handled once: O((cells + adjacencies)·α),
    with a constant number of numpy calls per threshold.

    The nodes of each threshold are numbered in the order of their smallest
    vertex in that graph: the old components in the order of their last
    occurrence among the adjacencies' first ends, then their second ends, then
    the new cells by id (the chosen clusters are numbered in this order).

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
    lev = _level_index(thr, value)  # index of the highest threshold each cell reaches
    ea, eb = adjacent_pairs(grid, cell_id, offsets) if pairs is None else pairs
    n_lev = thr.size
    # cells and adjacencies grouped by the threshold where they appear, from the top (a stable sort of
    # small integers: numpy's radix sort, linear); each group's adjacencies are a contiguous slice, in the
    # order of the pairs
    c_order, c_bounds = _group_desc(lev, n_lev)
    e_order, e_bounds = _group_desc(np.minimum(lev[ea], lev[eb]), n_lev)
    if n < (1 << 31):  # both ends in one gather of 8-byte items
        both = np.empty((ea.size, 2), dtype=np.int32)
        both[:, 0], both[:, 1] = ea, eb
        both = both.view(np.int64).ravel()[e_order].view(np.int32).reshape(-1, 2)
        ga, gb = both[:, 0], both[:, 1]
    else:
        ga, gb = ea[e_order], eb[e_order]
    del e_order

    it = np.int32 if n < (1 << 31) else np.int64  # cell indices: half the memory traffic of int64
    slot = np.full(n, -1, dtype=it)  # scratch: position of an old root among this threshold's
    loc = np.zeros(n, dtype=it)  # scratch: a new cell's vertex in this threshold's graph
    root = np.arange(n, dtype=it)  # union-find over cells; a root stands for its component
    size = np.ones(n, dtype=np.int64)  # cells in a root's component (union by size keeps the paths short)
    node_of = np.full(n, -1, dtype=np.int64)  # the tree node of each root's component
    cell_node = np.full(n, -1, dtype=np.int64)
    level_of_nodes, fix_child, fix_parent = [], [], []
    n_nodes = 0
    for step, j in enumerate(range(n_lev - 1, -1, -1)):
        new = c_order[c_bounds[step]:c_bounds[step + 1]]
        e0, e1 = int(e_bounds[step]), int(e_bounds[step + 1])
        if e0 == e1:  # every new cell is a new peak of its own
            if new.size:
                ids = n_nodes + np.arange(new.size)
                node_of[new] = ids
                cell_node[new] = ids
                level_of_nodes.append((j, new.size))
                n_nodes += new.size
            continue
        # an adjacency appears with its lower end; the other end may lie in a component above (an "old"
        # root, found by the union-find). The graph of this threshold: the old roots, in the order of their
        # last occurrence among the pairs' first ends then their second ends, then the new cells in order
        # (the order in which its components are numbered).
        a, b = ga[e0:e1], gb[e0:e1]
        at_a, at_b = np.flatnonzero(lev[a] > j), np.flatnonzero(lev[b] > j)
        olds, inv = _dedupe(np.concatenate([_find(root, a[at_a]), _find(root, b[at_b])]), slot)
        n_old = olds.size
        loc[new] = np.arange(n_old, n_old + new.size, dtype=it)
        va, vb = loc[a], loc[b]
        va[at_a] = inv[:at_a.size]
        vb[at_b] = inv[at_a.size:]
        roots = np.concatenate([olds, new.astype(it)])
        n_comp, lab = _components(roots.size, va, vb)
        lab_old = lab[:n_old]
        n_olds = np.bincount(lab_old, minlength=n_comp)  # old components in each component
        group_node = np.full(n_comp, -1, dtype=np.int64)
        cont = n_olds[lab_old] == 1  # a component that only grew keeps its node
        group_node[lab_old[cont]] = node_of[olds[cont]]
        fresh = np.flatnonzero(n_olds != 1)  # a new peak (no old part) or a merge (two or more)
        group_node[fresh] = n_nodes + np.arange(fresh.size)
        level_of_nodes.append((j, fresh.size))
        n_nodes += fresh.size
        # one representative root per component: the old root of a component that grew, the largest old
        # root of a merge, the first cell of a new peak
        first = lab > np.maximum.accumulate(np.r_[-1, lab[:-1]])  # labels first appear in increasing order
        rep = roots[first]
        rep[lab_old[cont]] = olds[cont]
        merged = np.flatnonzero(~cont)
        if merged.size:  # nodes of components that merged: their parent is the new node
            mlab, mroot = lab_old[merged], olds[merged]
            fix_child.append(node_of[mroot])
            fix_parent.append(group_node[mlab])
            by = np.lexsort((-size[mroot], mlab))  # per merge, the largest old component first
            lead = np.r_[True, mlab[by][1:] != mlab[by][:-1]]
            rep[mlab[by][lead]] = mroot[by][lead]
        gsize = np.bincount(lab_old, weights=size[olds], minlength=n_comp).astype(np.int64)
        gsize += np.bincount(lab[n_old:], minlength=n_comp)
        root[roots] = rep[lab]
        node_of[olds] = -1
        node_of[rep] = group_node
        size[rep] = gsize
        cell_node[new] = group_node[lab[n_old:]]
    node_level = np.repeat(np.array([j for j, _ in level_of_nodes], dtype=np.int64),
                           [k for _, k in level_of_nodes]) if level_of_nodes else empty
    node_parent = np.full(n_nodes, -1, dtype=np.int64)
    if fix_child:
        node_parent[np.concatenate(fix_child)] = np.concatenate(fix_parent)
    return LevelTree(grid, cell_id, value, count, thr, cell_node, node_level, node_parent, (ea, eb), lev)
