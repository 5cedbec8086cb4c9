"""OGC API – Features (Part 1: Core, GeoJSON) documents for the releases: collections, items, one item.

Pure functions from a release record and its features to JSON documents;
the routes in :mod:`dpgeo.server.app` decide who may see which release.
Everything is in CRS84 (lon/lat, WGS 84), the GeoJSON of RFC 7946.
"""

from __future__ import annotations

import datetime as _dt
import math

from ..errors import ParameterError

__all__ = [
    "CRS84",
    "FEATURES_CONFORMANCE",
    "ITEM_TYPE",
    "collection_document",
    "int_param",
    "item_document",
    "items_document",
    "parse_items_query",
]

CRS84 = "http://www.opengis.net/def/crs/OGC/1.3/CRS84"
GEOJSON = "application/geo+json"
ITEM_TYPE = "feature"
FEATURES_CONFORMANCE = [
    "http://www.opengis.net/spec/ogcapi-features-1/1.0/conf/core",
    "http://www.opengis.net/spec/ogcapi-features-1/1.0/conf/geojson",
    "http://www.opengis.net/spec/ogcapi-features-1/1.0/conf/oas30",
]
#: Items per page: the default and the most a client may ask for.
DEFAULT_LIMIT = 100
MAX_LIMIT = 10000
#: Query parameters the items endpoint understands (anything else is refused, as the standard asks).
ITEMS_PARAMS = {"limit", "offset", "bbox", "bbox-crs", "crs", "datetime", "f"}
_UTC = _dt.timezone.utc


def _num(v):
    return None if v is None else float(v)


def describe_release(rec) -> str:
    """The collection's description: what was released, how private it is, what the fields mean."""
    md = rec.get("metadata", {})
    eps, delta = md.get("epsilon"), md.get("delta", 0)
    dp = md.get("differentially_private")
    series = md.get("series") if isinstance(md.get("series"), dict) else None
    head = (f"{md.get('mechanism', rec.get('process'))}: "
            + (f"differentially private, ε = {eps:g}, δ = {delta:g}" if dp else "NOT differentially private")
            + f". Neighbouring relation: {md.get('neighbouring_relation', 'not stated')}.")
    spent, total = md.get("dataset_spent_epsilon"), md.get("dataset_total_epsilon")
    budget = (f" After this release the dataset had spent ε = {spent:g} of its total {total:g}."
              if spent is not None and total is not None else "")
    what = ""
    if series is not None:
        what = (f" A map series: {len(md.get('periods', []))} periods by {series.get('period')} "
                f"({series.get('timezone')}), each feature in its period [period_start, period_end); "
                f"{series.get('accounting')}. Filter the items by time with datetime=.")
    return (f"{head} Dataset '{rec['dataset']}', released {rec['date']} (release {rec['id']}).{budget}{what} "
            "Each feature is a cluster: dp_count is its noisy point count and [dp_count_low, dp_count_high] its 95% "
            "interval; n_cells and area_m2 describe its polygon. The privacy metadata is in the member 'dpgeo'.")


def collection_document(rec, base: str) -> dict:
    """The ``/collections/{id}`` document of a release."""
    cid = rec["id"]
    url = f"{base}/collections/{cid}"
    files = rec.get("files", {})
    links = [
        {"href": url, "rel": "self", "type": "application/json", "title": "this collection"},
        {"href": f"{url}/items", "rel": "items", "type": GEOJSON, "title": "the clusters (GeoJSON)"},
    ]
    if "html" in files:
        links.append({"href": f"{url}/map", "rel": "alternate", "type": "text/html", "title": "web map"})
    if "gpkg" in files:
        links.append({"href": f"{url}/files/gpkg", "rel": "enclosure", "type": "application/geopackage+sqlite3",
                      "title": "the release as a GeoPackage"})
    if "geojson" in files:
        links.append({"href": f"{url}/files/geojson", "rel": "enclosure", "type": GEOJSON,
                      "title": "the release as one GeoJSON file"})
    md = rec.get("metadata", {})
    extent = {"spatial": {"bbox": [rec["bbox"]], "crs": CRS84}}
    if rec.get("interval"):  # a map series: its public time span; items filter on it with datetime=
        extent["temporal"] = {"interval": [rec["interval"]],
                              "trs": "http://www.opengis.net/def/uom/ISO-8601/0/Gregorian"}
        if rec.get("series_id") and rec["series_id"] != cid:
            links.append({"href": f"{base}/collections/{rec['series_id']}", "rel": "predecessor-version",
                          "type": "application/json", "title": "the series as first published"})
    return {
        "id": cid,
        "title": rec.get("title") or cid,
        "description": describe_release(rec),
        "keywords": ["differential privacy", md.get("method", ""), rec["dataset"]],
        "links": links,
        "extent": extent,
        "itemType": ITEM_TYPE,
        "crs": [CRS84],
        "storageCrs": CRS84,
        "dpgeo": md,
    }


def parse_items_query(query) -> dict:
    """``limit``, ``offset`` and ``bbox`` of an items request, checked (raises ParameterError)."""
    unknown = sorted(set(query) - ITEMS_PARAMS)
    if unknown:
        raise ParameterError(f"unknown query parameter {unknown[0][:40]!r}; items take limit, offset, bbox and "
                             "datetime")
    out = {"limit": DEFAULT_LIMIT, "offset": 0, "bbox": None, "datetime": None}
    if "datetime" in query:
        out["datetime"] = _interval(query["datetime"])
        out["datetime_text"] = query["datetime"]
    if "limit" in query:
        out["limit"] = int_param(query["limit"], "limit", 1, None)
        out["limit"] = min(out["limit"], MAX_LIMIT)  # the standard: a larger limit is served as the maximum
    if "offset" in query:
        out["offset"] = int_param(query["offset"], "offset", 0, 10**12)
    for key in ("bbox-crs", "crs"):
        if key in query and query[key] not in (CRS84, "CRS84", "OGC:CRS84"):
            raise ParameterError(f"{key} must be {CRS84} (this server serves CRS84 only)")
    if "f" in query and query["f"] not in ("json", "geojson"):
        raise ParameterError("f must be json or geojson")
    if "bbox" in query:
        parts = query["bbox"].split(",")
        try:
            nums = [float(p) for p in parts]
        except ValueError:
            nums = None
        if nums is None or len(nums) not in (4, 6) or not all(math.isfinite(v) for v in nums):
            raise ParameterError("bbox must be 4 numbers minlon,minlat,maxlon,maxlat (or 6 with heights)")
        if len(nums) == 6:
            nums = [nums[0], nums[1], nums[3], nums[4]]
        if nums[1] > nums[3]:
            raise ParameterError("bbox: the southern latitude must not be above the northern one")
        out["bbox"] = nums
    return out


def _interval(text):
    """``datetime=``: an instant or an interval ``a/b`` (``..`` or empty for open) as epoch seconds ``(lo, hi)``."""
    from ..periods import parse_instant

    def one(v):
        if v in ("", ".."):
            return None
        try:
            return parse_instant(v, _UTC, "datetime")
        except ParameterError:
            raise ParameterError("datetime must be an RFC 3339 date-time or an interval a/b (.. for an open end)")
    parts = str(text).split("/")
    if len(parts) == 1:
        t = one(parts[0])
        if t is None:
            raise ParameterError("datetime must be an RFC 3339 date-time or an interval a/b (.. for an open end)")
        return t, t
    if len(parts) != 2:
        raise ParameterError("datetime must be an RFC 3339 date-time or an interval a/b (.. for an open end)")
    return one(parts[0]), one(parts[1])


def int_param(text, name, lo, hi):
    """An integer query parameter in [lo, hi] (``hi`` None: no upper bound); the refusal names the parameter and its
    bounds, never echoes the value (raises ParameterError)."""
    try:
        v = int(text)
    except (TypeError, ValueError):
        raise ParameterError(f"{name} must be an integer") from None
    if v < lo or (hi is not None and v > hi):
        raise ParameterError(f"{name} must be at least {lo}" + ("" if hi is None else f" and at most {hi}"))
    return v


def items_document(rec, docs, matched, query, base) -> str:
    """A page of ``/collections/{id}/items`` as JSON text: ``docs`` are the page's features as GeoJSON text (read
    from the release's items file), ``matched`` how many features match the query."""
    import json as _json
    from urllib.parse import urlencode

    lim, off = query["limit"], query["offset"]
    url = f"{base}/collections/{rec['id']}/items"

    def link(rel, offset, title):
        params = {"limit": lim, "offset": offset}
        if query["bbox"] is not None:
            params["bbox"] = ",".join(f"{v:g}" for v in query["bbox"])
        if query.get("datetime") is not None:
            params["datetime"] = query["datetime_text"]
        return {"href": f"{url}?{urlencode(params)}", "rel": rel, "type": GEOJSON, "title": title}

    links = [link("self", off, "this page"),
             {"href": f"{base}/collections/{rec['id']}", "rel": "collection", "type": "application/json",
              "title": "the collection"}]
    if off + lim < matched:
        links.append(link("next", off + lim, "next page"))
    if off > 0:
        links.append(link("prev", max(0, off - lim), "previous page"))
    tail = _json.dumps({"numberMatched": matched, "numberReturned": len(docs), "links": links},
                       separators=(",", ":"))
    return '{"type":"FeatureCollection","features":[' + ",".join(docs) + "]," + tail[1:]


def item_document(rec, feature, base) -> dict:
    """``/collections/{id}/items/{fid}``."""
    url = f"{base}/collections/{rec['id']}"
    return dict(feature, links=[
        {"href": f"{url}/items/{feature['id']}", "rel": "self", "type": GEOJSON, "title": "this feature"},
        {"href": url, "rel": "collection", "type": "application/json", "title": "the collection"},
    ])
