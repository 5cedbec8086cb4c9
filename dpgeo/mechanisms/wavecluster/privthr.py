"""PrivTHR: noisy counts plus a noisy count of the non-positive coefficients (Chen, Yu & Chirkova).

The count grid gets discrete Laplace noise with ``ε₁ = α·ε`` (α =
``count_split``, default 0.9), and the number ``|Z|`` of non-positive
coefficients of the *true* approximation is released once with
``ε₂ = (1 - α)·ε``. The number of significant coefficients is estimated from
``|Z|′`` (``k_rule``) and that many of the largest noisy coefficients are
significant.

Privacy
-------
Neighbouring data sets differ by one record of at most ``s`` points.

1. ``|Z|′ = |Z| + DLap(exp(-ε₂/Δ|Z|))``: ``|Z|`` is an integer statistic
   whose sensitivity ``Δ|Z| = max(S⁺, S⁻)`` (at most ``s`` times the largest
   number of positive or negative taps of one cell, capped at the number of
   coefficients) is computed for the actual grid, wavelet and mode by
   :func:`~.transform.approximation_sensitivity`; so ``|Z|′`` is ε₂-DP.
2. ``M′ = C + DLap(exp(-ε₁/s))`` per universe cell: ε₁-DP (as in
   :mod:`.privqt`).
3. By sequential composition ``(M′, |Z|′)`` is ε-DP. The threshold, the
   significant set, ``k′``, the labels and the report are computed from
   ``(M′, |Z|′)``, the public number of coefficients ``N_W``, ``p`` and
   ``q`` only: post-processing. The true ``|Z|`` is never reported.

The three ``k_rule`` values differ only in post-processing: ``"direct"``
estimates ``|L| = N_W - |Z|′``; ``"prune"`` discards ``π·|Z|′`` of the
smallest noisy positives, π being the probability that the integer noise
lifts a zero coefficient above 0 (a function of public ``q`` and the filter);
``"prune-half"`` is the paper's π = 1/2 (right for continuous noise only).
Proof and measured biases: ``docs/privacy.md`` §5.5.2 and §5.6.2.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from ...noise import sample_discrete_laplace, split_epsilon, sum_sf
from ._checks import _check_split
from .cells import WaveClusterCells, _finish
from .privqt import _noisy_counts
from .thresholds import _json_float, _n_nonsignificant, _threshold_from_positives
from .transform import _coef_shape, _exact_approximation, _filter, _sign_z3, approximation_sensitivity

__all__: list[str] = []


@lru_cache(maxsize=256)
def _positive_noise_probability(wavelet: str, q: float) -> float:
    """``π = Pr[noise on a zero interior coefficient > 0]`` for count noise of decay ``q``.

    Depends only on public quantities. The noise on a coefficient is
    ``Σ_c K_c·Z_c`` over the 2-D kernel ``K`` with i.i.d. discrete Laplace
    ``Z_c``; by symmetry ``π = (1 - Pr[noise = 0]) / 2``. Haar: exact from
    the negative-binomial form of a sum of 4 draws. Rational filters: the
    atom at 0 is the mean of the characteristic function over a fine
    periodic grid (exact up to aliasing of mass beyond ±2**17, far in the
    tail). db2: Monte Carlo with a fixed public seed (±0.002).
    """
    filt = _filter(wavelet)
    if filt.name == "haar":
        return float(sum_sf(0, 4, q)[0])
    if filt.b is None:
        k = np.outer(filt.a, filt.a).ravel()
        k = k[k != 0]
        # grid fine enough that the mass of |S| >= n/2 (aliased onto 0) is nil
        sd = math.sqrt(float(np.sum(k.astype(float) ** 2)) * 2.0 * q) / (1.0 - q)
        n = 1 << max(12, min(24, int(math.ceil(math.log2(128.0 * sd + 1.0)))))
        theta = 2.0 * np.pi * np.arange(n) / n
        logphi = np.zeros(n)
        for kc in k:
            # φ(θ) = (1-q)² / (1 - 2q cos θ + q²) for one discrete Laplace draw
            logphi += 2 * math.log1p(-q) - np.log1p(-2 * q * np.cos(kc * theta) + q * q)
        atom = float(np.mean(np.exp(logphi)))
        return 0.5 * (1.0 - min(max(atom, 0.0), 1.0))
    gen = np.random.Generator(np.random.PCG64(20160315))
    a, b = np.array(filt.a), np.array(filt.b)
    kp = (np.outer(a, a) + 3 * np.outer(b, b)).ravel()
    kq = (np.outer(a, b) + np.outer(b, a)).ravel()
    draws = 200_000
    # a public estimate (fixed seed, no private input): numpy's float sampler is fine here
    z = gen.geometric(1.0 - q, (draws, kp.size)) - gen.geometric(1.0 - q, (draws, kp.size))
    s = _sign_z3(z @ kp, z @ kq)
    return float(np.mean(s > 0))


def _privthr_rank(m_noisy: int, noisy_z: int, n_coef: int, p_micro: int, k_rule: str,
                  pi: float | None) -> tuple[int, int]:
    """How many of the ``m_noisy`` noisy positives fall below the threshold.

    Post-processing of the noisy ``|Z|′`` (and the public sizes) only.

    ``"direct"``: ``|L|`` is ``N_W - |Z|``, so ``m̂ = N_W - |Z|′`` (clamped to
    ``[0, m_noisy]``) and ``k̂ = m̂ - floor(p·m̂/100)``; the threshold keeps the
    ``k̂`` largest noisy coefficients. ``"prune"`` / ``"prune-half"``: the
    paper's rule, discard the ``round(π·|Z|′)`` smallest noisy positives and
    take the percentile of the rest.

    Returns ``(n_drop, k_target)``: the threshold is the ``(n_drop + 1)``-th
    smallest noisy positive value.
    """
    if k_rule == "direct":
        m_hat = min(max(n_coef - noisy_z, 0), m_noisy)
        k_hat = m_hat - _n_nonsignificant(m_hat, p_micro)
        return m_noisy - k_hat, k_hat
    r = int(min(max(math.floor(pi * max(noisy_z, 0) + 0.5), 0), m_noisy))
    m2 = m_noisy - r
    n0 = _n_nonsignificant(m2, p_micro)
    return r + n0, m2 - n0


def _privthr_cells(c, uni, *, filt, mode, percentile, p_micro, s, eps, gen, report, count_split,
                   k_rule) -> WaveClusterCells:
    """PrivTHR on checked counts ``c`` (see :func:`.cells._start` and :func:`.cells._start_private`)."""
    alpha = _check_split(count_split, "privthr")
    eps1, eps2 = split_epsilon(eps, alpha)  # eps1 + eps2 <= eps exactly
    sens = approximation_sensitivity(c.shape, wavelet=filt.name, mode=mode, percentile=percentile,
                                     sensitivity=s)

    true_coefs = _exact_approximation(c, filt, mode)
    n_z = int(true_coefs.P.size - int(true_coefs.positive().sum()))
    dz = sens["nonpositive_count"]
    qz = math.exp(-eps2 / dz)
    noisy_z = int(n_z + int(sample_discrete_laplace(gen, 1, epsilon=eps2, sensitivity=dz)[0]))
    del true_coefs
    noisy, q = _noisy_counts(c, uni, eps1, s, gen)
    # ---- post-processing of (noisy, noisy_z) only ----
    wn_coefs = _exact_approximation(noisy, filt, mode)
    pos, w = wn_coefs.positive(), wn_coefs.normalised()
    vals = w[pos]
    n_coef = int(np.prod(_coef_shape(c.shape, filt, mode)))
    pi = None if k_rule == "direct" else (
        0.5 if k_rule == "prune-half" else _positive_noise_probability(filt.name, q))
    n_drop, k_target = _privthr_rank(vals.size, noisy_z, n_coef, p_micro, k_rule, pi)
    t = _threshold_from_positives(vals, n_drop)
    sig = pos & (w >= t)
    report.update({
        "count_split": alpha,
        "epsilon_split": {"counts": eps1, "nonpositive_count": eps2},
        "sensitivities": {"counts": s, "nonpositive_count": dz},
        "noise_q": {"counts": q, "nonpositive_count": qz},
        "noisy_nonpositive_count": noisy_z,
        "k_rule": k_rule,
        "prune_fraction": pi,
        "n_positive_noisy": int(vals.size),
        "k_target": k_target,
        "threshold": _json_float(t),
        "threshold_rule": ">=",
    })
    return _finish(sig, c.shape, filt, report, noisy, q)
