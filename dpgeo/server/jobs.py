"""Jobs: every release runs off the request path, in a worker process, and is recorded in a small SQLite file.

* :class:`JobStore` — the job records (``jobs.sqlite`` next to the ledger by
  default): owner analyst, process, status, times, release id, error answer.
  They survive a restart; a job that was queued or running when the server
  stopped is marked failed at the next start (its ledger charge, if any, stays
  counted, as the ledger records it).
* :func:`execute_release` — what a worker does for one release: the pipeline
  in unattended mode, charged to the dataset's ledger (it reserves before it
  reads the private input), then the release files, recorded in the ledger.
  It returns a small dict, never raises: the answer for the analyst (a DP
  release, or an error that describes the request, the budget or the server —
  never the data) and a line for the service log (who spent what).
* :class:`JobManager` — the worker pool (``spawn``ed processes, so a crash or
  a memory blow-up of one run cannot take the server down), the queue limits,
  and the optional padding of every job to ``min_job_seconds``.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import json
import logging
import os
import secrets
import sqlite3
import time
import traceback
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

from .problems import DPGEO, budget_problem, problem

__all__ = ["JOB_ID", "JobManager", "JobStore", "execute_release", "new_job_id"]

LOG = logging.getLogger("dpgeo.server")

#: A job id: 32 lowercase hex digits (128 random bits).
JOB_ID = __import__("re").compile(r"^[0-9a-f]{32}$")
_OWNER_LOG = "dpgeo.owner"


def new_job_id() -> str:
    return secrets.token_hex(16)


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


# -- the job records -----------------------------------------------------------------------------------------------

_SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    job_id TEXT PRIMARY KEY,
    analyst TEXT NOT NULL,
    process_id TEXT NOT NULL,
    dataset TEXT NOT NULL,
    inputs TEXT NOT NULL,
    outputs TEXT,
    status TEXT NOT NULL,
    message TEXT,
    progress INTEGER NOT NULL DEFAULT 0,
    created TEXT NOT NULL,
    started TEXT,
    finished TEXT,
    release_id TEXT,
    error TEXT,
    seq INTEGER
);
CREATE INDEX IF NOT EXISTS jobs_by_analyst ON jobs (analyst, seq);
"""


class JobStore:
    """Job records in one SQLite file (a connection per operation: safe across threads and processes)."""

    def __init__(self, path):
        self.path = os.fspath(path)

    def _connect(self):
        conn = sqlite3.connect(self.path, timeout=10.0, isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        return conn

    def _run(self, sql, args=(), fetch=None):
        conn = self._connect()
        try:
            cur = conn.execute(sql, args)
            if fetch == "one":
                return cur.fetchone()
            if fetch == "all":
                return cur.fetchall()
            return cur.rowcount
        finally:
            conn.close()

    def initialise(self):
        """Create the table if needed; mark jobs left queued or running by a previous server as failed."""
        conn = self._connect()
        try:
            conn.executescript(_SCHEMA)
            n = conn.execute(
                "UPDATE jobs SET status = 'failed', finished = ?, message = ?, error = ? "
                "WHERE status IN ('accepted', 'running')",
                (_now(), "the server stopped before this job finished",
                 json.dumps(problem(500, DPGEO + "interrupted", "Interrupted",
                                    "the server stopped before this job finished; if it had started, its privacy "
                                    "budget stays spent")))).rowcount
        finally:
            conn.close()
        return n

    def create(self, job_id, *, analyst, process_id, dataset, inputs, outputs=None):
        self._run("INSERT INTO jobs (job_id, analyst, process_id, dataset, inputs, outputs, status, created, seq) "
                  "VALUES (?, ?, ?, ?, ?, ?, 'accepted', ?, (SELECT coalesce(max(seq), 0) + 1 FROM jobs))",
                  (job_id, analyst, process_id, dataset, json.dumps(inputs),
                   None if outputs is None else json.dumps(outputs), _now()))

    def mark_running(self, job_id):
        self._run("UPDATE jobs SET status = 'running', started = ? WHERE job_id = ? AND status = 'accepted'",
                  (_now(), job_id))

    def set_progress(self, job_id, percent):
        self._run("UPDATE jobs SET progress = ? WHERE job_id = ? AND status = 'running'", (int(percent), job_id))

    def finish(self, job_id, *, ok, release_id=None, error=None, message=None):
        self._run("UPDATE jobs SET status = ?, finished = ?, progress = ?, release_id = ?, error = ?, message = ?, "
                  "started = coalesce(started, ?) WHERE job_id = ?",
                  ("successful" if ok else "failed", _now(), 100 if ok else 0, release_id,
                   None if error is None else json.dumps(error), message, _now(), job_id))

    def get(self, job_id):
        """A job as a dict, or None."""
        if not JOB_ID.match(job_id or ""):
            return None
        row = self._run(f"SELECT {_COLS} FROM jobs WHERE job_id = ?", (job_id,), fetch="one")
        return None if row is None else _as_dict(row)

    def list(self, analyst, *, limit=100, offset=0):
        """An analyst's jobs, newest first, and how many there are."""
        rows = self._run(f"SELECT {_COLS} FROM jobs WHERE analyst = ? ORDER BY seq DESC LIMIT ? OFFSET ?",
                         (analyst, limit, offset), fetch="all")
        n = self._run("SELECT count(*) FROM jobs WHERE analyst = ?", (analyst,), fetch="one")[0]
        return [_as_dict(r) for r in rows], n


_COLS = ("job_id, analyst, process_id, dataset, inputs, outputs, status, message, progress, created, started, "
         "finished, release_id, error")


def _as_dict(row):
    d = dict(zip([c.strip() for c in _COLS.split(",")], row))
    d["inputs"] = json.loads(d["inputs"])
    d["outputs"] = None if d["outputs"] is None else json.loads(d["outputs"])
    d["error"] = None if d["error"] is None else json.loads(d["error"])
    return d


# -- what a worker does ----------------------------------------------------------------------------------------------

def init_worker(owner_log):
    """Worker start-up: the owner's exact diagnostics go to ``owner_log`` (or nowhere), never to the service log.

    The worker's stderr is the server's; nothing the library says about the
    private data (``dpgeo.owner`` warnings, Python warnings) may reach it.
    """
    import warnings

    handler = logging.FileHandler(owner_log, encoding="utf-8") if owner_log else logging.NullHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    for name in (_OWNER_LOG, "py.warnings", "dpgeo.owner.worker"):
        lg = logging.getLogger(name)
        lg.handlers[:] = [handler]
        lg.propagate = False
        lg.setLevel(logging.INFO)
    logging.captureWarnings(True)
    warnings.simplefilter("default")


def _owner(msg, *args):
    logging.getLogger("dpgeo.owner.worker").warning(msg, *args)


def execute_release(spec: dict) -> dict:
    """Run one release in a worker; returns ``{"ok": True, "release_id": ...}`` or an error answer. Never raises.

    ``spec``: job_id, jobs (path), ledger (path), releases (folder), process_id, params, dataset (a dict of the
    dataset's configuration), analyst, title, private.

    The pipeline charges the dataset's ledger before it reads the input (a
    refused release reads nothing), cancels the charge if the input cannot be
    read, and runs unattended: a condition of the data is a warning for the
    owner's log, never an error.
    """
    from ..budget import Ledger, format_exact
    from ..counting.inputs import PointFile
    from ..errors import BudgetExceededError, DataError, DpgeoError, LedgerError
    from .processes import PROCESSES
    from .releases import write_release

    job_id = spec["job_id"]
    store = JobStore(spec["jobs"])
    try:
        store.mark_running(job_id)
    except sqlite3.Error:
        pass
    process = PROCESSES[spec["process_id"]]
    params, dataset = spec["params"], spec["dataset"]
    who = f"analyst={spec['analyst']} dataset={dataset['name']} process={process.id} epsilon={params['epsilon']:g}"

    def progress(frac, _msg):  # the fraction only: the messages are for the owner
        try:
            store.set_progress(job_id, 5 + int(85 * frac))
        except sqlite3.Error:
            pass

    phase, rid = "release", None
    try:
        points = PointFile(dataset["path"], **dataset["read"])  # read by the pipeline, after the charge
        result = process.run(points, params, dataset, ledger=spec["ledger"], analyst=spec["analyst"],
                             progress=progress)
        rid = result.metadata["release_id"]
        who += f" release_id={rid} job={job_id}"
        phase = "write"
        paths = write_release(spec["releases"], rid, result, title=spec["title"], dataset=dataset["name"],
                              process_id=process.id, private=spec["private"],
                              date=result.metadata.get("ledger_release_date") or _now()[:10])
        Ledger(spec["ledger"]).add_outputs(rid, paths)
    except BudgetExceededError as exc:
        return {"ok": False, "log": f"refused (budget): {who} left={format_exact(exc.left_epsilon)}",
                "error": budget_problem(dataset=exc.dataset, requested=exc.requested_epsilon, total=exc.total_epsilon,
                                        spent=exc.spent_epsilon, left=exc.left_epsilon)}
    except LedgerError as exc:
        if rid is None:
            return {"ok": False, "log": f"ledger unavailable: {who}: {exc}",
                    "error": problem(503, DPGEO + "ledger-unavailable", "Ledger unavailable",
                                     "the privacy-budget ledger cannot be used right now; if the release had not "
                                     "started, nothing was charged. Try again later")}
        return _failed(job_id, who, phase, exc, DpgeoError, DataError)
    except BaseException as exc:  # noqa: BLE001 - the worker answers, never raises
        return _failed(job_id, who, phase, exc, DpgeoError, DataError)
    return {"ok": True, "release_id": rid, "log": f"release: {who}"}


def _failed(job_id, who, phase, exc, DpgeoError, DataError):
    """The answer to a release that failed: generic for the analyst; the class (or a configuration error) logged."""
    _owner("job %s (%s, phase %s) failed:\n%s", job_id, who, phase, traceback.format_exc())
    # the service log gets the text of configuration errors only, never of anything that may quote the data
    text = str(exc) if isinstance(exc, DpgeoError) and not isinstance(exc, DataError) else type(exc).__name__
    return {"ok": False, "log": f"failed in {phase}: {who}: {text}",
            "error": problem(500, DPGEO + "release-failed", "Release failed",
                             "the release could not be made because of a problem on the server; the data owner can "
                             "see the details in the server's log. If it had started, its privacy budget stays "
                             "spent (the ledger records it).")}


def _warm():
    """Import the heavy modules once, when a worker starts."""
    from .. import pipeline  # noqa: F401
    from . import processes, releases  # noqa: F401

    return os.getpid()


# -- the pool ----------------------------------------------------------------------------------------------------------

class JobManager:
    """Runs releases in worker processes and records them; enforces the queue limits."""

    def __init__(self, settings, store: JobStore):
        self.settings = settings
        self.store = store
        self._pool = None
        self._active = {}      # job_id -> analyst
        self._tasks = set()

    def start(self):
        import multiprocessing

        self._pool = ProcessPoolExecutor(max_workers=self.settings.workers, mp_context=multiprocessing.get_context(
            "spawn"), initializer=init_worker, initargs=(self.settings.owner_log,))
        for _ in range(self.settings.workers):
            self._pool.submit(_warm)

    def stop(self, timeout=10.0):
        """Stop the workers: queued jobs are dropped, running ones get ``timeout`` seconds, then are killed."""
        pool, self._pool = self._pool, None
        if pool is None:
            return
        procs = list((getattr(pool, "_processes", None) or {}).values())
        pool.shutdown(wait=False, cancel_futures=True)
        deadline = time.monotonic() + timeout
        for p in procs:
            p.join(max(0.0, deadline - time.monotonic()))
        for p in procs:
            if p.is_alive():
                p.terminate()

    def claim(self, job_id, analyst):
        """Take a place in the queue for ``job_id``: None, or ``(status, detail)`` when the queue is full (all, or
        this analyst's share).

        Checking and taking happen together, with no ``await`` in between, so
        that concurrent requests cannot all pass the check before any of them
        is counted. :meth:`submit` runs the job; :meth:`unclaim` gives the
        place back if it is never submitted.
        """
        mine = sum(1 for a in self._active.values() if a == analyst)
        if mine >= self.settings.max_jobs_per_analyst:
            return 429, (f"you have {mine} jobs queued or running, the most this server allows; wait for one to "
                         "finish")
        if len(self._active) >= self.settings.max_queued_jobs:
            return 503, "the server's job queue is full; try again later"
        self._active[job_id] = analyst
        return None

    def unclaim(self, job_id):
        self._active.pop(job_id, None)

    def submit(self, job_id, analyst, spec) -> asyncio.Task:
        """Queue a release; the returned task resolves to the worker's answer once the job record is final."""
        self._active[job_id] = analyst  # (already there after claim)
        task = asyncio.get_running_loop().create_task(self._run(job_id, spec, time.monotonic()))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _run(self, job_id, spec, t0):
        loop = asyncio.get_running_loop()
        try:
            try:
                out = await loop.run_in_executor(self._pool, execute_release, spec)
            except BrokenProcessPool:
                out = {"ok": False, "log": f"worker died: job={job_id} analyst={spec['analyst']} "
                                           f"dataset={spec['dataset']['name']}",
                       "error": problem(500, DPGEO + "release-failed", "Release failed",
                                        "the release could not be made because of a problem on the server; if it "
                                        "had started, its privacy budget stays spent")}
                self.stop(timeout=0)
                self.start()
            except Exception as exc:  # noqa: BLE001
                out = {"ok": False, "log": f"job {job_id} failed to run: {type(exc).__name__}",
                       "error": problem(500, DPGEO + "release-failed", "Release failed",
                                        "the release could not be made because of a problem on the server")}
            pad = self.settings.min_job_seconds - (time.monotonic() - t0)
            if pad > 0:  # the job's duration says nothing about the data below this
                await asyncio.sleep(pad)
            self.store.finish(job_id, ok=out["ok"], release_id=out.get("release_id"), error=out.get("error"),
                              message=None if out["ok"] else out["error"]["title"])
            (LOG.info if out["ok"] else LOG.warning)("%s", out["log"])
            return out
        finally:
            self._active.pop(job_id, None)
