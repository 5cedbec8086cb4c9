"""Two ``dpgeo serve`` replicas (two ports, one release folder, one job store) over one PostgreSQL ledger
behave as one service: a job started on one is seen on the other; 30 concurrent releases split across the two
never exceed a dataset's total (total 3, each 0.5: exactly 6 succeed); kill -9 of one replica in the middle of
a job leaves the ledger consistent (the charge stays counted; the other replica goes on)."""

from __future__ import annotations

import concurrent.futures
import os
import signal

import pytest
from service_helpers import AREA_TEXT, Client, Server, make_points, wait_job, wait_until, write_config

pytestmark = pytest.mark.postgres
TOKENS = {f"a{i}": f"replica-token-{i}-0123456789abcdefghijklmnopqrstu" for i in range(6)}
SPANS = {"epsilon": 0.5, "radius_m": 300, "min_points": 40}


@pytest.fixture(scope="module")
def replicas(tmp_path_factory, postgres_server):
    d = tmp_path_factory.mktemp("replicas")
    make_points(d / "stops.gpkg")
    db = postgres_server.new_database("ledger")
    url = postgres_server.url(db, host="localhost")
    common = {"path": "stops.gpkg", "layer": "points", "study_area": AREA_TEXT}
    config = write_config(
        d, server={"jobs": "jobs.sqlite", "workers": 2, "executions_per_minute": 1000, "requests_per_minute": 10000,
                   "max_jobs_per_analyst": 100, "max_queued_jobs": 100, "job_quantum_seconds": 0},
        datasets={"race": {**common, "total_epsilon": 3.0}, "seen": {**common, "total_epsilon": 1.0},
                  "killed": {**common, "total_epsilon": 1.0}},
        analysts={name: (tok, ["race", "seen", "killed"]) for name, tok in TOKENS.items()})
    text = config.read_text().replace('ledger = "ledger.sqlite"', f'ledger = "{url}"')
    config.write_text(text)
    a = Server(config, d)
    b = Server(config, d)
    yield {"a": a, "b": b, "dir": d, "url": url, "pg": postgres_server}
    a.stop()
    b.stop()


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
    a, b = replicas["a"], replicas["b"]
    ca = Client(a.url, TOKENS["a1"])
    r = ca.execute("dp-dbscan-spans", dict(SPANS, dataset="killed"), asynchronous=True)
    assert r.status_code == 201, r.text
    # wait until its charge is in the ledger (the job is running), then kill the replica without any shutdown
    wait_until(lambda: _ledger(replicas).budget("killed").releases, 60, "the job's charge")
    a.proc.send_signal(signal.SIGKILL)
    a.proc.wait(10)
    book = _ledger(replicas).budget("killed")
    assert len(book.releases) == 1 and book.releases[0].status in ("reserved", "completed")
    assert book.spent_epsilon == 0.5  # counted: a release that may have been made is never forgotten
    cb = Client(b.url, TOKENS["a1"])  # the other replica goes on with what is left
    assert cb.execute("dp-dbscan-spans", dict(SPANS, dataset="killed")).status_code == 200
    assert 400 <= cb.execute("dp-dbscan-spans", dict(SPANS, dataset="killed")).status_code < 500
    assert _ledger(replicas).budget("killed").spent_epsilon == 1


def test_no_connection_detail_in_any_log_or_file(replicas):
    pg = replicas["pg"]
    for s in (replicas["a"], replicas["b"]):
        s.stop()
    secrets = [pg.password.encode(), pg.user.encode(), b"localhost", f":{pg.port}".encode()]
    for root, _, files in os.walk(replicas["dir"]):
        for f in files:
            if f == "service.toml":
                continue
            data = open(os.path.join(root, f), "rb").read()
            for s in secrets:
                assert s not in data, (s, f)
