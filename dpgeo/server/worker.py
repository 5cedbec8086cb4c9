"""What runs in a job's own worker process: one release, charged, written, and answered to the server.

* :func:`job_main` — the process's entry point: it dies with the server
  (:func:`die_with`), sends the owner's diagnostics to the owner's log only
  (:func:`init_worker`), runs :func:`execute_release` and sends its answer
  back over a pipe.
* :func:`execute_release` — the pipeline in unattended mode, charged to the
  dataset's ledger through a :class:`JobLedger`, then the release files
  (written, not yet published: the server publishes them once the job is
  recorded). It returns a small dict and never raises: the answer for the
  analyst (a DP release, or an error that describes the request, the budget
  or the server — never the data) and a line for the service log.
* :class:`JobLedger` — the dataset's ledger as the pipeline sees it, which
  writes the job's phase to the job records *before* each step: the charge's
  id before it is made, ``reading`` once it is made, ``noise`` before any
  noise may be drawn, ``computed`` when the release exists. The charge is
  completed by the server when the release is published. So a server that
  finds the process killed knows which charge was its, and whether noise
  may have been drawn (:mod:`dpgeo.server.manager`).
"""

from __future__ import annotations

import logging
import os
import secrets
import signal
import sys
import threading
import traceback

from ..budget import Ledger, Reservation
from ..errors import LedgerError
from .jobs import JobStore, _now
from .problems import DPGEO, budget_problem, problem

__all__ = ["JobLedger", "cap_memory", "die_with", "execute_release", "init_worker", "job_main"]

_OWNER_LOG = "dpgeo.owner"
#: prctl(2) option: the signal this process gets when its parent dies (Linux).
PR_SET_PDEATHSIG = 1


# -- the process -------------------------------------------------------------------------------------------------

def die_with(server_pid: int):
    """Make this process die (SIGKILL) as soon as the server ``server_pid`` does, however it ends.

    Two mechanisms, both Linux: the parent-death signal (``prctl(PR_SET_PDEATHSIG)``; the parent is the
    forkserver, which exits when the server does), and a watchdog thread blocked on a pidfd of the server
    itself (or, where pidfds are missing, polling it twice a second). A worker whose server is already gone
    when it starts ends at once. The worker closes its copy of the forkserver's "alive" pipe, which
    multiprocessing hands every child, so that the forkserver exits as soon as the server does, even
    while a worker cannot run its watchdog (stopped, or stuck).
    """
    _release_forkserver()
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        except (OSError, AttributeError):
            pass
    threading.Thread(target=_watch, args=(int(server_pid),), name="dpgeo-server-watch", daemon=True).start()


def cap_memory(extra_bytes: int):
    """Cap this process's address space at what it holds now plus ``extra_bytes`` (``RLIMIT_AS``; 0: no cap).

    Counted from the worker's own size at start (the libraries it was forked with), so that the cap is what one
    job may add: an allocation beyond it fails with MemoryError in this process alone, never in the server.
    """
    if not extra_bytes:
        return
    try:
        import resource

        with open("/proc/self/statm", encoding="ascii") as f:
            size = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        limit = size + int(extra_bytes)
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        if hard != resource.RLIM_INFINITY:
            limit = min(limit, hard)
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    except (ImportError, OSError, ValueError):  # not Linux: the job time limit still holds
        pass


def _release_forkserver():
    try:
        from multiprocessing import forkserver

        fs = forkserver._forkserver
        fd = getattr(fs, "_forkserver_alive_fd", None)
        if fd is not None and fs._forkserver_pid is None:  # a child of the forkserver, not the server itself
            fs._forkserver_alive_fd = None
            os.close(fd)
    except (ImportError, AttributeError, OSError):
        pass


def _watch(server_pid):
    import select
    import time

    def gone():
        os.kill(os.getpid(), signal.SIGKILL)

    try:
        fd = os.pidfd_open(server_pid)
    except ProcessLookupError:
        return gone()
    except (AttributeError, OSError):  # no pidfd here: poll
        while True:
            try:
                os.kill(server_pid, 0)
            except ProcessLookupError:
                return gone()
            except PermissionError:
                pass
            time.sleep(0.5)
    select.select([fd], [], [])
    gone()


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


def job_main(spec, conn, server_pid):
    """A job's process: die with the server, run the release, send the answer, exit."""
    die_with(server_pid)
    cap_memory(spec.get("worker_memory_bytes") or 0)
    init_worker(spec.get("owner_log"))
    out = execute_release(spec)
    try:
        conn.send(out)
    finally:
        conn.close()


# -- the ledger as a job sees it ---------------------------------------------------------------------------------

class JobReservation(Reservation):
    """A charge whose phases are written to the job record; completed by the server, once published."""

    def noise_started(self):
        if not self._noise and self.status == "reserved" and not self.ledger.enter_phase("noise", "reading"):
            raise LedgerError(f"job {self.ledger.job_id} was closed by the server: no noise is drawn for it")
        super().noise_started()

    def complete(self, outputs=()):
        if self.status != "reserved":
            raise LedgerError(f"release {self.release_id} is {self.status}; only a reserved release is completed")
        if not self.ledger.enter_phase("computed", "noise"):
            raise LedgerError(f"job {self.ledger.job_id} was closed by the server before its release was written")
        self._noise = True
        self.status = "completed"  # in the ledger once the server has published the release


class JobLedger(Ledger):
    """The ledger of one job's worker: every charge is announced in the job record before it is made."""

    reservation_type = JobReservation

    def __init__(self, path, *, store: JobStore, job_id: str):
        super().__init__(path)
        self.store = store
        self.job_id = job_id
        #: Whether a charge was asked for (a release that is not differentially private charges nothing).
        self.charged = False

    def enter_phase(self, phase, expect) -> bool:
        return self.store.begin_phase(self.job_id, phase, expect=expect)

    def reserve(self, dataset, **kw):
        return self._announced(lambda rid: super(JobLedger, self).reserve(dataset, release_id=rid, **kw))

    def append_periods(self, series_id, **kw):
        """Periods appended to a series: announced in the job record like a charge (under the run's own id)."""
        return self._announced(lambda rid: super(JobLedger, self).append_periods(series_id, run_id=rid, **kw))

    def _announced(self, charge):
        self.charged = True
        rid = secrets.token_hex(16)
        if not self.store.begin_phase(self.job_id, "reserving", expect=None, release_id=rid):
            raise LedgerError(f"job {self.job_id} was closed by the server: nothing is charged for it")
        r = charge(rid)
        if not self.enter_phase("reading", "reserving"):
            r.cancel()
            raise LedgerError(f"job {self.job_id} was closed by the server: its charge is cancelled")
        return r


# -- one release -------------------------------------------------------------------------------------------------

def _owner(msg, *args):
    logging.getLogger("dpgeo.owner.worker").warning(msg, *args)


def execute_release(spec: dict) -> dict:
    """Run one release in a worker; returns ``{"ok": True, "release_id": ..., "outputs": [...]}`` or an error
    answer. Never raises.

    ``spec``: job_id, jobs (path), ledger (path), releases (folder), process_id, params, dataset (a dict of the
    dataset's configuration), analyst, title, private.

    The pipeline charges the dataset's ledger before it reads the input (a
    refused release reads nothing), cancels the charge if the input cannot be
    read, and runs unattended: a condition of the data is a warning for the
    owner's log, never an error. No progress is reported: when each step
    ends depends on the data.
    """
    from ..budget import format_exact
    from ..counting.inputs import PointFile
    from ..errors import BudgetExceededError, DataError, DpgeoError, ParameterError
    from .processes import PROCESSES
    from .releases import write_release

    job_id = spec["job_id"]
    store = JobStore(spec["jobs"])
    process = PROCESSES[spec["process_id"]]
    params, dataset = spec["params"], spec["dataset"]
    who = f"analyst={spec['analyst']} dataset={dataset['name']} process={process.id} epsilon={params['epsilon']:g}"
    phase, rid = "release", None
    try:
        if not store.mark_running(job_id):
            return _closed(who)
        if dataset.get("connection"):  # a PostGIS table or query (connected by the pipeline, after the charge)
            from ..counting.postgis import postgis

            points = postgis(dataset["connection"], **dataset["read"])
        else:
            points = PointFile(dataset["path"], **dataset["read"])  # read by the pipeline, after the charge
        if spec.get("worker_memory_bytes"):  # the library's own memory plan, checked before the charge, uses the cap
            dataset = dict(dataset, max_memory_bytes=spec["worker_memory_bytes"])
        if spec.get("test_seed") is not None:  # [server] test_seed: reproducible, NOT private (tests only)
            dataset = dict(dataset, test_seed=spec["test_seed"])
            who += " NOT-PRIVATE(test_seed)"
        if params.get("append"):  # the series continued: its published GeoPackage (DP output)
            import os

            dataset = dict(dataset, append_path=os.path.join(spec["releases"], f"{params['append']}.gpkg"))
        ledger = JobLedger(spec["ledger"], store=store, job_id=job_id)
        result = process.run(points, params, dataset, ledger=ledger, analyst=spec["analyst"], progress=None)
        rid = result.metadata["release_id"]
        who += f" release_id={rid} job={job_id}"
        phase = "write"
        paths = write_release(spec["releases"], rid, result, title=spec["title"], dataset=dataset["name"],
                              process_id=process.id, private=spec["private"],
                              date=result.metadata.get("ledger_release_date") or _now()[:10])
    except BudgetExceededError as exc:
        return {"ok": False, "log": f"refused (budget): {who} left={format_exact(exc.left_epsilon)}",
                "error": budget_problem(dataset=exc.dataset, requested=exc.requested_epsilon, total=exc.total_epsilon,
                                        spent=exc.spent_epsilon, left=exc.left_epsilon)}
    except (ParameterError, LedgerError) as exc:
        refused = _refused_before_reading(store, job_id, exc, ParameterError, DataError)
        if refused is not None:
            return dict(refused, log=f"refused ({type(exc).__name__}): {who}: {refused['error']['detail']}")
        if isinstance(exc, LedgerError) and rid is None and store_phase(store, job_id) in (None, "reserving"):
            return {"ok": False, "log": f"ledger unavailable: {who}: {exc}",
                    "error": problem(503, DPGEO + "ledger-unavailable", "Ledger unavailable",
                                     "the privacy-budget ledger cannot be used right now; if the release had not "
                                     "started, nothing was charged. Try again later")}
        return _failed(job_id, who, phase, exc, DpgeoError, DataError)
    except MemoryError as exc:  # the worker's memory cap ([limits] worker_memory_bytes)
        return _failed(job_id, who, phase, exc, DpgeoError, DataError, extra=LIMIT_MEMORY)
    except BaseException as exc:  # noqa: BLE001 - the worker answers, never raises
        return _failed(job_id, who, phase, exc, DpgeoError, DataError)
    # a release that is not differentially private (a test seed) charged nothing: its job says so
    return {"ok": True, "release_id": rid, "outputs": paths, "log": f"release: {who}", "charged": ledger.charged}


def store_phase(store, job_id):
    try:
        job = store.get(job_id)
    except Exception:  # noqa: BLE001
        return None
    return None if job is None else job.get("phase")


def _closed(who):
    return {"ok": False, "log": f"not run (the job was closed): {who}",
            "error": problem(500, DPGEO + "release-failed", "Release failed", "this job was closed before it ran")}


def _failed(job_id, who, phase, exc, DpgeoError, DataError, extra=""):
    """The answer to a release that failed: generic for the analyst; the class (or a configuration error) logged."""
    _owner("job %s (%s, phase %s) failed:\n%s", job_id, who, phase, traceback.format_exc())
    # the service log gets the text of configuration errors only, never of anything that may quote the data
    text = str(exc) if isinstance(exc, DpgeoError) and not isinstance(exc, DataError) else type(exc).__name__
    return {"ok": False, "log": f"failed in {phase}: {who}: {text}" + (" [limit: memory]" if extra else ""),
            "error": release_failed(extra), "limit": "memory" if extra else None}


#: What the analyst is told of a job stopped by the worker's memory cap.
LIMIT_MEMORY = (" It needed more memory than this server allows one job ([limits] worker_memory_bytes); a smaller "
                "request (larger cells, fewer periods) fits.")
#: What the analyst is told of a job stopped by the time limit.
LIMIT_TIME = (" It ran longer than this server allows one job ([limits] job_seconds); a smaller request (larger "
              "cells, fewer periods) is faster.")


def _refused_before_reading(store, job_id, exc, ParameterError, DataError):
    """A 400 answer for a refusal made before any record was read (the job never reached ``reading``): it is
    about the request, the earlier series or the ledger — public facts — so its reason is told. None otherwise."""
    if isinstance(exc, DataError) or store_phase(store, job_id) not in (None, "reserving"):
        return None
    text = str(exc)
    if "was closed by the server" in text:
        return None
    return {"ok": False, "error": problem(400, DPGEO + "invalid-parameter", "Invalid parameter", _no_paths(text))}


def _no_paths(text) -> str:
    """A message without the server's file paths (a ledger or a series file may be named in it)."""
    import re

    return re.sub(r"(?<![\w.])/[^\s'\"]+", "<file>", text)


def release_failed(extra=""):
    """The analyst's answer to a release the server could not make (the job status says what was charged)."""
    return problem(500, DPGEO + "release-failed", "Release failed",
                   "the release could not be made because of a problem on the server; the data owner can see the "
                   "details in the server's log. The job's status says whether its privacy budget stays spent."
                   + extra)
