"""The job manager: every release in a process of its own, padded in time, then recorded, published and settled.

* **One process per job**, forked from a preloaded forkserver (about 10 ms
  a job; a fresh interpreter would cost about 0.5 s). A worker killed by
  the kernel or by hand costs only its own job: nothing is shared with the
  other jobs, unlike a ``ProcessPoolExecutor``, which breaks every pending
  job when one of its workers dies. At most ``workers`` jobs run at once;
  the others wait for a slot, in order.
* **Workers die with the server** (:func:`dpgeo.server.worker.die_with`).
* **Padding.** A job holds its slot until its time, counted from the moment
  it got the slot, is rounded up to a whole number of ``job_quantum_seconds``
  (and at least ``min_job_seconds``); only then is it recorded, published
  and answered. A release on a dataset with few points and one with many
  then take the same time as long as both fit in the same quantum, and the
  next job in the queue starts at the same moment either way.
* **Recorded, then published.** A successful job is recorded first, then its
  release is published (a rename) and its charge completed with the files.
  A failed one — an error, or a killed worker — is recorded with its charge
  settled from its last phase: cancelled if no noise had been drawn,
  "spent, no release" otherwise; its files are removed. A job the server
  itself fails to run (its process cannot be started, the job store is
  locked) or to settle ends the same way, padded too: never left accepted
  or running.
* **Restart.** A server that starts finds the jobs left running by its
  predecessor (closed as interrupted, charges settled the same way) and the
  releases recorded but not yet published (published), so a release is
  either published with its job completed, or not at all.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import time

from starlette.concurrency import run_in_threadpool

from .jobs import BEFORE_NOISE, JobStore, charge_message
from .releases import discard_release, publish_release, unpublished_releases
from .worker import LIMIT_TIME, job_main, release_failed

__all__ = ["JobManager", "padded_seconds"]

LOG = logging.getLogger("dpgeo.server")


def padded_seconds(elapsed, quantum, minimum=0.0) -> float:
    """How long a job that ran ``elapsed`` seconds holds its slot: at least ``minimum``, rounded up to a whole
    number of ``quantum`` (0: no rounding).

    Examples
    --------
    >>> padded_seconds(0.3, 2.0), padded_seconds(1.99, 2.0), padded_seconds(2.01, 2.0)
    (2.0, 2.0, 4.0)
    >>> padded_seconds(0.3, 0.0), padded_seconds(0.3, 2.0, minimum=5)
    (0.3, 6.0)
    """
    t = max(float(elapsed), float(minimum))
    if quantum > 0:
        t = max(1, math.ceil(t / quantum - 1e-9)) * quantum
    return t


def _charge_of(status) -> str:
    """A job's charge from its ledger row's status after settling (None: no charge was ever made)."""
    return {None: "none", "cancelled": "not charged", "reserved": "reserved"}.get(status, "spent, no release")


#: The environment of the forkserver every worker comes from (unless the owner set them): one thread per numeric
#: library and at most two malloc arenas, so that a worker's address-space cap ([limits] worker_memory_bytes)
#: measures the memory it uses, not the stacks and arenas reserved by threads it does not need.
WORKER_ENV = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "MALLOC_ARENA_MAX": "2"}


class _worker_environment:
    """Set :data:`WORKER_ENV` while the forkserver is started (it copies the environment), then restore."""

    def __enter__(self):
        self.saved = {k: os.environ.get(k) for k in WORKER_ENV}
        for k, v in WORKER_ENV.items():
            os.environ.setdefault(k, v)

    def __exit__(self, *exc):
        for k, v in self.saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


class JobManager:
    """Runs releases in worker processes, pads their time, records, publishes and settles them."""

    def __init__(self, settings, store: JobStore, ledger, limits=None):
        from .limits import Limits

        self.settings = settings
        self.store = store
        self.ledger = ledger
        self.limits = limits or Limits()
        #: Jobs stopped by a worker limit since the start, by limit ("time", "memory"): each is logged too.
        self.limit_stops = {"time": 0, "memory": 0}
        self._ctx = None
        self._slots = None
        self._active = {}      # job_id -> analyst, from claim to answer
        self._procs = {}       # job_id -> running process
        self._tasks = set()

    # -- start and stop ------------------------------------------------------------------------------------------

    def start(self):
        """Settle what a previous server left, then start the forkserver that every job's process comes from."""
        import multiprocessing

        self.reconcile()
        try:
            ctx = multiprocessing.get_context("forkserver")
            ctx.set_forkserver_preload(["dpgeo.server.worker", "dpgeo.pipeline", "dpgeo.counting.inputs",
                                        "dpgeo.server.processes", "dpgeo.server.releases"])
            from multiprocessing import forkserver

            with _worker_environment():
                forkserver.ensure_running()
        except ValueError:  # no forkserver on this platform
            ctx = multiprocessing.get_context("spawn")
        self._ctx = ctx
        self._slots = asyncio.Semaphore(self.settings.workers)

    def stop(self, timeout=0.5):
        """Stop: running jobs get ``timeout`` seconds, then are killed; the jobs left are closed as interrupted
        (their charges settled by their phase), and their files removed."""
        deadline = time.monotonic() + timeout
        procs = list(self._procs.values())
        for p in procs:
            p.join(max(0.0, deadline - time.monotonic()))
        self.abort()
        for p in procs:
            p.join(5)
        self._ctx = None
        self.reconcile()

    def abort(self):
        """Kill every running worker now (safe in a signal handler: one ``kill`` per worker, nothing else)."""
        for p in list(self._procs.values()):
            try:
                if p.pid is not None:
                    os.kill(p.pid, 9)
            except (ProcessLookupError, OSError):
                pass

    # -- the queue -----------------------------------------------------------------------------------------------

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
        task = asyncio.get_running_loop().create_task(self._run(job_id, spec))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _run(self, job_id, spec):
        try:
            async with self._slots:
                t0 = time.monotonic()
                try:
                    out = await run_in_threadpool(self._execute, job_id, spec)
                except Exception as exc:  # noqa: BLE001 - the job still ends, padded and settled, like any failure
                    out = self._server_failure(job_id, spec, "run", exc)
                pad = padded_seconds(time.monotonic() - t0, self.settings.job_quantum_seconds,
                                     self.settings.min_job_seconds) - (time.monotonic() - t0)
                if pad > 0:  # below the quantum, the job's duration says nothing about the data
                    await asyncio.sleep(pad)
                try:
                    out = await run_in_threadpool(self.settle, job_id, out)
                except Exception as exc:  # noqa: BLE001
                    out = await run_in_threadpool(self._settle_after_error, job_id, spec, out, exc)
            (LOG.info if out["ok"] else LOG.warning)("%s", out["log"])
            return out
        finally:
            self._active.pop(job_id, None)

    def _server_failure(self, job_id, spec, step, exc) -> dict:
        """The answer to a job the server itself could not run or settle: the worker's generic failure for the
        analyst, the exception's class in the service log, its traceback in the owner's log only."""
        self._owner_log(f"job {job_id}: the server failed to {step} it", exc)
        who = f"job={job_id} analyst={spec.get('analyst')} dataset={(spec.get('dataset') or {}).get('name')}"
        return {"ok": False, "log": f"failed in the server ({step}): {who}: {type(exc).__name__}",
                "error": release_failed()}

    def _settle_after_error(self, job_id, spec, out, exc) -> dict:
        """Settling raised: close the job as failed if it is still open (its charge settled from its phase)."""
        failed = self._server_failure(job_id, spec, "settle", exc)
        try:
            job = self.store.get(job_id) or {}
            if job.get("status") in ("accepted", "running"):
                return self.settle(job_id, failed)
        except Exception as again:  # noqa: BLE001 - left open: the next start closes it (reconcile)
            self._owner_log(f"job {job_id}: the server could not close it", again)
            LOG.error("job %s could not be closed (%s); the next start closes it", job_id, type(again).__name__)
            return failed
        if job.get("status") == "successful":  # recorded: what was not published is published at the next start
            LOG.error("release %s of job %s is recorded but could not be published (%s); retried at the next start",
                      job.get("release_id"), job_id, type(exc).__name__)
        return failed

    def _owner_log(self, what, exc):
        """A server-side failure's details, for the data owner's log only (or nowhere)."""
        import traceback

        if not self.settings.owner_log:
            return
        try:
            with open(self.settings.owner_log, "a", encoding="utf-8") as f:
                f.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} dpgeo.server {what}:\n"
                        + "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))
        except OSError:
            pass

    # -- one job -------------------------------------------------------------------------------------------------

    def _execute(self, job_id, spec) -> dict:
        """Run a job in a process of its own and wait for its answer (a thread per running job)."""
        if self._ctx is None:
            return {"ok": False, "log": f"not run (the server is stopping): job={job_id}", "error": release_failed()}
        recv, send = self._ctx.Pipe(duplex=False)
        spec = dict(spec, owner_log=self.settings.owner_log, worker_memory_bytes=self.limits.worker_memory_bytes)
        p = self._ctx.Process(target=job_main, args=(spec, send, os.getpid()), name=f"dpgeo-job-{job_id[:8]}",
                              daemon=True)
        try:
            p.start()
        finally:
            send.close()
        self._procs[job_id] = p
        try:
            try:
                self.store.set_worker(job_id, p.pid)
            except BaseException:  # the job is about to be closed as failed: its worker goes with it
                p.kill()
                p.join(5)
                raise
            who = f"job={job_id} analyst={spec['analyst']} dataset={spec['dataset']['name']}"
            try:
                if not recv.poll(self.limits.job_seconds):  # the time limit: the worker is stopped
                    p.kill()
                    p.join(5)
                    return self._limit_stop("time", {
                        "ok": False, "log": f"stopped at the time limit ({self.limits.job_seconds:g} s): {who}",
                        "error": release_failed(LIMIT_TIME)})
                out = recv.recv()  # EOFError: the process ended without answering
            except (EOFError, OSError):
                p.join(5)
                out = {"ok": False, "log": f"worker died (exit code {p.exitcode}): {who}", "error": release_failed()}
            if out.get("limit"):
                out = self._limit_stop(out["limit"], out)
            p.join(30)
            if p.is_alive():
                p.kill()
                p.join(5)
            return out
        finally:
            recv.close()
            self._procs.pop(job_id, None)

    def _limit_stop(self, which, out) -> dict:
        """Count a job stopped by a worker limit (the estimate accepted it: the limits are to be raised, or the
        estimate fixed); the count is in the log line."""
        self.limit_stops[which] = self.limit_stops.get(which, 0) + 1
        LOG.error("job stopped by the %s limit (%d so far since the start): %s", which, self.limit_stops[which],
                  out["log"])
        return dict(out, limit=which)

    def settle(self, job_id, out) -> dict:
        """Record a job whose process has ended: published and completed, or failed with its charge settled."""
        if out["ok"]:
            rid = out["release_id"]
            charge = "spent" if out.get("charged", True) else "none"  # none: not private ([server] test_seed)
            if self.store.finish(job_id, ok=True, release_id=rid, charge=charge, phase="publishing"):
                self._publish(job_id, rid, out.get("outputs"), charged=charge != "none")
                return out
            out = dict(out, ok=False, error=release_failed(), log=out["log"] + " (the job was already closed)")
        job = self.store.get(job_id) or {}
        charge = self._close_charge(job.get("release_id"), job.get("phase"))
        if job.get("release_id"):
            discard_release(self.settings.releases, job["release_id"])
        message = charge_message(charge)
        if out.get("limit"):
            message = f"stopped by this server's {out['limit']} limit for one job; " + message
        if self.store.finish(job_id, ok=False, error=out["error"], message=message, charge=charge):
            out = dict(out, log=f"{out['log']} (charge: {charge})")
        return out

    def _publish(self, job_id, rid, outputs=None, charged=True):
        paths = publish_release(self.settings.releases, rid)
        if not charged:  # a release that is not differentially private ([server] test_seed): no charge to complete
            self.store.set_phase(job_id, "published")
            return
        try:
            self.ledger.settle(rid, "completed", paths if paths is not None else outputs or [])
        except Exception as exc:  # noqa: BLE001 - the charge stays reserved (counted); the next start retries
            LOG.warning("release %s: the ledger could not record it as completed (%s); retried at the next start",
                        rid, type(exc).__name__)
            return
        self.store.set_phase(job_id, "published")

    def _close_charge(self, release_id, phase):
        """Settle the charge of a job whose process has ended without completing it; returns the job's charge."""
        if not release_id:
            return "none"
        try:
            status = self.ledger.settle(release_id, "cancelled" if phase in BEFORE_NOISE else "failed")
        except Exception as exc:  # noqa: BLE001 - still reserved: counted as spent
            LOG.warning("release %s: the ledger could not settle its charge (%s); it stays counted as spent",
                        release_id, type(exc).__name__)
            return "reserved"
        return _charge_of(status)

    # -- after a restart -----------------------------------------------------------------------------------------

    def reconcile(self):
        """Close the jobs a previous server left running; publish what it recorded but did not publish."""
        from ..io.atomic import remove_stale_temporaries

        closed = self.store.close_unfinished()
        for job in closed:
            charge = self._close_charge(job.get("release_id"), job.get("phase"))
            self.store.set_charge(job["job_id"], charge, "the server stopped before this job finished; "
                                  + charge_message(charge))
        if closed:
            LOG.warning("%d job(s) left unfinished by the previous run were marked failed", len(closed))
        for job in self.store.in_phase("publishing"):  # recorded as successful, not yet published
            try:
                self._publish(job["job_id"], job["release_id"], charged=job.get("charge") != "none")
            except OSError as exc:
                LOG.error("release %s could not be published (%s); retried at the next start", job["release_id"],
                          type(exc).__name__)
        for rid in unpublished_releases(self.settings.releases):  # files no settled job owns: a job that did not
            job = self.store.by_release(rid)                       # succeed, or a worker killed while writing
            if job is None or job.get("phase") != "publishing":
                discard_release(self.settings.releases, rid)
        remove_stale_temporaries(self.settings.releases)
