"""The laws of dpgeo's discrete Laplace noise and of sums of it: tails, bounds, interval half-widths.

Utility figures only — no draw is made here (:mod:`dpgeo.noise` draws): the
bound Γ of the spans' sandwich guarantee, the 95% intervals of released
counts, the p-values of the density floor. A sum of ``k`` discrete Laplace
noises of decay ``q`` is the difference of two negative binomial variables,
so its tails are exact sums of negative binomial terms; where those would
be too many (tiny ε), a continuous bound that is valid and at most
``2k + 1`` wider is used (``docs/privacy.md``).
"""

from __future__ import annotations

import functools
import math

import numpy as np

from .errors import ParameterError

__all__ = [
    "discrete_laplace_pmf",
    "discrete_laplace_sf",
    "discrete_laplace_variance",
    "sum_sf",
    "sum_abs_bound",
    "sum_positive_part_sf",
    "sum_positive_part_bound",
    "sum_interval_halfwidth",
    "sum_law_terms",
    "interval_fft_size",
    "gamma_difference_sf",
    "continuous_abs_bound",
    "EXACT_INTERVAL_MAX_FFT",
    "EXACT_SUM_MAX_TERMS",
]


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


def _stats():
    """scipy.stats, imported when first needed (it costs a command about 0.3 s to start)."""
    from scipy import stats

    return stats


def _nbinom(k: int, q: float):
    # number of failures before k successes, success probability 1-q:
    # the sum of k geometric variables on {0, 1, ...}
    return _stats().nbinom(k, 1.0 - q)


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
    b = np.arange(sum_law_terms(k, q))
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
    if sum_law_terms(k, q) > EXACT_SUM_MAX_TERMS:  # tiny epsilon: the exact law would take minutes
        return continuous_abs_bound(k, q, tail)
    return _smallest_t(lambda t: 2.0 * sum_sf(t, k, q)[0], tail, k, q)


#: Largest support of the exact law of a noise sum (:func:`sum_sf`) that the bounds compute term by term
#: (a fraction of a second); beyond it (epsilon below about 0.005) they use :func:`continuous_abs_bound`.
EXACT_SUM_MAX_TERMS = 1 << 16
#: Largest FFT of the exact interval (:func:`sum_interval_halfwidth`), about 200 MB; beyond it the same.
EXACT_INTERVAL_MAX_FFT = 1 << 22


def sum_law_terms(k: int, q: float) -> int:
    """Terms :func:`sum_sf` sums for ``k`` noises of decay ``q`` (its memory and time grow with this)."""
    mean = k * q / (1 - q)
    sd = math.sqrt(k * q) / (1 - q)
    return int(mean + 40 * sd + 40 / max(-math.log(q), 1e-12)) + 11


def _interval_half_support(q: float) -> int:
    """``L``: one noise's law is cut to ``[-L, L]``, where ``q**L < 1e-17``."""
    return int(math.ceil(-39.2 / math.log(q))) + 1


def interval_fft_size(k: int, q: float) -> int:
    """FFT size of the exact interval of a sum of ``k`` noises of decay ``q`` (no wrap-around: ``> 2Lk``)."""
    return 1 << int(math.ceil(math.log2(2 * _interval_half_support(q) * k + 1)))


def gamma_difference_sf(u: float, k: int) -> float:
    """``Pr[G1 - G2 > u]`` for ``G1, G2`` i.i.d. Gamma(k, 1) and ``u >= 0``: the tail of a sum of ``k``
    continuous Laplace(1) variables.

    ``E[Pr[G1 > u + G2]]`` by Simpson's rule on 40,001 points over the
    support of ``G2`` (cut where its remaining mass is below 1e-25); the
    integrand is smooth, and the result agrees with adaptive quadrature to
    about 1e-10 relative.

    Examples
    --------
    >>> import math
    >>> abs(gamma_difference_sf(1.0, 1) / (0.5 * math.exp(-1.0)) - 1) < 1e-10  # one Laplace(1) variable
    True
    """
    from scipy import integrate, special

    k = int(k)
    y = np.linspace(0.0, k + 60.0 * math.sqrt(k) + 60.0, 40001)
    with np.errstate(divide="ignore"):
        log_pdf = (k - 1) * np.log(y) - y - special.gammaln(k) if k > 1 else -y
    return float(integrate.simpson(np.exp(log_pdf) * special.gammaincc(k, u + y), x=y))


@functools.lru_cache(maxsize=1024)
def continuous_abs_bound(k: int, q: float, tail: float) -> int:
    """An integer ``G`` with ``Pr[|S| > G] <= tail`` for ``S`` a sum of ``k`` discrete Laplace draws,
    through the continuous Laplace law; at most ``2k + 1`` above the smallest such integer.

    A discrete Laplace draw of decay ``q`` is ``floor(E1) - floor(E2)`` with
    ``E1, E2`` i.i.d. exponential of mean ``b = 1 / -ln q`` (``Pr[floor(E) >= g]
    = q**g``), so ``S = C - R`` with ``C`` a sum of ``k`` continuous
    Laplace(b) variables and ``|R| < k``. If ``|S| > G`` then ``|C| > G - k``;
    with ``G = ceil(b u) + k`` and ``2 Pr[G1 - G2 > u] <= tail``,
    ``Pr[|S| > G] <= tail``. Conversely ``|C| < |S| + k``, so ``b u`` is at
    most the smallest such integer plus ``k``. Used where the exact law is
    too large to compute (tiny ε), where ``2k`` is far below one part in a
    thousand of ``G``.

    Examples
    --------
    >>> import math
    >>> q = math.exp(-0.5)
    >>> sum_abs_bound(4, q, 0.01) <= continuous_abs_bound(4, q, 0.01) <= sum_abs_bound(4, q, 0.01) + 9
    True
    """
    from scipy import optimize

    _check_q(q)
    if not 0 < tail < 1:
        raise ParameterError(f"tail probability must be in (0, 1), got {tail}")
    k = int(k)
    b = 1.0 / -math.log(q)

    def excess(u):
        return 2.0 * gamma_difference_sf(u, k) * (1.0 + 1e-8) - tail  # a margin for the quadrature error

    if excess(0.0) <= 0:  # 2 Pr[D > 0] = 1 > tail always; kept for safety
        u = 0.0
    else:
        hi = 1.0
        while excess(hi) > 0:
            hi *= 2.0
        u = optimize.brentq(excess, 0.0, hi, xtol=1e-12, rtol=1e-12)
        while excess(u) > 0:  # the root from above: the tail at u must not exceed ``tail``
            u = math.nextafter(u, math.inf) * (1 + 1e-12)
    return int(math.ceil(b * u)) + k


def sum_positive_part_sf(t, k: int, q: float) -> np.ndarray:
    """Exact ``Pr[sum_i max(Z_i, 0) > t]`` for ``k`` i.i.d. discrete Laplace ``Z_i``.

    ``Pr[Z >= 1] = q / (1+q)`` and, given ``Z >= 1``, ``Z - 1`` is geometric;
    so with ``J ~ Bin(k, q/(1+q))`` positive draws the sum is
    ``J + NB(J, 1-q)``.
    """
    _check_q(q)
    t = np.atleast_1d(np.asarray(t, dtype=np.int64))
    j = np.arange(1, k + 1)
    stats = _stats()
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
    accurate to well under one count at the 95% level. For tiny ε, where the
    exact law would need more than ``EXACT_INTERVAL_MAX_FFT`` points, the
    interval is :func:`continuous_abs_bound`: valid, at most ``2k + 1`` wider.

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
        z = _stats().norm.isf((1.0 - level) / 2.0)
        return int(math.ceil(z * math.sqrt(k * discrete_laplace_variance(q))))
    if interval_fft_size(k, q) > EXACT_INTERVAL_MAX_FFT:  # tiny epsilon: a valid interval, at most 2k + 1 wider
        return continuous_abs_bound(k, q, 1.0 - level)
    return _halfwidth_exact(k, float(q), float(level))


_EXACT_INTERVAL_MAX_K = 256


@functools.lru_cache(maxsize=4096)
def _halfwidth_exact(k: int, q: float, level: float) -> int:
    _check_q(q)
    L, n = _interval_half_support(q), interval_fft_size(k, q)
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


def _check_q(q):
    if not 0.0 < q < 1.0:
        raise ParameterError(f"noise decay q = exp(-epsilon/sensitivity) must be in (0, 1), got {q!r}")
