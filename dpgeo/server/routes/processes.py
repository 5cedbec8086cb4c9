"""OGC API – Processes: the process list, their descriptions and their execution.

An execution is checked in the request, from public facts only (the inputs
against their schemas, the dataset grant, the ε cap, the budget left, the
library's checks of the public parameters), before any job is queued. A
process that spends nothing answers inline; a release becomes a job
(:mod:`dpgeo.server.manager`), answered when it ends (synchronous) or at once
with its status (``Prefer: respond-async``).
"""

from __future__ import annotations

import asyncio
import json
import logging

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool

from ...errors import DpgeoError, ParameterError
from ..guard import rate_limited
from ..jobs import new_job_id
from ..problems import DPGEO, OGC, ApiError, budget_problem
from ..processes import PROCESSES
from ..service import JSON, json_response, service
from .jobs import results_response, status_document

__all__ = ["router"]

LOG = logging.getLogger("dpgeo.server")
router = APIRouter()


def _process(pid):
    p = PROCESSES.get(pid)
    if p is None:
        raise ApiError(404, OGC + "no-such-process", "No such process", "no process with this id")
    return p


@router.get("/processes")
async def processes(request: Request):
    b = service(request).base(request)
    return json_response({"processes": [p.summary(b) for p in PROCESSES.values()],
                          "links": [{"href": f"{b}/processes", "rel": "self", "type": JSON,
                                     "title": "this document"}]})


@router.get("/processes/{pid}")
async def process_description(pid: str, request: Request):
    p = _process(pid)
    svc = service(request)
    return json_response(p.describe(svc.base(request), svc.granted(svc.caller(request))))


@router.post("/processes/{pid}/execution")
async def execute(pid: str, request: Request):
    p = _process(pid)
    svc = service(request)
    analyst = svc.require(request)
    if not svc.executions.allow(analyst):  # every execution costs CPU, a release also budget
        raise rate_limited(svc.executions.retry_after(analyst))
    body = await _json_body(request)
    try:
        params = p.validate(body.get("inputs"))
    except ParameterError as exc:
        raise ApiError.invalid(str(exc)) from None
    ds = svc.dataset_for(analyst, params.get("dataset"))
    _check_cost(svc, p, analyst, params, ds)  # O(1), before the job limit, the budget and any charge
    outputs = _requested_outputs(body.get("outputs"), p)
    raw = _response_mode(body.get("response"), outputs, p)
    if "epsilon" in params:
        _check_epsilon_cap(params["epsilon"], ds)
    if p.spends_budget:
        refusal = await _budget_refusal(svc, p, analyst, params, ds)
        if refusal is not None:
            return refusal
    try:
        params = await run_in_threadpool(p.check, params, ds, svc.settings)
    except (ParameterError, DpgeoError) as exc:
        raise ApiError.invalid(str(exc)) from None
    if not p.spends_budget:
        response = await _inline(svc, p, params, ds, outputs, raw)
    else:
        response = await _release(request, svc, p, analyst, params, ds, outputs, raw)
    warning = weak_epsilon_header(params.get("epsilon"))
    if warning:  # a data owner allowed an ε above the weak threshold: the caller is told, as on every front end
        response.headers["Dpgeo-Warning"] = warning
    return response


def weak_epsilon_header(epsilon) -> str | None:
    """The ``Dpgeo-Warning`` header of a request whose ε is weak (dpgeo.shared_params), in ASCII.

    >>> weak_epsilon_header(1) is None, weak_epsilon_header(20)[:34]
    (True, 'epsilon = 20 is above 10: a weak g')
    """
    from ...shared_params import epsilon_warning

    text = epsilon_warning(epsilon)
    if text is None:
        return None
    for a, b in (("ε", "epsilon"), ("≈", "~"), ("≤", "<="), ("“", '"'), ("”", '"')):
        text = text.replace(a, b)
    return text.encode("ascii", "replace").decode("ascii")


async def _inline(svc, p, params, ds, outputs, raw):
    doc = await run_in_threadpool(p.inline, params, ds, svc.settings)
    b = await run_in_threadpool(svc.ledger.budget, ds.name)
    doc["dataset_total_epsilon"] = None if b.total_epsilon is None else float(b.total_epsilon)
    doc["dataset_spent_epsilon"] = float(b.spent_epsilon)
    doc["dataset_left_epsilon"] = None if b.left_epsilon is None else float(b.left_epsilon)
    results = {"preview": doc}
    if raw:
        return json_response(doc)
    return json_response({k: v for k, v in results.items() if outputs is None or k in outputs})


async def _budget_refusal(svc, p, analyst, params, ds):
    """The 409 answer when the budget left cannot fit the release (early; the worker's reservation decides)."""
    from ...budget import exact_value

    b = await run_in_threadpool(svc.ledger.budget, ds.name)
    eps = exact_value(params["epsilon"])
    if params.get("append") is not None:
        return None  # periods appended to a series may cost nothing: the worker's charge decides
    if b.left_epsilon is None or eps <= b.left_epsilon:
        return None
    LOG.info("refused (budget): analyst=%s dataset=%s process=%s epsilon=%g left=%s", analyst, ds.name, p.id,
             params["epsilon"], float(b.left_epsilon))
    return json_response(budget_problem(dataset=ds.name, requested=eps, total=b.total_epsilon, spent=b.spent_epsilon,
                                        left=b.left_epsilon), 409)


async def _release(request, svc, p, analyst, params, ds, outputs, raw):
    job_id = new_job_id()
    full = svc.manager.claim(job_id, analyst)
    if full is not None:
        status, detail = full
        raise ApiError(status, DPGEO + ("too-many-jobs" if status == 429 else "queue-full"),
                       "Too many jobs" if status == 429 else "Queue full", detail, headers={"Retry-After": "10"})
    try:
        await run_in_threadpool(svc.jobs.create, job_id, analyst=analyst, process_id=p.id, dataset=ds.name,
                                inputs=params, outputs=outputs)
    except BaseException:
        svc.manager.unclaim(job_id)
        raise
    s = svc.settings
    spec = {"job_id": job_id, "jobs": s.jobs, "ledger": s.ledger, "releases": s.releases, "process_id": p.id,
            "params": params, "analyst": analyst, "title": p.release_title(params, ds.title),
            "private": ds.private_releases, "dataset": _dataset_spec(ds), "test_seed": s.test_seed}
    task = svc.manager.submit(job_id, analyst, spec)
    base = svc.base(request)
    monitor = f"{base}/jobs/{job_id}"
    if "respond-async" in request.headers.get("prefer", "") and "async-execute" in p.job_control:
        job = await run_in_threadpool(svc.jobs.get, job_id)
        return json_response(status_document(job, base), 201,
                             headers={"Location": monitor, "Preference-Applied": "respond-async"})
    out = await asyncio.shield(task)
    headers = {"Link": f'<{monitor}>; rel="monitor"'}
    if not out["ok"]:
        return json_response(out["error"], out["error"]["status"], headers)
    job = await run_in_threadpool(svc.jobs.get, job_id)
    return await run_in_threadpool(results_response, svc, job, base, headers, raw)


# -- the request body ------------------------------------------------------------------------------------------------

_BODY = "the request body must be a JSON object: {\"inputs\": {...}}"


async def _json_body(request: Request) -> dict:
    raw = await request.body()
    try:
        body = json.loads(raw or b"{}")
    except (ValueError, UnicodeDecodeError):
        raise ApiError.invalid(_BODY) from None
    except RecursionError:  # nested deeper than the parser goes: not an execution request
        raise ApiError.invalid(_BODY + "; it is nested too deeply") from None
    if not isinstance(body, dict):
        raise ApiError.invalid(_BODY)
    unknown = sorted(set(body) - {"inputs", "outputs", "response", "subscriber"})
    if unknown:
        raise ApiError.invalid(f"unknown member {unknown[0][:40]!r} in the request body (inputs, outputs, response)")
    if "subscriber" in body:
        raise ApiError.invalid("callbacks (subscriber) are not supported; poll the job instead")
    return body


def _requested_outputs(outputs, p):
    if outputs is None or outputs == {}:
        return None
    if not isinstance(outputs, dict):
        raise ApiError.invalid("'outputs' must be an object of output id: {}")
    unknown = sorted(set(outputs) - set(p.outputs))
    if unknown:
        raise ApiError.invalid(f"unknown output {unknown[0][:40]!r}; this process has: {', '.join(p.outputs)}")
    for v in outputs.values():
        if isinstance(v, dict) and v.get("transmissionMode", "value") != "value":
            raise ApiError.invalid("only outputs by value are supported (transmissionMode 'value')")
    return sorted(outputs)


def _response_mode(mode, outputs, p):
    if mode in (None, "document"):
        return False
    if mode != "raw":
        raise ApiError.invalid("'response' must be 'document' or 'raw'")
    n = len(outputs) if outputs is not None else len(p.outputs)
    if n != 1:
        raise ApiError.invalid("response 'raw' needs exactly one output: name it in 'outputs'")
    return True


def _check_cost(svc, p, analyst, params, ds):
    """Refuse (413) a request whose estimated cost is beyond the server's ``[limits]``: from the request alone."""
    from ..limits import check_cost, request_cost

    try:
        cost = request_cost(p, params, ds)
    except ParameterError as exc:
        raise ApiError.invalid(str(exc)) from None
    over = check_cost(cost, svc.limits)
    if over is not None:
        LOG.info("refused (limits): analyst=%s dataset=%s process=%s %s", analyst, ds.name, p.id, over[0])
        raise ApiError(413, DPGEO + "over-limit", "Request over this server's limits", over[1])


def _check_epsilon_cap(epsilon, ds):
    from ...budget import exact_value, format_exact

    cap = ds.max_epsilon if ds.max_epsilon is not None else ds.total_epsilon
    if exact_value(epsilon) > cap:
        raise ApiError.invalid(f"input 'epsilon' must be <= {format_exact(cap)} for dataset {ds.name!r}")


def _dataset_spec(ds) -> dict:
    """What a worker needs to know about a dataset (plain values: it crosses a process boundary)."""
    return {"name": ds.name, "path": ds.path, "connection": ds.connection, "study_area": ds.study_area, "crs": ds.crs,
            "read": ds.read_options(),
            "person": ds.person, "max_points_per_person": ds.max_points_per_person,
            "max_points_per_record": ds.max_points_per_record, "time_columns": list(ds.time_columns),
            "timezone": ds.timezone, "time_format": ds.time_format}
