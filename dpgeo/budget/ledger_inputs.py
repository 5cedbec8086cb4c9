"""Which dataset an input is charged to: declared datasets and their files, fingerprints, the policy, the records.

`LedgerInputsMixin` holds the `Ledger`'s operations on inputs: the content
fingerprint of a file (cached in the ledger), the declaration of a dataset
with its files, the resolution of an input to the dataset it is charged to
(:mod:`dpgeo.budget.datasets`), the owner's policy for inputs no dataset was
declared for, and the records an input holds (:mod:`dpgeo.budget.sketches`).
The charges themselves are `dpgeo.budget.ledger`.
"""

from __future__ import annotations

import os

from .._dates import today as _today
from ..errors import ParameterError
from . import datasets as _ds
from . import sketches as _sk
from .amounts import _check_name, exact_value
from .location import _os_user

__all__ = ["LedgerInputsMixin"]


class LedgerInputsMixin:
    """The `Ledger`'s operations on inputs and datasets; mixed into `Ledger`, whose ``_operation`` (one
    transaction), ``path``, ``_store``, totals (``set_total``) and reading (``budget``, ``_budget``,
    ``_parse``) they use."""

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
