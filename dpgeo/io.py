"""Reading point layers and writing cluster layers with their privacy metadata.

Input: GeoPackage, GeoJSON, Shapefile and anything else GDAL reads, GeoParquet
(through pyarrow), and CSV with coordinate columns. With pyogrio, point
geometries are decoded straight from WKB into numpy arrays, without building
one Python object per point.

GDAL is reached through one of two bindings, the *engine*: ``"pyogrio"`` (a
dependency of dpgeo, and the fast path) or ``"fiona"`` (``pip install
dpgeo[fiona]``). ``engine="auto"`` (the default everywhere) takes pyogrio when
it imports and fiona otherwise; asking for an engine that is not installed is
an error that names the package to install. CSV and GeoParquet input and
GeoJSON output need no engine: dpgeo reads and writes them itself.

Output: GeoPackage (metadata in the ``gpkg_metadata`` table and the layer
description) or GeoJSON (RFC 7946: EPSG:4326 lon/lat, counter-clockwise
exteriors, the metadata in a top-level foreign member ``"dpgeo"``). Every
write goes to a temporary file in the target folder that is renamed into
place, so a failure never leaves a partial file.

Counts about the private input (points read, dropped, outside the study
area) are *diagnostics* for the data owner; they are returned separately and
never written into an output layer.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import tempfile
from dataclasses import dataclass

import numpy as np
import shapely
from pyproj import CRS

from .errors import InputError, OutputError, ParameterError

__all__ = [
    "PointTable",
    "read_points",
    "points_from_frame",
    "write_layer",
    "read_layer_metadata",
    "output_driver",
    "check_engine",
    "ENGINES",
    "METADATA_MEMBER",
]

#: Accepted values of every ``engine=`` argument.
ENGINES = ("auto", "pyogrio", "fiona")

_INSTALL = {"pyogrio": "pip install pyogrio", "fiona": "pip install dpgeo[fiona]"}

#: Name of the GeoJSON foreign member / GeoPackage metadata key holding the metadata.
METADATA_MEMBER = "dpgeo"

_LON_NAMES = ("lon", "lng", "long", "longitude", "x_lon", "decimallongitude", "lon_wgs84")
_LAT_NAMES = ("lat", "latitude", "y_lat", "decimallatitude", "lat_wgs84")
_X_NAMES = ("x", "easting", "east", "xcoord", "x_coord", "point_x")
_Y_NAMES = ("y", "northing", "north", "ycoord", "y_coord", "point_y")


# -- engines -------------------------------------------------------------------------

def _importable(name) -> bool:
    try:
        importlib.import_module(name)
    except (ImportError, OSError):  # missing, or its GDAL library does not load
        return False
    return True


def _pick_engine(engine, *, needed, write):
    """The binding to use, or None when the file needs none and none was asked for.

    An explicitly requested engine must be importable even when the file at
    hand does not need it, so that a wrong setup shows up at once.
    """
    if not isinstance(engine, str) or engine not in ENGINES:
        raise ParameterError(f"engine must be one of {', '.join(map(repr, ENGINES))}, got {engine!r}")
    err = OutputError if write else InputError
    what = "write a GeoPackage" if write else "read this vector format"
    if engine != "auto":
        if not _importable(engine):
            raise err(f"engine={engine!r} needs the {engine} package, which is not installed: "
                      f"{_INSTALL[engine]} (or use engine='auto')")
        return engine
    if not needed:
        return None
    for name in ("pyogrio", "fiona"):
        if _importable(name):
            return name
    raise err(f"to {what} dpgeo needs pyogrio or fiona, and neither imports: "
              f"{_INSTALL['pyogrio']} (or {_INSTALL['fiona']})")


def _needs_gdal_to_read(path) -> bool:
    return not (_is_csv(path) or _is_parquet(path))


def _is_csv(path) -> bool:
    return re.search(r"\.(csv|tsv|txt)(\.gz|\.bz2|\.zip|\.xz)?$", os.fspath(path).lower()) is not None


def _is_parquet(path) -> bool:
    return os.fspath(path).lower().endswith((".parquet", ".geoparquet", ".pq"))


def check_engine(engine="auto", *, read=None, write=None, driver=None):
    """Check an ``engine`` choice before any data is read.

    Parameters
    ----------
    engine : {"auto", "pyogrio", "fiona"}
        ``"auto"`` takes pyogrio when it imports, else fiona.
    read : str or os.PathLike, optional
        An input file that is going to be read.
    write : str or os.PathLike, optional
        An output file that is going to be written.
    driver : {"GPKG", "GeoJSON"}, optional
        Output format of ``write`` (default from its extension).

    Returns
    -------
    str or None
        The engine that reading ``read`` or writing ``write`` will use;
        ``None`` when neither needs GDAL (CSV or GeoParquet in, GeoJSON out)
        and no engine was asked for by name.

    Raises
    ------
    ParameterError
        ``engine`` is not one of :data:`ENGINES`.
    InputError, OutputError
        The engine asked for (or, with ``"auto"``, both) is not installed;
        the message says what to install.

    Examples
    --------
    >>> check_engine("auto", read="points.csv", write="spans.geojson") is None
    True
    """
    used = None
    if read is not None:
        used = _pick_engine(engine, needed=_needs_gdal_to_read(read), write=False)
    if write is not None:
        used = _pick_engine(engine, needed=output_driver(write, driver) == "GPKG", write=True) or used
    if read is None and write is None:
        used = _pick_engine(engine, needed=False, write=False)
    return used


@dataclass
class PointTable:
    """Coordinates of a point layer in its own CRS (private data).

    Attributes
    ----------
    x, y : numpy.ndarray
        float64 coordinates of the usable points.
    crs : pyproj.CRS
    n_read : int
        Records read.
    n_dropped : int
        Records dropped for null/empty geometry or non-finite coordinates.
    source : str
    person : numpy.ndarray or None
        Person (or other privacy unit) identifier of each point, when a
        person column was asked for; records without one are dropped.
    """

    x: np.ndarray
    y: np.ndarray
    crs: CRS
    n_read: int
    n_dropped: int
    source: str = ""
    person: np.ndarray | None = None


def read_points(path, *, layer=None, x=None, y=None, input_crs=None, person=None, engine="auto") -> PointTable:
    """Read a point layer into coordinate arrays.

    Parameters
    ----------
    path : str or os.PathLike
        GeoPackage, GeoJSON, Shapefile, GeoParquet (``.parquet``,
        ``.geoparquet``) or CSV (``.csv``, ``.csv.gz``, ``.tsv``, ``.txt``).
    layer : str, optional
        Layer name for multi-layer files.
    x, y : str, optional
        CSV coordinate columns. By default common names are detected:
        ``lon/lng/longitude`` and ``lat/latitude`` (then EPSG:4326 is assumed)
        or ``x/easting`` and ``y/northing`` (then ``input_crs`` is required).
    input_crs : anything pyproj accepts, optional
        CRS of a layer or CSV that does not declare one.
    person : str, optional
        Name of a column identifying the person each point belongs to
        (read into :attr:`PointTable.person`; rows without one are dropped).
    engine : {"auto", "pyogrio", "fiona"}, default "auto"
        GDAL binding for GeoPackage, GeoJSON, Shapefile, ... input
        (``"auto"``: pyogrio if installed, else fiona). CSV and GeoParquet
        are read without one.

    Raises
    ------
    InputError
        Unreadable or empty file, missing CRS, non-point geometries, missing
        column, or the engine asked for is not installed.
    ParameterError
        Unknown ``engine``.
    """
    p = os.fspath(path)
    eng = _pick_engine(engine, needed=_needs_gdal_to_read(p), write=False)
    if not os.path.exists(p):
        raise InputError(f"input file {p!r} does not exist")
    if _is_csv(p):
        xs, ys, crs, n_read, pers = _read_csv(p, x, y, input_crs, person)
    else:
        if x is not None or y is not None:
            raise InputError("--x/--y name CSV columns; this input is a vector layer with geometries")
        if _is_parquet(p):
            wkb, crs, n_read, pers = _read_geoparquet(p, person)
        elif eng == "fiona":
            wkb, crs, n_read, pers = _read_fiona(p, layer, person)
        else:
            wkb, crs, n_read, pers = _read_ogr(p, layer, person)
        crs = _resolve_crs(crs, input_crs, p)
        xs, ys = _decode_points(wkb)
    table = _finish_table(xs, ys, crs, n_read, p, pers)
    if table.n_read == 0:
        raise InputError(f"input {p!r} has no records")
    if table.x.size == 0:
        raise InputError(f"input {p!r} has no usable points ({table.n_dropped} empty, NaN or without person dropped)")
    return table


def points_from_frame(gdf, *, input_crs=None, person=None) -> PointTable:
    """Coordinates from a GeoDataFrame/GeoSeries of points (``person``: a column name)."""
    geoms = np.asarray(gdf.geometry.values if hasattr(gdf, "geometry") else gdf.values)
    crs = _resolve_crs(gdf.crs, input_crs, "the GeoDataFrame")
    n = len(geoms)
    if n == 0:
        raise InputError("the point layer has no records")
    pers = None
    if person is not None:
        if not hasattr(gdf, "columns") or person not in gdf.columns:
            raise InputError(f"person column {person!r} is not in the layer")
        pers = gdf[person].to_numpy()
    wkb = shapely.to_wkb(geoms)
    xs, ys = _decode_points(np.asarray(wkb, dtype=object))
    table = _finish_table(xs, ys, crs, n, "GeoDataFrame", pers)
    if table.x.size == 0:
        raise InputError(f"the point layer has no usable points ({table.n_dropped} empty, NaN or without person "
                         "dropped)")
    return table


def _finish_table(xs, ys, crs, n_read, source, person=None) -> PointTable:
    """Drop rows without finite coordinates (or without a person id) and count them."""
    ok = np.isfinite(xs) & np.isfinite(ys)
    if person is not None:
        import pandas as pd

        person = np.asarray(person)
        ok &= ~np.asarray(pd.isna(person))
    n_drop = int((~ok).sum()) + int(n_read - xs.size)
    if ok.all():
        return PointTable(xs, ys, crs, int(n_read), n_drop, source, person)
    return PointTable(xs[ok], ys[ok], crs, int(n_read), n_drop, source, None if person is None else person[ok])


# -- readers -------------------------------------------------------------------

def _read_ogr(path, layer, person=None):
    import pyogrio

    try:
        meta, table = pyogrio.read_arrow(path, layer=layer, columns=[person] if person else [],
                                         return_fids=False)
    except Exception as exc:
        if person and person in str(exc):
            raise InputError(f"person column {person!r} is not in {os.path.basename(path)}") from None
        raise InputError(f"cannot read {path!r} as a vector layer: {_short(exc)}") from None
    gcol = meta.get("geometry_name") or "wkb_geometry"
    if gcol not in table.column_names:
        raise InputError(f"{path!r} has no geometry column; for a CSV give coordinate columns with --x/--y")
    if person and person not in table.column_names:
        raise InputError(f"person column {person!r} is not in {os.path.basename(path)}")
    col = table.column(gcol).combine_chunks()
    pers = table.column(person).to_numpy() if person else None
    return col, meta.get("crs"), len(table), pers


def _read_fiona(path, layer, person=None):
    """Read through fiona: one Python object per feature (slower than pyogrio, same result)."""
    import fiona

    name = os.path.basename(path)
    try:
        with fiona.Env():
            with fiona.open(path, layer=layer) as src:
                fields = list(src.schema["properties"])
                has_geometry = src.schema.get("geometry") not in (None, "None")
            if person and person not in fields:
                raise InputError(f"person column {person!r} is not in {name}")
            if not has_geometry:
                raise InputError(f"{path!r} has no geometry column; for a CSV give coordinate columns with --x/--y")
            try:
                src = fiona.open(path, layer=layer, include_fields=[person] if person else [])
            except fiona.errors.DriverError:  # drivers that cannot skip fields (GeoJSON) read them all
                src = fiona.open(path, layer=layer)
            with src:
                crs = src.crs_wkt or None
                feats = [(f.geometry, f.properties[person] if person else None) for f in src]
    except InputError:
        raise
    except Exception as exc:
        raise InputError(f"cannot read {path!r} as a vector layer: {_short(exc)}") from None
    pers = None
    if person:
        import pandas as pd

        pers = pd.Series([v for _, v in feats]).to_numpy()  # same dtypes as the arrow path
    return _xy_from_geojson([g for g, _ in feats]), crs, len(feats), pers


_TYPE_IDS = {"Point": 0, "LineString": 1, "LinearRing": 2, "Polygon": 3, "MultiPoint": 4, "MultiLineString": 5,
             "MultiPolygon": 6, "GeometryCollection": 7}


def _xy_from_geojson(geoms):
    """x, y of GeoJSON-like point geometries (``.type``, ``.coordinates``); NaN for None or empty."""
    bad = {g.type for g in geoms if g is not None} - {"Point"}
    if bad - set(_TYPE_IDS):
        raise InputError(f"the input has {', '.join(sorted(bad))} geometries; dpgeo needs a layer of points")
    if bad:
        _check_point_types(np.array([_TYPE_IDS[k] for k in bad]))
    nan2 = (np.nan, np.nan)
    xy = np.array([nan2 if g is None or len(g.coordinates) < 2 else g.coordinates[:2] for g in geoms],
                  dtype=float).reshape(-1, 2)
    return _XY(xy[:, 0], xy[:, 1])


def _read_geoparquet(path, person=None):
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(path)
    except Exception as exc:
        raise InputError(f"cannot read {path!r} as GeoParquet: {_short(exc)}") from None
    md = pf.schema_arrow.metadata or {}
    geo = md.get(b"geo")
    if geo is None:
        raise InputError(f"{path!r} is a Parquet file without GeoParquet 'geo' metadata")
    geo = json.loads(geo)
    gcol = geo.get("primary_column", "geometry")
    cmeta = geo.get("columns", {}).get(gcol, {})
    enc = cmeta.get("encoding", "WKB").lower()
    # GeoParquet: a missing "crs" key means OGC:CRS84; an explicit null means unknown
    crs = cmeta["crs"] if "crs" in cmeta else "OGC:CRS84"
    if isinstance(crs, dict):
        crs = json.dumps(crs)
    if person and person not in pf.schema_arrow.names:
        raise InputError(f"person column {person!r} is not in {os.path.basename(path)}")
    tab = pf.read(columns=[gcol] + ([person] if person else []))
    col = tab.column(gcol).combine_chunks()
    pers = tab.column(person).to_numpy() if person else None
    if enc == "point":  # GeoArrow native point encoding: struct<x, y>
        import pyarrow as pa

        if isinstance(col.type, pa.StructType):
            xs = col.field("x").to_numpy(zero_copy_only=False).astype(float)
            ys = col.field("y").to_numpy(zero_copy_only=False).astype(float)
            null = np.asarray(col.is_null())
            xs[null] = np.nan
            ys[null] = np.nan
            return _XY(xs, ys), crs, len(col), pers
    elif enc != "wkb":
        raise InputError(f"{path!r}: geometry encoding {enc!r} is not points; dpgeo needs point geometries")
    return col, crs, len(col), pers


@dataclass
class _XY:
    x: np.ndarray
    y: np.ndarray


def _read_csv(path, xcol, ycol, input_crs, person=None):
    import pandas as pd

    sep = "\t" if ".tsv" in path.lower() else None
    try:
        head = pd.read_csv(path, nrows=0, sep=sep, engine="python" if sep is None else "c")
    except Exception as exc:
        raise InputError(f"cannot read {path!r} as CSV: {_short(exc)}") from None
    cols = list(head.columns)
    lower = {c.lower().strip(): c for c in cols}
    assumed = None
    if xcol is None and ycol is None:
        lon = next((lower[n] for n in _LON_NAMES if n in lower), None)
        lat = next((lower[n] for n in _LAT_NAMES if n in lower), None)
        if lon and lat:
            xcol, ycol = lon, lat
            assumed = "EPSG:4326"
        else:
            xcol = next((lower[n] for n in _X_NAMES if n in lower), None)
            ycol = next((lower[n] for n in _Y_NAMES if n in lower), None)
        if not (xcol and ycol):
            raise InputError(
                f"cannot find coordinate columns in {os.path.basename(path)} (columns: {', '.join(cols[:12])}); "
                "name them with --x COLUMN --y COLUMN"
            )
    else:
        if not (xcol and ycol):
            raise InputError("give both --x and --y")
        for c in (xcol, ycol):
            if c not in cols:
                raise InputError(f"column {c!r} not in {os.path.basename(path)} (columns: {', '.join(cols[:12])})")
    if input_crs is not None:
        crs = _as_input_crs(input_crs)
    elif assumed:
        crs = CRS.from_user_input(assumed)
    else:
        raise InputError(
            f"the CSV columns {xcol!r}/{ycol!r} carry no CRS; give --input-crs (e.g. --input-crs EPSG:26915)"
        )
    if person is not None and person not in cols:
        raise InputError(f"person column {person!r} not in {os.path.basename(path)} (columns: {', '.join(cols[:12])})")
    try:
        df = pd.read_csv(path, usecols=[xcol, ycol] + ([person] if person else []), sep=sep,
                         engine="python" if sep is None else "c")
    except Exception as exc:
        raise InputError(f"cannot read {path!r} as CSV: {_short(exc)}") from None
    xs = pd.to_numeric(df[xcol], errors="coerce").to_numpy(dtype=float)
    ys = pd.to_numeric(df[ycol], errors="coerce").to_numpy(dtype=float)
    ok = np.isfinite(xs) & np.isfinite(ys)
    if crs.is_geographic and ok.any() and (np.abs(xs[ok]).max() > 180 or np.abs(ys[ok]).max() > 90):
        raise InputError(
            f"columns {xcol!r}/{ycol!r} hold values outside longitude/latitude range; "
            "if they are projected coordinates give --input-crs"
        )
    return xs, ys, crs, int(len(df)), (df[person].to_numpy() if person else None)


def _resolve_crs(crs, input_crs, what) -> CRS:
    if crs is None or crs == "":
        if input_crs is None:
            raise InputError(f"{what} has no CRS; give its CRS with --input-crs (e.g. --input-crs EPSG:4326)")
        return _as_input_crs(input_crs)
    try:
        layer_crs = CRS.from_user_input(crs)
    except Exception:
        raise InputError(f"{what} has a CRS pyproj cannot read ({str(crs)[:60]}...)") from None
    if input_crs is not None:
        given = _as_input_crs(input_crs)
        if not given.equals(layer_crs, ignore_axis_order=True):
            raise InputError(
                f"{what} declares {layer_crs.name} but --input-crs says {given.name}; "
                "drop --input-crs (it is only for layers without a CRS) or fix the file"
            )
    return layer_crs


def _as_input_crs(c) -> CRS:
    try:
        return CRS.from_user_input(c)
    except Exception:
        raise InputError(f"--input-crs {c!r} is not a CRS pyproj understands (try e.g. EPSG:4326)") from None


def _decode_points(col):
    """WKB (arrow binary array or object array) → full-length x, y; NaN for null or empty points."""
    if isinstance(col, _XY):
        return col.x.astype(float), col.y.astype(float)
    fast = _decode_wkb_points_arrow(col)
    if fast is not None:
        return fast
    if hasattr(col, "to_numpy"):
        col = col.to_numpy(zero_copy_only=False)
    arr = np.asarray(col, dtype=object)
    null = np.array([v is None for v in arr], dtype=bool) if arr.size else np.zeros(0, bool)
    geoms = shapely.from_wkb(arr[~null], on_invalid="raise")
    _check_point_types(shapely.get_type_id(geoms))
    coords = shapely.get_coordinates(geoms)
    has = shapely.get_num_coordinates(geoms) > 0  # empty points have no coordinate
    gx = np.full(geoms.size, np.nan)
    gy = np.full(geoms.size, np.nan)
    gx[has], gy[has] = coords[:, 0], coords[:, 1]
    xs = np.full(arr.size, np.nan)
    ys = np.full(arr.size, np.nan)
    xs[~null], ys[~null] = gx, gy
    return xs, ys


def _decode_wkb_points_arrow(col):
    """Vectorised decoding of 2-D little-endian WKB points from an arrow binary array.

    Returns full-length ``(x, y)`` (NaN for nulls), or ``None`` when the array holds anything
    else (Z/M points, EWKB, big-endian, other geometry types): the caller
    then takes the general shapely path.
    """
    try:
        import pyarrow as pa
    except ImportError:  # pragma: no cover
        return None
    if not isinstance(col, pa.Array) or not (pa.types.is_binary(col.type) or pa.types.is_large_binary(col.type)):
        return None
    n = len(col)
    if n == 0:
        return np.zeros(0), np.zeros(0)
    bufs = col.buffers()
    off_dtype = np.int64 if pa.types.is_large_binary(col.type) else np.int32
    offsets = np.frombuffer(bufs[1], dtype=off_dtype, count=n + 1, offset=col.offset * off_dtype().itemsize)
    if col.null_count == 0:
        # the usual case: contiguous 21-byte records, read in place as a packed record array
        if offsets[-1] - offsets[0] != 21 * n or not np.all(np.diff(offsets) == 21):
            return None
        rec = np.frombuffer(bufs[2], dtype=_WKB_POINT, count=n, offset=int(offsets[0]))
        if not (np.all(rec["order"] == 1) and np.all(rec["type"] == 1)):
            return None
        return rec["x"].copy(), rec["y"].copy()
    valid = ~np.asarray(col.is_null())
    if not np.all(np.diff(offsets)[valid] == 21):
        return None
    starts = offsets[:-1][valid].astype(np.int64)
    data = np.frombuffer(bufs[2], dtype=np.uint8)
    rec = data[starts[:, None] + np.arange(21)[None, :]].copy().view(_WKB_POINT).ravel()
    if not (np.all(rec["order"] == 1) and np.all(rec["type"] == 1)):
        return None
    xs = np.full(n, np.nan)
    ys = np.full(n, np.nan)
    xs[valid], ys[valid] = rec["x"], rec["y"]
    return xs, ys


#: A little-endian 2-D WKB point: byte order, geometry type, x, y (21 bytes, packed).
_WKB_POINT = np.dtype([("order", "u1"), ("type", "<u4"), ("x", "<f8"), ("y", "<f8")])


def _check_point_types(type_ids):
    bad = np.setdiff1d(np.unique(type_ids), [0])
    if bad.size:
        names = {1: "LineString", 2: "LinearRing", 3: "Polygon", 4: "MultiPoint", 5: "MultiLineString",
                 6: "MultiPolygon", 7: "GeometryCollection"}
        kinds = ", ".join(names.get(int(b), str(b)) for b in bad)
        hint = (" (split multipoints into one point per row, and if one person can have several points "
                "set --max-points-per-record)") if 4 in bad else ""
        raise InputError(f"the input has {kinds} geometries; dpgeo needs a layer of points{hint}")


# -- writers -----------------------------------------------------------------------

def output_driver(path, driver=None) -> str:
    """``"GPKG"`` or ``"GeoJSON"`` from ``driver`` or the file extension."""
    if driver:
        d = {"gpkg": "GPKG", "geopackage": "GPKG", "geojson": "GeoJSON", "json": "GeoJSON"}.get(driver.lower())
        if d is None:
            raise OutputError(f"output driver must be GPKG or GeoJSON, got {driver!r}")
        return d
    low = os.fspath(path).lower()
    if low.endswith(".gpkg"):
        return "GPKG"
    if low.endswith((".geojson", ".json")):
        return "GeoJSON"
    raise OutputError(f"cannot tell the output format of {os.fspath(path)!r}: use a .gpkg or .geojson name")


def write_layer(gdf, path, metadata: dict, *, driver=None, crs=None, layer=None, engine="auto") -> str:
    """Write a cluster layer atomically, with its metadata.

    Parameters
    ----------
    gdf : geopandas.GeoDataFrame
        The cluster layer (any CRS).
    path : str or os.PathLike
    metadata : dict
        JSON-serialisable privacy metadata.
    driver : {"GPKG", "GeoJSON"}, optional
        Default from the extension.
    crs : optional
        Output CRS for a GeoPackage (default: the layer's). GeoJSON is always
        EPSG:4326 (RFC 7946); asking for another CRS is an error.
    layer : str, optional
        GeoPackage layer name (default: the file's stem).
    engine : {"auto", "pyogrio", "fiona"}, default "auto"
        GDAL binding that writes a GeoPackage (``"auto"``: pyogrio if
        installed, else fiona); both write the same layer, options and
        metadata. GeoJSON is written without one.

    Returns
    -------
    str
        The path written.

    Raises
    ------
    OutputError
        Bad driver or folder, the engine asked for is not installed, or the
        write failed (then no file is left behind).
    ParameterError
        Unknown ``engine``.
    """
    path = os.fspath(path)
    drv = output_driver(path, driver)
    eng = _pick_engine(engine, needed=drv == "GPKG", write=True)
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise OutputError(f"output folder {folder!r} does not exist")
    if drv == "GeoJSON":
        if crs is not None and not CRS.from_user_input(crs).equals(CRS.from_epsg(4326), ignore_axis_order=True):
            raise OutputError("GeoJSON output is always EPSG:4326 (RFC 7946); drop --out-crs or write a .gpkg")
        out = gdf.to_crs(4326)
        out["geometry"] = shapely.orient_polygons(np.asarray(out.geometry.values)) if hasattr(
            shapely, "orient_polygons") else out.geometry.values
        out["geometry"] = shapely.set_precision(np.asarray(out.geometry.values), 1e-7, mode="pointwise")
        fc = json.loads(out.to_json(drop_id=True))
        fc.pop("crs", None)
        fc[METADATA_MEMBER] = metadata
        payload = json.dumps(fc, separators=(",", ":"), allow_nan=False)
        _atomic(path, folder, ".geojson", lambda tmp: _write_text(tmp, payload))
    else:
        out = gdf if crs is None else gdf.to_crs(crs)
        name = layer or os.path.splitext(os.path.basename(path))[0]
        meta_json = json.dumps(metadata, separators=(",", ":"))
        summary = (
            f"dpgeo {metadata.get('mechanism', '')} layer; differentially_private="
            f"{str(metadata.get('differentially_private')).lower()}; epsilon={metadata.get('epsilon')}"
        )

        # GDAL layer metadata (the gpkg_metadata table) and gpkg_contents description/identifier
        tags = {METADATA_MEMBER: meta_json,
                "DIFFERENTIALLY_PRIVATE": str(bool(metadata.get("differentially_private"))).upper()}
        options = {"DESCRIPTION": summary, "IDENTIFIER": name}

        def _w(tmp):
            if eng == "fiona":
                import warnings

                with warnings.catch_warnings():  # an empty layer (no cluster) is a valid result
                    warnings.filterwarnings("ignore", "You are attempting to write an empty DataFrame")
                    # fiona passes extra keywords on as creation options and sets the tags as layer metadata
                    out.to_file(tmp, driver="GPKG", engine="fiona", layer=name, metadata=tags, **options)
            else:
                import pyogrio

                pyogrio.write_dataframe(out, tmp, layer=name, driver="GPKG", layer_metadata=tags,
                                        layer_options=options)

        _atomic(path, folder, ".gpkg", _w)
    return path


def _write_text(path, text):
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def _atomic(path, folder, suffix, writer):
    fd, tmp = tempfile.mkstemp(prefix=".dpgeo-", suffix=suffix, dir=folder)
    os.close(fd)
    os.unlink(tmp)  # let the driver create it
    try:
        writer(tmp)
        os.replace(tmp, path)
    except BaseException as exc:
        for p in (tmp, tmp + "-wal", tmp + "-shm", tmp + "-journal"):
            if os.path.exists(p):
                os.unlink(p)
        if isinstance(exc, (OutputError, KeyboardInterrupt)):
            raise
        raise OutputError(f"cannot write {path!r}: {_short(exc)}") from exc


def read_layer_metadata(path, *, engine="auto") -> dict:
    """The dpgeo metadata stored in a GeoPackage or GeoJSON written by dpgeo.

    Parameters
    ----------
    path : str or os.PathLike
        A ``.gpkg`` or ``.geojson`` written by dpgeo (with either engine).
    engine : {"auto", "pyogrio", "fiona"}, default "auto"
        GDAL binding that reads a GeoPackage's layer metadata; GeoJSON is
        read without one.

    Raises
    ------
    InputError
        No such file, not a dpgeo output, or the engine asked for is not installed.
    """
    p = os.fspath(path)
    _pick_engine(engine, needed=False, write=False)  # a bad or missing engine is reported first
    if not os.path.exists(p):
        raise InputError(f"{p!r} does not exist")
    try:
        drv = output_driver(p)
    except OutputError:
        raise InputError(f"{p!r} is neither a .gpkg nor a .geojson written by dpgeo") from None
    eng = _pick_engine(engine, needed=drv == "GPKG", write=False)
    if drv == "GeoJSON":
        with open(p, encoding="utf-8") as f:
            try:
                doc = json.load(f)
            except json.JSONDecodeError as exc:
                raise InputError(f"{p!r} is not valid JSON: {exc}") from None
        md = doc.get(METADATA_MEMBER) if isinstance(doc, dict) else None
    else:
        try:
            text = _metadata_item(p, eng)
            md = None if text is None else json.loads(text)
        except Exception as exc:
            raise InputError(f"cannot read the metadata of {p!r}: {_short(exc)}") from None
    if md is None:
        raise InputError(f"{p!r} has no dpgeo metadata (was it written by dpgeo?)")
    return md


def _metadata_item(path, engine):
    """The first layer's ``METADATA_MEMBER`` item of GDAL layer metadata (default domain), or None."""
    if engine == "fiona":
        import fiona

        with fiona.Env():
            for name in fiona.listlayers(path):
                with fiona.open(path, layer=name) as src:
                    tags = src.tags() or {}
                if METADATA_MEMBER in tags:
                    return tags[METADATA_MEMBER]
        return None
    import pyogrio

    for name, _ in pyogrio.list_layers(path):
        tags = pyogrio.read_info(path, layer=name).get("layer_metadata") or {}
        if METADATA_MEMBER in tags:
            return tags[METADATA_MEMBER]
    return None


def _short(exc) -> str:
    s = str(exc).strip().splitlines()
    return s[0] if s else type(exc).__name__
