"""Counting in batches: real files of every kind in, the same counts as in memory, bad records dropped and counted."""

import gzip
import json
import logging

import geopandas as gpd
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import shapely
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dpgeo
from dpgeo.counting import CellCounts, count_points, exact_counts, open_points, read_points
from dpgeo.counting.decode import decode_wkb
from dpgeo.domain import as_study_area
from dpgeo.errors import DataError, InputError, OutsideStudyAreaError
from dpgeo.grid import Grid
from helpers import SAMPLE_AREA, SAMPLE_POINTS

AREA = as_study_area(SAMPLE_AREA)


def grid_for(area):
    return Grid(area, 100.0)


def counts_of(points, **kw):
    return count_points(points, grid_for=grid_for, domain=AREA, **kw)


@pytest.fixture(scope="module")
def stops():
    g = gpd.read_file(SAMPLE_POINTS).iloc[:6000].reset_index(drop=True)
    g["pid"] = np.arange(len(g)) % 97
    return g


@pytest.fixture(scope="module")
def reference(stops):
    """Counts of the sample's first 6000 points, computed in memory without any reader."""
    return counts_of((stops.geometry.x.to_numpy(), stops.geometry.y.to_numpy(), "EPSG:4326"))


def write(kind, stops, d):
    """The same points as a file (or folder, or glob) of the given kind; returns what to pass as input."""
    lonlat = pd.DataFrame({"lon": stops.geometry.x, "lat": stops.geometry.y, "pid": stops["pid"]})
    if kind in ("gpkg", "geojson", "shp", "fgb"):
        p = d / f"in.{kind}"
        stops.to_file(p)
        return p
    if kind == "geoparquet":
        p = d / "in.parquet"
        stops.to_parquet(p, row_group_size=1000)
        return p
    if kind == "parquet":
        p = d / "plain.parquet"
        lonlat.to_parquet(p, row_group_size=1000)
        return p
    if kind == "csv":
        p = d / "in.csv"
        lonlat.to_csv(p, index=False)
        return p
    if kind == "csv.gz":
        p = d / "in.csv.gz"
        with gzip.open(p, "wt") as f:
            lonlat.to_csv(f, index=False)
        return p
    if kind == "hive":
        root = d / "hive"
        for part, rows in (("a", slice(0, 2500)), ("b", slice(2500, None))):
            (root / f"part={part}").mkdir(parents=True)
            lonlat.iloc[rows].to_parquet(root / f"part={part}" / "data.parquet", row_group_size=700)
        (root / "_SUCCESS").write_text("")
        return root
    if kind == "glob":
        for i, rows in enumerate((slice(0, 3000), slice(3000, None))):
            stops.iloc[rows].to_parquet(d / f"chunk{i}.parquet")
        return str(d / "chunk*.parquet")
    raise AssertionError(kind)


KINDS = ["gpkg", "geojson", "shp", "fgb", "geoparquet", "parquet", "csv", "csv.gz", "hive", "glob"]


@pytest.mark.parametrize("kind", KINDS)
def test_every_input_kind_streams_to_the_same_counts(tmp_path, stops, reference, kind):
    path = write(kind, stops, tmp_path)
    src = open_points(path, batch_rows=777)
    assert sum(1 for _ in src.batches()) >= 8  # really read in batches
    c = counts_of(src)
    assert c.diagnostics["n_read"] == 6000 and c.diagnostics["n_dropped_invalid"] == 0
    np.testing.assert_array_equal(c.cell_id, reference.cell_id)
    np.testing.assert_array_equal(c.count, reference.count)
    t = read_points(path)  # the in-memory reader gives the same points
    assert t.n_read == 6000 and t.x.size == 6000


@pytest.mark.parametrize("kind", ["gpkg", "parquet", "csv", "hive"])
def test_person_column_from_every_kind(tmp_path, stops, kind):
    path = write(kind, stops, tmp_path)
    t = read_points(path, person="pid")
    assert t.person.size == 6000
    assert sorted(pd.unique(t.person.astype(str)))[:3] == sorted(stops["pid"].astype(str).unique())[:3]


def test_streaming_run_equals_in_memory_run(tmp_path, stops):
    path = write("gpkg", stops, tmp_path)
    kw = dict(epsilon=1, radius_m=150, min_points=40, domain=AREA, seed=3)
    a = dpgeo.dbscan_spans(path, **kw)
    b = dpgeo.dbscan_spans(dpgeo.read_points(path), **kw)
    c = dpgeo.dbscan_spans(dpgeo.open_points(path, batch_rows=100), **kw)
    assert a.layer["dp_count"].tolist() == b.layer["dp_count"].tolist() == c.layer["dp_count"].tolist()
    assert a.layer.geometry.geom_equals(c.layer.geometry).all()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(1, 400), batch=st.integers(1, 90), seed=st.integers(0, 2**31), bad=st.floats(0, 0.3))
def test_batches_never_change_the_counts(n, batch, seed, bad):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-100, 1100, n)
    y = rng.uniform(-100, 1100, n)
    kill = rng.random(n) < bad
    x[kill & (rng.random(n) < 0.5)] = np.nan
    y[kill] = np.where(rng.random(kill.sum()) < 0.5, np.inf, y[kill])
    kw = dict(grid_for=lambda a: Grid(a, 50.0), domain=(0, 0, 1000, 1000), domain_crs="EPSG:32615",
              crs="EPSG:32615", unattended=True)
    whole = count_points((x, y, "EPSG:32615"), batch_rows=10**6, **kw)
    parts = count_points((x, y, "EPSG:32615"), batch_rows=batch, **kw)
    np.testing.assert_array_equal(whole.cell_id, parts.cell_id)
    np.testing.assert_array_equal(whole.count, parts.count)
    ok = np.isfinite(x) & np.isfinite(y) & (x >= 0) & (x <= 1000) & (y >= 0) & (y <= 1000)
    g = Grid(as_study_area((0, 0, 1000, 1000), domain_crs="EPSG:32615", working_crs="EPSG:32615"), 50.0)
    ids, cnt = exact_counts(g, g.cell_index(x[ok], y[ok])[0])
    np.testing.assert_array_equal(parts.cell_id, ids)
    np.testing.assert_array_equal(parts.count, cnt)
    assert parts.diagnostics["n_read"] == n
    assert parts.diagnostics["n_dropped_invalid"] == int((~(np.isfinite(x) & np.isfinite(y))).sum())


# -- bad records: dropped and counted -----------------------------------------------------------------

def test_bad_csv_records_are_dropped_by_reason(tmp_path):
    p = tmp_path / "bad.csv"
    p.write_text("lon,lat,pid\n-93.27,44.98,1\n200,44.98,2\n-93.27,95,3\nnan,44.9,4\n,44.9,5\n-93.2,abc,6\n"
                 "-93.26,44.97,\n-93.25,44.96,8,extra\n-93.24,44.95,9\n")
    c = counts_of(p, person="pid", cap=5, rng=np.random.default_rng(0))
    d = c.diagnostics
    assert d["n_read"] == 9
    assert d["dropped_by_reason"] == {"lon_out_of_range": 1, "lat_out_of_range": 1, "missing_coordinate": 2,
                                      "unparsed": 1, "no_person": 1, "malformed_row": 1}
    assert d["n_dropped_invalid"] == 7 and d["n_used"] == 2


def test_bad_geometries_are_dropped_by_reason(tmp_path):
    p = tmp_path / "mixed.geojson"
    feats = [shapely.Point(-93.27, 44.98), shapely.Point(), None, shapely.Point(-93.26, 44.97),
             shapely.box(-93.3, 44.9, -93.2, 45.0), shapely.Point(-93.25, 44.96)]
    gpd.GeoDataFrame({"a": range(6)}, geometry=feats, crs=4326).to_file(p)
    for engine in ("pyogrio", "fiona"):
        c = count_points(open_points(p, engine=engine), grid_for=grid_for, domain=AREA)
        d = c.diagnostics["dropped_by_reason"]
        assert d["non_point"] == 1 and d.get("empty_geometry", 0) + d["null_geometry"] == 2  # GeoJSON: empty → null
        assert c.n_points == 3 and c.diagnostics["n_dropped_invalid"] == 3


def test_geodataframe_with_bad_rows(stops):
    g = stops.iloc[:10].copy()
    g.loc[0, "geometry"] = shapely.Point()
    g.loc[1, "geometry"] = shapely.Point(250, 44)
    c = counts_of(g)
    assert c.diagnostics["dropped_by_reason"] == {"empty_geometry": 1, "lon_out_of_range": 1}


def test_unprojectable_points_are_counted():
    c = count_points(([500000.0, 1e30], [4980000.0, 1e30], "EPSG:32615"), grid_for=lambda a: Grid(a, 100.0),
                     domain=(-93.1, 44.9, -92.9, 45.1), crs="EPSG:3857")
    assert c.n_points == 1
    assert c.diagnostics["dropped_by_reason"].get("unprojectable", 0) + c.diagnostics["n_outside_domain"] == 1


# -- whole-input problems: owner's mode raises, unattended mode logs ------------------------------------

def _csv(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_projected_coordinates_read_as_lonlat(tmp_path, caplog):
    rows = "\n".join(f"{478000 + i},{4980000 + i}" for i in range(50))
    p = _csv(tmp_path, "utm.csv", "lon,lat\n" + rows + "\n-93.27,44.98\n")
    with pytest.raises(DataError, match="outside the longitude/latitude range in 50 of 51 records") as e:
        counts_of(p)
    assert "478000" not in str(e.value) and "--input-crs" in str(e.value)
    owner = logging.getLogger("dpgeo.owner")
    owner.addHandler(caplog.handler)  # the owner's log reaches only the handlers attached to it
    try:
        c = counts_of(p, unattended=True)
    finally:
        owner.removeHandler(caplog.handler)
    assert c.n_points == 1 and "outside the longitude/latitude range" in c.diagnostics["owner_warnings"][0]
    assert any("do not publish" in r.getMessage() for r in caplog.records)


def test_swapped_lat_lon(tmp_path):
    rows = "\n".join(f"{44.9 + i / 1000:.4f},{-93.3 + i / 1000:.4f}" for i in range(50))
    p = _csv(tmp_path, "swap.csv", "lon,lat\n" + rows + "\n")
    with pytest.raises(DataError, match="looks like lat/lon swapped"):
        counts_of(p)


def test_swapped_lat_lon_inside_the_range(tmp_path):
    # both coordinates in range after the swap: the study area tells
    area = (8.0, 49.0, 9.0, 50.0)
    rows = "\n".join(f"{49.2 + i / 100:.3f},{8.2 + i / 100:.3f}" for i in range(50))
    p = _csv(tmp_path, "swap2.csv", "lon,lat\n" + rows + "\n")
    with pytest.raises(OutsideStudyAreaError, match="looks like lat/lon swapped") as e:
        count_points(p, grid_for=lambda a: Grid(a, 500.0), domain=area)
    assert "none of the 0" not in str(e.value)


def test_latitudes_beyond_90(tmp_path):
    rows = "\n".join(f"-93.{i:02d},{95 + i / 10:.1f}" for i in range(50))
    p = _csv(tmp_path, "lat.csv", "lon,lat\n" + rows + "\n")
    with pytest.raises(DataError, match="latitude beyond ±90") as e:
        counts_of(p)
    assert "empty" not in str(e.value) and "NaN" not in str(e.value)


def test_mostly_non_point_geometries(tmp_path):
    p = tmp_path / "polys.geojson"
    geoms = [shapely.box(-93.3 + i / 100, 44.9, -93.29 + i / 100, 44.91) for i in range(5)] + \
        [shapely.Point(-93.27, 44.98)]
    gpd.GeoDataFrame({"a": range(6)}, geometry=geoms, crs=4326).to_file(p)
    with pytest.raises(DataError, match="5 of 6 records .* Polygon geometries"):
        counts_of(p)


def test_no_usable_points_message_names_reasons(tmp_path):
    p = _csv(tmp_path, "nan.csv", "lon,lat\nnan,nan\n,\n")
    with pytest.raises(DataError, match="no usable points") as e:
        counts_of(p)
    assert "person" not in str(e.value)
    p = _csv(tmp_path, "nop.csv", "lon,lat,pid\n-93.27,44.98,\n")
    with pytest.raises(DataError, match="without a person identifier"):
        counts_of(p, person="pid", cap=2, rng=np.random.default_rng(0))


def test_unattended_empty_input_gives_empty_counts(tmp_path):
    p = _csv(tmp_path, "nan.csv", "lon,lat\nnan,nan\n")
    c = counts_of(p, unattended=True)
    assert isinstance(c, CellCounts) and c.n_points == 0 and c.diagnostics["owner_warnings"]
    res = dpgeo.dbscan_spans(p, epsilon=1, radius_m=150, min_points=40, domain=AREA, unattended=True)
    assert len(res.layer) == 0 and res.metadata["differentially_private"]


def test_structure_errors_are_errors_in_both_modes(tmp_path, stops):
    p = _csv(tmp_path, "cols.csv", "a,b\n1,2\n")
    for unattended in (False, True):
        with pytest.raises(InputError, match="cannot find coordinate columns"):
            counts_of(p, unattended=unattended)
    lines = tmp_path / "lines.gpkg"
    gpd.GeoDataFrame({"a": [1]}, geometry=[shapely.LineString([(-93.3, 44.9), (-93.2, 45)])], crs=4326).to_file(lines)
    with pytest.raises(InputError, match="LineString"):
        open_points(lines)


# -- large offsets ----------------------------------------------------------------------------------------

def _wkb_points(x, y):
    rec = np.zeros(x.size, dtype=[("o", "u1"), ("t", "<u4"), ("x", "<f8"), ("y", "<f8")])
    rec["o"], rec["t"], rec["x"], rec["y"] = 1, 1, x, y
    return rec.tobytes()


def test_large_binary_offsets_beyond_2gb():
    """A large_binary column whose offsets pass 2**31: decoded in place (the zero pages are never touched)."""
    n = 1000
    start = (1 << 31) + 5
    data = np.zeros(start + 21 * n, dtype=np.uint8)  # virtual memory; only the last pages are written
    x, y = np.linspace(0, 1, n), np.linspace(2, 3, n)
    data[start:] = np.frombuffer(_wkb_points(x, y), dtype=np.uint8)
    offsets = np.arange(start, start + 21 * (n + 1), 21, dtype=np.int64)
    arr = pa.Array.from_buffers(pa.large_binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])
    gx, gy, valid, drops, _ = decode_wkb(arr)
    np.testing.assert_array_equal(gx, x)
    np.testing.assert_array_equal(gy, y)
    assert valid.all() and drops == {"null_geometry": 0}


def test_geoparquet_with_large_binary_and_many_chunks(tmp_path):
    x = np.linspace(-93.3, -93.2, 5000)
    y = np.linspace(44.9, 45.0, 5000)
    col = pa.array([_wkb_points(x[i:i + 1], y[i:i + 1]) for i in range(5000)], type=pa.large_binary())
    geo = {"version": "1.0.0", "primary_column": "geometry", "columns": {"geometry": {"encoding": "WKB"}}}
    t = pa.table({"geometry": col}).replace_schema_metadata({b"geo": json.dumps(geo).encode()})
    p = tmp_path / "large.parquet"
    pq.write_table(t, p, row_group_size=512)
    tab = read_points(p, batch_rows=300)
    np.testing.assert_array_equal(tab.x, x)
    assert tab.crs.to_epsg() == 4326 or "CRS84" in tab.crs.to_string()


# -- progress, cancel and the baseline's recount ---------------------------------------------------------------

def test_progress_reports_records_and_rate_and_can_cancel(tmp_path, stops, monkeypatch):
    from dpgeo.counting import stream

    monkeypatch.setattr(stream, "PROGRESS_FIRST_S", 0.0)
    monkeypatch.setattr(stream, "PROGRESS_EVERY_S", 0.0)
    path = write("parquet", stops, tmp_path)
    seen = []
    dpgeo.dbscan_spans(dpgeo.open_points(path, batch_rows=500), epsilon=1, radius_m=150, min_points=40,
                       domain=AREA, progress=lambda f, m: seen.append((f, m)))
    reads = [(f, m) for f, m in seen if m.startswith("read ")]
    assert reads and "of 6,000 records" in reads[-1][1] and "records/s" in reads[-1][1]
    assert all(0 <= f <= 0.4 for f, _ in reads)

    class Stop(Exception):
        pass

    def cancel(f, m):
        if m.startswith("read "):
            raise Stop

    with pytest.raises(Stop):
        dpgeo.dbscan_spans(dpgeo.open_points(path, batch_rows=500), epsilon=1, radius_m=150, min_points=40,
                           domain=AREA, progress=cancel)


def test_baseline_recount_equals_the_points_in_memory(tmp_path, stops):
    from dpgeo.mechanisms.wavecluster import wavecluster_baseline
    from dpgeo.noise import NoiseSource

    path = write("csv", stops, tmp_path)
    kw = dict(method="baseline", epsilon=1.0, cell_m=250, domain=AREA, seed=5)
    a = dpgeo.wavecluster(path, **kw)
    b = dpgeo.wavecluster(dpgeo.read_points(path), **kw)
    assert a.layer["dp_count"].tolist() == b.layer["dp_count"].tolist()
    # and both equal the mechanism given the projected points themselves
    g = a.cells.grid
    t = dpgeo.read_points(path)
    from pyproj import Transformer

    px, py = Transformer.from_crs(t.crs, g.area.crs, always_xy=True).transform(t.x, t.y)
    inside = g.assign(px, py, return_mask=True).mask
    r = wavecluster_baseline(px[inside], py[inside], bounds=g.bounds, shape=(g.ny, g.nx), epsilon=1.0,
                             rng=NoiseSource(5))
    assert r.n_clusters == a.metadata["n_clusters"]
    np.testing.assert_array_equal(r.noisy_counts.ravel()[a.cells.cell_id], a.cells.count)
