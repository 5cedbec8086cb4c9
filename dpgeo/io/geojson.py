"""Releases as RFC 7946 GeoJSON: EPSG:4326, right-hand rule, the privacy metadata as a foreign member."""

from __future__ import annotations

import json

import numpy as np
import shapely

__all__ = ["geojson_collection", "METADATA_MEMBER", "to_lonlat", "split_antimeridian"]

#: Name of the GeoJSON foreign member / GeoPackage metadata key holding the metadata.
METADATA_MEMBER = "dpgeo"


def geojson_collection(gdf, metadata: dict) -> dict:
    """The layer as an RFC 7946 FeatureCollection with the metadata as foreign member ``"dpgeo"``.

    Coordinates are EPSG:4326 longitude/latitude rounded to 1e-7 degrees
    (about 1 cm), exterior rings counter-clockwise and holes clockwise (the
    right-hand rule), no ``crs`` member, no feature ids; a polygon across
    the antimeridian is cut there into a MultiPolygon (RFC 7946 §3.1.9,
    :func:`split_antimeridian`).

    Examples
    --------
    >>> import geopandas as gpd, shapely
    >>> g = gpd.GeoDataFrame({"cluster_id": [1]}, geometry=[shapely.box(10, 50, 10.1, 50.1)], crs=4326)
    >>> fc = geojson_collection(g, {"epsilon": 1.0})
    >>> sorted(fc), fc["features"][0]["properties"], fc["dpgeo"]
    (['dpgeo', 'features', 'type'], {'cluster_id': 1}, {'epsilon': 1.0})
    """
    out = to_lonlat(gdf)
    for col in out.columns:  # the periods of a series: ISO 8601 text in UTC (JSON has no time type)
        if col != out.geometry.name and str(out[col].dtype).startswith("datetime64"):
            t = out[col].dt.tz_convert("UTC") if out[col].dt.tz is not None else out[col]
            out[col] = t.dt.strftime("%Y-%m-%dT%H:%M:%SZ")
    geoms = np.asarray(out.geometry.values)
    if hasattr(shapely, "orient_polygons"):  # shapely >= 2.1
        geoms = shapely.orient_polygons(geoms)
    else:  # pragma: no cover - shapely 2.0
        from shapely.geometry.polygon import orient

        geoms = np.array([g if g is None or g.is_empty else
                          (orient(g) if g.geom_type == "Polygon" else
                           shapely.MultiPolygon([orient(p) for p in g.geoms]) if g.geom_type == "MultiPolygon"
                           else g) for g in geoms], dtype=object)
    geoms = shapely.set_precision(geoms, 1e-7, mode="pointwise")
    coords = _multipolygon_coordinates(geoms)
    if coords is None:  # not all non-empty MultiPolygons: geopandas' general (slower) path
        out["geometry"] = geoms
        fc = json.loads(out.to_json(drop_id=True))
        fc.pop("crs", None)
    else:  # the same document, with the coordinates taken from GEOS in one vectorised call
        out["geometry"] = None
        fc = out.to_geo_dict(drop_id=True)
        for feature, c in zip(fc["features"], coords):
            feature["geometry"] = {"type": "MultiPolygon", "coordinates": c}
    fc[METADATA_MEMBER] = metadata
    return fc


def _multipolygon_coordinates(geoms):
    """Nested coordinate lists of non-empty MultiPolygons (as in their ``__geo_interface__``), else None."""
    if len(geoms) == 0 or not (shapely.get_type_id(geoms) == 6).all() or shapely.is_empty(geoms).any():
        return None
    _, xy, (ring, poly, multi) = shapely.to_ragged_array(geoms)
    xy = xy.tolist()
    rings = [xy[a:b] for a, b in zip(ring[:-1].tolist(), ring[1:].tolist())]
    polys = [rings[a:b] for a, b in zip(poly[:-1].tolist(), poly[1:].tolist())]
    return [polys[a:b] for a, b in zip(multi[:-1].tolist(), multi[1:].tolist())]


def to_lonlat(gdf):
    """``gdf`` in EPSG:4326, with every polygon that crosses the antimeridian cut there (:func:`split_antimeridian`)."""
    out = gdf.to_crs(4326)
    if len(out):
        out = out.set_geometry(split_antimeridian(np.asarray(out.geometry.values)), crs=out.crs)
    return out


def split_antimeridian(geoms) -> np.ndarray:
    """Polygons in longitude/latitude, each cut at ±180° where it crosses the antimeridian.

    A transformation to EPSG:4326 puts each vertex in [-180, 180], so a small
    polygon across the antimeridian comes back spanning the whole world. A
    geometry whose longitudes span more than 180° is taken to be one: its
    western vertices are moved by +360° (a continuous outline around 180°),
    and it is cut into the part east of -180° and the part west of 180° (a
    MultiPolygon), as RFC 7946 §3.1.9 asks. Geometries given with continuous
    longitudes beyond ±180 (:meth:`dpgeo.h3cells.H3Cells.polygons` in
    EPSG:4326) are cut the same way. Others are returned as they are.

    Examples
    --------
    >>> hexagon = shapely.Polygon([(179.9, 0), (179.95, 0.1), (-179.95, 0.1), (-179.9, 0), (-179.95, -0.1),
    ...                            (179.95, -0.1)])
    >>> [tuple(round(v, 2) for v in p.bounds) for p in split_antimeridian([hexagon])[0].geoms]
    [(-180.0, -0.1, -179.9, 0.1), (179.9, -0.1, 180.0, 0.1)]
    >>> split_antimeridian([shapely.box(10, 50, 11, 51)])[0].bounds
    (10.0, 50.0, 11.0, 51.0)
    """
    geoms = np.asarray(geoms, dtype=object)
    out = geoms.copy()
    if geoms.size == 0:
        return out
    b = shapely.bounds(geoms)
    with np.errstate(invalid="ignore"):
        wide = (b[:, 2] - b[:, 0] > 180.0) & (b[:, 0] < 0)
        beyond = (b[:, 0] < -180.0) | (b[:, 2] > 180.0)
    for i in np.flatnonzero(wide | beyond):  # the few features that cross the antimeridian
        g = geoms[i]
        if wide[i]:
            g = shapely.transform(g, lambda xy: np.where(xy[:, :1] < 0, xy + [360.0, 0.0], xy))
        parts = []
        for shift in (-360.0, 0.0, 360.0):
            piece = shapely.intersection(g, shapely.box(-180.0 - shift, -90.0, 180.0 - shift, 90.0))
            if not piece.is_empty:
                parts += [p for p in shapely.get_parts(shapely.transform(piece, lambda xy, s=shift: xy + [s, 0.0]))
                          if p.geom_type == "Polygon" and p.area > 0]
        out[i] = shapely.MultiPolygon(parts) if parts else g
    return out
