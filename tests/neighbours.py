"""The neighbour fuzzer: a base input D and D′ = D plus one record drawn by hypothesis, for every input path.

The property (``docs/privacy.md``, "One record in, at most one record out"):
the multiset of records a reader *uses* from D′ — each kept record's
coordinates, public period and person — differs from D's by at most the new
record, wherever it is inserted (start, middle, end); and through the command
line with ``--unattended`` the exit code, the standard error and the files
written are the same for D and D′.

A record is what the format calls one: a physical line of a CSV (so the
drawn line holds no line end: line ends separate records; with
``quoted_newlines`` a record follows its quotes, and may hold line breaks
inside balanced quotes), a feature of a GeoJSON, GeoPackage or Shapefile, a
row of a Parquet file (in a folder, a new file of one row, of any column
types), a row of a Dask or pandas frame, a value of each array given in
memory. The drawn values are any: quotes, delimiters, NUL, byte-order marks,
bytes that are not UTF-8, very long fields, NaN and infinities, huge and tiny
numbers, odd and out-of-range times, geometries of other types, empty and
null geometries, coordinates of another CRS.

Used by ``tests/test_neighbour_fuzzer.py`` (a bounded run) and
``benchmarks/fuzz_readers.py`` (a long one).
"""

from __future__ import annotations

import collections
import datetime as dt
import gzip
import json
import os
import shutil
import sqlite3
import struct

import numpy as np
from hypothesis import strategies as st

N_BASE = 24
#: Public study area (lon/lat) of the command-line runs.
DOMAIN = "-93.30,44.95,-93.20,45.00"
COLUMNS = ("lon", "lat", "t", "person", "note", "wkt")


def time_spec():
    from dpgeo.counting.times import TimeSpec
    from dpgeo.periods import make_periods

    return TimeSpec("t", make_periods("month", "2014-01-01", "2014-03-01", "America/New_York"))


def base_records(n=N_BASE, seed=0):
    """D: ``n`` records with every column type dpgeo reads (coordinates, WKT, time, person, free text)."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        lon, lat = round(float(rng.uniform(-93.29, -93.21)), 6), round(float(rng.uniform(44.96, 44.99)), 6)
        t = dt.datetime(2014, 1, 1) + dt.timedelta(seconds=int(rng.integers(0, 55 * 86400)))
        out.append({"lon": lon, "lat": lat, "t": t.isoformat(), "person": f"p{i % 7}", "note": f"note {i}",
                    "wkt": f"POINT ({lon} {lat})"})
    return out


# -- values ---------------------------------------------------------------------------------------------------------

ODD_TEXT = ['"', '""', '"stop', 'a"b', ',', ';', '\t', '|', '\x00', '\ufeff', 'NaN', 'nan', 'inf', '-inf', '1e308',
            '-1e308', '5e-324', '1e-320', '9' * 400, 'NULL', 'NA', 'N/A', '', ' ', 'POINT EMPTY',
            'LINESTRING (0 0, 1 1)', '2014-02-30', '2014-13-01', '9999-12-31T23:59:59', '0000-01-01', '1000000000000',
            '-1e13', '1e13', '2014-03-09T02:30:00', '2014-11-02T01:30:00', '2014-01-05T10:00:00+25:00',
            '2014-01-05T10:00:00Z', '2014-01-05', '1389000000', '-93.25', '44.97', '500000', '5000000', 'x' * 5000,
            '\u202e', '\U0001f600', 'é', '\\', "'"]
ODD_FLOATS = [float("nan"), float("inf"), -float("inf"), 1e308, -1e308, 5e-324, -0.0, 0.0, 1e13, -93.25, 44.97,
              500000.0, 5000000.0, 181.0, -91.0, float(2 ** 63), 1e-300]


def odd_text():
    return st.one_of(st.sampled_from(ODD_TEXT), st.text(max_size=20),
                     st.lists(st.sampled_from(ODD_TEXT), min_size=1, max_size=4).map("".join))


def odd_float():
    return st.one_of(st.sampled_from(ODD_FLOATS), st.floats(), st.floats(-93.3, -93.2), st.floats(44.95, 45.0))


def odd_bytes():
    return st.one_of(st.binary(max_size=40), st.sampled_from([b"\xff\xfe", b"\xef\xbb\xbf", b"\x00", b"\xc3",
                                                              b"\xe9", b"\xed\xa0\x80", b"\xf4\x90\x80\x80"]))


def odd_field():
    """One CSV field as bytes."""
    return st.one_of(odd_text().map(lambda s: s.encode("utf-8", "surrogatepass")), odd_bytes(),
                     odd_float().map(lambda v: repr(v).encode()), st.integers().map(lambda v: str(v).encode()),
                     odd_text().map(lambda s: b'"' + s.encode("utf-8", "surrogatepass").replace(b'"', b'""') + b'"'))


def csv_line(delimiter=b","):
    """A line of CSV: fields of any bytes (a line end inside would make it two records: replaced by a space)."""
    plausible = st.tuples(odd_field(), odd_field(), odd_field(), odd_field()).map(
        lambda f: delimiter.join([b"-93.25", b"44.97", f[0], f[1], f[2], f[3]]))
    fields = st.lists(odd_field(), min_size=0, max_size=8).map(lambda fs: delimiter.join(fs))
    return st.one_of(plausible, fields, st.binary(max_size=80)).map(
        lambda b: b.replace(b"\n", b" ").replace(b"\r", b" "))


def quoted_csv_line():
    """A record of a CSV with quoted line breaks: balanced quotes, line breaks inside them."""
    inner = st.text(alphabet=st.sampled_from(list('ab,;"\n\r\x00 é')), max_size=20)
    return st.tuples(odd_float(), odd_float(), inner, inner).map(
        lambda v: b",".join([repr(v[0]).encode(), repr(v[1]).encode(), b"2014-01-05T10:00:00",
                             b'"' + v[2].encode().replace(b'"', b'""') + b'"',
                             b'"' + v[3].encode().replace(b'"', b'""') + b'"', b"x"]))


def odd_geometry():
    """A shapely geometry (or None) of any kind."""
    import shapely

    pts = st.tuples(odd_float(), odd_float()).map(lambda xy: shapely.Point(*xy))
    return st.one_of(pts, st.none(), st.sampled_from([
        shapely.Point(), shapely.from_wkt("LINESTRING (-93.25 44.97, -93.24 44.98)"),
        shapely.from_wkt("POLYGON ((-93.25 44.97, -93.24 44.97, -93.24 44.98, -93.25 44.97))"),
        shapely.from_wkt("MULTIPOINT ((-93.25 44.97), (-93.24 44.98))"), shapely.from_wkt("POINT Z (-93.25 44.97 5)"),
        shapely.from_wkt("GEOMETRYCOLLECTION (POINT (-93.25 44.97))"), shapely.Point(480000.0, 4980000.0),
        shapely.from_wkt("MULTIPOINT EMPTY")]))


def odd_wkb():
    import shapely

    return st.one_of(odd_geometry().map(lambda g: None if g is None else shapely.to_wkb(g)), odd_bytes())


def odd_value():
    """Any Python value a frame or an array in memory may hold."""
    return st.one_of(st.none(), odd_text(), odd_float(), st.integers(), odd_bytes(), st.booleans(),
                     st.datetimes(), st.sampled_from([dt.date(2014, 1, 5),
                                                      dt.datetime(2014, 1, 5, tzinfo=dt.timezone.utc), [1, 2], {"a": 1},
                                                      object()]))


def odd_json():
    scalar = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False),
                       odd_text())
    return st.recursive(scalar, lambda c: st.one_of(st.lists(c, max_size=3), st.dictionaries(st.text(max_size=3), c,
                                                                                             max_size=3)), max_leaves=5)


def odd_geojson_geometry():
    coords = st.floats(allow_nan=False, allow_infinity=False)
    return st.one_of(
        st.tuples(coords, coords).map(lambda c: {"type": "Point", "coordinates": list(c)}),
        st.sampled_from([None, {"type": "Point", "coordinates": []}, {"type": "Point", "coordinates": [-93.25]},
                         {"type": "Point", "coordinates": [-93.25, 44.97, 5]},
                         {"type": "LineString", "coordinates": [[-93.25, 44.97], [-93.24, 44.98]]},
                         {"type": "MultiPoint", "coordinates": [[-93.25, 44.97]]},
                         {"type": "Polygon", "coordinates": [[[-93.25, 44.97], [-93.24, 44.97], [-93.25, 44.98],
                                                              [-93.25, 44.97]]]},
                         {"type": "Point", "coordinates": [480000.0, 4980000.0]},
                         {"type": "GeometryCollection", "geometries": []}]))


# -- the input paths: D and D′ written ----------------------------------------------------------------------------

def _csv_bytes(records, delimiter=","):
    d = delimiter.encode()
    lines = [d.join(c.encode() for c in COLUMNS)]
    for r in records:
        if isinstance(r, bytes):
            lines.append(r)
        else:
            lines.append(d.join([repr(r["lon"]).encode(), repr(r["lat"]).encode(), r["t"].encode(),
                                 r["person"].encode(), r["note"].encode(), b'"' + r["wkt"].encode() + b'"']))
    return b"\n".join(lines) + b"\n"


def write_csv(folder, records, *, delimiter=",", name="d.csv", gz=False):
    data = _csv_bytes(records, delimiter)
    path = os.path.join(folder, name + (".gz" if gz else ""))
    with (gzip.open(path, "wb") if gz else open(path, "wb")) as f:
        f.write(data)
    return path


def _frame(records):
    import pandas as pd

    return pd.DataFrame({c: [r[c] for r in records] for c in COLUMNS})


def write_parquet(folder, records, *, extra=None):
    import pyarrow as pa
    import pyarrow.parquet as pq

    t = pa.Table.from_pandas(_frame(records), preserve_index=False)
    path = os.path.join(folder, "d.parquet")
    pq.write_table(t, path, row_group_size=8)
    return path


def write_geoparquet(folder, records, geoms=None):
    import geopandas as gpd
    import shapely

    df = _frame(records)
    geom = [shapely.Point(r["lon"], r["lat"]) for r in records] if geoms is None else geoms
    gdf = gpd.GeoDataFrame(df.drop(columns=["lon", "lat"]), geometry=gpd.GeoSeries(geom), crs="EPSG:4326")
    path = os.path.join(folder, "d.parquet")
    gdf.to_parquet(path, row_group_size=8)
    return path


def write_folder(folder, records, extra_table=None):
    """A folder of Parquet files (hive-partitioned), and with ``extra_table`` one more file of one row."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    root = os.path.join(folder, "parts")
    for i, part in enumerate((records[:N_BASE // 2], records[N_BASE // 2:])):
        os.makedirs(os.path.join(root, f"part={i}"), exist_ok=True)
        pq.write_table(pa.Table.from_pandas(_frame(part), preserve_index=False),
                       os.path.join(root, f"part={i}", "a.parquet"))
    if extra_table is not None:
        os.makedirs(os.path.join(root, "part=9"), exist_ok=True)
        pq.write_table(extra_table, os.path.join(root, "part=9", "a.parquet"))
    return root


def write_geojson(folder, records, extra=None, at=0):
    feats = [{"type": "Feature", "geometry": {"type": "Point", "coordinates": [r["lon"], r["lat"]]},
              "properties": {k: r[k] for k in ("t", "person", "note", "wkt")}} for r in records]
    if extra is not None:
        feats.insert(at, extra)
    path = os.path.join(folder, "d.geojson")
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"type": "FeatureCollection", "features": feats}, f, allow_nan=False)
    return path


def write_gpkg(folder, records, extra=None, at=0):
    """A GeoPackage written by GDAL; ``extra`` (values of fid-less columns, any SQLite type) inserted with SQLite
    at position ``at`` (rows after it are moved behind it, so the feature order is that of D′)."""
    import geopandas as gpd
    import shapely

    df = _frame(records)
    gdf = gpd.GeoDataFrame(df.drop(columns=["lon", "lat"]),
                           geometry=[shapely.Point(r["lon"], r["lat"]) for r in records], crs="EPSG:4326")
    path = os.path.join(folder, "d.gpkg")
    gdf.to_file(path, layer="points", driver="GPKG", SPATIAL_INDEX="NO")  # no R-tree triggers: plain SQLite inserts
    if extra is not None:
        con = sqlite3.connect(path)
        try:
            rows = con.execute("SELECT geom, t, person, note, wkt FROM points ORDER BY fid").fetchall()
            rows.insert(at, extra)
            con.execute("DELETE FROM points")
            con.executemany("INSERT INTO points (fid, geom, t, person, note, wkt) VALUES (?, ?, ?, ?, ?, ?)",
                            [(i + 1, *r) for i, r in enumerate(rows)])
            con.commit()
        finally:
            con.close()
    return path


def gpkg_blob(wkb, *, empty=False):
    """A GeoPackage geometry blob: header (no envelope, SRS 4326) and WKB."""
    if wkb is None:
        return None
    return b"GP" + bytes([0, 0x01 | (0x10 if empty else 0)]) + struct.pack("<i", 4326) + wkb


def write_shapefile(folder, records, geoms=None):
    import geopandas as gpd
    import shapely

    df = _frame(records)
    geom = [shapely.Point(r["lon"], r["lat"]) for r in records] if geoms is None else geoms
    gdf = gpd.GeoDataFrame(df.drop(columns=["lon", "lat", "wkt"]), geometry=gpd.GeoSeries(geom), crs="EPSG:4326")
    path = os.path.join(folder, "d.shp")
    gdf.to_file(path, driver="ESRI Shapefile", engine="pyogrio")
    return path


# -- what a reader uses ---------------------------------------------------------------------------------------------

def used(points, **kw) -> collections.Counter:
    """The multiset of records a reader uses: (x, y, period, person) of every kept record, read in small batches."""
    from dpgeo.counting import open_points

    src = open_points(points, person="person", time=time_spec(), batch_rows=8, **kw)
    out = collections.Counter()
    for b in src.batches():
        persons = [str(p) for p in b.person]
        out.update(zip(b.x.tolist(), b.y.tolist(), b.period.tolist(), persons))
    return out


def violation(base: collections.Counter, neighbour: collections.Counter):
    """None when the neighbour's used records are the base's plus at most one; else what differs."""
    lost = base - neighbour
    gained = neighbour - base
    if not lost and sum(gained.values()) <= 1:
        return None
    return {"lost": sum(lost.values()), "gained": sum(gained.values())}


def insert_at(records, extra, where):
    i = {"start": 0, "middle": len(records) // 2, "end": len(records)}[where]
    return records[:i] + [extra] + records[i:], i


def fresh(folder, name):
    path = os.path.join(folder, name)
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    return path


# -- one case per input path: (D, D′, how to open them) -------------------------------------------------------------

WHERE = st.sampled_from(["start", "middle", "end"])


def case_csv(draw, folder, *, delimiter=",", gz=False, name="d.csv"):
    recs = base_records()
    extra = draw(csv_line(delimiter.encode()))
    return (write_csv(fresh(folder, "D"), recs, delimiter=delimiter, name=name, gz=gz),
            write_csv(fresh(folder, "D2"), insert_at(recs, extra, draw(WHERE))[0], delimiter=delimiter, name=name,
                      gz=gz), {})


def case_csv_gz(draw, folder):
    return case_csv(draw, folder, gz=True)


def case_tsv(draw, folder):
    return case_csv(draw, folder, delimiter="\t", name="d.tsv")


def case_csv_quoted(draw, folder):
    recs = base_records()
    extra = draw(quoted_csv_line())
    return (write_csv(fresh(folder, "D"), recs), write_csv(fresh(folder, "D2"), insert_at(recs, extra, draw(WHERE))[0]),
            {"quoted_newlines": True})


def _record(draw):
    return {"lon": draw(odd_float()), "lat": draw(odd_float()), "t": draw(odd_text()), "person": draw(odd_text()),
            "note": draw(odd_text()), "wkt": draw(odd_text())}


def case_parquet(draw, folder):
    recs = base_records()
    d2 = insert_at(recs, _record(draw), draw(WHERE))[0]
    return write_parquet(fresh(folder, "D"), recs), write_parquet(fresh(folder, "D2"), d2), {}


def case_geoparquet(draw, folder):
    import shapely

    recs = base_records()
    extra = _record(draw)
    d2, i = insert_at(recs, extra, draw(WHERE))
    geoms = [shapely.Point(r["lon"], r["lat"]) for r in recs]
    g = draw(odd_geometry())
    return (write_geoparquet(fresh(folder, "D"), recs),
            write_geoparquet(fresh(folder, "D2"), d2, geoms[:i] + [g] + geoms[i:]), {})


def case_folder(draw, folder):
    """A folder of Parquet files, and D′ with one more file of one row whose columns have any types."""
    import pyarrow as pa

    recs = base_records()
    kinds = {c: draw(st.sampled_from(["float", "text", "binary", "int", "null"])) for c in COLUMNS}
    values = {"float": odd_float(), "text": odd_text(), "binary": odd_bytes(),
              "int": st.integers(-2 ** 63, 2 ** 63 - 1), "null": st.none()}
    types = {"float": pa.float64(), "text": pa.string(), "binary": pa.binary(), "int": pa.int64(), "null": pa.null()}
    extra = pa.table({c: pa.array([draw(values[kinds[c]])], type=types[kinds[c]]) for c in COLUMNS})
    return write_folder(fresh(folder, "D"), recs), write_folder(fresh(folder, "D2"), recs, extra), {}


def case_geojson(draw, folder):
    recs = base_records()
    extra = {"type": "Feature", "geometry": draw(odd_geojson_geometry()),
             "properties": {k: draw(odd_json()) for k in ("t", "person", "note", "wkt")}}
    at = {"start": 0, "middle": len(recs) // 2, "end": len(recs)}[draw(WHERE)]
    return write_geojson(fresh(folder, "D"), recs), write_geojson(fresh(folder, "D2"), recs, extra, at), {}


def _sqlite_value():
    return st.one_of(st.none(), st.integers(-2 ** 63, 2 ** 63 - 1), st.floats(allow_nan=False), odd_text(),
                     odd_bytes())


def case_gpkg(draw, folder):
    import shapely

    recs = base_records()
    g = draw(odd_geometry())
    wkb = None if g is None else shapely.to_wkb(g)
    blob = draw(st.one_of(st.just(gpkg_blob(wkb, empty=g is not None and g.is_empty)), odd_bytes()))
    extra = (blob, *(draw(_sqlite_value()) for _ in range(4)))
    at = {"start": 0, "middle": len(recs) // 2, "end": len(recs)}[draw(WHERE)]
    return write_gpkg(fresh(folder, "D"), recs), write_gpkg(fresh(folder, "D2"), recs, extra, at), {}


def case_shapefile(draw, folder):
    import shapely

    recs = base_records()
    extra = _record(draw)
    extra = {k: (v[:80] if isinstance(v, str) else v) for k, v in extra.items()}  # a dBase field holds 254 bytes
    d2, i = insert_at(recs, extra, draw(WHERE))
    geoms = [shapely.Point(r["lon"], r["lat"]) for r in recs]
    finite = st.floats(allow_nan=False, allow_infinity=False)  # what a Shapefile can hold
    extra.update(lon=draw(finite), lat=draw(finite))
    g = draw(st.one_of(st.none(), st.tuples(finite, finite).map(lambda xy: shapely.Point(*xy))))
    return (write_shapefile(fresh(folder, "D"), recs),
            write_shapefile(fresh(folder, "D2"), d2, geoms[:i] + [g] + geoms[i:]), {})


def _objects(records):
    import pandas as pd

    return pd.DataFrame({c: pd.Series([r[c] for r in records], dtype=object) for c in COLUMNS})


def case_dask(draw, folder):
    """A Dask DataFrame of Python objects (kept as objects: Dask's own conversion to Arrow text would fail on bytes
    that are not UTF-8 before dpgeo sees them)."""
    import dask
    import dask.dataframe as dd

    recs = base_records()
    extra = {c: draw(odd_value()) for c in COLUMNS}
    d2 = insert_at(recs, extra, draw(WHERE))[0]
    with dask.config.set({"dataframe.convert-string": False}):
        return dd.from_pandas(_objects(recs), npartitions=3), dd.from_pandas(_objects(d2), npartitions=3), {}


def case_frame(draw, folder):
    """A GeoDataFrame in memory, its columns of any Python values."""
    import geopandas as gpd
    import shapely

    recs = base_records()
    extra = {c: draw(odd_value()) for c in COLUMNS}
    d2, i = insert_at(recs, extra, draw(WHERE))
    geoms = [shapely.Point(r["lon"], r["lat"]) for r in recs]
    g = draw(odd_geometry())

    def frame(rs, gs):
        return gpd.GeoDataFrame(_objects(rs), geometry=gpd.GeoSeries(gs), crs="EPSG:4326")

    return frame(recs, geoms), frame(d2, geoms[:i] + [g] + geoms[i:]), {}


PATHS = {"csv": case_csv, "csv.gz": case_csv_gz, "tsv": case_tsv, "csv quoted": case_csv_quoted,
         "parquet": case_parquet, "geoparquet": case_geoparquet, "parquet folder": case_folder,
         "geojson": case_geojson, "gpkg": case_gpkg, "shapefile": case_shapefile, "dask": case_dask,
         "geodataframe": case_frame}
#: Paths that are files, also run through the command line.
FILE_PATHS = ("csv", "csv.gz", "tsv", "parquet", "geoparquet", "parquet folder", "geojson", "gpkg", "shapefile")


def check_reader(path_name, draw, folder):
    """The reader's property for one drawn neighbour: None, or what went wrong (a dict)."""
    d, d2, kw = PATHS[path_name](draw, folder)
    base = used(d, **kw)
    assert sum(base.values()) == N_BASE, "the base input is read whole"
    try:
        got = used(d2, **kw)
    except Exception as exc:  # noqa: BLE001 - an error on one record is the violation itself
        return {"error": f"{type(exc).__name__}: {exc}"[:300]}
    return violation(base, got)


def run_cli(points, folder, *extra):
    """``dpgeo heat --unattended`` in this process, in ``folder``: (exit code, stderr with the folder removed,
    files written)."""
    import contextlib
    import io

    from dpgeo.cli import main

    out = os.path.join(folder, "out")
    os.makedirs(out, exist_ok=True)
    err = io.StringIO()
    old = os.environ.get("DPGEO_LEDGER")
    os.environ["DPGEO_LEDGER"] = os.path.join(out, "ledger.sqlite")
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            try:
                code = main(["heat", points, "-o", os.path.join(out, "map.geojson"), "--epsilon", "1", "--cell",
                             "500", f"--domain={DOMAIN}", "--dataset", "fuzz", "--person", "person",
                             "--max-points-per-person", "3", "--time", "t", "--period", "month", "--period-start",
                             "2014-01-01", "--period-end", "2014-03-01", "--timezone", "America/New_York",
                             "--unattended", *extra])
            except SystemExit as exc:
                code = exc.code
    finally:
        if old is None:
            os.environ.pop("DPGEO_LEDGER", None)
        else:
            os.environ["DPGEO_LEDGER"] = old
    text = err.getvalue().replace(folder, "<dir>")
    return code, text, sorted(f for f in os.listdir(out) if not f.startswith("ledger"))


def check_cli(path_name, draw, folder):
    """The command line's property for one drawn neighbour: None, or what differs."""
    d, d2, kw = PATHS[path_name](draw, folder)
    extra = ["--quoted-newlines"] if kw.get("quoted_newlines") else []
    a = run_cli(d, os.path.join(folder, "D"), *extra)
    assert a[0] == 0, f"the base input is released: {a}"
    b = run_cli(d2, os.path.join(folder, "D2"), *extra)
    if a == b:
        return None
    return {"D": a, "D2": b}
