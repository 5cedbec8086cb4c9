"""The extent of chosen clusters: their growth over the floor's cells, and clusters kept apart or joined.

Part of :mod:`dpgeo.mechanisms.levels` (post-processing of the released
histogram; no budget), used by :func:`dpgeo.mechanisms.level_select.select_clusters`
once it has chosen the clusters: each grows over nearby cells of the floor,
clusters that would share a boundary are kept at least a cell apart, and (an
option) clusters that meet on a ridge are joined.
"""

from __future__ import annotations

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from .level_tree import BOX_OFFSETS, adjacent_pairs

__all__ = ["grow_labels", "grow_labels_raster", "separate_clusters", "touching_merges"]


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


def grow_labels_raster(grid, cell_id: np.ndarray, label: np.ndarray, steps: int, offsets=BOX_OFFSETS) -> np.ndarray:
    """:func:`grow_labels` with ``steps``, on the grid as a raster: the same labels, in O(steps × cells of the
    grid) without a list of adjacent pairs.

    ``cell_id`` (sorted flat ids) are the cells that may take a label, ``label``
    theirs (0: none). In each step every unlabelled one of them takes the
    largest label among its neighbours (``offsets`` and their opposites).

    Examples
    --------
    >>> from dpgeo.domain import StudyArea
    >>> from dpgeo.grid import Grid
    >>> g = Grid(StudyArea.from_bbox((0, 0, 70, 10), "EPSG:32615", working_crs="EPSG:32615"), 10.0)
    >>> grow_labels_raster(g, np.arange(7), np.array([1, 0, 0, 0, 0, 0, 2]), steps=2).tolist()
    [1, 1, 1, 0, 2, 2, 2]
    """
    label = np.asarray(label, dtype=np.int64)
    if cell_id.size == 0 or not (label > 0).any() or (label > 0).all():
        return label.copy()
    offs = {(int(dx), int(dy)) for dx, dy in np.asarray(offsets).tolist()}
    offs = sorted((offs | {(-dx, -dy) for dx, dy in offs}) - {(0, 0)})
    r = max(max(abs(dx), abs(dy)) for dx, dy in offs)
    ny, nx = grid.ny, grid.nx
    dt = np.int32 if int(label.max()) < (1 << 31) else np.int64
    lab = np.zeros((ny + 2 * r, nx + 2 * r), dtype=dt)
    inner = lab[r:r + ny, r:r + nx]  # a view: writing it writes the padded raster
    free = np.zeros((ny, nx), dtype=bool)
    iy, ix = np.divmod(np.asarray(cell_id, dtype=np.int64), nx)
    inner[iy, ix] = label
    free[iy, ix] = label == 0
    for _ in range(int(steps)):
        best = np.zeros((ny, nx), dtype=dt)
        for dx, dy in offs:
            np.maximum(best, lab[r + dy:r + dy + ny, r + dx:r + dx + nx], out=best)
        grow = free & (best > 0)
        if not grow.any():
            break
        inner[grow] = best[grow]
        free &= ~grow
    return inner[iy, ix].astype(np.int64)


def separate_clusters(grid, cell_id: np.ndarray, label: np.ndarray, core: np.ndarray, value=None,
                      offsets=BOX_OFFSETS):
    """No two clusters share a boundary: where cells of two clusters are neighbours, a grown one is left out.

    ``cell_id`` (sorted flat ids), their ``label`` (0: none), ``core`` (cells
    of a cluster's own component, never a neighbour of another cluster's: two
    chosen clusters are disjoint components of level sets at their births)
    and ``value`` (their densities; default all equal). Of two neighbours
    (``offsets``) of different clusters the grown one is unlabelled — of two
    grown ones the one of lower density (ties: the larger label) — until no
    two cells of different clusters are neighbours: the clusters' polygons are
    then at least one cell apart (the levels layer keeps the finer structure),
    and each cluster loses as few cells as that takes. A grown cell cut off
    from its cluster's core by a cell left out is left out too, so each
    cluster's cells stay connected (8 neighbours).

    Examples
    --------
    >>> from dpgeo.domain import StudyArea
    >>> from dpgeo.grid import Grid
    >>> g = Grid(StudyArea.from_bbox((0, 0, 60, 10), "EPSG:32615", working_crs="EPSG:32615"), 10.0)
    >>> lab = np.array([1, 1, 1, 2, 2, 2]); core = np.array([1, 1, 0, 0, 1, 1], bool)
    >>> separate_clusters(g, np.arange(6), lab, core, value=np.array([9, 8, 5, 6, 8, 9])).tolist()
    [1, 1, 0, 2, 2, 2]
    """
    label = np.asarray(label, dtype=np.int64).copy()
    core = np.asarray(core, dtype=bool)
    value = np.zeros(label.size) if value is None else np.asarray(value, dtype=float)
    on = np.flatnonzero(label > 0)
    if on.size == 0 or int(label.max()) == int(label[on].min()):
        return label
    a, b = adjacent_pairs(grid, cell_id[on], offsets)
    a, b = on[a], on[b]
    while True:
        clash = (label[a] != label[b]) & (label[a] > 0) & (label[b] > 0)
        if not clash.any():
            break
        i, j = a[clash], b[clash]
        # the victim of each clash: a grown cell; of two, the lower density, then the larger label
        j_first = core[i] | (~core[j] & ((value[j] < value[i]) | ((value[j] == value[i]) & (label[j] > label[i]))))
        victim = np.where(j_first, j, i)
        victim = victim[~core[victim]]
        if victim.size == 0:  # only cores meet (not possible for chosen clusters): leave them
            return label
        label[victim] = 0
    # a grown cell whose way to its core went through a cell left out goes too: each cluster stays connected
    same = (label[a] == label[b]) & (label[a] > 0)
    _, comp = connected_components(coo_matrix((np.ones(int(same.sum())), (a[same], b[same])),
                                              shape=(label.size, label.size)), directed=False)
    has_core = np.zeros(label.size, dtype=bool)
    has_core[comp[core & (label > 0)]] = True
    label[(label > 0) & ~has_core[comp]] = 0
    return label


def touching_merges(grid, cell_id: np.ndarray, label: np.ndarray, value: np.ndarray, ratio: float,
                    offsets=BOX_OFFSETS) -> np.ndarray:
    """New ids of the labels (index 0: none) after joining clusters that meet on a ridge.

    Two clusters *meet* where a cell of one is a neighbour of a cell of the
    other; they meet at the density ``min(S̃ᵢ, S̃ⱼ)`` of the best such pair.
    They are joined when that density is at least ``ratio`` times the lower of
    their two peaks (the highest ``S̃`` of their cells): the dip between them is
    shallow, a corridor with hot spots along it rather than two places. Joins
    are transitive; the new ids keep the order of each group's first label.

    Examples
    --------
    >>> from dpgeo.domain import StudyArea
    >>> from dpgeo.grid import Grid
    >>> g = Grid(StudyArea.from_bbox((0, 0, 70, 10), "EPSG:32615", working_crs="EPSG:32615"), 10.0)
    >>> v = np.array([50, 90, 60, 60, 80, 10, 70])   # 1 and 2 meet at 60, 2 and 3 at 10
    >>> touching_merges(g, np.arange(7), np.array([1, 1, 1, 2, 2, 3, 3]), v, 0.5).tolist()
    [0, 1, 1, 2]
    """

    label = np.asarray(label, dtype=np.int64)
    k = int(label.max()) if label.size else 0
    ident = np.arange(k + 1)
    on = np.flatnonzero(label > 0)
    if k < 2 or on.size == 0:
        return ident
    value = np.asarray(value, dtype=float)
    peak = np.full(k + 1, -np.inf)
    np.maximum.at(peak, label[on], value[on])
    a, b = adjacent_pairs(grid, cell_id[on], offsets)
    a, b = on[a], on[b]
    la, lb = label[a], label[b]
    clash = la != lb
    if not clash.any():
        return ident
    la, lb = la[clash], lb[clash]
    meet = np.minimum(value[a[clash]], value[b[clash]])
    join = meet >= ratio * np.minimum(peak[la], peak[lb])
    if not join.any():
        return ident
    m = coo_matrix((np.ones(int(join.sum())), (la[join], lb[join])), shape=(k + 1, k + 1))
    _, comp = connected_components(m, directed=False)
    # number the groups in the order of their first label (label 0 stays 0)
    first = np.full(comp.max() + 1, k + 1)
    np.minimum.at(first, comp[1:], np.arange(1, k + 1))
    rank = np.argsort(np.argsort(first[np.unique(comp[1:])]))
    new = np.zeros(k + 1, dtype=np.int64)
    uniq = np.unique(comp[1:])
    pos = np.searchsorted(uniq, comp[1:])
    new[1:] = rank[pos] + 1
    return new
