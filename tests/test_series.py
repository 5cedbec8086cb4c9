"""Map series: public periods, times read beside the points, one pass, one ledger entry, appends, outputs."""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import sqlite3
import subprocess
import sys
import warnings
from fractions import Fraction

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

import dpgeo
from dpgeo.budget import Ledger
from dpgeo.counting import count_points
from dpgeo.counting.times import TimeSpec, periods_from_arrow, seconds_from_arrow
from dpgeo.errors import BudgetExceededError, DataError, InputError, ParameterError
from dpgeo.grid import Grid
from dpgeo.periods import MAX_PERIODS, make_periods

from helpers import ROOT, SHARED_DATA

UBER = SHARED_DATA / "geo" / "uber_nyc_pickups_2014_sample.csv.gz"
T0 = 1388534400  # 2014-01-01T00:00:00Z
DOMAIN = dict(domain=(0, 0, 2000, 2000), domain_crs="EPSG:32615", crs="EPSG:32615")
SPANS = dict(epsilon=1.0, radius_m=50, min_points=20, **DOMAIN)


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def _points(n=6000, months=5, seed=0, empty_month=None):
    """Two clusters and background noise over ``months`` months from 2014-01; optionally a month with no point."""
    rng = np.random.default_rng(seed)
    x = np.r_[rng.normal(500, 30, n), rng.normal(1500, 30, n // 2), rng.uniform(0, 2000, n // 4)]
    y = np.r_[rng.normal(500, 30, n), rng.normal(1400, 30, n // 2), rng.uniform(0, 2000, n // 4)]
    month = rng.integers(0, months, x.size)
    if empty_month is not None:
        month[month == empty_month] = (empty_month + 1) % months
    starts = np.array([dt.datetime(2014, m + 1, 1, tzinfo=dt.timezone.utc).timestamp() for m in range(months + 1)])
    t = (starts[month] + rng.uniform(0, 1, x.size) * (starts[month + 1] - starts[month])).astype(np.int64)
    return x, y, t


# -- public periods ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind, n, first, last", [
    ("day", 31, "2014-01-01", "2014-01-31"), ("week", 6, "2014-W01", "2014-W06"),
    ("month", 12, "2014-01", "2014-12"), ("quarter", 4, "2014-Q1", "2014-Q4"), ("year", 1, "2014", "2014")])
def test_periods_of_each_kind(kind, n, first, last):
    end = "2014-02-01" if kind == "day" else "2014-02-05" if kind == "week" else "2015-01-01"
    p = make_periods(kind, "2014-01-01", end)  # 2014-01-01 is a Wednesday: the first week is cut at the bound
    assert (len(p), p.labels[0], p.labels[-1]) == (n, first, last)
    assert p.bounds[0] == T0 and all(a < b for a, b in zip(p.bounds, p.bounds[1:]))


def test_periods_follow_the_local_calendar_across_daylight_saving():
    p = make_periods("month", "2014-03-01", "2014-05-01", "America/New_York")
    # March starts at 05:00 UTC (EST), April at 04:00 UTC (EDT)
    assert p.interval(0) == ("2014-03-01T05:00:00Z", "2014-04-01T04:00:00Z")
    assert p.interval(1)[1] == "2014-05-01T04:00:00Z"
    days = make_periods("day", "2014-03-08", "2014-03-11", "America/New_York")
    assert [b - a for a, b in days.pairs()] == [86400, 82800, 86400]  # the 23-hour day of the change


@pytest.mark.parametrize("bad, match", [
    (dict(period="fortnight"), "period must be one of"),
    (dict(period_end="2013-12-31"), "must be after"),
    (dict(period_start="01/02/2014"), "not an ISO 8601"),
    (dict(timezone="Mars/Olympus"), "time zone"),
    (dict(period="day", period_end="2020-01-01"), f"more than {MAX_PERIODS} periods"),
    (dict(period_start=None), "public bounds"),
])
def test_periods_refused(bad, match):
    kw = dict(period="month", period_start="2014-01-01", period_end="2014-06-01", timezone=None)
    kw.update(bad)
    with pytest.raises(ParameterError, match=match):
        make_periods(kw["period"], kw["period_start"], kw["period_end"], kw["timezone"])


# -- times -------------------------------------------------------------------------------------------------------

def test_text_times_with_and_without_zones_and_epoch_seconds():
    col = pa.array(["2014-04-01T00:00:00Z", "2014-04-01 02:00+02:00", "2014/4/1 00:00", "2014-04-01T00:00:00.75-0000",
                    "1396310400", "1.3963104e9", " 2014-04-01 ", "2014-02-30", "2014-04-01 24:00", "", None, "soon"])
    s, missing, unparsed = seconds_from_arrow(col, "UTC")
    ok = ~missing & ~unparsed
    assert ok.tolist() == [True] * 7 + [False] * 5
    assert set(s[ok].tolist()) == {1396310400}
    assert missing.tolist()[9:11] == [True, True] and unparsed.tolist()[7:9] == [True, True] and unparsed[11]


def test_times_without_a_zone_are_wall_clock_times_of_the_timezone():
    s, _, _ = seconds_from_arrow(pa.array(["2014-04-01T00:00:00", "2014-04-01T00:00:00Z"]), "America/New_York")
    assert s.tolist() == [1396310400 + 4 * 3600, 1396310400]
    # the hour the change to summer time skips moves forward; the repeated hour in autumn is its first occurrence
    s, _, bad = seconds_from_arrow(pa.array(["2014-03-09 02:30", "2014-11-02 01:30"]), "America/New_York")
    assert not bad.any()
    assert s.tolist() == [int(dt.datetime(2014, 3, 9, 7, 0, tzinfo=dt.timezone.utc).timestamp()),
                          int(dt.datetime(2014, 11, 2, 5, 30, tzinfo=dt.timezone.utc).timestamp())]


def test_arrow_and_pandas_timestamps_dates_and_numbers():
    aware = pd.Series(pd.to_datetime(["2014-04-01T00:00:00Z"]))
    naive = pd.Series(pd.to_datetime(["2014-04-01T00:00:00"]))
    for col, tz, want in [(pa.array(aware), "America/New_York", 1396310400),
                          (pa.array(naive), "America/New_York", 1396310400 + 14400),
                          (pa.array([dt.date(2014, 4, 1)]), "UTC", 1396310400),
                          (pa.array([1396310400.9]), "UTC", 1396310400),
                          (pa.array([1396310400], type=pa.int32()), "UTC", 1396310400),
                          (pa.array([1396310400000], type=pa.timestamp("ms")), "UTC", 1396310400)]:
        s, missing, bad = seconds_from_arrow(col, tz)
        assert s.tolist() == [want] and not missing.any() and not bad.any(), col.type
    with pytest.raises(InputError, match="must hold times"):
        seconds_from_arrow(pa.array([True]), "UTC")


def test_a_time_format_for_other_orders():
    p = make_periods("month", "2014-04-01", "2014-06-01")
    idx, drops = periods_from_arrow(pa.array(["04/30/2014 23:59:59", "05/01/2014 00:00:00", "2014-05-01"]), p,
                                    time_format="%m/%d/%Y %H:%M:%S")
    assert idx.tolist() == [0, 1, -2] and drops == {"unparsed_time": 1}


# -- counting: one pass, per (period, cell) ------------------------------------------------------------------------

def _grid_for(a):
    return Grid(a, 100.0)


def test_series_counts_equal_the_counts_of_each_period_counted_alone(tmp_path):
    x, y, t = _points(3000, months=4)
    p = make_periods("month", "2014-01-01", "2014-05-01")
    spec = TimeSpec(None, p)
    c = count_points((x, y, "EPSG:32615"), grid_for=_grid_for, time=spec, times=t, **{k: DOMAIN[k] for k in DOMAIN})
    parts = c.by_period()
    assert len(parts) == 4
    period = p.index(t)
    for i, part in enumerate(parts):
        sel = period == i
        alone = count_points((x[sel], y[sel], "EPSG:32615"), grid_for=_grid_for, **DOMAIN)
        assert part.cell_id.tolist() == alone.cell_id.tolist() and part.count.tolist() == alone.count.tolist()
        assert part.grid is parts[0].grid


@pytest.mark.parametrize("fmt", ["csv", "gpkg", "parquet", "frame"])
def test_every_reader_reads_the_time_column_and_counts_drops_per_reason(tmp_path, fmt):
    import geopandas as gpd

    x, y, t = _points(400, months=3)
    times = pd.Series(pd.to_datetime(t, unit="s", utc=True).strftime("%Y-%m-%dT%H:%M:%SZ"), dtype=object)
    times.iloc[:3] = None
    times.iloc[3:5] = "later"
    times.iloc[5:12] = "2013-12-31T23:00:00Z"
    gdf = gpd.GeoDataFrame({"when": times}, geometry=gpd.points_from_xy(x, y), crs="EPSG:32615")
    path = tmp_path / f"pts.{fmt}"
    if fmt == "csv":
        pd.DataFrame({"x": x, "y": y, "when": times}).to_csv(path, index=False)
        src = dpgeo.open_points(path, input_crs="EPSG:32615", time=None)  # the structure without a series
    elif fmt == "gpkg":
        gdf.to_file(path)
    elif fmt == "parquet":
        gdf.to_parquet(path)
    p = make_periods("month", "2014-01-01", "2014-04-01")
    points = gdf if fmt == "frame" else path
    kw = {"input_crs": "EPSG:32615"} if fmt == "csv" else {}
    c = count_points(points, grid_for=_grid_for, time=TimeSpec("when", p), **DOMAIN, **kw)
    d = c.diagnostics
    assert d["dropped_by_reason"] == {"missing_time": 3, "unparsed_time": 2, "time_outside_bounds": 7}
    assert sum(part.n_points for part in c.by_period()) == d["n_used"] == x.size - 12
    if fmt == "csv":
        assert src.time is None
    with pytest.raises(InputError, match="time column 'then' is not in"):
        count_points(points, grid_for=_grid_for, time=TimeSpec("then", p), **DOMAIN, **kw)


def test_most_times_unreadable_is_an_owner_error_with_the_fix(tmp_path):
    path = tmp_path / "p.csv"
    pd.DataFrame({"x": [100.0] * 50, "y": [100.0] * 50, "t": ["4/1/2014 00:11:00"] * 50}).to_csv(path, index=False)
    p = make_periods("month", "2014-04-01", "2014-05-01")
    with pytest.raises(DataError, match="--time-format") as err:
        count_points(path, grid_for=_grid_for, input_crs="EPSG:32615", time=TimeSpec("t", p), **DOMAIN)
    assert "4/1/2014" not in str(err.value)  # counts and the column, never a value
    c = count_points(path, grid_for=_grid_for, input_crs="EPSG:32615", **DOMAIN,
                     time=TimeSpec("t", p, "%m/%d/%Y %H:%M:%S"))
    assert c.n_points == 50


def test_the_input_is_read_once_for_all_periods(tmp_path, monkeypatch):
    from dpgeo.counting import tables

    x, y, t = _points(500, months=5)
    path = tmp_path / "p.csv"
    pd.DataFrame({"x": x, "y": y, "t": t}).to_csv(path, index=False)
    calls = []
    real = tables.CsvSource.batches

    def counting(self):
        calls.append(1)
        return real(self)

    monkeypatch.setattr(tables.CsvSource, "batches", counting)
    res = dpgeo.dbscan_spans(path, input_crs="EPSG:32615", time="t", period="month", period_start="2014-01-01",
                             period_end="2014-06-01", seed=1, ledger=False, **SPANS)
    assert len(calls) == 1 and len(res.releases) == 5


# -- the series release ------------------------------------------------------------------------------------------

def test_a_series_releases_every_period_even_an_empty_one(tmp_path):
    x, y, t = _points(months=5, empty_month=2)
    ledger = Ledger(tmp_path / "l.sqlite")
    res = dpgeo.dbscan_spans((x, y, "EPSG:32615"), time=t, period="month", period_start="2014-01-01",
                             period_end="2014-06-01", dataset="d", ledger=ledger, **SPANS)
    assert res.periods == ["2014-01", "2014-02", "2014-03", "2014-04", "2014-05"]
    assert [r.metadata["period"] for r in res.releases] == res.periods
    assert len(res.releases[2].layer) == 0  # an empty map is a valid DP output
    assert len(res.releases[0].layer) == 2
    for r in res.releases:
        md = r.metadata
        assert md["differentially_private"] and md["series_id"] == res.metadata["series"]["series_id"]
        assert md["series"]["composition"] == "parallel" and "costs epsilon once" in md["series"]["accounting"]
    assert set(res.layer["period"]) == {"2014-01", "2014-02", "2014-04", "2014-05"}
    assert str(res.layer["period_start"].dtype) == "datetime64[ns, UTC]"
    # one ledger entry with its periods, charged epsilon once
    b = ledger.budget("d")
    assert b.spent_epsilon == 1 and len(b.releases) == 1
    rec = b.releases[0]
    assert rec.composition == "parallel" and [p.label for p in rec.periods] == res.periods
    # both clusters persist: the same two ids in every period that has them
    assert set(res.layer["cluster_id"]) == {1, 2}


def test_an_appended_period_costs_nothing_more_and_continues_the_ids(tmp_path):
    x, y, t = _points(months=6)
    ledger = Ledger(tmp_path / "l.sqlite")
    ledger.set_total("d", 1.5)
    first = t < T0 + 90 * 86400
    kw = dict(period="month", dataset="d", ledger=ledger, **SPANS)
    s1 = dpgeo.dbscan_spans((x[first], y[first], "EPSG:32615"), time=t[first], period_start="2014-01-01",
                            period_end="2014-04-01", **kw)
    path = s1.to_file(tmp_path / "series.gpkg")
    rest = ~first
    s2 = dpgeo.dbscan_spans((x[rest], y[rest], "EPSG:32615"), time=t[rest], period_start="2014-04-01",
                            period_end="2014-07-01", append=path, **kw)
    assert s2.periods == ["2014-01", "2014-02", "2014-03", "2014-04", "2014-05", "2014-06"]
    assert ledger.budget("d").spent_epsilon == 1  # still epsilon once
    assert s2.metadata["series"]["series_id"] == s1.metadata["series"]["series_id"]
    assert set(s2.layer["cluster_id"]) == {1, 2}
    rec = ledger.series(s1.metadata["series_id"])
    assert len(rec.periods) == 6 and rec.periods[-1].run_id != rec.release_id
    # refused: an overlapping period, a larger epsilon, another study area, another privacy unit
    for change, match in [(dict(period_start="2014-06-01", period_end="2014-08-01"), "before the series ends"),
                          (dict(period_start="2014-07-01", period_end="2014-08-01", epsilon=1.2), "epsilon or less"),
                          (dict(period_start="2014-07-01", period_end="2014-08-01", max_points_per_record=2),
                           "privacy unit"),
                          (dict(period_start="2014-07-01", period_end="2014-08-01", min_points=21), "parameters")]:
        args = {**kw, "period_start": None, "period_end": None, **change}
        with pytest.raises(ParameterError, match=match):
            dpgeo.dbscan_spans((x, y, "EPSG:32615"), time=t, append=s2, **args)
    # the ledger refuses an overlap whatever the file says
    with pytest.raises(ParameterError, match="overlaps"):
        ledger.append_periods(rec.release_id, dataset="d", periods=[(T0, T0 + 10, "x")], epsilon=1,
                              composition="parallel", unit="record:1")
    # any other release of the dataset composes sequentially as before
    with pytest.raises(BudgetExceededError):
        dpgeo.dbscan_spans((x, y, "EPSG:32615"), dataset="d", ledger=ledger, **{**SPANS, "epsilon": 0.6})


def test_an_append_must_compute_each_record_s_period_as_the_series_did(tmp_path):
    """Another time column (t2 = t1 + 61 days) would put April and May's records in June and July: every record
    released twice while the ledger shows epsilon once. Refused, as is another time format; the same column and
    format are appended as before."""
    import geopandas as gpd

    x, y, t = _points(2000, months=4)
    t1 = pd.to_datetime(t + 90 * 86400, unit="s", utc=True)  # April to July
    gdf = gpd.GeoDataFrame({"t1": t1.strftime("%Y-%m-%dT%H:%M:%SZ"),
                            "t2": (t1 + pd.Timedelta(days=61)).strftime("%Y-%m-%dT%H:%M:%SZ"),
                            "t3": t1.strftime("%d/%m/%Y %H:%M:%S")},
                           geometry=gpd.points_from_xy(x, y), crs="EPSG:32615")
    ledger = Ledger(tmp_path / "l.sqlite")
    kw = dict(period="month", dataset="d", ledger=ledger, **SPANS)
    s = dpgeo.dbscan_spans(gdf, time="t1", period_start="2014-04-01", period_end="2014-06-01", **kw)
    later = dict(period_start="2014-06-01", period_end="2014-08-01", append=s, **kw)
    with pytest.raises(ParameterError, match="times were read from 't1', this run's from 't2'"):
        dpgeo.dbscan_spans(gdf, time="t2", **later)
    with pytest.raises(ParameterError, match="time format is None, this run's '%d/%m/%Y %H:%M:%S'"):
        dpgeo.dbscan_spans(gdf, time="t3", time_format="%d/%m/%Y %H:%M:%S", **later)
    with pytest.raises(ParameterError, match="time zone is 'UTC', this run's 'Europe/Paris'"):
        dpgeo.dbscan_spans(gdf, time="t1", timezone="Europe/Paris", **later)
    assert len(ledger.series(s.metadata["series_id"]).periods) == 2  # nothing appended
    assert s.metadata["series"]["time_column"] == "t1" and s.metadata["series"]["time_format"] is None
    ok = dpgeo.dbscan_spans(gdf, time="t1", **later)
    assert ok.periods == ["2014-04", "2014-05", "2014-06", "2014-07"] and ledger.budget("d").spent_epsilon == 1


def test_person_accounting_series_and_period(tmp_path):
    x, y, t = _points(3000, months=3)
    person = np.arange(x.size) % 300  # 300 people with ~12 points each, spread over the months
    ledger = Ledger(tmp_path / "l.sqlite")
    kw = dict(time=t, period="month", period_start="2014-01-01", period_end="2014-04-01", person=person,
              max_points_per_person=4, ledger=ledger, **SPANS)
    one = dpgeo.dbscan_spans((x, y, "EPSG:32615"), dataset="a", **kw)
    assert one.metadata["series"]["composition"] == "one-pass"
    assert one.diagnostics["n_used"] == 300 * 4  # the cap counts over the whole series, in the one pass
    assert ledger.budget("a").spent_epsilon == 1
    per = dpgeo.dbscan_spans((x, y, "EPSG:32615"), dataset="b", person_accounting="period", **kw)
    assert per.metadata["series"]["composition"] == "sequential"
    month = make_periods("month", "2014-01-01", "2014-04-01").index(t)
    per_month = pd.Series(1, index=pd.MultiIndex.from_arrays([person, month])).groupby(level=[0, 1]).size()
    assert per.diagnostics["n_used"] == int(np.minimum(per_month.to_numpy(), 4).sum())  # K per person and period
    assert ledger.budget("b").spent_epsilon == 3
    for r in per.releases:
        assert "in each period" in r.metadata["series"]["accounting"]
    path = one.to_file(tmp_path / "one.gpkg")
    with pytest.raises(ParameterError, match="one pass"):
        dpgeo.dbscan_spans((x, y, "EPSG:32615"), dataset="a", append=path,
                           **{**kw, "period_start": "2014-04-01", "period_end": "2014-05-01"})


def test_series_outputs(tmp_path):
    x, y, t = _points(months=3)
    res = dpgeo.dbscan_spans((x, y, "EPSG:32615"), time=t, period="month", period_start="2014-01-01",
                             period_end="2014-04-01", seed=2, ledger=False, **SPANS)
    paths = res.to_file(tmp_path / "s.gpkg", per_period=True)
    assert [os.path.basename(p) for p in paths] == ["s.gpkg", "s_2014-01.gpkg", "s_2014-02.gpkg", "s_2014-03.gpkg"]
    back = dpgeo.read_release(paths[0])
    assert back.metadata["series"]["n_periods"] == 3 and len(back.layer) == len(res.layer)
    one = dpgeo.read_release(paths[2])
    assert one.metadata["period"] == "2014-02" and set(one.layer["period"]) == {"2014-02"}
    fc = json.loads(open(res.to_file(tmp_path / "s.geojson"), encoding="utf-8").read())
    assert fc["features"][0]["properties"]["period_start"] == "2014-01-01T00:00:00Z"
    with sqlite3.connect(paths[0]) as conn:  # the QGIS style of the series (tests/qgis: it animates in QGIS)
        (qml,) = conn.execute("SELECT styleQML FROM layer_styles WHERE useAsDefault = 1").fetchone()
    assert 'startField="period_start"' in qml and 'enabled="1"' in qml


def test_series_keywords_without_time_are_refused():
    x, y, t = _points(100)
    with pytest.raises(ParameterError, match="needs time="):
        dpgeo.dbscan_spans((x, y, "EPSG:32615"), period="month", ledger=False, **SPANS)
    with pytest.raises(ParameterError, match="period="):
        dpgeo.dbscan_spans((x, y, "EPSG:32615"), time=t, ledger=False, **SPANS)


# -- the ledger ----------------------------------------------------------------------------------------------------

def test_a_schema_2_ledger_is_upgraded_to_series(tmp_path):
    from dpgeo.budget import store

    path = tmp_path / "l.sqlite"
    con = sqlite3.connect(path)
    store._migrate_to_1(con)
    store._migrate_to_2(con)
    con.execute("PRAGMA user_version = 2")
    con.execute("INSERT INTO datasets (name, created_date) VALUES ('d', '2026-01-01')")
    con.execute("INSERT INTO releases (release_id, dataset, status, date, mechanism, epsilon, delta, analyst, "
                "dpgeo_version) VALUES ('r1', 'd', 'completed', '2026-01-01', 'm', '0.5', '0', 'ana', '0')")
    con.commit()
    con.close()
    ledger = Ledger(path)
    r = ledger.reserve("d", epsilon=0.25, mechanism="m", periods=[(0, 10, "a"), (10, 20, "b")],
                       composition="parallel", unit="record:1")
    r.complete()
    b = ledger.budget("d")
    assert b.spent_epsilon == Fraction(3, 4) and b.releases[0].composition is None
    with sqlite3.connect(path) as con:
        assert con.execute("PRAGMA user_version").fetchone()[0] == store.SCHEMA_VERSION
        with pytest.raises(sqlite3.DatabaseError, match="never"):
            con.execute("DELETE FROM release_periods")


def test_an_append_that_fails_before_noise_frees_its_periods(tmp_path):
    ledger = Ledger(tmp_path / "l.sqlite")
    s = ledger.reserve("d", epsilon=1, mechanism="m", periods=[(0, 10, "a")], composition="parallel",
                       unit="record:1")
    s.complete()
    a = ledger.append_periods(s.release_id, dataset="d", periods=[(10, 20, "b")], epsilon=1, composition="parallel",
                              unit="record:1")
    with pytest.raises(OSError), a, a.before_noise():
        raise OSError("unreadable")
    b = ledger.append_periods(s.release_id, dataset="d", periods=[(10, 20, "b")], epsilon=0.5,
                              composition="parallel", unit="record:1")
    b.noise_started()
    b.fail()  # noise may have been drawn: the period is used
    with pytest.raises(ParameterError, match="overlaps"):
        ledger.append_periods(s.release_id, dataset="d", periods=[(10, 20, "b")], epsilon=0.5,
                              composition="parallel", unit="record:1")
    assert ledger.budget("d").spent_epsilon == 1
    assert ledger.settle(b.release_id, "completed") == "failed"


def test_a_per_period_person_series_is_charged_each_period_s_own_epsilon(tmp_path):
    """A heat series at 0.1 for two months and an append at 2 for two more spends 0.1 + 0.1 + 2 + 2 = 4.2, not
    4 × 0.1: the ledger sums the epsilon recorded with each charged period, in the budget, its cap check and
    the record of the series."""
    x, y, t = _points(2000, months=4)
    person = np.arange(x.size) % 200
    ledger = Ledger(tmp_path / "l.sqlite")
    kw = dict(time=t, period="month", person=person, max_points_per_person=3, person_accounting="period",
              cell_m=250, dataset="d", ledger=ledger, **DOMAIN)
    s = dpgeo.heat((x, y, "EPSG:32615"), epsilon=0.1, period_start="2014-01-01", period_end="2014-03-01", **kw)
    assert s.metadata["series"]["composition"] == "sequential" and ledger.budget("d").spent_epsilon == Fraction(1, 5)
    a = dpgeo.heat((x, y, "EPSG:32615"), epsilon=2, period_start="2014-03-01", period_end="2014-05-01", append=s,
                   **kw)
    assert a.periods == ["2014-01", "2014-02", "2014-03", "2014-04"]
    b = ledger.budget("d")
    assert b.spent_epsilon == Fraction(21, 5) and b.releases[0].cost[0] == Fraction(21, 5)
    assert [p.epsilon for p in b.releases[0].periods] == [Fraction(1, 10)] * 2 + [Fraction(2)] * 2
    ledger.set_total("d", 5)  # 0.8 left: the cap check counts the appended periods at their own epsilon
    with pytest.raises(BudgetExceededError, match="4.2 is spent"):
        ledger.append_periods(s.metadata["series_id"], dataset="d", periods=[(T0 + 200 * 86400, T0 + 201 * 86400,
                                                                              "x")],
                              epsilon=1, composition="sequential", unit="person:3")
    r = ledger.append_periods(s.metadata["series_id"], dataset="d", periods=[(T0 + 200 * 86400, T0 + 201 * 86400,
                                                                              "x")],
                              epsilon=0.5, composition="sequential", unit="person:3")
    assert r.spent_epsilon == Fraction(47, 10)
    r.cancel()
    assert ledger.budget("d").spent_epsilon == Fraction(21, 5)


def test_an_append_checks_its_delta(tmp_path):
    """The ledger's append takes the range check of reserve, and a delta at most the series' (a parallel series is
    charged its delta once; a sequential one the series' delta per period)."""
    ledger = Ledger(tmp_path / "l.sqlite")
    for comp, unit in [("parallel", "record:1"), ("sequential", "person:2")]:
        s = ledger.reserve(comp, epsilon=1, delta=Fraction(1, 10 ** 6), mechanism="m", periods=[(0, 10, "a")],
                           composition=comp, unit=unit)
        s.complete()
        app = dict(dataset=comp, periods=[(10, 20, "b")], epsilon=1, composition=comp, unit=unit)
        for bad in (-0.5, 1, 2):
            with pytest.raises(ParameterError, match=r"delta must be in \[0, 1\)"):
                ledger.append_periods(s.release_id, delta=bad, **app)
        with pytest.raises(ParameterError, match="at most the series' delta"):
            ledger.append_periods(s.release_id, delta=Fraction(1, 10 ** 5), **app)
        ledger.append_periods(s.release_id, delta=Fraction(1, 10 ** 6), **app).complete()
    assert ledger.budget("parallel").spent_delta == Fraction(1, 10 ** 6)
    assert ledger.budget("sequential").spent_delta == Fraction(2, 10 ** 6)


# -- the command line ----------------------------------------------------------------------------------------------

@pytest.mark.skipif(not UBER.exists(), reason="the shared Uber sample is not available")
def test_command_line_series_and_append(tmp_path):
    env = dict(os.environ, DPGEO_LEDGER=str(tmp_path / "l.sqlite"), PYTHONPATH=str(ROOT))
    base = [sys.executable, "-m", "dpgeo", "spans", str(UBER), "-o", str(tmp_path / "u.gpkg"), "--epsilon", "1",
            "--radius", "300", "--min-points", "40", "--domain=-74.26,40.49,-73.69,40.92", "--time", "datetime",
            "--period", "month", "--timezone", "America/New_York", "--dataset", "uber"]
    p = subprocess.run(base + ["--period-start", "2014-04-01", "--period-end", "2014-06-01"], capture_output=True,
                       text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "2 periods" in p.stderr and "time outside the series' bounds" in p.stderr
    p = subprocess.run(base + ["--period-start", "2014-06-01", "--period-end", "2014-07-01", "--append",
                               "--per-period-files"], capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "u_2014-06.gpkg").exists() and not (tmp_path / "u_2014-04.gpkg").exists()
    assert dpgeo.read_release(tmp_path / "u.gpkg").metadata["series"]["n_periods"] == 3
    assert Ledger(tmp_path / "l.sqlite").budget("uber").spent_epsilon == 1
    p = subprocess.run(base[:5] + ["-o", str(tmp_path / "x.gpkg")] + base[7:] + ["--period-end", "2014-06-01"],
                       capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 2 and "--period-start" in p.stderr and not (tmp_path / "x.gpkg").exists()


def test_a_one_pass_person_series_needs_a_mechanism_linear_in_the_cap():
    """PrivTHR_EM with bior2.2: the quality's sensitivity for K = 3 is 20, not 3 × 7; one point would cost more than
    ε/K, so the one-pass accounting is refused and the per-period one is not."""
    x, y, t = _points(600, months=2)
    person = np.arange(x.size) % 50
    kw = dict(method="privthr-em", wavelet="bior2.2", cell_m=100, epsilon=1.0, **DOMAIN, time=t, period="month",
              period_start="2014-01-01", period_end="2014-03-01", person=person, max_points_per_person=3, seed=1)
    with pytest.raises(ParameterError, match="not 1/K-DP for one point"):
        dpgeo.wavecluster((x, y, "EPSG:32615"), **kw)
    res = dpgeo.wavecluster((x, y, "EPSG:32615"), person_accounting="period", **kw)
    assert res.metadata["series"]["composition"] == "sequential"
    ok = dpgeo.wavecluster((x, y, "EPSG:32615"), **{**kw, "wavelet": "haar"})
    assert ok.metadata["series"]["composition"] == "one-pass"


def test_a_per_record_series_of_several_points_needs_a_mechanism_linear_in_the_contribution():
    """A record's c points have their own times and may fall in c periods. PrivTHR_EM with bior2.2 is not
    1/c-DP for one point at c = 3 (the quality's sensitivity is 20, not 3 × 7): its parallel accounting would
    cost more than epsilon, so it is refused; one point per record, or haar, is accounted as before."""
    x, y, t = _points(600, months=2)
    kw = dict(method="privthr-em", wavelet="bior2.2", cell_m=100, epsilon=1.0, **DOMAIN, time=t, period="month",
              period_start="2014-01-01", period_end="2014-03-01", seed=1)
    with pytest.raises(ParameterError, match="not 1/c-DP for one point"):
        dpgeo.wavecluster((x, y, "EPSG:32615"), max_points_per_record=3, **kw)
    for ok in (dict(max_points_per_record=1), dict(max_points_per_record=3, wavelet="haar")):
        res = dpgeo.wavecluster((x, y, "EPSG:32615"), **{**kw, **ok})
        assert res.metadata["series"]["composition"] == "parallel"
    res = dpgeo.dbscan_spans((x, y, "EPSG:32615"), max_points_per_record=3, ledger=False, **{**SPANS, **{
        k: kw[k] for k in ("time", "period", "period_start", "period_end", "seed")}})
    assert res.metadata["series"]["unit"] == "record:3"


# -- running totals: the binary-tree mechanism ---------------------------------------------------------------------

def test_tree_totals_are_sums_of_the_dyadic_nodes_and_their_noise_has_the_stated_scale():
    """Every period's total is the exact prefix plus the noise of popcount(t + 1) nodes, each discrete Laplace of
    decay exp(−ε/(s·L)). χ² of one node's noise over 40,000 empty cells against that law, at a false-failure rate
    of 1e-6; with L or s left out of the scale (decay exp(−ε/s)) the statistic is far beyond the threshold."""
    from scipy import stats

    from dpgeo.mechanisms.tree import tree_running_totals
    from dpgeo.noise import NoiseSource, discrete_laplace_pmf

    n_cells, t_n, eps, s = 40_000, 5, 1.0, 2
    counts = np.zeros((t_n, n_cells), dtype=np.int64)
    r = tree_running_totals(counts, epsilon=eps, sensitivity=s, rng=NoiseSource(7))
    assert r.levels == 3 and r.nodes_used.tolist() == [1, 1, 2, 1, 2]
    z = r.totals[0]  # one node: period 0
    edges = np.arange(-6, 7)
    observed = np.r_[(z < -6).sum(), [(z == k).sum() for k in edges], (z > 6).sum()]

    def expected(q):
        pmf = discrete_laplace_pmf(edges, q)
        tail = (1 - pmf.sum()) / 2
        return n_cells * np.r_[tail, pmf, tail]

    crit = stats.chi2.isf(1e-6, observed.size - 1)
    assert stats.chisquare(observed, expected(math.exp(-eps / (s * 3)))).statistic < crit
    assert stats.chisquare(observed, expected(math.exp(-eps / s))).statistic > 10 * crit
    # the same noise draws, counts added: the totals move by exactly the running sums of the counts
    c = np.arange(5 * 3).reshape(5, 3)
    r2 = tree_running_totals(c, epsilon=eps, sensitivity=1, rng=NoiseSource(3))
    r0 = tree_running_totals(np.zeros_like(c), epsilon=eps, sensitivity=1, rng=NoiseSource(3))
    assert np.array_equal(r2.totals - r0.totals, np.cumsum(c, axis=0))
    # period 2 (t + 1 = 3 = 2 + 1) shares the node [0, 2) with period 1
    assert not np.array_equal(r0.totals[2], r0.totals[1]) and r0.nodes_used[2] == 2


def test_running_totals_series(tmp_path):
    x, y, t = _points(4000, months=6)
    ledger = Ledger(tmp_path / "l.sqlite")
    kw = dict(time=t, period="month", period_start="2014-01-01", period_end="2014-07-01", cumulative=True,
              dataset="d", ledger=ledger, **SPANS)
    res = dpgeo.dbscan_spans((x, y, "EPSG:32615"), **kw)
    assert res.periods == [f"2014-0{m}" for m in range(1, 7)]
    assert res.metadata["tree_levels"] == 3 and res.metadata["series"]["cumulative"]
    assert ledger.budget("d").spent_epsilon == 1
    last = res.releases[-1].layer
    assert {"cell_id", "dp_total", "dp_total_low", "dp_total_high"} <= set(last.columns)
    # the totals grow over the months: the last month's cells hold about all the points (noise is small here)
    assert abs(int(last["dp_total"].sum()) - x.size) < 0.2 * x.size
    with pytest.raises(ParameterError, match="no appended period"):
        dpgeo.dbscan_spans((x, y, "EPSG:32615"), **{**kw, "append": res, "period_start": "2014-07-01",
                                                    "period_end": "2014-08-01"})
    with pytest.raises(ParameterError, match="person_accounting='series'"):
        dpgeo.dbscan_spans((x, y, "EPSG:32615"), person=np.arange(x.size) % 100, max_points_per_person=3,
                           person_accounting="period", **kw)


def test_the_running_totals_pipeline_scales_the_noise_by_the_cap_and_the_levels(monkeypatch):
    """heat with running totals, one person of K = 3 points, 5 months (L = 3 levels): the first month's totals of
    the empty cells are one tree node's noise, of decay exp(−ε/(K·L)) = exp(−1/9). χ² at a false-failure rate of
    1e-6 accepts it and rejects exp(−1/3), the law if either the cap or the levels were left out of the scale;
    every point lies in one cell, so the other cells are pure noise."""
    from scipy import stats

    import dpgeo.mechanisms.tree as cumulative
    from dpgeo.noise import discrete_laplace_pmf

    trees = []
    real = cumulative.tree_running_totals
    monkeypatch.setattr(cumulative, "tree_running_totals", lambda *a, **k: trees.append(real(*a, **k)) or trees[-1])
    n = 3000
    t = T0 + (np.arange(n) % 5) * 31 * 86400  # one point per person in each of months 1-3, spread over 5
    dpgeo.heat((np.full(n, 5.0), np.full(n, 5.0), "EPSG:32615"), epsilon=1.0, cell_m=20.0, time=t, period="month",
               period_start="2014-01-01", period_end="2014-06-01", cumulative=True, person=np.arange(n) // 3,
               max_points_per_person=3, seed=11, ledger=False, **DOMAIN)
    tree = trees[0]
    assert tree.levels == 3 and tree.nodes_used[0] == 1
    z = tree.totals[0][1:]  # the first month; cell 0 holds the points
    assert z.size > 5000
    edges = np.arange(-30, 31)
    observed = np.r_[(z < -30).sum(), [(z == k).sum() for k in edges], (z > 30).sum()]

    def expected(q):
        pmf = discrete_laplace_pmf(edges, q)
        tail = (1 - pmf.sum()) / 2
        return z.size * np.r_[tail, pmf, tail]

    crit = stats.chi2.isf(1e-6, observed.size - 1)
    assert stats.chisquare(observed, expected(math.exp(-1 / 9))).statistic < crit
    assert stats.chisquare(observed, expected(math.exp(-1 / 3))).statistic > crit


def test_running_totals_are_charged_whatever_the_mechanism_s_own_method(tmp_path):
    """The tree's noisy totals are the release: with WaveCluster's non-private 'exact' method (which only
    picks the grid here) the series is still charged its epsilon, every time."""
    x, y, t = _points(2000, months=3)
    ledger = Ledger(tmp_path / "l.sqlite")
    ledger.set_total("d", 1.5)
    kw = dict(time=t, period="month", period_start="2014-01-01", period_end="2014-04-01", cumulative=True,
              dataset="d", ledger=ledger, epsilon=1.0, method="exact", cell_m=200.0,
              domain=(0, 0, 2000, 2000), domain_crs="EPSG:32615")
    res = dpgeo.wavecluster((x, y, "EPSG:32615"), **kw)
    assert res.metadata["differentially_private"] is True
    assert ledger.budget("d").spent_epsilon == 1
    with pytest.raises(BudgetExceededError):
        dpgeo.wavecluster((x, y, "EPSG:32615"), **kw)


def test_an_appended_series_keeps_each_period_s_own_figures(tmp_path):
    """What differs between periods (clusters found, cells) is stated per period, also after an append."""
    x, y, t = _points(months=3)
    kw = dict(period="month", seed=4, ledger=False, **SPANS)
    first = t < T0 + 59 * 86400  # January and February
    a = dpgeo.dbscan_spans((x[first], y[first], "EPSG:32615"), time=t[first], period_start="2014-01-01",
                           period_end="2014-03-01", **kw)
    few = ~first & (np.arange(x.size) % 100 == 0)  # a few March points: no cluster in March
    one = dpgeo.dbscan_spans((x[few], y[few], "EPSG:32615"), time=t[few], period_start="2014-03-01",
                             period_end="2014-04-01", append=a, **kw)
    md = one.metadata
    assert [p["label"] for p in md["periods"]] == ["2014-01", "2014-02", "2014-03"]
    assert "n_clusters" not in md and [p["n_clusters"] for p in md["periods"]] == [2, 2, 0]
