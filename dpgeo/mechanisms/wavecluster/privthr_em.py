"""PrivTHR_EM: noisy counts plus a threshold chosen by the exponential mechanism (Chen, Yu & Chirkova).

The count grid gets discrete Laplace noise with ``ε₁ = α·ε`` (α =
``count_split``, default 0.7); the significance threshold is drawn once with
``ε₂ = (1 - α)·ε`` from a *public* list of candidates, scored by how far the
number of true coefficients above the candidate is from the target
``k = m - floor(p·m/100)``. The significant coefficients are the noisy ones
above the chosen threshold.

Privacy
-------
Neighbouring data sets differ by one record of at most ``s`` points.

* *Output range.* The candidates (:func:`em_candidates`) depend on public
  parameters only (the wavelet and a public cap on points per cell), not on
  the data — the paper's candidates, split at the true coefficient values,
  would leak. Coefficients above every candidate need no clipping: the
  score counts coefficients.
* *Exponential mechanism.* Candidate ``t`` is output with probability
  ``∝ exp(ε₂·u(t) / (2·Δu))``, ``u(t) = -|c(t) - k|``, with ``Δu`` computed
  for the actual grid by :func:`~.transform.approximation_sensitivity`. The
  factor 2 is needed because ``u`` is not monotone in the data. Hence
  ε₂-DP (McSherry & Talwar). The draw is exact (integer scores, rejection
  with exact Bernoulli(exp(-γ)) trials: :func:`dpgeo.noise.sample_exponential_mechanism`),
  one draw per release.
* ``M′ = C + DLap(exp(-ε₁/s))``: ε₁-DP (as in :mod:`.privqt`).
* Sequential composition: ``(M′, t*)`` is ε-DP; the significant set, ``k′``,
  the labels and the report are post-processing. Proof:
  ``docs/privacy.md`` §5.5.3 and §5.6.3.
"""

from __future__ import annotations

import math

import numpy as np

from ...noise import EM_SAMPLER, LAPLACE_SAMPLER, sample_exponential_mechanism, sampler_description, split_epsilon
from ._checks import _check_epsilon, _check_n_public, _check_split
from .cells import WaveClusterCells, _finish
from .privqt import _noisy_counts
from .thresholds import _n_nonsignificant
from .transform import SQRT3, _Coefs, _exact_approximation, _filter, _sign_z3, approximation_sensitivity

__all__ = ["em_candidates"]

# EM candidate thresholds (normalised units): every integer up to _EM_LINEAR,
# then a geometric grid with ratio 1 + 1/_EM_LINEAR up to the public cap
_EM_LINEAR = 64
_DEFAULT_COUNT_CAP = 10**7


def em_candidates(*, wavelet: str = "haar", count_cap: float | None = None,
                  n_public: int | None = None) -> np.ndarray:
    """Public candidate thresholds of the exponential mechanism (normalised units).

    Every integer ``0..64``, then ``64·(1 + 1/64)**j`` up to ``U = 4·cap·L1``
    where ``cap`` is ``count_cap`` (else ``n_public``, else 10**7 points per
    cell) and ``L1`` the L1 norm of the normalised 2-D filter. Depends on
    public parameters only. Coefficients above ``U`` are simply above every
    candidate; no clipping of the data is needed for privacy.

    Examples
    --------
    >>> c = em_candidates(count_cap=100)
    >>> int(c[0]), int(c[64]), bool(c[-1] >= 400)
    (0, 64, True)
    """
    filt = _filter(wavelet)
    if count_cap is not None:
        cap = _check_epsilon(count_cap, "count_cap")
    elif n_public is not None:
        cap = float(_check_n_public(n_public))
    else:
        cap = float(_DEFAULT_COUNT_CAP)
    l1 = (sum(abs(t) for t in filt.a) + SQRT3 * sum(abs(t) for t in (filt.b or ()))) ** 2 / filt.gain
    upper = max(4.0 * cap * l1, float(_EM_LINEAR))
    lin = np.arange(_EM_LINEAR + 1, dtype=np.float64)
    n_geo = int(math.ceil(math.log(upper / _EM_LINEAR) / math.log1p(1.0 / _EM_LINEAR)))
    geo = _EM_LINEAR * (1.0 + 1.0 / _EM_LINEAR) ** np.arange(1, n_geo + 1)
    return np.concatenate([lin, geo])


def _em_select(coefs: _Coefs, k: int, cand_norm: np.ndarray, eps: float, du: int, rng):
    """One exponential-mechanism draw over the public candidates (exact sampler).

    Returns ``(index, candidate thresholds in P units)``.
    """
    scale = coefs.filt.gain / 4.0  # normalised -> P units
    cand_p = np.unique(np.floor(cand_norm * scale).astype(np.int64))
    c = coefs.count_greater(cand_p)
    j = sample_exponential_mechanism(rng, -np.abs(c - k), epsilon=eps, sensitivity=du)
    return j, cand_p


def _privthr_em_cells(c, uni, *, filt, mode, percentile, p_micro, s, eps, gen, report, count_split, count_cap,
                      n_public) -> WaveClusterCells:
    """PrivTHR_EM on checked counts ``c`` (see :func:`.cells._start` and :func:`.cells._start_private`)."""
    alpha = _check_split(count_split, "privthr-em")
    eps1, eps2 = split_epsilon(eps, alpha)  # eps1 + eps2 <= eps exactly
    sens = approximation_sensitivity(c.shape, wavelet=filt.name, mode=mode, percentile=percentile,
                                     sensitivity=s)

    du = sens["em_quality"]
    cand = em_candidates(wavelet=filt.name, count_cap=count_cap, n_public=n_public)
    true_coefs = _exact_approximation(c, filt, mode)
    m = int(true_coefs.positive().sum())
    k = m - _n_nonsignificant(m, p_micro)
    j, cand_p = _em_select(true_coefs, k, cand, eps2, du, gen)
    del true_coefs, m, k
    noisy, q = _noisy_counts(c, uni, eps1, s, gen)
    # ---- post-processing of (noisy, chosen threshold) only ----
    t_p = int(cand_p[j])
    t = t_p * 4.0 / filt.gain
    wn_coefs = _exact_approximation(noisy, filt, mode)
    if wn_coefs.Q is None:
        sig = wn_coefs.P > t_p
    else:
        sig = _sign_z3(wn_coefs.P - t_p, wn_coefs.Q) > 0
    report["sampler"] = sampler_description(gen, LAPLACE_SAMPLER, EM_SAMPLER)
    report.update({
        "count_split": alpha,
        "epsilon_split": {"counts": eps1, "threshold": eps2},
        "sensitivities": {"counts": s, "em_quality": du},
        "noise_q": {"counts": q},
        "n_candidates": int(cand_p.size),
        "candidate_max": float(cand_p[-1] * 4.0 / filt.gain),
        "count_cap": None if count_cap is None else float(count_cap),
        "threshold": t,
        "threshold_rule": ">",
    })
    return _finish(sig, c.shape, filt, report, noisy, q)
