"""The periods of a series in the ledger: recorded with the series, checked when a later period is appended.

A series (``dpgeo.series``) is **one** release row with one row per
period in ``release_periods``. What it spends depends on how its periods
compose (:data:`~dpgeo.budget.records.COMPOSITIONS`, docs/privacy.md §6,
"Series"). An append adds period rows to the series under a run id of its
own, with the lifecycle of a charge (reserved → completed, failed or
cancelled). These functions run inside a ledger transaction
(:mod:`dpgeo.budget.ledger`), so the checks and the rows they allow are
written under one lock: two appends of the same period cannot both pass.
"""

from __future__ import annotations

import numbers

from ..errors import ParameterError
from .records import COMPOSITIONS, PeriodRecord

__all__ = ["check_periods", "check_composition", "insert_periods", "period_records", "append_refusal",
           "set_period_status"]


def check_composition(composition, unit):
    if composition not in COMPOSITIONS:
        raise ParameterError(f"a series' composition must be one of {', '.join(COMPOSITIONS)}, got {composition!r}")
    if not isinstance(unit, str) or not unit:
        raise ParameterError("a series records its privacy unit (e.g. 'record:1' or 'person:5')")


def check_periods(periods) -> list:
    """``[(start, end, label), ...]`` checked: whole seconds, end after start, in order and disjoint."""
    out = []
    for p in periods:
        try:
            start, end, label = p
        except (TypeError, ValueError):
            raise ParameterError("a period is (start, end, label): seconds since the epoch (UTC) and a name") from None
        if not all(isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in (start, end)) \
                or not isinstance(label, str) or end <= start:
            raise ParameterError(f"period {label!r}: start and end are whole seconds since the epoch, end after start")
        out.append((int(start), int(end), label))
    if not out:
        raise ParameterError("a series has at least one period")
    for (a0, b0, l0), (a1, b1, l1) in zip(out, out[1:]):
        if a1 < b0:
            raise ParameterError(f"the periods of a series are in order and disjoint; {l0!r} and {l1!r} are not")
    return out


def insert_periods(conn, release_id, run_id, periods, epsilon_text, date):
    conn.executemany("INSERT INTO release_periods (release_id, run_id, period_start, period_end, label, epsilon, "
                     "status, date) VALUES (?, ?, ?, ?, ?, ?, 'reserved', ?)",
                     [(release_id, run_id, a, b, label, epsilon_text, date) for a, b, label in periods])


def period_records(conn, release_id, parse) -> tuple:
    rows = conn.execute("SELECT period_start, period_end, label, epsilon, run_id, status, date FROM release_periods "
                        "WHERE release_id = ? ORDER BY period_start, seq", (release_id,)).fetchall()
    return tuple(PeriodRecord(r[0], r[1], r[2], parse(r[3]), r[4], r[5], r[6]) for r in rows)


def set_period_status(conn, run_id, status, only_reserved=True) -> int:
    """Move the period rows of ``run_id`` to ``status``; returns how many changed."""
    cond = " AND status = 'reserved'" if only_reserved else ""
    return conn.execute(f"UPDATE release_periods SET status = ? WHERE run_id = ?{cond}", (status, run_id)).rowcount


def append_refusal(series, dataset, composition, unit, epsilon, periods, fmt, delta=0) -> str | None:
    """Why appending ``periods`` at ``epsilon`` (and ``delta``) to ``series`` (a ReleaseRecord) breaks the series'
    accounting, or None when it may be appended. ``dataset`` is the target dataset of the run."""
    sid = series.release_id
    if series.composition is None:
        return f"release {sid} is not a series: only a series takes appended periods"
    if series.dataset != dataset:
        return (f"series {sid} was released from dataset {series.dataset!r} and this run is charged to {dataset!r}: "
                f"an appended period is free only for the same people; name the dataset (--dataset "
                f"{series.dataset!r}, dataset=) if the input holds the same people, or start a new series")
    if series.status != "completed":
        return f"series {sid} is {series.status}, not completed: only a completed series takes appended periods"
    if series.composition == "one-pass":
        return (f"series {sid} caps each person's points over its own periods in one pass: a later period could hold "
                "another K points of the same person, so it would compose sequentially. Release it as a new series "
                "(charged in full), or use per-period caps (person_accounting='period', --person-accounting period)")
    if composition != series.composition or unit != series.unit:
        return (f"series {sid} protects {_unit_words(series.unit)} ({series.composition}); this run protects "
                f"{_unit_words(unit)} ({composition}): an appended period keeps the series' neighbouring relation")
    if series.composition == "parallel" and epsilon > series.epsilon:
        return (f"an appended period costs nothing more only at the series' epsilon or less ({fmt(series.epsilon)}); "
                f"this run asks for {fmt(epsilon)}. Run it with epsilon <= {fmt(series.epsilon)}, or as a new "
                "release charged in full")
    if delta > series.delta:  # the series' row holds its δ: charged once (parallel) or per period (sequential)
        return (f"an appended period may use at most the series' delta ({fmt(series.delta)}); this run asks for "
                f"{fmt(delta)}. Run it with delta <= {fmt(series.delta)}, or as a new release charged in full")
    used = [p for p in series.periods if p.status != "cancelled"]
    for a, b, label in periods:
        for p in used:
            if a < p.end and p.start < b:
                return (f"period {label} overlaps period {p.label} of series {sid}, which is already released (or "
                        "being released): the records of an instant are released once in a series. Append only "
                        "periods after the series' last one")
    return None


def _unit_words(unit):
    kind, _, n = (unit or "").partition(":")
    if kind == "person":
        return f"one person with at most {n} points"
    return f"one record with at most {n} point(s)"

