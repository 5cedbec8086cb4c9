"""Privacy audit of dpgeo's mechanisms on neighbouring data sets.

The method and its statistics; the scenarios (neighbouring data sets, events,
exact laws) and the injected breaks are in ``privacy_audit_scenarios.py``.
Shared by ``tests/test_privacy_audit.py`` (short audits with computed error
rates) and ``benchmarks/audit_privacy.py`` (long audits, ε lower bounds).

Method
------
A mechanism ``M`` is ε-DP when, for neighbouring data sets ``D`` and ``D′``
and every set ``S`` of outputs, ``Pr[M(D′) ∈ S] ≤ e^ε · Pr[M(D) ∈ S]`` (and
the same with ``D``, ``D′`` swapped). Each :class:`Scenario` fixes ``D``,
``D′`` (one record, or one person under the cap ``K``, apart) and an output
event ``S`` at which the ratio of the correct mechanism is **exactly** ``e^ε``
(for the exponential mechanism, as close to it as that mechanism allows), so
that a mechanism with twice the privacy loss — half the noise scale, a
component given twice its share of the budget, a sensitivity factor
dropped — has a ratio near ``e^{2ε}`` there.

The audit runs ``M`` ``n`` times on ``D′`` (``x`` runs land in ``S``) and
``n`` times on ``D`` (``y`` runs), and computes the Clopper–Pearson lower
bound of ``Pr[S | D′]`` and upper bound of ``Pr[S | D]``, each at one-sided
level ``γ``; ``ε̂ = ln(lower / upper)`` is a lower confidence bound on the
privacy loss at ``S``. The audit **fails** when ``ε̂ > ε``.

Error rates (computed exactly, :func:`rejection_probability`): ``x`` and
``y`` are independent binomials, and the audit fails exactly when ``x`` is at
least a threshold that depends on ``y``; summing over ``y`` gives the
probability of failing for given true probabilities. At the mechanism's own
law this is its **false-failure rate**; at the law of a broken mechanism it
is the **power**. :func:`worst_case_false_failure` takes the largest
false-failure rate over *every* ε-DP mechanism (every pair of probabilities
with ratio ≤ e^ε), which holds whatever the sampler.

Nothing here depends on how the noise is sampled: the mechanisms are called
through their usual entry points, and :func:`noise_rng` is the one place
that knows how a seeded random source is made.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from scipy import stats

from dpgeo.noise import NoiseSource

#: One-sided level of each Clopper–Pearson bound of an audit.
GAMMA = 1e-6


def noise_rng(seed: int):
    """The random source a mechanism stage takes, seeded (tests only).

    The only function here that knows the generator API: the stages take a
    seeded :class:`dpgeo.noise.NoiseSource`.
    """
    return NoiseSource(seed)


# ---------------------------------------------------------------------------
# statistics
# ---------------------------------------------------------------------------


def cp_lower(x, n: int, gamma: float = GAMMA):
    """Clopper–Pearson lower bound of a binomial probability (one-sided level ``gamma``)."""
    x = np.asarray(x)
    lo = stats.beta.ppf(gamma, np.maximum(x, 1), n - x + 1)
    return np.where(x == 0, 0.0, lo)


def cp_upper(y, n: int, gamma: float = GAMMA):
    """Clopper–Pearson upper bound of a binomial probability (one-sided level ``gamma``)."""
    y = np.asarray(y)
    hi = stats.beta.ppf(1.0 - gamma, y + 1, np.maximum(n - y, 1))
    return np.where(y == n, 1.0, hi)


def epsilon_lower_bound(x: int, y: int, n: int, m: int | None = None, gamma: float = GAMMA) -> float:
    """``ln(lower(x/n) / upper(y/m))``: a lower confidence bound on the privacy loss at an event.

    ``x`` of ``n`` runs on the favoured data set and ``y`` of ``m`` (default
    ``n``) runs on the other one fell in the event. ``-inf`` when ``x = 0``.
    """
    m = n if m is None else m
    lo = float(cp_lower(x, n, gamma))
    hi = float(cp_upper(y, m, gamma))
    return -math.inf if lo == 0.0 else math.log(lo / hi)


@functools.cache
def _threshold_table(n: int, epsilon: float, gamma: float) -> np.ndarray:
    """``x*(y)``: the audit fails iff ``x >= x*(y)`` (lower(x) > e^ε·upper(y))."""
    k = np.arange(n + 1)
    lo = cp_lower(k, n, gamma)
    hi = cp_upper(k, n, gamma)
    return np.searchsorted(lo, math.exp(epsilon) * hi, side="right")


def rejection_probability(n: int, p_favoured: float, p_other: float, epsilon: float,
                          gamma: float = GAMMA) -> float:
    """Exact probability that an audit of ``n`` + ``n`` runs fails.

    ``p_favoured`` = Pr[S | D′], ``p_other`` = Pr[S | D]. With the correct
    mechanism's probabilities this is the false-failure rate; with a broken
    one's, the power.
    """
    xstar = _threshold_table(n, float(epsilon), float(gamma))
    y = np.arange(n + 1)
    with np.errstate(divide="ignore", over="ignore", under="ignore", invalid="ignore"):  # tails of extreme p
        return float(np.sum(_binom_pmf(y, n, p_other) * _binom_sf(xstar - 1, n, p_favoured)))


def _binom_pmf(k, n, p):
    if p <= 0.0 or p >= 1.0:  # a point mass (scipy warns on these)
        return (k == (0 if p <= 0.0 else n)).astype(float)
    return stats.binom.pmf(k, n, p)


def _binom_sf(k, n, p):
    """``Pr[X > k]``."""
    if p <= 0.0 or p >= 1.0:
        return ((0 if p <= 0.0 else n) > k).astype(float)
    return stats.binom.sf(k, n, p)


def worst_case_false_failure(n: int, epsilon: float, gamma: float = GAMMA, points: int = 600) -> float:
    """Largest failure probability over every ε-DP law of the event.

    The failure region is increasing in ``Pr[S | D′]`` and decreasing in
    ``Pr[S | D]``, so the supremum over ``Pr[S | D′] ≤ e^ε Pr[S | D]`` lies on
    the boundary ``Pr[S | D′] = min(1, e^ε Pr[S | D])``; it is evaluated on a
    fine geometric grid of ``Pr[S | D]``, refined just below the corner
    ``Pr[S | D] = e^{-ε}``, ``Pr[S | D′] = 1`` (where the maximum lies for the
    audits here).
    """
    corner = math.exp(-epsilon)
    p0 = np.r_[np.geomspace(1e-6, 1.0, points), np.linspace(0.9 * corner, corner, 101)]
    return max(rejection_probability(n, min(1.0, math.exp(epsilon) * p), p, epsilon, gamma) for p in p0)


# ---------------------------------------------------------------------------
# the harness
# ---------------------------------------------------------------------------


@dataclass
class Scenario:
    """Neighbouring data sets, output events, and the exact law of the events.

    Attributes
    ----------
    name : str
    epsilon : float
        The privacy loss the events must respect (the whole ε, or the share
        of the component audited).
    n : int
        Runs per data set in the test.
    run : callable
        ``run(which, source) -> statistic`` with ``which`` in ``("D", "D'")``.
    events : list of (str, callable)
        ``(description, event(statistic) -> bool)``; each favours ``D′``.
        The audit fails when any of them gives ``ε̂ > ε``.
    laws : dict
        ``{"correct" or a break name: [(Pr[S | D′], Pr[S | D]) per event]}``, exact.
    neighbours : str
        What ``D`` and ``D′`` are.
    make_source : callable
        ``make_source(seed)``: the random source handed to ``run``.
    """

    name: str
    epsilon: float
    n: int
    run: Callable
    events: list
    laws: dict
    neighbours: str
    make_source: Callable = field(default=noise_rng)

    def false_failure(self, gamma: float = GAMMA) -> float:
        """Exact false-failure rate at the correct law (union over the events)."""
        return sum(rejection_probability(self.n, p1, p0, self.epsilon, gamma) for p1, p0 in self.laws["correct"])

    def worst_case_false_failure(self, gamma: float = GAMMA) -> float:
        """False-failure bound for *any* ε-DP mechanism on these events (union over the events)."""
        return len(self.events) * worst_case_false_failure(self.n, self.epsilon, gamma)

    def power(self, brk: str, gamma: float = GAMMA) -> float:
        """Probability that the audit fails under a break (at least its best event's)."""
        return max(rejection_probability(self.n, p1, p0, self.epsilon, gamma) for p1, p0 in self.laws[brk])


@dataclass
class AuditResult:
    epsilon: float
    n: int
    counts: list  # (events, x = runs on D′ in S, y = runs on D in S, ε lower bound) per event

    @property
    def epsilon_lb(self) -> float:
        return max(lb for _, _, _, lb in self.counts)

    @property
    def passed(self) -> bool:
        return self.epsilon_lb <= self.epsilon

    def __str__(self):
        parts = [f"'{text}': {x}/{self.n} runs on D′, {y}/{self.n} on D, ε ≥ {lb:.3f}"
                 for text, x, y, lb in self.counts]
        return "; ".join(parts) + f" (claimed ε = {self.epsilon:g})"


def collect(sc: Scenario, which: str, n: int, source) -> list:
    """``n`` outputs (statistics) of the mechanism on ``which``."""
    return [sc.run(which, source) for _ in range(n)]


def run_audit(sc: Scenario, seed: int, n: int | None = None, gamma: float = GAMMA) -> AuditResult:
    """Run the scenario's audit: ``n`` runs on ``D`` then ``n`` on ``D′`` from one seeded source."""
    n = sc.n if n is None else n
    src = sc.make_source(seed)
    out_d = collect(sc, "D", n, src)
    out_d1 = collect(sc, "D'", n, src)
    counts = []
    for text, ev in sc.events:
        y = sum(bool(ev(v)) for v in out_d)
        x = sum(bool(ev(v)) for v in out_d1)
        counts.append((text, x, y, epsilon_lower_bound(x, y, n, gamma=gamma)))
    return AuditResult(sc.epsilon, n, counts)


def rates_table(gamma: float = GAMMA) -> str:
    """Markdown table of every scenario's error rates (``python tests/privacy_audit.py``)."""
    header = ("| scenario | ε audited | runs per data set | ln ratio at the events | false failure | "
              "any ε-DP law ≤ | 1 − power, per injected break |")
    lines = [header, "|---|---|---|---|---|---|---|"]
    from privacy_audit_scenarios import all_scenarios

    for key, make in all_scenarios().items():
        sc = make()
        ratios = ", ".join(f"{math.log(p1 / p0):.3f}" for p1, p0 in sc.laws["correct"])
        miss = "; ".join(f"{b}: {max(1.0 - sc.power(b, gamma), 0.0):.1e}".replace("|", "\\|")
                         for b in sc.laws if b != "correct")
        lines.append(f"| {key} | {sc.epsilon:g} | {sc.n} | {ratios} | {sc.false_failure(gamma):.1e} | "
                     f"{sc.worst_case_false_failure(gamma):.1e} | {miss} |")
    return "\n".join(lines)


if __name__ == "__main__":
    import warnings

    warnings.simplefilter("ignore")
    print(rates_table())
