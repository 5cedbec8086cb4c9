"""Argument checks shared by the WaveCluster mechanisms.

Each check raises :class:`dpgeo.errors.ParameterError` stating the
constraint, before any data is read or any noise is drawn. Nothing here
reads private data beyond its shape and type.
"""

from __future__ import annotations

import math

import numpy as np

from ...errors import ParameterError
from ...noise import NoiseSource, as_source

#: Rules of PrivTHR for the number of significant coefficients (see :mod:`.privthr`).
_K_RULES = ("direct", "prune", "prune-half")
_DEFAULT_SPLIT = {"privthr": 0.9, "privthr-em": 0.7}

# percentile is handled as an integer number of millionths of a percent, so
# that n0 = floor(p·m/100) is exact and monotone in m
_P_SCALE = 1_000_000

# largest |count| accepted: keeps every integer intermediate below 2**53
_MAX_COUNT = 2**31


def _check_shape(shape) -> tuple[int, int]:
    try:
        ny, nx = (int(v) for v in shape)
    except Exception:  # noqa: BLE001
        raise ParameterError(f"shape must be (ny, nx), got {shape!r}") from None
    if ny < 1 or nx < 1:
        raise ParameterError(f"grid shape must be at least 1×1 cells, got {shape!r}")
    return ny, nx


def _check_percentile(p) -> int:
    if isinstance(p, bool) or not isinstance(p, (int, float, np.integer, np.floating)) or not (0 <= p < 100):
        raise ParameterError(f"percentile must be a number in [0, 100), got {p!r}")
    return int(round(float(p) * _P_SCALE))


def _check_sensitivity(s) -> int:
    if isinstance(s, bool) or not isinstance(s, (int, np.integer)) or s < 1:
        raise ParameterError(f"sensitivity (points per record) must be an integer >= 1, got {s!r}")
    return int(s)


def _check_epsilon(eps, name="epsilon") -> float:
    if isinstance(eps, bool) or not isinstance(eps, (int, float, np.integer, np.floating)) \
            or not math.isfinite(eps) or eps <= 0:
        raise ParameterError(f"{name} must be a finite number > 0, got {eps!r}")
    return float(eps)


def _as_counts(counts, *, allow_negative=False) -> np.ndarray:
    c = np.asarray(counts)
    if c.ndim != 2 or c.size == 0:
        raise ParameterError(f"counts must be a non-empty 2-D array (ny, nx), got shape {c.shape}")
    if c.dtype.kind == "f":
        if not np.all(np.isfinite(c)) or not np.array_equal(c, np.round(c)):
            raise ParameterError("counts must be integers")
        c = c.astype(np.int64)
    elif c.dtype.kind not in "iub":
        raise ParameterError(f"counts must be an integer array, got dtype {c.dtype}")
    c = c.astype(np.int64, copy=False)
    if not allow_negative and int(c.min()) < 0:
        raise ParameterError("counts must be non-negative")
    # clip silently (no data-dependent error): a count above 2**31 - 1 per
    # cell is capped, which keeps every integer intermediate exact in float64
    # and does not change any sensitivity (clipping is 1-Lipschitz per cell)
    if int(np.abs(c).max()) >= _MAX_COUNT:
        c = np.clip(c, -(_MAX_COUNT - 1), _MAX_COUNT - 1)
    return c


def _as_noise_source(rng) -> NoiseSource:
    # None: a fresh private source; a numpy Generator: not private (not a CSPRNG)
    return as_source(rng)


def _check_split(split, method) -> float:
    if split is None:
        return _DEFAULT_SPLIT[method]
    if isinstance(split, bool) or not isinstance(split, (int, float, np.floating)) or not (0 < split < 1):
        raise ParameterError(f"count_split (share of epsilon for the counts) must be in (0, 1), got {split!r}")
    return float(split)


def _check_n_public(n) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ParameterError(f"n_public (public number of points) must be an integer >= 1, got {n!r}")
    return int(n)
