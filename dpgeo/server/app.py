"""The ASGI application: OGC API – Processes (Part 1: Core) and OGC API – Features (Part 1: Core, GeoJSON).

Routes are thin: they authenticate, check the request against public bounds,
and hand a release to the job manager (:mod:`dpgeo.server.jobs`) or read a
published release (:mod:`dpgeo.server.releases`, :mod:`dpgeo.server.features`).
Privacy is the security property: no route returns anything computed from
the private data except a DP release, and every error describes the request,
the budget or the server, never the data (``docs/service.md``, "Security").
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import uuid
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.responses import FileResponse, Response
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from .._version import __version__
from ..errors import DpgeoError, ParameterError
from .auth import Authenticator, RateLimiter
from .config import ServerConfig
from .features import (
    CRS84,
    FEATURES_CONFORMANCE,
    GEOJSON,
    collection_document,
    item_document,
    items_document,
    parse_items_query,
)
from .guard import Guard, TooLarge, too_large_doc
from .jobs import JobManager, JobStore, new_job_id
from .problems import DPGEO, OGC, ApiError, budget_problem, problem
from .processes import PROCESSES
from .releases import RELEASE_ID, ReleaseStore

__all__ = ["CONFORMANCE", "create_app"]

LOG = logging.getLogger("dpgeo.server")

PROCESSES_CONFORMANCE = [
    "http://www.opengis.net/spec/ogcapi-processes-1/1.0/conf/core",
    "http://www.opengis.net/spec/ogcapi-processes-1/1.0/conf/ogc-process-description",
    "http://www.opengis.net/spec/ogcapi-processes-1/1.0/conf/json",
    "http://www.opengis.net/spec/ogcapi-processes-1/1.0/conf/job-list",
]
CONFORMANCE = ["http://www.opengis.net/spec/ogcapi-common-1/1.0/conf/core"] + PROCESSES_CONFORMANCE + [
    c for c in FEATURES_CONFORMANCE if not c.endswith("oas30")]
REL = "http://www.opengis.net/def/rel/ogc/1.0/"
JSON = "application/json"


def _json(doc, status=200, headers=None, media_type=JSON):
    body = json.dumps(doc, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode("utf-8")
    return Response(body, status_code=status, headers=headers, media_type=media_type)


# -- the application -----------------------------------------------------------------------------------------------

class Service:
    """Everything a request needs: configuration, authentication, limits, ledger, jobs, releases."""

    def __init__(self, config: ServerConfig):
        from ..budget import Ledger

        self.config = config
        s = config.server
        self.settings = s
        self.auth = Authenticator({a.name: a.token_sha256 for a in config.analysts.values()})
        self.requests = RateLimiter(s.requests_per_minute)
        self.executions = RateLimiter(s.executions_per_minute)
        self.ledger = Ledger(s.ledger)
        self.jobs = JobStore(s.jobs)
        self.manager = JobManager(s, self.jobs)
        os.makedirs(s.releases, exist_ok=True)
        self.releases = ReleaseStore(s.releases)

    def startup(self):
        from ..budget import format_exact

        for ds in self.config.datasets.values():  # the configuration's totals are the owner's declaration
            b = self.ledger.budget(ds.name)
            if b.total_epsilon != ds.total_epsilon:
                self.ledger.set_total(ds.name, ds.total_epsilon, by="dpgeo serve configuration")
                LOG.info("dataset %s: total epsilon set to %s (was %s)", ds.name, format_exact(ds.total_epsilon),
                         "none" if b.total_epsilon is None else format_exact(b.total_epsilon))
            # its file, by content: a run on it from the command line, Python or QGIS is charged to it too
            self.ledger.declare(ds.name, [ds.path], total_epsilon=ds.total_epsilon, by="dpgeo serve configuration")
            others = [n for n in self.ledger.declared_for(ds.path) if n != ds.name]
            if others:  # (no path in the service log)
                LOG.warning("dataset %s: its input is also declared as dataset %s: a release of either spends the "
                            "privacy of the same people, and neither total protects them from the other's releases",
                            ds.name, ", ".join(others))
        n = self.jobs.initialise()
        if n:
            LOG.warning("%d job(s) left unfinished by the previous run were marked failed", n)
        self.manager.start()

    # -- who is calling ----------------------------------------------------------------------------------------------

    def caller(self, request: Request):
        """The analyst of a request, None without an Authorization header; 401 for a bad token, 429 over the limit."""
        header = request.headers.get("authorization")
        if header is None:
            return None
        analyst = self.auth.analyst(header)
        if analyst is None:
            raise ApiError.unauthorized()
        if not self.requests.allow(analyst):
            raise _rate_limited(self.requests.retry_after(analyst))
        return analyst

    def require(self, request: Request):
        analyst = self.caller(request)
        if analyst is None:
            raise ApiError.unauthorized()
        return analyst

    def granted(self, analyst):
        return set(self.config.analysts[analyst].datasets) if analyst else set()

    def dataset_for(self, analyst, name):
        """The configured dataset ``name`` if granted to ``analyst``; one answer for 'not granted' and 'no such'."""
        if name in self.granted(analyst):
            return self.config.datasets[name]
        raise ApiError.invalid(f"input 'dataset': no dataset {str(name)[:64]!r} is available to you")

    def visible(self, rec, analyst) -> bool:
        ds = self.config.datasets.get(rec.get("dataset"))
        private = ds.private_releases if ds is not None else rec.get("private", True)
        return not private or rec.get("dataset") in self.granted(analyst)

    def base(self, request: Request) -> str:
        return self.settings.url or str(request.base_url).rstrip("/")


def _rate_limited(retry):
    return ApiError(429, DPGEO + "rate-limited", "Too many requests",
                    f"this analyst's rate limit is reached; retry in {retry} s", headers={"Retry-After": str(retry)})


def create_app(config: ServerConfig) -> FastAPI:
    """The service as an ASGI application (run it with uvicorn: ``dpgeo serve CONFIG``)."""
    svc = Service(config)

    @asynccontextmanager
    async def lifespan(app):
        await run_in_threadpool(svc.startup)
        LOG.info("dpgeo %s serving %d dataset(s) to %d analyst(s); releases in %s", __version__,
                 len(config.datasets), len(config.analysts), config.server.releases)
        try:
            yield
        finally:
            svc.manager.stop()

    app = FastAPI(title=config.server.title, description=config.server.description, version=__version__,
                  openapi_url="/api", docs_url=None, redoc_url=None, lifespan=lifespan)
    app.state.service = svc

    @app.exception_handler(ApiError)
    async def _api_error(request, exc: ApiError):
        return _json(exc.doc, exc.status, exc.headers)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request, exc):
        titles = {404: "Not found", 405: "Method not allowed"}
        return _json(problem(exc.status_code, DPGEO + ("not-found" if exc.status_code == 404 else "http-error"),
                             titles.get(exc.status_code, "HTTP error")), exc.status_code)

    @app.exception_handler(TooLarge)
    async def _too_large(request, exc):
        return _json(too_large_doc(config.server.max_body_bytes), 413)

    @app.exception_handler(Exception)
    async def _unexpected(request, exc):
        ref = uuid.uuid4().hex[:12]
        LOG.error("unexpected error %s on %s %s: %s", ref, request.method, request.url.path, type(exc).__name__)
        return _json(problem(500, DPGEO + "internal-error", "Internal server error",
                             f"something went wrong on the server (reference {ref})"), 500)

    # -- landing page and conformance ------------------------------------------------------------------------------

    @app.get("/", include_in_schema=True)
    async def landing(request: Request):
        svc.caller(request)
        b = svc.base(request)
        return _json({
            "title": config.server.title,
            "description": config.server.description,
            "links": [
                {"href": f"{b}/", "rel": "self", "type": JSON, "title": "this document"},
                {"href": f"{b}/api", "rel": "service-desc", "type": "application/vnd.oai.openapi+json;version=3.1",
                 "title": "the API definition (OpenAPI)"},
                {"href": f"{b}/conformance", "rel": "conformance", "type": JSON, "title": "conformance classes"},
                {"href": f"{b}/conformance", "rel": REL + "conformance", "type": JSON, "title": "conformance classes"},
                {"href": f"{b}/collections", "rel": "data", "type": JSON, "title": "the published releases"},
                {"href": f"{b}/collections", "rel": REL + "data", "type": JSON, "title": "the published releases"},
                {"href": f"{b}/processes", "rel": REL + "processes", "type": JSON, "title": "the processes"},
                {"href": f"{b}/jobs", "rel": REL + "job-list", "type": JSON, "title": "your jobs"},
            ],
        })

    @app.get("/conformance")
    async def conformance(request: Request):
        svc.caller(request)
        return _json({"conformsTo": CONFORMANCE})

    # -- processes -------------------------------------------------------------------------------------------------

    def _process(pid):
        p = PROCESSES.get(pid)
        if p is None:
            raise ApiError(404, OGC + "no-such-process", "No such process", "no process with this id")
        return p

    @app.get("/processes")
    async def processes(request: Request):
        svc.caller(request)
        b = svc.base(request)
        return _json({"processes": [p.summary(b) for p in PROCESSES.values()],
                      "links": [{"href": f"{b}/processes", "rel": "self", "type": JSON, "title": "this document"}]})

    @app.get("/processes/{pid}")
    async def process_description(pid: str, request: Request):
        p = _process(pid)
        analyst = svc.caller(request)
        return _json(p.describe(svc.base(request), svc.granted(analyst)))

    @app.post("/processes/{pid}/execution")
    async def execute(pid: str, request: Request):
        p = _process(pid)
        analyst = svc.require(request)
        if not svc.executions.allow(analyst):  # every execution costs CPU, a release also budget
            raise _rate_limited(svc.executions.retry_after(analyst))
        body = await _json_body(request)
        try:
            params = p.validate(body.get("inputs"))
        except ParameterError as exc:
            raise ApiError.invalid(str(exc)) from None
        ds = svc.dataset_for(analyst, params.get("dataset"))
        outputs = _requested_outputs(body.get("outputs"), p)
        raw = _response_mode(body.get("response"), outputs, p)
        if "epsilon" in params:
            _check_epsilon_cap(params["epsilon"], ds)
        if p.spends_budget:
            refusal = await _budget_refusal(p, analyst, params, ds)
            if refusal is not None:
                return refusal
        try:
            params = await run_in_threadpool(p.check, params, ds, svc.settings)
        except (ParameterError, DpgeoError) as exc:
            raise ApiError.invalid(str(exc)) from None
        if not p.spends_budget:
            return await _inline(p, params, ds, outputs, raw)
        return await _release(request, p, analyst, params, ds, outputs, raw)

    async def _inline(p, params, ds, outputs, raw):
        doc = await run_in_threadpool(p.inline, params, ds, svc.settings)
        b = await run_in_threadpool(svc.ledger.budget, ds.name)
        doc["dataset_total_epsilon"] = None if b.total_epsilon is None else float(b.total_epsilon)
        doc["dataset_spent_epsilon"] = float(b.spent_epsilon)
        doc["dataset_left_epsilon"] = None if b.left_epsilon is None else float(b.left_epsilon)
        results = {"preview": doc}
        if raw:
            return _json(doc)
        return _json({k: v for k, v in results.items() if outputs is None or k in outputs})

    async def _budget_refusal(p, analyst, params, ds):
        """The 409 answer when the budget left cannot fit the release (early; the worker's reservation decides)."""
        from ..budget import exact_value

        b = await run_in_threadpool(svc.ledger.budget, ds.name)
        eps = exact_value(params["epsilon"])
        if b.left_epsilon is None or eps <= b.left_epsilon:
            return None
        LOG.info("refused (budget): analyst=%s dataset=%s process=%s epsilon=%g left=%s", analyst, ds.name, p.id,
                 params["epsilon"], float(b.left_epsilon))
        return _json(budget_problem(dataset=ds.name, requested=eps, total=b.total_epsilon, spent=b.spent_epsilon,
                                    left=b.left_epsilon), 409)

    async def _release(request, p, analyst, params, ds, outputs, raw):
        job_id = new_job_id()
        full = svc.manager.claim(job_id, analyst)
        if full is not None:
            status, detail = full
            raise ApiError(status, DPGEO + ("too-many-jobs" if status == 429 else "queue-full"),
                           "Too many jobs" if status == 429 else "Queue full", detail,
                           headers={"Retry-After": "10"})
        try:
            await run_in_threadpool(svc.jobs.create, job_id, analyst=analyst, process_id=p.id, dataset=ds.name,
                                    inputs=params, outputs=outputs)
        except BaseException:
            svc.manager.unclaim(job_id)
            raise
        s = svc.settings
        spec = {"job_id": job_id, "jobs": s.jobs, "ledger": s.ledger, "releases": s.releases, "process_id": p.id,
                "params": params, "analyst": analyst, "title": p.release_title(params, ds.title),
                "private": ds.private_releases, "dataset": _dataset_spec(ds)}
        task = svc.manager.submit(job_id, analyst, spec)
        b_url = svc.base(request)
        monitor = f"{b_url}/jobs/{job_id}"
        if "respond-async" in request.headers.get("prefer", "") and "async-execute" in p.job_control:
            job = await run_in_threadpool(svc.jobs.get, job_id)
            return _json(_status_document(job, b_url), 201,
                         headers={"Location": monitor, "Preference-Applied": "respond-async"})
        out = await asyncio.shield(task)
        headers = {"Link": f'<{monitor}>; rel="monitor"'}
        if not out["ok"]:
            return _json(out["error"], out["error"]["status"], headers)
        job = await run_in_threadpool(svc.jobs.get, job_id)
        return _results_response(job, b_url, headers, raw)

    def _results_response(job, b_url, headers=None, raw=False):
        rec = svc.releases.get(job["release_id"])
        if rec is None:
            raise ApiError(404, OGC + "no-such-job", "No such result", "this release is no longer published")
        outputs = job.get("outputs")
        results = {}
        if outputs is None or "release" in outputs:
            results["release"] = _release_summary(rec, b_url)
        if outputs is None or "layer" in outputs:
            feats, _ = svc.releases.features(rec["id"])
            results["layer"] = {"type": "FeatureCollection", "features": feats, "dpgeo": rec["metadata"]}
        if raw and len(results) == 1:
            key, value = next(iter(results.items()))
            return _json(value, 200, headers, GEOJSON if key == "layer" else JSON)
        return _json(results, 200, headers)

    # -- jobs --------------------------------------------------------------------------------------------------------

    def _own_job(request, job_id):
        analyst = svc.require(request)
        job = svc.jobs.get(job_id)
        if job is None or job["analyst"] != analyst:  # someone else's job is answered as a missing one
            raise ApiError(404, OGC + "no-such-job", "No such job", "no job with this id")
        return job

    @app.get("/jobs")
    async def jobs(request: Request, limit: int = 100, offset: int = 0):
        analyst = svc.require(request)
        if not (1 <= limit <= 1000 and 0 <= offset):
            raise ApiError.invalid("limit must be in [1, 1000] and offset >= 0")
        rows, n = await run_in_threadpool(svc.jobs.list, analyst, limit=limit, offset=offset)
        b = svc.base(request)
        return _json({"jobs": [_status_document(j, b) for j in rows], "numberMatched": n,
                      "links": [{"href": f"{b}/jobs", "rel": "self", "type": JSON, "title": "your jobs"}]})

    @app.get("/jobs/{job_id}")
    async def job_status(job_id: str, request: Request):
        job = await run_in_threadpool(_own_job, request, job_id)
        return _json(_status_document(job, svc.base(request)))

    @app.get("/jobs/{job_id}/results")
    async def job_results(job_id: str, request: Request):
        job = await run_in_threadpool(_own_job, request, job_id)
        if job["status"] in ("accepted", "running"):
            raise ApiError(404, OGC + "result-not-ready", "Result not ready", "the job has not finished yet")
        if job["status"] == "failed":
            err = job["error"] or problem(500, DPGEO + "release-failed", "Release failed")
            return _json(err, err.get("status", 500))
        return await run_in_threadpool(_results_response, job, svc.base(request))

    # -- features: the releases ------------------------------------------------------------------------------------

    def _release_record(request, cid):
        analyst = svc.caller(request)
        rec = svc.releases.get(cid) if RELEASE_ID.match(cid) else None
        if rec is None or not svc.visible(rec, analyst):  # a private release is answered as a missing one
            raise ApiError.not_found("collection")
        return rec

    @app.get("/collections")
    async def collections(request: Request):
        analyst = svc.caller(request)
        b = svc.base(request)

        def docs():
            out = []
            for rid in svc.releases.ids():
                rec = svc.releases.get(rid)
                if rec is not None and svc.visible(rec, analyst):
                    out.append(collection_document(rec, b))
            return out

        return _json({"collections": await run_in_threadpool(docs),
                      "links": [{"href": f"{b}/collections", "rel": "self", "type": JSON, "title": "the releases"}]})

    @app.get("/collections/{cid}")
    async def collection(cid: str, request: Request):
        rec = await run_in_threadpool(_release_record, request, cid)
        return _json(collection_document(rec, svc.base(request)))

    @app.get("/collections/{cid}/items")
    async def items(cid: str, request: Request):
        rec = await run_in_threadpool(_release_record, request, cid)
        try:
            query = parse_items_query(dict(request.query_params))
        except ParameterError as exc:
            raise ApiError.invalid(str(exc)) from None
        feats, bounds = await run_in_threadpool(svc.releases.features, cid)
        doc = await run_in_threadpool(items_document, rec, feats, bounds, query, svc.base(request), str(request.url))
        return _json(doc, media_type=GEOJSON, headers={"Content-Crs": f"<{CRS84}>"})

    @app.get("/collections/{cid}/items/{fid}")
    async def item(cid: str, fid: str, request: Request):
        rec = await run_in_threadpool(_release_record, request, cid)
        feats, _ = await run_in_threadpool(svc.releases.features, cid)
        for f in feats:
            if str(f["id"]) == fid:
                return _json(item_document(rec, f, svc.base(request)), media_type=GEOJSON,
                             headers={"Content-Crs": f"<{CRS84}>"})
        raise ApiError.not_found("feature")

    @app.get("/collections/{cid}/map")
    async def web_map(cid: str, request: Request):
        await run_in_threadpool(_release_record, request, cid)
        path = svc.releases.path(cid, "html")
        if path is None:
            raise ApiError.not_found("map for this collection")
        return FileResponse(path, media_type="text/html; charset=utf-8")

    @app.get("/collections/{cid}/files/{kind}")
    async def release_file(cid: str, kind: str, request: Request):
        rec = await run_in_threadpool(_release_record, request, cid)
        if kind not in ("gpkg", "geojson"):
            raise ApiError.not_found("file")
        path = svc.releases.path(cid, kind)
        if path is None:
            raise ApiError.not_found("file")
        media = "application/geopackage+sqlite3" if kind == "gpkg" else GEOJSON
        return FileResponse(path, media_type=media, filename=f"{_slug(rec.get('title') or cid)}.{kind}")

    return Guard(app, config.server.max_body_bytes)


# -- helpers ------------------------------------------------------------------------------------------------------

async def _json_body(request: Request) -> dict:
    raw = await request.body()
    try:
        body = json.loads(raw or b"{}")
    except (ValueError, UnicodeDecodeError):
        raise ApiError.invalid("the request body must be a JSON object: {\"inputs\": {...}}") from None
    if not isinstance(body, dict):
        raise ApiError.invalid("the request body must be a JSON object: {\"inputs\": {...}}")
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


def _check_epsilon_cap(epsilon, ds):
    from ..budget import exact_value, format_exact

    cap = ds.max_epsilon if ds.max_epsilon is not None else ds.total_epsilon
    if exact_value(epsilon) > cap:
        raise ApiError.invalid(f"input 'epsilon' must be <= {format_exact(cap)} for dataset {ds.name!r}")


def _dataset_spec(ds) -> dict:
    """What a worker needs to know about a dataset (plain values: it crosses a process boundary)."""
    study_area = ds.study_area
    return {"name": ds.name, "path": ds.path, "study_area": study_area, "crs": ds.crs, "read": ds.read_options(),
            "person": ds.person, "max_points_per_person": ds.max_points_per_person,
            "max_points_per_record": ds.max_points_per_record}


def _release_summary(rec, base):
    url = f"{base}/collections/{rec['id']}"
    links = [{"href": url, "rel": "collection", "type": JSON, "title": "OGC API - Features collection"},
             {"href": f"{url}/items", "rel": "items", "type": GEOJSON, "title": "the clusters"}]
    if "html" in rec.get("files", {}):
        links.append({"href": f"{url}/map", "rel": "alternate", "type": "text/html", "title": "web map"})
    return {"id": rec["id"], "title": rec.get("title"), "dataset": rec["dataset"], "date": rec["date"],
            "n_features": rec["n_features"], "links": links, "metadata": rec["metadata"]}


def _status_document(job, base):
    jid = job["job_id"]
    links = [{"href": f"{base}/jobs/{jid}", "rel": "self", "type": JSON, "title": "this job"}]
    if job["status"] in ("successful", "failed"):
        links.append({"href": f"{base}/jobs/{jid}/results", "rel": REL + "results", "type": JSON,
                      "title": "results"})
    if job["status"] == "successful" and job.get("release_id"):
        links.append({"href": f"{base}/collections/{job['release_id']}", "rel": "related", "type": JSON,
                      "title": "the published release"})
    doc = {"type": "process", "processID": job["process_id"], "jobID": jid, "status": job["status"],
           "progress": job["progress"], "created": job["created"], "links": links}
    for key in ("started", "finished"):
        if job.get(key):
            doc[key] = job[key]
    doc["updated"] = job.get("finished") or job.get("started") or job["created"]
    if job.get("message"):
        doc["message"] = job["message"]
    if job.get("release_id"):
        doc["release_id"] = job["release_id"]
    return doc


def _slug(text):
    out = "".join(c if c.isalnum() or c in "-_." else "_" for c in text)[:80].strip("._")
    return out or "release"
