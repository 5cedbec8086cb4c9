"""Geometry of the k-means family over the **public** study area (no data involved).

Spread-out initial centroids drawn inside the study area, the Voronoi cells
of released centroids clipped to it, and the inside test used to drop the
points outside it. Nothing here reads the private points except
:func:`inside`, which only selects them.
"""

from __future__ import annotations

import numpy as np
import shapely

from ..errors import ParameterError

__all__ = ["initial_centroids", "voronoi_cells", "inside"]


def initial_centroids(polygon, k: int, rng: np.random.Generator, *, candidates: int | None = None) -> np.ndarray:
    """``k`` well-spread starting centroids inside ``polygon``, drawn without any data.

    ``candidates`` points (default ``max(256, 32k)``) are drawn uniformly in
    the polygon from ``rng``; the centroids are picked greedily, each
    maximising ``min(distance to those already picked, 2 × distance to the
    polygon's edge)`` (a packing of ``k`` equal discs).

    Returns
    -------
    numpy.ndarray, shape (k, 2)

    Examples
    --------
    >>> import shapely
    >>> c = initial_centroids(shapely.box(0, 0, 100, 100), 4, np.random.default_rng(1))
    >>> c.shape, bool(((c > 0) & (c < 100)).all())
    ((4, 2), True)
    """
    k = int(k)
    if k < 1:
        raise ParameterError(f"k (number of clusters) must be an integer >= 1, got {k!r}")
    need = candidates or max(256, 32 * k)
    bx0, by0, bx1, by1 = polygon.bounds
    shapely.prepare(polygon)
    got: list = []
    total = 0
    for _ in range(200):
        m = 2 * need
        px = bx0 + (bx1 - bx0) * rng.random(m)
        py = by0 + (by1 - by0) * rng.random(m)
        keep = shapely.intersects_xy(polygon, px, py)
        got.append(np.column_stack([px[keep], py[keep]]))
        total += int(keep.sum())
        if total >= need:
            break
    cand = np.concatenate(got)[:need]
    if cand.shape[0] < k:
        raise ParameterError("the study area is too thin to place the initial centroids; give a larger area")
    edge = shapely.distance(polygon.boundary, shapely.points(cand))
    score = 2.0 * edge
    out = np.empty((k, 2))
    for j in range(k):
        i = int(np.argmax(score))
        out[j] = cand[i]
        score = np.minimum(score, np.hypot(cand[:, 0] - cand[i, 0], cand[:, 1] - cand[i, 1]))
    return out


def voronoi_cells(centroids, polygon) -> np.ndarray:
    """Voronoi cells of distinct ``centroids`` clipped to ``polygon``, in the centroids' order.

    The cells partition the polygon: they cover it and overlap only on
    shared edges. A cell may be empty when its centroid lies outside a
    non-convex polygon.

    Examples
    --------
    >>> import shapely
    >>> cells = voronoi_cells(np.array([[25.0, 50.0], [75.0, 50.0]]), shapely.box(0, 0, 100, 100))
    >>> [round(c.area) for c in cells]
    [5000, 5000]
    """
    c = np.asarray(centroids, dtype=float).reshape(-1, 2)
    if c.shape[0] == 0:
        return np.zeros(0, dtype=object)
    if np.unique(c, axis=0).shape[0] != c.shape[0]:
        raise ParameterError("voronoi_cells needs distinct centroids")
    if c.shape[0] == 1:
        return np.array([polygon], dtype=object)
    b = polygon.bounds
    lo = np.minimum(c.min(axis=0), b[:2])
    hi = np.maximum(c.max(axis=0), b[2:])
    pad = float(np.hypot(*(hi - lo))) + 1.0
    env = shapely.box(lo[0] - pad, lo[1] - pad, hi[0] + pad, hi[1] + pad)
    parts = shapely.get_parts(shapely.voronoi_polygons(shapely.multipoints(c), extend_to=env))
    pts = shapely.points(c)
    which = np.full(c.shape[0], -1, dtype=np.int64)
    src, dst = shapely.STRtree(parts).query(pts, predicate="within")
    which[src] = dst
    if (which < 0).any() or np.unique(which).size != c.shape[0]:  # pragma: no cover - GEOS guarantees this
        raise RuntimeError("could not match the Voronoi cells to their centroids")
    return shapely.intersection(parts[which], polygon)


def _multipolygon(g):
    if g.geom_type == "MultiPolygon":
        return g
    if g.geom_type == "Polygon":
        return shapely.MultiPolygon([g])
    return shapely.MultiPolygon([p for p in shapely.get_parts(g) if p.geom_type == "Polygon"])


def inside(polygon, x, y):
    """Mask of the points ``(x, y)`` (metres) inside ``polygon`` (boundary included)."""
    shapely.prepare(polygon)
    b = polygon.bounds
    box = (x >= b[0]) & (x <= b[2]) & (y >= b[1]) & (y <= b[3])
    if abs((b[2] - b[0]) * (b[3] - b[1]) - polygon.area) <= 1e-9 * polygon.area:
        return box
    out = np.zeros(x.size, dtype=bool)
    out[box] = shapely.intersects_xy(polygon, x[box], y[box])
    return out
