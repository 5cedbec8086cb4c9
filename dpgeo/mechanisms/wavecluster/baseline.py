"""Baseline: exact WaveCluster on DP synthetic points from adaptive grids (Chen, Yu & Chirkova).

Synthetic points are drawn from a two-level adaptive grid (AG, Qardaji,
Yang & Li, ICDE 2013) over the public ``bounds`` and counted on the target
grid; exact WaveCluster (:mod:`.exact`) then runs on the synthetic counts.

Privacy
-------
Neighbouring data sets differ by one record of at most ``s`` points;
points outside the public ``bounds`` are dropped (a public rule).

1. ``N``: either ``n_public`` (public knowledge the caller asserts, free) or
   ``N′ = n + DLap(exp(-ε_N/s))`` with ``ε_N = n_share·ε``: ε_N-DP.
2. Level 1: ``m1 × m1`` cells, ``m1`` a function of ``N`` and ``ε′ = ε - ε_N``;
   noisy counts with ``ε′/2``: each point is in one cell (L1 sensitivity
   ``s``), so ε′/2-DP.
3. Level 2: each level-1 cell is split into ``m2 × m2`` leaves, ``m2`` a
   function of its *noisy* count; noisy leaf counts with ``ε′/2``: the leaves
   partition the plane, so ε′/2-DP (adaptive sequential composition).
4. Total ``ε_N + ε′/2 + ε′/2 = ε``. Placing ``max(count, 0)`` points
   uniformly in each leaf, binning them on the target grid and WaveCluster
   on the result are post-processing.

The synthetic counts are returned as ``noisy_counts`` with ``q = None``
(they are not per-cell noisy counts). Proof: ``docs/privacy.md``
§5.6.4.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from ...errors import ParameterError
from ...noise import sample_discrete_laplace, sampler_description, split_epsilon
from ._checks import _as_noise_source, _check_epsilon, _check_n_public, _check_sensitivity, _check_shape
from .cells import WaveClusterCells
from .exact import exact_wavecluster

__all__ = ["SyntheticGrid", "adaptive_grid_counts", "wavecluster_baseline"]

#: Most synthetic points the baseline places (about 120 bytes each while they are placed: 8 GiB); beyond, it
#: refuses (one synthetic point per noisy count: a very large input, or a tiny epsilon where noise dominates).
MAX_SYNTHETIC_POINTS = 1 << 26


@dataclass
class SyntheticGrid:
    """DP synthetic count grid from adaptive grids (see :func:`adaptive_grid_counts`)."""

    counts: np.ndarray
    report: dict


def _check_bounds(bounds) -> tuple[float, float, float, float]:
    try:
        minx, miny, maxx, maxy = (float(v) for v in bounds)
    except Exception:  # noqa: BLE001
        raise ParameterError(f"bounds must be (minx, miny, maxx, maxy), got {bounds!r}") from None
    if not all(map(math.isfinite, (minx, miny, maxx, maxy))) or not (maxx > minx and maxy > miny):
        raise ParameterError(f"bounds must be finite with maxx > minx and maxy > miny, got {bounds!r}")
    return minx, miny, maxx, maxy


def _bin(x, y, bounds, ny, nx):
    """Row/column of each point in an ny×nx grid over ``bounds``; -1 outside."""
    minx, miny, maxx, maxy = bounds
    fx = (x - minx) / (maxx - minx) * nx
    fy = (y - miny) / (maxy - miny) * ny
    fin = np.isfinite(fx) & np.isfinite(fy)
    ix = np.floor(np.clip(np.where(fin, fx, -1.0), -1.0, nx)).astype(np.int64)
    iy = np.floor(np.clip(np.where(fin, fy, -1.0), -1.0, ny)).astype(np.int64)
    ok = fin & (ix >= 0) & (ix < nx) & (iy >= 0) & (iy < ny)
    return iy, ix, ok


def _count_points_on(x, y, binning, n_bins):
    """Exact counts of in-memory points on a binning (the ``count_on`` of array input)."""
    ids, ok = binning(x, y)
    return np.bincount(ids[ok], minlength=n_bins).astype(np.int64)


def _ag_root(b, x, y):
    """AG binning: one bin, the whole of ``b``."""
    _, _, ok = _bin(x, y, b, 1, 1)
    return np.zeros(x.size, dtype=np.int64), ok


def _ag_level1(b, m1, x, y):
    """AG binning: the ``m1 × m1`` level-1 cells over ``b``."""
    iy1, ix1, ok = _bin(x, y, b, m1, m1)
    return np.where(ok, iy1 * m1 + ix1, 0), ok


def _ag_leaf(b, m1, m2, start, x, y):
    """AG binning: the leaves, ``m2[c] × m2[c]`` in level-1 cell ``c`` (``m2`` from noisy level-1 counts)."""
    iy1, ix1, ok = _bin(x, y, b, m1, m1)
    iy1, ix1 = iy1[ok], ix1[ok]
    fx = (x[ok] - b[0]) / (b[2] - b[0]) * m1 - ix1  # position inside the level-1 cell, [0, 1)
    fy = (y[ok] - b[1]) / (b[3] - b[1]) * m1 - iy1
    cell1 = iy1 * m1 + ix1
    mm = m2[cell1]
    sx = np.minimum((fx * mm).astype(np.int64), mm - 1)
    sy = np.minimum((fy * mm).astype(np.int64), mm - 1)
    leaf = np.zeros(x.size, dtype=np.int64)
    leaf[ok] = start[cell1] + sy * mm + sx
    return leaf, ok


def adaptive_grid_counts(
    x,
    y,
    *,
    bounds,
    shape,
    epsilon: float,
    n_public: int | None = None,
    n_share: float = 0.05,
    sensitivity: int = 1,
    rng=None,
    count_on=None,
) -> SyntheticGrid:
    """DP synthetic count grid from adaptive grids (AG, Qardaji, Yang & Li 2013).

    1. ``N``: ``n_public`` if given (public), otherwise the number of points
       in ``bounds`` released with discrete Laplace noise using
       ``n_share·ε``.
    2. Level 1: ``m1 × m1`` cells over ``bounds`` with
       ``m1 = max(10, ⌈¼·√(N·ε′/10)⌉)``, noisy counts with ``ε′/2``
       (``ε′`` = the budget left after step 1).
    3. Level 2: each level-1 cell with noisy count ``N′`` is split into
       ``m2 × m2`` leaves, ``m2 = max(1, ⌈√(N′·(ε′/2)/5)⌉)``, noisy counts
       with ``ε′/2``.
    4. ``max(leaf count, 0)`` points are placed uniformly in each leaf and
       binned on the target grid.

    Steps 2 and 3 each add noise once per point (every point is in one
    level-1 cell and one leaf), so with ``s`` points per record each costs
    its ε by the L1 sensitivity ``s``; steps 2–4 read N only through its
    released value. The level-2 grid depends on the data only through the
    noisy level-1 counts. No constrained inference between levels is done.

    Parameters
    ----------
    x, y : array_like of float
        Projected coordinates (metres); points outside ``bounds`` are dropped.
    bounds : (minx, miny, maxx, maxy)
        Public outer edges of the target grid.
    shape : (ny, nx)
        Target grid shape (rows = y from ``miny``, columns = x from ``minx``).
    epsilon : float
        Total ε of the synthetic grid.
    n_public : int, optional
        Public number of points (then all ε goes to the grids).
    n_share : float
        Share of ε for the noisy N when ``n_public`` is not given.
    sensitivity : int
        Points per record.
    rng : NoiseSource or numpy.random.Generator, optional
    count_on : callable, optional
        Instead of ``x, y`` (then ``None``): ``count_on(binning, n_bins)``
        returns the exact counts of the private points on a binning
        ``binning(x, y) -> (bin_id, ok)`` — the counting side reads the
        points again for each of the three countings, so they are never
        all in memory (:attr:`dpgeo.counting.CellCounts.recount`). Each
        binning is built from public parameters and earlier DP outputs.

    Returns
    -------
    SyntheticGrid
    """
    eps = _check_epsilon(epsilon)
    s = _check_sensitivity(sensitivity)
    b = _check_bounds(bounds)
    ny, nx = _check_shape(shape)
    src = gen = _as_noise_source(rng)
    if count_on is None:
        x = np.asarray(x, dtype=np.float64).ravel()
        y = np.asarray(y, dtype=np.float64).ravel()
        if x.shape != y.shape:
            raise ParameterError("x and y must have the same length")
        count_on = functools.partial(_count_points_on, x, y)
    if not (isinstance(n_share, (int, float)) and 0 < n_share < 1):
        raise ParameterError(f"n_share must be in (0, 1), got {n_share!r}")

    rep: dict = {"method": "adaptive-grid", "epsilon": eps, "sensitivity": s}
    if n_public is not None:
        n_used = _check_n_public(n_public)
        eps_rest = eps
        rep["n_source"] = "public"
        rep["epsilon_split"] = {}
    else:
        eps_n, eps_rest = split_epsilon(eps, n_share)  # eps_n + eps_rest <= eps exactly
        n_inside = int(count_on(functools.partial(_ag_root, b), 1)[0])
        n_noisy = n_inside + int(sample_discrete_laplace(gen, 1, epsilon=eps_n, sensitivity=s)[0])
        n_used = max(n_noisy, 1)
        rep["n_source"] = "noisy"
        rep["noisy_n"] = n_noisy
        rep["epsilon_split"] = {"n": eps_n}
    eps1, eps2 = split_epsilon(eps_rest, 0.5)  # eps1 + eps2 <= eps_rest exactly, as the noise spends them
    rep["epsilon_split"].update({"level1": eps1, "level2": eps2})

    m1 = max(10, int(math.ceil(0.25 * math.sqrt(n_used * eps_rest / 10.0))))
    q1 = math.exp(-eps1 / s)
    c1 = count_on(functools.partial(_ag_level1, b, m1), m1 * m1) + sample_discrete_laplace(gen, m1 * m1, epsilon=eps1, sensitivity=s)
    m2 = np.maximum(1, np.ceil(np.sqrt(np.maximum(c1, 0) * eps2 / 5.0))).astype(np.int64)
    nleaf = m2 * m2
    start = np.concatenate([[0], np.cumsum(nleaf)[:-1]])
    total = int(nleaf.sum())
    q2 = math.exp(-eps2 / s)
    c2 = count_on(functools.partial(_ag_leaf, b, m1, m2, start), total) + sample_discrete_laplace(gen, total, epsilon=eps2, sensitivity=s)
    # ---- post-processing: synthetic points in the leaves ----
    c2 = np.maximum(c2, 0)
    if int(c2.sum()) > MAX_SYNTHETIC_POINTS:  # noise dominates: at tiny epsilon each leaf's count is huge
        raise ParameterError(f"the synthetic-data baseline would place more than {MAX_SYNTHETIC_POINTS:,} synthetic "
                             f"points (one per noisy count of its leaves, at epsilon = {eps:g}); use a larger epsilon, "
                             "or a private method (privthr) for inputs this large")
    leaf_ids = np.repeat(np.arange(total, dtype=np.int64), c2)
    owner = np.repeat(np.arange(m1 * m1, dtype=np.int64), nleaf)[leaf_ids]
    local = leaf_ids - start[owner]
    mo = m2[owner]
    ly, lx = local // mo, local % mo
    oy, ox = owner // m1, owner % m1
    u = src.numpy_generator().random((2, leaf_ids.size))  # post-processing: any generator will do
    px = b[0] + (ox + (lx + u[0]) / mo) * ((b[2] - b[0]) / m1)
    py = b[1] + (oy + (ly + u[1]) / mo) * ((b[3] - b[1]) / m1)
    ty, tx, tok = _bin(px, py, b, ny, nx)
    counts = np.bincount(ty[tok] * nx + tx[tok], minlength=ny * nx).reshape(ny, nx).astype(np.int64)
    rep.update({
        "n_used": int(n_used),
        "m1": int(m1),
        "n_leaves": total,
        "n_synthetic": int(leaf_ids.size),
        "noise_q": {"level1": q1, "level2": q2},
        "delta": 0.0,
        "sampler": sampler_description(src) + " (synthetic points placed with a numpy generator seeded from it: "
                                              "post-processing)",
        "differentially_private": src.private,
        "not_private_reasons": [] if src.private else [src.not_private_reason],
    })
    return SyntheticGrid(counts=counts, report=rep)


def wavecluster_baseline(
    x,
    y,
    *,
    bounds,
    shape,
    epsilon: float,
    percentile: float = 60.0,
    wavelet: str = "haar",
    mode: str = "zero",
    n_public: int | None = None,
    n_share: float = 0.05,
    sensitivity: int = 1,
    rng=None,
    count_on=None,
) -> WaveClusterCells:
    """Baseline of Chen, Yu & Chirkova: WaveCluster on AG synthetic counts.

    ``x, y`` are the private points, or ``None`` with ``count_on`` (see
    :func:`adaptive_grid_counts`: the points are counted again for each
    level instead of being held in memory).

    The synthetic grid (:func:`adaptive_grid_counts`) is ε-DP; WaveCluster on
    it is post-processing. ``noisy_counts`` holds the synthetic counts and
    ``q`` is ``None`` (they are not per-cell noisy counts).

    Examples
    --------
    >>> import numpy as np
    >>> from dpgeo.noise import NoiseSource
    >>> g = np.random.default_rng(3)
    >>> x = np.r_[g.normal(2, .3, 3000), g.normal(8, .3, 3000)]; y = g.normal(5, .3, 6000)
    >>> r = wavecluster_baseline(x, y, bounds=(0, 0, 10, 10), shape=(20, 20), epsilon=1.0,
    ...                          n_public=6000, rng=NoiseSource(seed=4))
    >>> r.report["method"], r.n_clusters >= 1
    ('baseline', True)
    """
    syn = adaptive_grid_counts(x, y, bounds=bounds, shape=shape, epsilon=epsilon, n_public=n_public,
                               n_share=n_share, sensitivity=sensitivity, rng=rng, count_on=count_on)
    res = exact_wavecluster(syn.counts, percentile=percentile, wavelet=wavelet, mode=mode)
    rep = dict(res.report)
    for key in ("n_positive", "n_nonpositive", "k", "not_private_reasons"):
        rep.pop(key, None)
    rep.update({
        "method": "baseline",
        "epsilon": float(epsilon),
        "delta": 0.0,
        "sampler": syn.report["sampler"],
        "differentially_private": syn.report["differentially_private"],
        "not_private_reasons": list(syn.report["not_private_reasons"]),
        "sensitivity": int(sensitivity),
        "synthetic": syn.report,
        "epsilon_split": syn.report["epsilon_split"],
    })
    return WaveClusterCells(labels=res.labels, noisy_counts=syn.counts, q=None, report=rep,
                            significant=res.significant, coefficient_labels=res.coefficient_labels)
