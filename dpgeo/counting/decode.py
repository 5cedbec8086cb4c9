"""Coordinates out of raw columns, and the record-level reasons for dropping a record.

Every reader (:mod:`~dpgeo.counting.layers`, :mod:`~dpgeo.counting.tables`)
turns one batch of raw records into a :class:`PointBatch`: the ``x, y`` of
the usable points in the input's own CRS, their person identifiers, and the
number of records dropped for each reason. A record is dropped — never an
error — when its geometry is null, empty or not a point, when a coordinate
does not parse as a number or is not finite, when a longitude/latitude is
out of range, or when its person identifier is missing. Whether *too many*
records were dropped is decided once, for the whole input, by
:func:`dpgeo.counting.cells.count_points`.

Messages raised here name files, columns, types and counts, never a value
of a record.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

import numpy as np
from pyproj import CRS

from ..errors import InputError
from .values import plain_array

__all__ = ["PointBatch", "DROP_REASONS", "describe_drops"]

#: Reasons a record is dropped, and how the owner's report words them.
DROP_REASONS = {
    "null_geometry": "without geometry",
    "empty_geometry": "with an empty geometry",
    "non_point": "with a non-point geometry",
    "malformed_row": "that do not parse as a row of the table",
    "unreadable_feature": "that the format's library cannot read",
    "missing_coordinate": "with a missing coordinate",
    "unparsed": "with a coordinate that is not a number",
    "decimal_comma": ("with a decimal comma in a coordinate (44,97 for 44.97: save the file with a point for "
                      "decimals, or with the coordinates as numbers)"),
    "non_finite": "with a NaN or infinite coordinate",
    "lon_out_of_range": "with a longitude beyond ±180°",
    "lat_out_of_range": "with a latitude beyond ±90°",
    "no_person": "without a person identifier",
    "missing_time": "without a time",
    "unparsed_time": "with a time that does not read as one",
    "time_outside_bounds": "with a time outside the series' bounds",
    "unprojectable": "that cannot be projected to the working CRS",
}

LON_NAMES = ("lon", "lng", "long", "longitude", "x_lon", "decimallongitude", "lon_wgs84")
LAT_NAMES = ("lat", "latitude", "y_lat", "decimallatitude", "lat_wgs84")
X_NAMES = ("x", "easting", "east", "xcoord", "x_coord", "point_x")
Y_NAMES = ("y", "northing", "north", "ycoord", "y_coord", "point_y")


@dataclass
class PointBatch:
    """The usable points of one batch of records (private).

    Attributes
    ----------
    x, y : numpy.ndarray
        float64 coordinates in the input's CRS of the records kept.
    person : numpy.ndarray or None
        Person identifier of each kept point (when a person column is read).
    n_read : int
        Records in the batch.
    drops : dict
        Records dropped, by reason (keys of :data:`DROP_REASONS`).
    n_swap_plausible : int
        Records of a lon/lat input whose latitude is beyond ±90 but which
        would be in range with the two coordinates exchanged.
    non_point_kinds : set
        Names of the non-point geometry types seen (and dropped).
    period : numpy.ndarray or None
        int64 public period of each kept point, for a series (:mod:`~dpgeo.counting.times`).
    """

    x: np.ndarray
    y: np.ndarray
    person: np.ndarray | None
    n_read: int
    drops: dict = field(default_factory=dict)
    n_swap_plausible: int = 0
    non_point_kinds: set = field(default_factory=set)
    period: np.ndarray | None = None


def add_drops(total: dict, more: dict) -> dict:
    for k, v in more.items():
        if v:
            total[k] = total.get(k, 0) + int(v)
    return total


def describe_drops(drops: dict) -> str:
    """``"3 without geometry, 2 with a NaN or infinite coordinate"`` (only the reasons that occurred)."""
    parts = [f"{n:,} {DROP_REASONS.get(k, k)}" for k, n in drops.items() if n]
    return ", ".join(parts) if parts else "none"


# -- finishing a batch ---------------------------------------------------------------

def finish_batch(x, y, n_read, crs: CRS, *, person=None, person_null=None, drops=None, valid=None,
                 kinds=(), period=None) -> PointBatch:
    """Keep the records with usable coordinates (and a person, and a time in a period); count the others by reason.

    ``x, y`` are full-length float arrays (NaN where the reader already knows
    a record is unusable: then ``valid`` is False there and the reason is
    already in ``drops``). ``period`` (a series) is the full-length period of
    each record, negative for a record dropped for its time
    (:func:`~dpgeo.counting.times.periods_from_arrow`); each record is
    counted under one reason only.
    """
    drops = dict(drops or {})
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    ok = np.ones(x.size, dtype=bool) if valid is None else np.asarray(valid, dtype=bool).copy()
    if period is not None:
        from .times import time_drops

        period = np.asarray(period, dtype=np.int64)
        tbad = ok & (period < 0)
        add_drops(drops, time_drops(period, tbad))
        ok &= ~tbad
    fin = np.isfinite(x) & np.isfinite(y)
    bad = ok & ~fin
    drops["non_finite"] = drops.get("non_finite", 0) + int(bad.sum())
    ok &= fin
    n_swap = 0
    if crs is not None and crs.is_geographic and ok.any():
        ax, ay = np.abs(x), np.abs(y)
        lon_bad = ok & (ax > 180)
        lat_bad = ok & ~lon_bad & (ay > 90)
        drops["lon_out_of_range"] = drops.get("lon_out_of_range", 0) + int(lon_bad.sum())
        drops["lat_out_of_range"] = drops.get("lat_out_of_range", 0) + int(lat_bad.sum())
        n_swap = int((lat_bad & (ax <= 90) & (ay <= 180)).sum())
        ok &= ~(lon_bad | lat_bad)
    if person is not None:
        if person_null is None:
            import pandas as pd

            person_null = np.asarray(pd.isna(person))
        miss = ok & np.asarray(person_null, dtype=bool)
        drops["no_person"] = drops.get("no_person", 0) + int(miss.sum())
        ok &= ~miss
    drops = {k: v for k, v in drops.items() if v}
    kinds = set(kinds)
    if ok.all():
        return PointBatch(x, y, person, int(n_read), drops, n_swap, kinds, period)
    return PointBatch(x[ok], y[ok], None if person is None else np.asarray(person)[ok], int(n_read), drops, n_swap,
                      kinds, None if period is None else period[ok])


# -- CRS ----------------------------------------------------------------------------------

def resolve_crs(crs, input_crs, what) -> CRS:
    """The CRS a layer declares, checked against ``--input-crs``; ``--input-crs`` when it declares none."""
    if crs is None or crs == "":
        if input_crs is None:
            raise InputError(f"{what} has no CRS; give its CRS with --input-crs (e.g. --input-crs EPSG:4326)")
        return as_input_crs(input_crs)
    try:
        layer_crs = crs if isinstance(crs, CRS) else CRS.from_user_input(crs)
    except Exception:
        raise InputError(f"{what} has a CRS pyproj cannot read; give --input-crs or fix the file") from None
    if input_crs is not None:
        given = as_input_crs(input_crs)
        if not given.equals(layer_crs, ignore_axis_order=True):
            raise InputError(
                f"{what} declares {layer_crs.name} but --input-crs says {given.name}; "
                "drop --input-crs (it is only for layers without a CRS) or fix the file"
            )
    return layer_crs


def as_input_crs(c) -> CRS:
    if isinstance(c, CRS):
        return c
    try:
        return CRS.from_user_input(c)
    except Exception:
        raise InputError(f"--input-crs {c!r} is not a CRS pyproj understands (try e.g. EPSG:4326)") from None


def geoparquet_crs(meta: dict):
    """The CRS of a GeoParquet column's metadata: a missing key means OGC:CRS84, null means unknown."""
    crs = meta["crs"] if "crs" in meta else "OGC:CRS84"
    if isinstance(crs, dict):
        crs = json.dumps(crs)
    return crs


# -- coordinate columns -----------------------------------------------------------------------

_NUMBER = re.compile(r"^\s*[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\s*$")
_DATE = re.compile(r"^\s*\d{1,4}[-/.]\d{1,2}[-/.]\d{1,4}")


def looks_like_data(name) -> bool:
    """Whether a column *name* is more likely a value of a record (a number, a date, nothing)."""
    s = str(name)
    return s.strip() == "" or bool(_NUMBER.match(s)) or bool(_DATE.match(s)) or s.lower() in ("nan", "null")


#: A name that may well be a value (a first row of data read as the header): words with spaces, an e-mail,
#: an identifier mixing letters, digits and dashes.
_VALUEISH = re.compile(r"\w\s+\w|@|[A-Za-z].*\d.*[-/]|[-/].*\d")


def column_list(names, limit=12) -> str:
    """Names for a message, or only their number when some of them may be values of a record.

    A file without a header row has a record where its column names should
    be; a name that looks like a number, a date, words with spaces or an
    identifier is then not shown.
    """
    names = list(names)
    if any(looks_like_data(n) or _VALUEISH.search(str(n)) for n in names):
        return f"{len(names)} column{'' if len(names) == 1 else 's'}"
    more = f", ... ({len(names)} in all)" if len(names) > limit else ""
    return "columns: " + ", ".join(map(str, names[:limit])) + more


def check_header(names, what):
    """Refuse a table whose first row holds values instead of column names."""
    names = list(names)
    n_data = sum(looks_like_data(n) for n in names)
    if n_data and n_data * 2 >= len(names):
        raise InputError(  # no count of its numbers: the row is a record, and a service shows this message
            f"the first row of {what} looks like data, not column names (numbers, dates or empty fields): "
            "add a header row naming the columns (e.g. lon,lat)"
        )


def pick_columns(names, xcol, ycol, person, input_crs, what):
    """``(xcol, ycol, crs)`` for a table: given columns, or detected lon/lat (EPSG:4326) or x/y names."""
    names = [str(n) for n in names]
    if xcol is None and ycol is None:
        check_header(names, what)
    counts = {}
    for n in names:
        counts[n] = counts.get(n, 0) + 1
    lower = {}
    for n in names:
        lower.setdefault(n.lower().strip(), n)
    assumed = None
    if xcol is None and ycol is None:
        lon = next((lower[n] for n in LON_NAMES if n in lower), None)
        lat = next((lower[n] for n in LAT_NAMES if n in lower), None)
        if lon and lat:
            xcol, ycol, assumed = lon, lat, "EPSG:4326"
        else:
            xcol = next((lower[n] for n in X_NAMES if n in lower), None)
            ycol = next((lower[n] for n in Y_NAMES if n in lower), None)
        if not (xcol and ycol):
            raise InputError(f"cannot find coordinate columns in {what} ({column_list(names)}); "
                             "name them with --x COLUMN --y COLUMN")
    else:
        if not (xcol and ycol):
            raise InputError("give both --x and --y (the coordinate columns)")
        for c in (xcol, ycol):
            if c not in counts:
                raise InputError(f"column {c!r} is not in {what} ({column_list(names)})")
        if xcol.lower().strip() in LON_NAMES and ycol.lower().strip() in LAT_NAMES:
            assumed = "EPSG:4326"  # named longitude/latitude: the same assumption as when found by name
    if person is not None and person not in counts:
        raise InputError(f"person column {person!r} is not in {what} ({column_list(names)})")
    dup = sorted({c for c in (xcol, ycol, person) if c is not None and counts.get(c, 0) > 1})
    if dup:
        raise InputError(f"column name {dup[0]!r} appears {counts[dup[0]]} times in {what}; give each column "
                         "a distinct name")
    if xcol == ycol:
        raise InputError(f"--x and --y name the same column {xcol!r}")
    if input_crs is not None:
        crs = as_input_crs(input_crs)
    elif assumed:
        crs = CRS.from_user_input(assumed)
    else:
        raise InputError(f"the columns {xcol!r}/{ycol!r} of {what} carry no CRS; give --input-crs "
                         "(e.g. --input-crs EPSG:26915, or EPSG:4326 for longitude/latitude)")
    return xcol, ycol, crs


def check_time_column(names, column, what):
    """Refuse a series whose time column is missing from a table or layer, or appears twice."""
    if column is None:
        return
    names = [str(n) for n in names]
    if column not in names:
        raise InputError(f"time column {column!r} is not in {what} ({column_list(names)})")
    if names.count(column) > 1:
        raise InputError(f"column name {column!r} appears {names.count(column)} times in {what}; give each column "
                         "a distinct name")


def numbers_from_arrow(col):
    """float64 values of an arrow column of numbers or text: ``(values, missing, unparsed)``.

    ``missing``: null or empty cells; ``unparsed``: text that is not a number.
    Both are NaN in ``values``. Never raises on a value (and so never shows one).
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    col = plain_array(col)
    t = col.type
    n = len(col)
    none = np.zeros(n, dtype=bool)
    if pa.types.is_floating(t) or pa.types.is_integer(t) or pa.types.is_decimal(t):
        v = col.cast(pa.float64(), safe=False) if not pa.types.is_float64(t) else col  # 2^63 - 1: ≈ 9.2e18
        return _filled(v), (np.asarray(col.is_null()) if col.null_count else none), none
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        missing = np.asarray(col.is_null()) if col.null_count else none
        try:
            return _filled(pc.cast(col, pa.float64())), missing, none
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            pass
        s = pc.utf8_trim_whitespace(col)
        good = np.asarray(pc.fill_null(pc.match_substring_regex(s, _NUMBER_RE2), False))
        empty = np.asarray(pc.fill_null(pc.equal(pc.utf8_length(s), 0), True))
        vals = pc.cast(pc.if_else(pa.array(good), s, pa.scalar(None, s.type)), pa.float64())
        return _filled(vals), empty, ~good & ~empty
    if pa.types.is_null(t):
        return np.full(n, np.nan), ~none, none
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):  # text read as bytes (CSV): UTF-8 record by record
        from .csvlines import text_of_binary

        text, not_utf8, _ = text_of_binary(col)
        v, missing, unparsed = numbers_from_arrow(text)
        if not_utf8 is not None:
            missing, unparsed = missing & ~not_utf8, unparsed | not_utf8
        return v, missing, unparsed
    raise InputError(f"a coordinate column has type {t}; it must hold numbers")


_NUMBER_RE2 = r"^[-+]?((\d+\.?\d*|\.\d+)([eE][-+]?\d+)?|[nN][aA][nN]|[iI][nN][fF]|[iI][nN][fF][iI][nN][iI][tT][yY])$"


def _decimal_comma(col) -> np.ndarray:
    """Which text cells read as a number written with a decimal comma (``44,97``, ``-93,2651``)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
    if not (pa.types.is_string(col.type) or pa.types.is_large_string(col.type)):
        return np.zeros(len(col), dtype=bool)
    s = pc.utf8_trim_whitespace(col)
    return np.asarray(pc.fill_null(pc.match_substring_regex(s, r"^[-+]?\d+,\d+$"), False))


def table_batch(xcol, ycol, n_read, crs, *, person_col=None, time_col=None, time=None):
    """A :class:`PointBatch` from the coordinate (and person, and time) columns of a table batch.

    ``time`` is the series' :class:`~dpgeo.counting.times.TimeSpec`, ``time_col`` its column.
    """
    x, xmiss, xbad = numbers_from_arrow(xcol)
    y, ymiss, ybad = numbers_from_arrow(ycol)
    unparsed = xbad | ybad
    missing = (xmiss | ymiss) & ~unparsed
    valid = ~(unparsed | missing)
    comma = (_decimal_comma(xcol) | _decimal_comma(ycol)) & unparsed if unparsed.any() else unparsed
    drops = {"unparsed": int((unparsed & ~comma).sum()), "missing_coordinate": int(missing.sum())}
    if comma.any():  # said apart: the fix is the file's decimal separator
        drops["decimal_comma"] = int(comma.sum())
    person = person_null = None
    if person_col is not None:
        person, person_null = person_from_arrow(person_col)
    period = time.period_of(time_col)[0] if time is not None else None
    return finish_batch(x, y, n_read, crs, person=person, person_null=person_null, drops=drops, valid=valid,
                        period=period)


def numbers_of(values):
    """float64 coordinates of values in memory, record by record: ``(values, unusable)``.

    An array of numbers as it is; any other sequence value by value (a value
    that is not a number is NaN and ``unusable``, alone).
    """
    try:
        v = np.asarray(values, dtype=np.float64).ravel()
        return v, None
    except (TypeError, ValueError, OverflowError):
        pass
    from .values import arrow_of

    v, missing, unparsed = numbers_from_arrow(arrow_of(values, "number"))
    return v, missing | unparsed


def _filled(arr):
    import pyarrow.compute as pc

    if arr.null_count:
        arr = pc.fill_null(arr, float("nan"))
    return arr.to_numpy(zero_copy_only=False).astype(np.float64, copy=False)


def person_from_arrow(col):
    """``(values, is_missing)`` of a person column: nulls and NaN are missing."""
    import pyarrow as pa
    import pyarrow.compute as pc

    col = plain_array(col)
    if pa.types.is_binary(col.type) or pa.types.is_large_binary(col.type):  # text read as bytes (CSV)
        from .csvlines import text_of_binary

        col, not_utf8, raw = text_of_binary(col)
        if not_utf8 is not None:  # kept, its bytes escaped: an identifier need not be text
            values = col.to_numpy(zero_copy_only=False)
            for i, v in raw.items():
                values[i] = v.decode("utf-8", "backslashreplace")
            return values, np.asarray(col.is_null()) & ~not_utf8
    if pa.types.is_floating(col.type):
        missing = np.asarray(pc.fill_null(pc.is_nan(col), True)) | np.asarray(col.is_null())
    else:
        missing = np.asarray(col.is_null())
    if pa.types.is_large_string(col.type):
        col = col.cast(pa.string()) if len(col) and _fits_32(col) else col
    values = col.to_numpy(zero_copy_only=False)
    return values, missing


def _fits_32(col):
    return col.nbytes < (1 << 31) - 1


# -- WKB and GeoJSON geometries --------------------------------------------------------------------

_TYPE_NAMES = {0: "Point", 1: "LineString", 2: "LinearRing", 3: "Polygon", 4: "MultiPoint", 5: "MultiLineString",
               6: "MultiPolygon", 7: "GeometryCollection"}
_TYPE_IDS = {v: k for k, v in _TYPE_NAMES.items()}

#: A little-endian 2-D WKB point: byte order, geometry type, x, y (21 bytes, packed).
WKB_POINT = np.dtype([("order", "u1"), ("type", "<u4"), ("x", "<f8"), ("y", "<f8")])


def non_point_error(kinds):
    """The error for a layer *declared* (or found to be) of non-point geometries."""
    kinds = sorted(set(kinds))
    hint = (" (split multipoints into one point per row, and if one person can have several points "
            "set --max-points-per-record)") if "MultiPoint" in kinds else ""
    return InputError(f"the input has {', '.join(kinds)} geometries; dpgeo needs a layer of points{hint}")


def declared_geometry_check(geometry_type):
    """Refuse a layer whose declared geometry type is not points (``None``/unknown types pass)."""
    if not geometry_type:
        return
    t = str(geometry_type).replace(" Z", "").replace(" M", "").replace("ZM", "").strip()
    if t in ("Point", "Unknown", "Geometry", "None", "") or t.startswith("Unknown"):
        return
    if t in _TYPE_IDS:
        raise non_point_error([t])


def decode_wkb(col):
    """WKB (an arrow binary column) → full-length ``x, y`` plus drop reasons and a validity mask.

    Returns ``(x, y, valid, drops, kinds)``: ``valid`` False for null, empty
    or non-point geometries (counted in ``drops``), ``kinds`` the names of
    the non-point types seen.
    """
    import pyarrow as pa

    if isinstance(col, pa.ChunkedArray):
        parts = [decode_wkb(c) for c in col.chunks]
        if not parts:
            return np.zeros(0), np.zeros(0), np.zeros(0, bool), {}, set()
        drops, kinds = {}, set()
        for p in parts:
            add_drops(drops, p[3])
            kinds |= p[4]
        return (np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]),
                np.concatenate([p[2] for p in parts]), drops, kinds)
    fast = _decode_wkb_points_fast(col)
    if fast is not None:
        x, y, valid = fast
        drops = {"null_geometry": int((~valid).sum())}
        empty = valid & np.isnan(x) & np.isnan(y)  # WKB writes an empty point as POINT (NaN NaN)
        if empty.any():
            drops["empty_geometry"] = int(empty.sum())
            valid = valid & ~empty
        return x, y, valid, drops, set()
    return _decode_wkb_general(col)


def _decode_wkb_points_fast(col):
    """Vectorised decoding of 2-D little-endian WKB points, in place; None for anything else."""
    import pyarrow as pa

    if not isinstance(col, pa.Array) or not (pa.types.is_binary(col.type) or pa.types.is_large_binary(col.type)):
        return None
    n = len(col)
    if n == 0:
        return np.zeros(0), np.zeros(0), np.zeros(0, bool)
    bufs = col.buffers()
    off_dtype = np.int64 if pa.types.is_large_binary(col.type) else np.int32
    offsets = np.frombuffer(bufs[1], dtype=off_dtype, count=n + 1, offset=col.offset * np.dtype(off_dtype).itemsize)
    if col.null_count == 0:
        if offsets[-1] - offsets[0] != 21 * n or not np.all(np.diff(offsets) == 21):
            return None
        rec = np.frombuffer(bufs[2], dtype=WKB_POINT, count=n, offset=int(offsets[0]))
        if not (np.all(rec["order"] == 1) and np.all(rec["type"] == 1)):
            return None
        return rec["x"].copy(), rec["y"].copy(), np.ones(n, dtype=bool)
    valid = ~np.asarray(col.is_null())
    if not np.all(np.diff(offsets)[valid] == 21):
        return None
    starts = offsets[:-1][valid].astype(np.int64)
    data = np.frombuffer(bufs[2], dtype=np.uint8)
    rec = data[starts[:, None] + np.arange(21)[None, :]].copy().view(WKB_POINT).ravel()
    if not (np.all(rec["order"] == 1) and np.all(rec["type"] == 1)):
        return None
    xs = np.full(n, np.nan)
    ys = np.full(n, np.nan)
    xs[valid], ys[valid] = rec["x"], rec["y"]
    return xs, ys, valid


def _decode_wkb_general(col):
    """Any WKB through shapely: null, empty and non-point geometries are marked invalid and counted."""
    import shapely

    if hasattr(col, "to_numpy"):
        col = col.to_numpy(zero_copy_only=False)
    arr = np.asarray(col, dtype=object)
    n = arr.size
    null = np.array([v is None for v in arr], dtype=bool) if n else np.zeros(0, bool)
    geoms = np.empty(n, dtype=object)
    if (~null).any():
        try:
            geoms[~null] = shapely.from_wkb(arr[~null], on_invalid="ignore")
        except Exception:
            raise InputError("the geometry column does not hold WKB geometries") from None
    unreadable = ~null & np.asarray(shapely.is_missing(geoms))
    tid = np.full(n, -1, dtype=np.int64)
    have = ~null & ~unreadable
    tid[have] = shapely.get_type_id(geoms[have])
    point = tid == 0
    empty = np.zeros(n, dtype=bool)
    if point.any():
        empty[point] = shapely.is_empty(geoms[point])
    valid = point & ~empty
    xs = np.full(n, np.nan)
    ys = np.full(n, np.nan)
    if valid.any():
        c = shapely.get_coordinates(geoms[valid])
        xs[valid], ys[valid] = c[:, 0], c[:, 1]
    other = have & ~point
    kinds = {_TYPE_NAMES.get(int(t), str(t)) for t in np.unique(tid[other])}
    drops = {"null_geometry": int(null.sum() + unreadable.sum()), "empty_geometry": int(empty.sum()),
             "non_point": int(other.sum())}
    return xs, ys, valid, drops, kinds


def decode_geojson(geoms):
    """GeoJSON-like geometries (``.type``, ``.coordinates``; fiona) → ``x, y, valid, drops, kinds``."""
    n = len(geoms)
    xs = np.full(n, np.nan)
    ys = np.full(n, np.nan)
    valid = np.zeros(n, dtype=bool)
    drops = {"null_geometry": 0, "empty_geometry": 0, "non_point": 0}
    kinds = set()
    for i, g in enumerate(geoms):  # fiona hands out one Python object per feature anyway
        if g is None:
            drops["null_geometry"] += 1
        elif g.type != "Point":
            drops["non_point"] += 1
            kinds.add(g.type)
        elif g.coordinates is None or len(g.coordinates) < 2:
            drops["empty_geometry"] += 1
        else:
            xs[i], ys[i] = g.coordinates[0], g.coordinates[1]
            valid[i] = True
    return xs, ys, valid, drops, kinds


def geoarrow_points(col):
    """GeoArrow native points (struct<x, y, ...>) → ``x, y, valid, drops, kinds``."""
    import pyarrow as pa

    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
    xs = _filled(col.field("x").cast(pa.float64()))
    ys = _filled(col.field("y").cast(pa.float64()))
    null = np.asarray(col.is_null())
    xs[null] = np.nan
    ys[null] = np.nan
    return xs, ys, ~null, {"null_geometry": int(null.sum())}, set()
