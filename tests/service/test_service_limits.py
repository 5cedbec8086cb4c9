"""A service no analyst can tie up: each request's cost is estimated from the request alone and checked against
the server's ``[limits]`` before it is accepted; workers run under a time limit and a memory cap; pages of
features are read from the release's files; every refusal is a 4xx with its reason; the log holds no token;
workers end with their server and a restart removes what no settled job owns.

Real ``dpgeo serve`` processes on 127.0.0.1, real worker processes and signals (Linux). No assertion here
depends on wall-clock time except the bounds the service promises (a worker gone within a few seconds of its
server); the timings of reads and small releases under abuse are measured by ``benchmarks/bench_service.py``.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from fractions import Fraction

import numpy as np
import pytest
from service_helpers import (
    AREA,
    AREA_TEXT,
    Client,
    Server,
    job_row,
    process_gone,
    stop_without_locks,
    wait_job,
    wait_until,
    write_config,
)

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="signals, /proc and RLIMIT_AS: Linux")

TOKENS = {"ava": "ava-token-limits-0123456789abcdefghijklmn", "ben": "ben-token-limits-0123456789abcdefghijklmn"}
SPANS = {"epsilon": 0.25, "radius_m": 300, "min_points": 30}
#: The requests of the red team's report (issue items 1-3), each beyond the default limits.
ABUSIVE = [
    ("dp-heat", {"epsilon": 0.002, "h3_resolution": 13}, "max_cells"),
    ("dp-heat", {"epsilon": 0.05, "cell_m": 20}, "max_features"),
    ("dp-heat", {"epsilon": 0.05, "cell_m": 100, "time": "when", "period": "day", "period_start": "2017-01-01",
                 "period_end": "2019-09-28"}, "max_cell_periods"),
    ("dp-dbscan-spans", {"epsilon": 0.05, "radius_m": 20, "min_points": 10, "time": "when", "period": "day",
                         "period_start": "2017-01-01", "period_end": "2019-09-28"}, "max_cell_periods"),
    ("dp-kmeans", {"epsilon": 0.05, "k": 1000, "time": "when", "period": "day", "period_start": "2017-01-01",
                   "period_end": "2019-09-28"}, "max_cell_periods"),
    ("dp-wavecluster", {"epsilon": 0.05, "grid_size": 4096}, "max_cells"),
    ("dp-heat", {"epsilon": 0.05, "cell_m": 250, "bands": 5, "bandwidth_m": 1e6}, "max_job_bytes"),
]


def points_with_times(path, *, n=3000, seed=0, outside=False):
    """Private points with a time column (January to April 2017); ``outside``: none in the study area."""
    import geopandas as gpd
    import pandas as pd

    rng = np.random.default_rng(seed)
    k = n // 2
    x = np.r_[rng.normal(-93.27, 0.002, k), rng.uniform(AREA[0], AREA[2], n - k)]
    y = np.r_[rng.normal(44.98, 0.0015, k), rng.uniform(AREA[1], AREA[3], n - k)]
    if outside:
        x, y = x + 20.0, y - 10.0
    when = pd.to_datetime([f"2017-{m:02d}-15 12:00" for m in rng.integers(1, 5, n)])
    gdf = gpd.GeoDataFrame({"when": when.strftime("%Y-%m-%dT%H:%M:%S")}, geometry=gpd.points_from_xy(x, y),
                           crs="EPSG:4326")
    gdf.to_file(path, layer="points", driver="GPKG")
    return path


def config(d, *, server=None, limits=None):
    points_with_times(d / "calls.gpkg")
    points_with_times(d / "empty.gpkg", seed=1, outside=True)
    common = {"layer": "points", "study_area": AREA_TEXT, "total_epsilon": 20.0, "time_columns": ["when"]}
    path = write_config(d, server={"executions_per_minute": 600, "requests_per_minute": 6000, "workers": 1,
                                   "max_jobs_per_analyst": 2, "job_quantum_seconds": 0, "owner_log": "owner.log",
                                   **(server or {})},
                        datasets={"calls": {"path": "calls.gpkg", **common}, "empty": {"path": "empty.gpkg", **common}},
                        analysts={"ava": (TOKENS["ava"], ["calls", "empty"]), "ben": (TOKENS["ben"], ["calls"])})
    if limits:
        with open(path, "a", encoding="utf-8") as f:
            f.write("\n[limits]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in limits.items()))
    return path


@pytest.fixture(scope="module")
def svc(tmp_path_factory):
    d = tmp_path_factory.mktemp("limits")
    server = Server(config(d), d)
    yield {"server": server, "dir": d}
    server.stop()


def client(svc, who=None):
    return Client(svc["server"].url, TOKENS[who] if who else None)


def rss_bytes(pid) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS:"))


def spent(d, dataset):
    from dpgeo.budget import Ledger

    return Ledger(d / "ledger.sqlite").budget(dataset).spent_epsilon


def start_held_job(svc, who="ava", dataset="calls"):
    """An asynchronous release whose worker is stopped (SIGSTOP) while running; returns (job id, worker pid)."""
    c = client(svc, who)
    r = c.execute("dp-dbscan-spans", dict(SPANS, dataset=dataset), asynchronous=True)
    assert r.status_code == 201, r.text
    jid = r.headers["location"].rsplit("/", 1)[1]
    pid = wait_until(lambda: job_row(svc["dir"] / "jobs.sqlite", jid).get("worker_pid"), 60, "the job's worker")
    stop_without_locks(pid)
    return jid, pid


# -- 1-3: the cost of a request, from the request alone, before the job limit and any charge -------------------

def test_costly_requests_are_refused_by_their_estimate_before_the_job_limit(svc):
    """With the analyst's job slots full, each request of the report is a 413 that names the limit and the
    estimate (not a 429 after minutes of work in the server); nothing is charged, no job is made, and the
    server's memory does not grow with them."""
    d, ava = svc["dir"], client(svc, "ava")
    held, pid = start_held_job(svc)  # one job running (stopped), one queued: ava's 2 slots are full
    r = ava.execute("dp-dbscan-spans", dict(SPANS, dataset="calls"), asynchronous=True)
    assert r.status_code == 201, r.text
    queued = r.headers["location"].rsplit("/", 1)[1]
    try:
        assert ava.execute("dp-dbscan-spans", dict(SPANS, dataset="calls")).status_code == 429  # slots full
        before, jobs = rss_bytes(svc["server"].proc.pid), ava.get("/jobs").json()["numberMatched"]
        for process, inputs, limit in ABUSIVE:
            for i in range(2):  # another ε each time: nothing is cached
                r = ava.execute(process, dict(inputs, dataset="calls", epsilon=inputs["epsilon"] * (1 + i / 7)))
                assert r.status_code == 413, (process, inputs, r.text)
                doc = r.json()
                assert f"[limits] {limit}" in doc["detail"] and "estimated" in doc["detail"], doc
        assert ava.get("/jobs").json()["numberMatched"] == jobs
        assert rss_bytes(svc["server"].proc.pid) - before < 64 * 2**20
        assert "refused (limits)" in svc["server"].log()
    finally:
        os.kill(pid, signal.SIGCONT)
    for jid in (held, queued):
        assert wait_job(ava, f"/jobs/{jid}", 120)["status"] == "successful"
    assert spent(d, "calls") == Fraction(1, 2)  # the two real releases, nothing for the refused ones


def test_every_mechanism_declares_an_o1_cost():
    """Every registered mechanism has a cost estimate, made from the parameters and the study area's size alone
    (an H3 resolution of 15 over a city: no cell listed, answered at once)."""
    from dpgeo.declare import Cost
    from dpgeo.domain import as_study_area
    from dpgeo.declarations.registry import MECHANISMS
    from dpgeo.pipeline.run import contribution, public_plan

    area = as_study_area(AREA_TEXT)
    values = {"dp-heat": {"h3_resolution": 15}, "dp-hotspots": {"h3_resolution": 15, "k": 20},
              "dp-kmeans": {"k": 10}, "dp-wavecluster": {"grid_size": 64}}
    for mech in MECHANISMS:
        p, _, _ = public_plan(mech, values.get(mech.name, {}), None, epsilon=1.0)
        cost = mech.cost(area, p, contribution())
        assert isinstance(cost, Cost) and cost.cells >= 1 and cost.bytes >= 0 and cost.work >= cost.cells, mech
    from dpgeo.costs import _shape
    from dpgeo.resources import grid_shape

    for cell in (7.0, 100.0, 333.3, 1e5):  # the estimate's grid is the library's
        assert _shape(area, cell) == grid_shape(area.polygon.bounds, cell)
    heat = next(m for m in MECHANISMS if m.name == "dp-heat")
    p, _, _ = public_plan(heat, {"h3_resolution": 15}, None, epsilon=1.0)
    assert heat.cost(area, p, contribution()).cells > 10**8


def test_the_limits_table_is_checked_when_the_configuration_is_read():
    from dpgeo.server.config import ConfigError
    from dpgeo.server.limits import Limits, parse_limits

    assert parse_limits(None, ConfigError) == Limits()
    got = parse_limits({"worker_memory_bytes": "8G", "max_job_bytes": "6G", "job_seconds": 30}, ConfigError)
    assert got.worker_memory_bytes == 8 * 2**30 and got.max_job_bytes == 6 * 2**30 and got.job_seconds == 30.0
    for bad, words in (({"max_cels": 1}, "no key 'max_cels'"), ({"max_cells": 0}, "max_cells must be"),
                       ({"job_seconds": True}, "job_seconds must be"), ({"worker_memory_bytes": "lots"}, "bytes"),
                       ({"max_job_bytes": "3G", "worker_memory_bytes": "2G"}, "must fit in its worker")):
        with pytest.raises(ConfigError, match=words):
            parse_limits(bad, ConfigError)


def test_a_series_periods_are_counted_in_o1_as_they_are_made():
    """The estimate counts a series' periods from its bounds without listing them: the same count as the periods
    made, for every kind, time zones with odd offsets and DST included (2,000 random bounds)."""
    import datetime as dt
    import random

    from dpgeo.periods import count_periods, make_periods

    rnd = random.Random(7)
    for _ in range(2000):
        kind = rnd.choice(["day", "week", "month", "quarter", "year"])
        tz = rnd.choice([None, "America/Chicago", "Europe/London", "Australia/Lord_Howe", "Asia/Kathmandu"])
        start = dt.datetime(rnd.randint(1990, 2030), rnd.randint(1, 12), rnd.randint(1, 28), rnd.randint(0, 23),
                            rnd.randint(0, 59))
        span = {"day": 900, "week": 6000, "month": 20000, "quarter": 60000, "year": 200000}[kind]
        end = start + dt.timedelta(days=rnd.uniform(0.01, span))
        try:
            n = len(make_periods(kind, start.isoformat(), end.isoformat(), tz))
        except ValueError:  # more periods than a series may have
            continue
        assert count_periods(kind, start.isoformat(), end.isoformat(), tz) == n, (kind, tz, start, end)


# -- worker limits: what the estimate accepts fits; what exceeds them after noise is spent, said and counted ----

def _server(tmp_path_factory, name, limits):
    d = tmp_path_factory.mktemp(name)
    server = Server(config(d, limits=limits), d)
    return {"server": server, "dir": d}


@pytest.fixture(scope="module")
def tight(tmp_path_factory):
    """A server that gives a job 10 s (a release here takes a few seconds at most, reading included)."""
    s = _server(tmp_path_factory, "tight", {"job_seconds": 10})
    yield s
    s["server"].stop()


@pytest.fixture(scope="module")
def capped(tmp_path_factory):
    """A server whose limits are small: 20,000 features, a 600 MiB estimate, a worker that may add 768 MiB."""
    s = _server(tmp_path_factory, "capped", {"max_features": 20000, "max_job_bytes": "600M",
                                             "worker_memory_bytes": "768M"})
    yield s
    s["server"].stop()


def test_a_job_past_the_time_limit_is_stopped_said_and_counted(tight):
    """A worker held (SIGSTOP) until the time limit: the job fails, its status says the time limit stopped it and
    what its charge became by its phase ("spent, no release" once noise may have been drawn), and the log
    counts it."""
    ava = client(tight, "ava")
    for _ in range(5):
        r = ava.execute("dp-dbscan-spans", dict(SPANS, dataset="calls"), asynchronous=True)
        jid = r.headers["location"].rsplit("/", 1)[1]
        row = lambda: job_row(tight["dir"] / "jobs.sqlite", jid)  # noqa: E731
        pid = wait_until(lambda: row().get("worker_pid"), 60, "the job's worker")
        wait_until(lambda: row().get("phase") in ("noise", "computed") or process_gone(pid) or row()["status"]
                   in ("successful", "failed"), 60, "past noise", step=0.002)
        try:
            stop_without_locks(pid)
        except ProcessLookupError:
            pass
        doc = wait_job(ava, f"/jobs/{jid}", 60)
        if doc["status"] == "failed" and doc.get("charge") == "spent, no release":
            break
    else:
        raise AssertionError("no job was caught after noise")
    assert "time limit" in doc["message"] and "spent, no release" in doc["message"], doc
    assert "[limits] job_seconds" in ava.get(f"/jobs/{jid}/results").json()["detail"]
    assert "stopped by the time limit" in tight["server"].log() and "so far since the start" in tight["server"].log()
    wait_until(lambda: process_gone(pid), 10, "the stopped worker killed")


def test_the_largest_request_the_estimate_accepts_runs_under_the_worker_cap(capped):
    """A heat layer just under ``max_features`` (and its memory estimate under ``max_job_bytes``) is made by a
    worker capped at ``worker_memory_bytes`` more memory (RLIMIT_AS); one just over is refused before it runs.
    So the memory cap is not what bounds an accepted request."""
    from dpgeo.domain import as_study_area
    from dpgeo.resources import grid_shape

    b = as_study_area(AREA_TEXT).polygon.bounds
    cell = next(c for c in range(60, 400) if np.prod(grid_shape(b, float(c))) <= 20000)
    ava = client(capped, "ava")
    over = ava.execute("dp-heat", {"dataset": "calls", "epsilon": 1.0, "cell_m": cell - 2})
    assert over.status_code == 413 and "max_features" in over.json()["detail"]
    r = ava.execute("dp-heat", {"dataset": "calls", "epsilon": 1.0, "cell_m": float(cell)})
    assert r.status_code == 200, r.text
    assert r.json()["release"]["n_features"] > 15000
    assert "job stopped by the" not in capped["server"].log()


# -- streaming features ---------------------------------------------------------------------------------------

def test_items_are_paged_from_the_release_file_not_from_a_layer_in_memory(svc):
    """A release's items are read a page at a time from its items file: with the GeoJSON moved away they are
    still served; an item is one query; the records cache is bounded in bytes."""
    from dpgeo.server.items import items_page
    from dpgeo.server.releases import ReleaseStore

    ava, anon = client(svc, "ava"), client(svc)
    r = ava.execute("dp-heat", {"dataset": "calls", "epsilon": 0.5, "cell_m": 500})
    assert r.status_code == 200, r.text
    rel = r.json()["release"]
    rid, n = rel["id"], rel["n_features"]
    folder = svc["dir"] / "releases"
    geojson = folder / f"{rid}.geojson"
    aside = geojson.with_name(geojson.name + ".aside")
    geojson.rename(aside)
    try:
        page = anon.get(f"/collections/{rid}/items?limit=7&offset=3").json()
        assert page["numberMatched"] == n and page["numberReturned"] == 7
        assert anon.get(f"/collections/{rid}/items/{page['features'][0]['id']}").status_code == 200
    finally:
        aside.rename(geojson)
    full = json.loads(geojson.read_text(encoding="utf-8"))["features"]
    assert [f["geometry"] for f in page["features"]] == [f["geometry"] for f in full[3:10]]
    docs, matched = items_page(folder / f"{rid}.items.sqlite", bbox=[-93.3, 44.95, -93.25, 45.0], limit=5, offset=0)
    assert 0 < matched < n and len(docs) == min(5, matched)
    store = ReleaseStore(str(folder), cache_bytes=4096)
    for x in store.ids():
        store.get(x)
    assert store.cached_bytes <= 4096


# -- 4-6: every refusal a 4xx with its reason; no released-but-broken layer --------------------------------------

def test_refused_appends_are_400_with_their_reason_and_charge_nothing(svc):
    d, ava = svc["dir"], client(svc, "ava")
    base = {"dataset": "calls", "time": "when", "period": "month"}
    r = ava.execute("dp-heat", {**base, "epsilon": 0.25, "cell_m": 1000, "period_start": "2017-01-01",
                                "period_end": "2017-03-01"})
    assert r.status_code == 200, r.text
    rid = r.json()["release"]["id"]
    before = spent(d, "calls")
    later = {**base, "period_start": "2017-03-01", "period_end": "2017-05-01", "append": rid}
    for inputs, reason in (
        ({**later, "epsilon": 0.5, "cell_m": 1000}, "epsilon"),           # ε above the series'
        ({**later, "epsilon": 0.25, "cell_m": 500}, "parameters differ"),  # another cell size
        ({**later, "epsilon": 0.25, "cell_m": 1000, "bands": 3}, "differ"),  # bands
        ({**later, "epsilon": 0.25, "cell_m": 1000, "period": "week", "period_start": "2017-03-06"}, "periods are by"),
        ({**later, "epsilon": 0.25, "cell_m": 1000, "cumulative": True}, "cumulative"),
    ):
        r = ava.execute("dp-heat", inputs)
        assert r.status_code == 400, (inputs, r.text)
        detail = r.json()["detail"]
        assert reason in detail and "problem on the server" not in detail, (inputs, detail)
        assert str(d) not in detail  # no server path in a refusal
    assert spent(d, "calls") == before


def test_every_process_on_an_empty_dataset_publishes_a_readable_layer(svc):
    """No point in the study area: each process publishes, its items and each item answer 200 (an empty density
    band is a feature with a null geometry), never a 500."""
    ava = client(svc, "ava")
    for process, inputs in (("dp-dbscan-spans", SPANS), ("dp-dbscan-spans", {"epsilon": 0.25}),
                            ("dp-wavecluster", {"epsilon": 0.25, "grid_size": 64}),
                            ("dp-kmeans", {"epsilon": 0.25, "k": 3}), ("dp-heat", {"epsilon": 0.25, "cell_m": 1000}),
                            ("dp-heat", {"epsilon": 0.05, "cell_m": 250, "bands": 5, "bandwidth_m": 20000}),
                            ("dp-hotspots", {"epsilon": 0.25, "cell_m": 1000}),
                            ("dp-heat", {"epsilon": 0.25, "h3_resolution": 7}),
                            ("dp-heat", {"epsilon": 0.25, "h3_resolution": 7, "bands": 2}),
                            ("dp-hotspots", {"epsilon": 0.25, "h3_resolution": 7}),
                            ("dp-heat", {"epsilon": 0.25, "cell_m": 1000, "time": "when", "period": "month",
                                         "period_start": "2017-01-01", "period_end": "2017-03-01"}),
                            ("dp-heat", {"epsilon": 0.25, "cell_m": 1000, "time": "when", "period": "month",
                                         "period_start": "2017-01-01", "period_end": "2017-04-01",
                                         "cumulative": True})):
        r = ava.execute(process, dict(inputs, dataset="empty"))
        assert r.status_code == 200, (process, inputs, r.text)
        rid = r.json()["release"]["id"]
        items = ava.get(f"/collections/{rid}/items")
        assert items.status_code == 200, (process, inputs, items.text)
        for f in items.json()["features"]:
            assert ava.get(f"/collections/{rid}/items/{f['id']}").status_code == 200
        assert ava.get(f"/collections/{rid}/items?bbox={AREA_TEXT}").status_code == 200


@pytest.mark.parametrize("bounds", [("9999-01-01", "9999-12-31T23:00"), ("2017-01-01T00:00+99:99", "2017-03-01"),
                                    ("2017-01-01", "2017-03-01T00:00-24:00")])
def test_period_bounds_out_of_range_are_400(svc, bounds):
    r = client(svc, "ava").execute("dp-heat", {"dataset": "calls", "epsilon": 0.25, "cell_m": 1000, "time": "when",
                                               "period": "month", "period_start": bounds[0], "period_end": bounds[1]})
    assert r.status_code == 400, r.text
    assert "out of range" in r.json()["detail"] or "last date" in r.json()["detail"]


def test_item_offsets_out_of_range_are_400(svc):
    anon = client(svc)
    rid = client(svc, "ava").execute("dp-heat", {"dataset": "calls", "epsilon": 0.25,
                                                 "cell_m": 2000}).json()["release"]["id"]
    for q in ("offset=-1", "offset=99999999999999999999", "limit=-5"):
        assert anon.get(f"/collections/{rid}/items?{q}").status_code == 400, q
    assert anon.get(f"/collections/{rid}/items/99999999999999999999999").status_code == 404


# -- 7: logs that hold no secret ----------------------------------------------------------------------------------

def test_the_log_holds_no_token_and_no_forwarded_address(svc):
    anon = client(svc)
    secret = "Zq8vN3xK1pL7wR2mT9yB4cF6hJ0sD5gA"  # looks like a token
    assert anon.get(f"/collections/{secret}").status_code == 404
    assert anon.get(f"/collections/{TOKENS['ben']}/items").status_code == 404  # a real token, pasted in a path
    assert anon.get("/conformance", headers={"X-Forwarded-For": "203.0.113.9"}).status_code == 200
    time.sleep(0.2)
    log = svc["server"].log()
    assert secret not in log and TOKENS["ben"] not in log and "/collections/<redacted>" in log
    assert "203.0.113.9" not in log


# -- 8: orphans ---------------------------------------------------------------------------------------------------

def test_workers_end_with_a_stopped_server_and_a_restart_removes_unowned_files(tmp_path):
    """SIGTERM to a server with a job in flight: its worker is gone within a few seconds (not after a drain); a
    release file that no settled job owns (a worker killed while writing) is removed at the restart."""
    server = Server(config(tmp_path), tmp_path)
    try:
        svc = {"server": server, "dir": tmp_path}
        jid, pid = start_held_job(svc)
        with open(f"/proc/{pid}/environ", "rb") as f:  # threads that reserve no memory the cap would count
            env = dict(x.split(b"=", 1) for x in f.read().split(b"\0") if b"=" in x)
        assert env.get(b"MALLOC_ARENA_MAX") and env.get(b"OPENBLAS_NUM_THREADS"), env.keys()
        orphan = tmp_path / "releases" / ("ab" * 16 + ".gpkg")
        orphan.write_bytes(b"SQLite format 3\0" + b"\0" * 5000)
        server.proc.send_signal(signal.SIGTERM)
        wait_until(lambda: process_gone(pid), 3, "the worker gone with its server")
        server.proc.wait(30)
        server._log.close()
        server = Server(server.config, tmp_path)
        assert not orphan.exists()
        doc = Client(server.url, TOKENS["ava"]).get(f"/jobs/{jid}").json()
        assert doc["status"] == "failed", doc
    finally:
        server.stop()


# -- load and abuse -----------------------------------------------------------------------------------------------

#: The most memory the server process itself may hold on the 4 GB host of the defaults (docs/service.md, Limits).
SERVER_RSS_LIMIT = 1 * 2**30


def test_an_abusive_analyst_does_not_take_the_server(svc):
    """While ava sends the report's requests in a loop, ben's small release and anonymous reads are answered, each
    abusive request is refused by its estimate (413) and the server's memory stays under its bound. (Their
    times, with and without the abuse, are compared by benchmarks/bench_service.py.)"""
    ava, ben, anon = client(svc, "ava"), client(svc, "ben"), client(svc)
    statuses, stop = [], threading.Event()

    def abuse():
        i = 0
        while not stop.is_set() and i < 200:
            process, inputs, _ = ABUSIVE[i % len(ABUSIVE)]
            statuses.append(ava.execute(process, dict(inputs, dataset="calls",
                                                      epsilon=inputs["epsilon"] * (1 + i / 1000))).status_code)
            i += 1

    t = threading.Thread(target=abuse)
    t.start()
    try:
        reads = [anon.get("/conformance").status_code for _ in range(20)]
        r = ben.execute("dp-heat", {"dataset": "calls", "epsilon": 0.1, "cell_m": 2000})
        reads += [anon.get(f"/collections/{r.json()['release']['id']}/items?limit=5").status_code]
    finally:
        stop.set()
        t.join(120)
    assert r.status_code == 200, r.text
    assert set(reads) == {200}
    assert statuses and set(statuses) == {413}, set(statuses)
    assert rss_bytes(svc["server"].proc.pid) < SERVER_RSS_LIMIT
