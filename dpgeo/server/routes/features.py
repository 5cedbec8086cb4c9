"""OGC API – Features: the published releases as collections, their items, map page and files.

A private release (its dataset's ``private_releases``) is seen only by the
analysts granted its dataset; for anyone else it is answered exactly like a
release that does not exist.
"""

from __future__ import annotations

import json

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, Response
from starlette.concurrency import run_in_threadpool

from ...errors import ParameterError
from ..features import (
    CRS84,
    GEOJSON,
    collection_document,
    item_document,
    items_document,
    parse_items_query,
)
from ..items import items_page, one_item
from ..problems import DPGEO, ApiError
from ..releases import RELEASE_ID, file_headers
from ..service import JSON, json_response, service

__all__ = ["release_items", "router"]

router = APIRouter()


def _release_record(svc, request, cid):
    rec = svc.releases.get(cid) if RELEASE_ID.match(cid) else None
    if rec is None or not svc.visible(rec, svc.caller(request)):  # a private release is answered as a missing one
        raise ApiError.not_found("collection")
    return rec


def release_items(svc, cid):
    """A release's items file; a release whose features are gone is answered as a missing one."""
    from ..releases import TooLargeToPage

    try:
        found = svc.releases.items(cid)
    except TooLargeToPage:
        raise ApiError(503, DPGEO + "too-large-to-page", "Release too large to page",
                       "this release was published before its features could be paged; download its files "
                       "(links of the collection) instead") from None
    if found is None:
        raise ApiError.not_found("collection")
    return found


@router.get("/collections")
async def collections(request: Request):
    svc = service(request)
    analyst = svc.caller(request)
    b = svc.base(request)

    def docs():
        out = []
        for rid in svc.releases.ids():
            rec = svc.releases.get(rid)
            if rec is not None and svc.visible(rec, analyst):
                out.append(collection_document(rec, b))
        return out

    return json_response({"collections": await run_in_threadpool(docs),
                          "links": [{"href": f"{b}/collections", "rel": "self", "type": JSON,
                                     "title": "the releases"}]})


@router.get("/collections/{cid}")
async def collection(cid: str, request: Request):
    svc = service(request)
    rec = await run_in_threadpool(_release_record, svc, request, cid)
    return json_response(collection_document(rec, svc.base(request)))


@router.get("/collections/{cid}/items")
async def items(cid: str, request: Request):
    svc = service(request)
    rec = await run_in_threadpool(_release_record, svc, request, cid)
    try:
        query = parse_items_query(dict(request.query_params))
    except ParameterError as exc:
        raise ApiError.invalid(str(exc)) from None
    path = await run_in_threadpool(release_items, svc, cid)
    docs, matched = await run_in_threadpool(items_page, path, bbox=query["bbox"], interval=query.get("datetime"),
                                            limit=query["limit"], offset=query["offset"])
    text = items_document(rec, docs, matched, query, svc.base(request))
    return Response(text.encode("utf-8"), media_type=GEOJSON, headers={"Content-Crs": f"<{CRS84}>"})


@router.get("/collections/{cid}/items/{fid}")
async def item(cid: str, fid: str, request: Request):
    svc = service(request)
    rec = await run_in_threadpool(_release_record, svc, request, cid)
    path = await run_in_threadpool(release_items, svc, cid)
    doc = None
    if fid.isdigit() and len(fid) < 19 and str(int(fid)) == fid:
        doc = await run_in_threadpool(one_item, path, int(fid))
    if doc is None:
        raise ApiError.not_found("feature")
    return json_response(item_document(rec, json.loads(doc), svc.base(request)), media_type=GEOJSON,
                         headers={"Content-Crs": f"<{CRS84}>"})


@router.get("/collections/{cid}/map")
async def web_map(cid: str, request: Request):
    svc = service(request)
    rec = await run_in_threadpool(_release_record, svc, request, cid)
    path = svc.releases.path(cid, "html")
    if path is None:
        raise ApiError.not_found("map for this collection")
    return FileResponse(path, media_type="text/html; charset=utf-8", headers=file_headers(rec, "html"))


@router.get("/collections/{cid}/files/{kind}")
async def release_file(cid: str, kind: str, request: Request):
    svc = service(request)
    rec = await run_in_threadpool(_release_record, svc, request, cid)
    if kind not in ("gpkg", "geojson"):
        raise ApiError.not_found("file")
    path = svc.releases.path(cid, kind)
    if path is None:
        raise ApiError.not_found("file")
    media = "application/geopackage+sqlite3" if kind == "gpkg" else GEOJSON
    return FileResponse(path, media_type=media, filename=f"{_slug(rec.get('title') or cid)}.{kind}",
                        headers=file_headers(rec, kind))


def _slug(text):
    out = "".join(c if c.isalnum() or c in "-_." else "_" for c in text)[:80].strip("._")
    return out or "release"
