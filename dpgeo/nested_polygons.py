"""The polygons of nested sets of grid cells (the tree of density levels), all at once.

Each entry ``e`` of a tree of cell sets covers the cells whose own (deepest)
entry is ``e`` or lies below ``e``. :func:`nested_cell_polygons` draws every
entry's region in one pass over the cells, with numpy, instead of one union
per entry (in which the cells of a deep entry were drawn again for each of its
ancestors):

1. A unit edge between two cells (or a cell and the outside) lies on the
   boundary of entry ``e`` iff exactly one of its two cells is in ``e``'s
   region: iff ``e`` lies on the path from one cell's entry up to (not
   including) the lowest entry the two have in common. The edges are listed
   once, and each is handed to the entries on those two paths, directed so
   that the region lies on its left.
2. The collinear unit edges of one entry, side by side on one grid line, are
   joined into one segment (a polygon keeps only its corners).
3. Each segment is followed by the one of the same entry that starts where it
   ends. Where two parts of a region touch at a corner (four boundary edges
   meet), the turn towards the region is taken, which keeps parts that touch
   only at a corner apart; where this makes one ring pass a corner twice, the
   other turn is taken there, which cuts it into two rings touching at that
   corner (a valid shell and hole, or two holes). The rings are the cycles of
   this successor; they are put in order by pointer jumping.
4. A ring that turns counter-clockwise is a shell, one that turns clockwise a
   hole; a hole belongs to the smallest shell of its entry that contains a
   cell on its inner side.

Everything is exact (integer cell corners, then ``origin + corner × width``,
as :func:`dpgeo.polygons.cluster_polygons` places them), and the point set of
each polygon is that of the union of its cells. Work and memory are linear in
the number of cells and in the length of the boundaries drawn (times the
logarithm of the longest ring).
"""

from __future__ import annotations

import numpy as np
import shapely
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

__all__ = ["RASTER_MAX_CELLS", "nested_cell_polygons", "subtree_sums"]

# directions of a boundary segment (the region on its left): 0 east, 1 north, 2 west, 3 south


def subtree_sums(values, entry, parent, n) -> np.ndarray:
    """For each entry, the sum of ``values`` over the cells of its region (its own and its descendants').

    ``parent[e]`` is the parent entry (-1: none), and children come before
    their parents (``parent[e] > e``), as in the condensed tree.

    Examples
    --------
    >>> subtree_sums(np.ones(5, int), np.array([0, 0, 1, 2, 2]), np.array([2, 2, -1]), 3).tolist()
    [2, 1, 5]
    """
    out = np.bincount(np.asarray(entry, dtype=np.int64), weights=None if values is None else values,
                      minlength=n)
    out = out.astype(np.int64) if values is None or np.asarray(values).dtype.kind in "iub" else out
    par = np.asarray(parent, dtype=np.int64)
    for e in range(n):  # children first: one pass
        if par[e] >= 0:
            out[par[e]] += out[e]
    return out


def _depths(parent: np.ndarray) -> np.ndarray:
    """Depth of each entry (0 for a top entry); parents have larger indices than their children."""
    n = parent.size
    depth = np.zeros(n, dtype=np.int64)
    for e in range(n - 1, -1, -1):
        if parent[e] >= 0:
            depth[e] = depth[parent[e]] + 1
    return depth


#: Trees whose cells span at most this many grid cells (bounding box) are read as a raster (4 bytes a cell).
RASTER_MAX_CELLS = 1 << 24


def _unit_edges(cell_id, entry, nx, ny, outside):
    """Every unit edge with a cell of the tree on at least one side and different entries on its two
    sides: ``(kind, x, y, a, b)`` — kind 0 the vertical edge from corner (x, y) to (x, y + 1) between
    cells ``a`` (west) and ``b`` (east), kind 1 the horizontal edge from (x, y) to (x + 1, y) between
    ``a`` (south) and ``b`` (north); ``a``/``b`` are entries, ``outside`` for no cell of the tree."""
    ix, iy = cell_id % nx, cell_id // nx
    x0, y0 = int(ix.min()), int(iy.min())
    w, h = int(ix.max()) - x0 + 1, int(iy.max()) - y0 + 1
    if (w + 2) * (h + 2) <= RASTER_MAX_CELLS:  # the bounding box as a raster, one cell of outside around it
        r = np.full((h + 2, w + 2), outside, dtype=np.int32 if outside < (1 << 31) else np.int64)
        r[iy - y0 + 1, ix - x0 + 1] = entry
        out = []
        for kind, a, b in ((0, r[1:-1, :-1], r[1:-1, 1:]), (1, r[:-1, 1:-1], r[1:, 1:-1])):
            ey, ex = np.nonzero(a != b)
            out.append((kind, ex.astype(np.int64) + x0, ey.astype(np.int64) + y0,
                        a[ey, ex].astype(np.int64), b[ey, ex].astype(np.int64)))
        return out
    out = []  # a sparse tree on a large grid: neighbours by binary search
    for kind, step, at_edge in ((0, 1, ix == nx - 1), (1, nx, iy == ny - 1)):
        nb = cell_id + step
        pos = np.minimum(np.searchsorted(cell_id, nb), cell_id.size - 1)
        has = (cell_id[pos] == nb) & ~at_edge
        other = np.where(has, entry[pos], outside)
        # the far side of every cell (its neighbour's entry, or the outside) ...
        fx, fy = (ix + 1, iy) if kind == 0 else (ix, iy + 1)
        keep = other != entry
        out.append((kind, fx[keep], fy[keep], entry[keep], other[keep]))
        # ... and its near side where no cell of the tree lies there
        prev = cell_id - step
        pos = np.minimum(np.searchsorted(cell_id, prev), cell_id.size - 1)
        near_edge = (ix == 0) if kind == 0 else (iy == 0)
        alone = ~((cell_id[pos] == prev) & ~near_edge)
        out.append((kind, ix[alone], iy[alone], np.full(int(alone.sum()), outside), entry[alone]))
    return out


def _incidences(edges, parent, depth, n):
    """``(entry, direction, corner x, corner y)`` of every unit edge on the boundary of every entry."""
    up = np.r_[np.where(parent < 0, n, parent), n]  # the outside (n) sits above every top entry
    dep = np.r_[depth, -1]
    node, dirs, sx, sy = [], [], [], []
    for kind, x, y, a, b in edges:
        # the region on the left: a vertical edge goes north when its west cell is inside, south when its
        # east cell is; a horizontal one west when its south cell is inside, east when its north cell is
        d_a, d_b = (1, 3) if kind == 0 else (2, 0)
        start_a = (x, y) if kind == 0 else (x + 1, y)
        start_b = (x, y + 1) if kind == 0 else (x, y)
        idx = np.arange(a.size)
        u, v = a.copy(), b.copy()
        while idx.size:
            du, dv = dep[u], dep[v]
            lift_u, lift_v = du >= dv, dv >= du
            for lift, w, d, (px, py) in ((lift_u, u, d_a, start_a), (lift_v, v, d_b, start_b)):
                k = idx[lift]
                node.append(w[lift])
                dirs.append(np.full(k.size, d, dtype=np.int64))
                sx.append(px[k])
                sy.append(py[k])
            u = np.where(lift_u, up[u], u)
            v = np.where(lift_v, up[v], v)
            go = u != v
            idx, u, v = idx[go], u[go], v[go]
    cat = (lambda parts: np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64))
    return cat(node), cat(dirs), cat(sx), cat(sy)


def _argsort_keys(keys) -> np.ndarray:
    """``numpy.lexsort(keys)`` (the last key first) of non-negative integers, as one argsort of a packed
    int64 key when their ranges fit in 63 bits."""
    packed = np.zeros(keys[0].size, dtype=np.int64)
    bits = 0
    for k in keys:
        top = int(k.max()) + 1 if k.size else 1
        if bits + top.bit_length() > 63:
            return np.lexsort(keys)
        packed |= k.astype(np.int64) << bits
        bits += top.bit_length()
    return np.argsort(packed, kind="stable")


def _segments(node, d, sx, sy, bits):
    """Collinear unit edges of one entry and direction, end to end on one grid line, as one segment:
    ``(entry, direction, start x, start y, end x, end y)``; and the vertical unit edges, sorted by entry,
    row and column: ``(key, segment)`` (see :func:`_row_key`)."""
    horizontal = (d % 2) == 0
    line = np.where(horizontal, sy, sx)
    # the lower end of a unit edge along its line
    lo = np.where(horizontal, np.where(d == 0, sx, sx - 1), np.where(d == 1, sy, sy - 1))
    order = _argsort_keys((lo, line, d, node))
    node, d, line, lo = node[order], d[order], line[order], lo[order]
    brk = np.ones(node.size, dtype=bool)
    brk[1:] = (node[1:] != node[:-1]) | (d[1:] != d[:-1]) | (line[1:] != line[:-1]) | (lo[1:] != lo[:-1] + 1)
    first = np.flatnonzero(brk)
    last = np.r_[first[1:], node.size] - 1
    vertical = np.flatnonzero(d % 2 == 1)
    vkey = _row_key(node[vertical], lo[vertical], line[vertical], bits)
    vseg = np.cumsum(brk)[vertical] - 1
    by_row = np.argsort(vkey, kind="stable")
    vkey, vseg = vkey[by_row], vseg[by_row]
    node, d, line = node[first], d[first], line[first]
    pmin, pmax = lo[first], lo[last] + 1
    forward = (d == 0) | (d == 1)
    p0, p1 = np.where(forward, pmin, pmax), np.where(forward, pmax, pmin)
    horizontal = (d % 2) == 0
    return (node, d, np.where(horizontal, p0, line), np.where(horizontal, line, p0),
            np.where(horizontal, p1, line), np.where(horizontal, line, p1)), (vkey, vseg)


def _row_key(node, y, x, bits):
    """One int64 key per (entry, row, column), in that order; ``bits`` of a column and of a row."""
    return (node << (2 * bits)) | (y << bits) | x


def _key_bits(n, nx, ny):
    """Bits of a corner's column or row in a packed key, or None if the keys of ``n`` entries on an ``nx``
    by ``ny`` grid would not fit in an int64."""
    bits = (max(nx, ny) + 2).bit_length()
    return bits if (n + 1).bit_length() + 2 * bits + 2 <= 63 else None


def _cycles(succ: np.ndarray) -> np.ndarray:
    """The cycle of each index of the permutation ``succ``, numbered in the order of their smallest index."""
    s = succ.size
    g = csr_matrix((np.ones(s, dtype=np.int8), succ, np.arange(s + 1)), shape=(s, s))
    return connected_components(g, directed=True, connection="weak")[1].astype(np.int64)


def _trace(node, d, sx, sy, ex, ey, nx):
    """The segments in ring order: ``(order, offsets)`` (the segments' indices ring after ring, and where
    each ring starts in ``order``), or None if a ring would pass a corner twice."""
    s = node.size
    nv = nx + 1
    corner = sy * nv + sx
    by = _argsort_keys((d, corner, node))  # segments by entry, then corner where they start, then direction
    span = int((max(int(sy.max()), int(ey.max())) + 1) * nv)
    start_key = node[by] * span + corner[by]
    end_key = node[by] * span + ey[by] * nv + ex[by]
    d_by = d[by]
    first = np.searchsorted(start_key, end_key)
    second = np.minimum(first + 1, s - 1)
    two = (second > first) & (start_key[second] == end_key)
    # where two segments of an entry leave a corner (its region touches itself there): the left turn
    succ = np.where(two & (d_by[second] == (d_by + 1) % 4), second, first)
    ring = _cycles(succ)
    pinch = np.flatnonzero(start_key[1:] == start_key[:-1])  # the first of the two segments leaving a corner
    if pinch.size:
        pred = np.empty(s, dtype=np.int64)
        pred[succ] = np.arange(s)
        i1, i2 = pred[pinch], pred[pinch + 1]
        same = ring[i1] == ring[i2]
        if same.any():  # one ring passes this corner twice: the other turn there cuts it into two
            a, b = i1[same], i2[same]
            succ[a], succ[b] = succ[b], succ[a]
            ring = _cycles(succ)
            if (ring[i1] == ring[i2]).any():
                return None
    # the position of each segment in its ring, by pointer jumping from the ring's first segment
    n_rings = int(ring.max()) + 1
    head = np.flatnonzero(np.r_[True, ring[1:] > np.maximum.accumulate(ring[:-1])])
    pred = np.empty(s, dtype=np.int64)
    pred[succ] = np.arange(s)
    tail = pred[head]
    nxt = np.r_[succ, s]
    nxt[tail] = s
    dist = np.ones(s + 1, dtype=np.int64)
    dist[tail] = 0
    dist[s] = 0
    act = np.flatnonzero(nxt[:s] != s)
    while act.size:
        step = nxt[act]
        dist[act] += dist[step]
        nxt[act] = nxt[step]
        act = act[nxt[act] != s]
    length = dist[head] + 1
    offsets = np.zeros(n_rings + 1, dtype=np.int64)
    np.cumsum(length, out=offsets[1:])
    place = offsets[ring] + (length[ring] - 1 - dist[:s])
    order = np.empty(s, dtype=np.int64)
    order[place] = by
    return order, offsets


def _ragged_take(offsets, rings):
    """Indices of the items of ``rings`` (in that order) in a ragged array with ``offsets``; their lengths."""
    lens = offsets[rings + 1] - offsets[rings]
    starts = np.repeat(offsets[rings] - np.r_[0, np.cumsum(lens)[:-1]], lens)
    return starts + np.arange(int(lens.sum())), lens


def _assign_holes(holes, is_shell, ring_of_seg, node, d, sx, sy, ey, offsets, vkey, vseg, bits):
    """For each hole ring, the shell of the polygon it is a hole of.

    From a hole's westmost vertical edge (the region lies west of it), the
    first boundary edge of the same entry further west in that row bounds the
    same part of the region (the cells in between are in it): it is that
    part's shell, or another of its holes, whose westmost edge lies further
    west still. Following these links ends at the shell.
    """
    vert = d % 2 == 1
    x = np.where(vert, sx, np.iinfo(np.int64).max)
    xmin = np.minimum.reduceat(x, offsets[:-1])
    ring = np.repeat(np.arange(offsets.size - 1), np.diff(offsets))
    at = np.flatnonzero(vert & (sx == xmin[ring]))
    at = at[np.r_[True, ring[at][1:] != ring[at][:-1]]]  # one westmost vertical segment per ring
    at = at[~is_shell[ring[at]]]
    h = ring[at]
    j = np.searchsorted(vkey, _row_key(node[at], np.minimum(sy[at], ey[at]), sx[at], bits)) - 1
    link = np.arange(offsets.size - 1)
    link[h] = ring_of_seg[vseg[j]]
    while True:  # pointer jumping to the shells
        nxt = link[link]
        if np.array_equal(nxt, link):
            return link[holes]
        link = nxt


def nested_cell_polygons(grid, cell_id, entry, parent):
    """The region of every entry of a tree of cell sets, as MultiPolygons in the working CRS.

    Parameters
    ----------
    grid : Grid
    cell_id : numpy.ndarray
        Distinct flat ids of the cells of the tree (sorted, or sorted here).
    entry : numpy.ndarray
        The deepest entry of each cell (0..n-1); an entry's region is its own
        cells and those of every entry below it.
    parent : numpy.ndarray
        The parent of each entry (-1: none); children come before their
        parents (``parent[e] > e``).

    Returns
    -------
    numpy.ndarray
        ``n`` valid MultiPolygons (not clipped to the study area), each the
        union of its entry's cells as a point set: parts that touch at a corner
        are separate polygons, a hole may touch its shell or another hole at a
        corner, and only the corners of each outline are kept.

    Examples
    --------
    >>> from dpgeo.domain import StudyArea
    >>> from dpgeo.grid import Grid
    >>> g = Grid(StudyArea.from_bbox((0, 0, 40, 30), "EPSG:32615", working_crs="EPSG:32615"), 10.0)
    >>> cells = np.array([0, 1, 2, 4, 5, 6])          # two rows of three cells
    >>> polys = nested_cell_polygons(g, cells, np.array([1, 0, 1, 1, 1, 1]), np.array([1, -1]))
    >>> [p.wkt for p in polys]
    ['MULTIPOLYGON (((10 0, 20 0, 20 10, 10 10, 10 0)))', 'MULTIPOLYGON (((0 0, 30 0, 30 20, 0 20, 0 0)))']
    """
    cell_id = np.asarray(cell_id, dtype=np.int64)
    entry = np.asarray(entry, dtype=np.int64)
    parent = np.asarray(parent, dtype=np.int64)
    n = parent.size
    if n == 0 or cell_id.size == 0:
        return np.array([shapely.MultiPolygon()] * n, dtype=object)
    if cell_id.size > 1 and not (cell_id[1:] > cell_id[:-1]).all():
        by = np.argsort(cell_id, kind="stable")
        cell_id, entry = cell_id[by], entry[by]
    nx, ny = int(grid.nx), int(grid.ny)
    bits = _key_bits(n, nx, ny)
    if bits is None:  # pragma: no cover - some 2**20 entries on a grid of 2**20 cells a side
        return _per_entry(grid, cell_id, entry, parent)
    edges = _unit_edges(cell_id, entry, nx, ny, outside=n)
    node, d, sx, sy = _incidences(edges, parent, _depths(parent), n)
    del edges
    (node, d, sx, sy, ex, ey), (vkey, vseg) = _segments(node, d, sx, sy, bits)
    traced = _trace(node, d, sx, sy, ex, ey, nx)
    if traced is None:  # pragma: no cover - a ring that still passes a corner twice: each entry on its own
        return _per_entry(grid, cell_id, entry, parent)
    order, offsets = traced
    node, d, sx, sy, ex, ey = node[order], d[order], sx[order], sy[order], ex[order], ey[order]
    ring_of_seg = np.empty(order.size, dtype=np.int64)
    ring_of_seg[order] = np.repeat(np.arange(offsets.size - 1), np.diff(offsets))
    del order
    n_rings = offsets.size - 1
    head = offsets[:-1]
    ring_node = node[head]
    # twice the signed area of each ring (exact integers): positive for a shell, negative for a hole
    area2 = np.add.reduceat(sx * ey - ex * sy, head)
    is_shell = area2 > 0
    holes = np.flatnonzero(~is_shell)
    owner = np.arange(n_rings)
    if holes.size:
        owner[holes] = _assign_holes(holes, is_shell, ring_of_seg, node, d, sx, sy, ey, offsets, vkey, vseg, bits)
    del vkey, vseg, ring_of_seg
    # rings by entry, then polygon (its shell), the shell first; each ring closed by its first corner
    ro = np.lexsort((~is_shell, owner, ring_node))
    take, lens = _ragged_take(offsets, ro)
    closed = lens + 1
    coff = np.r_[0, np.cumsum(closed)]
    pos = np.arange(take.size) + np.repeat(np.arange(ro.size), lens)
    cx = np.empty(int(coff[-1]), dtype=float)
    cy = np.empty_like(cx)
    w = float(grid.cell_m)
    cx[pos], cy[pos] = sx[take], sy[take]
    cx[coff[1:] - 1], cy[coff[1:] - 1] = sx[offsets[ro]], sy[offsets[ro]]
    coords = np.column_stack([grid.origin_x + cx * w, grid.origin_y + cy * w])
    shell_sorted = is_shell[ro]
    poly_off = np.r_[np.flatnonzero(shell_sorted), ro.size]
    polys_per_node = np.bincount(ring_node[ro][shell_sorted], minlength=n)
    multi_off = np.r_[0, np.cumsum(polys_per_node)]
    return shapely.from_ragged_array(shapely.GeometryType.MULTIPOLYGON, coords, (coff, poly_off, multi_off))


def _per_entry(grid, cell_id, entry, parent):  # pragma: no cover - see nested_cell_polygons
    """Each entry's region as GEOS's union of its cells' boxes (slow; valid)."""
    n = parent.size
    order = np.argsort(entry, kind="stable")
    bounds = np.searchsorted(entry[order], np.arange(n + 1))
    region = [None] * n
    out = []
    for e in range(n):
        parts = [cell_id[order[bounds[e]:bounds[e + 1]]]] + [region[c] for c in np.flatnonzero(parent == e)]
        region[e] = np.concatenate(parts)
        g = shapely.union_all(grid.cell_boxes(region[e])) if region[e].size else None
        polys = [] if g is None else [p for p in shapely.get_parts(g) if p.geom_type == "Polygon"]
        out.append(shapely.MultiPolygon(polys))
    return np.asarray(out, dtype=object)
