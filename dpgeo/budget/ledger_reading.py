"""Reading the ledger back: a dataset's budget and releases, the datasets, a series.

`LedgerReadingMixin` holds the `Ledger`'s reading operations, each one
transaction, and the row parsing every operation shares (an amount read back
as an exact rational; a release row as a `ReleaseRecord`; a dataset's spent
ε and δ summed from its releases, as the cap check before a charge reads
them). The charges themselves are `dpgeo.budget.ledger`.
"""

from __future__ import annotations

import json
from fractions import Fraction

from ..errors import LedgerError
from . import datasets as _ds
from . import series_rows as _series
from .amounts import _check_name
from .records import DatasetBudget, ReleaseRecord, series_cost

__all__ = ["LedgerReadingMixin"]

#: The datasets listed: not the keys merged into another dataset (their releases are listed with it).
_LISTED = "SELECT name FROM datasets WHERE name NOT IN (SELECT alias FROM dataset_aliases) ORDER BY name"


class LedgerReadingMixin:
    """The `Ledger`'s reading operations; mixed into `Ledger`, whose ``_operation`` (one transaction) and
    ``path`` they use."""

    def series(self, series_id) -> ReleaseRecord | None:
        """The ledger's record of a series (its periods included), or None."""
        with self._operation(write=False) as conn:
            return None if conn is None else self._series(conn, series_id)

    def _series(self, conn, series_id):
        row = conn.execute("SELECT release_id, dataset, date, mechanism, epsilon, delta, analyst, status, outputs, "
                           "composition, unit FROM releases WHERE release_id = ?", (series_id,)).fetchone()
        return None if row is None else self._record(row, conn)

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
