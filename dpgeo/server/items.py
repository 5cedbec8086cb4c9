"""A release's features, paged from a file: ``<id>.items.sqlite``, written beside its GeoJSON by the worker.

One row per feature, in the layer's order: its id, its bounds in lon/lat,
its period (a series' ``period_start``/``period_end`` as epoch seconds) and
its GeoJSON text exactly as the items endpoint serves it. The server answers
``/items`` and ``/items/{fid}`` with one query each and keeps no layer in
memory: a page costs its own features, whatever the size of the release.
A feature whose geometry is empty (a density band with no cell in it) is a
feature with a ``null`` geometry (RFC 7946 §3.2): it has no bounds, so a
``bbox`` never selects it.
"""

from __future__ import annotations

import json
import os
import sqlite3

__all__ = ["ITEMS_SUFFIX", "feature_id", "items_matching", "items_page", "iter_items", "one_item", "write_items"]

#: The file of a release's paged features, beside its GeoJSON.
ITEMS_SUFFIX = ".items.sqlite"
_SCHEMA = ("CREATE TABLE items (seq INTEGER PRIMARY KEY, id INTEGER NOT NULL, minx REAL, miny REAL, maxx REAL, "
           "maxy REAL, t0 INTEGER, t1 INTEGER, doc TEXT NOT NULL)")


def feature_id(i, props) -> int:
    """The id of the ``i``-th feature: its cluster id, or its number where a series repeats cluster ids."""
    return int(i + 1 if "period" in props else props.get("cluster_id", i + 1))


def write_items(path, features):
    """Write ``features`` (GeoJSON feature dicts, in CRS84) as a release's paged items file (atomically)."""
    import shapely

    from ..periods import parse_instant

    import datetime as _dt

    utc = _dt.timezone.utc
    import tempfile

    from ..io.atomic import TMP_PREFIX

    fd, tmp = tempfile.mkstemp(prefix=f"{TMP_PREFIX}{os.getpid()}-", suffix=".sqlite", dir=os.path.dirname(path))
    os.close(fd)
    conn = sqlite3.connect(tmp)
    try:
        conn.execute(_SCHEMA)
        rows = []
        for i, feat in enumerate(features):
            props = feat.get("properties") or {}
            geom = feat.get("geometry")
            bounds = (None,) * 4
            if geom:
                b = shapely.bounds(shapely.from_geojson(json.dumps(geom)))
                if all(v == v for v in b):  # (NaN: an empty geometry)
                    bounds = tuple(float(v) for v in b)
            t0 = parse_instant(props["period_start"], utc) if props.get("period_start") else None
            t1 = parse_instant(props["period_end"], utc) if props.get("period_end") else None
            fid = feature_id(i, props)
            doc = json.dumps({"type": "Feature", "id": fid, "geometry": geom or None, "properties": props},
                             ensure_ascii=False, separators=(",", ":"), allow_nan=False)
            rows.append((i, fid, *bounds, t0, t1, doc))
            if len(rows) >= 4096:
                conn.executemany("INSERT INTO items VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
                rows = []
        conn.executemany("INSERT INTO items VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
        conn.execute("CREATE INDEX items_id ON items (id)")
        conn.commit()
        conn.close()
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        conn.close()
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _connect(path):
    return sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True, check_same_thread=False)


def _where(bbox, interval):
    sql, args = [], []
    if bbox is not None:
        minx, miny, maxx, maxy = bbox
        sql.append("maxy >= ? AND miny <= ?")
        args += [miny, maxy]
        if minx <= maxx:
            sql.append("maxx >= ? AND minx <= ?")
            args += [minx, maxx]
        else:  # across the antimeridian
            sql.append("(maxx >= ? OR minx <= ?)")
            args += [minx, maxx]
    if interval is not None:
        lo, hi = interval
        if hi is not None:
            sql.append("(t0 IS NULL OR t0 <= ?)")
            args.append(hi)
        if lo is not None:
            sql.append("(t1 IS NULL OR t1 > ?)")
            args.append(lo)
    return (" WHERE " + " AND ".join(sql)) if sql else "", args


def _exact(doc, bbox, box, bounds) -> bool:
    """Whether a candidate whose bounds meet ``bbox`` meets it in fact (tested only when not inside it)."""
    minx, miny, maxx, maxy = bbox
    if box is None or (bounds[0] >= minx and bounds[2] <= maxx and bounds[1] >= miny and bounds[3] <= maxy):
        return True
    import shapely

    return bool(shapely.intersects(shapely.from_geojson(json.dumps(json.loads(doc)["geometry"])), box))


def items_matching(path, bbox=None, interval=None):
    """Iterate ``(seq, doc)`` of the features that meet ``bbox`` (lon/lat) and the time ``interval``, in order."""
    box = None
    if bbox is not None and bbox[0] <= bbox[2]:
        import shapely

        box = shapely.box(*bbox)
    where, args = _where(bbox, interval)
    conn = _connect(path)
    try:
        for seq, doc, *bounds in conn.execute(f"SELECT seq, doc, minx, miny, maxx, maxy FROM items{where} "
                                              "ORDER BY seq", args):
            if bbox is None or _exact(doc, bbox, box, bounds):
                yield seq, doc
    finally:
        conn.close()


def items_page(path, *, bbox=None, interval=None, limit, offset) -> tuple:
    """``(docs, matched)``: the GeoJSON texts of the page ``[offset, offset + limit)`` of the matching features,
    and how many match. Memory: the page."""
    if bbox is None:  # no exact test: the page and the count straight from SQLite
        where, args = _where(None, interval)
        conn = _connect(path)
        try:
            matched = conn.execute(f"SELECT count(*) FROM items{where}", args).fetchone()[0]
            docs = [r[0] for r in conn.execute(f"SELECT doc FROM items{where} ORDER BY seq LIMIT ? OFFSET ?",
                                               [*args, limit, offset])]
        finally:
            conn.close()
        return docs, matched
    docs, matched = [], 0
    for _, doc in items_matching(path, bbox, interval):
        if offset <= matched < offset + limit:
            docs.append(doc)
        matched += 1
    return docs, matched


def one_item(path, fid):
    """The GeoJSON text of feature ``fid`` (an integer), or None."""
    conn = _connect(path)
    try:
        row = conn.execute("SELECT doc FROM items WHERE id = ? ORDER BY seq LIMIT 1", (int(fid),)).fetchone()
    finally:
        conn.close()
    return None if row is None else row[0]


def iter_items(path):
    """Every feature's GeoJSON text, in order (for a response streamed to the client)."""
    conn = _connect(path)
    try:
        for (doc,) in conn.execute("SELECT doc FROM items ORDER BY seq"):
            yield doc
    finally:
        conn.close()
