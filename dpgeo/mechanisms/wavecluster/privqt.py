"""PrivQT: WaveCluster on noisy counts (Chen, Yu & Chirkova, EDBT 2016).

Discrete Laplace noise on every count of the grid with all of ε, then
WaveCluster on the noisy counts.

Privacy
-------
Neighbouring data sets differ by one record of at most ``s`` points
(``sensitivity``), so the count grid has L1 sensitivity ``s``. Every cell of
the public universe gets i.i.d. discrete Laplace noise with decay
``q = exp(-ε/s)``, so the noisy grid ``M′ = C + Z`` is ε-DP (the geometric
mechanism). The approximation of ``M′``, its positives, the percentile
threshold, the components and the report are computed from ``M′`` and
public parameters only: post-processing. The released noisy counts and
their ``q`` are part of this ε. Proof: ``docs/privacy.md`` §5.6.1.

:func:`_noisy_counts` is also the count step of :mod:`.privthr` and
:mod:`.privthr_em`, which spend ``α·ε`` on it.
"""

from __future__ import annotations

import math

import numpy as np

from ...noise import sample_discrete_laplace
from .cells import WaveClusterCells, _finish
from .thresholds import _json_float, _n_nonsignificant, _threshold_from_positives
from .transform import _exact_approximation

__all__: list[str] = []


def _noisy_counts(c, universe, eps_counts, s, rng) -> tuple[np.ndarray, float]:
    q = math.exp(-eps_counts / s)
    if universe is None:
        noisy = c + sample_discrete_laplace(rng, c.shape, epsilon=eps_counts, sensitivity=s)
    else:
        noisy = np.zeros_like(c)
        noisy[universe] = c[universe] + sample_discrete_laplace(rng, int(universe.sum()), epsilon=eps_counts,
                                                                sensitivity=s)
    return noisy, q


def _privqt_cells(c, uni, *, filt, mode, p_micro, s, eps, gen, report) -> WaveClusterCells:
    """PrivQT on checked counts ``c`` (see :func:`.cells._start` and :func:`.cells._start_private`)."""
    noisy, q = _noisy_counts(c, uni, eps, s, gen)
    wn_coefs = _exact_approximation(noisy, filt, mode)
    pos, w = wn_coefs.positive(), wn_coefs.normalised()
    m = int(pos.sum())
    t = _threshold_from_positives(w[pos], _n_nonsignificant(m, p_micro))
    sig = pos & (w >= t)
    report.update({
        "epsilon_split": {"counts": eps},
        "sensitivities": {"counts": s},
        "noise_q": {"counts": q},
        "n_positive_noisy": m,
        "threshold": _json_float(t),
        "threshold_rule": ">=",
    })
    return _finish(sig, c.shape, filt, report, noisy, q)
