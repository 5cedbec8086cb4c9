"""Job records: one small SQLite file (``jobs.sqlite`` next to the ledger by default) shared by the server and
its worker processes.

A job records its owner analyst, process, status, times, release id, error
answer, and two things that let the server close a job whose worker was
killed (:mod:`dpgeo.server.manager`):

* its **phase**, written by the worker *before* each step: ``reserving`` (the
  release id is chosen, the charge is being made), ``reading`` (charged,
  reading and counting: no noise yet), ``noise`` (noise may be drawn from
  now on), ``computed`` (the DP release exists; its files are being
  written), then, in the server, ``publishing`` and ``published``. A worker
  moves to the next phase only while its job is still ``running``, so a job
  the server has already closed can never start drawing noise;
* its **charge**, what the privacy budget of the job became (:data:`CHARGES`).

The phase is the service's own bookkeeping and is never shown itself (its
timing depends on the data). The charge is shown in the job status, to the
job's own analyst only, and for a failed job it tells one bit of the phase:
``not charged`` (closed before noise) or ``spent, no release`` (closed after
noise may have been drawn). That bit is shown because the budget must be
honest: the analyst must know whether the job's ε is spent
(``docs/service.md``, "What a failure costs").
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
import secrets
import sqlite3

from .problems import DPGEO, problem

__all__ = ["CHARGES", "JOB_ID", "JobStore", "charge_message", "new_job_id"]

#: A job id: 32 lowercase hex digits (128 random bits).
JOB_ID = re.compile(r"^[0-9a-f]{32}$")

#: What a job's privacy budget became (the ``charge`` member of its status): no charge was made (refused, or
#: failed before the charge); charged and running; spent on a published release; spent with nothing released
#: (stopped after noise may have been drawn: the charge stands, the ledger says "spent, no release"); or not
#: charged (stopped before any noise was drawn: the charge was cancelled).
CHARGES = ("none", "reserved", "spent", "spent, no release", "not charged")

#: Phases in which no noise has been drawn yet: a job killed in one of them may give its charge back.
BEFORE_NOISE = ("reserving", "reading")


def new_job_id() -> str:
    return secrets.token_hex(16)


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def charge_message(charge) -> str:
    """One sentence for a failed job's status: what its privacy budget became."""
    return {
        "spent, no release": "spent, no release: the release stopped after noise may have been drawn, so its "
                             "privacy budget stays spent",
        "not charged": "not charged: the release stopped before any noise was drawn, so its charge was cancelled",
        "reserved": "its privacy budget stays counted as spent (the ledger could not be updated)",
    }.get(charge, "nothing was charged")


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
#: Columns added after the first version (added to an older file when the server starts).
_ADDED = {"phase": "TEXT", "charge": "TEXT", "worker_pid": "INTEGER"}

_COLS = ("job_id, analyst, process_id, dataset, inputs, outputs, status, message, progress, created, started, "
         "finished, release_id, error, phase, charge, worker_pid")


def _as_dict(row):
    d = dict(zip([c.strip() for c in _COLS.split(",")], row))
    d["inputs"] = json.loads(d["inputs"])
    d["outputs"] = None if d["outputs"] is None else json.loads(d["outputs"])
    d["error"] = None if d["error"] is None else json.loads(d["error"])
    return d


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
        """Create the table, or add the columns a file from an older version lacks."""
        conn = self._connect()
        try:
            conn.executescript(_SCHEMA)
            have = {r[1] for r in conn.execute("PRAGMA table_info(jobs)")}
            for name, kind in _ADDED.items():
                if name not in have:
                    conn.execute(f"ALTER TABLE jobs ADD COLUMN {name} {kind}")
        finally:
            conn.close()

    # -- the server ----------------------------------------------------------------------------------------------

    def create(self, job_id, *, analyst, process_id, dataset, inputs, outputs=None):
        self._run("INSERT INTO jobs (job_id, analyst, process_id, dataset, inputs, outputs, status, created, seq, "
                  "charge) VALUES (?, ?, ?, ?, ?, ?, 'accepted', ?, (SELECT coalesce(max(seq), 0) + 1 FROM jobs), "
                  "'none')",
                  (job_id, analyst, process_id, dataset, json.dumps(inputs),
                   None if outputs is None else json.dumps(outputs), _now()))

    def set_worker(self, job_id, pid):
        self._run("UPDATE jobs SET worker_pid = ? WHERE job_id = ?", (int(pid), job_id))

    def finish(self, job_id, *, ok, release_id=None, error=None, message=None, charge="none", phase=None) -> bool:
        """Record the end of a job that is still open; False if it was already closed."""
        return self._run(
            "UPDATE jobs SET status = ?, finished = ?, progress = ?, release_id = coalesce(?, release_id), "
            "error = ?, message = ?, charge = ?, phase = coalesce(?, phase), started = coalesce(started, ?) "
            "WHERE job_id = ? AND status IN ('accepted', 'running')",
            ("successful" if ok else "failed", _now(), 100 if ok else 0, release_id,
             None if error is None else json.dumps(error), message, charge, phase, _now(), job_id)) == 1

    def set_phase(self, job_id, phase):
        self._run("UPDATE jobs SET phase = ? WHERE job_id = ?", (phase, job_id))

    def set_charge(self, job_id, charge, message=None):
        self._run("UPDATE jobs SET charge = ?, message = coalesce(?, message) WHERE job_id = ?",
                  (charge, message, job_id))

    def close_unfinished(self) -> list:
        """Mark every job left accepted or running as failed (interrupted); returns them as dicts.

        One transaction: a worker that is somehow still alive can no longer
        move its job to a later phase (see :meth:`begin_phase`).
        """
        err = problem(500, DPGEO + "interrupted", "Interrupted", "the server stopped before this job finished")
        conn = self._connect()
        try:
            conn.execute("BEGIN IMMEDIATE")
            rows = conn.execute(f"SELECT {_COLS} FROM jobs WHERE status IN ('accepted', 'running')").fetchall()
            conn.execute("UPDATE jobs SET status = 'failed', finished = ?, progress = 0, error = ?, message = ? "
                         "WHERE status IN ('accepted', 'running')",
                         (_now(), json.dumps(err), "the server stopped before this job finished"))
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        finally:
            conn.close()
        return [_as_dict(r) for r in rows]

    def in_phase(self, phase) -> list:
        return [_as_dict(r) for r in self._run(f"SELECT {_COLS} FROM jobs WHERE phase = ?", (phase,), fetch="all")]

    def by_release(self, release_id):
        row = self._run(f"SELECT {_COLS} FROM jobs WHERE release_id = ?", (release_id,), fetch="one")
        return None if row is None else _as_dict(row)

    # -- the worker ----------------------------------------------------------------------------------------------

    def mark_running(self, job_id) -> bool:
        """The worker has started the job; False if the job is no longer waiting for it."""
        return self._run("UPDATE jobs SET status = 'running', started = ? WHERE job_id = ? AND status = 'accepted'",
                         (_now(), job_id)) == 1

    def begin_phase(self, job_id, phase, *, expect, release_id=None) -> bool:
        """Move a running job from phase ``expect`` to ``phase`` (and record ``release_id``); False if it is not
        running in that phase any more (the server closed it)."""
        return self._run("UPDATE jobs SET phase = ?, release_id = coalesce(?, release_id) "
                         "WHERE job_id = ? AND status = 'running' AND phase IS ?",
                         (phase, release_id, job_id, expect)) == 1

    # -- reading -------------------------------------------------------------------------------------------------

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
