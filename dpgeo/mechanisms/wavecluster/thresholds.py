"""Significant coefficients: the percentile rule on the positive coefficients.

*L, Z, k.* ``L`` is the set of coefficients with exact value ``> 0`` and
``Z`` the set with exact value ``<= 0``; ``|L| + |Z|`` is the (public)
number of coefficients. With ``m = |L|`` and ``p`` the percentile,
``n0 = floor(p·m/100)`` positives are non-significant and ``k = m - n0``;
the threshold is the ``k``-th largest positive value (the p-th percentile
of ``L``) and the significant coefficients are the positive ones ``>=`` it:
the ``k`` largest, plus any ties with the ``k``-th (as in WaveCluster, where
values *below* the percentile are not significant).

The percentile is handled as an integer number of millionths of a percent,
so that ``n0`` is exact and nondecreasing in ``m`` (the sensitivities of
:mod:`.transform` rely on that). Which values the rule is applied to — true,
noisy, or noisy with a privately estimated ``k`` — is the mechanism's
business (:mod:`.privqt`, :mod:`.privthr`, :mod:`.privthr_em`).
"""

from __future__ import annotations

import math

import numpy as np

from ._checks import _P_SCALE, _check_percentile

__all__ = ["significant_coefficients"]


def _n_nonsignificant(m: int, p_micro: int) -> int:
    return (p_micro * int(m)) // (100 * _P_SCALE)


def _threshold_from_positives(values: np.ndarray, n_drop: int) -> float:
    """The ``(n_drop + 1)``-th smallest of ``values``; ``inf`` if there is none.

    Significant coefficients are the positive ones ``>=`` this value.
    """
    n_drop = max(int(n_drop), 0)
    if n_drop >= values.size:
        return math.inf
    return float(np.partition(values, n_drop)[n_drop])


def significant_coefficients(coefficients, *, percentile: float = 60.0) -> tuple[np.ndarray, float]:
    """Non-private significance rule on (normalised) coefficients.

    Positive coefficients not below the p-th percentile of the positive
    ones: with ``m`` positives, the ``k = m - floor(p·m/100)`` largest and
    their ties (see the module notes).

    Returns
    -------
    (numpy.ndarray of bool, float)
        The significance mask and the threshold (significant: ``>=``).

    Examples
    --------
    >>> mask, t = significant_coefficients([[0, 1, 2], [3, 4, 5]], percentile=40)
    >>> int(mask.sum()), t
    (3, 3.0)
    """
    w = np.asarray(coefficients, dtype=np.float64)
    p_micro = _check_percentile(percentile)
    pos = w > 0
    vals = w[pos]
    t = _threshold_from_positives(vals, _n_nonsignificant(vals.size, p_micro))
    return pos & (w >= t), t


def _json_float(x: float):
    return None if not math.isfinite(x) else float(x)
