"""OGC API – Processes: an analyst's jobs, their status and their results (someone else's job is a missing one)."""

from __future__ import annotations

import json

from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from ...errors import ParameterError
from ..features import GEOJSON, int_param
from ..problems import DPGEO, OGC, ApiError, problem
from ..service import JSON, REL, json_response, service

__all__ = ["release_summary", "results_response", "router", "status_document"]

router = APIRouter()


def _own_job(svc, request, job_id):
    analyst = svc.require(request)
    job = svc.jobs.get(job_id)
    if job is None or job["analyst"] != analyst:  # someone else's job is answered as a missing one
        raise ApiError(404, OGC + "no-such-job", "No such job", "no job with this id")
    return job


def _int_query(request, name, default, lo, hi):
    """An integer query parameter, checked by the Features API's own rule (:func:`~dpgeo.server.features.int_param`)."""
    text = request.query_params.get(name)
    if text is None:
        return default
    try:
        return int_param(text, name, lo, hi)
    except ParameterError as exc:
        raise ApiError.invalid(str(exc)) from None


@router.get("/jobs")
async def jobs(request: Request):
    svc = service(request)
    analyst = svc.require(request)
    limit = _int_query(request, "limit", 100, 1, 1000)
    offset = _int_query(request, "offset", 0, 0, 10**12)
    rows, n = await run_in_threadpool(svc.jobs.list, analyst, limit=limit, offset=offset)
    b = svc.base(request)
    return json_response({"jobs": [status_document(j, b) for j in rows], "numberMatched": n,
                          "links": [{"href": f"{b}/jobs", "rel": "self", "type": JSON, "title": "your jobs"}]})


@router.get("/jobs/{job_id}")
async def job_status(job_id: str, request: Request):
    svc = service(request)
    job = await run_in_threadpool(_own_job, svc, request, job_id)
    return json_response(status_document(job, svc.base(request)))


@router.get("/jobs/{job_id}/results")
async def job_results(job_id: str, request: Request):
    svc = service(request)
    job = await run_in_threadpool(_own_job, svc, request, job_id)
    if job["status"] in ("accepted", "running"):
        raise ApiError(404, OGC + "result-not-ready", "Result not ready", "the job has not finished yet")
    if job["status"] == "failed":
        err = job["error"] or problem(500, DPGEO + "release-failed", "Release failed")
        return json_response(err, err.get("status", 500))
    return await run_in_threadpool(results_response, svc, job, svc.base(request))


def results_response(svc, job, base, headers=None, raw=False):
    """The results of a successful job: the release's summary and its layer, as asked for."""
    gone = ApiError(404, OGC + "no-such-job", "No such result", "this release is no longer published")
    rec = svc.releases.get(job["release_id"])
    if rec is None:
        raise gone
    outputs = job.get("outputs")
    summary = release_summary(rec, base) if outputs is None or "release" in outputs else None
    if outputs is not None and "layer" not in outputs:
        return json_response(summary if raw else {"release": summary}, 200, headers)
    from .features import release_items

    try:
        path = release_items(svc, rec["id"])
    except ApiError as exc:
        if exc.status == 404:  # its features are gone: answered like a release no longer published
            raise gone from None
        raise
    return StreamingResponse(_layer_body(path, rec, summary, raw), 200, headers,
                             media_type=GEOJSON if raw else JSON)


def _layer_body(path, rec, summary, raw):
    """The results with the layer, streamed from the release's items file (never the whole layer in memory)."""
    from ..items import iter_items

    def dumps(v):
        return json.dumps(v, ensure_ascii=False, allow_nan=False, separators=(",", ":"))

    head = '{"type":"FeatureCollection","features":['
    if not raw:
        head = '{' + (f'"release":{dumps(summary)},' if summary is not None else "") + '"layer":' + head
    yield head.encode("utf-8")
    first, batch = True, []
    for doc in iter_items(path):
        batch.append(doc if first else "," + doc)
        first = False
        if len(batch) >= 256:
            yield "".join(batch).encode("utf-8")
            batch = []
    tail = "".join(batch) + '],"dpgeo":' + dumps(rec["metadata"]) + "}" + ("" if raw else "}")
    yield tail.encode("utf-8")


def release_summary(rec, base):
    url = f"{base}/collections/{rec['id']}"
    links = [{"href": url, "rel": "collection", "type": JSON, "title": "OGC API - Features collection"},
             {"href": f"{url}/items", "rel": "items", "type": GEOJSON, "title": "the clusters"}]
    if "html" in rec.get("files", {}):
        links.append({"href": f"{url}/map", "rel": "alternate", "type": "text/html", "title": "web map"})
    return {"id": rec["id"], "title": rec.get("title"), "dataset": rec["dataset"], "date": rec["date"],
            "n_features": rec["n_features"], "links": links, "metadata": rec["metadata"]}


def status_document(job, base):
    """A job's status (OGC statusInfo); a finished job also says what its privacy budget became (``charge``)."""
    jid = job["job_id"]
    links = [{"href": f"{base}/jobs/{jid}", "rel": "self", "type": JSON, "title": "this job"}]
    finished = job["status"] in ("successful", "failed")
    if finished:
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
    if job.get("release_id") and job["status"] == "successful":
        doc["release_id"] = job["release_id"]
    if finished:
        doc["charge"] = job.get("charge") or "none"
    return doc
