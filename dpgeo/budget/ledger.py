"""The `Ledger`: one SQLite file of datasets, their declared totals and every release charged to them.

See the package docstring for the charge protocol. Storage (connections,
schema, migrations) is `dpgeo.budget.store`; this module holds the accounting.
"""

from __future__ import annotations

import contextlib
import json
import numbers
import os
import re
import secrets
from fractions import Fraction

from .._dates import today as _today
from .._version import __version__
from ..errors import LedgerError, ParameterError
from . import datasets as _ds
from . import series_rows as _series
from . import sketches as _sk
from .amounts import _check_name, exact_value, format_exact
from .location import _default_path as _default_ledger_path
from .location import _os_user, ledger_path
from .records import DatasetBudget, ReleaseRecord, check_fits, series_cost
from .reservation import Reservation
from .store import LEDGER_ENV, Store

__all__ = ["Ledger", "DEFAULT_LOCK_TIMEOUT_S"]

#: How long an operation waits for another process's write lock, in seconds.
DEFAULT_LOCK_TIMEOUT_S = 10.0
#: A release id: 32 lowercase hex digits (128 random bits).
RELEASE_ID = re.compile(r"^[0-9a-f]{32}$")
#: The datasets listed: not the keys merged into another dataset (their releases are listed with it).
_LISTED = "SELECT name FROM datasets WHERE name NOT IN (SELECT alias FROM dataset_aliases) ORDER BY name"


def _is_default_ledger(path) -> bool:
    try:
        return path == _default_ledger_path()
    except ImportError:  # no platformdirs: there is no default location to compare with
        return False


class Ledger:
    """The privacy-budget ledger in one SQLite file.

    Parameters
    ----------
    path : str or path-like, optional
        The ledger file; default ``$DPGEO_LEDGER``, else ``ledger.sqlite`` in
        the user's data folder (created on first use). The folder of an
        explicit path must exist.
    timeout : float, optional
        Seconds to wait for another process's write lock before giving up
        with `LedgerError` (default 10).

    Notes
    -----
    Every operation opens its own connection and closes it, so a `Ledger`
    is cheap, picklable and safe to share between threads and processes.
    Writes run in ``BEGIN IMMEDIATE`` transactions (one writer at a time, the
    cap checked and the charge written under the same lock) on a WAL journal
    with ``synchronous=FULL``. Keep the file on a local disk: SQLite's WAL
    mode does not work on network file systems.
    """

    #: The class of the charges `reserve` returns (a supervisor may record their phases in a subclass).
    reservation_type = Reservation

    def __init__(self, path=None, *, timeout=DEFAULT_LOCK_TIMEOUT_S):
        self.path = ledger_path(path)
        # the user's default ledger: its folder is created on first use, however the path was given
        is_default = (path is None and not os.environ.get(LEDGER_ENV)) or _is_default_ledger(self.path)
        if isinstance(timeout, bool) or not isinstance(timeout, numbers.Real) or not timeout >= 0:
            raise ParameterError(f"the ledger lock timeout must be a number of seconds >= 0, got {timeout!r}")
        self.timeout = float(timeout)
        from .pgstore import LedgerURL

        if isinstance(self.path, LedgerURL):  # postgresql://...: the same ledger in a PostgreSQL database
            from ..errors import DpgeoError
            from ..postgres import Connection
            from .pgstore import PgStore

            try:
                Connection.parse(self.path.conninfo)
            except DpgeoError as exc:
                raise LedgerError(f"the privacy-budget ledger (PostgreSQL): {exc}") from None
            self._store = PgStore(self.path, self.timeout)
        else:
            self._store = Store(self.path, self.timeout, create_folder=is_default)

    def __repr__(self):
        return f"Ledger({self.path!r})"

    def copy_from(self, sqlite_ledger) -> dict:
        """Copy every row of a SQLite ledger file into this ledger on PostgreSQL, which holds no release yet
        (``dpgeo budget migrate``); returns the rows copied per table. The SQLite file is left as it was."""
        from .pgstore import PgStore, copy_ledger

        if not isinstance(self._store, PgStore):
            raise LedgerError("dpgeo budget migrate copies a SQLite ledger into a ledger on PostgreSQL: give "
                              "--ledger postgresql://USER@HOST/DATABASE")
        source = Ledger(sqlite_ledger, timeout=self.timeout)
        if isinstance(source._store, PgStore) or not os.path.isfile(source.path):
            raise LedgerError(f"{sqlite_ledger!r} is not a SQLite ledger file")
        source.datasets()  # an older schema is upgraded first, as by any dpgeo that opens it
        key = _sk.load_key(source.path, create=False)
        if key is not None:  # its record sketches stay comparable: the key moves with them
            self._store.set_record_key(key)
        return copy_ledger(source._store, self._store)

    @contextlib.contextmanager
    def _operation(self, write, consequence=None):
        """One transaction; a `LedgerError` says what it means for the caller (``consequence``)."""
        try:
            with self._store.transaction(write) as conn, self._store.errors():
                yield conn
        except LedgerError as exc:
            if consequence is None:
                raise
            raise LedgerError(f"{exc} ({consequence})") from exc

    # writing ----------------------------------------------------------------------------------------------------

    def set_total(self, dataset, total_epsilon, *, total_delta=0, by=None) -> DatasetBudget:
        """Declare (or change) the total privacy budget of ``dataset``.

        Parameters
        ----------
        dataset : str
            The dataset's name (or a key a run without a name was charged to).
        total_epsilon : number or str
            The total ε all its releases together may spend (>= 0).
        total_delta : number or str, optional
            The total δ (default 0: only pure ε-DP releases fit).
        by : str, optional
            Who declares it (default: the operating-system user).

        Returns
        -------
        DatasetBudget

        Notes
        -----
        A total below what is already spent is allowed (no further release
        fits); raising a total weakens the guarantee the earlier total stood for.
        """
        _check_name(dataset, "the dataset name")
        tot_e = exact_value(total_epsilon, "the total epsilon")
        tot_d = exact_value(total_delta, "the total delta")
        if tot_e < 0:
            raise ParameterError(f"the total epsilon must be >= 0, got {format_exact(tot_e)}")
        if not 0 <= tot_d < 1:
            raise ParameterError(f"the total delta must be in [0, 1), got {format_exact(tot_d)}")
        by = _check_name(by, "who sets the total") if by is not None else _os_user()
        with self._operation(write=True, consequence="the total was not changed") as conn:
            today = _today()
            conn.execute("INSERT OR IGNORE INTO datasets (name, created_date) VALUES (?, ?)", (dataset, today))
            conn.execute("UPDATE datasets SET total_epsilon = ?, total_delta = ?, total_set_date = ?, total_set_by = ? "
                         "WHERE name = ?", (format_exact(tot_e), format_exact(tot_d), today, by, dataset))
            return self._budget(conn, dataset)

    def reserve(self, dataset, *, epsilon, delta=0, mechanism, analyst=None, release_id=None, periods=None,
                composition=None, unit=None) -> Reservation:
        """Charge a release to ``dataset`` before any private data is read; refuse it beyond the total.

        The charge is committed (and counts as spent) when this returns.
        Use the returned `Reservation` to cancel it before any noise is
        drawn, or to complete it with the outputs written.

        Parameters
        ----------
        dataset : str
            The dataset's name, or the key `resolve` found for the input.
        epsilon : number or str
            The ε of the whole release (> 0).
        delta : number or str, optional
            Its δ (default 0).
        mechanism : str
            What is released, e.g. ``"dp-dbscan-spans"``.
        analyst : str, optional
            Who runs it (default: the operating-system user).
        release_id : str, optional
            The id to record it under (32 lowercase hex digits, random): a
            supervisor that must find the charge again after its run is killed
            chooses it before the charge exists. Default: a fresh random id.
        periods : list of (int, int, str), optional
            A **series**: its public periods ``(start, end, label)`` (seconds
            since the epoch, UTC, end excluded; in order, disjoint), recorded with
            the one release row. ``epsilon`` is then the ε of each period.
        composition : {"parallel", "one-pass", "sequential"}, optional
            With ``periods``: how they compose (``dpgeo.budget.records.COMPOSITIONS``). The series is
            charged ε once (``parallel``, ``one-pass``) or ε per period (``sequential``).
        unit : str, optional
            With ``periods``: the privacy unit, ``"record:c"`` or ``"person:K"`` (an append must keep it).

        Raises
        ------
        BudgetExceededError
            The release would take the dataset past its declared total.
        LedgerError
            The ledger cannot be used, or ``release_id`` is taken; nothing is charged.
        """
        _check_name(dataset, "the dataset name")
        if periods is not None:
            periods = _series.check_periods(periods)
            _series.check_composition(composition, unit)
        elif composition is not None:
            raise ParameterError("a composition is for a series: give its periods")
        _check_name(mechanism, "the mechanism")
        analyst = _check_name(analyst, "the analyst") if analyst is not None else _os_user()
        eps = exact_value(epsilon, "epsilon")
        dlt = exact_value(delta, "delta")
        if eps <= 0:
            raise ParameterError(f"epsilon (the privacy budget) must be > 0, got {format_exact(eps)}")
        if not 0 <= dlt < 1:
            raise ParameterError(f"delta must be in [0, 1), got {format_exact(dlt)}")
        if release_id is None:
            release_id = secrets.token_hex(16)
        elif not isinstance(release_id, str) or not RELEASE_ID.match(release_id):
            raise ParameterError(f"a release id is 32 lowercase hex digits, got {release_id!r}")
        with self._operation(write=True, consequence="nothing was charged or released") as conn:
            today = _today()
            dataset = _ds.target(conn, dataset)  # a key merged into a declared dataset charges that dataset
            new = conn.execute("INSERT OR IGNORE INTO datasets (name, created_date) VALUES (?, ?)",
                               (dataset, today)).rowcount == 1
            before = self._budget(conn, dataset, releases=False)
            cost_e, cost_d = series_cost(composition, eps, dlt, "reserved", [eps] * len(periods or ()))
            check_fits(before, cost_e, cost_d)
            conn.execute("INSERT INTO releases (release_id, dataset, status, date, mechanism, epsilon, delta, analyst, "
                         "dpgeo_version, composition, unit) VALUES (?, ?, 'reserved', ?, ?, ?, ?, ?, ?, ?, ?)",
                         (release_id, dataset, today, mechanism, format_exact(eps), format_exact(dlt), analyst,
                          __version__, composition, unit if periods is not None else None))
            if periods is not None:
                _series.insert_periods(conn, release_id, release_id, periods, format_exact(eps), today)
        r = self.reservation_type(self, release_id=release_id, dataset=dataset, epsilon=eps, delta=dlt,
                                  mechanism=mechanism, analyst=analyst, date=today, new_dataset=new,
                                  total_epsilon=before.total_epsilon, total_delta=before.total_delta,
                                  spent_epsilon=before.spent_epsilon + cost_e, spent_delta=before.spent_delta + cost_d)
        r.series_id = release_id if periods is not None else None
        r.cost_epsilon = cost_e
        return r

    def append_periods(self, series_id, *, dataset, periods, epsilon, composition, unit, delta=0, analyst=None,
                       run_id=None) -> Reservation:
        """Append later periods to a completed series, under the series' own accounting.

        The rows are written as a charge of their own (``run_id``), with the
        lifecycle of :meth:`reserve`: cancelled if the run fails before any noise
        is drawn (the periods may then be appended again), failed after. What
        it spends: nothing for a ``parallel`` series (one record lies in one
        period; docs/privacy.md §6) — provided the periods are disjoint from
        every period of the series and ``epsilon`` is at most the series' ε;
        ε per period for a ``sequential`` one (checked against the total). In
        both, ``delta`` is at most the series' δ (a parallel series costs its
        δ once; a sequential one is charged the series' δ per period). A
        ``one-pass`` series takes no appended period.

        Raises
        ------
        ParameterError
            The append would break the series' accounting (another dataset, a larger ε, an overlapping
            period, another privacy unit, a δ above the series', a series not completed or not a series);
            nothing is recorded.
        BudgetExceededError
            A ``sequential`` series' new periods would exceed the dataset's total.
        """
        _check_name(dataset, "the dataset name")
        analyst = _check_name(analyst, "the analyst") if analyst is not None else _os_user()
        periods = _series.check_periods(periods)
        _series.check_composition(composition, unit)
        eps, dlt = exact_value(epsilon, "epsilon"), exact_value(delta, "delta")
        if eps <= 0:
            raise ParameterError(f"epsilon (the privacy budget) must be > 0, got {format_exact(eps)}")
        if not 0 <= dlt < 1:
            raise ParameterError(f"delta must be in [0, 1), got {format_exact(dlt)}")
        run_id = secrets.token_hex(16) if run_id is None else run_id
        if not isinstance(run_id, str) or not RELEASE_ID.match(run_id):
            raise ParameterError(f"a release id is 32 lowercase hex digits, got {run_id!r}")
        with self._operation(write=True, consequence="nothing was charged or released") as conn:
            today = _today()
            series = self._series(conn, series_id)
            if series is None:
                raise ParameterError(f"there is no series {series_id} in the ledger {self.path}")
            target = _ds.target(conn, dataset)
            why = _series.append_refusal(series, target, composition, unit, eps, periods, format_exact, delta=dlt)
            if why:
                raise ParameterError(why)
            before = self._budget(conn, target, releases=False)
            cost_e, cost_d = (eps * len(periods), dlt * len(periods)) if composition == "sequential" else (0, 0)
            check_fits(before, cost_e, cost_d)
            _series.insert_periods(conn, series_id, run_id, periods, format_exact(eps), today)
        r = self.reservation_type(self, release_id=run_id, dataset=target, epsilon=eps, delta=dlt,
                                  mechanism=series.mechanism, analyst=analyst, date=today, new_dataset=False,
                                  total_epsilon=before.total_epsilon, total_delta=before.total_delta,
                                  spent_epsilon=before.spent_epsilon + cost_e, spent_delta=before.spent_delta + cost_d)
        r.series_id = series_id
        r.cost_epsilon = cost_e
        r.appended = True
        return r

    def series(self, series_id) -> ReleaseRecord | None:
        """The ledger's record of a series (its periods included), or None."""
        with self._operation(write=False) as conn:
            return None if conn is None else self._series(conn, series_id)

    def _series(self, conn, series_id):
        row = conn.execute("SELECT release_id, dataset, date, mechanism, epsilon, delta, analyst, status, outputs, "
                           "composition, unit FROM releases WHERE release_id = ?", (series_id,)).fetchone()
        return None if row is None else self._record(row, conn)

    def add_outputs(self, release_id, outputs):
        """Record more files (or URLs) written from an already charged release; spends nothing."""
        outputs = [_check_name(os.fspath(o), "an output") for o in outputs]
        with self._operation(write=True, consequence="the outputs were not recorded; the release is unaffected") as conn:
            release_id = self._series_of_run(conn, release_id)
            row = conn.execute("SELECT status, outputs FROM releases WHERE release_id = ?", (release_id,)).fetchone()
            if row is None or row[0] == "cancelled":
                raise LedgerError(f"release {release_id} is not a charged release in the ledger {self.path}")
            have = json.loads(row[1])
            have += [o for o in outputs if o not in have]
            conn.execute("UPDATE releases SET outputs = ? WHERE release_id = ?", (json.dumps(have), release_id))

    def settle(self, release_id, status, outputs=None):
        """Close a charge whose run ended without closing it (its process was killed); returns the final status.

        For a supervisor that runs releases in other processes and tracked
        their phase: ``"failed"`` when noise may have been drawn (the charge
        stands), ``"cancelled"`` only when the run certainly stopped before
        any noise (the caller vouches for that), ``"completed"`` with the
        outputs once the release is published. A charge that is no longer
        reserved is left as it is. Returns the release's status after the
        call, or None when the ledger has no such release.

        Examples
        --------
        >>> import os, tempfile
        >>> ledger = Ledger(os.path.join(tempfile.mkdtemp(), "ledger.sqlite"))
        >>> r = ledger.reserve("stops", epsilon=0.5, mechanism="dp-dbscan-spans", analyst="ana")
        >>> ledger.settle(r.release_id, "failed"), ledger.settle(r.release_id, "cancelled")
        ('failed', 'failed')
        >>> format_exact(ledger.budget("stops").spent_epsilon)
        '0.5'
        """
        if status not in ("completed", "failed", "cancelled"):
            raise ParameterError(f"a charge is settled as completed, failed or cancelled, not {status!r}")
        outputs = None if outputs is None else [_check_name(os.fspath(o), "an output") for o in outputs]
        with self._operation(write=True, consequence=f"release {release_id} was not marked {status}") as conn:
            row = conn.execute("SELECT status FROM releases WHERE release_id = ?", (release_id,)).fetchone()
            if row is None:  # the run that appended periods to a series
                got = conn.execute("SELECT status FROM release_periods WHERE run_id = ? LIMIT 1",
                                   (release_id,)).fetchone()
                if got is None or got[0] != "reserved":
                    return None if got is None else got[0]
                _series.set_period_status(conn, release_id, status)
                return status
            if row[0] != "reserved":
                return row[0]
            conn.execute("UPDATE releases SET status = ?, outputs = coalesce(?, outputs) WHERE release_id = ?",
                         (status, None if outputs is None else json.dumps(outputs), release_id))
            _series.set_period_status(conn, release_id, status)
            return status

    def _set_status(self, release_id, status, outputs=None):
        consequence = ("its charge stays recorded and counted" if status == "cancelled" else
                       "it stays charged, recorded as not completed")
        with self._operation(write=True, consequence=f"release {release_id} was not marked {status}: {consequence}") \
                as conn:
            cur = conn.execute("UPDATE releases SET status = ?, outputs = coalesce(?, outputs) "
                               "WHERE release_id = ? AND status = 'reserved'",
                               (status, None if outputs is None else json.dumps(list(outputs)), release_id))
            n = _series.set_period_status(conn, release_id, status)  # a series' periods, or an append's
            if cur.rowcount != 1 and n == 0:
                raise LedgerError(f"release {release_id} is no longer reserved in the ledger {self.path}")
            if cur.rowcount != 1 and outputs:  # an append: its files are the series'
                series_id = self._series_of_run(conn, release_id)
                have = json.loads(conn.execute("SELECT outputs FROM releases WHERE release_id = ?",
                                               (series_id,)).fetchone()[0])
                have += [o for o in outputs if o not in have]
                conn.execute("UPDATE releases SET outputs = ? WHERE release_id = ?", (json.dumps(have), series_id))

    # reading ----------------------------------------------------------------------------------------------------

    @staticmethod
    def _series_of_run(conn, run_id):
        """The release a run id belongs to: itself, or the series an append added periods to."""
        if conn.execute("SELECT 1 FROM releases WHERE release_id = ?", (run_id,)).fetchone():
            return run_id
        row = conn.execute("SELECT release_id FROM release_periods WHERE run_id = ? LIMIT 1", (run_id,)).fetchone()
        return run_id if row is None else row[0]

    def _budget(self, conn, dataset, releases=True):
        dataset = _ds.target(conn, dataset)
        keys = _ds.keys(conn, dataset)
        where = f"dataset IN ({', '.join('?' * len(keys))})"
        row = conn.execute("SELECT total_epsilon, total_delta, total_set_date, total_set_by FROM datasets "
                           "WHERE name = ?", (dataset,)).fetchone() or (None, None, None, None)
        tot_e, tot_d = self._parse(row[0]), self._parse(row[1])
        if tot_e is not None and tot_d is None:
            tot_d = Fraction(0)
        totals = {"total_epsilon": tot_e, "total_delta": tot_d, "total_set_date": row[2], "total_set_by": row[3]}
        if not releases:  # only what the cap check needs
            # a sequential series: the ε recorded with each charged period (an append's may differ from the row's)
            rows = conn.execute("SELECT epsilon, delta, status, composition, (SELECT group_concat(p.epsilon, ' ') "
                                "FROM release_periods p WHERE p.release_id = r.release_id AND p.status IN "
                                "('reserved', 'completed', 'failed')) FROM releases r WHERE "
                                f"{where} AND (status <> 'cancelled' OR composition = 'sequential')", keys).fetchall()
            costs = [series_cost(r[3], self._parse(r[0]), self._parse(r[1]), r[2],
                                 [self._parse(e) for e in (r[4] or "").split()]) for r in rows]
            spent_e = sum((c[0] for c in costs), Fraction(0))
            spent_d = sum((c[1] for c in costs), Fraction(0))
            return DatasetBudget(dataset, spent_epsilon=spent_e, spent_delta=spent_d, **totals)
        rows = conn.execute("SELECT release_id, dataset, date, mechanism, epsilon, delta, analyst, status, outputs, "
                            f"composition, unit FROM releases WHERE {where} ORDER BY seq", keys).fetchall()
        recs = tuple(self._record(r, conn) for r in rows)
        spent_e = sum((r.cost[0] for r in recs), Fraction(0))
        spent_d = sum((r.cost[1] for r in recs), Fraction(0))
        return DatasetBudget(dataset, spent_epsilon=spent_e, spent_delta=spent_d, releases=recs, **totals)

    def _parse(self, text):
        if text is None:
            return None
        try:
            value = Fraction(text)
        except (ValueError, ZeroDivisionError, TypeError):
            value = None
        if value is None or value < 0:
            raise LedgerError(f"the privacy-budget ledger {self.path} holds an unreadable amount {text!r}; it was "
                              "edited outside dpgeo or is corrupt. Restore it from a backup")
        return value

    def _record(self, row, conn=None):
        try:
            outputs = tuple(json.loads(row[8]))
        except ValueError:
            raise LedgerError(f"the privacy-budget ledger {self.path} holds unreadable outputs for release {row[0]}"
                              ) from None
        composition = row[9] if len(row) > 9 else None
        periods = () if composition is None or conn is None else _series.period_records(conn, row[0], self._parse)
        return ReleaseRecord(release_id=row[0], dataset=row[1], date=row[2], mechanism=row[3],
                             epsilon=self._parse(row[4]), delta=self._parse(row[5]), analyst=row[6], status=row[7],
                             outputs=outputs, composition=composition, unit=row[10] if len(row) > 10 else None,
                             periods=periods)

    def budget(self, dataset) -> DatasetBudget:
        """The total, spent ε and δ and every release of ``dataset`` (empty for a dataset never seen)."""
        _check_name(dataset, "the dataset name")
        with self._operation(write=False) as conn:
            if conn is None:
                return DatasetBudget(dataset, None, None, Fraction(0), Fraction(0))
            return self._budget(conn, dataset)

    def datasets(self) -> list:
        """Names of every dataset in the ledger, sorted."""
        with self._operation(write=False) as conn:
            if conn is None:
                return []
            return [r[0] for r in conn.execute(_LISTED)]

    def history(self) -> list:
        """`DatasetBudget` of every dataset in the ledger, sorted by name (one consistent snapshot)."""
        with self._operation(write=False) as conn:
            if conn is None:
                return []
            names = [r[0] for r in conn.execute(_LISTED)]
            return [self._budget(conn, n) for n in names]

    # datasets and their files --------------------------------------------------------------------------------

    def fingerprint(self, source) -> _ds.Fingerprint:
        """The content fingerprint of an input (file, glob or folder), cached in the ledger by path and stat.

        Reads the input's bytes once (no record is parsed); a file unchanged
        since it was last fingerprinted (same size, modification time and
        inode) is not read again.
        """
        from .fingerprint import combine, fingerprint_file, input_files

        members = input_files(source)
        stats = [os.stat(f) for f in members]
        with self._operation(write=False) as conn:
            rows = {} if conn is None else {
                f: conn.execute("SELECT size, mtime_ns, inode, device, digest, sketch FROM fingerprint_cache "
                                "WHERE path = ?", (f,)).fetchone() for f in members}
        prints, fresh = [], []
        for f, st in zip(members, stats):
            fp = _ds.cached_fingerprint(rows.get(f), st)
            if fp is None:
                fp = fingerprint_file(f)
                fresh.append((f, st, fp))
            prints.append(fp)
        if fresh:
            with self._operation(write=True, consequence="the fingerprint was not cached") as conn:
                for f, st, fp in fresh:
                    _ds.cache_fingerprint(conn, f, st, fp)
        return combine(prints)

    def declare(self, dataset, files, *, total_epsilon=None, total_delta=0, by=None):
        """Declare ``dataset``: the files it lives in and, the first time, its total budget.

        Parameters
        ----------
        dataset : str
            Its name, as every front end will find it.
        files : list of path-like
            The file(s) or Parquet folders/globs the dataset lives in (each a
            file set of its own). Runs on any copy of their content are charged
            to ``dataset`` (`resolve`), whatever the copy is called.
        total_epsilon, total_delta : optional
            The total; required when the dataset has none. A total already
            declared is kept (change it with `set_total`): declaring again is
            safe, e.g. in a set-up script.
        by : str, optional
            Who declares it (default: the operating-system user).

        Returns
        -------
        (DatasetBudget, list of str)
            The dataset's budget and notes for the owner (a total kept, releases taken over, a file that is
            also another dataset's: allowed, and said).
        """
        _check_name(dataset, "the dataset name")
        if not files:
            raise ParameterError("declare at least one file the dataset lives in")
        prints = [(os.path.realpath(os.fspath(f)), self.fingerprint(f)) for f in files]
        notes = []
        with self._operation(write=True, consequence="nothing was declared") as conn:
            today = _today()
            has = conn.execute("SELECT total_epsilon FROM datasets WHERE name = ?", (dataset,)).fetchone()
            if (has is None or has[0] is None) and total_epsilon is None:
                raise ParameterError(f"dataset {dataset!r} has no total yet: declare it with --total EPSILON (the "
                                     "privacy budget all its releases together may spend)")
            notes += _ds.declare_files(conn, dataset, prints, today)
        if has is None or has[0] is None:
            self.set_total(dataset, total_epsilon, total_delta=total_delta, by=by)
        elif total_epsilon is not None and exact_value(total_epsilon, "the total epsilon") != self._parse(has[0]):
            notes.append(f"dataset {dataset!r} keeps its declared total, epsilon {has[0]} (change it with: dpgeo budget "
                         f"set {dataset} --total EPSILON)")
        notes += _sk.learn_declared(self, dataset, files, prints)  # its records, so that copies are recognised
        return self.budget(dataset), notes

    def resolve(self, source, name=None, *, record=True, unattended=False) -> _ds.Resolution:
        """Which dataset a run on the input ``source`` is charged to (see `dpgeo.budget.datasets`).

        Raises `ParameterError` when ``name`` is not the dataset the input's
        content was declared as, or when the ledger's policy (:meth:`policy`;
        strict by default for an ``unattended`` run) refuses an input that is
        not a declared dataset: before any record is read. ``record=False``
        records nothing (the fingerprint is still cached) and refuses nothing
        for the policy (a look at the budget, not a run).
        """
        path = os.path.realpath(os.fsdecode(os.fspath(source)))
        fp = self.fingerprint(source)
        with self._operation(write=record, consequence="nothing was charged or released") as conn:
            if conn is None:  # reading a ledger that does not exist yet
                return _ds.Resolution(name if name is not None else _ds.content_key(fp.digest), name)
            r = _ds.resolve(conn, path, fp, name, _today(), record=record)
            why = record and _sk.policy_refusal(conn, r.key, lambda n: _ds.target(conn, n), unattended,
                                                path=path if name is None else None, name=name)
            if why:  # raised inside the transaction: nothing the resolution recorded stays
                raise ParameterError(why)
            return r

    def check_policy(self, dataset, *, unattended=False):
        """Refuse a run charged to ``dataset`` (a name, or the key of in-memory data) that the policy refuses."""
        with self._operation(write=False) as conn:
            why = None if conn is None else _sk.policy_refusal(conn, dataset, lambda n: _ds.target(conn, n),
                                                               unattended, name=dataset)
        if why:
            raise ParameterError(why)

    def policy(self) -> str | None:
        """The owner's policy: ``"require-declared"``, ``"allow-undeclared"`` or None (the default: strict for
        unattended runs and the service, once any dataset has a declared total)."""
        with self._operation(write=False) as conn:
            return None if conn is None else _sk.get_policy(conn)

    def set_policy(self, policy, *, by=None) -> str | None:
        """Persist the policy (one of :data:`dpgeo.budget.sketches.POLICIES`, or None for the default)."""
        if policy is not None and policy not in _sk.POLICIES:
            raise ParameterError(f"the ledger policy is one of {', '.join(_sk.POLICIES)}, got {policy!r}")
        by = _check_name(by, "who sets the policy") if by is not None else _os_user()
        with self._operation(write=True, consequence="the policy was not changed") as conn:
            conn.execute("DELETE FROM ledger_settings WHERE name = 'policy'")
            if policy is not None:
                conn.execute("INSERT INTO ledger_settings (name, value, date, set_by) VALUES ('policy', ?, ?, ?)",
                             (policy, _today(), by))
        return policy

    # records: which dataset an input's records belong to (dpgeo.budget.sketches) ---------------------------------

    def record_sketch(self):
        """An empty `dpgeo.counting.sketch.RecordSketch` under this ledger's key (created on first use)."""
        from ..counting.sketch import RecordSketch

        return RecordSketch(self.record_key())

    def record_key(self) -> bytes:
        """The secret key of this ledger's record sketches: a file beside a SQLite ledger (``<ledger>.key``, owner
        only), a table of its own in a PostgreSQL ledger's database; never in any release or log."""
        from .pgstore import PgStore

        if isinstance(self._store, PgStore):
            return self._store.record_key(_sk.KEY_BYTES)
        return _sk.load_key(self.path)

    def check_records(self, reservation, sketch, *, source=None) -> tuple:
        """After counting, before any noise: the dataset ``reservation`` stays charged to, from the records read.

        ``sketch`` holds the records read from ``source`` (a file input; None
        for points in memory). Returns ``(dataset, notes)``; raises
        `ParameterError` or `BudgetExceededError` when the run must stop (the
        caller cancels the charge). See :mod:`dpgeo.budget.sketches`.
        """
        digest = "" if source is None else self.fingerprint(source).digest
        with self._operation(write=True, consequence="nothing was released") as conn:
            today = _today()
            dataset, notes, refusal = _sk.check_records(
                conn, reservation, sketch, digest, today, budget_of=lambda n: self._budget(conn, n, releases=False),
                target=lambda n: _ds.target(conn, n), merge=lambda a, b: _ds._merge(conn, a, b, today))
        if refusal is not None:
            raise refusal
        return dataset, notes

    def declared_for(self, source) -> list:
        """Names of the datasets whose declared files have the content of ``source`` (usually one, or none)."""
        fp = self.fingerprint(source)
        with self._operation(write=False) as conn:
            return [] if conn is None else [r[0] for r in conn.execute(
                "SELECT dataset FROM dataset_files WHERE digest = ? AND declared = 1 ORDER BY dataset", (fp.digest,))]

    def files(self, dataset) -> list:
        """``(path, declared, size)`` of the files recorded for ``dataset`` (declared, or seen in unnamed runs)."""
        with self._operation(write=False) as conn:
            return [] if conn is None else _ds.files(conn, _ds.target(conn, dataset))
