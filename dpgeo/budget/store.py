"""Storage of the privacy-budget ledger in SQLite: connections, checks, the schema and its migrations.

Private to `dpgeo.budget`, which holds the public API and the accounting.
Every operation opens its own connection, runs in one transaction and
closes it: writes in ``BEGIN IMMEDIATE`` (one writer at a time) on a WAL
journal with ``synchronous=FULL``, so a committed charge survives a crash of
the process and an uncommitted one leaves no trace. SQLite's errors become
one-line `LedgerError` messages that name the file and the fix.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time

from .._dates import today
from .._version import __version__
from ..errors import LedgerError

#: Environment variable naming the ledger file (overrides the per-user default).
LEDGER_ENV = "DPGEO_LEDGER"
#: Schema version this dpgeo writes (``PRAGMA user_version``); newer files are refused.
SCHEMA_VERSION = 4
#: ``PRAGMA application_id`` of a dpgeo ledger (ASCII "dpgL"): tells it from other SQLite files.
APPLICATION_ID = 0x6470674C




# -- schema and migrations ---------------------------------------------------------------------------------------

def _migrate_to_1(conn):
    conn.execute("""CREATE TABLE datasets (
        name TEXT PRIMARY KEY NOT NULL CHECK (length(name) > 0),
        total_epsilon TEXT,                 -- exact rational as text ('0.1', '1/3'); NULL: no total declared
        total_delta TEXT,
        created_date TEXT NOT NULL,         -- UTC day
        total_set_date TEXT,
        total_set_by TEXT)""")
    conn.execute("""CREATE TABLE releases (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        release_id TEXT NOT NULL UNIQUE,    -- random (secrets.token_hex), never derived from data
        dataset TEXT NOT NULL REFERENCES datasets(name),
        status TEXT NOT NULL CHECK (status IN ('reserved', 'completed', 'failed', 'cancelled')),
        date TEXT NOT NULL,                 -- UTC day, no time of day
        mechanism TEXT NOT NULL,
        epsilon TEXT NOT NULL,
        delta TEXT NOT NULL,
        analyst TEXT NOT NULL,
        outputs TEXT NOT NULL DEFAULT '[]', -- JSON list of paths or URLs
        dpgeo_version TEXT NOT NULL)""")
    conn.execute("CREATE INDEX releases_by_dataset ON releases(dataset, seq)")
    # append-only: a charge is never deleted, altered, or moved back from a charged state
    conn.execute("""CREATE TRIGGER releases_never_deleted BEFORE DELETE ON releases
        BEGIN SELECT RAISE(ABORT, 'dpgeo ledger: releases are never deleted'); END""")
    conn.execute("""CREATE TRIGGER releases_charge_fixed
        BEFORE UPDATE OF seq, release_id, dataset, date, mechanism, epsilon, delta, analyst ON releases
        BEGIN SELECT RAISE(ABORT, 'dpgeo ledger: a recorded charge is never changed'); END""")
    conn.execute("""CREATE TRIGGER releases_status_forward BEFORE UPDATE OF status ON releases
        WHEN NEW.status <> OLD.status AND OLD.status <> 'reserved'
        BEGIN SELECT RAISE(ABORT, 'dpgeo ledger: only a reserved charge changes its status'); END""")
    conn.execute("""CREATE TABLE migrations (
        version INTEGER PRIMARY KEY, applied_date TEXT NOT NULL, dpgeo_version TEXT NOT NULL)""")
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")


def _migrate_to_2(conn):
    # the files a dataset lives in, by content (owner-side only: never in any output)
    conn.execute("""CREATE TABLE dataset_files (
        dataset TEXT NOT NULL REFERENCES datasets(name),
        digest TEXT NOT NULL,               -- SHA-256 of the content (a file set: 'set:' + of its members)
        sketch BLOB NOT NULL,               -- smallest chunk hashes, for near-copies (budget/fingerprint.py)
        size INTEGER NOT NULL,
        path TEXT NOT NULL,                 -- where it was declared or first seen (absolute)
        declared INTEGER NOT NULL,          -- 1: declared by the owner; 0: seen in a run without a name
        date TEXT NOT NULL,
        PRIMARY KEY (dataset, digest))""")
    conn.execute("CREATE INDEX dataset_files_by_digest ON dataset_files(digest)")
    # keys whose releases count towards another dataset (an unnamed file's key, a path key of schema 1,
    # merged into the dataset the owner declared for that file): its releases stay as recorded
    conn.execute("""CREATE TABLE dataset_aliases (
        alias TEXT PRIMARY KEY NOT NULL REFERENCES datasets(name),
        dataset TEXT NOT NULL REFERENCES datasets(name),
        date TEXT NOT NULL)""")
    # fingerprints already computed, so that a run does not read a large input twice
    conn.execute("""CREATE TABLE fingerprint_cache (
        path TEXT PRIMARY KEY NOT NULL, size INTEGER NOT NULL, mtime_ns INTEGER NOT NULL,
        inode INTEGER NOT NULL, device INTEGER NOT NULL, digest TEXT NOT NULL, sketch BLOB NOT NULL)""")


def _migrate_to_3(conn):
    # a series: one release row with its periods (docs/privacy.md §6, "Series"); an ordinary release has none
    conn.execute("ALTER TABLE releases ADD COLUMN composition TEXT")  # NULL, 'parallel', 'one-pass', 'sequential'
    conn.execute("ALTER TABLE releases ADD COLUMN unit TEXT")         # a series' privacy unit: 'record:c', 'person:K'
    conn.execute("""CREATE TRIGGER releases_series_fixed BEFORE UPDATE OF composition, unit ON releases
        BEGIN SELECT RAISE(ABORT, 'dpgeo ledger: a recorded charge is never changed'); END""")
    conn.execute("""CREATE TABLE release_periods (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        release_id TEXT NOT NULL REFERENCES releases(release_id),  -- the series
        run_id TEXT NOT NULL,               -- the run that released it: the series itself, or an append
        period_start INTEGER NOT NULL,      -- public bounds, whole seconds since 1970-01-01 UTC; end excluded
        period_end INTEGER NOT NULL CHECK (period_end > period_start),
        label TEXT NOT NULL,
        epsilon TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('reserved', 'completed', 'failed', 'cancelled')),
        date TEXT NOT NULL)""")
    conn.execute("CREATE INDEX release_periods_by_release ON release_periods(release_id, seq)")
    conn.execute("CREATE INDEX release_periods_by_run ON release_periods(run_id)")
    conn.execute("""CREATE TRIGGER release_periods_never_deleted BEFORE DELETE ON release_periods
        BEGIN SELECT RAISE(ABORT, 'dpgeo ledger: releases are never deleted'); END""")
    conn.execute("""CREATE TRIGGER release_periods_charge_fixed
        BEFORE UPDATE OF seq, release_id, run_id, period_start, period_end, label, epsilon, date ON release_periods
        BEGIN SELECT RAISE(ABORT, 'dpgeo ledger: a recorded charge is never changed'); END""")
    conn.execute("""CREATE TRIGGER release_periods_status_forward BEFORE UPDATE OF status ON release_periods
        WHEN NEW.status <> OLD.status AND OLD.status <> 'reserved'
        BEGIN SELECT RAISE(ABORT, 'dpgeo ledger: only a reserved charge changes its status'); END""")


def _migrate_to_4(conn):
    # the records of each dataset, as keyed sketches (budget/sketches.py): nothing reversible into a location
    # without the key, which is kept beside the ledger, never in it
    conn.execute("""CREATE TABLE record_sketches (
        dataset TEXT NOT NULL REFERENCES datasets(name),
        digest TEXT NOT NULL,               -- the input's content digest ('' for points in memory)
        key_id TEXT NOT NULL,               -- which key hashed it (a hash of the key)
        n_records INTEGER NOT NULL,
        sketch BLOB NOT NULL,               -- counting/sketch.py: bottom-k keyed hashes and their counts
        date TEXT NOT NULL,
        PRIMARY KEY (dataset, digest))""")
    # the owner's settings: 'policy' = 'require-declared' | 'allow-undeclared' (absent: the default)
    conn.execute("""CREATE TABLE ledger_settings (
        name TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL, date TEXT NOT NULL, set_by TEXT NOT NULL)""")


#: Migration to each schema version from the one before (0 = an empty file).
MIGRATIONS = {1: _migrate_to_1, 2: _migrate_to_2, 3: _migrate_to_3, 4: _migrate_to_4}


def migrate(conn, current):
    for version in range(current + 1, SCHEMA_VERSION + 1):
        MIGRATIONS[version](conn)
        conn.execute("INSERT INTO migrations (version, applied_date, dpgeo_version) VALUES (?, ?, ?)",
                     (version, today(), __version__))
        conn.execute(f"PRAGMA user_version = {version}")


# -- connections -------------------------------------------------------------------------------------------------

class Store:
    """One ledger file: ``path`` (absolute), lock ``timeout`` in seconds, and whether a missing folder is created."""

    def __init__(self, path, timeout, create_folder):
        self.path = path
        self.timeout = timeout
        self.create_folder = create_folder

    # connections ------------------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def errors(self):
        """Turn SQLite's errors into one `LedgerError` line that names the file and the fix."""
        try:
            yield
        except sqlite3.Error as exc:
            raise LedgerError(self.explain(exc)) from exc

    def explain(self, exc):
        msg = str(exc).lower()
        p = self.path
        if "locked" in msg or "busy" in msg:
            return (f"the privacy-budget ledger {p} has been locked by another process for more than "
                    f"{self.timeout:g} s: try again when the other run has finished, or allow a longer lock timeout")
        if "readonly" in msg or "read-only" in msg or "unable to open" in msg or "cannot open" in msg:
            return (f"the privacy-budget ledger {p} cannot be opened or written (read-only file or folder, or no "
                    f"permission): give a writable ledger with --ledger PATH or the {LEDGER_ENV} environment variable")
        if "not a database" in msg or "malformed" in msg or "corrupt" in msg:
            return (f"the privacy-budget ledger {p} is corrupt or not a SQLite file ({exc}): restore it from a "
                    "backup, and do not delete it, or past releases are forgotten")
        return f"the privacy-budget ledger {p} cannot be used: {exc}"

    def _retry_busy(self, step):
        """Run ``step``, retrying for up to ``timeout`` s while SQLite reports the file busy.

        SQLite does not call its busy handler for every lock: switching a new
        file to WAL while another process creates it, or reading during WAL
        recovery, fails at once with "database is locked". Those are retried
        here with a short back-off, so that processes opening a ledger at the
        same moment wait for each other instead of failing.
        """
        deadline = time.monotonic() + self.timeout
        pause = 0.005
        while True:
            try:
                return step()
            except sqlite3.OperationalError as exc:
                msg = str(exc).lower()
                if ("locked" not in msg and "busy" not in msg) or time.monotonic() >= deadline:
                    raise
            time.sleep(pause)
            pause = min(pause * 2, 0.1)

    def connect(self, write):
        folder = os.path.dirname(self.path)
        if os.path.isdir(self.path):
            raise LedgerError(f"the privacy-budget ledger {self.path} is a folder; give a file path")
        if write and not os.path.isdir(folder):
            if not self.create_folder:
                raise LedgerError(f"the folder of the privacy-budget ledger {self.path} does not exist; create it "
                                  "or give another path")
            try:
                os.makedirs(folder, exist_ok=True)
            except OSError as exc:
                raise LedgerError(f"cannot create the folder of the privacy-budget ledger {self.path}: "
                                  f"{exc.strerror}") from None
        with self.errors():
            conn = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None)
            try:
                if write and conn.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
                    self._retry_busy(lambda: conn.execute("PRAGMA journal_mode = WAL"))
                conn.execute("PRAGMA synchronous = FULL")
                conn.execute("PRAGMA foreign_keys = ON")
            except BaseException:
                conn.close()
                raise
        return conn

    @contextlib.contextmanager
    def transaction(self, write):
        """A checked connection inside one transaction; None when reading a ledger that does not exist yet."""
        if not write and not os.path.exists(self.path):
            yield None
            return
        conn = self.connect(write)
        try:
            with self.errors():
                self._retry_busy(lambda: conn.execute("BEGIN IMMEDIATE" if write else "BEGIN"))
                version = self._retry_busy(lambda: self.check_schema(conn, write))
            if version == 0:  # an empty file, read only
                yield None
            elif version < SCHEMA_VERSION:  # older schema, read only: upgrade it first
                conn.execute("ROLLBACK")
                conn.close()
                conn = None
                with self.transaction(write=True):
                    pass
                with self.transaction(write=False) as again:
                    yield again
                return
            else:
                yield conn
            with self.errors():
                conn.execute("COMMIT")
        except BaseException:
            if conn is not None and conn.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
            raise
        finally:
            if conn is not None:
                conn.close()

    def check_schema(self, conn, write):
        """The schema version, after checking the file and (when writing) migrating it to this dpgeo's."""
        quick = conn.execute("PRAGMA quick_check").fetchall()
        if [r[0] for r in quick] != ["ok"]:
            raise LedgerError(f"the privacy-budget ledger {self.path} is corrupt (SQLite's check reports: "
                              f"{quick[0][0]}): restore it from a backup")
        app = conn.execute("PRAGMA application_id").fetchone()[0]
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if app != APPLICATION_ID:
            if app == 0 and version == 0 and not conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
                if write:
                    migrate(conn, 0)
                    return SCHEMA_VERSION
                return 0
            raise LedgerError(f"{self.path} is a SQLite file but not a dpgeo privacy-budget ledger; give the ledger's "
                              "path, or a new file name to start one")
        if version > SCHEMA_VERSION:
            raise LedgerError(f"the privacy-budget ledger {self.path} was written by a newer dpgeo (ledger schema "
                              f"{version}; this dpgeo {__version__} knows up to {SCHEMA_VERSION}): upgrade dpgeo")
        if version < SCHEMA_VERSION and write:
            migrate(conn, version)
            return SCHEMA_VERSION
        return version
