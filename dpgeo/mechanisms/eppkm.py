"""EPP-KM: "error preserving private" k-means by bootstrap aggregation — **NOT differentially private**.

A comparison system, implemented so that dpgeo can show what it does and
does not protect. It is never a publishable layer.

The method (Nguyen, Gupta, Rana & Venkatesh, "Privacy aware k-means
clustering with high utility", PAKDD 2016, Algorithm 1), with the paper's
parameter names: ``K`` clusters and ``B`` bootstrap bags.

1. Initialise the ``K`` centroids with ``K`` data points drawn at random.
2. Run Lloyd's algorithm (assign each point to its nearest centroid,
   recompute each centroid as the mean of its points) until the assignment
   no longer changes.
3. In the last iteration compute each centroid by bagging: draw ``B`` bags
   of ``N_k`` points with replacement from cluster ``C_k`` (``N_k = |C_k|``),
   average each bag, and publish the average of the ``B`` bag means. This
   equals ``Σ_i τ_i x_i / (B·N_k)`` with ``(τ_i)`` multinomial
   ``(B·N_k; 1/N_k, …)``, which is how it is drawn here (same law, one call).

The paper calls its guarantee *error preserving privacy* (EPP) with a
*leakage parameter* ε: an adversary who knows every point but ``x_r`` and
estimates ``x_r``'s j-th attribute from the published centroid,
``x̂_rj = N_k·m_kj − Σ_{i ∈ C_k, i ≠ r} x_ij``, must not reduce the variance
of its error by more than a factor ``exp(ε)`` compared with an estimate made
without ``x_r`` in the data; since ``τ_r ~ Binomial(B·N_k, 1/N_k)`` (mean
``B``, variance ``B(1 − 1/N_k)``), a *smaller* ``B`` leaves a larger
variance, and the paper derives an upper bound on ``B`` from ε (their
Eqs. 7–8, one cluster membership known, "EPP-KM (1)"; Eqs. 11–12, unknown,
"EPP-KM (2)"). Those equations are not legible in the copy of the paper we
work from, so ``B`` is taken here as the parameter it is; the utility of
EPP-KM is that of k-means up to a bootstrap error of standard deviation
``σ_k/√(B·N_k)`` for every ``B >= 1``, and the verdict below holds for every
``B``.

Privacy under dpgeo's neighbouring relation: none
--------------------------------------------------
EPP constrains the variance of one particular estimator, not the
distribution of the output, and the output is a resampling average of the
data points themselves, with no noise. Take ``K = 1``, a data set ``D'`` of
``N − 1`` points with diameter ``r`` and ``D = D' ∪ {x_r}`` with ``x_r``
farther than ``2·B·N·r`` from ``D'``. On ``D'`` the published centroid is a
weighted mean of ``D'``, inside its convex hull, with probability 1. On
``D`` it is ``(τ_r·x_r + Σ τ_i x_i)/(B·N)``: when ``τ_r = 0`` it is inside the
hull, and when ``τ_r >= 1`` it is more than ``r`` from every point of the
hull. So the event "outside the hull" has probability
``1 − (1 − 1/N)^{B·N} >= 1 − e^{−B}`` on ``D`` and 0 on ``D'``: for **every**
ε the mechanism is not (ε, δ)-DP for any ``δ < 1 − e^{−B}`` (≥ 0.63 for
``B = 1``), under add/remove and equally under replacement. (With all of
``D'`` at one point, ``r = 0`` and any other ``x_r`` will do.) On top of
that the initial centroids are data points and the Lloyd iterations are
exact, so the cluster structure itself (which points fall together) is
published without protection. ``tests/test_eppkm.py`` runs this
membership attack. The results carry ``differentially_private: false`` with
these reasons and cannot be written as a layer.

Examples
--------
>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> x = np.r_[rng.normal(0, 1, 60), rng.normal(5, 1, 60), rng.normal(4, 1, 60)]
>>> y = np.r_[rng.normal(0, 1, 60), rng.normal(0, 1, 60), rng.normal(4, 1, 60)]
>>> res = eppkm(x, y, K=3, B=10, rng=np.random.default_rng(1))
>>> res.centroids.shape, res.metadata["differentially_private"]
((3, 2), False)
>>> res.to_file("out.gpkg")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
dpgeo.errors.OutputError: EPP-KM is NOT differentially private ...
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field

import numpy as np

from ..errors import OutputError, ParameterError
from ._lloyd import lloyd, nearest_rows

__all__ = ["EPPKMResult", "eppkm", "NOT_DP_REASONS", "membership_delta"]

#: Why EPP-KM is not differentially private (written into every result's metadata).
NOT_DP_REASONS = [
    "EPP-KM adds no noise: each published centroid is a bootstrap average of the cluster's own points",
    "a record far from the others (more than 2·B·N times their diameter) puts the output outside their "
    "convex hull with probability >= 1 - exp(-B), and never without the record: not (epsilon, delta)-DP "
    "for any epsilon and any delta < 1 - exp(-B)",
    "the initial centroids are data points and Lloyd's iterations are exact (no privacy mechanism)",
    "'error preserving privacy' bounds the variance of one estimator, not the distribution of the output",
]


def membership_delta(B: int, N: int) -> float:
    """Probability that a record is drawn at least once into ``B`` bags of ``N`` (``1 − (1 − 1/N)^{BN}``).

    The δ below which EPP-KM is not (ε, δ)-DP for any ε (module notes).

    Examples
    --------
    >>> round(membership_delta(1, 60), 3), round(membership_delta(10, 60), 6)
    (0.635, 0.999958)
    """
    return 1.0 - (1.0 - 1.0 / N) ** (B * N)


def _refusal(method: str) -> OutputError:
    return OutputError(
        f"{method} is NOT differentially private (see its metadata 'not_private_reasons'); its result "
        "cannot be written as a publishable layer. Use DP k-means (dpgeo.mechanisms.kmeans) for a "
        "publishable k-means layer.")


@dataclass
class EPPKMResult:
    """Result of :func:`eppkm`. **Not differentially private**; for comparisons only.

    Attributes
    ----------
    centroids : numpy.ndarray, shape (K, d)
        The bagged centroids (in the input's coordinates).
    labels : numpy.ndarray of int64
        Cluster of every input point, 1..K (nearest published centroid).
    metadata : dict
        ``differentially_private: false``, ``publishable: false`` and the
        reasons; ``K``, ``B``, iterations.
    """

    centroids: np.ndarray
    labels: np.ndarray = field(repr=False)
    metadata: dict

    @property
    def differentially_private(self) -> bool:
        return False

    def label_points(self, x, y) -> np.ndarray:
        """Cluster id (1..K) of the nearest published centroid of each point."""
        X = np.column_stack([np.asarray(x, float), np.asarray(y, float)])
        return 1 + nearest_rows(X, self.centroids)

    def to_file(self, *args, **kwargs):
        """Refuse: EPP-KM output is not a publishable layer."""
        raise _refusal("EPP-KM")


def _check_int(v, name, lo=1):
    if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < lo:
        raise ParameterError(f"{name} must be an integer >= {lo}, got {v!r}")
    return int(v)


def eppkm(x, y=None, *, K: int, B: int, max_iter: int = 300, rng=None) -> EPPKMResult:
    """EPP-KM (Algorithm 1 of the paper) on points or rows. **Not differentially private.**

    Parameters
    ----------
    x, y : array_like
        Coordinates of the points; or ``x`` an ``(n, d)`` array and ``y``
        omitted.
    K : int
        Number of clusters.
    B : int
        Number of bootstrap bags of the final centroids (``B >= 1``).
    max_iter : int
        Lloyd iterations at most before the bagging step.
    rng : numpy.random.Generator or int, optional
        Source of the initial points and of the bags.

    Returns
    -------
    EPPKMResult
    """
    X = np.asarray(x, dtype=float)
    if y is not None:
        X = np.column_stack([X.ravel(), np.asarray(y, dtype=float).ravel()])
    if X.ndim != 2 or X.shape[0] == 0 or not np.isfinite(X).all():
        raise ParameterError("EPP-KM needs a non-empty (n, d) array of finite coordinates")
    K = _check_int(K, "K (number of clusters)")
    B = _check_int(B, "B (number of bootstrap bags)")
    max_iter = _check_int(max_iter, "max_iter")
    if K > X.shape[0]:
        raise ParameterError(f"K={K} clusters need at least K points; got {X.shape[0]}")
    gen = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    centres, labels, n_iter = lloyd(X, K, gen, init="points", max_iter=max_iter)
    out = centres.copy()
    sizes = np.bincount(labels, minlength=K)
    for k in range(K):
        idx = np.flatnonzero(labels == k)
        nk = idx.size
        if nk == 0:
            continue
        tau = gen.multinomial(B * nk, np.full(nk, 1.0 / nk))  # multiplicities over the B bags
        out[k] = (tau[:, None] * X[idx]).sum(axis=0) / (B * nk)
    final = nearest_rows(X, out)
    md = {
        "mechanism": "EPP-KM (Nguyen et al., PAKDD 2016): k-means with bootstrap-aggregated centroids",
        "method": "eppkm",
        "differentially_private": False,
        "publishable": False,
        "not_private_reasons": list(NOT_DP_REASONS),
        "K": K,
        "B": B,
        "lloyd_iterations": int(n_iter),
        "membership_delta_lower_bound": 1.0 - math.exp(-B),
        "cluster_sizes": [int(v) for v in sizes],  # exact: one more reason this is not private
    }
    return EPPKMResult(centroids=out, labels=1 + final, metadata=md)
