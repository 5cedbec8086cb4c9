"""A corpus of awkward inputs and study areas, generated here, each answered the way ``corpus.py`` demands.

Every file holds the record values of :data:`corpus.PRIVATE_MARKERS` (a coordinate pair, an officer id, a
name), so a message that quotes a record fails the case. Refused cases must give exit 2 and one line that
names the problem and the fix, leave no file and every input byte-identical. Some awkward inputs are valid
and must *succeed*: a byte-order mark, plain Parquet, ``--x/--y`` naming lon/lat columns, a self-intersecting
study-area polygon (repaired, with one warning line saying what area was used).
"""

import gzip
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import warnings
import zipfile
from pathlib import Path

import geopandas as gpd
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import shapely

from corpus import PRIVATE_MARKERS, api_refused, refused, run_cli, snapshot

LON0, LAT0, OFFICER, NAME = PRIVATE_MARKERS
AREA = "-93.33,44.89,-93.19,45.06"
BOX = shapely.box(-93.33, 44.89, -93.19, 45.06)
RUNS = {
    "spans": ["--epsilon", "1", "--radius", "150", "--min-points", "40"],
    "wavecluster": ["--epsilon", "1", "--cell", "200"],
    "kmeans": ["--epsilon", "1", "--k", "3"],
    "heat": ["--epsilon", "1", "--h3", "8"],
    "hotspots": ["--epsilon", "1", "--cell", "500"],
}


# -- the corpus ----------------------------------------------------------------------------------------------

def _records(n=400, seed=0):
    """Clustered stops in Minneapolis; the first record carries the private markers exactly."""
    rng = np.random.default_rng(seed)
    lon = np.round(-93.26 + rng.normal(0, 0.01, n), 7)
    lat = np.round(44.97 + rng.normal(0, 0.01, n), 7)
    lon[0], lat[0] = float(LON0), float(LAT0)
    return pd.DataFrame({"lon": lon.tolist(), "lat": lat.tolist(), "officer": [OFFICER] * n, "name": [NAME] * n})


def _fc(geoms, crs=None, props=None):
    d = {"type": "FeatureCollection", "features": [
        {"type": "Feature", "properties": props or {"name": NAME}, "geometry": shapely.geometry.mapping(g)}
        for g in geoms]}
    if crs:
        d["crs"] = {"type": "name", "properties": {"name": crs}}
    return json.dumps(d)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("corpus")
    df = _records()
    text = df.to_csv(index=False)
    (d / "good.csv").write_text(text)
    (d / "empty.csv").write_bytes(b"")
    (d / "header_only.csv").write_text("lon,lat,officer,name\n")
    (d / "no_header.csv").write_text(df.to_csv(index=False, header=False))
    with gzip.open(d / "no_header.csv.gz", "wt") as f:
        f.write(df[["name", "lon", "lat"]].to_csv(index=False, header=False))
    (d / "bom.csv").write_bytes(b"\xef\xbb\xbf" + text.encode())
    with gzip.open(d / "bom.csv.gz", "wb") as f:
        f.write(b"\xef\xbb\xbf" + text.encode())
    (d / "duplicate.csv").write_text("lon,lat,lat,name\n" + "".join(
        f"{a},{b},{b},{NAME}\n" for a, b in zip(df.lon, df.lat)))
    (d / "text_coords.csv").write_text("lon,lat,name\n" + f"{NAME},{OFFICER},x\n" * 50)
    (d / "nan.csv").write_text("lon,lat,name\n" + f"NaN,nan,{NAME}\n" * 50)
    df.rename(columns={"lon": "lat", "lat": "lon"}).to_csv(d / "swapped.csv", index=False)
    far = df.assign(lat=(df.lat + 100).round(7))
    far.loc[0, "lat"] = float(LAT0) + 100
    far.to_csv(d / "lat_beyond_90.csv", index=False)
    utm = gpd.GeoSeries(gpd.points_from_xy(df.lon, df.lat), crs=4326).to_crs(26915)
    pd.DataFrame({"lon": utm.x, "lat": utm.y, "name": NAME}).to_csv(d / "metres_as_lonlat.csv", index=False)
    pd.DataFrame({"x": utm.x, "y": utm.y, "name": NAME}).to_csv(d / "xy_no_crs.csv", index=False)
    (d / "latin1.csv").write_bytes(f"lon,lat,name\n{LON0},{LAT0},J\xe9ane {NAME}\n".encode("latin-1") * 3)
    (d / "latin1_header.csv").write_bytes(f"lon,lat,pr\xe9nom\n{LON0},{LAT0},J\xe9ane {NAME}\n".encode("latin-1"))
    (d / "corrupt.csv.gz").write_bytes(b"\x1f\x8b\x08\x00" + f"{NAME} {LON0}".encode() * 20)
    with zipfile.ZipFile(d / "two.csv.zip", "w") as z:
        z.writestr("a.csv", text)
        z.writestr("b.csv", text)
    (d / "ragged.csv").write_text("lon,lat,name\n" + f"{LON0},{LAT0}\n" + f"{LON0},{LAT0},{NAME},{OFFICER}\n" * 5)

    pq.write_table(pa.Table.from_pandas(df), d / "plain.parquet")
    pq.write_table(pa.Table.from_pandas(df.rename(columns={"lon": "px", "lat": "py"})), d / "plain_xy.parquet")
    pq.write_table(pa.Table.from_pandas(df[["officer", "name"]]), d / "no_coords.parquet")
    pq.write_table(pa.Table.from_pandas(df.iloc[:0]), d / "empty.parquet")
    (d / "corrupt.parquet").write_bytes(b"PAR1" + f"{NAME} {LON0} {OFFICER}".encode() * 50 + b"PAR1")
    polys = gpd.GeoDataFrame(df[["name"]].iloc[:20], crs=4326,
                             geometry=[shapely.box(a, b, a + 0.001, b + 0.001) for a, b in zip(df.lon[:20], df.lat[:20])])
    polys.to_parquet(d / "polygons.parquet")

    pts = gpd.GeoDataFrame(df[["officer", "name"]], geometry=gpd.points_from_xy(df.lon, df.lat), crs=4326)
    pts.to_file(d / "multi.gpkg", layer="stops_2016")
    pts.to_file(d / "multi.gpkg", layer="stops_2017")
    pts.to_file(d / "one.gpkg", layer="stops")
    gpd.GeoDataFrame(df[["name"]], geometry=gpd.points_from_xy(df.lat, df.lon), crs=4326).to_file(
        d / "swapped.gpkg")
    gpd.GeoDataFrame(df[["name"]].iloc[:30], crs=4326, geometry=[
        shapely.LineString([(a, b), (a + 0.01, b)]) for a, b in zip(df.lon[:30], df.lat[:30])]).to_file(
        d / "lines.gpkg")
    (d / "polygons.geojson").write_text(_fc(polys.geometry))
    (d / "empty.geojson").write_text(_fc([]))
    (d / "corrupt.geojson").write_text(_fc(pts.geometry[:3])[:-40] + f', "x": {NAME}')
    pts.iloc[:50].to_file(d / "no_crs.shp")
    os.remove(d / "no_crs.prj")
    (d / "corrupt.gpkg").write_bytes(b"SQLite format 3\x00" + f"{NAME} {OFFICER} {LON0}".encode() * 100)
    (d / "empty_folder").mkdir()
    (d / "notes_folder").mkdir()
    (d / "notes_folder" / "readme.txt").write_text(NAME)

    # a few bad records among good ones: accepted, each dropped record counted under its own reason
    bad = pd.concat([df, df.iloc[1:51].assign(lat=95.5), df.iloc[51:54].assign(lon=200.0),
                     df.iloc[54:56].assign(lon=float("nan"))], ignore_index=True)
    bad.to_csv(d / "some_bad.csv", index=False)
    pq.write_table(pa.Table.from_pandas(bad), d / "some_bad_plain.parquet")
    geoms = list(gpd.points_from_xy(bad.lon, bad.lat)[:-2]) + [shapely.Point(), shapely.Point()]
    geoms += [shapely.LineString([(-93.26, 44.97), (-93.25, 44.98)])]
    mixed = gpd.GeoDataFrame({"name": [NAME] * len(geoms)}, geometry=geoms, crs=4326)
    mixed.to_file(d / "some_bad.gpkg")
    mixed.to_parquet(d / "some_bad.parquet")
    (d / "some_bad.geojson").write_text(_fc(geoms))

    # study areas
    (d / "bowtie.geojson").write_text(_fc([shapely.Polygon(
        [(-93.33, 44.89), (-93.19, 45.06), (-93.19, 44.89), (-93.33, 45.06)])], props={}))
    (d / "area_points.geojson").write_text(_fc([shapely.Point(-93.26, 44.97)], props={}))
    (d / "area_empty.geojson").write_text(_fc([], props={}))
    (d / "area_multi.geojson").write_text(_fc([shapely.MultiPolygon(
        [shapely.box(-93.33, 44.89, -93.26, 45.06), shapely.box(-93.25, 44.89, -93.19, 45.06)])], props={}))
    box_utm = gpd.GeoSeries([BOX], crs=4326).to_crs(26915)[0]
    (d / "area_utm_no_crs.geojson").write_text(_fc([box_utm], props={}))
    (d / "area_utm_crs_member.geojson").write_text(_fc([box_utm], "urn:ogc:def:crs:EPSG::26915", props={}))
    (d / "area_zero.geojson").write_text(_fc([shapely.Polygon(
        [(-93.3, 44.9), (-93.2, 44.9), (-93.3, 44.9), (-93.2, 44.9)])], props={}))
    gpd.GeoDataFrame(geometry=[BOX], crs=4326).to_file(d / "area_no_crs.shp")
    os.remove(d / "area_no_crs.prj")
    (d / "area_far.geojson").write_text(_fc([shapely.box(10, 10, 11, 11)], props={}))
    return d


@pytest.fixture
def env(tmp_path_factory):
    """A ledger outside the watched folders (its file may appear), where 'corpus' has a declared total (an
    undeclared dataset would add a note to every run's stderr: nothing limits its spending)."""
    from dpgeo.budget import Ledger

    path = str(tmp_path_factory.mktemp("ledger") / "ledger.sqlite")
    Ledger(path).set_total("corpus", 10**6)
    return {"DPGEO_LEDGER": path}


def run(cmd, data, tmp_path, env, *args, domain=AREA):
    dom = [f"--domain={domain}"] if domain is not None else []
    return [cmd, *args, "-o", "out.gpkg", *RUNS[cmd], *dom, "-q", "--dataset", "corpus"]


def no(data, tmp_path, env, *args, cmd="spans", domain=AREA, mention=()):
    """The case is refused cleanly; returns the message."""
    a = run(cmd, data, tmp_path, env, *[str(data / x) if isinstance(x, str) and (data / x).exists() else x
                                       for x in args], domain=domain)
    return refused(a, cwd=tmp_path, folders=(data,), must_mention=mention, env=env)


def ok(data, tmp_path, env, *args, cmd="spans", domain=AREA):
    """The case succeeds; returns stderr (inputs untouched, only out.gpkg written)."""
    before = snapshot(data)
    a = run(cmd, data, tmp_path, env, *[str(data / x) if isinstance(x, str) and (data / x).exists() else x
                                       for x in args], domain=domain)
    p = run_cli(a, cwd=tmp_path, env=env, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "Traceback" not in p.stderr
    assert snapshot(data) == before
    assert sorted(os.listdir(tmp_path)) == ["out.gpkg"]
    for value in PRIVATE_MARKERS:
        assert value not in p.stderr
    return p.stderr


# -- input files: refused --------------------------------------------------------------------------------------

FILE_CASES = {
    "empty.csv": (["empty.csv"], ["empty"]),
    "header_only.csv": (["header_only.csv"], ["no records"]),
    "no_header.csv": (["no_header.csv"], ["header row", "looks like data"]),
    "no_header.csv.gz": (["no_header.csv.gz"], ["header row"]),
    "duplicate columns": (["duplicate.csv"], ["'lat'", "2 times", "distinct name"]),
    "text coordinates": (["text_coords.csv"], ["no usable points", "not a number"]),
    "NaN coordinates": (["nan.csv"], ["no usable points", "NaN"]),
    "lat/lon swapped (csv)": (["swapped.csv"], ["looks like lat/lon swapped", "--x"]),
    "latitudes beyond 90": (["lat_beyond_90.csv"], ["latitude beyond ±90"]),
    "metres named lon/lat": (["metres_as_lonlat.csv"], ["--input-crs"]),
    "x/y without a CRS": (["xy_no_crs.csv"], ["no CRS", "--input-crs"]),
    "column names not UTF-8": (["latin1_header.csv"], ["UTF-8", "column names"]),
    "corrupt gzip": (["corrupt.csv.gz"], ["cannot read", "CSV"]),
    "zip of two files": (["two.csv.zip"], ["holds 2 files"]),
    "plain parquet without coordinates": (["no_coords.parquet"], ["coordinate columns", "--x"]),
    "plain parquet, --x absent": (["plain_xy.parquet", "--x", "qx", "--y", "py"], ["'qx' is not in", "px"]),
    "empty parquet": (["empty.parquet"], ["no records"]),
    "corrupt parquet": (["corrupt.parquet"], ["cannot read", "Parquet"]),
    "geoparquet of polygons": (["polygons.parquet"], ["Polygon", "points"]),
    "multi-layer geopackage": (["multi.gpkg"], ["2 layers", "stops_2016", "stops_2017", "--layer"]),
    "unknown layer": (["multi.gpkg", "--layer", "stops_2018"], ["no layer 'stops_2018'", "stops_2017"]),
    "--x/--y on a geopackage": (["one.gpkg", "--x", "lon", "--y", "lat"], ["CSV or Parquet", "drop --x/--y"]),
    "lat/lon swapped (gpkg)": (["swapped.gpkg"], ["looks like lat/lon swapped", "axis order"]),
    "lines": (["lines.gpkg"], ["LineString", "points"]),
    "polygons geojson": (["polygons.geojson"], ["Polygon", "points"]),
    "empty geojson": (["empty.geojson"], ["no records"]),
    "corrupt geojson": (["corrupt.geojson"], ["cannot read"]),
    "corrupt geopackage": (["corrupt.gpkg"], ["cannot read"]),
    "shapefile without CRS": (["no_crs.shp"], ["no CRS", "--input-crs"]),
    "contradicting --input-crs": (["one.gpkg", "--input-crs", "EPSG:26915"], ["declares", "--input-crs"]),
    "missing person column": (["good.csv", "--person", "badge", "--max-points-per-person", "2"],
                              ["person column 'badge'"]),
    "missing file": (["nothing_here.gpkg"], ["does not exist"]),
    "glob matching nothing": (["nothing_*.parquet"], ["no file matches"]),
    "empty folder": (["empty_folder"], ["holds no Parquet or CSV"]),
    "folder of other files": (["notes_folder"], ["coordinate columns", "1 column"]),
}


@pytest.mark.parametrize("case", list(FILE_CASES))
def test_awkward_input_file_is_refused(case, data, tmp_path, env):
    args, mention = FILE_CASES[case]
    no(data, tmp_path, env, *args, mention=mention)


@pytest.mark.parametrize("cmd", ["wavecluster", "kmeans", "heat", "hotspots"])
@pytest.mark.parametrize("case", ["no_header.csv", "lat/lon swapped (csv)", "multi-layer geopackage"])
def test_every_command_refuses_the_same_way(cmd, case, data, tmp_path, env):
    args, mention = FILE_CASES[case]
    no(data, tmp_path, env, *args, cmd=cmd, mention=mention)


def test_ragged_rows_are_dropped_and_counted_without_their_values(data, tmp_path, env):
    msg = no(data, tmp_path, env, "ragged.csv", mention=["no usable points", "do not parse"])
    assert "6 records read" in msg


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes on this system")
@pytest.mark.parametrize("where", ["input", "study area", "info", "export"])
def test_named_pipe_is_refused_without_waiting_for_a_writer(where, data, tmp_path_factory, tmp_path, env):
    # opening a pipe blocks until someone writes; dpgeo must say what to do from stat alone (and reads an
    # input twice, which a pipe cannot give). The pipe sits outside the watched folders: reading it would block.
    pipe = tmp_path_factory.mktemp("pipe") / ("area.geojson" if where == "study area" else "stops.geojson")
    os.mkfifo(pipe)
    if where in ("input", "study area"):
        args = run("spans", data, tmp_path, env, str(data / "good.csv") if where == "study area" else str(pipe),
                   domain=str(pipe) if where == "study area" else AREA)
    else:
        args = ["info", pipe] if where == "info" else ["export", pipe, "-o", "out.geojson"]
    refused(args, cwd=tmp_path, folders=(data,), must_mention=["named pipe"], env=env, timeout=60)


# -- study areas: refused --------------------------------------------------------------------------------------

AREA_CASES = {
    "min > max": ("-93.19,44.89,-93.33,45.06", ["minx < maxx"]),
    "zero-area bbox": ("-93.3,44.9,-93.3,45.0", ["minx < maxx"]),
    "outside the world": ("200,0,201,1", ["not valid longitude/latitude", "--domain-crs"]),
    "three numbers": ("-93.3,44.9,-93.2", ["4 numbers", "got 3"]),
    "no polygons": ("area_points.geojson", ["polygons"]),
    "empty layer": ("area_empty.geojson", ["no geometries"]),
    "degenerate polygon": ("area_zero.geojson", ["no polygon with an area"]),
    "metres in a lon/lat file": ("area_utm_no_crs.geojson", ["not longitude/latitude", "crs"]),
    "no CRS": ("area_no_crs.shp", ["no CRS"]),
    "missing file": ("nowhere.geojson", ["does not exist"]),
    "a folder": ("empty_folder", ["folder", "polygon file"]),
    "continent in one UTM zone": ("-125,24,-66,50", ["too wide", "--crs"]),
    "the whole world": ("-180,-90,180,90", ["--crs"]),
    "no point inside": ("area_far.geojson", ["none of the", "--domain"]),
}


@pytest.mark.parametrize("case", list(AREA_CASES))
def test_awkward_study_area_is_refused(case, data, tmp_path, env):
    area, mention = AREA_CASES[case]
    if (data / area).exists():
        area = str(data / area)
    no(data, tmp_path, env, "good.csv", domain=area, mention=mention)


# -- awkward but valid: accepted -------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["bom.csv", "bom.csv.gz", "plain.parquet"])
def test_bom_and_plain_parquet_are_read_like_csv(name, data, tmp_path, env):
    err = ok(data, tmp_path, env, name)
    assert err.strip() == "", err


def test_records_that_are_not_utf8_do_not_decide_the_run(data, tmp_path, env):
    """Bytes of a record are that record's alone: Latin-1 text in a column the run does not read is no refusal
    (the encoding of the column names is checked, docs/privacy.md, the reader's part)."""
    err = ok(data, tmp_path, env, "latin1.csv")
    assert NAME not in err


def test_plain_parquet_with_x_y_and_named_lonlat_columns(data, tmp_path, env):
    ok(data, tmp_path, env, "plain_xy.parquet", "--x", "px", "--y", "py", "--input-crs", "EPSG:4326")
    os.remove(tmp_path / "out.gpkg")
    ok(data, tmp_path, env, "good.csv", "--x", "lon", "--y", "lat")  # lon/lat by name: EPSG:4326


def test_self_intersecting_study_area_is_repaired_with_one_warning(data, tmp_path, env):
    err = ok(data, tmp_path, env, "good.csv", domain=str(data / "bowtie.geojson"))
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("dpgeo: warning:"), err
    assert "repaired" in lines[0] and "km²" in lines[0] and "-93.33,44.89,-93.19,45.06" in lines[0]


@pytest.mark.parametrize("area", ["area_multi.geojson", "area_utm_crs_member.geojson"])
def test_multipolygon_and_crs_member_study_areas(area, data, tmp_path, env):
    assert ok(data, tmp_path, env, "good.csv", domain=str(data / area)).strip() == ""


def test_no_person_wording_without_a_person_column(data, tmp_path, env):
    a = run("spans", data, tmp_path, env, str(data / "good.csv"))
    a.remove("-q")
    p = run_cli(a, cwd=tmp_path, env=env, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "person" not in p.stderr.lower(), p.stderr


def test_unattended_data_conditions_are_owner_warnings_not_refusals(data, tmp_path, env):
    """Unattended: swapped columns give a valid (empty) release; the owner's warning goes to the owner's log,
    never to stderr, which says nothing that depends on the data."""
    a = run("spans", data, tmp_path, env, str(data / "swapped.csv"), "--unattended")
    a.remove("-q")
    p = run_cli(a, cwd=tmp_path, env=env, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "lat/lon" not in p.stderr and "do not publish" not in p.stderr, p.stderr
    assert (tmp_path / "out.gpkg").exists()
    for value in PRIVATE_MARKERS:
        assert value not in p.stderr


# -- a few bad records: accepted, each counted under its true reason -------------------------------------------

DROPS = {  # what the owner's report must say, per file (and what it must not)
    "some_bad.csv": ["50 with a latitude beyond ±90°", "3 with a longitude beyond ±180°", "2 with a missing"],
    "some_bad_plain.parquet": ["50 with a latitude beyond ±90°", "3 with a longitude beyond ±180°",
                               "2 with a missing"],
    "some_bad.geojson": ["50 with a latitude beyond ±90°", "3 with a longitude beyond ±180°",
                         "2 without geometry", "1 with a non-point geometry"],  # GDAL reads `[]` as no geometry
    "some_bad.gpkg": ["50 with a latitude beyond ±90°", "3 with a longitude beyond ±180°",
                      "2 with an empty geometry", "1 with a non-point geometry"],
    "some_bad.parquet": ["50 with a latitude beyond ±90°", "3 with a longitude beyond ±180°",
                         "2 with an empty geometry", "1 with a non-point geometry"],
}


@pytest.mark.parametrize("name", list(DROPS))
def test_dropped_records_are_counted_under_their_true_reason(name, data, tmp_path, env):
    a = run("spans", data, tmp_path, env, str(data / name))
    a.remove("-q")
    before = snapshot(data)
    p = run_cli(a, cwd=tmp_path, env=env, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "Traceback" not in p.stderr and "Warning" not in p.stderr and snapshot(data) == before
    report = next(line for line in p.stderr.splitlines() if line.startswith("input:"))
    n_bad = 55 if name.endswith((".csv", "_plain.parquet")) else 56
    assert f"{400 + n_bad:,} records read, {n_bad} dropped (" in report, report
    for words in DROPS[name]:
        assert words in report, report
    for value in PRIVATE_MARKERS:
        assert value not in p.stderr


def test_api_diagnostics_name_the_reasons(data, monkeypatch, tmp_path):
    import dpgeo

    monkeypatch.setenv("DPGEO_LEDGER", str(tmp_path / "ledger.sqlite"))
    res = dpgeo.dbscan_spans(str(data / "some_bad.gpkg"), seed=1, **SPANS)
    assert res.diagnostics["dropped_by_reason"] == {"empty_geometry": 2, "lat_out_of_range": 50,
                                                    "lon_out_of_range": 3, "non_point": 1}
    from dpgeo.counting import prepare_points

    prep = prepare_points(str(data / "some_bad.csv"), domain=AREA)  # the owner's comparison report reads this
    assert prep.diagnostics["dropped_by_reason"] == {"lat_out_of_range": 50, "lon_out_of_range": 3,
                                                     "missing_coordinate": 2}


# -- inputs this user may not read ---------------------------------------------------------------------------

def _unreadable_cases(top):
    """(argument, words the refusal must have) for a file, a folder, a file in a folder that may not be opened,
    a glob in such a folder and a study-area file; every path made unreadable to anyone but root."""
    good = _records().to_csv(index=False)
    cases = []
    for name in ("stops.csv", "stops.geojson", "stops.gpkg", "stops.parquet"):
        f = top / name
        if name.endswith(".csv"):
            f.write_text(good)
        else:
            df = _records()
            g = gpd.GeoDataFrame(df, geometry=gpd.points_from_xy(df.lon, df.lat), crs=4326)
            g.to_parquet(f) if name.endswith(".parquet") else g.to_file(f)
        os.chmod(f, 0)
        cases.append(([str(f)], ["not readable", "chmod +r"]))
    closed = top / "closed"
    closed.mkdir()
    (closed / "stops.csv").write_text(good)
    os.chmod(closed, 0o600)  # listable, not searchable
    cases.append(([str(closed / "stops.csv")], ["cannot be reached", "chmod +x"]))
    cases.append(([str(closed)], ["may not be listed", "chmod +rx"]))
    cases.append(([str(closed / "*.csv")], ["may not be listed", "chmod +rx"]))
    area = top / "area.geojson"
    area.write_text(_fc([BOX], props={}))
    os.chmod(area, 0)
    readable = top / "open.csv"
    readable.write_text(good)
    cases.append(([str(readable), "--domain", str(area)], ["domain file", "not readable"]))
    return cases


def _python_for(uid):
    """This interpreter, when the user ``uid`` may run it with this environment's packages; else None."""
    try:
        p = subprocess.run([sys.executable, "-c", "import dpgeo, numpy, pyarrow, pyogrio"], user=uid, group=uid,
                           extra_groups=[], capture_output=True, timeout=120, cwd="/")
    except OSError:
        return None
    return sys.executable if p.returncode == 0 else None


def test_unreadable_inputs_are_refused_in_one_line():
    """As root, as the user "nobody" (root may read anything); otherwise as this user."""
    top = Path(tempfile.mkdtemp(prefix="dpgeo-unreadable-"))  # pytest's own folders are closed to others
    os.chmod(top, 0o777)
    as_root = getattr(os, "geteuid", lambda: 1)() == 0
    uid = 65534 if as_root else None
    if as_root and _python_for(uid) is None:
        pytest.skip("the user nobody may not run this Python environment (the in-process test below still runs)")
    try:
        for args, words in _unreadable_cases(top):
            cmd = [sys.executable, "-m", "dpgeo", "spans", *args, "-o", str(top / "out.gpkg"), *RUNS["spans"],
                   "-q"]
            if "--domain" not in args:
                cmd.append(f"--domain={AREA}")
            extra = {"DPGEO_LEDGER": str(top / "ledger.sqlite"), "HOME": str(top)}
            if uid is None:  # as this user: in this process
                p = run_cli(cmd[3:], cwd=str(top), env=extra)
            else:  # as another user: a real process of that user
                p = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=str(top),
                                   env=dict(os.environ, **extra), user=uid, group=uid, extra_groups=[])
            lines = p.stderr.strip().splitlines()
            assert p.returncode == 2 and len(lines) == 1 and lines[0].startswith("dpgeo: error:"), (args, p.stderr)
            for w in words:
                assert w in lines[0], (args, lines[0])
            assert not (top / "out.gpkg").exists() and not (top / "ledger.sqlite").exists()
    finally:
        for root, dirs, files in os.walk(top):
            for x in dirs + files:
                os.chmod(os.path.join(root, x), 0o700)
        shutil.rmtree(top)


@pytest.mark.parametrize("kind", ["csv", "geojson", "parquet"])
def test_permission_denied_is_a_refusal_even_as_root(kind, data, tmp_path, monkeypatch, capsys):
    """Root may read anything, so the check is made to say no: the same one line, exit 2, nothing charged."""
    from dpgeo.cli import main

    src = {"csv": "good.csv", "geojson": "some_bad.geojson", "parquet": "some_bad.parquet"}[kind]
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if str(p).endswith(src) else real_access(p, mode))
    monkeypatch.setenv("DPGEO_LEDGER", str(tmp_path / "ledger.sqlite"))
    code = main(["spans", str(data / src), "-o", str(tmp_path / "out.gpkg"), *RUNS["spans"], f"--domain={AREA}",
                 "-q"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "is not readable by this user" in err[0], err
    assert os.listdir(tmp_path) == []


def test_permission_error_while_reading_is_a_refusal(data, tmp_path, monkeypatch, capsys):
    """A file that turns unreadable between the check and the read: still one line and exit 2, no traceback."""
    import pyarrow

    from dpgeo.cli import main

    def denied(path, *a, **kw):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(pyarrow, "input_stream", denied)
    monkeypatch.setenv("DPGEO_LEDGER", str(tmp_path / "ledger.sqlite"))
    code = main(["spans", str(data / "good.csv"), "-o", str(tmp_path / "out.gpkg"), *RUNS["spans"],
                 f"--domain={AREA}", "-q"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("dpgeo: error:"), err
    assert "Traceback" not in "".join(err) and not (tmp_path / "out.gpkg").exists()


# -- the Python API --------------------------------------------------------------------------------------------

SPANS = dict(epsilon=1.0, radius_m=150, min_points=40, domain=AREA, dataset="corpus")


@pytest.mark.parametrize("name,mention", [("swapped.csv", "lat/lon swapped"), ("multi.gpkg", "--layer"),
                                          ("no_header.csv", "header row"), ("duplicate.csv", "distinct"),
                                          ("lat_beyond_90.csv", "beyond ±90"), ("corrupt.parquet", "Parquet")])
def test_api_refuses_the_same_inputs(name, mention, data, monkeypatch, tmp_path):
    import dpgeo

    monkeypatch.setenv("DPGEO_LEDGER", str(tmp_path / "ledger.sqlite"))
    api_refused(lambda: dpgeo.dbscan_spans(str(data / name), **SPANS), folders=(data,), must_mention=[mention])


def test_api_study_areas(data):
    from dpgeo.domain import as_study_area
    from dpgeo.errors import StudyAreaWarning

    api_refused(lambda: as_study_area("-125,24,-66,50"), must_mention=["too wide"])
    api_refused(lambda: as_study_area(str(data / "area_utm_no_crs.geojson")), folders=(data,),
                must_mention=["not longitude/latitude"])
    with pytest.warns(StudyAreaWarning, match="km²"):
        a = as_study_area(str(data / "bowtie.geojson"))
    assert "repaired" in a.description and a.geometry.is_valid
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a valid polygon: no warning
        as_study_area(str(data / "area_multi.geojson"))


def test_library_messages_lose_record_values():
    """What GDAL and pyarrow quote of a record never reaches a message (the path stays)."""
    from dpgeo.formats import input_error_text

    msg = input_error_text(ValueError(f"At line 3: unexpected '{NAME}' near {LON0} (J) in '/d/x.csv'"), "/d/x.csv")
    for value in PRIVATE_MARKERS:
        assert value not in msg
    assert "'/d/x.csv'" in msg and "(J)" not in msg


def test_corrupt_geopackage_sqlite_rows_stay_private(data, tmp_path, env):
    """A GeoPackage whose geometry blobs are garbage: records dropped (counted), never shown."""
    p = tmp_path.parent / (tmp_path.name + "_gpkg")
    p.mkdir()
    gpkg = p / "badgeom.gpkg"
    gpkg.write_bytes((data / "one.gpkg").read_bytes())
    con = sqlite3.connect(gpkg)
    for (name,) in con.execute("SELECT name FROM sqlite_master WHERE type='trigger'").fetchall():
        con.execute(f'DROP TRIGGER "{name}"')
    con.execute("UPDATE stops SET geom = CAST(? AS BLOB)", (f"GP {NAME} {LON0}",))
    con.commit()
    con.close()
    msg = refused(run("spans", data, tmp_path, env, str(gpkg)), cwd=tmp_path, folders=(p,), env=env)
    assert "no usable points" in msg or "cannot read" in msg
