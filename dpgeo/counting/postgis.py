"""Points in a PostGIS table or query, streamed in batches (binary COPY through psycopg 3).

:func:`postgis` describes the input (a connection without a password, and a
table or a query); the counting step opens it as a :class:`PostgisSource`.
The geometry column, its SRID and the type of the time column come from the
catalogue (``geometry_columns``, the result's column types), never from a
record.

The server does the per-record work that can fail, so that no record can
make a run fail: each row comes back as fixed-width binary fields — ``x``,
``y`` (NaN for a null, empty or non-point geometry), a flags word that says
why a record is unusable (the geometry's type, a missing person or time), a
64-bit hash of the person identifier, and the time as a number or as its
first 48 bytes of text. The stream is cut into batches of whole rows and
decoded with numpy (no Python object per record); one bad record is dropped
and counted by reason like in every other reader.

Person identifiers are compared through their 64-bit hash
(``hashtextextended``): two people whose identifiers collide count as one,
whose points are capped together — each person still contributes at most the
cap, so the privacy guarantee holds (and a collision is about one in 10⁸ for a
million people).

Examples
--------
>>> src = postgis("postgresql://analyst@db.city.example/city", table="stops")
>>> src
PostgisInput(table='stops')
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from ..errors import InputError
from ..postgres import Connection, quote_ident, split_name
from .decode import _TYPE_NAMES, finish_batch
from .sources import DEFAULT_BATCH_ROWS, PointSource

__all__ = ["postgis", "PostgisInput", "PostgisSource", "is_database_input", "DATABASE_DATASET"]

#: The ledger key of database inputs run without a dataset name (they all share its budget: conservative).
DATABASE_DATASET = "unnamed database data"


def is_database_input(points) -> bool:
    """Whether ``points`` is a PostGIS input (:func:`postgis`, or a ``postgresql://`` connection string)."""
    from ..postgres import is_postgres

    return isinstance(points, PostgisInput) or is_postgres(points)

#: Bytes of a text time sent to dpgeo (longer text is cut; no valid time is that long).
TIME_TEXT_BYTES = 48
_GEOM_TYPES = ("geometry", "geography")
_TIME_KINDS = {"timestamptz": "tstz", "timestamp": "ts", "date": "date", "int2": "num", "int4": "num",
               "int8": "num", "float4": "num", "float8": "num", "numeric": "num", "text": "text",
               "varchar": "text", "bpchar": "text"}


@dataclass(frozen=True)
class PostgisInput:
    """A PostGIS table or query to read when the run gets to its counting step (like a file's path).

    Make one with :func:`postgis`. Its ``repr`` and :attr:`label` name the
    table (or "a PostGIS query"), never the connection.
    """

    connection: Connection = field(repr=False)
    table: str | None = None
    sql: str | None = field(default=None, repr=False)
    geometry: str | None = field(default=None, repr=False)
    input_crs: object = field(default=None, repr=False)
    person: str | None = field(default=None, repr=False)

    @property
    def label(self) -> str:
        return f"PostGIS table {self.table!r}" if self.table else "a PostGIS query"

    def open(self, *, input_crs=None, person=None, batch_rows=DEFAULT_BATCH_ROWS, time=None) -> "PostgisSource":
        """The :class:`PostgisSource` (reads the catalogue and the columns' types; no record)."""
        return PostgisSource(self, input_crs=self.input_crs if input_crs is None else input_crs,
                             person=self.person if person is None else person, batch_rows=batch_rows, time=time)


def postgis(conninfo, *, table=None, sql=None, geometry=None, input_crs=None, person=None) -> PostgisInput:
    """A PostGIS table or query as the points of a run: pass it wherever a file path is accepted.

    Parameters
    ----------
    conninfo : str
        libpq connection: ``postgresql://USER@HOST:PORT/DATABASE``, ``key=value`` pairs or ``service=NAME``,
        without a password (libpq reads it from ``~/.pgpass``, ``PGPASSWORD`` or the service file). A URL may
        name the table: ``postgresql://HOST/city?table=stops``.
    table : str, optional
        ``TABLE`` or ``SCHEMA.TABLE`` (a view works too).
    sql : str, optional
        Instead of a table: a ``SELECT`` whose result has one geometry (or geography) column and the columns
        the run reads (person, time), e.g. ``"SELECT geom, reported_at FROM stops WHERE kind = 'traffic'"``.
    geometry : str, optional
        The geometry column when there are several (default: the only one).
    input_crs : optional
        CRS of a geometry column without an SRID (required then).
    person : str, optional
        The person column.

    Returns
    -------
    PostgisInput
    """
    conn = Connection.parse(conninfo)
    table = table if table is not None else conn.query.get("table")
    sql = sql if sql is not None else conn.query.get("sql")
    geometry = geometry if geometry is not None else conn.query.get("geometry")
    if (table is None) == (sql is None):
        raise InputError("a PostGIS input needs exactly one of table= (a table or view) and sql= (a SELECT query)")
    if sql is not None and not str(sql).strip():
        raise InputError("the PostGIS query is empty")
    if table is not None:
        split_name(table)
    return PostgisInput(conn, table=table, sql=sql, geometry=geometry, input_crs=input_crs, person=person)


class PostgisSource(PointSource):
    """A PostGIS table or query read by binary COPY in batches of ``batch_rows`` records."""

    def __init__(self, spec: PostgisInput, *, input_crs=None, person=None, batch_rows=DEFAULT_BATCH_ROWS,
                 time=None):
        self.spec = spec
        self.label = spec.label
        self.person = person
        self.time = time
        self.batch_rows = int(batch_rows)
        self._input_crs = input_crs
        self._open()

    # -- structure (catalogue and result types; no record is read) ---------------------------------------

    def _relation(self):
        if self.spec.table is not None:
            schema, table = split_name(self.spec.table)
            return (quote_ident(schema) + "." if schema else "") + quote_ident(table)
        return "(" + self.spec.sql.strip().rstrip(";") + ") AS dpgeo_q"

    def _open(self):
        from .decode import resolve_crs

        with self.spec.connection.connect() as conn:
            cols = self._columns(conn)
            names = [c[0] for c in cols]
            types = dict((c[0], c[1]) for c in cols)
            geoms = [c for c in cols if c[1] in _GEOM_TYPES]
            if self.spec.geometry is not None:
                geoms = [c for c in geoms if c[0] == self.spec.geometry]
                if not geoms:
                    raise InputError(f"{self.label} has no geometry column {self.spec.geometry!r}")
            if not geoms:
                raise InputError(f"{self.label} has no geometry or geography column")
            if len(geoms) > 1:
                raise InputError(f"{self.label} has several geometry columns ({', '.join(c[0] for c in geoms)}): "
                                 "choose one with geometry= (--geometry)")
            gname, gtype, fmod = geoms[0]
            srid, declared = self._srid(conn, gname, gtype, fmod)
        if declared and re.sub(r"(ZM|Z|M)$", "", declared.upper().strip()) not in ("POINT", "GEOMETRY"):
            raise InputError(f"{self.label}: the geometry column {gname!r} is declared as {declared}, not points; "
                             "dpgeo needs point geometries")
        crs = f"EPSG:{srid}" if srid else None
        self.crs = resolve_crs(crs, self._input_crs, self.label)
        for what, col in (("person", self.person), ("time", None if self.time is None else self.time.column)):
            if col is not None and col not in names:
                raise InputError(f"{what} column {col!r} is not in {self.label} (columns: {', '.join(names)})")
        tkind = None
        if self.time is not None:
            tkind = _TIME_KINDS.get(types[self.time.column])
            if tkind is None:
                raise InputError(f"time column {self.time.column!r} of {self.label} has type "
                                 f"{types[self.time.column]}; it must hold times (timestamp, date, epoch "
                                 "seconds or text)")
        self._gcol, self._gtype, self._tkind = gname, gtype, tkind

    def _columns(self, conn):
        """``(name, type name, type modifier)`` of each column of the table or query (from a result with no row)."""
        from ..errors import InputError as _IE

        psycopg = __import__("psycopg")
        try:
            cur = conn.execute(f"SELECT * FROM {self._relation()} LIMIT 0")
        except psycopg.Error as exc:
            raise _IE(f"cannot read {self.label}: {_sql_problem(exc)}") from None
        res = cur.pgresult
        oids = [res.ftype(i) for i in range(res.nfields)]
        names = dict(conn.execute("SELECT oid, typname FROM pg_type WHERE oid = ANY(%s)", (oids,)).fetchall())
        return [(res.fname(i).decode(), names.get(oids[i], "?"), res.fmod(i)) for i in range(res.nfields)]

    def _srid(self, conn, gname, gtype, fmod):
        """The column's SRID and declared type from the catalogue (a table) or the column's type modifier."""
        if self.spec.table is not None:
            schema, table = split_name(self.spec.table)
            view = "geometry_columns" if gtype == "geometry" else "geography_columns"
            gcol = "f_geometry_column" if gtype == "geometry" else "f_geography_column"
            row = conn.execute(
                f"SELECT srid, type FROM {view} WHERE f_table_name = %s AND {gcol} = %s AND "
                "(f_table_schema = %s OR (%s::text IS NULL AND f_table_schema = ANY(current_schemas(false))))",
                (table, gname, schema, schema)).fetchone()
            if row is not None:
                srid = int(row[0] or 0)
                return (srid or (4326 if gtype == "geography" else 0)), row[1]
        if fmod is not None and fmod >= 0:
            row = conn.execute("SELECT postgis_typmod_srid(%s), postgis_typmod_type(%s)", (fmod, fmod)).fetchone()
            return int(row[0] or 0) or (4326 if gtype == "geography" else 0), row[1]
        return (4326 if gtype == "geography" else 0), None

    # -- records -------------------------------------------------------------------------------------------

    def _record_sql(self):
        """SQL of one record as fixed-width bytes that no value can make fail (see :data:`_RECORD`).

        The geometry is its WKB cut or padded to a 2-D point's 21 bytes: the byte order and type say whether
        it is a point (its x, y follow), another type, or null (type 0).
        """
        g = quote_ident(self._gcol)
        geom = f"{g}::geometry" if self._gtype == "geography" else g
        parts = [f"substring(COALESCE(ST_AsBinary({geom}), '\\x00'::bytea) || '\\x{'00' * 21}'::bytea FROM 1 FOR 21)"]
        if self.person is not None:
            p = f"{quote_ident(self.person)}::text"
            parts.append(f"int8send(COALESCE(hashtextextended({p}, 0), 0))")
            parts.append(f"CASE WHEN {p} IS NULL OR {p} = 'NaN' THEN '\\x01'::bytea ELSE '\\x00'::bytea END")
        if self.time is not None:
            t = quote_ident(self.time.column)
            parts.append(_time_field(self._tkind, t))
            parts.append(f"CASE WHEN {t} IS NULL THEN '\\x01'::bytea ELSE '\\x00'::bytea END")
        return " || ".join(parts)

    def _dtype(self):
        fields = [("order", "u1"), ("type", "S4"), ("x", "S8"), ("y", "S8")]
        if self.person is not None:
            fields += [("p", ">i8"), ("pnull", "u1")]
        if self.time is not None:
            fields += [("t", _TIME_DTYPES[self._tkind]), ("tnull", "u1")]
        return np.dtype(fields)

    def _ranges(self, conn):
        """Blocks of the table (an ordinary table or materialised view) to read in ranges by ``ctid``, or None."""
        if self.spec.table is None:
            return None
        row = conn.execute("SELECT c.relkind FROM pg_class c WHERE c.oid = to_regclass(%s)",
                           (self._relation(),)).fetchone()
        return row is not None and row[0] in ("r", "m")

    def _copy_sql(self, by_blocks):
        rec = self._record_sql()
        if not by_blocks:  # a query or a view: one COPY row per record
            return f"COPY (SELECT {rec} FROM {self._relation()}) TO STDOUT (FORMAT BINARY)"
        # a table: one COPY row per range of BLOCKS_PER_RANGE blocks, its records' bytes end to end (a TID range
        # scan each; the server holds one range at a time)
        rel = self._relation()
        return (f"COPY (SELECT (SELECT string_agg({rec}, ''::bytea) FROM {rel} WHERE ctid >= format('(%s,0)', b)::tid "
                f"AND ctid < format('(%s,0)', b + {BLOCKS_PER_RANGE})::tid) FROM generate_series(0, "
                f"(pg_relation_size('{rel.replace(chr(39), chr(39) * 2)}') / current_setting('block_size')::int8)"
                f"::int, {BLOCKS_PER_RANGE}) AS b) TO STDOUT (FORMAT BINARY)")

    def batches(self):
        """Batches of about ``batch_rows`` records. The COPY stream is read on a thread of its own, one batch
        ahead, so that the server produces the next batch while this one is counted (at most two batches of
        records are held besides the one being counted)."""
        import queue
        import threading

        q = queue.Queue(maxsize=1)
        stop = threading.Event()
        t = threading.Thread(target=self._read_ahead, args=(q, stop), name="dpgeo-postgis-copy", daemon=True)
        t.start()
        try:
            while True:
                kind, item = q.get()
                if kind == "rows":
                    yield self._batch(item)
                elif kind == "error":
                    raise item
                else:
                    return
        finally:
            stop.set()
            while t.is_alive():  # unblock a reader waiting to hand over a batch nobody will take
                try:
                    q.get_nowait()
                except queue.Empty:
                    pass
                t.join(0.05)

    def _read_ahead(self, q, stop):
        """Read the COPY stream into record arrays of about ``batch_rows``, handed over through ``q``."""
        import queue

        def put(item):
            while not stop.is_set():
                try:
                    q.put(item, timeout=0.1)
                    return True
                except queue.Full:
                    pass
            return False

        psycopg = __import__("psycopg")
        dt = self._dtype()
        try:
            with self.spec.connection.connect() as conn:
                by_blocks = bool(self._ranges(conn))
                pending, n_pending, sent = [], 0, False
                with conn.cursor().copy(self._copy_sql(by_blocks)) as copy:
                    chunks = _copy_fields(copy, self.label) if by_blocks else _copy_rows(copy, self.label, dt,
                                                                                           self.batch_rows)
                    for chunk in chunks:
                        recs = np.frombuffer(chunk, dtype=dt) if isinstance(chunk, bytes) else chunk
                        pending.append(recs)
                        n_pending += recs.size
                        if n_pending >= self.batch_rows:
                            if not put(("rows", np.concatenate(pending) if len(pending) > 1 else pending[0])):
                                conn.cancel()
                                return
                            pending, n_pending, sent = [], 0, True
                if pending or not sent:
                    put(("rows", np.concatenate(pending) if pending else np.zeros(0, dtype=dt)))
            put(("end", None))
        except psycopg.Error as exc:
            put(("error", InputError(f"cannot read {self.label}: {_sql_problem(exc)}")))
        except BaseException as exc:  # an InputError of the stream, or a bug: raised where the batches are read
            put(("error", exc))

    def _batch(self, rows):
        x, y, valid, drops, kinds = _points(rows)
        person = person_null = None
        if self.person is not None:
            person = rows["p"].astype(np.int64)
            person_null = rows["pnull"] != 0
        period = None
        if self.time is not None:
            period = self.time.period_of(_time_arrow(rows["t"], self._tkind, rows["tnull"] != 0))[0]
        return finish_batch(x, y, rows.size, self.crs, person=person, person_null=person_null, drops=drops,
                            valid=valid, kinds=kinds, period=period)


#: Table blocks (8 KiB each) per COPY row when a table is read by ranges: ~2 MiB of table, ~25,000 points.
BLOCKS_PER_RANGE = 256
_COPY_SIGNATURE = b"PGCOPY\n\xff\r\n\x00"


def _copy_fields(copy, label):
    """The one field of each row of a binary COPY stream, as bytes (NULL fields skipped)."""
    buf = bytearray()
    started = False
    for data in copy:
        buf += data
        if not started:
            if len(buf) < 19:
                continue
            if bytes(buf[:11]) != _COPY_SIGNATURE:
                raise InputError(f"cannot read {label}: the server sent an unexpected COPY stream")
            del buf[:19 + int.from_bytes(buf[15:19], "big")]
            started = True
        pos = 0
        out = []
        while len(buf) - pos >= 2:
            nf = int.from_bytes(buf[pos:pos + 2], "big", signed=True)
            if nf == -1:  # the trailer
                pos += 2
                break
            if len(buf) - pos < 6:
                break
            size = int.from_bytes(buf[pos + 2:pos + 6], "big", signed=True)
            end = pos + 6 + max(size, 0)
            if len(buf) < end:
                break
            if size > 0:
                out.append(bytes(buf[pos + 6:end]))
            pos = end
        del buf[:pos]
        yield from out


def _copy_rows(copy, label, dt, batch_rows):
    """Records of a binary COPY stream of one fixed-width field per row, decoded many rows at a time."""
    row = np.dtype([("nf", ">i2"), ("size", ">i4"), ("rec", dt)])
    buf = bytearray()
    started = False
    parts = []
    for data in copy:
        parts.append(data)
        if len(parts) < 4096:
            continue
        buf += b"".join(parts)
        parts = []
        if not started:
            buf, started = _skip_header(buf, label), True
        n = len(buf) // row.itemsize
        if n >= batch_rows or n >= 65536:
            yield _records(bytes(buf[:n * row.itemsize]), row, label)
            del buf[:n * row.itemsize]
    buf += b"".join(parts)
    if not started:
        buf = _skip_header(buf, label)
    n = len(buf) // row.itemsize
    if n:
        yield _records(bytes(buf[:n * row.itemsize]), row, label)


def _skip_header(buf, label):
    if bytes(buf[:11]) != _COPY_SIGNATURE:
        raise InputError(f"cannot read {label}: the server sent an unexpected COPY stream")
    return bytearray(buf[19 + int.from_bytes(buf[15:19], "big"):])


def _records(data, row, label):
    rows = np.frombuffer(data, dtype=row)
    if rows.size and ((rows["nf"] != 1).any() or (rows["size"] != row["rec"].itemsize).any()):
        raise InputError(f"cannot read {label}: the server sent records of an unexpected size")
    return rows["rec"]


def _points(rows):
    """``(x, y, valid, drops, kinds)`` of records whose geometry is WKB cut or padded to 21 bytes."""
    n = rows.size
    order = rows["order"]
    raw_type = np.frombuffer(rows["type"].tobytes(), dtype="<u4") if n else np.zeros(0, np.uint32)
    big = order == 0
    gtype = np.where(big, raw_type.byteswap(), raw_type) if n else raw_type
    x = np.frombuffer(rows["x"].tobytes(), dtype="<f8").copy() if n else np.zeros(0)
    y = np.frombuffer(rows["y"].tobytes(), dtype="<f8").copy() if n else np.zeros(0)
    if big.any():
        x[big] = x[big].byteswap()
        y[big] = y[big].byteswap()
    base = gtype % 1000  # ISO WKB: 1 Point, 1001 Point Z, 2001 Point M, 3001 Point ZM
    null = gtype == 0
    point = (base == 1) & ~null
    empty = point & np.isnan(x) & np.isnan(y)
    other = ~null & ~point
    valid = point & ~empty
    x[~valid] = np.nan
    y[~valid] = np.nan
    drops = {k: int(c) for k, c in (("null_geometry", null.sum()), ("empty_geometry", empty.sum()),
                                     ("non_point", other.sum())) if c}
    kinds = {_TYPE_NAMES.get(int(t), "other") for t in np.unique(base[other])} if other.any() else set()
    return x, y, valid, drops, kinds


_TIME_DTYPES = {"tstz": ">f8", "ts": ">f8", "date": ">i4", "num": ">f8", "text": f"S{TIME_TEXT_BYTES}"}


def _time_field(kind, t):
    """The SQL of the fixed-width time bytes (never fails on a value; a null is flagged beside it)."""
    if kind in ("tstz", "ts"):  # seconds since the epoch (a timestamp without zone: its wall clock as if UTC)
        return f"float8send(COALESCE(date_part('epoch', {t}), 0))"
    if kind == "date":
        return f"int4send(COALESCE(({t} - DATE '1970-01-01')::int4, 0))"
    if kind == "num":
        return f"float8send(COALESCE({t}::float8, 'NaN'::float8))"
    # text: its first bytes, padded with zero bytes to a fixed width
    return (f"substring(COALESCE(convert_to({t}::text, 'UTF8'), ''::bytea) || "
            f"'\\x{'00' * TIME_TEXT_BYTES}'::bytea FROM 1 FOR {TIME_TEXT_BYTES})")


def _time_arrow(values, kind, missing):
    """The times of a batch as an Arrow array (the series' own parser decides each record's period)."""
    import pyarrow as pa

    mask = np.asarray(missing, dtype=bool)
    if kind in ("tstz", "ts"):
        secs = values.astype(np.float64)
        micros = np.where(np.isfinite(secs) & (np.abs(secs) < 1e13), np.round(secs * 1e6), 0).astype(np.int64)
        return pa.array(micros, type=pa.timestamp("us", tz="UTC" if kind == "tstz" else None), mask=mask)
    if kind == "date":
        return pa.array(values.astype(np.int32), type=pa.date32(), mask=mask)
    if kind == "num":
        return pa.array(values.astype(np.float64), type=pa.float64(), mask=mask)
    text = np.char.decode(np.char.rstrip(values, b"\x00"), "utf-8", errors="replace")
    return pa.array(text.astype(object), type=pa.string(), mask=mask)


def _sql_problem(exc) -> str:
    """A database error as one line: the server's message (about the query) without its detail or context."""
    diag = getattr(exc, "diag", None)
    msg = getattr(diag, "message_primary", None) if diag is not None else None
    if not msg:
        from ..postgres import connection_problem

        return connection_problem(exc)
    if str(getattr(diag, "sqlstate", "") or "").startswith("22"):  # a data exception quotes the value: never shown
        return ("a value in the query's result cannot be converted (a data exception); the query must not fail on "
                "any record: check its casts")
    return msg
