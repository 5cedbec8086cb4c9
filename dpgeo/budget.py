"""The persistent privacy-budget ledger: one SQLite file, shared by every front end.

A **dataset** is the population a guarantee protects, kept under a name the
data owner chooses (or, when a run names none, the input's resolved path:
`dataset_key_for_path`). Under sequential composition the ε (and δ) of all
releases of one dataset add up; the ledger records each release and refuses
one that would take the sum past the dataset's declared total.

The charge protocol: a run **reserves** its ε before it reads any private
data; the reservation counts as spent at once. Until the run declares that
noise may be drawn (`Reservation.noise_started`) it may be cancelled, e.g.
because the input file cannot be read; after that the charge stands whatever
happens, so a retry never gets fresh noise for free. On success the run
completes the reservation with the files it wrote.

Every ε and δ is kept as an exact rational (a float is read as the decimal
it prints as, ``0.1`` → 1/10) and sums are compared exactly, so ten releases
at ε = 0.1 fit a total of 1 and an eleventh does not.

Examples
--------
>>> import os, tempfile
>>> ledger = Ledger(os.path.join(tempfile.mkdtemp(), "ledger.sqlite"))
>>> ledger.set_total("stops", 1.0).total_epsilon
Fraction(1, 1)
>>> with ledger.reserve("stops", epsilon=0.4, mechanism="dp-dbscan-spans", analyst="ana") as r:
...     with r.before_noise():      # an error in here (e.g. unreadable input) cancels the charge
...         pass                    # read the private points
...     r.complete(outputs=["spans.gpkg"])
>>> format_exact(ledger.budget("stops").left_epsilon)
'0.6'
>>> ledger.reserve("stops", epsilon=0.7, mechanism="dp-dbscan-spans")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
dpgeo.errors.BudgetExceededError: dataset 'stops' has a total budget of epsilon = 1; 0.4 is spent and 0.6 is left, ...
"""

from __future__ import annotations

import contextlib
import getpass
import json
import math
import numbers
import os
import secrets
from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction

from ._ledger_sqlite import LEDGER_ENV, SCHEMA_VERSION, Store
from ._dates import today as _today
from ._version import __version__
from .errors import BudgetExceededError, LedgerError, ParameterError

__all__ = [
    "Ledger",
    "Reservation",
    "DatasetBudget",
    "ReleaseRecord",
    "ledger_path",
    "dataset_key_for_path",
    "path_key_notice",
    "exact_value",
    "format_exact",
    "LEDGER_ENV",
    "SCHEMA_VERSION",
    "DEFAULT_LOCK_TIMEOUT_S",
]

#: How long an operation waits for another process's write lock, in seconds.
DEFAULT_LOCK_TIMEOUT_S = 10.0
LEDGER_FILENAME = "ledger.sqlite"

#: Status of a release row: the first three count as spent.
CHARGED = ("reserved", "completed", "failed")
STATUSES = CHARGED + ("cancelled",)


# -- names, paths and exact numbers -------------------------------------------------------------------------------

def ledger_path(path=None) -> str:
    """The ledger file to use: ``path`` if given, else ``$DPGEO_LEDGER``, else the user's data folder.

    The default is ``ledger.sqlite`` in platformdirs' user data directory for
    "dpgeo" (``~/.local/share/dpgeo`` on Linux).

    Examples
    --------
    >>> ledger_path("/srv/dpgeo/ledger.sqlite")
    '/srv/dpgeo/ledger.sqlite'
    """
    if path is None:
        path = os.environ.get(LEDGER_ENV) or None
    if path is None:
        return _default_path()
    return os.path.abspath(os.path.expanduser(os.fspath(path)))


def _default_path():
    import platformdirs

    return os.path.join(platformdirs.user_data_dir("dpgeo", appauthor=False), LEDGER_FILENAME)


def dataset_key_for_path(path) -> str:
    """The dataset key for a run that names no dataset: the input's resolved absolute path.

    Symbolic links and ``..`` are resolved so that two spellings of one file
    share one budget. Different files (monthly extracts of the same people)
    get different keys: name the dataset to make them share one.

    Examples
    --------
    >>> dataset_key_for_path("/data/../data/stops.gpkg")
    '/data/stops.gpkg'
    """
    return os.path.realpath(os.path.expanduser(os.fspath(path)))


def path_key_notice(key) -> str:
    """What to tell the owner, once, when a run without a dataset name is recorded under the path ``key``."""
    return (f"no dataset name given: this release is recorded in the privacy-budget ledger under the input's path "
            f"{key!r}. Name the dataset (--dataset NAME) so that every file holding the same people shares one "
            "budget.")


def exact_value(value, name="epsilon") -> Fraction:
    """``value`` as an exact rational: a float as the decimal it prints as (``0.1`` → 1/10).

    Accepts int, float, ``decimal.Decimal``, ``fractions.Fraction`` and
    strings such as ``"0.1"`` or ``"1/3"``. The decimal of a float differs
    from its binary value by less than half a unit in the last place (about
    1e-17 for ε near 0.1), far below the rounding of the noise parameters
    computed from ε.

    Examples
    --------
    >>> exact_value(0.1) * 10 == 1
    True
    >>> exact_value("1/3")
    Fraction(1, 3)
    """
    if isinstance(value, bool):
        raise ParameterError(f"{name} must be a number, got {value!r}")
    try:
        if isinstance(value, Fraction):
            out = value
        elif isinstance(value, numbers.Integral):
            out = Fraction(int(value))
        elif isinstance(value, (Decimal, str)):
            out = Fraction(value.strip() if isinstance(value, str) else value)
        elif isinstance(value, numbers.Real):
            f = float(value)
            if not math.isfinite(f):
                raise ValueError
            out = Fraction(repr(f))
        else:
            raise TypeError
    except (ValueError, TypeError, ArithmeticError, OverflowError):
        raise ParameterError(f"{name} must be a finite number, got {value!r}") from None
    return out


def format_exact(value) -> str:
    """An exact rational as the shortest decimal that equals it, or ``p/q`` when there is none.

    Examples
    --------
    >>> format_exact(Fraction(3, 10)), format_exact(Fraction(2)), format_exact(Fraction(1, 3))
    ('0.3', '2', '1/3')
    >>> format_exact(Fraction(10) ** 400), format_exact(Fraction(-15, 10 ** 31))
    ('1e400', '-1.5e-30')
    """
    f = Fraction(value)
    d, twos, fives = f.denominator, 0, 0
    while d % 2 == 0:
        d, twos = d // 2, twos + 1
    while d % 5 == 0:
        d, fives = d // 5, fives + 1
    if d != 1 or max(twos, fives) > 400:
        return f"{f.numerator}/{f.denominator}"
    digits = max(twos, fives)  # f == n / 10**digits exactly
    n = abs(f.numerator) * 10 ** digits // f.denominator
    sign = "-" if f < 0 else ""
    if digits == 0:
        plain = str(n)
    else:
        s = f"{n:0{digits + 1}d}"
        plain = (s[:-digits] + "." + s[-digits:]).rstrip("0").rstrip(".")
    if len(plain) <= 24 or n == 0:
        return sign + plain
    while n % 10 == 0:  # the same value in scientific notation, exactly: n * 10**-digits
        n, digits = n // 10, digits - 1
    m = str(n)
    return f"{sign}{m[0]}{'.' + m[1:] if len(m) > 1 else ''}e{len(m) - 1 - digits}"


def _check_name(value, what):
    if not isinstance(value, str) or not value.strip():
        raise ParameterError(f"{what} must be a non-empty string, got {value!r}")
    if any(ord(c) < 32 or ord(c) == 127 for c in value) or len(value) > 4096:
        raise ParameterError(f"{what} must be one line of at most 4096 characters without control characters")
    return value


def _os_user():
    try:
        return getpass.getuser()
    except Exception:  # no login name in the environment or the password database
        return "unknown"


# -- records -----------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ReleaseRecord:
    """One row of the ledger: a release (or an attempt at one) of a dataset.

    ``status`` is ``"completed"``; ``"reserved"`` (charged, not completed:
    running now, or stopped by a crash); ``"failed"`` (charged: stopped after
    noise may have been drawn); or ``"cancelled"`` (stopped before any noise
    was drawn: not charged). ``date`` is the UTC day, never a time of day.
    """

    release_id: str
    dataset: str
    date: str
    mechanism: str
    epsilon: Fraction
    delta: Fraction
    analyst: str
    status: str
    outputs: tuple = ()

    @property
    def charged(self) -> bool:
        """Whether this row counts as spent."""
        return self.status in CHARGED

    def to_dict(self) -> dict:
        """JSON-ready: ε and δ as the nearest floats."""
        return {"release_id": self.release_id, "date": self.date, "mechanism": self.mechanism,
                "epsilon": float(self.epsilon), "delta": float(self.delta), "analyst": self.analyst,
                "status": self.status, "charged": self.charged, "outputs": list(self.outputs)}


@dataclass(frozen=True)
class DatasetBudget:
    """A dataset's declared total, what its releases have spent, and the releases themselves.

    ``total_epsilon`` is None when no total was declared (releases are then
    recorded but never refused). ``total_delta`` is the declared δ total (0
    for a pure ε budget) or None without a declared total.
    """

    dataset: str
    total_epsilon: Fraction | None
    total_delta: Fraction | None
    spent_epsilon: Fraction
    spent_delta: Fraction
    releases: tuple = field(default=(), repr=False)
    total_set_date: str | None = None
    total_set_by: str | None = None

    @property
    def left_epsilon(self) -> Fraction | None:
        """ε that may still be spent (never negative); None without a declared total."""
        return None if self.total_epsilon is None else max(Fraction(0), self.total_epsilon - self.spent_epsilon)

    @property
    def left_delta(self) -> Fraction | None:
        """δ that may still be spent (never negative); None without a declared total."""
        return None if self.total_delta is None else max(Fraction(0), self.total_delta - self.spent_delta)

    @property
    def n_charged(self) -> int:
        """Number of releases that count as spent."""
        return sum(r.charged for r in self.releases)

    def to_dict(self, releases=True) -> dict:
        """JSON-ready: ε and δ as the nearest floats, None where no total is declared."""

        def num(v):
            return None if v is None else float(v)

        d = {"dataset": self.dataset, "total_epsilon": num(self.total_epsilon), "total_delta": num(self.total_delta),
             "spent_epsilon": num(self.spent_epsilon), "spent_delta": num(self.spent_delta),
             "left_epsilon": num(self.left_epsilon), "left_delta": num(self.left_delta),
             "n_releases": self.n_charged, "total_set_date": self.total_set_date, "total_set_by": self.total_set_by}
        if releases:
            d["releases"] = [r.to_dict() for r in self.releases]
        return d


# -- the ledger --------------------------------------------------------------------------------------------------

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

    def __init__(self, path=None, *, timeout=DEFAULT_LOCK_TIMEOUT_S):
        is_default = path is None and not os.environ.get(LEDGER_ENV)
        self.path = ledger_path(path)
        if isinstance(timeout, bool) or not isinstance(timeout, numbers.Real) or not timeout >= 0:
            raise ParameterError(f"the ledger lock timeout must be a number of seconds >= 0, got {timeout!r}")
        self.timeout = float(timeout)
        self._store = Store(self.path, self.timeout, create_folder=is_default)

    def __repr__(self):
        return f"Ledger({self.path!r})"

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
            The dataset's name (or path key).
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

    def reserve(self, dataset, *, epsilon, delta=0, mechanism, analyst=None) -> Reservation:
        """Charge a release to ``dataset`` before any private data is read; refuse it beyond the total.

        The charge is committed (and counts as spent) when this returns.
        Use the returned `Reservation` to cancel it before any noise is
        drawn, or to complete it with the outputs written.

        Parameters
        ----------
        dataset : str
            The dataset's name, or `dataset_key_for_path` of the input.
        epsilon : number or str
            The ε of the whole release (> 0).
        delta : number or str, optional
            Its δ (default 0).
        mechanism : str
            What is released, e.g. ``"dp-dbscan-spans"``.
        analyst : str, optional
            Who runs it (default: the operating-system user).

        Raises
        ------
        BudgetExceededError
            The release would take the dataset past its declared total.
        LedgerError
            The ledger cannot be used; nothing is charged.
        """
        _check_name(dataset, "the dataset name")
        _check_name(mechanism, "the mechanism")
        analyst = _check_name(analyst, "the analyst") if analyst is not None else _os_user()
        eps = exact_value(epsilon, "epsilon")
        dlt = exact_value(delta, "delta")
        if eps <= 0:
            raise ParameterError(f"epsilon (the privacy budget) must be > 0, got {format_exact(eps)}")
        if not 0 <= dlt < 1:
            raise ParameterError(f"delta must be in [0, 1), got {format_exact(dlt)}")
        release_id = secrets.token_hex(16)
        with self._operation(write=True, consequence="nothing was charged or released") as conn:
            today = _today()
            new = conn.execute("INSERT OR IGNORE INTO datasets (name, created_date) VALUES (?, ?)",
                               (dataset, today)).rowcount == 1
            before = self._budget(conn, dataset, releases=False)
            _check_fits(before, eps, dlt)
            conn.execute("INSERT INTO releases (release_id, dataset, status, date, mechanism, epsilon, delta, analyst, "
                         "dpgeo_version) VALUES (?, ?, 'reserved', ?, ?, ?, ?, ?, ?)",
                         (release_id, dataset, today, mechanism, format_exact(eps), format_exact(dlt), analyst,
                          __version__))
        return Reservation(self, release_id=release_id, dataset=dataset, epsilon=eps, delta=dlt, mechanism=mechanism,
                           analyst=analyst, date=today, new_dataset=new, total_epsilon=before.total_epsilon,
                           total_delta=before.total_delta, spent_epsilon=before.spent_epsilon + eps,
                           spent_delta=before.spent_delta + dlt)

    def add_outputs(self, release_id, outputs):
        """Record more files (or URLs) written from an already charged release; spends nothing."""
        outputs = [_check_name(os.fspath(o), "an output") for o in outputs]
        with self._operation(write=True, consequence="the outputs were not recorded; the release is unaffected") as conn:
            row = conn.execute("SELECT status, outputs FROM releases WHERE release_id = ?", (release_id,)).fetchone()
            if row is None or row[0] == "cancelled":
                raise LedgerError(f"release {release_id} is not a charged release in the ledger {self.path}")
            have = json.loads(row[1])
            have += [o for o in outputs if o not in have]
            conn.execute("UPDATE releases SET outputs = ? WHERE release_id = ?", (json.dumps(have), release_id))

    def _set_status(self, release_id, status, outputs=None):
        consequence = ("its charge stays recorded and counted" if status == "cancelled" else
                       "it stays charged, recorded as not completed")
        with self._operation(write=True, consequence=f"release {release_id} was not marked {status}: {consequence}") \
                as conn:
            cur = conn.execute("UPDATE releases SET status = ?, outputs = coalesce(?, outputs) "
                               "WHERE release_id = ? AND status = 'reserved'",
                               (status, None if outputs is None else json.dumps(list(outputs)), release_id))
            if cur.rowcount != 1:
                raise LedgerError(f"release {release_id} is no longer reserved in the ledger {self.path}")

    # reading ----------------------------------------------------------------------------------------------------

    def _budget(self, conn, dataset, releases=True):
        row = conn.execute("SELECT total_epsilon, total_delta, total_set_date, total_set_by FROM datasets "
                           "WHERE name = ?", (dataset,)).fetchone() or (None, None, None, None)
        tot_e, tot_d = self._parse(row[0]), self._parse(row[1])
        if tot_e is not None and tot_d is None:
            tot_d = Fraction(0)
        totals = {"total_epsilon": tot_e, "total_delta": tot_d, "total_set_date": row[2], "total_set_by": row[3]}
        if not releases:  # only what the cap check needs
            rows = conn.execute("SELECT epsilon, delta FROM releases WHERE dataset = ? AND status <> 'cancelled'",
                                (dataset,)).fetchall()
            spent_e = sum((self._parse(r[0]) for r in rows), Fraction(0))
            spent_d = sum((self._parse(r[1]) for r in rows), Fraction(0))
            return DatasetBudget(dataset, spent_epsilon=spent_e, spent_delta=spent_d, **totals)
        rows = conn.execute("SELECT release_id, dataset, date, mechanism, epsilon, delta, analyst, status, outputs "
                            "FROM releases WHERE dataset = ? ORDER BY seq", (dataset,)).fetchall()
        recs = tuple(self._record(r) for r in rows)
        spent_e = sum((r.epsilon for r in recs if r.charged), Fraction(0))
        spent_d = sum((r.delta for r in recs if r.charged), Fraction(0))
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

    def _record(self, row):
        try:
            outputs = tuple(json.loads(row[8]))
        except ValueError:
            raise LedgerError(f"the privacy-budget ledger {self.path} holds unreadable outputs for release {row[0]}"
                              ) from None
        return ReleaseRecord(release_id=row[0], dataset=row[1], date=row[2], mechanism=row[3],
                             epsilon=self._parse(row[4]), delta=self._parse(row[5]), analyst=row[6], status=row[7],
                             outputs=outputs)

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
            return [r[0] for r in conn.execute("SELECT name FROM datasets ORDER BY name")]

    def history(self) -> list:
        """`DatasetBudget` of every dataset in the ledger, sorted by name (one consistent snapshot)."""
        with self._operation(write=False) as conn:
            if conn is None:
                return []
            names = [r[0] for r in conn.execute("SELECT name FROM datasets ORDER BY name")]
            return [self._budget(conn, n) for n in names]


def _check_fits(b: DatasetBudget, eps, dlt):
    if b.total_epsilon is None:
        return
    f = format_exact
    figures = {"dataset": b.dataset, "requested_epsilon": eps, "total_epsilon": b.total_epsilon,
               "spent_epsilon": b.spent_epsilon, "left_epsilon": b.left_epsilon, "requested_delta": dlt,
               "total_delta": b.total_delta, "spent_delta": b.spent_delta, "left_delta": b.left_delta}
    if b.spent_epsilon + eps > b.total_epsilon:
        raise BudgetExceededError(
            f"dataset {b.dataset!r} has a total budget of epsilon = {f(b.total_epsilon)}; {f(b.spent_epsilon)} is "
            f"spent and {f(b.left_epsilon)} is left, so a release with epsilon = {f(eps)} is refused and nothing was "
            f"read or released. "
            + (f"Use epsilon <= {f(b.left_epsilon)}, or the" if b.left_epsilon > 0 else "No further release fits unless the")
            + " data owner raises the total (dpgeo budget set NAME --total EPSILON)", **figures)
    if b.spent_delta + dlt > b.total_delta:
        raise BudgetExceededError(
            f"dataset {b.dataset!r} has a total delta of {f(b.total_delta)}; {f(b.spent_delta)} is spent and "
            f"{f(b.left_delta)} is left, so a release with delta = {f(dlt)} is refused and nothing was read or "
            "released. The data owner may declare a delta total (dpgeo budget set NAME --total EPSILON "
            "--total-delta DELTA)", **figures)


class Reservation:
    """A charge committed to the ledger for one release, and its lifecycle.

    States: *reserved* (counts as spent; cancellable) → after `noise_started`
    still reserved but no longer cancellable → *completed* (`complete`) or
    *failed* (`fail`, or an error inside the ``with`` block). `cancel` is the
    only way back to "not spent", and only before `noise_started`. A process
    killed at any point leaves the charge reserved: counted, and shown as not
    completed.

    Used as a context manager, an exception inside the block marks the
    charge failed (it stays spent: the block may have drawn noise) and a
    normal exit completes it if `complete` was not called. Wrap the steps
    that come before any noise, such as reading the input, in
    `before_noise`: an error there cancels the charge.

    Attributes
    ----------
    release_id, dataset, mechanism, analyst, date : str
    epsilon, delta : Fraction
    new_dataset : bool
        This reservation created the dataset's entry (say so to the owner once).
    total_epsilon, total_delta : Fraction or None
        The dataset's declared totals at reservation time.
    spent_epsilon, spent_delta : Fraction
        The dataset's spent totals right after this charge.
    status : str
        ``"reserved"``, ``"completed"``, ``"failed"`` or ``"cancelled"`` as far as this object knows.
    """

    def __init__(self, ledger, *, release_id, dataset, epsilon, delta, mechanism, analyst, date, new_dataset,
                 total_epsilon, total_delta, spent_epsilon, spent_delta):
        self.ledger = ledger
        self.release_id = release_id
        self.dataset = dataset
        self.epsilon = epsilon
        self.delta = delta
        self.mechanism = mechanism
        self.analyst = analyst
        self.date = date
        self.new_dataset = new_dataset
        self.total_epsilon = total_epsilon
        self.total_delta = total_delta
        self.spent_epsilon = spent_epsilon
        self.spent_delta = spent_delta
        self.status = "reserved"
        self._noise = False

    def __repr__(self):
        return (f"<Reservation {self.release_id} of {self.dataset!r}: epsilon={format_exact(self.epsilon)}, "
                f"{self.status}{', noise started' if self._noise and self.status == 'reserved' else ''}>")

    @property
    def cancellable(self) -> bool:
        """True until noise may have been drawn (and while still reserved)."""
        return self.status == "reserved" and not self._noise

    @property
    def left_epsilon(self) -> Fraction | None:
        """ε left for the dataset right after this charge; None without a declared total."""
        return None if self.total_epsilon is None else max(Fraction(0), self.total_epsilon - self.spent_epsilon)

    def noise_started(self):
        """Declare that noise may be drawn from now on: the charge can no longer be cancelled."""
        if self.status == "cancelled":
            raise LedgerError(f"release {self.release_id} was cancelled: reserve again before drawing noise")
        self._noise = True

    def cancel(self):
        """Withdraw the charge: allowed only before `noise_started` (e.g. the input could not be read)."""
        if not self.cancellable:
            raise LedgerError(f"release {self.release_id} of dataset {self.dataset!r} cannot be cancelled: "
                              + ("noise may have been drawn, so its charge stands" if self._noise
                                 else f"it is {self.status}"))
        self.ledger._set_status(self.release_id, "cancelled")
        self.status = "cancelled"

    def complete(self, outputs=()):
        """Record success and the files (or URLs) written; the charge stands."""
        if self.status != "reserved":
            raise LedgerError(f"release {self.release_id} is {self.status}; only a reserved release is completed "
                              "(add files to a completed one with Ledger.add_outputs)")
        outputs = [_check_name(os.fspath(o), "an output") for o in outputs]
        self._noise = True
        self.ledger._set_status(self.release_id, "completed", outputs)
        self.status = "completed"

    def fail(self):
        """Record that the run stopped after noise may have been drawn; the charge stands."""
        if self.status != "reserved":
            raise LedgerError(f"release {self.release_id} is {self.status}; only a reserved release can fail")
        self._noise = True
        self.ledger._set_status(self.release_id, "failed")
        self.status = "failed"

    @contextlib.contextmanager
    def before_noise(self):
        """A block that draws no noise: an error inside cancels the charge; leaving it starts the noise phase."""
        if not self.cancellable:
            raise LedgerError(f"release {self.release_id} is past the point where noise may be drawn")
        try:
            yield self
        except BaseException as exc:
            try:
                self.cancel()
            except LedgerError as cancel_exc:  # the charge stays (counted): never hide the first error
                if hasattr(exc, "add_note"):
                    exc.add_note(f"the charge stays recorded: {cancel_exc}")
            raise
        self.noise_started()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if self.status != "reserved":
            return False
        if exc_type is None:
            self.complete()
            return False
        try:
            self.fail()
        except LedgerError as ledger_exc:  # still reserved, i.e. counted: never hide the first error
            if hasattr(exc, "add_note"):
                exc.add_note(f"the charge stays recorded as reserved: {ledger_exc}")
        return False
