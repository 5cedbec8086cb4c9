"""Pieces of one corridor: chosen clusters that meet end to end along a line are one cluster.

Part of :mod:`dpgeo.mechanisms.levels` (post-processing of one released
histogram; no budget), used by :func:`dpgeo.mechanisms.level_select.select_clusters`.
A street whose stops gather at its crossings is, in the tree of density
levels, a row of peaks that join each other only at a level where the
neighbourhoods beside the street have joined too: no branch of the tree is the
street, and the dip rule rightly cuts it wherever it falls deeply. Read as a
map, though, the pieces lie end to end — each longer along the line than
across it, in one line with each other — and a reader takes them for one
corridor with hot spots along it. :func:`chain_merges` joins such pieces where
their grown cells meet, not too far below their peaks; round clusters side by
side, long ones side by side, and pieces across a deep gap stay apart.
"""

from __future__ import annotations

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from .level_tree import BOX_OFFSETS, adjacent_pairs

__all__ = ["CHAIN_ELONGATION", "CHAIN_MEET_RATIO", "CHAIN_MIN_PIECE_CELLS", "CHAIN_PIECE_ELONGATION", "END_TO_END",
           "chain_merges", "renumber_groups"]

#: Two pieces are one corridor only if together they vary at least this many times as much along their
#: long axis as across it (a ratio of variances, as the ridge rule's :data:`~dpgeo.mechanisms.levels.RIDGE_ELONGATION`).
CHAIN_ELONGATION = 6.0
#: ... and each piece on its own varies at least this many times as much along that axis as across it
#: (a round hot spot beside another is two places, not a corridor).
CHAIN_PIECE_ELONGATION = 3.0
#: ... and their centres lie at least this many times the sum of their s.d. along the axis apart
#: (end to end: two equal bars end to end lie √3 ≈ 1.73 times apart, side by side 0).
END_TO_END = 1.2
#: ... and each piece is at least this many cells long (its long axis as a uniform bar's length, √(12 λ)):
#: the core of a small round group, two or three cells, is as "elongated" as its cells happen to fall.
CHAIN_MIN_PIECE_CELLS = 4.0
#: ... and they meet (cells of the two, or of a piece between, side by side) at a density at least this
#: share of the lower of their peaks: a corridor broken by a deep gap stays two clusters.
CHAIN_MEET_RATIO = 0.25


def _moments(cell_id: np.ndarray, label: np.ndarray, nx: int, k: int) -> np.ndarray:
    """Per label 0..k: count, Σx, Σy, Σx², Σy², Σxy of the cells' centres (in cells, centred)."""
    gx = (cell_id % nx).astype(float)
    gy = (cell_id // nx).astype(float)
    if gx.size:
        gx -= gx.mean()
        gy -= gy.mean()
    return np.stack([np.bincount(label, weights=w, minlength=k + 1)
                     for w in (np.ones_like(gx), gx, gy, gx * gx, gy * gy, gx * gy)], axis=1)


def _covariance(m: np.ndarray):
    n = np.maximum(m[..., 0], 1.0)
    mx, my = m[..., 1] / n, m[..., 2] / n
    vxx = m[..., 3] / n - mx * mx + 1.0 / 12  # each cell counts its own extent
    vyy = m[..., 4] / n - my * my + 1.0 / 12
    vxy = m[..., 5] / n - mx * my
    return vxx, vyy, vxy


def renumber_groups(comp: np.ndarray) -> np.ndarray:
    """New ids 0..g for labels 0..k grouped by ``comp`` (label 0 stays 0), in the order of each group's first label.

    Examples
    --------
    >>> renumber_groups(np.array([0, 2, 1, 2, 1])).tolist()
    [0, 1, 2, 1, 2]
    """
    k = comp.size - 1
    new = np.zeros(k + 1, dtype=np.int64)
    if k < 1:
        return new
    first = np.full(int(comp.max()) + 1, k + 1)
    np.minimum.at(first, comp[1:], np.arange(1, k + 1))
    uniq = np.unique(comp[1:])
    rank = np.argsort(np.argsort(first[uniq]))
    new[1:] = rank[np.searchsorted(uniq, comp[1:])] + 1
    return new


def chain_merges(grid, cell_id: np.ndarray, label: np.ndarray, core: np.ndarray, value=None, *,
                 elongation: float = CHAIN_ELONGATION, piece_elongation: float = CHAIN_PIECE_ELONGATION,
                 min_piece_cells: float = CHAIN_MIN_PIECE_CELLS, meet_ratio: float = CHAIN_MEET_RATIO,
                 offsets=BOX_OFFSETS) -> np.ndarray:
    """New ids of the labels (index 0: none) after joining the pieces of corridors.

    Two clusters whose (grown) cells are neighbours are pieces of one corridor
    when the centres of their ``core`` cells together vary at least
    ``elongation`` times as much along their long axis as across it (a ratio
    of variances, in cells, each cell counting its own extent), and each
    piece's own core varies at least ``piece_elongation`` times as much along
    that axis as across it, is at least ``min_piece_cells`` long, and the two lie end to end (their
    centres :data:`END_TO_END` times the sum of their s.d. apart along the axis, in one line across it),
    and they meet at a density (``value``, the best neighbouring pair of cells) at least ``meet_ratio``
    of the lower of their peaks: a corridor broken by a deep gap stays two clusters. Two such pieces with
    one or two clusters between them (a hot spot at a crossing, round or across the line) that lie
    between them along the line are joined with them, each end meeting a piece between at that density.
    Joins are transitive (a bending road joins piece by piece); the new ids keep the order of each
    group's first label. Post-processing of the chosen clusters and the released densities: no budget.

    Examples
    --------
    >>> from dpgeo.domain import StudyArea
    >>> from dpgeo.grid import Grid
    >>> g = Grid(StudyArea.from_bbox((0, 0, 120, 30), "EPSG:32615", working_crs="EPSG:32615"), 10.0)
    >>> ids = np.r_[12:17, 17:22]                          # two bars end to end in the middle row
    >>> lab = np.r_[np.ones(5, int), np.full(5, 2)]
    >>> chain_merges(g, ids, lab, np.ones(10, bool)).tolist()
    [0, 1, 1]
    >>> side = np.r_[12, 13, 24, 25, 14, 15, 26, 27]        # two 2x2 squares side by side: two places
    >>> chain_merges(g, side, np.r_[1, 1, 1, 1, 2, 2, 2, 2], np.ones(8, bool)).tolist()
    [0, 1, 2]
    """
    label = np.asarray(label, dtype=np.int64)
    k = int(label.max()) if label.size else 0
    ident = np.arange(k + 1)
    on = np.flatnonzero(label > 0)
    if k < 2 or on.size == 0:
        return ident
    a, b = adjacent_pairs(grid, cell_id[on], offsets)
    la, lb = label[on[a]], label[on[b]]
    meet = la != lb
    if not meet.any():
        return ident
    # where two pieces meet: the density of their best neighbouring pair of cells, against their peaks
    value = np.zeros(label.size) if value is None else np.asarray(value, dtype=float)
    peak = np.full(k + 1, -np.inf)
    np.maximum.at(peak, label[on], value[on])
    key = np.minimum(la[meet], lb[meet]) * (k + 1) + np.maximum(la[meet], lb[meet])
    at = np.minimum(value[on[a[meet]]], value[on[b[meet]]])
    order = np.argsort(key, kind="stable")
    key, at = key[order], at[order]
    keys, first = np.unique(key, return_index=True)
    meet_at = np.maximum.reduceat(at, first)

    def meeting(i, j):  # the density where clusters i and j meet (-inf where they do not)
        kk = np.minimum(i, j) * (k + 1) + np.maximum(i, j)
        pos = np.minimum(np.searchsorted(keys, kk), keys.size - 1)
        return np.where(keys[pos] == kk, meet_at[pos], -np.inf)

    pa, pb = keys // (k + 1), keys % (k + 1)
    core = np.asarray(core, dtype=bool) & (label > 0)
    m = _moments(cell_id[core], label[core], grid.nx, k)
    ok = _end_to_end(m, pa, pb, None, elongation, piece_elongation, min_piece_cells)
    ok &= meet_at >= meet_ratio * np.minimum(peak[pa], peak[pb])  # not across a deep gap
    # two pieces on either side of one or two others that meet them (a hot spot at a crossing, often
    # round or across the line): all are one corridor when the two lie end to end across them
    adj = coo_matrix((np.ones(pa.size), (pa, pb)), shape=(k + 1, k + 1)).tocsr()
    adj = ((adj + adj.T) > 0).astype(np.int64)
    end = _can_end(m, piece_elongation, min_piece_cells)  # only a long piece can be an end
    rows, cols = [pa[ok]], [pb[ok]]
    two = ((adj @ adj) > 0).astype(np.int64)
    three = ((two @ adj) > 0).astype(np.int64)
    for far, near in ((two, None), (three, two)):  # one piece between, then two
        q = far.tocoo()
        keep = (q.row < q.col) & end[q.row] & end[q.col]
        qa, qb = q.row[keep].astype(np.int64), q.col[keep].astype(np.int64)
        if qa.size == 0:
            continue
        closer = np.asarray(adj[qa, qb]).ravel() > 0
        if near is not None:
            closer |= np.asarray(near[qa, qb]).ravel() > 0
        qa, qb = qa[~closer], qb[~closer]
        if qa.size == 0:
            continue
        # the pieces between: on a shortest way through clusters that meet
        if near is None:
            hubs = [adj[i].multiply(adj[j]).indices for i, j in zip(qa, qb)]
        else:
            hubs = [np.union1d(adj[i].multiply(near[j]).indices, adj[j].multiply(near[i]).indices)
                    for i, j in zip(qa, qb)]
        hm = np.stack([m[h].sum(axis=0) for h in hubs])
        ok3 = _end_to_end(m, qa, qb, hm, elongation, piece_elongation, min_piece_cells)
        # each end meets a piece between at a density not far below the lower of the two ends' peaks
        floor = meet_ratio * np.minimum(peak[qa], peak[qb])
        for i in np.flatnonzero(ok3):
            h = hubs[i]
            ok3[i] = (meeting(np.full(h.size, qa[i]), h).max() >= floor[i]
                      and meeting(np.full(h.size, qb[i]), h).max() >= floor[i])
        for i in np.flatnonzero(ok3):
            rows.append(np.full(hubs[i].size + 1, qa[i]))
            cols.append(np.r_[qb[i], hubs[i]])
    rows, cols = np.concatenate(rows), np.concatenate(cols)
    if rows.size == 0:
        return ident
    g = coo_matrix((np.ones(rows.size), (rows, cols)), shape=(k + 1, k + 1))
    _, comp = connected_components(g, directed=False)
    return renumber_groups(comp)


def _can_end(m, piece_elongation, min_piece_cells):
    """Per label: long enough, and as much longer than wide along its own long axis, to be a corridor's end
    (a piece that passes :func:`_end_to_end`'s test along any axis passes this one)."""
    vxx, vyy, vxy = _covariance(m)
    half, root = (vxx + vyy) / 2, np.sqrt(((vxx - vyy) / 2) ** 2 + vxy ** 2)
    return ((m[:, 0] > 0) & (half + root >= piece_elongation * np.maximum(half - root, 1.0 / 12))
            & (12 * (half + root) >= min_piece_cells ** 2))


def _end_to_end(m, pa, pb, hub, elongation, piece_elongation, min_piece_cells):
    """Whether pieces ``pa`` and ``pb`` (with the moments ``hub`` of the pieces between them) lie end to end."""
    ok = (m[pa, 0] > 0) & (m[pb, 0] > 0)
    whole = m[pa] + m[pb] + (0 if hub is None else hub)
    vxx, vyy, vxy = _covariance(whole)
    half, root = (vxx + vyy) / 2, np.sqrt(((vxx - vyy) / 2) ** 2 + vxy ** 2)
    ok &= (half + root) >= elongation * np.maximum(half - root, 1.0 / 12)
    theta = 0.5 * np.arctan2(2 * vxy, vxx - vyy)  # the long axis of the pieces together
    c, s = np.cos(theta), np.sin(theta)

    def centre(p):
        n = np.maximum(m[p, 0], 1.0)
        mx, my = m[p, 1] / n, m[p, 2] / n
        return mx * c + my * s, -mx * s + my * c

    sd_along, sd_across, at = [], [], []
    for p in (pa, pb):
        pxx, pyy, pxy = _covariance(m[p])
        along = pxx * c * c + 2 * pxy * c * s + pyy * s * s
        across = pxx * s * s - 2 * pxy * c * s + pyy * c * c
        ok &= along >= piece_elongation * np.maximum(across, 1.0 / 12)
        ok &= 12 * along >= min_piece_cells ** 2  # long enough for its shape to mean anything
        sd_along.append(np.sqrt(along))
        sd_across.append(np.sqrt(across))
        at.append(centre(p))
    # end to end, not side by side: their centres lie apart along the axis (two bars end to end lie
    # √3 ≈ 1.7 times the sum of their s.d. apart, side by side 0) and in one line across it
    ok &= np.abs(at[0][0] - at[1][0]) >= END_TO_END * (sd_along[0] + sd_along[1])
    ok &= np.abs(at[0][1] - at[1][1]) <= sd_across[0] + sd_across[1] + 1.0
    if hub is not None:  # the pieces between lie between them along the line
        n = np.maximum(hub[:, 0], 1.0)
        h = (hub[:, 1] / n) * c + (hub[:, 2] / n) * s
        ok &= (h - at[0][0]) * (at[1][0] - h) > 0
    return ok
