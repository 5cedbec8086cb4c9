"""What the ledger returns: one release's row, a dataset's budget, and the check that a charge fits."""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

from ..errors import BudgetExceededError
from .amounts import format_exact

__all__ = ["ReleaseRecord", "DatasetBudget", "CHARGED", "STATUSES", "STATUS_LABELS"]

#: Status of a release row: the first three count as spent.
CHARGED = ("reserved", "completed", "failed")
STATUSES = CHARGED + ("cancelled",)
#: How each status is shown to people (``dpgeo budget show``, the service's job status).
STATUS_LABELS = {"reserved": "incomplete", "completed": "completed", "failed": "spent, no release",
                 "cancelled": "cancelled"}


@dataclass(frozen=True)
class ReleaseRecord:
    """One row of the ledger: a release (or an attempt at one) of a dataset.

    ``status`` is ``"completed"``; ``"reserved"`` (charged, not completed:
    running now, or stopped by a crash); ``"failed"`` (charged: stopped after
    noise may have been drawn, nothing released; shown as "spent, no
    release"); or ``"cancelled"`` (stopped before any noise was drawn: not
    charged). ``date`` is the UTC day, never a time of day.
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
