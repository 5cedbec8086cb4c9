"""What the PNG map and the small multiples of a series draw with: the drawing CRS and polygons as matplotlib paths."""

from __future__ import annotations

import numpy as np

__all__ = []

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
