"""The readers from the command line: plain tables, partitions, and every reader mistake said in one line.

Each refused input must give exit 2, one ``dpgeo: error:`` line, no traceback, no output file, no value
of a record in the message, and leave the input byte-identical.
"""

import gzip
import os
import signal
import subprocess
import sys
import time

import geopandas as gpd
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from helpers import SAMPLE_AREA, SAMPLE_POINTS

SPANS = ["--epsilon", "1", "--radius", "150", "--min-points", "40", "--domain", str(SAMPLE_AREA),
         "--dataset", "reader tests"]
#: Values written into the test files below; none may ever appear in a message.
SECRET_LON, SECRET_LAT = "-93.2713", "44.9812"


def dpgeo(*args, timeout=300):
    p = subprocess.run([sys.executable, "-m", "dpgeo", *map(str, args)], capture_output=True, text=True,
                       timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def refused(tmp_path, path, *extra):
    before = _snapshot(path)
    out = tmp_path / "out.gpkg"
    code, _, err = dpgeo("spans", path, "-o", out, *SPANS, *extra)
    assert code == 2, err
    lines = [ln for ln in err.strip().splitlines() if not ln.startswith("[")]  # progress lines aside
    assert len(lines) == 1 and lines[0].startswith("dpgeo: error:"), err
    assert "Traceback" not in err and "Warning" not in err
    assert SECRET_LON not in err and SECRET_LAT not in err and "93.27" not in err
    assert not out.exists()
    assert not [f for f in os.listdir(tmp_path) if f.startswith(".dpgeo-")]
    assert _snapshot(path) == before
    return lines[0]


def accepted(tmp_path, path, *extra):
    out = tmp_path / "out.gpkg"
    code, _, err = dpgeo("spans", path, "-o", out, *SPANS, *extra)
    assert code == 0, err
    assert out.exists()
    out.unlink()
    return err


def _snapshot(path):
    p = str(path)
    if os.path.isdir(p):
        return sorted((os.path.join(r, f), open(os.path.join(r, f), "rb").read()) for r, _, fs in os.walk(p)
                      for f in fs)
    return open(p, "rb").read() if os.path.exists(p) else None


@pytest.fixture(scope="module")
def lonlat():
    g = gpd.read_file(SAMPLE_POINTS).iloc[:3000]
    df = pd.DataFrame({"lon": g.geometry.x.round(4), "lat": g.geometry.y.round(4),
                       "pid": np.arange(len(g)) % 50})
    df.loc[0, ["lon", "lat"]] = [float(SECRET_LON), float(SECRET_LAT)]
    return df


# -- plain tables and partitions are read -------------------------------------------------------------------

def test_plain_parquet_csv_gzip_partitions_and_globs(tmp_path, lonlat):
    lonlat.to_parquet(tmp_path / "plain.parquet")
    accepted(tmp_path, tmp_path / "plain.parquet")
    with gzip.open(tmp_path / "t.csv.gz", "wt") as f:
        lonlat.to_csv(f, index=False)
    accepted(tmp_path, tmp_path / "t.csv.gz")
    root = tmp_path / "hive"
    for y in (2016, 2017):
        (root / f"year={y}").mkdir(parents=True)
        lonlat.iloc[: 1500 if y == 2016 else None].to_parquet(root / f"year={y}" / "part-0.parquet")
    err = accepted(tmp_path, root)
    assert "4,500 records read" in err
    err = accepted(tmp_path, str(root / "*" / "*.parquet"))
    assert "4,500 records read" in err


def test_plain_parquet_with_x_y_needs_a_crs_not_a_geometry(tmp_path, lonlat):
    p = tmp_path / "xy.parquet"
    lonlat.rename(columns={"lon": "px", "lat": "py"}).to_parquet(p)
    msg = refused(tmp_path, p, "--x", "px", "--y", "py")
    assert "--input-crs" in msg and "geometries" not in msg
    accepted(tmp_path, p, "--x", "px", "--y", "py", "--input-crs", "EPSG:4326")


def test_x_y_on_a_vector_layer(tmp_path):
    msg = refused(tmp_path, SAMPLE_POINTS, "--x", "lon", "--y", "lat")
    assert "coordinate columns of a CSV or Parquet table" in msg


def test_bom_is_accepted(tmp_path, lonlat):
    p = tmp_path / "bom.csv"
    p.write_bytes(b"\xef\xbb\xbf" + lonlat.to_csv(index=False).encode())
    accepted(tmp_path, p)


def test_one_bad_record_never_aborts(tmp_path, lonlat):
    p = tmp_path / "bad.csv"
    text = lonlat.to_csv(index=False).splitlines()
    text[5] = "200,44.9,1"                 # longitude out of range
    text[6] = "abc,44.9,1"                 # not a number
    text[7] = "-93.2,44.9,1,surplus"       # a malformed row
    text[8] = ",,1"                        # missing
    p.write_text("\n".join(text) + "\n")
    err = accepted(tmp_path, p)
    assert "4 dropped" in err and "longitude beyond ±180" in err and "not a number" in err
    assert SECRET_LON not in err


# -- mistakes: one line, no value ---------------------------------------------------------------------------------

def test_csv_without_header_does_not_show_its_first_row(tmp_path, lonlat):
    p = tmp_path / "nohead.csv"
    lonlat[["lon", "lat"]].to_csv(p, index=False, header=False)
    msg = refused(tmp_path, p)
    assert "looks like data" in msg and "header" in msg


def test_duplicate_column_names(tmp_path):
    p = tmp_path / "dup.csv"
    p.write_text(f"lon,lat,lon\n{SECRET_LON},{SECRET_LAT},1\n")
    assert "appears 2 times" in refused(tmp_path, p)


def test_multi_layer_geopackage_lists_its_layers(tmp_path):
    p = tmp_path / "two.gpkg"
    g = gpd.read_file(SAMPLE_POINTS).iloc[:100]
    g.to_file(p, layer="stops")
    g.iloc[:5].to_file(p, layer="other")
    msg = refused(tmp_path, p)
    assert "2 layers (stops, other)" in msg and "--layer" in msg
    accepted(tmp_path, p, "--layer", "stops", "--min-points", "5")


def test_swapped_lat_lon_is_named(tmp_path, lonlat):
    p = tmp_path / "swap.csv"
    lonlat.rename(columns={"lon": "lat", "lat": "lon"})[["lon", "lat"]].to_csv(p, index=False)
    msg = refused(tmp_path, p)
    assert "looks like lat/lon swapped" in msg and "none of the 0" not in msg


def test_latitudes_beyond_90_are_reported_as_such(tmp_path, lonlat):
    p = tmp_path / "lat.csv"
    d = lonlat.copy()
    d["lat"] += 50
    d.to_csv(p, index=False)
    msg = refused(tmp_path, p)
    assert "latitude beyond ±90" in msg and "empty" not in msg and "NaN" not in msg


def test_person_wording_only_with_a_person_column(tmp_path):
    p = tmp_path / "nan.csv"
    p.write_text("lon,lat,pid\nnan,nan,1\n,,2\n")
    msg = refused(tmp_path, p)
    assert "no usable points" in msg and "person" not in msg
    p2 = tmp_path / "noperson.csv"
    p2.write_text(f"lon,lat,pid\n{SECRET_LON},{SECRET_LAT},\n")
    msg = refused(tmp_path, p2, "--person", "pid", "--max-points-per-person", "3")
    assert "without a person identifier" in msg


def test_projected_coordinates_given_as_lonlat(tmp_path):
    p = tmp_path / "utm.csv"
    p.write_text("lon,lat\n" + "\n".join(f"{478123 + i},{4981234 + i}" for i in range(20)) + "\n")
    msg = refused(tmp_path, p)
    assert "--input-crs" in msg and "478123" not in msg and "4981234" not in msg


def test_missing_person_column(tmp_path, lonlat):
    p = tmp_path / "t.parquet"
    lonlat.to_parquet(p)
    assert "person column 'who'" in refused(tmp_path, p, "--person", "who", "--max-points-per-person", "2")


def test_empty_and_unreadable_files(tmp_path):
    p = tmp_path / "empty.csv"
    p.write_text("")
    assert "no records" in refused(tmp_path, p)
    q = tmp_path / "junk.parquet"
    q.write_bytes(b"PAR1 this is not parquet")
    assert "Parquet" in refused(tmp_path, q)
    assert "no file matches" in refused(tmp_path, str(tmp_path / "nothing-*.parquet"))


# -- Ctrl-C ------------------------------------------------------------------------------------------------------------

def test_ctrl_c_stops_cleanly_without_output(tmp_path):
    """SIGINT while a large input is being read: exit 130, one line, no output or temporary file."""
    n = 6_000_000
    rng = np.random.default_rng(0)
    p = tmp_path / "big.parquet"
    pq.write_table(pa.table({"lon": rng.uniform(-93.33, -93.19, n), "lat": rng.uniform(44.89, 45.05, n)}), p,
                   row_group_size=1 << 18)
    out = tmp_path / "out.gpkg"
    proc = subprocess.Popen([sys.executable, "-m", "dpgeo", "spans", str(p), "-o", str(out), *SPANS],
                            stderr=subprocess.PIPE, text=True)
    line = proc.stderr.readline()  # "[  0%] reading ..." once the run has started reading
    assert "reading" in line
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    err = proc.stderr.read()
    code = proc.wait(timeout=120)
    if code == 0:
        pytest.skip("the run finished before the signal arrived")
    assert code == 130, err
    assert "interrupted; no output written" in err and "Traceback" not in err
    assert not out.exists()
    assert not [f for f in os.listdir(tmp_path) if f.startswith(".dpgeo-")]


def test_a_geopackage_with_its_qgis_style_is_one_layer(tmp_path):
    """A point GeoPackage saved with a default style (QGIS's and dpgeo's ``layer_styles`` table) is read as its
    one layer of points: the style table is not a layer to choose between."""
    import sqlite3

    import geopandas as gpd
    import numpy as np

    import dpgeo

    rng = np.random.default_rng(0)
    g = gpd.GeoDataFrame(geometry=gpd.points_from_xy(rng.uniform(-93.3, -93.2, 200), rng.uniform(44.9, 45.0, 200)),
                         crs=4326)
    path = tmp_path / "pts.gpkg"
    g.to_file(path, layer="pts")
    with sqlite3.connect(path) as con:
        con.execute("CREATE TABLE layer_styles (id INTEGER PRIMARY KEY, f_table_name TEXT, styleQML TEXT)")
    res = dpgeo.heat(str(path), epsilon=1.0, cell_m=500, domain=(-93.3, 44.9, -93.2, 45.0), ledger=False, seed=1)
    assert int(res.layer["dp_count_raw"].sum()) > 150
