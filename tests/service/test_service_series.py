"""Map series on the service: a process input for the time column and the period, the budget rules of a series, one
collection per series (its time extent, items filtered by ``datetime``), and appended periods."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from service_helpers import AREA, AREA_TEXT, Client, Server, write_config

TOKEN = "sam-token-0123456789abcdefghijklmnopqrstuvwx"
SPANS = {"epsilon": 0.5, "radius_m": 300, "min_points": 30}


def _points_with_times(path, months=4, n=3000, seed=0, shifted=False):
    import geopandas as gpd
    import pandas as pd

    rng = np.random.default_rng(seed)
    k = n // 2
    x = np.r_[rng.normal(-93.27, 0.002, k), rng.uniform(AREA[0], AREA[2], n - k)]
    y = np.r_[rng.normal(44.98, 0.0015, k), rng.uniform(AREA[1], AREA[3], n - k)]
    month = rng.integers(1, months + 1, n)
    when = pd.to_datetime([f"2017-{m:02d}-15 12:00" for m in month])
    cols = {"when": when.strftime("%Y-%m-%dT%H:%M:%S")}
    if shifted:  # a second time column: each record's time two months later
        cols["later"] = (when + pd.DateOffset(months=2)).strftime("%Y-%m-%dT%H:%M:%S")
    gdf = gpd.GeoDataFrame(cols, geometry=gpd.points_from_xy(x, y), crs="EPSG:4326")
    gdf.to_file(path, layer="points", driver="GPKG")
    return path


@pytest.fixture(scope="module")
def svc(tmp_path_factory):
    d = tmp_path_factory.mktemp("series-service")
    _points_with_times(d / "calls.gpkg")
    _points_with_times(d / "trips.gpkg", shifted=True)
    config = write_config(
        d, server={"executions_per_minute": 60, "requests_per_minute": 2000, "workers": 1},
        datasets={"calls": {"path": "calls.gpkg", "layer": "points", "study_area": AREA_TEXT, "total_epsilon": 1.2,
                            "time_columns": ["when"], "timezone": "America/Chicago"},
                  "trips": {"path": "trips.gpkg", "layer": "points", "study_area": AREA_TEXT, "total_epsilon": 1.2,
                            "time_columns": ["when", "later"], "timezone": "America/Chicago"}},
        analysts={"sam": (TOKEN, ["calls", "trips"])})
    server = Server(config, d)
    yield {"server": server, "dir": d}
    server.stop()


def test_series_inputs_are_described_and_checked(svc):
    c = Client(svc["server"].url, TOKEN)
    desc = c.get("/processes/dp-dbscan-spans").json()["inputs"]
    assert desc["period"]["schema"]["enum"] == ["day", "week", "month", "quarter", "year"]
    assert {"time", "period_start", "period_end", "append", "cumulative", "person_accounting"} <= set(desc)
    base = dict(SPANS, dataset="calls", period="month", period_start="2017-01-01", period_end="2017-05-01")
    r = c.execute("dp-dbscan-spans", dict(base, time="secret_column"))
    assert r.status_code == 400 and "time columns of dataset 'calls' (when)" in r.json()["detail"]
    r = c.execute("dp-dbscan-spans", dict(base, time="when", period_end="2016-01-01"))
    assert r.status_code == 400 and "must be after" in r.json()["detail"]
    r = c.execute("dp-dbscan-spans", dict(base, time="when", append="0" * 32))
    assert r.status_code == 400 and "append" in r.json()["detail"]


def test_a_series_is_one_collection_charged_once_and_an_append_is_free(svc):
    from dpgeo.budget import Ledger

    c = Client(svc["server"].url, TOKEN)
    r = c.execute("dp-dbscan-spans", dict(SPANS, dataset="calls", time="when", period="month",
                                          period_start="2017-01-01", period_end="2017-03-01"))
    assert r.status_code == 200, r.text
    rel = r.json()["release"]
    rid = rel["id"]
    md = rel["metadata"]
    assert md["series"]["series_id"] == rid and [p["label"] for p in md["periods"]] == ["2017-01", "2017-02"]
    assert md["series"]["timezone"] == "America/Chicago"
    col = c.get(f"/collections/{rid}").json()
    assert col["extent"]["temporal"]["interval"] == [["2017-01-01T06:00:00Z", "2017-03-01T06:00:00Z"]]
    assert "map series" in col["description"]
    items = c.get(f"/collections/{rid}/items").json()
    ids = [f["id"] for f in items["features"]]
    assert len(ids) == len(set(ids)) == rel["n_features"]  # one id per feature, though a cluster is in two periods
    feb = c.get(f"/collections/{rid}/items", params={"datetime": "2017-02-10T00:00:00Z"}).json()
    assert feb["numberMatched"] >= 1 and {f["properties"]["period"] for f in feb["features"]} == {"2017-02"}
    both = c.get(f"/collections/{rid}/items", params={"datetime": "../2017-12-31T00:00:00Z"}).json()
    assert both["numberMatched"] == rel["n_features"]
    assert c.get(f"/collections/{rid}/items", params={"datetime": "soon"}).status_code == 400
    ledger = Ledger(svc["dir"] / "ledger.sqlite")
    assert ledger.budget("calls").spent_epsilon == Fraction(1, 2)
    # March and April appended: nothing more is spent; a new collection holds the whole series
    r = c.execute("dp-dbscan-spans", dict(SPANS, dataset="calls", time="when", period="month",
                                          period_start="2017-03-01", period_end="2017-05-01", append=rid))
    assert r.status_code == 200, r.text
    rel2 = r.json()["release"]
    assert rel2["id"] != rid and rel2["metadata"]["series"]["series_id"] == rid
    assert [p["label"] for p in rel2["metadata"]["periods"]] == ["2017-01", "2017-02", "2017-03", "2017-04"]
    assert ledger.budget("calls").spent_epsilon == Fraction(1, 2)
    rec = ledger.series(rid)
    assert [p.label for p in rec.periods] == ["2017-01", "2017-02", "2017-03", "2017-04"]
    assert rec.periods[-1].run_id == rel2["id"] and rec.periods[-1].status == "completed"
    col2 = c.get(f"/collections/{rel2['id']}").json()
    assert any(link["rel"] == "predecessor-version" and link["href"].endswith(rid) for link in col2["links"])
    assert "dpgeo-slider" in c.get(f"/collections/{rel2['id']}/map").text
    # an overlapping append is refused in the request and charges nothing
    r = c.execute("dp-dbscan-spans", dict(SPANS, dataset="calls", time="when", period="month",
                                          period_start="2017-04-01", period_end="2017-06-01", append=rel2["id"]))
    assert r.status_code == 400 and "at or after the end of the series" in r.json()["detail"]
    assert ledger.budget("calls").spent_epsilon == Fraction(1, 2)


def test_an_append_reads_the_times_as_the_series_did(svc):
    """With another time column the records of January and February would fall in March and April and be
    released again while the ledger shows epsilon once: the append is refused in the request, nothing charged."""
    from dpgeo.budget import Ledger

    c = Client(svc["server"].url, TOKEN)
    base = dict(SPANS, dataset="trips", period="month")
    r = c.execute("dp-dbscan-spans", dict(base, time="when", period_start="2017-01-01", period_end="2017-03-01"))
    assert r.status_code == 200, r.text
    rid = r.json()["release"]["id"]
    assert r.json()["release"]["metadata"]["series"]["time_column"] == "when"
    r = c.execute("dp-dbscan-spans", dict(base, time="later", period_start="2017-03-01", period_end="2017-05-01",
                                          append=rid))
    assert r.status_code == 400 and "times were read from 'when', this run's from 'later'" in r.json()["detail"]
    ledger = Ledger(svc["dir"] / "ledger.sqlite")
    assert [p.label for p in ledger.series(rid).periods] == ["2017-01", "2017-02"]
    assert ledger.budget("trips").spent_epsilon == Fraction(1, 2)
