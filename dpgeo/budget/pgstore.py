"""The privacy-budget ledger on PostgreSQL: the same schema, migrations and guarantees as the SQLite file.

Private to `dpgeo.budget`. A ledger given as ``postgresql://USER@HOST/DATABASE``
(``--ledger``, ``DPGEO_LEDGER``, ``[server] ledger``; no password in it:
libpq reads ``~/.pgpass``, ``PGPASSWORD`` or a service file) is kept in that
database's tables, so that several machines — replicas of ``dpgeo serve``,
analysts' workstations — share one ledger.

The accounting (`dpgeo.budget.ledger`, `~dpgeo.budget.ledger_reading`,
`~dpgeo.budget.ledger_inputs`) and the migrations (`dpgeo.budget.store`)
are the SQLite ones: :class:`_Conn` runs their statements on PostgreSQL
(``?`` parameters, ``INSERT OR IGNORE/REPLACE``, the append-only triggers,
``PRAGMA user_version``). Guarantees:

* **one writer at a time**, as SQLite's ``BEGIN IMMEDIATE``: every write
  transaction first takes a transaction-level advisory lock
  (``pg_advisory_xact_lock``), then reads the spent budget and writes the
  charge under it, in ``READ COMMITTED`` (each statement sees every charge
  committed before it, including those committed while it waited for the
  lock), so concurrent reservations on any number of machines never exceed a
  total (``tests/test_pg_ledger.py`` races them);
* **kill -9 safe**: a charge is committed when `Ledger.reserve` returns; a
  process killed before that leaves an open transaction that the server rolls
  back when its connection drops (nothing half-written), and one killed after
  leaves a committed reservation that is settled like in the SQLite file;
* the connection string never appears in a message or a ``repr``.
"""

from __future__ import annotations

import contextlib
import re

from ..errors import LedgerError

#: The advisory lock of the ledger's writers (ASCII "dpgL", the SQLite ledger's application id).
LOCK_KEY = 0x6470674C
#: Primary keys of the tables written with INSERT OR REPLACE (the conflict target on PostgreSQL).
_KEYS = {"dataset_aliases": ("alias",), "dataset_files": ("dataset", "digest"), "fingerprint_cache": ("path",),
         "datasets": ("name",), "record_sketches": ("dataset", "digest"), "ledger_settings": ("name",)}
_LABEL = "(PostgreSQL)"


def is_ledger_url(value) -> bool:
    """Whether a ledger location is a PostgreSQL connection (``postgresql://``, ``postgres://``, ``service=``)."""
    return isinstance(value, str) and bool(re.match(r"\s*(postgres(ql)?://|(service|dbname|host)\s*=)", value, re.I))


class LedgerURL(str):
    """A ledger's connection string that prints as ``(PostgreSQL)`` in every message and ``repr``."""

    def __str__(self):
        return _LABEL

    def __repr__(self):
        return repr(_LABEL)

    def __format__(self, spec):
        return format(_LABEL, spec)

    def __reduce__(self):  # survives pickling (a job sent to a worker process)
        return (LedgerURL, (str.__str__(self),))

    @property
    def conninfo(self) -> str:
        return str.__str__(self)


# -- the SQLite dialect on PostgreSQL ---------------------------------------------------------------------------

_TRIGGER = re.compile(r"CREATE TRIGGER (\w+)\s+BEFORE (DELETE|UPDATE(?: OF [\w, ]+)?) ON (\w+)\s+"
                      r"(?:WHEN (.*?)\s+)?BEGIN SELECT RAISE\(ABORT, '([^']*)'\); END", re.S)
_INSERT = re.compile(r"^\s*INSERT OR (IGNORE|REPLACE) INTO (\w+) \(([^)]*)\)(.*)$", re.S)


def translate(sql: str) -> list:
    """PostgreSQL statements for one statement of the ledger's SQLite dialect."""
    m = _TRIGGER.search(sql)
    if m:
        name, event, table, when, message = m.groups()
        func = f"dpgeo_{name}"
        ret = "OLD" if event == "DELETE" else "NEW"
        return [f"CREATE FUNCTION {func}() RETURNS trigger LANGUAGE plpgsql AS $f$ BEGIN "
                f"RAISE EXCEPTION '{message}'; RETURN {ret}; END $f$",
                f"CREATE TRIGGER {name} BEFORE {event} ON {table} FOR EACH ROW "
                + (f"WHEN ({when}) " if when else "") + f"EXECUTE FUNCTION {func}()"]
    if re.match(r"\s*CREATE TABLE", sql):
        sql = re.sub(r"INTEGER PRIMARY KEY AUTOINCREMENT", "BIGSERIAL PRIMARY KEY", sql)
        sql = re.sub(r"\bINTEGER\b", "BIGINT", sql)
        sql = re.sub(r"\bBLOB\b", "BYTEA", sql)
        return [sql]
    if re.match(r"\s*ALTER TABLE", sql):
        return [re.sub(r"\bBLOB\b", "BYTEA", re.sub(r"\bINTEGER\b", "BIGINT", sql))]
    sql = sql.replace("group_concat(", "string_agg(")
    m = _INSERT.match(sql)
    if m:
        how, table, cols, rest = m.groups()
        sql = f"INSERT INTO {table} ({cols}){rest}"
        if how == "IGNORE":
            sql += " ON CONFLICT DO NOTHING"
        else:
            keys = _KEYS[table]
            others = [c.strip() for c in cols.split(",") if c.strip() not in keys]
            sql += (f" ON CONFLICT ({', '.join(keys)}) DO UPDATE SET "
                    + ", ".join(f"{c} = EXCLUDED.{c}" for c in others))
    return [sql]


class _Conn:
    """A psycopg connection that takes the ledger's SQLite statements (see the module docstring)."""

    def __init__(self, conn):
        self._conn = conn

    def execute(self, sql, params=()):
        pragma = re.match(r"\s*PRAGMA (\w+)\s*=\s*(\d+)\s*$", sql)
        if pragma:
            key, value = pragma.groups()
            return self._conn.execute("UPDATE dpgeo_ledger_meta SET value = %s WHERE key = %s", (int(value), key))
        cur = None
        for stmt in translate(sql):
            if params:
                cur = self._conn.execute(_placeholders(stmt), tuple(params))
            else:
                cur = self._conn.execute(stmt)
        return cur

    def executemany(self, sql, rows):
        (stmt,) = translate(sql)
        cur = self._conn.cursor()
        cur.executemany(_placeholders(stmt), [tuple(r) for r in rows])
        return cur


def _placeholders(stmt):
    return stmt.replace("%", "%%").replace("?", "%s")


# -- the store -----------------------------------------------------------------------------------------------------

class PgStore:
    """The ledger in a PostgreSQL database: the same interface as :class:`dpgeo.budget.store.Store`."""

    def __init__(self, url: LedgerURL, timeout):
        self.path = url
        self.timeout = timeout

    @contextlib.contextmanager
    def errors(self):
        psycopg = _psycopg()
        try:
            yield
        except psycopg.Error as exc:
            raise LedgerError(self.explain(exc)) from None

    def explain(self, exc):
        from ..postgres import connection_problem

        state = str(getattr(getattr(exc, "diag", None), "sqlstate", "") or "")
        if state == "55P03" or "lock timeout" in str(exc).lower():
            return (f"the privacy-budget ledger (PostgreSQL) has been locked by another process for more than "
                    f"{self.timeout:g} s: try again when the other run has finished, or allow a longer lock timeout")
        if state.startswith("42501"):
            return ("the privacy-budget ledger (PostgreSQL) cannot be written: its database user lacks the "
                    "privileges (it needs to create tables once, then to read and write them)")
        msg = getattr(getattr(exc, "diag", None), "message_primary", None)
        if state.startswith("P0001") and msg:  # the append-only triggers
            return f"the privacy-budget ledger (PostgreSQL) refused a change: {msg}"
        if state.startswith("08") or not state:
            return f"the privacy-budget ledger (PostgreSQL) cannot be reached: {connection_problem(exc)}"
        return f"the privacy-budget ledger (PostgreSQL) cannot be used: {msg or type(exc).__name__}"

    def record_key(self, n_bytes: int) -> bytes:
        """The ledger's secret record-sketch key (:mod:`dpgeo.budget.sketches`), kept in the database in a table of
        its own (``dpgeo_record_key``, which an owner may restrict like the ledger), created on first use: every
        replica and command line on this ledger sketches records under the same key."""
        import secrets

        if getattr(self, "_record_key", None) is None:
            self._record_key = self.set_record_key(secrets.token_bytes(n_bytes))
        return self._record_key

    def set_record_key(self, key: bytes) -> bytes:
        """Store ``key`` as the ledger's record-sketch key unless one is there already; return the one stored
        (``dpgeo budget migrate`` brings a SQLite ledger's key along with its sketches)."""
        conn = self.connect(True)
        try:
            with self.errors():
                conn.execute("CREATE TABLE IF NOT EXISTS dpgeo_record_key "
                             "(id INTEGER PRIMARY KEY CHECK (id = 1), key BYTEA NOT NULL)")
                conn.execute("INSERT INTO dpgeo_record_key (id, key) VALUES (1, %s) ON CONFLICT (id) DO NOTHING",
                             (bytes(key),))
                stored = bytes(conn.execute("SELECT key FROM dpgeo_record_key WHERE id = 1").fetchone()[0])
                conn.commit()
        finally:
            conn.close()
        return stored

    def connect(self, write):
        from ..errors import InputError
        from ..postgres import Connection

        try:
            conn = Connection.parse(self.path.conninfo).connect(what="the privacy-budget ledger (PostgreSQL)")
        except InputError as exc:
            raise LedgerError(str(exc)) from None
        with self.errors():
            conn.execute(f"SET lock_timeout = {int(self.timeout * 1000)}")
            conn.execute("SET TIME ZONE 'UTC'")
        return conn

    @contextlib.contextmanager
    def transaction(self, write):
        """A checked connection inside one transaction (write: under the ledger's lock); None for a ledger whose
        tables do not exist yet, read only."""
        conn = self.connect(write)
        try:
            with self.errors():
                if write:
                    conn.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_KEY,))
                else:  # one consistent snapshot for a whole report
                    conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
                version = self.check_schema(conn, write)
            if version == 0:
                yield None
            else:
                yield _Conn(conn)
            with self.errors():
                conn.commit()
        except BaseException:
            with contextlib.suppress(Exception):
                conn.rollback()
            raise
        finally:
            conn.close()

    def check_schema(self, conn, write):
        from .store import APPLICATION_ID, SCHEMA_VERSION, migrate

        from .._version import __version__

        exists = conn.execute("SELECT to_regclass('dpgeo_ledger_meta') IS NOT NULL").fetchone()[0]
        if not exists:
            if not write:
                return 0
            conn.execute("CREATE TABLE dpgeo_ledger_meta (key TEXT PRIMARY KEY, value BIGINT NOT NULL)")
            conn.execute("INSERT INTO dpgeo_ledger_meta VALUES ('application_id', 0), ('user_version', 0)")
            migrate(_Conn(conn), 0)
            return SCHEMA_VERSION
        meta = dict(conn.execute("SELECT key, value FROM dpgeo_ledger_meta").fetchall())
        if meta.get("application_id") != APPLICATION_ID:
            raise LedgerError("the PostgreSQL database holds a table dpgeo_ledger_meta that is not a dpgeo ledger's")
        version = int(meta.get("user_version", 0))
        if version > SCHEMA_VERSION:
            raise LedgerError(f"the privacy-budget ledger (PostgreSQL) was written by a newer dpgeo (ledger schema "
                              f"{version}; this dpgeo {__version__} knows up to {SCHEMA_VERSION}): upgrade dpgeo")
        if version < SCHEMA_VERSION:
            if not write:
                raise LedgerError("the privacy-budget ledger (PostgreSQL) has an older schema: run any dpgeo budget "
                                  "command that writes (e.g. dpgeo budget set) to upgrade it")
            migrate(_Conn(conn), version)
        return SCHEMA_VERSION


def _psycopg():
    from ..postgres import need_psycopg

    try:
        return need_psycopg()
    except Exception as exc:
        raise LedgerError(str(exc)) from None


def copy_ledger(source_store, target_store) -> dict:
    """Copy every row of a SQLite ledger into an empty PostgreSQL ledger (``dpgeo budget migrate``).

    Every table of the SQLite file is copied as it is (both hold the same schema version: the target is created or
    migrated to this dpgeo's first, and so is the source when it is older). Returns the rows copied per table.
    Refused when the target already holds releases.
    """
    counts = {}
    with source_store.transaction(write=False) as src:
        if src is None:
            raise LedgerError("the SQLite ledger to copy is empty or does not exist")
        names = [r[0] for r in src.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE "
                                           "'sqlite_%' ORDER BY name")]
        first = [t for t in ("datasets", "releases") if t in names]  # the tables others refer to
        tables = first + [t for t in names if t not in first]
        with target_store.transaction(write=True) as dst:
            if dst._conn.execute("SELECT count(*) FROM releases").fetchone()[0]:
                raise LedgerError("the PostgreSQL ledger already holds releases: copy into a new database")
            dst._conn.execute("DELETE FROM migrations")
            for table in tables:
                cur = src.execute(f"SELECT * FROM {table}")
                cols = [d[0] for d in cur.description]
                rows = cur.fetchall()
                if rows:
                    marks = ", ".join(["%s"] * len(cols))
                    dst._conn.cursor().executemany(f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({marks})", rows)
                if "seq" in cols:
                    dst._conn.execute(f"SELECT setval(pg_get_serial_sequence('{table}', 'seq'), "
                                      f"GREATEST((SELECT max(seq) FROM {table}), 1))")
                counts[table] = len(rows)
    return counts
