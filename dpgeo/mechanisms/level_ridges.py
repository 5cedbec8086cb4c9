"""Which branches of the tree of density levels are significant: the dip rule and the ridge rule; the gap rule.

Part of :mod:`dpgeo.mechanisms.levels` (post-processing of one released
histogram; no budget), used by :func:`dpgeo.mechanisms.level_select.select_clusters`.
A branch of a split counts only if it rises above the level where it joins its
sibling by a dip that is deep and significant given the noise
(:func:`dip_significant`). A branch much longer than wide that lies along its
long axis from its parent (:func:`branch_elongation`) is a piece of a ridge — a
road, a trail, a river bank — whose density varies along it; it is held to a
stricter dip, so that a ridge is cut only where its density falls to half —
unless it is a row of round blobs, not a ridge (:func:`blob_chains`): a branch
that itself splits into round branches, each significant by the dip rule.
A large branch that does not split further is read with the expected excess of
the highest of its noisy sums over the rest (:func:`max_excess_sd`), unless its
cells' mean rises above the split or it splits below (:func:`splits_below`).
A cluster whose child clusters are compact groups with only cells of no
significant count between them is never chosen over them (the gap rule,
:func:`gap_joined`): what joins them is the 3×3 sums' blur across a gap.
"""

from __future__ import annotations

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components
from scipy.special import ndtri

from .level_tree import LevelTree, adjacent_pairs

__all__ = ["COMPACT_SHARE", "DEEP_DIP_ELONGATION", "DEEP_DIP_THINNESS", "blob_chains", "deep_dips", "bent_ridges", "branch_elongation", "branch_shape", "branch_thinness", "dip_significant", "gap_joined", "max_excess_sd",
           "splits_below"]

#: The thinness of a branch (:func:`branch_thinness`) is read with its holes of at most this many cells filled:
#: at a level near a shape's own, the noise leaves cells below it inside the shape, and a round shape full
#: of small holes is as thin everywhere as its holes are close. Nine: one 3×3 neighbourhood, the levels' own
#: scale; chosen on the generated sets with the thinness (docs/results.md §1b, tenth comparison; 0: no filling).
THIN_HOLE_CELLS = 9
#: The gap rule: a child cluster is a compact group when one component of the occupied cells holds at least
#: this share of its points (half: most of it; not tuned).
COMPACT_SHARE = 0.5
#: The deep-dip rule (:func:`deep_dips`): a child cluster is compact when its cells vary less than this many times
#: as much along their long axis as across it (a ratio of variances; the blob test's
#: :data:`~dpgeo.mechanisms.levels.RIDGE_BLOB_ELONGATION`) ...
DEEP_DIP_ELONGATION = 4.0
#: ... and are less than this many times longer than wide, bends and all (:func:`branch_thinness`: a disc reads
#: about 2, a band three times longer than wide 3): a trail's curled piece is round by its variances, not by this.
DEEP_DIP_THINNESS = 3.0


def branch_elongation(tree: LevelTree, parent: np.ndarray, down: list, along: float | None = None,
                      min_length: float = 0.0, raw: bool = False):
    """For each node of the tree, how much longer than wide its cells are: the ratio of the largest to the
    smallest variance of their centres' coordinates (in cells, each cell counting its own extent, 1/12).

    ``parent`` maps each node to its parent (the root's index for a top node: every cell of the tree)
    and ``down`` groups the nodes by level from the highest (``level_select._by_level``). Sums of the
    coordinates and their products are added up the tree as the masses are: O(nodes + cells). With
    ``min_length``, a node whose long axis (as a uniform bar's length, ``√(12 λ₁)``) is shorter than
    that many cells counts 1; with ``along``, so does a node whose long axis is more than
    ``arccos(along)`` away from the way from its parent's centre to its own (a branch beside its
    sibling, not in line with it). With ``raw``, also the ratios before either test (a tuple).

    Examples
    --------
    >>> from dpgeo.domain import StudyArea
    >>> from dpgeo.grid import Grid
    >>> from dpgeo.mechanisms.level_tree import build_level_tree
    >>> from dpgeo.mechanisms.level_select import _by_level
    >>> g = Grid(StudyArea.from_bbox((0, 0, 200, 10), "EPSG:32615", working_crs="EPSG:32615"), 10.0)
    >>> v = np.r_[np.full(9, 50), 20, 20, np.full(9, 60)]   # a row of 20 cells dipping in its middle
    >>> t = build_level_tree(g, np.arange(20), v, np.ones(20, int))
    >>> par = np.r_[np.where(t.node_parent < 0, t.n_nodes, t.node_parent), t.n_nodes]
    >>> np.round(branch_elongation(t, par, _by_level(t, ascending=False), along=0.87), 1).tolist()
    [81.0, 81.0, 1.0]

    The two halves' variance ratios are 81 (9 cells by 1) and they lie in line; the whole row (a top node)
    lies at its parent's centre.
    """
    nn = tree.n_nodes
    nx = tree.grid.nx
    gx = (tree.cell_id % nx).astype(float)
    gy = (tree.cell_id // nx).astype(float)
    gx -= gx.mean() if gx.size else 0.0
    gy -= gy.mean() if gy.size else 0.0
    m = np.stack([np.bincount(tree.cell_node, weights=w, minlength=nn + 1)
                  for w in (np.ones_like(gx), gx, gy, gx * gx, gy * gy, gx * gy)], axis=1)
    for grp in down:  # children before parents
        np.add.at(m, parent[grp], m[grp])
    m = m.T
    n = np.maximum(m[0, :nn], 1.0)
    mx, my = m[1, :nn] / n, m[2, :nn] / n
    vxx = m[3, :nn] / n - mx * mx + 1.0 / 12
    vyy = m[4, :nn] / n - my * my + 1.0 / 12
    vxy = m[5, :nn] / n - mx * my
    half, root = (vxx + vyy) / 2, np.sqrt(((vxx - vyy) / 2) ** 2 + vxy ** 2)
    elong = raw_elong = (half + root) / np.maximum(half - root, 1.0 / 12)
    if min_length:  # shorter than this (its long axis, as a uniform bar's length, in cells): not a ridge
        elong = np.where(12 * (half + root) >= min_length ** 2, elong, 1.0)
    if along is None:
        return (elong, raw_elong) if raw else elong
    # the direction from the parent's centre to the branch's, against the branch's long axis
    theta = 0.5 * np.arctan2(2 * vxy, vxx - vyy)
    pn = np.maximum(m[0, parent[:nn]], 1.0)
    dx, dy = mx - m[1, parent[:nn]] / pn, my - m[2, parent[:nn]] / pn
    dist = np.hypot(dx, dy)
    cos = np.abs(dx * np.cos(theta) + dy * np.sin(theta)) / np.maximum(dist, 1e-12)
    elong = np.where((cos >= along) & (dist > 0), elong, 1.0)
    return (elong, raw_elong) if raw else elong


def blob_chains(parent: np.ndarray, down: list, blob: np.ndarray) -> np.ndarray:
    """For each node, whether it is a row of round blobs: it splits into two or more branches that are each a
    blob or a row of blobs themselves.

    ``blob`` marks the nodes that are round blobs (in :func:`~dpgeo.mechanisms.level_select.select_clusters`:
    significant by the dip rule and less elongated than a ridge); ``parent`` and ``down`` as for
    :func:`branch_elongation`. One pass up the tree: O(nodes). A chain of round clusters in a row is as long
    and thin as a ridge, but its density falls between compact peaks deeply enough for the dip rule, each
    peak about as wide as it is long; a ridge's pieces are long themselves, or too shallow to count.

    Examples
    --------
    >>> par = np.array([4, 4, 5, 5, 6, 6, 6])      # leaves 0-3 in two pairs (4, 5) under the root (6)
    >>> down = [np.array([0, 1, 2, 3]), np.array([4, 5])]
    >>> blob_chains(par, down, np.array([True, True, True, False, False, False])).tolist()
    [False, False, False, False, True, False]
    """
    nn = blob.size
    count = np.zeros(nn + 1, dtype=np.int64)
    chain = np.zeros(nn, dtype=bool)
    for grp in down:  # children before parents
        chain[grp] = count[grp] >= 2
        np.add.at(count, parent[grp], blob[grp] | chain[grp])
    return chain


def dip_significant(peak, split, *, dip_ratio: float, dip_z: float, noise_sd: float,
                    level_variance: float = 1.0, peak_noise_sd=None, peak_level_variance=None) -> np.ndarray:
    """Whether a branch rises above the level where it joins its sibling by a dip that is deep and real.

    The branch's ``peak`` less ``dip_z`` standard deviations of it must be at
    least ``1 + dip_ratio`` times the ``split`` level plus ``dip_z`` standard
    deviations of it; a level's standard deviation is ``√(noise_sd² + level)``
    (the noise of one 3×3 sum, ``noise_sd``, and the points' Poisson
    variation, ``level_variance`` times the level). Both ends are read conservatively: the peak is the highest of
    many noisy sums and the split level the lowest on the best path between
    the branches, so noise alone makes a gentle slope look like a dip; a
    ridge whose density dips by less than ``dip_ratio`` of its level (a road,
    a trail) stays one cluster. ``dip_ratio = dip_z = 0``: every branch. ``peak_noise_sd`` and
    ``peak_level_variance``: the peak's own where its noise differs from the split's (default: the same).

    Examples
    --------
    >>> dip_significant(np.array([500.0, 500.0]), np.array([350.0, 200.0]), dip_ratio=0.5, dip_z=2, noise_sd=4.3)
    array([False,  True])
    """
    peak, split = np.asarray(peak, dtype=float), np.asarray(split, dtype=float)
    p_sd = noise_sd if peak_noise_sd is None else peak_noise_sd
    p_var = level_variance if peak_level_variance is None else peak_level_variance
    lo = peak - dip_z * np.sqrt(p_sd ** 2 + p_var * np.maximum(peak, 0.0))
    hi = split + dip_z * np.sqrt(noise_sd ** 2 + level_variance * np.maximum(split, 0.0))
    return lo - hi >= dip_ratio * np.maximum(hi, 0.0)


def max_excess_sd(cells) -> np.ndarray:
    """The expected excess, in s.d., of the highest of ``k = m/9`` independent normal values over their
    mean, for branches of ``m`` cells (0 for ``m ≤ 9``): Blom's approximation ``Φ⁻¹((k - 3/8) / (k + 1/4))``.

    The dip rule reads a branch's peak, the highest of its cells' noisy sums. Over a uniform shape
    of ``m`` cells the sums of its ``m/9`` disjoint neighbourhoods are independent, and the highest
    of ``k`` independent normal values lies this far above their mean: noise alone makes a large
    flat branch rise that far above the rest of the shape, so the dip rule asks that much more of a
    large branch before it counts a dip (:func:`~dpgeo.mechanisms.level_select.select_clusters`,
    ``dip_max_correction``). A small branch — a compact group of a few cells — is read as before.

    Examples
    --------
    >>> np.round(max_excess_sd(np.array([9.0, 18.0, 90.0, 900.0])), 2).tolist()
    [0.0, 0.59, 1.55, 2.5]

    (The exact expectations for 2 and 10 values are 0.56 and 1.54.)
    """
    k = np.maximum(np.asarray(cells, dtype=float) / 9.0, 1.0)
    return np.maximum(ndtri((k - 0.375) / (k + 0.25)), 0.0)


def splits_below(parent: np.ndarray, down: list, sig: np.ndarray, weak: np.ndarray | None = None) -> np.ndarray:
    """For each node, whether it splits somewhere below into two or more branches that count; with
    ``weak``, the branches that count are re-read on the way up: a weak branch (one that counts only by
    the dip rule read without the highest-of-many correction) counts only where it splits below itself.

    ``sig`` marks the branches that count (before the re-reading), ``parent`` and ``down`` as for
    :func:`branch_elongation`; one pass up the tree, O(nodes). Returns ``below`` (without ``weak``) or the
    re-read ``sig`` (with it).

    Examples
    --------
    >>> par = np.array([4, 4, 5, 5, 6, 6, 6])      # leaves 0-3 in two pairs (4, 5) under the root (6)
    >>> down = [np.array([0, 1, 2, 3]), np.array([4, 5])]
    >>> sig = np.array([True, True, True, False, True, True])
    >>> splits_below(par, down, sig).tolist()
    [False, False, False, False, True, False]
    >>> splits_below(par, down, sig, weak=np.array([False, False, False, False, True, True])).tolist()
    [True, True, True, False, True, False]
    """
    nn = sig.size
    sig = sig.copy()
    count = np.zeros(nn + 1, dtype=np.int64)
    below = np.zeros(nn + 1, dtype=bool)
    for grp in down:  # children before parents
        below[grp] |= count[grp] >= 2
        if weak is not None:
            sig[grp] &= ~weak[grp] | below[grp]
        np.add.at(count, parent[grp], sig[grp])
        np.logical_or.at(below, parent[grp], below[grp])
    return below[:nn] if weak is None else sig


def gap_joined(tree: LevelTree, cell_entry: np.ndarray, par: np.ndarray, occupied: np.ndarray,
               compact_share: float = COMPACT_SHARE) -> np.ndarray:
    """For each condensed-tree entry, whether two of its child entries are compact groups apart: each holds
    at least ``compact_share`` of its points in one component of the ``occupied`` cells (8 neighbours), and
    those components differ — nothing but unoccupied cells lies between them.

    ``cell_entry`` is the deepest entry of each cell of the tree, ``par`` each entry's parent (children
    before parents, as :func:`~dpgeo.mechanisms.level_select.select_clusters` numbers them),
    ``occupied`` a mask of the tree's cells; a cell's points are its released count (at least 0). A
    diffuse child (no component holds that share of it) is never apart: the test is for groups whose
    points stand out cell by cell. Vectorised: each (entry, component) pair is repeated once for every entry
    above it (O(pairs × depth)); one pass over the entries adds up their totals.

    Examples
    --------
    >>> import numpy as np
    >>> from dpgeo.domain import StudyArea
    >>> from dpgeo.grid import Grid
    >>> from dpgeo.mechanisms.level_tree import build_level_tree
    >>> g = Grid(StudyArea.from_bbox((0, 0, 50, 10), "EPSG:32615", working_crs="EPSG:32615"), 10.0)
    >>> t = build_level_tree(g, np.arange(5), np.array([9, 5, 3, 5, 9]), np.array([9, 0, 0, 0, 9]))
    >>> entry, par = np.array([0, 2, 2, 2, 1]), np.array([2, 2, -1])   # two children, empty cells between
    >>> gap_joined(t, entry, par, t.count >= 2).tolist(), gap_joined(t, entry, par, t.count >= 0).tolist()
    ([False, False, True], [False, False, False])
    """
    n_entries = par.size
    out = np.zeros(n_entries, dtype=bool)
    a, b = tree.pairs if tree.pairs is not None else adjacent_pairs(tree.grid, tree.cell_id)
    keep = occupied[a] & occupied[b]
    _, comp = connected_components(coo_matrix((np.ones(int(keep.sum()), dtype=np.int8), (a[keep], b[keep])),
                                              shape=(occupied.size, occupied.size)), directed=False)
    w = np.maximum(tree.count, 0).astype(float)
    # each entry's points (its own cells' and those of every entry below it): up the tree, children first
    total = np.bincount(cell_entry, weights=w, minlength=n_entries)
    for e in range(n_entries):
        if par[e] >= 0:
            total[par[e]] += total[e]
    # the points each entry holds in each occupied component: its own (entry, component) pairs, then each
    # pair again for every entry above it
    on = np.flatnonzero(occupied & (w > 0))
    n_comp = int(comp.max()) + 1 if comp.size else 1
    key, held = np.unique(cell_entry[on].astype(np.int64) * n_comp + comp[on], return_inverse=True)
    held = np.bincount(held, weights=w[on])
    ent, cmp_ = key // n_comp, key % n_comp
    keys, mass = [], []
    while ent.size:
        keys.append(ent * n_comp + cmp_)
        mass.append(held)
        up = par[ent]
        ok = up >= 0
        ent, cmp_, held = up[ok], cmp_[ok], held[ok]
    if not keys:
        return out
    key, inv = np.unique(np.concatenate(keys), return_inverse=True)
    mass = np.bincount(inv, weights=np.concatenate(mass))
    ent, cmp_ = key // n_comp, key % n_comp
    # each entry's largest component (the last of its keys sorted by mass), and whether it holds enough
    order = np.lexsort((mass, ent))
    last = np.r_[ent[order][1:] != ent[order][:-1], True]
    best_ent, best_comp, best_mass = ent[order][last], cmp_[order][last], mass[order][last]
    compact = best_mass >= compact_share * total[best_ent]
    kid, core = best_ent[compact], best_comp[compact]
    kid_par = par[kid]
    has = kid_par >= 0
    # a parent whose compact children's largest components are two or more different ones
    pc = np.unique(kid_par[has] * n_comp + core[has])
    n_cores = np.bincount(pc // n_comp, minlength=n_entries)
    out[:] = n_cores >= 2
    return out


def bent_ridges(tree: LevelTree, parent: np.ndarray, down: list, candidate: np.ndarray, thinness: float,
                min_length: float = 0.0, path_share: float = 0.0, end_share: float = 0.0) -> np.ndarray:
    """Which ``candidate`` nodes are pieces of a ridge that bends: at least ``thinness`` times longer than wide
    and ``min_length`` cells long (:func:`branch_thinness`; a trail that turns, a ring's arc, which
    :func:`branch_elongation`'s variances read as round), wherever they lie from their parent, if the
    parent — the branch, its siblings and what joins them — is one line: as thin, and one path through
    it covers at least ``path_share`` of its length (:func:`branch_shape`: two lines that cross read ½, a
    round blob's thinness is about 2). ``path_share=0``: the branch's own shape alone. With ``end_share``,
    only if the branch meets the rest of its parent at an end, as a ridge's piece in line with the rest
    (the curved form of :func:`branch_elongation`'s ``along``): the farthest of its cells from those
    that touch the rest (a shortest path through the branch) lies at least ``end_share`` of its length
    away — a piece beside its sibling, or a filament inside a blob, touches along its length.

    Examples
    --------
    >>> from dpgeo.domain import StudyArea
    >>> from dpgeo.grid import Grid
    >>> from dpgeo.mechanisms.level_tree import build_level_tree
    >>> from dpgeo.mechanisms.level_select import _by_level
    >>> g = Grid(StudyArea.from_bbox((0, 0, 200, 10), "EPSG:32615", working_crs="EPSG:32615"), 10.0)
    >>> v = np.r_[np.full(9, 50), 20, 20, np.full(9, 60)]   # a row of 20 cells dipping in its middle
    >>> t = build_level_tree(g, np.arange(20), v, np.ones(20, int))
    >>> par = np.r_[np.where(t.node_parent < 0, t.n_nodes, t.node_parent), t.n_nodes]
    >>> bent_ridges(t, par, _by_level(t, ascending=False), np.ones(t.n_nodes, bool), 4.0, 6.0, 0.75).tolist()
    [True, True, False]
    """
    nn = tree.n_nodes
    ncell = np.bincount(tree.cell_node, minlength=nn + 1).astype(float)
    for grp in down:  # children before parents
        np.add.at(ncell, parent[grp], ncell[grp])
    thin = branch_thinness(tree, parent, down, np.flatnonzero(candidate))
    bent = candidate & (thin >= thinness) & (thin * ncell[:nn] >= min_length ** 2)
    if path_share > 0:  # ... of one line: not two lines that cross, nor two blobs side by side
        pthin, pshare = branch_shape(tree, parent, down, np.unique(parent[:nn][bent & (parent[:nn] < nn)]))
        line = np.r_[(pthin >= thinness) & (pshare >= path_share), False]
        bent &= line[parent[:nn]]
    if end_share > 0:  # ... meeting the rest of its parent at an end
        bent &= _shape_measures(tree, parent, down, np.flatnonzero(bent), end=True)[1] >= end_share
    return bent


def branch_thinness(tree: LevelTree, parent: np.ndarray, down: list, nodes: np.ndarray) -> np.ndarray:
    """For each node of the tree, how many times longer than wide its cells are, bends and all: their number
    against the square of their width, ``m / w²``, with ``w = 4 d̄ - 3`` (at least 1), ``d̄`` the mean
    distance (in cells, between cell centres) from its cells to the nearest cell not in it (a Euclidean
    distance transform, :func:`scipy.ndimage.distance_transform_edt`, of the node's cells; a band
    ``2k + 1`` cells wide has ``d̄ = (k + 1)² / (2k + 1)``: 1, 1.33, 1.8 for 1, 3, 5 cells).

    A band ``w`` cells wide and ``L`` long, straight, curved or winding, reads about ``L / w``; a disc
    of radius ``ρ`` (``d̄ ≈ ρ/3 + ½``) about 2: a mean, not the largest distance, so that where two
    bands cross the width stays theirs. :func:`branch_elongation`'s ratio of variances reads a curved band — a ring's arc, a
    trail that turns — as round. Only ``nodes`` are measured (the others read 1): each in the box of its
    cells, as the component of the cells at or above its level that holds them (8 neighbours, as the tree's
    level sets): O(box area) each. ``parent`` and ``down`` as for :func:`branch_elongation`.

    Examples
    --------
    >>> from dpgeo.domain import StudyArea
    >>> from dpgeo.grid import Grid
    >>> from dpgeo.mechanisms.level_tree import build_level_tree
    >>> from dpgeo.mechanisms.level_select import _by_level
    >>> g = Grid(StudyArea.from_bbox((0, 0, 120, 120), "EPSG:32615", working_crs="EPSG:32615"), 10.0)
    >>> yy, xx = np.mgrid[0:12, 0:12]
    >>> arc = (np.abs(np.hypot(xx - 6.0, yy - 1.0) - 5) < 0.6).ravel()   # a half ring, one cell wide
    >>> t = build_level_tree(g, np.flatnonzero(arc), np.full(int(arc.sum()), 50), np.ones(int(arc.sum()), int))
    >>> par = np.r_[np.where(t.node_parent < 0, t.n_nodes, t.node_parent), t.n_nodes]
    >>> down = _by_level(t, ascending=False)
    >>> branch_thinness(t, par, down, np.arange(t.n_nodes)).tolist()          # 21 cells by 1
    [21.0]
    >>> np.round(branch_elongation(t, par, down), 1).tolist()                 # its variances: roundish
    [3.6]
    """
    return _shape_measures(tree, parent, down, nodes)[0]


def branch_shape(tree: LevelTree, parent: np.ndarray, down: list, nodes: np.ndarray):
    """For each node of the tree, its thinness (:func:`branch_thinness`) and how much of its length one path
    through it covers: the longest of the
    shortest paths between two of its cells (8 neighbours, diagonal steps √2: a geodesic diameter, found
    by two Dijkstra passes, :func:`scipy.sparse.csgraph.dijkstra`), plus one, against its length as a
    band, ``m / w`` (:func:`branch_thinness`).

    About 1 for one line, straight or bent (and for a round shape, about as much: with the thinness, it
    tells one line from a blob); ½ for two lines that cross, ⅔ for three arms from one point: a trail's
    pieces joined read 1, two trails crossing ½. Only ``nodes`` are measured (the others read 1 and 1).

    Examples
    --------
    >>> from dpgeo.domain import StudyArea
    >>> from dpgeo.grid import Grid
    >>> from dpgeo.mechanisms.level_tree import build_level_tree
    >>> from dpgeo.mechanisms.level_select import _by_level
    >>> g = Grid(StudyArea.from_bbox((0, 0, 210, 210), "EPSG:32615", working_crs="EPSG:32615"), 10.0)
    >>> cross = np.zeros((21, 21), bool); cross[10, :] = cross[:, 10] = True
    >>> ids = np.flatnonzero(cross.ravel())
    >>> t = build_level_tree(g, ids, np.full(ids.size, 50), np.ones(ids.size, int))
    >>> par = np.r_[np.where(t.node_parent < 0, t.n_nodes, t.node_parent), t.n_nodes]
    >>> thin, share = branch_shape(t, par, _by_level(t, ascending=False), np.arange(t.n_nodes))
    >>> np.round(thin, 1).tolist(), np.round(share, 2).tolist()
    ([37.9], [0.53])
    """
    return _shape_measures(tree, parent, down, nodes, path=True)


def _mask_graph(mask: np.ndarray):
    """The cells of a mask as a graph (8 neighbours, diagonal steps √2) and each cell's index in it."""
    h, w = mask.shape
    pos = np.full(mask.shape, -1, dtype=np.int64)
    yy, xx = np.nonzero(mask)
    pos[yy, xx] = np.arange(yy.size)
    rows, cols, wts = [], [], []
    for dy, dx in ((0, 1), (1, 0), (1, 1), (1, -1)):
        y2, x2 = yy + dy, xx + dx
        ok = (y2 < h) & (x2 >= 0) & (x2 < w)
        ok[ok] = mask[y2[ok], x2[ok]]
        rows.append(pos[yy[ok], xx[ok]])
        cols.append(pos[y2[ok], x2[ok]])
        wts.append(np.full(int(ok.sum()), np.hypot(dx, dy)))
    g = coo_matrix((np.concatenate(wts), (np.concatenate(rows), np.concatenate(cols))),
                   shape=(yy.size, yy.size)).tocsr()
    return g, pos


def _geodesic_diameter(mask: np.ndarray) -> float:
    """The longest shortest path (8 neighbours, diagonal √2) between two cells of a connected mask."""
    from scipy.sparse.csgraph import dijkstra

    g, _ = _mask_graph(mask)
    d = dijkstra(g, directed=False, indices=0)
    d = dijkstra(g, directed=False, indices=int(np.argmax(np.where(np.isfinite(d), d, -1))))
    return float(np.max(d[np.isfinite(d)]))


def _shape_measures(tree: LevelTree, parent: np.ndarray, down: list, nodes: np.ndarray, path: bool = False,
                    hole_cells: int | None = None, end: bool = False):
    """:func:`branch_thinness` and (with ``path``) the path share of :func:`branch_shape`, of ``nodes`` (1 elsewhere);
    with ``end``, instead of the path share, the end share of :func:`bent_ridges`."""
    from scipy import ndimage
    from scipy.sparse.csgraph import dijkstra

    hole_cells = THIN_HOLE_CELLS if hole_cells is None else hole_cells
    nn = tree.n_nodes
    out = np.ones(nn)
    share = np.ones(nn)
    nodes = np.asarray(nodes, dtype=np.int64)
    if nodes.size == 0 or tree.cell_id.size == 0:
        return out, share
    nx = tree.grid.nx
    gx, gy = tree.cell_id % nx, tree.cell_id // nx
    lo_x, lo_y = np.full(nn + 1, np.iinfo(np.int64).max), np.full(nn + 1, np.iinfo(np.int64).max)
    hi_x, hi_y = np.full(nn + 1, -1), np.full(nn + 1, -1)
    np.minimum.at(lo_x, tree.cell_node, gx)
    np.minimum.at(lo_y, tree.cell_node, gy)
    np.maximum.at(hi_x, tree.cell_node, gx)
    np.maximum.at(hi_y, tree.cell_node, gy)
    rep = np.full(nn + 1, -1, dtype=np.int64)  # one cell of each node's subtree
    rep[tree.cell_node[::-1]] = np.arange(tree.cell_id.size)[::-1]
    for grp in down:  # children before parents
        for arr, f in ((lo_x, np.minimum), (lo_y, np.minimum), (hi_x, np.maximum), (hi_y, np.maximum)):
            f.at(arr, parent[grp], arr[grp])
        has = rep[grp] >= 0
        rep[parent[grp][has]] = np.where(rep[parent[grp][has]] >= 0, rep[parent[grp][has]], rep[grp][has])
    x0, y0 = int(gx.min()), int(gy.min())
    raster = np.full((int(gy.max()) - y0 + 3, int(gx.max()) - x0 + 3), -np.inf)  # a margin of one empty cell
    raster[gy - y0 + 1, gx - x0 + 1] = tree.value
    level = tree.thresholds[tree.node_level].astype(float)
    eight = np.ones((3, 3), dtype=bool)
    def component(j, ys, xs):  # node j's cells in the crop
        lab, _ = ndimage.label(raster[ys, xs] >= level[j], structure=eight)
        c = rep[j]
        return lab == lab[int(gy[c]) - y0 + 1 - ys.start, int(gx[c]) - x0 + 1 - xs.start]

    for i in nodes[rep[nodes] >= 0]:
        box = parent[i] if end and parent[i] < nn else i  # with end: the parent's box, which holds both
        ys = slice(int(lo_y[box]) - y0, int(hi_y[box]) - y0 + 3)
        xs = slice(int(lo_x[box]) - x0, int(hi_x[box]) - x0 + 3)
        mine = component(i, ys, xs)
        if hole_cells > 0:  # small holes (the crop's margin keeps the outside one piece) are the noise's
            holes, _ = ndimage.label(~mine)
            size = np.bincount(holes.ravel())
            size[holes[0, 0]] = hole_cells + 1
            mine |= (size <= hole_cells)[holes]
        width = max(4.0 * ndimage.distance_transform_edt(mine)[mine].mean() - 3.0, 1.0)
        out[i] = mine.sum() / width ** 2
        if path:
            share[i] = (_geodesic_diameter(mine) + 1.0) * width / mine.sum()
        elif end and box != i:  # how far into the branch it reaches from where it meets the rest of its parent
            touch = mine & ndimage.binary_dilation(component(box, ys, xs) & ~mine, structure=eight)
            if touch.any():
                g, pos = _mask_graph(mine)
                d = dijkstra(g, directed=False, indices=pos[touch], min_only=True)
                share[i] = (float(np.max(d[np.isfinite(d)])) + 1.0) * width / mine.sum()
    return out, share


def deep_dips(tree: LevelTree, parent: np.ndarray, down: list, start_node: np.ndarray, par: np.ndarray,
              birth: np.ndarray, peak: np.ndarray, ratio: float, elongation: float = DEEP_DIP_ELONGATION,
              thinness: float | None = DEEP_DIP_THINNESS, raw: np.ndarray | None = None,
              only: np.ndarray | None = None) -> np.ndarray:
    """For each condensed-tree entry, whether all its child entries are compact groups that rise high above
    where they split off: each child's peak at least ``1 / ratio`` times the level it splits off at, and its
    cells round (:func:`branch_elongation` below ``elongation``) and compact (:func:`branch_thinness`
    below ``thinness``).

    ``start_node`` is each entry's first node of the tree, ``par`` each entry's parent entry (-1: none),
    ``birth`` the level each entry splits off at and ``peak`` each node's peak (the levels of
    :func:`~dpgeo.mechanisms.level_select.select_clusters`); ``parent`` and ``down`` as for
    :func:`branch_elongation`; ``raw`` every node's ratio of variances if already known
    (:func:`branch_elongation`'s ``raw``). An entry without children reads False; with ``only`` (a mask
    of the entries), so does every entry outside it — the thinness, a distance transform for each child,
    is measured only for the children of entries inside it that pass the other tests. Such a parent is two or more places
    whose density falls below half of theirs between them (``ratio`` 0.5; ``thinness`` None: the other tests
    alone) — a reader sees them apart,
    however much the parent's long life below the split weighs in its excess of mass: the smoothed
    levels' range from the floor to the split is wide, from the split to a group's peak narrow.

    Examples
    --------
    >>> from dpgeo.domain import StudyArea
    >>> from dpgeo.grid import Grid
    >>> from dpgeo.mechanisms.level_tree import build_level_tree
    >>> from dpgeo.mechanisms.level_select import _by_level
    >>> g = Grid(StudyArea.from_bbox((0, 0, 70, 30), "EPSG:32615", working_crs="EPSG:32615"), 10.0)
    >>> v = np.array([[30, 60, 30, 10, 30, 60, 30]] * 3).ravel()   # two 3x3 groups, a low column between
    >>> t = build_level_tree(g, np.arange(21), v, np.ones(21, int))
    >>> par = np.r_[np.where(t.node_parent < 0, t.n_nodes, t.node_parent), t.n_nodes]
    >>> down = _by_level(t, ascending=False)
    >>> kids = np.flatnonzero(t.node_parent >= 0)
    >>> top = np.full(t.n_nodes + 1, 60.0)
    >>> starts = np.r_[kids, t.n_nodes]; entry_par = np.r_[np.full(kids.size, kids.size), -1]
    >>> birth = np.r_[np.full(kids.size, 10.0), 0.0]
    >>> deep_dips(t, par, down, starts, entry_par, birth, top, 0.5).tolist()
    [False, False, True]
    >>> deep_dips(t, par, down, starts, entry_par, np.r_[np.full(kids.size, 40.0), 0.0], top, 0.5).tolist()
    [False, False, False]
    """
    n = par.size
    out = np.zeros(n, dtype=bool)
    ch = np.flatnonzero(par >= 0)
    if ch.size == 0:
        return out
    nodes = start_node[ch]
    if raw is None:
        _, raw = branch_elongation(tree, parent, down, None, 0.0, raw=True)
    has_child = np.zeros(n, dtype=bool)
    has_child[par[ch]] = True
    bad = np.zeros(n, dtype=bool)
    np.logical_or.at(bad, par[ch], (birth[ch] > ratio * peak[nodes]) | (raw[nodes] >= elongation))
    if only is not None:
        bad |= ~np.asarray(only, dtype=bool)
    look = ~bad[par[ch]]  # the thinness (a distance transform each) only where the rest passes
    if thinness is not None and look.any():
        thin = branch_thinness(tree, parent, down, nodes[look])
        np.logical_or.at(bad, par[ch][look], thin[nodes[look]] >= thinness)
    return has_child & ~bad
