"""From labelled cells to one (multi)polygon per cluster, with its noisy count.

All of this is post-processing of released (noisy) values and public
geometry: the union of a cluster's cells, clipped to the public study area,
its area in m², and ``dp_count`` — the sum of the cluster's released cell
counts, clipped at 0 — with a 95% interval from the known noise law.
"""

from __future__ import annotations

import numpy as np
import shapely
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

from .grid import Grid, area_m2
from .noise import sum_interval_halfwidth

__all__ = ["LAYER_COLUMNS", "cluster_polygons", "nested_cluster_polygons"]

#: Attribute columns of every cluster layer, in order.
LAYER_COLUMNS = ["cluster_id", "n_cells", "area_m2", "dp_count", "dp_count_low", "dp_count_high"]


def _union_cells(ix, iy) -> shapely.Geometry:
    """The union of grid cells ``(ix, iy)`` (integer cell indices) as a valid (Multi)Polygon, in cell units.

    The boundary of a set of grid cells is made of the unit edges that belong to exactly one of its
    cells; GEOS's polygonizer turns that linework into faces, and the faces that lie in a cell of the set
    are the union. This is exact (integer coordinates), linear after one sort, and always valid: two parts
    that touch at a corner stay two polygons (``coverage_union_all`` of the cell boxes made one ring that
    touches itself there, an invalid polygon, and took minutes on clusters of 10⁵ cells).
    """
    ix = np.asarray(ix, dtype=np.int64)
    iy = np.asarray(iy, dtype=np.int64)
    x0, y0 = int(ix.min()), int(iy.min())
    ix, iy = ix - x0, iy - y0
    span = int(max(ix.max(), iy.max())) + 2
    # a unit edge is keyed by its lower-left end; horizontal and vertical edges apart
    horiz = _edges_once(np.concatenate([iy * span + ix, (iy + 1) * span + ix]))
    vert = _edges_once(np.concatenate([ix * span + iy, (ix + 1) * span + iy]))
    hy, hx = np.divmod(horiz, span)
    vx, vy = np.divmod(vert, span)
    start = np.concatenate([np.stack([hx, hy], 1), np.stack([vx, vy], 1)])
    end = start + np.concatenate([np.tile([1, 0], (hx.size, 1)), np.tile([0, 1], (vx.size, 1))])
    lines = shapely.linestrings(np.stack([start, end], 1).astype(float))
    merged = shapely.get_parts(shapely.line_merge(shapely.multilinestrings(lines)))
    faces = shapely.get_parts(shapely.polygonize(merged))
    # a face is a part of the union or a hole in it: look up the cell of a point inside it
    inside = shapely.point_on_surface(faces)
    fx = np.floor(shapely.get_x(inside)).astype(np.int64)
    fy = np.floor(shapely.get_y(inside)).astype(np.int64)
    cells = np.sort(iy * span + ix)
    keys = fy * span + fx
    pos = np.minimum(np.searchsorted(cells, keys), cells.size - 1)
    kept = faces[cells[pos] == keys]
    union = kept[0] if kept.size == 1 else shapely.MultiPolygon(list(kept))
    return shapely.transform(union, lambda c: c + (x0, y0))


def _edges_once(keys: np.ndarray) -> np.ndarray:
    """The keys that occur exactly once (an edge shared by two cells of the set is inside the union)."""
    keys = np.sort(keys)
    if keys.size < 2:
        return keys
    dup = keys[1:] == keys[:-1]
    single = np.ones(keys.size, dtype=bool)
    single[1:] &= ~dup
    single[:-1] &= ~dup
    return keys[single]


def cluster_polygons(
    grid: Grid,
    cell_id: np.ndarray,
    label: np.ndarray,
    count: np.ndarray,
    *,
    q: float,
    theta: int | None = None,
    level: float = 0.95,
    clip: bool = True,
):
    """Build the cluster layer.

    Parameters
    ----------
    grid : Grid
    cell_id, label, count : numpy.ndarray
        Flat id, cluster id (1..k) and released noisy count of each cluster cell.
    q : float or None
        Noise decay of the released counts (for the interval). ``None``: the
        counts carry no per-cell noise (exact, or synthetic), and
        ``dp_count_low``/``dp_count_high`` are left empty (null).
    theta : int, optional
        Sparse-histogram threshold; a cell released as 0 may hold up to
        ``θ - 1 + |Z|`` points, which widens the upper end of the interval.
    level : float
        Coverage of the ``dp_count`` interval.
    clip : bool
        Clip polygons to the study area (cells on its edge stick out).

    Returns
    -------
    geopandas.GeoDataFrame
        Columns :data:`LAYER_COLUMNS` plus ``geometry`` (MultiPolygon), in
        the working CRS, one row per cluster, sorted by ``cluster_id``.

    Notes
    -----
    The interval for a cluster of ``n`` cells is ``[S - h, S + h]`` (upper end
    ``+ (θ-1)·n₀`` for ``n₀`` cells released as 0 by a sparse histogram),
    clipped at 0, where ``S`` is the sum of released counts and ``h`` the
    half-width with ``Pr[|sum of n noises| > h] <= 1 - level``. The interval
    is for the cluster's true count *given its cells*; it says nothing about
    the chance that a cell was wrongly included.
    """
    cell_id = np.asarray(cell_id, dtype=np.int64)
    label = np.asarray(label, dtype=np.int64)
    count = np.asarray(count, dtype=np.int64)
    k = int(label.max()) if label.size else 0
    order = np.argsort(label, kind="stable")
    lab_sorted = label[order]
    bounds = np.searchsorted(lab_sorted, np.arange(1, k + 2))
    cell_x, cell_y = grid.cell_xy(cell_id[order])
    cnt_sorted = count[order]
    w = float(grid.cell_m)

    def to_metres(c):  # cell units -> working CRS, as Grid.cell_boxes places a cell's corners
        return np.column_stack([grid.origin_x + c[:, 0] * w, grid.origin_y + c[:, 1] * w])

    geoms, n_cells, sums, zeros = [], [], [], []
    domain = grid.area.polygon
    do_clip = clip and not grid.area.is_rectangle
    if do_clip:
        shapely.prepare(domain)
    for c in range(k):
        a, b = bounds[c], bounds[c + 1]
        g = shapely.transform(_union_cells(cell_x[a:b], cell_y[a:b]), to_metres)
        if do_clip:
            g = shapely.intersection(g, domain)
        geoms.append(g)
        n_cells.append(b - a)
        sums.append(int(cnt_sorted[a:b].sum()))
        zeros.append(int((cnt_sorted[a:b] == 0).sum()))
    geoms = np.asarray(geoms, dtype=object) if geoms else np.zeros(0, dtype=object)
    if geoms.size:
        geoms = _to_multipolygon(geoms)
    return _layer(grid, geoms, np.asarray(n_cells, dtype=np.int64), np.asarray(sums, dtype=np.int64),
                  np.asarray(zeros, dtype=np.int64), q=q, theta=theta, level=level)


def nested_cluster_polygons(grid: Grid, cell_id, entry, parent, count, *, q: float, level: float = 0.95,
                            clip: bool = True):
    """The layer of :func:`cluster_polygons` for nested clusters: cluster ``e + 1`` holds the cells whose
    (deepest) entry is ``e`` or lies below ``e``.

    The same rows, attributes and polygons (as point sets) as
    ``cluster_polygons(grid, cells, labels, counts)`` with every entry's cells
    listed under its label, drawn for all entries at once
    (:func:`dpgeo.nested_polygons.nested_cell_polygons`): each cell is read
    once, and only the entries with a cell on the study area's boundary are
    clipped to it.

    Parameters
    ----------
    grid : Grid
    cell_id, entry, count : numpy.ndarray
        Sorted flat ids of the cells, the deepest entry of each (0..n-1) and
        its released noisy count.
    parent : numpy.ndarray
        The parent entry of each entry (-1: none); children before parents.
    q, level, clip
        As for :func:`cluster_polygons`.

    Examples
    --------
    >>> from dpgeo.domain import StudyArea
    >>> g = Grid(StudyArea.from_bbox((0, 0, 40, 30), "EPSG:32615", working_crs="EPSG:32615"), 10.0)
    >>> lay = nested_cluster_polygons(g, np.array([0, 1, 2, 4, 5, 6]), np.array([1, 0, 1, 1, 1, 1]),
    ...                               np.array([1, -1]), np.array([3, 9, 4, 0, 2, 1]), q=None)
    >>> lay["n_cells"].tolist(), lay["area_m2"].tolist(), lay["dp_count"].tolist()
    ([1, 6], [100.0, 600.0], [9, 19])
    """
    from .nested_polygons import nested_cell_polygons, subtree_sums

    cell_id = np.asarray(cell_id, dtype=np.int64)
    entry = np.asarray(entry, dtype=np.int64)
    parent = np.asarray(parent, dtype=np.int64)
    count = np.asarray(count, dtype=np.int64)
    n = parent.size
    geoms = nested_cell_polygons(grid, cell_id, entry, parent)
    if clip and not grid.area.is_rectangle and n:
        edge = np.isin(cell_id, grid.boundary_ids())
        cut = np.flatnonzero(subtree_sums(edge.astype(np.int64), entry, parent, n) > 0)
        if cut.size:
            domain = grid.area.polygon
            shapely.prepare(domain)
            geoms[cut] = [_clip_cells(g, domain) for g in geoms[cut]]
    n_cells = subtree_sums(None, entry, parent, n)
    sums = subtree_sums(count, entry, parent, n)
    return _layer(grid, geoms, n_cells, sums, np.zeros(n, dtype=np.int64), q=q, theta=None, level=level)


def _clip_cells(geom, domain):
    """``geom ∩ domain`` for a valid MultiPolygon of grid cells, with GEOS's overlay on what reaches the
    boundary of ``domain`` (prepared) only: the parts of ``geom`` inside it are kept as they are, and so are
    the holes of the other parts that lie inside it and touch no other ring (put back into the clipped part
    that holds them)."""
    parts = shapely.get_parts(geom)
    inside = shapely.contains_properly(domain, parts)
    if inside.all():
        return geom
    out = list(parts[inside])
    for part in parts[~inside]:
        out.extend(_clip_part(part, domain))
    return shapely.MultiPolygon(out)


def _polygon_parts(g) -> list:
    return [p for p in shapely.get_parts(g) if p.geom_type == "Polygon"]


def _clip_part(part, domain) -> list:
    """The polygons of ``part ∩ domain`` (see :func:`_clip_cells`)."""
    n_holes = shapely.get_num_interior_rings(part)
    if n_holes < 8:
        return _polygon_parts(shapely.intersection(part, domain))
    shell = shapely.get_exterior_ring(part)
    holes = shapely.get_interior_ring(part, np.arange(n_holes))
    inside = shapely.contains_properly(domain, shapely.polygons(holes))
    # rings that share a corner (parts that touch there) go together: a group of holes with a hole outside
    # the domain's interior, or with the shell, goes through the overlay (after clipping, its rings may be
    # part of the outline, and a hole that touches them could cut the polygon in two)
    xy, ring = shapely.get_coordinates(np.r_[shell, holes], return_index=True)
    last = np.r_[ring[1:] != ring[:-1], True]  # a ring's closing corner repeats its first
    xy, ring = xy[~last], ring[~last]
    order = np.lexsort((xy[:, 1], xy[:, 0]))
    same = np.flatnonzero((xy[order[1:]] == xy[order[:-1]]).all(axis=1))
    a, b = ring[order[same]], ring[order[same + 1]]
    graph = csr_matrix((np.ones(a.size, dtype=np.int8), (a, b)), shape=(n_holes + 1, n_holes + 1))
    _, group = connected_components(graph, directed=False)
    bad = np.zeros(n_holes + 1, dtype=bool)
    bad[group[0]] = True
    bad[group[1:][~inside]] = True
    keep = ~bad[group[1:]]
    if not keep.any():
        return _polygon_parts(shapely.intersection(part, domain))
    pieces = _polygon_parts(shapely.intersection(shapely.polygons(shell, holes[~keep]), domain))
    kept = holes[keep]
    if len(pieces) == 1:
        owner = np.zeros(kept.size, dtype=np.int64)
    else:  # each kept hole lies inside one piece: the one that contains its first corner
        first = shapely.get_point(kept, 0)
        pi, hi = shapely.STRtree(first).query(pieces, predicate="contains")
        owner = np.full(kept.size, -1, dtype=np.int64)
        owner[hi] = pi
    out = []
    for k, piece in enumerate(pieces):
        mine = kept[owner == k]
        if mine.size:
            n = shapely.get_num_interior_rings(piece)
            piece = shapely.polygons(shapely.get_exterior_ring(piece),
                                     np.r_[shapely.get_interior_ring(piece, np.arange(n)), mine])
        out.append(piece)
    return out


def _layer(grid, geoms, n_cells, sums, zeros, *, q, theta, level):
    """The attribute table of a cluster layer (:data:`LAYER_COLUMNS`) around its polygons."""
    import geopandas as gpd
    import pandas as pd

    k = n_cells.size
    if q is None:
        low = high = pd.array([None] * k, dtype="Int64")
    else:
        half = np.array([sum_interval_halfwidth(int(n), q, level) for n in n_cells], dtype=np.int64)
        extra = (zeros * (theta - 1)) if theta else np.zeros_like(sums)
        low = np.maximum(sums - half, 0)
        high = np.maximum(sums + half + extra, 0)
    data = {
        "cluster_id": np.arange(1, k + 1, dtype=np.int64),
        "n_cells": n_cells,
        "area_m2": area_m2(geoms),
        "dp_count": np.maximum(sums, 0),
        "dp_count_low": low,
        "dp_count_high": high,
    }
    return gpd.GeoDataFrame(data, geometry=gpd.GeoSeries(geoms, crs=grid.area.crs), crs=grid.area.crs)


def _to_multipolygon(geoms):
    """Every geometry as a MultiPolygon (drops slivers of lower dimension)."""
    out = []
    for g in geoms:
        if g.geom_type == "MultiPolygon":
            out.append(g)
        elif g.geom_type == "Polygon":
            out.append(shapely.MultiPolygon([g]))
        else:
            polys = [p for p in shapely.get_parts(g) if p.geom_type == "Polygon"]
            out.append(shapely.MultiPolygon(polys))
    return np.asarray(out, dtype=object)
