"""What the maps draw with: the study area's outline and the title (HTML map, PNG and small multiples of a
series), the drawing CRS and polygons as matplotlib paths (PNG)."""

from __future__ import annotations

import numpy as np

from ..errors import ParameterError

__all__ = ["study_area_outline", "map_heading", "place_labels", "draw_labels"]

#: Typographic points per millimetre (outline widths are given in millimetres).
_PT_PER_MM = 72 / 25.4


def _drawing_crs(gdf, metadata, crs):
    """The CRS the picture is drawn in: ``crs``, else a projected layer CRS, else the working CRS."""
    from pyproj import CRS

    if crs is not None:
        return CRS.from_user_input(crs)
    if gdf.crs is not None and not CRS.from_user_input(gdf.crs).is_geographic:
        return CRS.from_user_input(gdf.crs)
    try:
        return CRS.from_user_input(metadata.get("working_crs"))
    except Exception:
        return CRS.from_user_input(gdf.crs or "EPSG:4326")


def _path_of(geom):
    from matplotlib.path import Path as MPath

    verts, codes = [], []
    for poly in getattr(geom, "geoms", [geom]):
        if poly.geom_type != "Polygon" or poly.is_empty:
            continue
        for ring in [poly.exterior, *poly.interiors]:
            xy = np.asarray(ring.coords)[:, :2]
            if len(xy) < 3:
                continue
            verts.append(xy)
            codes.append(np.r_[MPath.MOVETO, np.full(len(xy) - 2, MPath.LINETO), MPath.CLOSEPOLY])
    if not verts:
        return None
    return MPath(np.concatenate(verts), np.concatenate(codes))


def study_area_outline(metadata: dict, crs="EPSG:4326"):
    """The study area of a release in ``crs`` (default EPSG:4326 lon/lat), and what it is.

    Read from ``metadata["domain"]``: its ``wkt`` (the exact outline), else
    ``wkt_simplified`` (an outline with at most a few thousand vertices, for
    large areas), else its ``bounds`` (a rectangle), all in ``domain["crs"]``.
    Edges are densified before reprojection, so straight lines stay true.

    Returns
    -------
    (shapely.Geometry or None, str)
        The outline and ``"outline"``, ``"simplified outline"`` or ``"bounding box"``;
        ``(None, "")`` when the metadata has no usable study area.

    Examples
    --------
    >>> g, kind = study_area_outline({"domain": {"crs": "EPSG:4326", "bounds": [-93.33, 44.89, -93.19, 45.06],
    ...                                          "wkt": None}})
    >>> kind, [round(v, 2) for v in g.bounds]
    ('bounding box', [-93.33, 44.89, -93.19, 45.06])
    """
    import shapely
    from pyproj import CRS, Transformer

    dom = (metadata or {}).get("domain")
    if not isinstance(dom, dict):
        return None, ""
    geom, kind = None, ""
    try:
        if dom.get("wkt"):
            geom, kind = shapely.from_wkt(dom["wkt"]), "outline"
        elif dom.get("wkt_simplified"):
            geom, kind = shapely.from_wkt(dom["wkt_simplified"]), "simplified outline"
        elif dom.get("bounds") and len(dom["bounds"]) == 4:
            geom, kind = shapely.box(*[float(v) for v in dom["bounds"]]), "bounding box"
        if geom is None or geom.is_empty:
            return None, ""
        src = CRS.from_user_input(dom.get("crs") or "EPSG:4326")
        dst = CRS.from_user_input(crs)
        if not src.equals(dst, ignore_axis_order=True):
            b = geom.bounds
            geom = shapely.segmentize(geom, max(b[2] - b[0], b[3] - b[1]) / 64)
            tr = Transformer.from_crs(src, dst, always_xy=True)
            geom = shapely.transform(geom, lambda xy: np.column_stack(tr.transform(xy[:, 0], xy[:, 1])))
        if not np.isfinite(geom.bounds).all():
            return None, ""
    except Exception:  # an unreadable outline or CRS label: the map falls back to the clusters' extent
        return None, ""
    return geom, kind


def map_heading(metadata, title=None) -> str:
    """The map's title: the one given, else the mechanism (the PNG uses the same)."""
    if title is not None:
        if not isinstance(title, str):
            raise ParameterError(f"title must be text, got {type(title).__name__}")
        if title.strip():
            return title.strip()
    return str((metadata or {}).get("mechanism") or "dpgeo cluster map")


def place_labels(xy, widths, height, priority) -> dict:
    """Where labels go so that none overlaps another: ``{label number: (dx, dy)}``, the others dropped.

    The labels are placed in order of ``priority`` (the highest count first):
    each at its point if that place is free, else just above, below, right or
    left of it, else not at all. All lengths in one unit (points on the page).

    Examples
    --------
    >>> place_labels([[0, 0], [2, 0], [50, 0]], [10, 10, 10], 4, [7, 9, 1])
    {1: (0.0, 0.0), 0: (0.0, 4.0), 2: (0.0, 0.0)}
    """
    xy = np.asarray(xy, dtype=float).reshape(-1, 2)
    wd = np.asarray(widths, dtype=float).ravel()
    order = np.argsort(-np.asarray(priority, dtype=float), kind="stable")
    boxes = np.zeros((0, 4))  # x0, y0, x1, y1 of the labels placed
    placed = {}
    for k in order.tolist():  # one step per label (at most a few hundred)
        if not np.isfinite(xy[k]).all():
            continue
        hw, hh = wd[k] / 2, height / 2
        for dx, dy in ((0.0, 0.0), (0.0, height), (0.0, -height), (wd[k], 0.0), (-wd[k], 0.0)):
            x, y = xy[k, 0] + dx, xy[k, 1] + dy
            box = np.array([x - hw, y - hh, x + hw, y + hh])
            if not len(boxes) or not ((boxes[:, 0] < box[2]) & (box[0] < boxes[:, 2]) & (boxes[:, 1] < box[3])
                                      & (box[1] < boxes[:, 3])).any():
                boxes = np.vstack([boxes, box])
                placed[k] = (float(dx), float(dy))
                break
    return placed


def draw_labels(fig, ax, points, values, *, fontsize, halo) -> int:
    """Label ``points`` (shapely points in the axes' data units) with ``values``, none over another
    (:func:`place_labels`: the largest first, then moved beside, else left out). Call it after the axes'
    limits are set. Returns how many labels were drawn."""
    import shapely

    values = list(values)
    xy = np.column_stack([shapely.get_x(points), shapely.get_y(points)])  # NaN for an empty point
    ax.apply_aspect()  # the axes' final box, so that map units convert to points on the page
    to_pt = 72.0 / fig.dpi
    at = ax.transData.transform(np.nan_to_num(xy)) * to_pt
    at[~np.isfinite(xy).all(axis=1)] = np.nan
    text = [str(v) for v in values]
    rank = [float(v) if v is not None else -np.inf for v in values]
    placed = place_labels(at, [len(t) * fontsize * 0.62 + 3 for t in text], fontsize * 1.25 + 2, rank)
    for k, (dx, dy) in placed.items():
        if values[k] is None:
            continue
        x, y = ax.transData.inverted().transform((at[k] + (dx, dy)) / to_pt)
        ax.text(x, y, text[k], ha="center", va="center", fontsize=fontsize, weight="bold", color="#202020",
                path_effects=halo, clip_on=True)
    return len(placed)
