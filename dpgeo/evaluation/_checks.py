"""Argument checks and small helpers shared by the evaluation measures."""

from __future__ import annotations

import numbers

import numpy as np

from ..errors import ParameterError

__all__: list[str] = []


_NOISE_MODES = ("cluster", "singletons")


# ---------------------------------------------------------------------------
# validation helpers


def _coords(x, y):
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    if x.ndim != 1 or y.ndim != 1:
        raise ParameterError(
            f"x and y must be 1-D arrays of coordinates, got shapes {x.shape} and {y.shape}"
        )
    if x.shape != y.shape:
        raise ParameterError(
            f"x and y must have the same length, got {x.size} and {y.size}"
        )
    return x, y


def _int_array(a, name: str, *, ndim: int | None = 1) -> np.ndarray:
    """Return ``a`` as an int64 array of non-negative integers (0 = noise)."""
    arr = np.asarray(a)
    if ndim is not None and arr.ndim != ndim:
        raise ParameterError(f"{name} must be a {ndim}-D array, got shape {arr.shape}")
    if arr.dtype.kind == "b":
        raise ParameterError(f"{name} must hold integer cluster ids, not booleans")
    if arr.dtype.kind in "iu":
        out = arr.astype(np.int64, copy=False)
    elif arr.dtype.kind == "f":
        if arr.size and not (np.all(np.isfinite(arr)) and np.all(arr == np.round(arr))):
            raise ParameterError(
                f"{name} must hold integer cluster ids; found non-integer or non-finite values"
            )
        out = arr.astype(np.int64)
    elif arr.size == 0:
        out = arr.astype(np.int64)
    else:
        raise ParameterError(f"{name} must hold integer cluster ids, got dtype {arr.dtype}")
    if out.size and out.min() < 0:
        raise ParameterError(
            f"{name} must hold non-negative cluster ids with 0 for noise; if noise is -1 "
            "(as in scikit-learn's DBSCAN), map it first, e.g. np.where(l < 0, 0, l + 1)"
        )
    return out


def _label_pair(labels_true, labels_pred, *, names=("labels_true", "labels_pred")):
    a = _int_array(labels_true, names[0])
    b = _int_array(labels_pred, names[1])
    if a.shape != b.shape:
        raise ParameterError(
            f"{names[0]} and {names[1]} must label the same points, got lengths "
            f"{a.size} and {b.size}"
        )
    if a.size == 0:
        raise ParameterError(f"{names[0]} and {names[1]} are empty; give at least one point")
    return a, b


def _apply_noise(labels: np.ndarray, noise: str) -> np.ndarray:
    if noise not in _NOISE_MODES:
        raise ParameterError(f"noise must be one of {_NOISE_MODES}, got {noise!r}")
    if noise == "cluster":
        return labels
    is_noise = labels == 0
    n_noise = int(is_noise.sum())
    if n_noise == 0:
        return labels
    out = labels.copy()
    out[is_noise] = labels.max() + 1 + np.arange(n_noise, dtype=np.int64)
    return out


def _encode(a: np.ndarray, b: np.ndarray):
    """Compact codes and the non-zero cells of the contingency table of a, b.

    Returns ``(ua, a_inv, ub, b_inv, i, j, n_ij)`` where ``(i, j, n_ij)`` are
    the non-zero entries of the contingency table (rows = classes of a).
    """
    ua, a_inv = np.unique(a, return_inverse=True)
    ub, b_inv = np.unique(b, return_inverse=True)
    a_inv = a_inv.reshape(-1).astype(np.int64)
    b_inv = b_inv.reshape(-1).astype(np.int64)
    key = a_inv * ub.size + b_inv
    keys, n_ij = np.unique(key, return_counts=True)
    return ua, a_inv, ub, b_inv, keys // ub.size, keys % ub.size, n_ij.astype(np.int64)


def _comb2(n) -> np.ndarray:
    n = np.asarray(n, dtype=np.int64)
    return n * (n - 1) // 2


def _require_sklearn(what: str):
    try:
        import sklearn  # noqa: F401
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            f"{what} needs scikit-learn, which dpgeo does not install by default; "
            "install it with `pip install scikit-learn`"
        ) from exc


def _check_seed(seed) -> int:
    if isinstance(seed, bool) or not isinstance(seed, (numbers.Integral, np.integer)) or seed < 0:
        raise ParameterError(f"seed must be a non-negative integer, got {seed!r}")
    return int(seed)
