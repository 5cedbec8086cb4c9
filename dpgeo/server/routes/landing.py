"""The landing page, the conformance classes and the API definition (OpenAPI)."""

from __future__ import annotations

from fastapi import APIRouter, Request

from ..features import FEATURES_CONFORMANCE
from ..service import JSON, REL, json_response, service

__all__ = ["CONFORMANCE", "router"]

PROCESSES_CONFORMANCE = [
    "http://www.opengis.net/spec/ogcapi-processes-1/1.0/conf/core",
    "http://www.opengis.net/spec/ogcapi-processes-1/1.0/conf/ogc-process-description",
    "http://www.opengis.net/spec/ogcapi-processes-1/1.0/conf/json",
    "http://www.opengis.net/spec/ogcapi-processes-1/1.0/conf/job-list",
]
CONFORMANCE = ["http://www.opengis.net/spec/ogcapi-common-1/1.0/conf/core"] + PROCESSES_CONFORMANCE + [
    c for c in FEATURES_CONFORMANCE if not c.endswith("oas30")]

router = APIRouter()
#: What the landing page of a service with ``[server] test_seed`` (tests only) says first.
TEST_SEED_NOTE = ("TEST SERVICE: every release is made with a fixed seed and is NOT differentially private "
                  "([server] test_seed). ")


@router.get("/")
async def landing(request: Request):
    svc = service(request)
    b = svc.base(request)
    return json_response({
        "title": svc.settings.title,
        "description": (TEST_SEED_NOTE if svc.settings.test_seed is not None else "") + svc.settings.description,
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


@router.get("/conformance")
async def conformance(request: Request):
    return json_response({"conformsTo": CONFORMANCE})


@router.get("/api", include_in_schema=False)
async def api_definition(request: Request):
    """The OpenAPI document (served here, behind the same authentication as every other route)."""
    return json_response(request.app.openapi())
