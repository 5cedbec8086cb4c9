"""A release written to PostGIS: one table with its metadata, where QGIS finds it.

The target is a connection with the table in its query:
``postgresql://USER@HOST/city?table=stops_clusters_2026_11`` (``SCHEMA.TABLE``
accepted; the password from libpq's own places, never in the URL). The release
becomes the table (``fid`` key, ``geom`` column with its type and SRID, the
layer's attributes) and its metadata is stored twice:

* the table's comment (``COMMENT ON TABLE``), which QGIS shows with the layer:
  a one-line summary, then ``dpgeo metadata (JSON):`` and the metadata;
* a row of the side table ``dpgeo_metadata`` in the same schema (``table_name``,
  ``metadata`` as ``jsonb``), for SQL and for :func:`read_postgis_metadata`.

Everything is written in one transaction: a failure leaves nothing, and other
sessions see the whole table or none. A table that exists already is refused
unless ``replace=True`` (``--replace``), which drops it in the same transaction.
Messages name the table, never the connection.
"""

from __future__ import annotations

import json

import numpy as np

from ..errors import OutputError
from ..postgres import Connection, is_postgres, quote_ident, split_name

__all__ = ["write_postgis", "check_postgis_output", "read_postgis_metadata", "postgis_label", "METADATA_TABLE"]

#: The side table holding the metadata of every release written to a schema.
METADATA_TABLE = "dpgeo_metadata"
_MARK = "dpgeo metadata (JSON):\n"


def _target(target):
    from ..errors import DpgeoError

    try:
        conn = Connection.parse(target)
    except DpgeoError as exc:
        raise OutputError(f"PostGIS output: {exc}") from None
    table = conn.query.get("table")
    if not table:
        raise OutputError("a PostGIS output names its table: postgresql://HOST/DATABASE?table=NAME "
                          "(or ?table=SCHEMA.NAME)")
    try:
        schema, name = split_name(table)
    except DpgeoError as exc:
        raise OutputError(str(exc)) from None
    return conn, schema, name


def postgis_label(target) -> str:
    """How messages and the ledger name a PostGIS output: ``PostGIS table 'NAME'`` (no connection)."""
    table = Connection.parse(target).query.get("table") if is_postgres(target) else None
    return f"PostGIS table {table!r}"


def _connect(conn):
    from ..errors import InputError

    try:
        return conn.connect(what="the PostGIS output database")
    except InputError as exc:
        raise OutputError(str(exc)) from None


def _qualified(schema, name):
    return (quote_ident(schema) + "." if schema else "") + quote_ident(name)


def _exists(pg, schema, name) -> bool:
    return pg.execute("SELECT to_regclass(%s) IS NOT NULL", (_qualified(schema, name),)).fetchone()[0]


def check_postgis_output(target, *, replace=False) -> None:
    """Before any data is read: the target is valid, the database answers, PostGIS is there, and the table is
    new (or ``replace``)."""
    conn, schema, name = _target(target)
    with _connect(conn) as pg:
        if not pg.execute("SELECT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'postgis')").fetchone()[0]:
            raise OutputError("the PostGIS output database has no PostGIS: CREATE EXTENSION postgis (as its owner)")
        if _exists(pg, schema, name) and not replace:
            raise OutputError(f"PostGIS table {name!r} exists already: choose another table name, or replace it "
                              "with --replace (replace=True)")


def _column_type(series) -> str:
    kind = series.dtype.kind
    if kind == "b":
        return "boolean"
    if kind in "iu":
        return "bigint"
    if kind == "f":
        return "double precision"
    return "text"


def _geometry_type(geoms) -> str:
    import shapely

    types = set(shapely.get_type_id(geoms[~shapely.is_missing(geoms)]).tolist())
    names = {3: "Polygon", 6: "MultiPolygon", 0: "Point", 1: "LineString", 5: "MultiLineString", 4: "MultiPoint"}
    if types and types <= {3, 6}:
        return "MultiPolygon"
    if len(types) == 1 and next(iter(types)) in names:
        return names[next(iter(types))]
    return "Geometry"


def _copy_rows(pg, qualified, gdf, srid, gtype):
    import shapely

    geoms = np.asarray(gdf.geometry.values)
    if gtype == "MultiPolygon":
        polys = shapely.get_type_id(geoms) == 3
        geoms = geoms.copy()
        geoms[polys] = shapely.multipolygons(geoms[polys, None]) if polys.any() else geoms[polys]
    wkb = shapely.to_wkb(shapely.set_srid(geoms, srid), hex=True, include_srid=True)
    cols = [c for c in gdf.columns if c != gdf.geometry.name]
    values = [gdf[c].to_numpy() for c in cols]
    names = ", ".join(["geom"] + [quote_ident(c) for c in cols])
    with pg.cursor().copy(f"COPY {qualified} ({names}) FROM STDIN") as copy:
        for i in range(len(gdf)):
            row = [wkb[i]]
            for v in values:
                x = v[i]
                if x is None or (isinstance(x, float) and x != x):
                    row.append(None)
                elif isinstance(x, (np.bool_, bool)):
                    row.append("t" if x else "f")
                else:
                    row.append(str(x.item() if hasattr(x, "item") else x))
            copy.write_row(row)


def write_postgis(gdf, target, metadata: dict, *, crs=None, replace=False, levels=None) -> str:
    """Write a release to a PostGIS table with its metadata, in one transaction.

    Parameters
    ----------
    gdf : geopandas.GeoDataFrame
        The release's layer.
    target : str
        ``postgresql://USER@HOST/DATABASE?table=[SCHEMA.]NAME`` (no password: libpq finds it).
    metadata : dict
        The release's metadata (JSON-serialisable).
    crs : optional
        The table's CRS (default: the layer's).
    replace : bool
        Replace a table that exists (default: refuse).
    levels : geopandas.GeoDataFrame, optional
        A second layer of the release (the tree of density levels): the table ``NAME_levels``.

    Returns
    -------
    str
        ``PostGIS table 'NAME'`` (what the ledger records: never the connection).
    """
    conn, schema, name = _target(target)
    out = gdf if crs is None else gdf.to_crs(crs)
    srid = out.crs.to_epsg() if out.crs is not None else None
    if not srid:
        raise OutputError("a PostGIS output needs a CRS with an EPSG code (give --out-crs EPSG:NNNN)")
    meta_json = json.dumps(metadata, separators=(",", ":"), allow_nan=False)
    summary = (f"dpgeo {metadata.get('mechanism', '')} layer; differentially_private="
               f"{str(metadata.get('differentially_private')).lower()}; epsilon={metadata.get('epsilon')}")
    psycopg = __import__("psycopg")
    with _connect(conn) as pg:
        try:
            with pg.transaction():
                tables = [(name, out, summary + "\n\n" + _MARK + meta_json)]
                if levels is not None:
                    lv = levels if crs is None else levels.to_crs(crs)
                    tables.append((f"{name}_levels", lv, f"dpgeo density levels of release "
                                                         f"{metadata.get('release_id')} (table {name})"))
                for tname, layer, comment in tables:
                    q = _qualified(schema, tname)
                    if _exists(pg, schema, tname):
                        if not replace:
                            raise OutputError(f"PostGIS table {tname!r} exists already: choose another table name, "
                                              "or replace it with --replace (replace=True)")
                        pg.execute(f"DROP TABLE {q}")
                    gtype = _geometry_type(np.asarray(layer.geometry.values))
                    cols = "".join(f", {quote_ident(c)} {_column_type(layer[c])}" for c in layer.columns
                                   if c != layer.geometry.name)
                    pg.execute(f"CREATE TABLE {q} (fid bigserial PRIMARY KEY, geom geometry({gtype}, {int(srid)}){cols})")
                    _copy_rows(pg, q, layer, int(srid), gtype)
                    pg.execute(f"CREATE INDEX ON {q} USING gist (geom)")
                    pg.execute(f"COMMENT ON TABLE {q} IS " + _literal(pg, comment))
                mt = _qualified(schema, METADATA_TABLE)
                pg.execute(f"CREATE TABLE IF NOT EXISTS {mt} (table_name text PRIMARY KEY, release_id text, "
                           "differentially_private boolean, epsilon double precision, written_date date, "
                           "metadata jsonb NOT NULL)")
                pg.execute(f"COMMENT ON TABLE {mt} IS 'dpgeo: the privacy metadata of each release table in this "
                           "schema (one row per table)'")
                pg.execute(f"DELETE FROM {mt} WHERE table_name = %s", (name,))
                pg.execute(f"INSERT INTO {mt} VALUES (%s, %s, %s, %s, %s, %s::jsonb)",
                           (name, metadata.get("release_id"), bool(metadata.get("differentially_private")),
                            metadata.get("epsilon"), str(metadata.get("created_utc") or "")[:10] or None, meta_json))
        except psycopg.Error as exc:
            diag = getattr(exc, "diag", None)
            why = getattr(diag, "message_primary", None) or "the database refused the write"
            raise OutputError(f"cannot write PostGIS table {name!r}: {why} (nothing was written)") from None
    return postgis_label(target)


def _literal(pg, text):
    from psycopg import sql

    return sql.Literal(text).as_string(pg)


def read_postgis_metadata(target) -> dict:
    """The metadata of a release written to PostGIS (from ``dpgeo_metadata``, else the table's comment)."""
    conn, schema, name = _target(target)
    with _connect(conn) as pg:
        mt = _qualified(schema, METADATA_TABLE)
        if pg.execute("SELECT to_regclass(%s) IS NOT NULL", (mt,)).fetchone()[0]:
            row = pg.execute(f"SELECT metadata FROM {mt} WHERE table_name = %s", (name,)).fetchone()
            if row is not None:
                return row[0] if isinstance(row[0], dict) else json.loads(row[0])
        if not _exists(pg, schema, name):
            raise OutputError(f"PostGIS table {name!r} does not exist")
        row = pg.execute("SELECT obj_description(to_regclass(%s), 'pg_class')", (_qualified(schema, name),)).fetchone()
    text = row[0] or ""
    if _MARK not in text:
        raise OutputError(f"PostGIS table {name!r} holds no dpgeo metadata")
    return json.loads(text.split(_MARK, 1)[1])
