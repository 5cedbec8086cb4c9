"""Two ``dpgeo serve`` replicas (two ports, one release folder, one job store) over one PostgreSQL ledger
behave as one service: a job started on one is seen on the other; 30 concurrent releases split across the two
never exceed a dataset's total (total 3, each 0.5: exactly 6 succeed); kill -9 of one replica in the middle of
a job (charged, its worker blocked reading a PostGIS table the test holds locked) leaves the ledger consistent:
the worker dies with its replica, the charge stays counted (reserved), the other replica spends only what is
left, and the replica started again settles the charge by the job's phase (cancelled: before any noise)."""

from __future__ import annotations

import concurrent.futures
import os

import pytest
from service_helpers import (AREA_TEXT, Client, Server, job_row, make_points, process_gone, wait_job, wait_until,
                             write_config)

from postgres import load_layer

pytestmark = pytest.mark.postgres
TOKENS = {f"a{i}": f"replica-token-{i}-0123456789abcdefghijklmnopqrstu" for i in range(6)}
SPANS = {"epsilon": 0.5, "radius_m": 300, "min_points": 40}


@pytest.fixture(scope="module")
def replicas(tmp_path_factory, postgres_server):
    import geopandas as gpd

    d = tmp_path_factory.mktemp("replicas")
    make_points(d / "stops.gpkg")
    db = postgres_server.new_database("ledger")
    url = postgres_server.url(db, host="localhost")
    common = {"path": "stops.gpkg", "layer": "points", "study_area": AREA_TEXT}
    points_db = postgres_server.new_database("points")  # the killed job's input: a table the test can lock
    load_layer(postgres_server, points_db, "stops", gpd.read_file(d / "stops.gpkg"))
    killed = {"connection": postgres_server.url(points_db, host="localhost"), "table": "stops",
              "study_area": AREA_TEXT, "total_epsilon": 1.0}
    config = write_config(
        d, server={"jobs": "jobs.sqlite", "workers": 2, "executions_per_minute": 1000, "requests_per_minute": 10000,
                   "max_jobs_per_analyst": 100, "max_queued_jobs": 100, "job_quantum_seconds": 0},
        datasets={"race": {**common, "total_epsilon": 3.0}, "seen": {**common, "total_epsilon": 1.0},
                  "killed": killed},
        analysts={name: (tok, ["race", "seen", "killed"]) for name, tok in TOKENS.items()})
    text = config.read_text().replace('ledger = "ledger.sqlite"', f'ledger = "{url}"')
    config.write_text(text)
    a = Server(config, d)
    b = Server(config, d)
    out = {"a": a, "b": b, "dir": d, "url": url, "pg": postgres_server, "config": config, "killed_db": points_db,
           "ledger_db": db}
    yield out
    out["a"].stop()
    out["b"].stop()


def _ledger(replicas):
    from dpgeo.budget import Ledger

    return Ledger(replicas["url"])


def test_a_job_started_on_one_replica_is_seen_on_the_other(replicas):
    a = Client(replicas["a"].url, TOKENS["a0"])
    b = Client(replicas["b"].url, TOKENS["a0"])
    r = a.execute("dp-dbscan-spans", dict(SPANS, dataset="seen"), asynchronous=True)
    assert r.status_code == 201, r.text
    location = r.headers["location"]
    job = location.rsplit("/", 1)[1]
    doc = wait_job(b, f"/jobs/{job}", timeout=120)  # followed on the other replica
    assert doc["status"] == "successful", doc
    rel = b.get(f"/jobs/{job}/results").json()
    rid = rel["release"]["id"] if "release" in rel else None
    if rid:
        assert b.get(f"/collections/{rid}").status_code == 200  # the release, published in the shared folder
    assert _ledger(replicas).budget("seen").spent_epsilon == 0.5


def test_concurrent_releases_on_both_replicas_never_exceed_the_total(replicas):
    servers = [replicas["a"].url, replicas["b"].url]
    names = list(TOKENS)

    def one(i):
        c = Client(servers[i % 2], TOKENS[names[i % len(names)]])
        return c.execute("dp-dbscan-spans", dict(SPANS, dataset="race")).status_code

    with concurrent.futures.ThreadPoolExecutor(max_workers=30) as pool:
        codes = list(pool.map(one, range(30)))
    assert sum(c == 200 for c in codes) == 6, codes
    assert all(c == 200 or 400 <= c < 500 for c in codes), codes
    b = _ledger(replicas).budget("race")
    assert b.spent_epsilon == 3 and sum(r.status == "completed" for r in b.releases) == 6


def test_kill_9_of_a_replica_mid_job_leaves_the_ledger_consistent(replicas):
    """A replica killed while its job is certainly running (charged, blocked reading a table the test holds
    locked): its worker dies with it; the charge stays counted (reserved: "incomplete"), so the other replica
    can spend only what is left and nothing is ever overspent; a replica started again closes the job and
    settles the charge by its phase (cancelled: no noise had been drawn), and the budget is usable again."""
    a, b, d, pg = replicas["a"], replicas["b"], replicas["dir"], replicas["pg"]
    ca, cb = Client(a.url, TOKENS["a1"]), Client(b.url, TOKENS["a1"])
    with pg.connect(replicas["killed_db"]) as lock, lock.transaction():
        lock.execute('LOCK TABLE "stops" IN ACCESS EXCLUSIVE MODE')  # the job's read waits for it
        r = ca.execute("dp-dbscan-spans", dict(SPANS, dataset="killed"), asynchronous=True)
        assert r.status_code == 201, r.text
        job = r.headers["location"].rsplit("/", 1)[1]
        # charged, reading, and waiting for the table: the job is in the middle of its run
        row = wait_until(lambda: (lambda j: j if j.get("phase") == "reading" and j.get("worker_pid") else None)(
            job_row(d / "jobs.sqlite", job)), 60, "the job's read")
        wait_until(lambda: lock.execute("SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = "
                                        "'stops'::regclass").fetchone()[0], 60, "the worker waiting for the table")
        book = _ledger(replicas).budget("killed")
        assert [x.status for x in book.releases] == ["reserved"] and book.spent_epsilon == 0.5
        a.kill()  # SIGKILL: no shutdown of any kind
        wait_until(lambda: process_gone(row["worker_pid"]), 30, "the killed replica's worker to end with it")
    book = _ledger(replicas).budget("killed")
    assert [x.status for x in book.releases] == ["reserved"]  # "incomplete": counted, never forgotten
    assert book.spent_epsilon == 0.5
    # the other replica goes on with what is left, and no more: never overspent
    assert cb.execute("dp-dbscan-spans", dict(SPANS, dataset="killed")).status_code == 200
    assert 400 <= cb.execute("dp-dbscan-spans", dict(SPANS, dataset="killed")).status_code < 500
    book = _ledger(replicas).budget("killed")
    assert book.spent_epsilon == 1 and sorted(x.status for x in book.releases) == ["completed", "reserved"]
    # the killed replica started again (no other job running): it closes the job and settles its charge
    replicas["a"] = a = Server(replicas["config"], d)
    book = _ledger(replicas).budget("killed")
    assert sorted(x.status for x in book.releases) == ["cancelled", "completed"] and book.spent_epsilon == 0.5
    doc = cb.get(f"/jobs/{job}").json()  # seen from the other replica too
    assert doc["status"] == "failed" and doc["charge"] == "not charged", doc
    assert Client(a.url, TOKENS["a1"]).execute("dp-dbscan-spans", dict(SPANS, dataset="killed")).status_code == 200
    assert 400 <= cb.execute("dp-dbscan-spans", dict(SPANS, dataset="killed")).status_code < 500
    book = _ledger(replicas).budget("killed")
    assert book.spent_epsilon == 1 and sorted(x.status for x in book.releases) == ["cancelled", "completed",
                                                                                    "completed"]


def test_no_connection_detail_in_any_log_or_file(replicas):
    pg = replicas["pg"]
    for s in (replicas["a"], replicas["b"]):
        s.stop()
    secrets = [pg.password.encode(), pg.user.encode(), b"localhost", f":{pg.port}".encode()]
    for method, path, status, ctype, body in Client.seen:  # every response of both replicas
        for s in secrets + [b"postgresql://"]:
            assert s not in body, (s, method, path)
    dump = pg.dump(replicas["ledger_db"]).encode()  # the shared ledger's rows, as a backup holds them
    assert b"killed" in dump and b"race" in dump
    for s in secrets + [b"postgresql://"]:
        assert s not in dump, s
    for root, _, files in os.walk(replicas["dir"]):
        for f in files:
            if f == "service.toml":
                continue
            data = open(os.path.join(root, f), "rb").read()
            for s in secrets:
                assert s not in data, (s, f)
