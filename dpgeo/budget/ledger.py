"""The `Ledger`: one SQLite file of datasets, their declared totals and every release charged to them.

See the package docstring for the charge protocol. Storage (connections,
schema, migrations) is `dpgeo.budget.store`; this module holds the charges:
opening the ledger, declaring a total, reserving a release (or later periods
of a series), recording its outputs and settling it. Reading the ledger back
is `dpgeo.budget.ledger_reading`; which dataset an input is charged to
(declared files, fingerprints, the policy, the records) is
`dpgeo.budget.ledger_inputs`. `Ledger` mixes both in.
"""

from __future__ import annotations

import contextlib
import json
import numbers
import os
import re
import secrets

from .._dates import today as _today
from .._version import __version__
from ..errors import LedgerError, ParameterError
from . import datasets as _ds
from . import series_rows as _series
from . import sketches as _sk
from .amounts import _check_name, exact_value, format_exact
from .ledger_inputs import LedgerInputsMixin
from .ledger_reading import LedgerReadingMixin
from .location import _default_path as _default_ledger_path
from .location import _os_user, ledger_path
from .records import DatasetBudget, check_fits, series_cost
from .reservation import Reservation
from .store import LEDGER_ENV, Store

__all__ = ["Ledger", "DEFAULT_LOCK_TIMEOUT_S"]

#: How long an operation waits for another process's write lock, in seconds.
DEFAULT_LOCK_TIMEOUT_S = 10.0
#: A release id: 32 lowercase hex digits (128 random bits).
RELEASE_ID = re.compile(r"^[0-9a-f]{32}$")


def _is_default_ledger(path) -> bool:
    try:
        return path == _default_ledger_path()
    except ImportError:  # no platformdirs: there is no default location to compare with
        return False


class Ledger(LedgerReadingMixin, LedgerInputsMixin):
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
