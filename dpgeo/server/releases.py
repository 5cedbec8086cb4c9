"""The releases folder: each successful release as files, and the index the Features API reads.

A release ``<id>`` (the ledger's release id: 128 random bits as hex) is stored as

* ``<id>.gpkg`` and ``<id>.geojson`` — the layer with its privacy metadata, as
  :meth:`dpgeo.result.ClusterLayer.to_file` writes them (the GeoJSON in
  EPSG:4326, RFC 7946);
* ``<id>.json`` — the record the service lists: title, dataset, process,
  date, feature count, extent and the privacy metadata. A worker writes it
  as ``<id>.pending.json`` (:func:`write_release`); the server publishes it
  by renaming it (:func:`publish_release`, atomic) once the job is recorded
  as successful, so a release appears as a collection only with its job
  completed, and without a restart. A release whose job failed is removed
  (:func:`discard_release`).

Nothing here reads the private input: a release holds DP output and public
parameters only. Ids are checked against their pattern before any path is
built, so no request can name another file.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
import tempfile
import threading
from collections import OrderedDict

import numpy as np

from ..io.atomic import TMP_PREFIX

__all__ = ["RELEASE_ID", "ReleaseStore", "TooLargeToPage", "discard_release", "file_headers", "pending_releases", "publish_release",
           "release_midnight", "unpublished_releases", "write_release"]

#: A release id: the ledger's 32 lowercase hex digits.
RELEASE_ID = re.compile(r"^[0-9a-f]{32}$")


def _atomic_json(path, obj):
    folder = os.path.dirname(path)
    fd, tmp = tempfile.mkstemp(prefix=f"{TMP_PREFIX}{os.getpid()}-", suffix=".json", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(obj, f, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        os.chmod(tmp, 0o644)  # as readable as the layer files beside it (mkstemp makes 0600)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


PENDING = ".pending.json"


def release_midnight(date) -> float:
    """The release's day (``YYYY-MM-DD``, as in its record) at 00:00 UTC, in seconds since the epoch.

    The time a release's files carry instead of the moment they were written: that moment, less the job's
    ``started``, would tell how long the (unpadded) run took, which depends on the data.

    >>> release_midnight("1970-01-02")
    86400.0
    """
    day = _dt.date.fromisoformat(str(date)[:10])
    return _dt.datetime(day.year, day.month, day.day, tzinfo=_dt.timezone.utc).timestamp()


def file_headers(rec, kind) -> dict:
    """``Last-Modified`` and ``ETag`` of a release's file: its release day at midnight UTC and its release id, never
    the file's own times (a release's files never change)."""
    from email.utils import formatdate

    return {"Last-Modified": formatdate(release_midnight(rec["date"]), usegmt=True),
            "ETag": f'"{rec["id"]}-{kind}"'}


def write_release(folder, release_id, result, *, title, dataset, process_id, private, date, html=True):
    """Write a release's files, then its pending record (:func:`publish_release` publishes it); returns the
    paths of the files.

    Runs in a worker, after the mechanism: post-processing of the DP output only.
    """
    if not RELEASE_ID.match(release_id):
        raise ValueError("not a release id")
    os.makedirs(folder, exist_ok=True)
    paths = {"gpkg": os.path.join(folder, f"{release_id}.gpkg"),
             "geojson": os.path.join(folder, f"{release_id}.geojson")}
    result.to_file(paths["gpkg"])
    result.to_file(paths["geojson"])
    with open(paths["geojson"], encoding="utf-8") as f:
        fc = json.load(f)
    from .items import ITEMS_SUFFIX, write_items

    items = os.path.join(folder, f"{release_id}{ITEMS_SUFFIX}")  # the pages /items reads (never the whole layer)
    write_items(items, fc.get("features", []))
    bbox = _bbox(fc.get("features", []))
    md = result.metadata
    if bbox is None:  # an empty release: its extent is the public study area
        bbox = _study_area_bbox(md.get("domain") or {})
    series = md.get("series") if isinstance(md.get("series"), dict) else None
    record = {"id": release_id, "title": title, "dataset": dataset, "process": process_id, "date": date,
              "private": bool(private), "n_features": len(fc.get("features", [])), "bbox": bbox,
              "files": {k: os.path.basename(v) for k, v in paths.items()}, "metadata": md}
    del fc
    if series is not None:  # a series: its time span, and the series it belongs to (an append is its next version)
        record["series_id"] = series.get("series_id")
        record["interval"] = [series.get("period_start"), md.get("period_end")]
    text = None
    if html:  # the map page is a convenience: a release stands without one
        from ..io.html import html_document

        try:
            text = html_document(result.layer, md, basemap=None, attribution=None, title=title)
        except Exception:
            import logging

            logging.getLogger("dpgeo.owner.worker").exception("release %s: no map page", release_id)
    if text is not None:
        paths["html"] = os.path.join(folder, f"{release_id}.html")
        fd, tmp = tempfile.mkstemp(prefix=f"{TMP_PREFIX}{os.getpid()}-", suffix=".html", dir=folder)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, paths["html"])
        record["files"]["html"] = os.path.basename(paths["html"])
    stamp = release_midnight(date)  # the release's day, as in the GeoPackage: the write time would time the run
    for path in paths.values():
        os.utime(path, (stamp, stamp))
    _atomic_json(os.path.join(folder, f"{release_id}{PENDING}"), record)
    return list(paths.values())


def publish_release(folder, release_id):
    """Publish a written release (rename its pending record, atomically); returns the paths of its files, or
    None when there is nothing to publish."""
    if not RELEASE_ID.match(release_id or ""):
        return None
    pending, final = os.path.join(folder, f"{release_id}{PENDING}"), os.path.join(folder, f"{release_id}.json")
    if os.path.exists(pending):
        os.replace(pending, final)
    try:
        with open(final, encoding="utf-8") as f:
            files = json.load(f).get("files", {})
    except (OSError, ValueError):
        return None
    return [os.path.join(folder, name) for name in files.values() if name == os.path.basename(name)]


def discard_release(folder, release_id):
    """Remove the files of a release that was written but will not be published (its job failed)."""
    if not RELEASE_ID.match(release_id or "") or os.path.exists(os.path.join(folder, f"{release_id}.json")):
        return
    from .items import ITEMS_SUFFIX

    for suffix in (PENDING, ".gpkg", ".geojson", ".html", ITEMS_SUFFIX):
        try:
            os.unlink(os.path.join(folder, f"{release_id}{suffix}"))
        except FileNotFoundError:
            pass


def pending_releases(folder) -> list:
    """Ids of the releases written but not yet published."""
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return []
    return sorted(n[:-len(PENDING)] for n in names if n.endswith(PENDING) and RELEASE_ID.match(n[:-len(PENDING)]))


def unpublished_releases(folder) -> list:
    """Ids of the releases that have files in ``folder`` but no published record (written, pending or half
    written by a job that did not succeed)."""
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return []
    ids, published = set(), set()
    for n in names:
        rid = n[:32]
        if len(n) > 32 and RELEASE_ID.match(rid) and n[32] == ".":
            (published if n[32:] == ".json" else ids).add(rid)
    return sorted(ids - published)


def _study_area_bbox(domain):
    """The public study area's bounds in lon/lat (the extent of an empty release)."""
    b = domain.get("bounds")
    if not b:
        return [-180.0, -90.0, 180.0, 90.0]
    crs = domain.get("crs") or "EPSG:4326"
    if crs not in ("EPSG:4326", "OGC:CRS84"):
        from pyproj import Transformer

        b = Transformer.from_crs(crs, "OGC:CRS84", always_xy=True).transform_bounds(*b)
    return [float(v) for v in b]


def _bbox(features):
    import shapely

    if not features:
        return None
    geoms = shapely.from_geojson([json.dumps(f["geometry"]) for f in features if f.get("geometry")])
    geoms = geoms[~shapely.is_empty(geoms)]
    if len(geoms) == 0:
        return None
    b = shapely.total_bounds(geoms)
    return [float(v) for v in b] if np.all(np.isfinite(b)) else None


class ReleaseStore:
    """Reads the releases folder for the Features API: records cached (bounded in bytes), features paged from
    each release's items file (:mod:`dpgeo.server.items`), never held in memory.

    Parameters
    ----------
    folder : str
        The ``releases`` folder of the configuration.
    cache_bytes : int
        Bytes of release records kept in memory (their JSON size); the least recently used go first.
    """

    def __init__(self, folder, cache_bytes=64 * 2**20):
        self.folder = folder
        self._records = OrderedDict()  # id -> (mtime_ns, record, size)
        self._bytes = 0
        self.cache_bytes = int(cache_bytes)
        self._lock = threading.Lock()

    @property
    def cached_bytes(self) -> int:
        """Bytes of records held now (at most ``cache_bytes``)."""
        return self._bytes

    def path(self, release_id, kind):
        """The file of a release (``kind`` from its record's files); None for a bad id."""
        if not RELEASE_ID.match(release_id or ""):
            return None
        rec = self.get(release_id)
        if rec is None or kind not in rec.get("files", {}):
            return None
        name = rec["files"][kind]
        if name != os.path.basename(name) or not name.startswith(release_id):
            return None
        return os.path.join(self.folder, name)

    def ids(self):
        """Ids of every published release, newest first."""
        try:
            names = os.listdir(self.folder)
        except FileNotFoundError:
            return []
        entries = []
        for n in names:
            stem, ext = os.path.splitext(n)
            if ext == ".json" and RELEASE_ID.match(stem):
                try:
                    entries.append((os.stat(os.path.join(self.folder, n)).st_mtime_ns, stem))
                except FileNotFoundError:
                    continue
        return [s for _, s in sorted(entries, reverse=True)]

    def get(self, release_id):
        """A release's record, or None (bad id, no such release, unreadable record)."""
        if not RELEASE_ID.match(release_id or ""):
            return None
        p = os.path.join(self.folder, f"{release_id}.json")
        try:
            st = os.stat(p)
        except FileNotFoundError:
            return None
        with self._lock:
            hit = self._records.get(release_id)
            if hit and hit[0] == st.st_mtime_ns:
                self._records.move_to_end(release_id)
                return hit[1]
        try:
            with open(p, encoding="utf-8") as f:
                rec = json.load(f)
        except (OSError, ValueError):
            return None
        if not isinstance(rec, dict) or rec.get("id") != release_id:
            return None
        with self._lock:
            old = self._records.pop(release_id, None)
            if old is not None:
                self._bytes -= old[2]
            if st.st_size <= self.cache_bytes:
                self._records[release_id] = (st.st_mtime_ns, rec, st.st_size)
                self._bytes += st.st_size
            while self._bytes > self.cache_bytes and self._records:
                self._bytes -= self._records.popitem(last=False)[1][2]
        return rec

    def items(self, release_id):
        """The path of a release's items file (:mod:`dpgeo.server.items`); None when the release or its GeoJSON
        is missing (callers answer 404).

        A release published before items files existed gets one, made from its GeoJSON once, if that file is
        small enough to read (``cache_bytes``); otherwise :class:`TooLargeToPage` is raised.
        """
        from .items import ITEMS_SUFFIX, write_items

        rec = self.get(release_id)
        if rec is None:
            return None
        p = os.path.join(self.folder, f"{release_id}{ITEMS_SUFFIX}")  # (the server's index: not a download)
        if os.path.exists(p):
            return p
        src = self.path(release_id, "geojson")
        if src is None or not os.path.exists(src):
            return None
        if os.path.getsize(src) > self.cache_bytes:
            raise TooLargeToPage(release_id)
        with open(src, encoding="utf-8") as f:
            features = json.load(f).get("features", [])
        write_items(p, features)
        return p


class TooLargeToPage(Exception):
    """A release without an items file whose GeoJSON is too large to read in the server."""
