"""PostGIS as an input, against a real PostgreSQL server with PostGIS (tests/postgres.py; never mocked).

The sample's stops copied into PostGIS give the same release (same seed) as the GeoPackage; records the
server would fail on (nulls, empties, lines, a missing person or time) are dropped one by one and counted by
reason, like in every other reader.
"""

import geopandas as gpd
import numpy as np
import pytest
import shapely

import dpgeo
from dpgeo.counting import open_points
from helpers import SAMPLE_AREA, SAMPLE_POINTS
from postgres import load_layer

pytestmark = pytest.mark.postgres


@pytest.fixture(scope="module")
def stops_db(postgres_server):
    """``(server, database)`` holding the sample's stops as table ``stops`` (EPSG:4326, in file order)."""
    db = postgres_server.new_database("stops")
    gdf = gpd.read_file(SAMPLE_POINTS)
    load_layer(postgres_server, db, "stops", gdf)
    return postgres_server, db


def _arrays(src):
    xs, ys, n, drops = [], [], 0, {}
    for b in src.batches():
        xs.append(b.x)
        ys.append(b.y)
        n += b.n_read
        for k, v in b.drops.items():
            drops[k] = drops.get(k, 0) + v
    return np.concatenate(xs), np.concatenate(ys), n, drops


@pytest.mark.parametrize("batch_rows", [1 << 20, 7_001])
def test_table_reads_the_same_points_as_the_geopackage(stops_db, batch_rows):
    server, db = stops_db
    src = open_points(dpgeo.postgis(server.url(db), table="stops"), batch_rows=batch_rows)
    assert src.crs.to_epsg() == 4326 and src.label == "PostGIS table 'stops'"
    x, y, n, drops = _arrays(src)
    fx, fy, fn, fdrops = _arrays(open_points(str(SAMPLE_POINTS)))
    assert n == fn and drops == fdrops
    # a table is read in its physical order (ranges of blocks), which need not be the order rows were added in
    np.testing.assert_array_equal(np.sort(x + 1j * y), np.sort(fx + 1j * fy))


def test_a_query_and_a_url_table_read_the_same_points(stops_db):
    server, db = stops_db
    fx, fy, _, _ = _arrays(open_points(str(SAMPLE_POINTS)))
    x, y, _, _ = _arrays(open_points(dpgeo.postgis(server.url(db), sql="SELECT geom FROM stops ORDER BY id")))
    np.testing.assert_array_equal(x, fx)
    x, y, _, _ = _arrays(open_points(server.url(db, table="stops")))
    np.testing.assert_array_equal(np.sort(x), np.sort(fx))


def test_the_api_gives_the_same_release_as_the_geopackage(stops_db):
    server, db = stops_db
    kw = dict(epsilon=0.5, radius_m=150, min_points=40, domain=str(SAMPLE_AREA), seed=7, ledger=False)
    a = dpgeo.dbscan_spans(str(SAMPLE_POINTS), **kw)
    b = dpgeo.dbscan_spans(dpgeo.postgis(server.url(db), table="stops"), **kw)
    assert len(a.layer) == len(b.layer) > 0
    assert a.layer.geometry.normalize().geom_equals_exact(b.layer.geometry.normalize(), 0).all()
    assert a.diagnostics["n_used"] == b.diagnostics["n_used"]


def test_one_bad_record_drops_only_itself(postgres_db):
    server, db = postgres_db
    geoms = [shapely.Point(1, 2), None, shapely.Point(), shapely.LineString([(0, 0), (1, 1)]), shapely.Point(3, 4),
             shapely.Point(float("nan"), 5.0), shapely.Point(5, 6)]
    gdf = gpd.GeoDataFrame({"person": ["a", "b", "c", "d", None, "f", "g"],
                            "reported_at": ["2024-01-05", "2024-01-06", None, "2024-01-07", "2024-02-01", None,
                                            "2024-01-09"]},
                           geometry=geoms, crs="EPSG:32615")
    load_layer(server, db, "mixed", gdf, geometry_type="Geometry")
    x, y, n, drops = _arrays(open_points(dpgeo.postgis(server.url(db), table="mixed")))
    assert n == 7
    assert drops == {"null_geometry": 1, "empty_geometry": 1, "non_point": 1, "non_finite": 1}
    assert sorted(zip(x, y)) == [(1.0, 2.0), (3.0, 4.0), (5.0, 6.0)]
    src = open_points(dpgeo.postgis(server.url(db), table="mixed"), person="person")
    batches = list(src.batches())
    assert batches[0].drops.get("no_person") == 1 and batches[0].person.dtype == np.int64


def test_a_series_reads_times_from_a_timestamp_and_a_text_column(postgres_db):
    from dpgeo.counting.times import TimeSpec
    from dpgeo.periods import make_periods

    server, db = postgres_db
    gdf = gpd.GeoDataFrame({"reported_at": ["2024-01-05T10:00:00Z", "2024-02-06T00:00:00Z", None,
                                            "2024-03-07T00:00:00Z"],
                            "note": ["2024-01-05T10:00:00Z", "not a time", "2024-02-01", None]},
                           geometry=[shapely.Point(i, i) for i in range(4)], crs="EPSG:32615")
    load_layer(server, db, "timed", gdf)
    periods = make_periods("month", "2024-01-01", "2024-03-01")
    src = open_points(dpgeo.postgis(server.url(db), table="timed"), time=TimeSpec("reported_at", periods))
    (b,) = list(src.batches())
    assert b.period.tolist() == [0, 1] and b.drops == {"missing_time": 1, "time_outside_bounds": 1}
    src = open_points(dpgeo.postgis(server.url(db), table="timed"), time=TimeSpec("note", periods))
    (b,) = list(src.batches())
    assert b.period.tolist() == [0, 1] and b.drops == {"unparsed_time": 1, "missing_time": 1}


def test_structure_errors_are_one_line_without_the_connection(postgres_db):
    server, db = postgres_db
    from dpgeo.errors import InputError

    with pytest.raises(InputError, match="no geometry or geography column"):
        open_points(dpgeo.postgis(server.url(db), sql="SELECT 1 AS a"))
    with pytest.raises(InputError, match="does not exist") as e:
        open_points(dpgeo.postgis(server.url(db), table="nope"))
    with pytest.raises(InputError, match="holds a password"):
        dpgeo.postgis(f"postgresql://{server.user}:{server.password}@127.0.0.1:{server.port}/{db}", table="t")
    bad = f"postgresql://nobody_x@127.0.0.1:{server.port}/{db}"
    with pytest.raises(InputError, match="refused the login") as e2:
        open_points(dpgeo.postgis(bad, table="t"))
    for err in (e, e2):
        text = str(err.value)
        assert "127.0.0.1" not in text and str(server.port) not in text and "nobody_x" not in text


def _cli(*args, env=None):
    import os
    import subprocess
    import sys

    from helpers import ROOT

    env = dict(os.environ, PYTHONPATH=str(ROOT), **(env or {}))
    return subprocess.run([sys.executable, "-m", "dpgeo", *args], capture_output=True, text=True, env=env,
                          timeout=300)


def test_the_cli_gives_the_same_release_and_no_credential_anywhere(stops_db, tmp_path):
    import os

    server, db = stops_db
    url = server.url(db, host="localhost")
    common = ["--epsilon", "0.5", "--radius", "150", "--min-points", "40", "--domain", str(SAMPLE_AREA),
              "--seed", "7", "--dataset", "minneapolis-stops"]
    env = {"DPGEO_LEDGER": str(tmp_path / "ledger.sqlite")}
    pg = _cli("spans", url, "--table", "stops", "-o", str(tmp_path / "pg.gpkg"), "-o", str(tmp_path / "pg.html"),
              *common, env=env)
    assert pg.returncode == 0, pg.stderr
    assert "reading PostGIS table 'stops'" in pg.stderr
    f = _cli("spans", str(SAMPLE_POINTS), "-o", str(tmp_path / "file.gpkg"), *common, env=env)
    assert f.returncode == 0, f.stderr
    a, b = gpd.read_file(tmp_path / "pg.gpkg"), gpd.read_file(tmp_path / "file.gpkg")
    assert len(a) == len(b) > 0 and a.geometry.geom_equals_exact(b.geometry, 0).all()
    q = _cli("spans", url, "--sql", "SELECT geom FROM stops WHERE id % 2 = 0", "-o", str(tmp_path / "q.gpkg"),
             *common, env=env)
    assert q.returncode == 0, q.stderr
    bad = _cli("spans", url, "--table", "nope", "-o", str(tmp_path / "bad.gpkg"), *common, env=env)
    assert bad.returncode == 2 and "does not exist" in bad.stderr and not (tmp_path / "bad.gpkg").exists()
    # the password, user, host and port of the connection: in no output, ledger row, message
    secrets = [server.password, server.user, "localhost", f":{server.port}", "postgresql://"]
    for text in (pg.stderr, pg.stdout, q.stderr, bad.stderr):
        for s in secrets:
            assert s not in text
    for name in os.listdir(tmp_path):
        data = (tmp_path / name).read_bytes()
        for s in secrets:
            assert s.encode() not in data, (s, name)


def test_a_series_from_a_timestamptz_column_equals_the_geopackage_text_times(stops_db):
    """The sample's ``date`` is ISO text in the GeoPackage and ``timestamptz`` in PostGIS: same periods, same maps."""
    server, db = stops_db
    kw = dict(epsilon=1.0, cell_m=500, domain=str(SAMPLE_AREA), seed=3, ledger=False, time="date", period="quarter",
              period_start="2017-01-01", period_end="2018-01-01", timezone="America/Chicago")
    a = dpgeo.heat(str(SAMPLE_POINTS), **kw)
    b = dpgeo.heat(dpgeo.postgis(server.url(db), table="stops"), **kw)
    cols = ["period", "cell_id", "dp_count"]
    pa_, pb = (r.layer[cols].sort_values(cols[:2]).reset_index(drop=True) for r in (a, b))
    assert len(pa_) > 0 and pa_.equals(pb)


def test_a_person_cap_keeps_as_many_points_as_from_the_geopackage(stops_db):
    server, db = stops_db
    kw = dict(epsilon=1.0, radius_m=200, min_points=50, domain=str(SAMPLE_AREA), seed=5, ledger=False,
              person="neighborhood", max_points_per_person=40)
    a = dpgeo.dbscan_spans(str(SAMPLE_POINTS), **kw)
    b = dpgeo.dbscan_spans(dpgeo.postgis(server.url(db), table="stops"), **kw)
    # which points a person keeps is drawn at random in reading order (physical in PostGIS); how many is not
    assert a.diagnostics["n_used"] == b.diagnostics["n_used"]
    assert a.diagnostics.get("n_dropped_by_person_cap") == b.diagnostics.get("n_dropped_by_person_cap")
