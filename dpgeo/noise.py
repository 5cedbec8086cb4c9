"""Random generators and integer noise (the discrete Laplace distribution).

dpgeo adds *integer* noise to integer counts: the two-sided geometric, or
discrete Laplace, distribution with

.. math:: \\Pr[Z = z] = \\frac{1-q}{1+q}\\, q^{|z|},\\qquad q = e^{-\\varepsilon/\\Delta},

for a statistic of L1 sensitivity :math:`\\Delta` released with budget
:math:`\\varepsilon` (Ghosh, Roughgarden & Sundararajan 2009). Adding ``Z`` to
every count of a histogram of sensitivity ``Δ`` is ε-differentially private.
Integer noise avoids the floating-point attacks on textbook Laplace samplers
(Mironov 2012): every output is an integer whose probability is fixed by the
formula above.

Samples are drawn as the difference of two independent geometric variables,
which has exactly this distribution. Tail probabilities of sums of such noise
(needed for the bound Γ and for confidence intervals) are computed exactly
from the fact that a sum of ``k`` geometric variables is negative binomial.

The generator is a NumPy ``PCG64DXSM`` bit generator seeded with 128 bits
from the operating system's CSPRNG (:mod:`secrets`). A user-supplied seed is
for tests only; results made with one are marked not private.
"""

from __future__ import annotations

import functools
import math
import secrets
from dataclasses import dataclass

import numpy as np
from scipy import stats

from .errors import ParameterError

__all__ = [
    "NoiseSource",
    "make_generator",
    "discrete_laplace_q",
    "sample_discrete_laplace",
    "sample_discrete_laplace_tail",
    "discrete_laplace_pmf",
    "discrete_laplace_sf",
    "discrete_laplace_variance",
    "sum_sf",
    "sum_abs_bound",
    "sum_positive_part_sf",
    "sum_positive_part_bound",
    "sum_interval_halfwidth",
]


@dataclass
class NoiseSource:
    """A random generator plus the fact of whether it was seeded by the user.

    Parameters
    ----------
    generator : numpy.random.Generator
    seeded : bool
        ``True`` when the seed came from the caller (reproducible, therefore
        **not** private).
    """

    generator: np.random.Generator
    seeded: bool


def make_generator(seed: int | None = None) -> NoiseSource:
    """Return the generator every mechanism draws its noise from.

    Parameters
    ----------
    seed : int or None
        ``None`` (the default, the only private choice) seeds the generator
        with 128 bits from :func:`secrets.randbits`, i.e. the operating
        system's CSPRNG. An integer makes the run reproducible, for tests;
        the result's metadata then says it is not differentially private.

    Examples
    --------
    >>> src = make_generator()
    >>> src.seeded
    False
    >>> make_generator(7).seeded
    True
    """
    if seed is None:
        entropy = secrets.randbits(128)
        seeded = False
    else:
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
            raise ParameterError(f"seed must be a non-negative integer or None, got {seed!r}")
        entropy = int(seed)
        seeded = True
    bitgen = np.random.PCG64DXSM(np.random.SeedSequence(entropy))
    return NoiseSource(np.random.Generator(bitgen), seeded)


def discrete_laplace_q(epsilon: float, sensitivity: float = 1.0) -> float:
    """Return ``q = exp(-epsilon / sensitivity)``, the decay of the noise."""
    _check_eps(epsilon)
    if not sensitivity > 0:
        raise ParameterError(f"sensitivity must be > 0, got {sensitivity!r}")
    return math.exp(-epsilon / sensitivity)


def sample_discrete_laplace(rng: np.random.Generator, q: float, size) -> np.ndarray:
    """Draw integer noise with ``Pr[Z=z] ∝ q**|z|`` as ``int64``.

    ``Z = G1 - G2`` with ``G1, G2`` i.i.d. geometric on {0, 1, ...} with
    success probability ``1 - q``; the difference has exactly the discrete
    Laplace law.

    Examples
    --------
    >>> rng = make_generator(0).generator
    >>> z = sample_discrete_laplace(rng, 0.5, 4)
    >>> z.dtype
    dtype('int64')
    """
    _check_q(q)
    p = 1.0 - q
    g1 = rng.geometric(p, size=size)
    g2 = rng.geometric(p, size=size)
    g1 -= g2  # both are >= 1; the +1 offsets cancel
    return g1.astype(np.int64, copy=False)


def sample_discrete_laplace_tail(rng: np.random.Generator, q: float, theta: int, size) -> np.ndarray:
    """Draw ``Z`` conditioned on ``Z >= theta`` (``theta >= 1``).

    For integers ``z >= theta >= 1``, ``Pr[Z=z | Z>=theta] = (1-q) q**(z-theta)``,
    so ``Z - theta`` is geometric on {0, 1, ...}.
    """
    _check_q(q)
    if theta < 1:
        raise ParameterError(f"theta must be >= 1 for a tail sample, got {theta}")
    return (theta - 1 + rng.geometric(1.0 - q, size=size)).astype(np.int64, copy=False)


def discrete_laplace_pmf(z, q: float) -> np.ndarray:
    """Probability mass ``Pr[Z = z]`` of the discrete Laplace law."""
    z = np.abs(np.asarray(z, dtype=float))
    return (1.0 - q) / (1.0 + q) * q**z


def discrete_laplace_sf(t, q: float) -> np.ndarray:
    """``Pr[Z >= t]`` for integer ``t`` (for ``t >= 1`` it is ``q**t / (1+q)``)."""
    t = np.asarray(t, dtype=float)
    pos = q ** np.maximum(t, 0) / (1.0 + q)
    neg = 1.0 - q ** np.maximum(1 - t, 0) / (1.0 + q)
    return np.where(t >= 1, pos, neg)


def discrete_laplace_variance(q: float) -> float:
    """Variance ``2q / (1-q)**2`` of one discrete Laplace draw."""
    return 2.0 * q / (1.0 - q) ** 2


def _nbinom(k: int, q: float):
    # number of failures before k successes, success probability 1-q:
    # the sum of k geometric variables on {0, 1, ...}
    return stats.nbinom(k, 1.0 - q)


def sum_sf(t, k: int, q: float) -> np.ndarray:
    """Exact ``Pr[S > t]`` for ``S`` the sum of ``k`` i.i.d. discrete Laplace draws.

    ``S = A - B`` with ``A, B`` i.i.d. negative binomial ``NB(k, 1-q)``, so
    ``Pr[S > t] = sum_b Pr[B=b] Pr[A > b + t]``. The sum over ``b`` is cut
    where the remaining mass of ``B`` is below 1e-300 of the total.
    """
    if k < 1:
        raise ParameterError(f"k must be >= 1, got {k}")
    _check_q(q)
    nb = _nbinom(k, q)
    mean = k * q / (1 - q)
    sd = math.sqrt(k * q) / (1 - q)
    bmax = int(mean + 40 * sd + 40 / max(-math.log(q), 1e-12)) + 10
    b = np.arange(bmax + 1)
    wb = nb.pmf(b)
    t = np.atleast_1d(np.asarray(t, dtype=np.int64))
    out = np.array([float(np.sum(wb * nb.sf(b + tt))) for tt in t])
    return out


def sum_abs_bound(k: int, q: float, tail: float) -> int:
    """Smallest integer ``G >= 0`` with ``Pr[|S| > G] <= tail``.

    ``S`` is the sum of ``k`` i.i.d. discrete Laplace draws with decay ``q``;
    by symmetry ``Pr[|S| > G] = 2 Pr[S > G]``.

    Examples
    --------
    >>> import math
    >>> sum_abs_bound(1, math.exp(-1.0), 0.05)  # one draw at epsilon = 1
    3
    """
    if not 0 < tail < 1:
        raise ParameterError(f"tail probability must be in (0, 1), got {tail}")
    return _smallest_t(lambda t: 2.0 * sum_sf(t, k, q)[0], tail, k, q)


def sum_positive_part_sf(t, k: int, q: float) -> np.ndarray:
    """Exact ``Pr[sum_i max(Z_i, 0) > t]`` for ``k`` i.i.d. discrete Laplace ``Z_i``.

    ``Pr[Z >= 1] = q / (1+q)`` and, given ``Z >= 1``, ``Z - 1`` is geometric;
    so with ``J ~ Bin(k, q/(1+q))`` positive draws the sum is
    ``J + NB(J, 1-q)``.
    """
    _check_q(q)
    t = np.atleast_1d(np.asarray(t, dtype=np.int64))
    j = np.arange(1, k + 1)
    wj = stats.binom.pmf(j, k, q / (1 + q))
    out = []
    for tt in t:
        if tt < 0:
            out.append(1.0)
            continue
        # Pr[J + NB(J) > tt] = Pr[NB(J) > tt - J] = sf(tt - J)
        out.append(float(np.sum(wj * stats.nbinom.sf(tt - j, j, 1.0 - q))))
    return np.array(out)


def sum_positive_part_bound(k: int, q: float, tail: float) -> int:
    """Smallest integer ``G >= 0`` with ``Pr[sum max(Z_i, 0) > G] <= tail``."""
    if not 0 < tail < 1:
        raise ParameterError(f"tail probability must be in (0, 1), got {tail}")
    return _smallest_t(lambda t: sum_positive_part_sf(t, k, q)[0], tail, k, q)


def sum_interval_halfwidth(k: int, q: float, level: float = 0.95) -> int:
    """Half-width ``h`` of the central interval ``[S-h, S+h]`` for a sum of ``k`` noises.

    The smallest integer with ``Pr[|noise sum| > h] <= 1 - level``; used for
    the confidence interval of a cluster's noisy count. Exact (through the
    characteristic function of the truncated law, truncation error below
    1e-15) for ``k <= 256``, normal approximation beyond, where it is
    accurate to well under one count at the 95% level.

    Examples
    --------
    >>> import math
    >>> sum_interval_halfwidth(1, math.exp(-1.0))
    3
    """
    k = int(k)
    if k <= 0:
        return 0
    if k > _EXACT_INTERVAL_MAX_K:
        z = stats.norm.isf((1.0 - level) / 2.0)
        return int(math.ceil(z * math.sqrt(k * discrete_laplace_variance(q))))
    return _halfwidth_exact(k, float(q), float(level))


_EXACT_INTERVAL_MAX_K = 256


@functools.lru_cache(maxsize=4096)
def _halfwidth_exact(k: int, q: float, level: float) -> int:
    _check_q(q)
    # support of one noise truncated where q**L < 1e-17
    L = int(math.ceil(-39.2 / math.log(q))) + 1
    n = 1 << int(math.ceil(math.log2(2 * L * k + 1)))
    z = np.arange(-L, L + 1)
    pmf = np.zeros(n)
    pmf[z % n] = discrete_laplace_pmf(z, q)
    dist = np.fft.irfft(np.fft.rfft(pmf) ** k, n)  # circular, no wrap-around since n > 2Lk
    dist = np.clip(dist, 0.0, None)
    support = np.where(np.arange(n) < n // 2, np.arange(n), np.arange(n) - n)
    order = np.argsort(support)
    s, p = support[order], dist[order]
    # Pr[|S| > h] = 2 Pr[S > h]; tail sums from the top
    tail_above = np.cumsum(p[::-1])[::-1]  # Pr[S >= s_i]
    pos = s >= 0
    # Pr[S > h] = Pr[S >= h + 1], for h = 0, 1, ...
    gt = np.r_[tail_above[pos][1:], 0.0]
    return int(s[pos][np.argmax(2.0 * gt <= 1.0 - level)])


def _smallest_t(tail_fn, target: float, k: int, q: float) -> int:
    hi = 1
    while tail_fn(hi) > target:
        hi *= 2
        if hi > 1 << 40:  # pragma: no cover - impossible for valid inputs
            raise ParameterError("noise bound does not converge; check epsilon")
    lo = -1  # tail_fn(-1) > target always (Pr[|S| > -1] = 1)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if tail_fn(mid) > target:
            lo = mid
        else:
            hi = mid
    return int(hi)


def _check_eps(epsilon):
    if not (isinstance(epsilon, (int, float, np.floating)) and math.isfinite(epsilon) and epsilon > 0):
        raise ParameterError(f"epsilon must be a finite number > 0, got {epsilon!r}")


def _check_q(q):
    if not 0.0 < q < 1.0:
        raise ParameterError(f"noise decay q = exp(-epsilon/sensitivity) must be in (0, 1), got {q!r}")
