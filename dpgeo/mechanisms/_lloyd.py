"""Nearest-centre assignment and Lloyd's iterations shared by the k-means family.

Internal: :mod:`dpgeo.mechanisms.kmeans` uses :func:`nearest_2d` (a private
run's assignment of each point to its nearest public centroid), and the two
comparison systems (:mod:`~dpgeo.mechanisms.eppkm`,
:mod:`~dpgeo.mechanisms.diffhwt`) use :func:`lloyd`, the plain
(non-private) algorithm. Nothing here draws noise.
"""

from __future__ import annotations

import numpy as np

#: Points processed at once by the brute-force assignment (bounds the temporary memory).
_CHUNK = 1 << 18


def nearest_2d(x: np.ndarray, y: np.ndarray, cx: np.ndarray, cy: np.ndarray) -> np.ndarray:
    """Index of the nearest centre of every point (ties: the lowest index).

    Each point's index depends on that point and the centres only, which is
    what the sensitivity arguments of DP k-means need.

    Examples
    --------
    >>> import numpy as np
    >>> nearest_2d(np.array([0.0, 9.0]), np.array([0.0, 0.0]), np.array([1.0, 10.0]), np.array([0.0, 0.0]))
    array([0, 1])
    """
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    cx = np.asarray(cx, dtype=float)
    cy = np.asarray(cy, dtype=float)
    out = np.zeros(x.size, dtype=np.int64)
    for a in range(0, x.size, _CHUNK):
        xs, ys = x[a:a + _CHUNK], y[a:a + _CHUNK]
        best = np.full(xs.size, np.inf)
        arg = out[a:a + _CHUNK]
        for j in range(cx.size):
            d = (xs - cx[j]) ** 2 + (ys - cy[j]) ** 2
            closer = d < best
            best[closer] = d[closer]
            arg[closer] = j
    return out


def nearest_rows(X: np.ndarray, C: np.ndarray) -> np.ndarray:
    """Index of the nearest row of ``C`` for every row of ``X`` (any dimension; ties: lowest index)."""
    X = np.asarray(X, dtype=float)
    C = np.asarray(C, dtype=float)
    if X.shape[1] == 2:
        return nearest_2d(X[:, 0], X[:, 1], C[:, 0], C[:, 1])
    out = np.zeros(X.shape[0], dtype=np.int64)
    for a in range(0, X.shape[0], _CHUNK):
        xs = X[a:a + _CHUNK]
        best = np.full(xs.shape[0], np.inf)
        arg = out[a:a + _CHUNK]
        for j in range(C.shape[0]):
            d = ((xs - C[j]) ** 2).sum(axis=1)
            closer = d < best
            best[closer] = d[closer]
            arg[closer] = j
    return out


def lloyd(X: np.ndarray, k: int, rng: np.random.Generator, *, init: str = "points", max_iter: int = 100,
          tol: float = 0.0):
    """Lloyd's k-means on the rows of ``X`` (not private).

    Parameters
    ----------
    X : numpy.ndarray, shape (n, d)
    k : int
    rng : numpy.random.Generator
        Source of the initialisation.
    init : {"points", "++"}
        ``"points"``: ``k`` distinct rows chosen uniformly at random (as in
        Lloyd's algorithm and EPP-KM's Algorithm 1); ``"++"``: k-means++.
    max_iter : int
        Iterations at most.
    tol : float
        Stop when no centre moves by more than ``tol`` (default 0: until the
        assignment no longer changes).

    Returns
    -------
    centres : numpy.ndarray, shape (k, d)
    labels : numpy.ndarray of int64, shape (n,)
    n_iter : int
    """
    X = np.asarray(X, dtype=float)
    n = X.shape[0]
    if n == 0:
        raise ValueError("k-means needs at least one point")
    k = min(int(k), n)
    if init == "points":
        C = X[rng.choice(n, size=k, replace=False)].copy()
    elif init == "++":
        C = np.empty((k, X.shape[1]))
        C[0] = X[rng.integers(n)]
        d2 = ((X - C[0]) ** 2).sum(axis=1)
        for j in range(1, k):
            total = d2.sum()
            i = rng.choice(n, p=d2 / total) if total > 0 else rng.integers(n)
            C[j] = X[i]
            d2 = np.minimum(d2, ((X - C[j]) ** 2).sum(axis=1))
    else:
        raise ValueError(f"init must be 'points' or '++', got {init!r}")
    labels = nearest_rows(X, C)
    it = 0
    for it in range(1, max_iter + 1):
        counts = np.bincount(labels, minlength=k)
        sums = np.stack([np.bincount(labels, weights=X[:, j], minlength=k) for j in range(X.shape[1])], axis=1)
        new = C.copy()
        nz = counts > 0
        new[nz] = sums[nz] / counts[nz, None]  # an empty cluster keeps its centre
        moved = float(np.abs(new - C).max()) if k else 0.0
        C = new
        new_labels = nearest_rows(X, C)
        if np.array_equal(new_labels, labels) or (tol > 0 and moved <= tol):
            labels = new_labels
            break
        labels = new_labels
    return C, labels, it
