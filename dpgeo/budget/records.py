"""What the ledger returns: one release's row, a dataset's budget, and the check that a charge fits."""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

from ..errors import BudgetExceededError
from .amounts import format_exact

__all__ = ["ReleaseRecord", "PeriodRecord", "DatasetBudget", "CHARGED", "STATUSES", "STATUS_LABELS", "COMPOSITIONS"]

#: How the periods of a series compose (docs/privacy.md §6, "Series"):
#: ``parallel`` — one record lies in one period: the series costs its ε once, and a later period appended with the
#: same or a smaller ε costs nothing more; ``one-pass`` — per person, the cap counted over the whole series in one
#: pass: the series costs ε once and takes no appended period; ``sequential`` — per person, the cap counted in each
#: period: every period costs its ε.
COMPOSITIONS = ("parallel", "one-pass", "sequential")

#: Status of a release row: the first three count as spent.
CHARGED = ("reserved", "completed", "failed")
STATUSES = CHARGED + ("cancelled",)
#: How each status is shown to people (``dpgeo budget show``, the service's job status).
STATUS_LABELS = {"reserved": "incomplete", "completed": "completed", "failed": "spent, no release",
                 "cancelled": "cancelled"}


@dataclass(frozen=True)
class PeriodRecord:
    """One period of a series in the ledger: its public bounds (seconds since the epoch, UTC; end excluded),
    label, ε, the run that released it (the series itself or an append) and that run's status."""

    start: int
    end: int
    label: str
    epsilon: Fraction
    run_id: str
    status: str
    date: str

    @property
    def charged(self) -> bool:
        return self.status in CHARGED

    def to_dict(self) -> dict:
        from ..periods import iso_utc

        return {"period_start": iso_utc(self.start), "period_end": iso_utc(self.end), "label": self.label,
                "epsilon": float(self.epsilon), "run_id": self.run_id, "status": self.status, "date": self.date}


@dataclass(frozen=True)
class ReleaseRecord:
    """One row of the ledger: a release (or an attempt at one) of a dataset.

    ``status`` is ``"completed"``; ``"reserved"`` (charged, not completed:
    running now, or stopped by a crash); ``"failed"`` (charged: stopped after
    noise may have been drawn, nothing released; shown as "spent, no
    release"); or ``"cancelled"`` (stopped before any noise was drawn: not
    charged). ``date`` is the UTC day, never a time of day.

    A **series** (``composition`` set) is one row with its ``periods``
    (:class:`PeriodRecord`); ``epsilon`` is then the ε of each period and
    :attr:`cost` what the series spends (see :data:`COMPOSITIONS`).
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
    composition: str | None = None
    unit: str | None = None
    periods: tuple = ()

    @property
    def charged(self) -> bool:
        """Whether this row counts as spent."""
        return self.status in CHARGED

    @property
    def cost(self) -> tuple:
        """``(ε, δ)`` this release spends from its dataset: its own for a release; for a series, ε once
        (``parallel``, ``one-pass``) or each charged period's own ε (``sequential``)."""
        return series_cost(self.composition, self.epsilon, self.delta, self.status,
                           [p.epsilon for p in self.periods if p.charged])

    def to_dict(self) -> dict:
        """JSON-ready: ε and δ as the nearest floats."""
        d = {"release_id": self.release_id, "date": self.date, "mechanism": self.mechanism,
             "epsilon": float(self.epsilon), "delta": float(self.delta), "analyst": self.analyst,
             "status": self.status, "charged": self.charged, "outputs": list(self.outputs)}
        if self.composition is not None:
            d.update(composition=self.composition, privacy_unit=self.unit, spent_epsilon=float(self.cost[0]),
                     periods=[p.to_dict() for p in self.periods])
        return d


def series_cost(composition, epsilon, delta, status, charged_period_epsilons):
    """What a ledger row spends: ``(ε, δ)``, exact.

    ``charged_period_epsilons`` holds the ε of each of a series' charged periods, as recorded with the period:
    a ``sequential`` series spends their sum (a period appended at another ε than the series' is charged its
    own), and the series' δ for each of them (an append's δ is at most the series'). Other rows spend their
    ε and δ once, when charged.
    """
    zero = Fraction(0)
    if composition == "sequential":
        eps = list(charged_period_epsilons)
        return sum(eps, zero), delta * len(eps)
    if status not in CHARGED:
        return zero, zero
    return epsilon, delta


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


def check_fits(b: DatasetBudget, eps, dlt):
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
