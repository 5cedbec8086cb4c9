"""Counting on a Dask cluster (a LocalCluster of 2 workers): the same counts, so the same layer for the same seed."""

import os
import subprocess
import sys

import geopandas as gpd
import numpy as np
import pandas as pd
import pytest

import dpgeo
from dpgeo.counting import count_points, open_points
from dpgeo.counting import dask as dask_counting
from dpgeo.domain import as_study_area
from dpgeo.errors import DataError, ParameterError
from dpgeo.grid import Grid
from helpers import SAMPLE_AREA, SAMPLE_POINTS

distributed = pytest.importorskip("distributed")

AREA = as_study_area(SAMPLE_AREA)
KW = dict(epsilon=1, radius_m=150, min_points=40, domain=AREA, seed=9)


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                                  silence_logs=50) as cluster, distributed.Client(cluster) as c:
        yield c


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("dask")
    g = gpd.read_file(SAMPLE_POINTS)
    df = pd.DataFrame({"lon": g.geometry.x, "lat": g.geometry.y, "pid": np.arange(len(g)) % 300})
    df.loc[10, "lon"] = 400.0  # one bad record, dropped and counted on a worker
    for i, part in enumerate(np.array_split(np.arange(len(df)), 3)):
        (d / f"part={i}").mkdir()
        df.iloc[part].to_parquet(d / f"part={i}" / "p.parquet", row_group_size=4000)
    return d


@pytest.fixture
def small_fragments(monkeypatch):
    monkeypatch.setattr(dask_counting, "DEFAULT_FRAGMENT_ROWS", 5000)  # about a dozen tasks


def test_same_layer_as_single_process(client, data, small_fragments):
    one = dpgeo.dbscan_spans(data, **KW)
    many = dpgeo.dbscan_spans(data, scheduler=client, **KW)
    assert many.diagnostics["counting"] == "dask"
    assert one.layer["dp_count"].tolist() == many.layer["dp_count"].tolist()
    assert one.layer.geometry.geom_equals(many.layer.geometry).all()
    for key in ("n_read", "n_dropped_invalid", "dropped_by_reason", "n_outside_domain", "n_used"):
        assert one.diagnostics[key] == many.diagnostics[key], key
    assert many.diagnostics["dropped_by_reason"] == {"lon_out_of_range": 1}


def test_gdal_layer_in_feature_ranges(client, small_fragments):
    src = open_points(SAMPLE_POINTS)
    assert len(src.fragments(5000)) == 11
    kw = dict(grid_for=lambda a: Grid(a, 100.0), domain=AREA)
    a = count_points(SAMPLE_POINTS, **kw)
    b = count_points(SAMPLE_POINTS, scheduler=client, **kw)
    np.testing.assert_array_equal(a.cell_id, b.cell_id)
    np.testing.assert_array_equal(a.count, b.count)


def test_person_cap_on_the_client(client, data, small_fragments):
    kw = dict(grid_for=lambda a: Grid(a, 100.0), domain=AREA, person="pid", cap=3)
    a = count_points(data, rng=np.random.default_rng(1), **kw)
    b = count_points(data, rng=np.random.default_rng(1), scheduler=client, **kw)
    # the same law, drawn differently: the same number kept (each of the 300 persons has > 3 points)
    assert a.n_points == b.n_points == 900
    assert b.diagnostics["n_dropped_by_person_cap"] == a.diagnostics["n_dropped_by_person_cap"]


def test_whole_input_problems_and_wavecluster(client, tmp_path, small_fragments):
    p = tmp_path / "nan.csv"
    p.write_text("lon,lat\nnan,nan\n")
    with pytest.raises(DataError, match="no usable points"):
        dpgeo.dbscan_spans(p, scheduler=client, **KW)
    res = dpgeo.dbscan_spans(p, scheduler=client, unattended=True, **KW)
    assert len(res.layer) == 0
    a = dpgeo.wavecluster(SAMPLE_POINTS, method="privthr", epsilon=1, cell_m=300, domain=AREA, seed=4)
    b = dpgeo.wavecluster(SAMPLE_POINTS, method="privthr", epsilon=1, cell_m=300, domain=AREA, seed=4,
                          scheduler=client)
    assert a.layer["dp_count"].tolist() == b.layer["dp_count"].tolist()


def test_bad_scheduler_values():
    for bad in (0, -1, "locale", True, 2.5):
        with pytest.raises(ParameterError, match="scheduler must be"):
            dpgeo.dbscan_spans(SAMPLE_POINTS, scheduler=bad, **KW)


def test_cli_local_cluster(tmp_path):
    """--engine dask --scheduler local:2 from the command line: a LocalCluster started and stopped by dpgeo."""
    out = tmp_path / "spans.gpkg"
    env = dict(os.environ)
    p = subprocess.run([sys.executable, "-m", "dpgeo", "spans", str(SAMPLE_POINTS), "-o", str(out), "--epsilon", "1",
                        "--radius", "150", "--min-points", "40", "--domain", str(SAMPLE_AREA), "--seed", "9",
                        "--engine", "dask", "--scheduler", "local:2"], capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stderr
    assert out.exists() and "with Dask (local:2)" in p.stderr
    one = dpgeo.dbscan_spans(SAMPLE_POINTS, **KW)
    assert len(gpd.read_file(out)) == len(one.layer)


def test_dask_dataframe_input(client, data):
    """A dask.dataframe with lon/lat columns: one task per partition, the same counts as the files."""
    dd = pytest.importorskip("dask.dataframe")
    df = pd.read_parquet(data)
    ddf = dd.from_pandas(df[["lon", "lat", "pid"]], npartitions=5)
    kw = dict(grid_for=lambda a: Grid(a, 100.0), domain=AREA)
    a = count_points(data, **kw)
    for scheduler in (client, None):
        b = count_points(ddf, scheduler=scheduler, **kw)
        np.testing.assert_array_equal(a.cell_id, b.cell_id)
        np.testing.assert_array_equal(a.count, b.count)
        assert b.diagnostics["dropped_by_reason"] == {"lon_out_of_range": 1}
    c = count_points(ddf, scheduler=client, person="pid", cap=3, rng=np.random.default_rng(1), **kw)
    assert c.n_points == 900


def test_a_series_counts_the_same_on_the_cluster(client, tmp_path, small_fragments):
    """Every point in its (period, cell) on the workers: the same per-period counts as in one process; the person
    cap over the series and per period, drawn on the client."""
    from dpgeo.counting.times import TimeSpec
    from dpgeo.periods import make_periods

    g = gpd.read_file(SAMPLE_POINTS)
    df = pd.DataFrame({"lon": g.geometry.x, "lat": g.geometry.y, "when": g["date"], "pid": np.arange(len(g)) % 200})
    path = tmp_path / "timed.parquet"
    df.to_parquet(path, row_group_size=4000)
    spec = TimeSpec("when", make_periods("quarter", "2017-01-01", "2018-01-01"))
    kw = dict(grid_for=lambda a: Grid(a, 100.0), domain=AREA, time=spec)
    a = count_points(path, **kw)
    b = count_points(path, scheduler=client, **kw)
    np.testing.assert_array_equal(a.cell_id, b.cell_id)
    np.testing.assert_array_equal(a.count, b.count)
    assert [p.n_points for p in a.by_period()] == [p.n_points for p in b.by_period()]
    for per_period, kept in ((False, 200 * 3), (True, 200 * 4 * 3)):
        c = count_points(path, person="pid", cap=3, rng=np.random.default_rng(1), scheduler=client,
                         cap_per_period=per_period, **kw)
        assert c.n_points == kept  # each of the 200 persons has more than 3 points in every quarter


def test_the_record_sketch_is_the_same_on_the_cluster(client, data, small_fragments, tmp_path):
    """The ledger's keyed record sketch, filled on the workers fragment by fragment and merged, equals the one
    filled in one process; and a declared dataset is recognised from a run on the cluster."""
    from dpgeo.budget import Ledger
    from dpgeo.counting.sketch import RecordSketch

    kw = dict(grid_for=lambda a: Grid(a, 100.0), domain=AREA)
    one, many = RecordSketch(bytes(range(16))), RecordSketch(bytes(range(16)))
    count_points(data, sketch=one, **kw)
    count_points(data, scheduler=client, sketch=many, **kw)
    assert one.n_records == many.n_records == 51_919  # the bad record is not a record of the input
    np.testing.assert_array_equal(one.hashes, many.hashes)
    np.testing.assert_array_equal(one.counts, many.counts)
    ledger = Ledger(tmp_path / "l.sqlite")
    ledger.declare("stops", [SAMPLE_POINTS], total_epsilon=2)
    with pytest.warns(dpgeo.errors.BudgetWarning, match="charged to the declared dataset 'stops': the input holds"):
        res = dpgeo.dbscan_spans(data, scheduler=client, ledger=ledger, **dict(KW, seed=None))
    assert res.metadata["dataset"] == "stops"
