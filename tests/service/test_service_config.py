"""The service's configuration, tokens, rate limits and job padding, without a running server (plus the CLI)."""

from __future__ import annotations

import asyncio
import hashlib
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from service_helpers import ROOT, make_points

from dpgeo.errors import ParameterError
from dpgeo.server import auth as auth_module
from dpgeo.server.auth import Authenticator, RateLimiter, hash_token, new_token
from dpgeo.server.config import ConfigError, load_config
from dpgeo.server.processes import PROCESSES, validate_inputs

MINIMAL = """\
[server]
ledger = "ledger.sqlite"          # relative to the config file
releases = "releases/"            # where published layers are stored

[datasets.stops]
path = "stops.gpkg"               # the private input, never served
study_area = "-93.33,44.89,-93.19,45.06"   # public bbox (lon/lat) or a polygon file
total_epsilon = 2.0
# person = "officer_id"  max_points_per_person = 3

[analysts.alice]
token_sha256 = "<sha256 hex of alice's bearer token>"
datasets = ["stops"]
"""
ALICE = "alice-secret-token"


@pytest.fixture
def folder(tmp_path):
    make_points(tmp_path / "stops.gpkg", n=50)
    return tmp_path


def write(folder, text, name="service.toml"):
    p = Path(folder) / name
    p.write_text(text.replace("<sha256 hex of alice's bearer token>", hash_token(ALICE)), encoding="utf-8")
    return p


def test_the_minimal_configuration_of_the_issue_works_as_written(folder):
    cfg = load_config(write(folder, MINIMAL))
    s = cfg.server
    assert s.ledger == str(folder / "ledger.sqlite") and s.releases == str(folder / "releases")
    assert s.jobs == str(folder / "jobs.sqlite")
    ds = cfg.datasets["stops"]
    assert ds.path == str(folder / "stops.gpkg") and ds.total_epsilon == 2 and ds.sensitivity == 1
    assert ds.area.bbox == pytest.approx((-93.33, 44.89, -93.19, 45.06)) and not ds.private_releases
    assert cfg.analysts["alice"].datasets == ("stops",)
    assert cfg.analysts["alice"].token_sha256 == hashlib.sha256(ALICE.encode()).hexdigest()


def test_paths_are_relative_to_the_configuration_file(folder, monkeypatch):
    sub = folder / "etc"
    sub.mkdir()
    (folder / "area.geojson").write_bytes((ROOT / "sample_layers" / "minneapolis_study_area.geojson").read_bytes())
    text = MINIMAL.replace('"stops.gpkg"', '"../stops.gpkg"').replace('"ledger.sqlite"', '"../ledger.sqlite"') \
        .replace('"-93.33,44.89,-93.19,45.06"', '"../area.geojson"')
    monkeypatch.chdir("/")
    cfg = load_config(write(sub, text))
    assert cfg.datasets["stops"].path == str(folder / "stops.gpkg")
    assert cfg.datasets["stops"].study_area == str(folder / "area.geojson")
    assert cfg.server.releases == str(sub / "releases")


@pytest.mark.parametrize("edit, message", [
    (lambda t: t.replace('study_area = "-93.33,44.89,-93.19,45.06"', ""), "[datasets.stops] has no study_area"),
    (lambda t: t.replace("total_epsilon = 2.0", ""), "[datasets.stops] has no total_epsilon"),
    (lambda t: t.replace('"stops.gpkg"', '"missing.gpkg"'), "does not exist"),
    (lambda t: t.replace('"-93.33,44.89,-93.19,45.06"', '"area.geojson"'), "neither a bbox"),
    (lambda t: t.replace('"ledger.sqlite"', '"nowhere/ledger.sqlite"'), "ledger: the folder"),
    (lambda t: t.replace("total_epsilon = 2.0", "total_epsilon = 0"), "total_epsilon must be > 0"),
    (lambda t: t.replace("total_epsilon = 2.0", "total_epsilon = 2.0\ntotal_epsilom = 3"),
     "unknown key 'total_epsilom'"),
    (lambda t: t.replace('datasets = ["stops"]', 'datasets = ["crashes"]'), "'crashes' is not configured"),
    (lambda t: t.replace("[datasets.stops]", "[datasets.'../x']"), "a dataset name is"),
    (lambda t: t.replace("[server]", "[server]\nworkers = 0"), "workers must be an integer"),
    (lambda t: t.replace("[server]", "[server]\nurl = \"ftp://x\""), "url must be"),
    (lambda t: t.replace("# person", "person = \"officer\"\n# person"), "go together"),
    (lambda t: t + f"[analysts.bob]\ntoken_sha256 = \"{hash_token(ALICE)}\"\n", "the same as [analysts.alice]"),
    (lambda t: t.split("[datasets.stops]")[0], "no [datasets] table"),
    (lambda t: t + "x = [", "not valid TOML"),
])
def test_a_bad_configuration_is_refused_with_one_line_naming_the_key(folder, edit, message):
    with pytest.raises(ConfigError) as e:
        load_config(write(folder, edit(MINIMAL)))
    assert message in str(e.value) and "\n" not in str(e.value)


def test_the_token_itself_is_refused_where_its_hash_belongs(folder):
    text = MINIMAL.replace("<sha256 hex of alice's bearer token>", ALICE)
    with pytest.raises(ConfigError, match="never the token itself.*--new-token alice"):
        load_config(write(folder, text))


def _dpgeo(*args, cwd=None):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "dpgeo", *map(str, args)], check=False, capture_output=True,
                          text=True, env=env, cwd=cwd, timeout=120)


def test_serve_refuses_to_start_with_exit_2_and_one_line(folder):
    bad = write(folder, MINIMAL.replace("total_epsilon = 2.0", ""), "bad.toml")
    r = _dpgeo("serve", bad, "--port", 1)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.strip().count("\n") == 0 and "has no total_epsilon" in r.stderr
    assert not (folder / "ledger.sqlite").exists() and not (folder / "releases").exists()
    good = write(folder, MINIMAL)
    r = _dpgeo("serve", good, "--check")
    assert r.returncode == 0 and "1 dataset(s), 1 analyst(s)" in r.stderr
    r = _dpgeo("serve")
    assert r.returncode == 2 and "configuration file" in r.stderr


def test_new_token_prints_the_token_once_and_only_its_hash_for_the_configuration():
    r = _dpgeo("serve", "--new-token", "alice")
    assert r.returncode == 0
    token = r.stderr.strip().splitlines()[-1]
    assert len(token) >= 43 and token not in r.stdout
    assert f'token_sha256 = "{hash_token(token)}"' in r.stdout and r.stdout.startswith("[analysts.alice]")
    assert _dpgeo("serve", "--new-token", "../x").returncode == 2


# -- tokens and limits ------------------------------------------------------------------------------------------------

def test_tokens_are_compared_in_constant_time_against_every_hash(monkeypatch):
    calls = []
    real = auth_module.hmac.compare_digest

    def spy(a, b):
        calls.append((len(a), len(b)))
        return real(a, b)

    monkeypatch.setattr(auth_module.hmac, "compare_digest", spy)
    tokens = {name: new_token() for name in ("alice", "bob", "carol")}
    a = Authenticator({n: h for n, (_, h) in tokens.items()})
    assert a.analyst(f"Bearer {tokens['alice'][0]}") == "alice"
    assert calls == [(32, 32)] * 3  # every hash compared, also after the match
    calls.clear()
    assert a.analyst("Bearer nope") is None and calls == [(32, 32)] * 3
    for header in (None, "", "Bearer", "Basic x", tokens["bob"][0], "Bearer " + "x" * 1000):
        assert a.analyst(header) is None
    assert a.analyst(f"bearer   {tokens['carol'][0]}  ") == "carol"


def test_rate_limiter_refills_over_time():
    now = [0.0]
    rl = RateLimiter(per_minute=6, burst=2, clock=lambda: now[0])
    assert [rl.allow("a") for _ in range(3)] == [True, True, False]
    assert rl.retry_after("a") == 10
    now[0] += 10
    assert rl.allow("a") and not rl.allow("a")
    assert rl.allow("b")


def test_inputs_are_validated_against_the_declared_schemas():
    spans = PROCESSES["dp-dbscan-spans"]
    ok = spans.validate({"dataset": "stops", "epsilon": {"value": 1}, "radius_m": 100, "min_points": 30.0})
    assert ok["epsilon"] == 1.0 and ok["min_points"] == 30 and ok["beta"] == 0.05 and ok["extent"] == "grown"
    for inputs, message in [
        ({"dataset": "stops", "epsilon": 1, "radius_m": 100, "min_points": 30, "seed": 3}, "unknown input 'seed'"),
        ({"dataset": "stops", "epsilon": 1, "radius_m": 100, "min_points": {"href": "http://x"}}, "by reference"),
        ({"dataset": "stops", "epsilon": float("nan"), "radius_m": 100, "min_points": 30}, "must be a number"),
        ({"dataset": "stops", "epsilon": 1, "radius_m": 100, "min_points": 30, "beta": 1}, "must be < 1"),
        ({"dataset": "x" * 65, "epsilon": 1, "radius_m": 100, "min_points": 30}, "at most 64"),
        ([1, 2], "JSON object"),
    ]:
        with pytest.raises(ParameterError, match=message):
            spans.validate(inputs)
    with pytest.raises(ParameterError, match="control characters"):
        validate_inputs({"t": "a\nb"}, {"t": PROCESSES["dp-wavecluster"].inputs["title"]})


def test_a_patterned_input_is_told_its_own_rule_without_its_value():
    """Each patterned input's refusal says what it must be (a release id, a date); only free text is told about
    control characters; the refused value is not echoed."""
    from dpgeo.server.processes.declared import SERIES_INPUTS

    for name, bad, rule in (("append", "not-an-id-9f3e", "32 lowercase hex digits"),
                            ("period_start", "April-9f3e", "ISO 8601 date"),
                            ("period_end", "never-9f3e", "ISO 8601 date")):
        with pytest.raises(ParameterError) as info:
            validate_inputs({name: bad}, {name: SERIES_INPUTS[name]})
        text = str(info.value)
        assert rule in text and name in text and "control characters" not in text and "9f3e" not in text, text
    with pytest.raises(ParameterError) as info:
        validate_inputs({"t": "a\nb-9f3e"}, {"t": PROCESSES["dp-wavecluster"].inputs["title"]})
    assert "control characters" in str(info.value) and "9f3e" not in str(info.value)


class _Clock:
    """The job manager's clock and sleep, in the test's hands: a job 'runs' by moving the clock on, and the padding
    the manager sleeps is recorded, so what is checked is the manager's arithmetic, never this machine's speed."""

    def __init__(self):
        self.now = 1000.0
        self.slept = []

    def monotonic(self):
        return self.now

    def strftime(self, *args):
        return time.strftime(*args)

    async def sleep(self, seconds):
        self.slept.append(seconds)
        self.now += seconds


@pytest.fixture(autouse=True)
def clock(monkeypatch):
    """Every job manager of this file runs on a :class:`_Clock`."""
    from dpgeo.server import manager

    c = _Clock()
    fake_asyncio = type("asyncio", (), {"Semaphore": asyncio.Semaphore, "get_running_loop": asyncio.get_running_loop,
                                        "sleep": staticmethod(c.sleep), "Task": asyncio.Task})
    monkeypatch.setattr(manager, "time", c)
    monkeypatch.setattr(manager, "asyncio", fake_asyncio)
    return c


def _manager(tmp_path, run_seconds, **settings):
    """A job manager whose jobs 'run' for ``run_seconds`` of the test's clock in a thread (no worker process), with
    a real job store, ledger and releases folder."""
    from dpgeo.budget import Ledger
    from dpgeo.server import jobs, manager
    from dpgeo.server.config import ServerSettings

    settings = ServerSettings(ledger=str(tmp_path / "ledger.sqlite"), releases=str(tmp_path / "releases"),
                              jobs=str(tmp_path / "jobs.sqlite"), **settings)
    store = jobs.JobStore(settings.jobs)
    store.initialise()
    m = manager.JobManager(settings, store, Ledger(settings.ledger))
    m._slots = asyncio.Semaphore(settings.workers)

    def fake_execute(job_id, spec):
        manager.time.now += run_seconds
        return {"ok": True, "release_id": "0" * 32, "log": "x"}

    m._execute = fake_execute
    return m, store


def _timed_job(m, store, job_id="a" * 32):
    async def run():
        store.create(job_id, analyst="alice", process_id="p", dataset="d", inputs={})
        clock = manager.time
        t0 = clock.monotonic()
        out = await m.submit(job_id, "alice", {"analyst": "alice", "dataset": {"name": "d"}})
        return out, clock.monotonic() - t0

    from dpgeo.server import manager

    return asyncio.run(run())


def test_jobs_are_padded_to_min_job_seconds(tmp_path):
    """With min_job_seconds, a job's answer never comes sooner, whatever the run took."""
    m, store = _manager(tmp_path, 0.0, min_job_seconds=0.6, job_quantum_seconds=0)
    out, took = _timed_job(m, store)
    assert out["ok"] and took == pytest.approx(0.6) and store.get("a" * 32)["status"] == "successful"


@pytest.mark.parametrize("run_seconds, answered", [(0.05, 0.5), (0.4, 0.5), (0.6, 1.0)])
def test_job_time_is_rounded_up_to_the_quantum(tmp_path, run_seconds, answered, clock):
    """A job is answered (and recorded) at the next multiple of job_quantum_seconds, so runs of different lengths
    within one quantum cannot be told apart by their time. (On the test's clock: the machine's load cannot change
    the answer.)"""
    m, store = _manager(tmp_path, run_seconds, job_quantum_seconds=0.5)
    out, took = _timed_job(m, store)
    assert out["ok"] and took == pytest.approx(answered), took
    assert clock.slept == [pytest.approx(answered - run_seconds)]
    assert store.get("a" * 32)["status"] == "successful"


def test_a_worker_that_cannot_be_started_fails_its_job_padded_and_settled(tmp_path, monkeypatch):
    """The worker's process does not start (fork refused): the job is not left accepted, it fails like any other
    failure (the generic answer, its charge settled), after the padding; the details reach the owner's log only."""
    import multiprocessing
    from multiprocessing.context import SpawnProcess

    def refused(self):
        raise OSError(12, "Cannot allocate memory: fork-detail-7d1e")

    m, store = _manager(tmp_path, 0.0, job_quantum_seconds=0.3, owner_log=str(tmp_path / "owner.log"))
    del m._execute  # the real one, with a process that cannot start
    m._ctx = multiprocessing.get_context("spawn")
    monkeypatch.setattr(SpawnProcess, "start", refused)
    spec = {"analyst": "alice", "dataset": {"name": "d"}, "job_id": "a" * 32}
    m.claim("a" * 32, "alice")
    out, took = asyncio.run(_run_job(m, store, spec))
    job = store.get("a" * 32)
    assert not out["ok"] and out["error"]["type"].endswith("release-failed") and took == pytest.approx(0.3)
    assert job["status"] == "failed" and job["charge"] == "none" and job["error"] == out["error"]
    assert "fork-detail-7d1e" not in out["log"] and "fork-detail-7d1e" not in str(out["error"])
    assert "fork-detail-7d1e" in (tmp_path / "owner.log").read_text(encoding="utf-8")
    assert not m._active


def test_a_job_whose_settling_raises_is_still_closed(tmp_path):
    """Recording a job's end fails once (a locked job store): the job is closed as failed, not left running."""
    import sqlite3

    m, store = _manager(tmp_path, 0.0, job_quantum_seconds=0)
    real, calls = store.finish, []

    def locked_once(*a, **kw):
        calls.append(kw.get("ok"))
        if len(calls) == 1:
            raise sqlite3.OperationalError("database is locked")
        return real(*a, **kw)

    store.finish = locked_once
    out, _ = asyncio.run(_run_job(m, store, {"analyst": "alice", "dataset": {"name": "d"}}))
    assert calls == [True, False] and not out["ok"] and out["error"]["type"].endswith("release-failed")
    assert store.get("a" * 32)["status"] == "failed" and not m._active


async def _run_job(m, store, spec, job_id="a" * 32):
    from dpgeo.server import manager

    store.create(job_id, analyst="alice", process_id="p", dataset="d", inputs={})
    t0 = manager.time.monotonic()
    out = await m.submit(job_id, "alice", spec)
    return out, manager.time.monotonic() - t0


def test_the_default_job_time_quantum_is_on():
    from dpgeo.server.config import DEFAULT_JOB_QUANTUM_S, ServerSettings

    assert ServerSettings(ledger="", releases="", jobs="").job_quantum_seconds == DEFAULT_JOB_QUANTUM_S > 0


def test_every_server_key_is_documented_with_its_default():
    from dpgeo.server.config import DEFAULT_JOB_QUANTUM_S, ServerSettings

    text = (ROOT / "docs" / "service.md").read_text(encoding="utf-8")
    rows = {m.group(1): m.group(2) for m in __import__("re").finditer(r"(?m)^\| `([a-z_]+)`[^|]*\| ([^|]*) \|", text)}
    for key in ServerSettings.__dataclass_fields__:
        if key not in ("basemap", "basemap_attribution", "title", "description", "ledger_from"):
            assert key in rows, key
    assert rows["job_quantum_seconds"] == f"{DEFAULT_JOB_QUANTUM_S:g}"


# -- which ledger: the machine's one unless the configuration names another, and said at start ------------------

def test_without_a_ledger_key_the_service_uses_dpgeo_ledger_or_the_default(folder, monkeypatch):
    from dpgeo.budget import LEDGER_ENV, ledger_path
    from dpgeo.server.config import ledger_notice

    text = MINIMAL.replace('ledger = "ledger.sqlite"          # relative to the config file\n', "")
    monkeypatch.setenv(LEDGER_ENV, str(folder / "shared.sqlite"))
    s = load_config(write(folder, text)).server
    assert s.ledger == str(folder / "shared.sqlite") and s.ledger_from == LEDGER_ENV
    info, warning = ledger_notice(s)
    assert str(folder / "shared.sqlite") in info and "DPGEO_LEDGER" in info and warning is None
    monkeypatch.delenv(LEDGER_ENV)
    s = load_config(write(folder, text)).server
    assert s.ledger == ledger_path(None) and s.ledger_from == "default" and ledger_notice(s)[1] is None
    assert s.jobs == str(folder / "jobs.sqlite")  # not in the user's data folder


def test_a_ledger_of_its_own_is_never_silent(folder, monkeypatch):
    """A relative ledger is taken from the configuration's folder, like every path there; when it is not the
    ledger the other front ends use, the service says so at start (and --check says it too)."""
    from dpgeo.budget import LEDGER_ENV
    from dpgeo.server.config import ledger_notice

    monkeypatch.setenv(LEDGER_ENV, str(folder / "shared.sqlite"))
    s = load_config(write(folder, MINIMAL)).server
    info, warning = ledger_notice(s)
    assert "from the configuration" in info and str(folder / "ledger.sqlite") in warning
    assert "not counted against this service's totals" in warning
    r = _dpgeo("serve", write(folder, MINIMAL), "--check")
    assert r.returncode == 0 and "privacy-budget ledger:" in r.stderr and "warning:" in r.stderr
    same = MINIMAL.replace('"ledger.sqlite"', f'"{folder / "shared.sqlite"}"')
    assert ledger_notice(load_config(write(folder, same)).server)[1] is None


def test_the_service_declares_its_datasets_files_so_every_front_end_finds_them(folder, monkeypatch):
    """At start the service records each dataset's file by content in its ledger: a command-line or Python run
    on that file (or a copy) without a name is charged to the service's dataset, against the same total."""
    import shutil

    import dpgeo
    from dpgeo.budget import LEDGER_ENV, Ledger
    from dpgeo.errors import BudgetExceededError
    from dpgeo.server.app import Service

    monkeypatch.setenv(LEDGER_ENV, str(folder / "shared.sqlite"))
    text = MINIMAL.replace('ledger = "ledger.sqlite"          # relative to the config file\n', "") \
        .replace("total_epsilon = 2.0", "total_epsilon = 1.0")
    service = Service(load_config(write(folder, text)))
    service.startup()
    try:
        copy = folder / "copy" / "renamed.gpkg"
        copy.parent.mkdir()
        shutil.copy(folder / "stops.gpkg", copy)
        with pytest.warns(UserWarning, match="declared dataset 'stops'"):
            res = dpgeo.dbscan_spans(str(copy), epsilon=1.0, radius_m=150, min_points=5,
                                     domain=(-93.33, 44.89, -93.19, 45.06))
        assert res.metadata["dataset"] == "stops"
        assert Ledger(folder / "shared.sqlite").budget("stops").spent_epsilon == 1
        with pytest.raises(BudgetExceededError):  # the service's total holds for the command line too
            dpgeo.dbscan_spans(str(copy), epsilon=0.5, radius_m=150, min_points=5,
                               domain=(-93.33, 44.89, -93.19, 45.06))
    finally:
        service.manager.stop()
