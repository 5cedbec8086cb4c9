"""Exact integer noise: the discrete Laplace distribution and the exponential mechanism.

dpgeo adds *integer* noise to integer counts: the two-sided geometric, or
discrete Laplace, distribution with

.. math:: \\Pr[Z = z] = \\frac{1-q}{1+q}\\, q^{|z|},\\qquad q = e^{-\\varepsilon/\\Delta},

for a statistic of L1 sensitivity :math:`\\Delta` released with budget
:math:`\\varepsilon` (Ghosh, Roughgarden & Sundararajan 2009). Adding ``Z`` to
every count of a histogram of sensitivity ``Δ`` is ε-differentially private.

**Exact sampling.** ``ε`` is taken as the exact binary value of the float
given and ``Δ`` as an exact integer (or binary float), so ``r = ε/Δ`` is a
rational number. A draw is ``Z = ±|Z|`` with the sign from one random bit
and ``|Z|`` from the remaining 63 bits of the same 64-bit word, compared
with the exact integer thresholds ``floor(Pr[|Z| >= k] · 2**63)`` computed
once per ``r`` with rigorous interval arithmetic; a word equal to a
threshold (probability ``2**-63``) is resolved with further words against
the exact binary expansion, and values beyond the table use the
memorylessness of the geometric tail. No floating-point number decides
any output: floats only guess the table position, and every guess is
checked against the integers (:mod:`dpgeo._exact` has the details and the
argument; ``docs/privacy.md`` the proof). The samples therefore have
*exactly* the law above, with no cut-off support: the guarantee is pure
ε-DP, ``δ = 0``.

**Randomness** comes from a :class:`NoiseSource`: a ChaCha20 keystream keyed
from :func:`os.urandom` unless a test seed or a caller's numpy Generator is
given (outputs then are not private).

The laws of this noise and of sums of it (tails, the bound Γ, interval
half-widths) are in :mod:`dpgeo.noise_laws`; they affect utility only, and
the public ones are importable from here too.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction

import numpy as np

from . import _exact
from .errors import ParameterError
from .randomness import NoiseSource, as_source
from .noise_laws import (  # noqa: F401 - the laws of the noise drawn here, importable from here too
    discrete_laplace_pmf,
    discrete_laplace_sf,
    discrete_laplace_variance,
    sum_sf,
    sum_abs_bound,
    sum_positive_part_sf,
    sum_positive_part_bound,
    sum_interval_halfwidth,
    sum_law_terms,
    interval_fft_size,
    gamma_difference_sf,
    continuous_abs_bound,
    EXACT_INTERVAL_MAX_FFT,
    EXACT_SUM_MAX_TERMS,
)

__all__ = [
    "NoiseSource",
    "as_source",
    "noise_rate",
    "noise_epsilon",
    "split_epsilon",
    "RATE_MIN",
    "RATE_MAX",
    "discrete_laplace_q",
    "sample_discrete_laplace",
    "sample_discrete_laplace_tail",
    "sample_tail_positions",
    "sample_exponential_mechanism",
    "bernoulli_exp",
    "sampler_description",
    "LAPLACE_SAMPLER",
    "EM_SAMPLER",
    "discrete_laplace_pmf",
    "discrete_laplace_sf",
    "discrete_laplace_variance",
    "sum_sf",
    "sum_abs_bound",
    "sum_positive_part_sf",
    "sum_positive_part_bound",
    "sum_interval_halfwidth",
]

#: What the discrete Laplace noise is drawn with (for metadata).
LAPLACE_SAMPLER = "discrete Laplace, exact integer inverse-CDF sampler"
#: What the exponential mechanism is drawn with (for metadata).
EM_SAMPLER = "exponential mechanism, exact rejection sampler with Bernoulli(exp(-γ)) (Canonne, Kamath & Steinke 2020)"

#: Smallest ε/Δ of any noise draw: below it the exact tables would not fit in memory.
RATE_MIN = Fraction(1, 1 << 40)
#: Largest ε/Δ of any noise draw. Above about 708, ``q = exp(-ε/Δ)`` is not a normal float and every
#: utility figure computed from it (bounds, intervals) breaks; already at 512 a draw is non-zero with
#: probability below 1e-222, i.e. the output is the exact count and no privacy is left. Refused up front.
RATE_MAX = Fraction(512)
_RATE_MIN, _RATE_MAX = RATE_MIN, RATE_MAX


def noise_epsilon(epsilon) -> Fraction:
    """The ε the noise realises for a float ``epsilon``, as an exact rational: never above its decimal value.

    The privacy-budget ledger charges the decimal a float prints as (``0.1``
    is charged as 1/10). The noise uses the float's exact binary value
    when that is not above the decimal, else the next float below (the
    binary value of ``0.1`` is 0.1000000000000000055…, so the noise uses
    0.09999999999999999167…). What is spent is therefore never more than
    what is charged, to the last bit, and the difference (one unit in the
    last place at most) changes no output in practice.

    Examples
    --------
    >>> noise_epsilon(0.5)
    Fraction(1, 2)
    >>> noise_epsilon(0.1) < Fraction(1, 10) < Fraction(0.1)
    True
    """
    _check_eps(epsilon)
    return _noise_epsilon(float(epsilon))


@functools.lru_cache(maxsize=1024)
def _noise_epsilon(f: float) -> Fraction:
    binary = Fraction(f)
    if binary <= Fraction(repr(f)):
        return binary
    return Fraction(math.nextafter(f, 0.0))  # above the midpoint below the decimal: below the decimal


def noise_rate(epsilon, sensitivity=1) -> Fraction:
    """``ε/Δ`` as an exact rational: `noise_epsilon` of ε over the exact value of ``Δ``.

    Examples
    --------
    >>> noise_rate(0.5, 3)
    Fraction(1, 6)
    """
    try:
        return _noise_rate(epsilon, sensitivity)
    except TypeError:  # unhashable argument: let the checks explain
        return _noise_rate.__wrapped__(epsilon, sensitivity)


@functools.lru_cache(maxsize=256)
def _noise_rate(epsilon, sensitivity) -> Fraction:
    _check_eps(epsilon)
    if isinstance(sensitivity, bool) or not isinstance(sensitivity, (int, float, np.integer, np.floating)) \
            or not (math.isfinite(sensitivity) and sensitivity > 0):
        raise ParameterError(f"sensitivity must be a finite number > 0, got {sensitivity!r}")
    r = noise_epsilon(epsilon) / Fraction(sensitivity if isinstance(sensitivity, (int, np.integer))
                                          else float(sensitivity))
    if not RATE_MIN <= r <= RATE_MAX:
        raise ParameterError(rate_error(float(r)))
    return r


def rate_error(rate: float, what="epsilon per unit of sensitivity") -> str:
    """The one-line refusal of a noise rate ε/Δ outside [`RATE_MIN`, `RATE_MAX`]."""
    if rate > RATE_MAX:
        return (f"{what} is {rate:g}, above the largest the noise supports ({int(RATE_MAX)}): at that epsilon the "
                "noise is almost surely zero, so the output would be the exact data and no privacy is left; "
                "choose a smaller epsilon")
    return (f"{what} is {rate:g}, below the smallest the exact noise sampler supports (2**-40, about 9.1e-13); "
            "choose a larger epsilon")


def split_epsilon(epsilon: float, share: float) -> tuple[float, float]:
    """Split a budget into ``(a, b)`` with ``a ≈ share·ε`` whose noise spends at most ``ε``, exactly.

    Floating-point products such as ``0.9 * eps`` and ``0.1 * eps`` can add
    up to one unit in the last place *more* than ``eps``; with the exact
    samplers that would be the budget actually spent. Here the parts are
    taken from exact rationals and rounded down, so that
    ``noise_epsilon(a) + noise_epsilon(b) <= noise_epsilon(ε)``: sequential
    composition spends at most what the ledger charges for ``ε``.

    Examples
    --------
    >>> a, b = split_epsilon(1.0, 0.9)
    >>> noise_epsilon(a) + noise_epsilon(b) <= 1
    True
    """
    return _split_epsilon(float(epsilon), float(share))


@functools.lru_cache(maxsize=256)
def _split_epsilon(epsilon: float, share: float) -> tuple[float, float]:
    _check_eps(epsilon)
    if not 0.0 < share < 1.0:
        raise ParameterError(f"cannot split epsilon={epsilon!r} with share {share!r}")
    whole = noise_epsilon(epsilon)
    first = float_at_most(whole * Fraction(share))
    second = float_at_most(whole - noise_epsilon(first)) if first > 0 else 0.0
    if not (first > 0 and second > 0):
        raise ParameterError(f"cannot split epsilon={epsilon!r} with share {share!r}")
    return first, second


def float_at_most(value: Fraction) -> float:
    """The largest float ``f`` with ``noise_epsilon(f) <= value`` (0.0 when there is none above 0).

    What a budget part computed exactly (a `fractions.Fraction`) becomes
    for the samplers, which take floats: never more than the part.

    Examples
    --------
    >>> float_at_most(Fraction(1, 10))
    0.1
    >>> noise_epsilon(float_at_most(Fraction(1, 3))) <= Fraction(1, 3)
    True
    """
    value = Fraction(value)
    if value <= 0:
        return 0.0
    f = float(value)
    while f > 0 and (not math.isfinite(f) or _noise_epsilon(f) > value):
        f = math.nextafter(f, 0.0)
    return f


def discrete_laplace_q(epsilon: float, sensitivity: float = 1.0) -> float:
    """Return ``q = exp(-epsilon / sensitivity)``, the decay of the noise (a float, for reports)."""
    _check_eps(epsilon)
    if not sensitivity > 0:
        raise ParameterError(f"sensitivity must be > 0, got {sensitivity!r}")
    q = math.exp(-epsilon / sensitivity)
    if not q < 1.0:  # ε/Δ below about 1e-16: the noise's law cannot be represented
        raise ParameterError(f"epsilon per unit of sensitivity ({epsilon / sensitivity:.3g}) is too small for the noise "
                             "to be computed; use a larger epsilon")
    return q


def _shape(size):
    shape = tuple(int(s) for s in size) if isinstance(size, (tuple, list)) else (int(size),)
    if any(s < 0 for s in shape):
        raise ParameterError(f"size must be non-negative, got {size!r}")
    return shape, math.prod(shape)


def sample_discrete_laplace(source, size, *, epsilon, sensitivity=1) -> np.ndarray:
    """Draw exact discrete Laplace noise ``Pr[Z=z] ∝ exp(-ε|z|/Δ)`` as ``int64``.

    Parameters
    ----------
    source : NoiseSource (or numpy Generator: then not private)
    size : int or tuple of int
    epsilon, sensitivity : float
        ``ε`` and the L1 sensitivity ``Δ``: ``noise_epsilon(ε)`` and the exact binary value of ``Δ``.

    Examples
    --------
    >>> z = sample_discrete_laplace(NoiseSource(seed=0), 4, epsilon=1.0)
    >>> z.dtype, z.shape
    (dtype('int64'), (4,))
    """
    r = noise_rate(epsilon, sensitivity)
    shape, n = _shape(size)
    return _exact.laplace(r, n, as_source(source)).reshape(shape)


def sample_discrete_laplace_tail(source, size, *, epsilon, sensitivity=1, theta: int) -> np.ndarray:
    """Draw ``Z`` conditioned on ``Z >= theta`` (``theta >= 1``), exactly.

    For integers ``z >= theta >= 1``, ``Pr[Z=z | Z>=theta] = (1-q) q**(z-theta)``,
    so ``Z - theta`` is geometric on {0, 1, ...} with ``Pr[G >= g] = q**g``.

    Examples
    --------
    >>> int(sample_discrete_laplace_tail(NoiseSource(seed=1), 5, epsilon=1.0, theta=3).min()) >= 3
    True
    """
    r = noise_rate(epsilon, sensitivity)
    theta = _check_theta(theta)
    shape, n = _shape(size)
    g = _exact.geometric(_exact.decay(r), n, as_source(source), cap=_exact.VALUE_CAP - theta)
    if n and int(g.max()) >= _exact.VALUE_CAP - theta:
        raise OverflowError("a noise value reached 2**62 (probability below 1e-1000); draw again")
    return (g + theta).reshape(shape)


def sample_tail_positions(source, n_trials: int, *, epsilon, sensitivity=1, theta: int) -> np.ndarray:
    """Sorted positions in ``[0, n_trials)`` of independent events of probability ``Pr[Z >= θ]``.

    ``Pr[Z >= θ] = q**θ / (1 + q)`` for discrete Laplace ``Z``. The gaps between
    events are geometric with ``Pr[gap >= g] = (1 - p)**g``, drawn exactly, so
    the set of positions has exactly the law of ``n_trials`` independent
    Bernoulli(p) trials; time and memory are proportional to the number of
    events, not to ``n_trials``.

    Examples
    --------
    >>> pos = sample_tail_positions(NoiseSource(seed=2), 10**12, epsilon=1.0, theta=30)
    >>> pos.dtype.name, bool((pos < 10**12).all())
    ('int64', True)
    """
    r = noise_rate(epsilon, sensitivity)
    theta = _check_theta(theta)
    n_trials = int(n_trials)
    if n_trials <= 0:
        return np.zeros(0, dtype=np.int64)
    if n_trials > 1 << 48:
        raise ParameterError(f"at most 2**48 trials, got {n_trials}")
    src = as_source(source)
    decay = _exact.decay(r, theta)
    p = math.exp(-float(r) * theta) / (1.0 + math.exp(-float(r)))
    mean = n_trials * p
    batch = int(min(max(mean + 6.0 * math.sqrt(mean) + 16.0, 16.0), 1 << 20))
    out, last = [], -1
    while True:
        gaps = _exact.geometric(decay, batch, src, cap=n_trials)  # a gap >= n_trials ends the run
        pos = last + np.cumsum(gaps + 1)
        k = int(np.searchsorted(pos, n_trials))  # positions are increasing
        out.append(pos[:k])
        if k < batch:
            return np.concatenate(out)
        last = int(pos[-1])


def sample_exponential_mechanism(source, utility, *, epsilon, sensitivity) -> int:
    """Index ``i`` drawn with probability ``∝ exp(ε · u_i / (2Δ))``, exactly.

    ``utility`` holds integers (``u_i``, higher is better) of sensitivity
    ``Δ``; the draw is ε-DP (McSherry & Talwar 2007). Rejection sampling:
    propose ``i`` uniformly, accept with probability
    ``exp(-γ (max u - u_i))``, ``γ = ε/(2Δ)`` rational, by the exact
    Bernoulli(exp(-γ)) of Canonne, Kamath & Steinke (2020). At most
    ``len(utility)`` proposals are needed on average (the best candidate is
    always accepted); the running time depends on the utilities.

    Examples
    --------
    >>> sample_exponential_mechanism(NoiseSource(seed=3), [0, -50, -100], epsilon=10.0, sensitivity=1)
    0
    """
    u = np.asarray(utility)
    if u.ndim != 1 or u.size == 0:
        raise ParameterError("utility must be a non-empty 1-D array of integers")
    if u.dtype.kind not in "iu" and not (np.all(np.isfinite(u)) and np.all(u == np.round(u))):
        raise ParameterError("utility must hold integers")
    _check_eps(epsilon)
    gamma = noise_epsilon(epsilon) / (2 * Fraction(sensitivity if isinstance(sensitivity, (int, np.integer))
                                                      else float(sensitivity)))
    if not gamma > 0:
        raise ParameterError(f"sensitivity must be > 0, got {sensitivity!r}")
    src = as_source(source)
    top = int(u.max())
    gaps = [top - int(v) for v in u.tolist()]
    n = len(gaps)
    a, b = gamma.numerator, gamma.denominator
    while True:
        i = src.below(n)
        if gaps[i] == 0 or _bernoulli_exp_ratio(src, a * gaps[i], b):
            return i


def bernoulli_exp(source, gamma) -> bool:
    """``True`` with probability ``exp(-gamma)`` for a rational ``gamma >= 0``, exactly.

    Canonne, Kamath & Steinke (2020), Algorithm 1: for ``γ <= 1``, count the
    successes ``K`` of Bernoulli(γ/1), Bernoulli(γ/2), ... up to the first
    failure; ``Pr[K even] = Σ (-γ)^k / k! = exp(-γ)``. For ``γ > 1``, one
    Bernoulli(exp(-1)) per unit of ``γ`` (stopping at the first failure),
    then the fractional part. Only integer comparisons of uniform integers.

    Examples
    --------
    >>> bernoulli_exp(NoiseSource(seed=0), 0)
    True
    """
    gamma = Fraction(gamma)
    if gamma < 0:
        raise ParameterError(f"gamma must be >= 0, got {gamma}")
    return _bernoulli_exp_ratio(as_source(source), gamma.numerator, gamma.denominator)


def _bernoulli_exp_ratio(src, a: int, b: int) -> bool:
    """Bernoulli(exp(-a/b)) for integers ``a >= 0``, ``b >= 1``."""
    whole, a = divmod(a, b)
    for _ in range(whole):  # stops at the first failure: about 1.6 rounds on average
        if not _bernoulli_exp_unit(src, 1, 1):
            return False
    return _bernoulli_exp_unit(src, a, b)


def _bernoulli_exp_unit(src, a: int, b: int) -> bool:
    """Bernoulli(exp(-a/b)) for integers ``0 <= a <= b``."""
    k = 0
    while True:  # the (k+1)-th trial succeeds with probability γ/(k+1): "below(b (k+1)) < a"
        if src.below(b * (k + 1)) >= a:
            return k % 2 == 0
        k += 1


def sampler_description(source, *samplers: str) -> str:
    """The ``sampler`` metadata entry: the exact samplers used and where the randomness came from.

    Examples
    --------
    >>> sampler_description(NoiseSource())
    'discrete Laplace, exact integer inverse-CDF sampler; ChaCha20 CSPRNG keyed from os.urandom'
    """
    parts = samplers or (LAPLACE_SAMPLER,)
    return "; ".join([*parts, as_source(source).description])


def _check_eps(epsilon):
    if not (isinstance(epsilon, (int, float, np.floating)) and math.isfinite(epsilon) and epsilon > 0):
        raise ParameterError(f"epsilon must be a finite number > 0, got {epsilon!r}")


def _check_theta(theta) -> int:
    if isinstance(theta, bool) or not isinstance(theta, (int, np.integer)) or theta < 1:
        raise ParameterError(f"theta must be an integer >= 1, got {theta!r}")
    return int(theta)
