"""The density of each cell and the floor: which cells of a released histogram hold points.

Part of :mod:`dpgeo.mechanisms.levels` (post-processing of one released
histogram; no budget): the 3×3 kernels that give each cell its level (the box's
sum, or binomial weights), the noise of those levels, and the floor — the cells
whose neighbourhood holds points at a false-discovery rate (Benjamini–Hochberg,
exact p-values of sums of discrete Laplace noises). Its names are importable
from :mod:`dpgeo.mechanisms.levels` too.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from ..errors import ParameterError
from ..grid import Grid
from ..histogram import NoisyHistogram
from ..noise import discrete_laplace_variance, gamma_difference_sf, interval_fft_size
from .dbscan import neighbourhood_sums
from .level_tree import BOX_OFFSETS

__all__ = ["DEFAULT_FDR", "KERNELS", "binomial_sums", "box_sums", "fdr_cells", "level_noise", "sum_noise_sd"]

#: The density kernel of the tree of levels: ``box`` (the sum of the 3×3 released counts) or ``binomial``
#: (their ``[1, 2, 1] ⊗ [1, 2, 1]`` weighted sum, in the box's units: :func:`binomial_sums`).
KERNELS = ("box", "binomial")
#: Default false-discovery rate of the floor (the share of shown cells whose neighbourhood is truly empty).
DEFAULT_FDR = 0.1


def box_sums(hist: NoisyHistogram) -> np.ndarray:
    """``(ny, nx)`` int64 sums of the released counts over each cell's 3×3 neighbourhood (dense histograms).

    Examples
    --------
    >>> import numpy as np
    >>> from dpgeo.domain import StudyArea
    >>> from dpgeo.grid import Grid
    >>> from dpgeo.histogram import NoisyHistogram
    >>> g = Grid(StudyArea.from_bbox((0, 0, 40, 30), "EPSG:32615", working_crs="EPSG:32615"), 10.0)
    >>> h = NoisyHistogram(g, "dense", np.arange(12), np.r_[5, np.zeros(11, int)], 1.0, 1, 0.37)
    >>> box_sums(h).tolist()
    [[5, 5, 0, 0], [5, 5, 0, 0], [0, 0, 0, 0]]
    """
    if hist.kind != "dense":
        raise ParameterError("density levels need a dense histogram")
    return neighbourhood_sums(hist, BOX_OFFSETS)


def binomial_sums(hist: NoisyHistogram) -> np.ndarray:
    """``(ny, nx)`` int64 binomial-weighted 3×3 sums of the released counts, in box units (dense histograms).

    The weights ``[1, 2, 1] ⊗ [1, 2, 1]`` (a cell 4, its edge neighbours 2, its corners 1) scaled by 9/16 so
    that a uniform density has the level of :func:`box_sums`, rounded to the nearest integer: a kernel that
    blurs a gap about one cell wide less than the box.

    Examples
    --------
    >>> import numpy as np
    >>> from dpgeo.domain import StudyArea
    >>> from dpgeo.grid import Grid
    >>> from dpgeo.histogram import NoisyHistogram
    >>> g = Grid(StudyArea.from_bbox((0, 0, 40, 30), "EPSG:32615", working_crs="EPSG:32615"), 10.0)
    >>> h = NoisyHistogram(g, "dense", np.arange(12), np.r_[16, np.zeros(11, int)], 1.0, 1, 0.37)
    >>> binomial_sums(h).tolist()
    [[36, 18, 0, 0], [18, 9, 0, 0], [0, 0, 0, 0]]
    """
    if hist.kind != "dense":
        raise ParameterError("density levels need a dense histogram")
    ny, nx = hist.grid.ny, hist.grid.nx
    pad = np.zeros((ny + 2, nx + 2), dtype=np.int64)
    pad[1:-1, 1:-1] = hist.to_dense()
    w16 = np.zeros((ny, nx), dtype=np.int64)
    for dx, dy in BOX_OFFSETS.tolist():
        w16 += (2 - abs(dx)) * (2 - abs(dy)) * pad[1 + dy:1 + dy + ny, 1 + dx:1 + dx + nx]
    return (9 * w16 + 8) // 16


def level_noise(q: float, kernel: str = "box") -> tuple[float, float]:
    """``(s.d. of a level's noise, Poisson variance of a level per unit of level)`` of a kernel's sums.

    ``box``: ``√(9 Var)`` and 1 (a sum of counts). ``binomial``: the weights ``9w/16`` give
    ``√(Σ(9w/16)² Var)`` (1.125 times the box's) and ``Σ(9w/16)² / Σ(9w/16)`` = 1.27 for a uniform density.

    Examples
    --------
    >>> import math
    >>> [round(v, 3) for v in level_noise(math.exp(-1.0), "binomial")]
    [4.58, 1.266]
    """
    if kernel not in KERNELS:
        raise ParameterError(f"kernel must be one of {KERNELS}, got {kernel!r}")
    if kernel == "box":
        return sum_noise_sd(q), 1.0
    w2 = sum(((2 - abs(dx)) * (2 - abs(dy)) * 9 / 16) ** 2 for dx, dy in BOX_OFFSETS.tolist())
    return math.sqrt(w2 * discrete_laplace_variance(q)), w2 / 9.0


def sum_noise_sd(q: float, kappa: int = 9) -> float:
    """Standard deviation of the noise of a sum of ``kappa`` released counts (decay ``q``)."""
    return math.sqrt(kappa * discrete_laplace_variance(q))


def _neighbours_in_universe(grid: Grid) -> np.ndarray:
    """``(ny, nx)`` number of universe cells in each cell's 3×3 neighbourhood (the noises in its sum)."""
    mask = grid.universe_mask().astype(np.int64)
    ny, nx = mask.shape
    pad = np.zeros((ny + 2, nx + 2), dtype=np.int64)
    pad[1:-1, 1:-1] = mask
    out = np.zeros_like(mask)
    for dx, dy in BOX_OFFSETS.tolist():
        out += pad[1 + dy:1 + dy + ny, 1 + dx:1 + dx + nx]
    return out


@functools.lru_cache(maxsize=64)
def _tail_table(k: int, q: float) -> np.ndarray | None:
    """``T[s] = Pr[N ≥ s]`` for ``s = 0, 1, ...`` (N the sum of ``k`` noises), or None where too large.

    Exact law through the characteristic function of the law cut where one
    noise's mass is below 1e-17 (as :func:`dpgeo.noise.sum_interval_halfwidth`);
    beyond the table the tail is below 1e-16.
    """
    n = interval_fft_size(k, q)
    if n > 1 << 22:
        return None
    L = math.ceil(-39.2 / math.log(q)) + 1
    z = np.arange(-L, L + 1)
    pmf = np.zeros(n)
    pmf[z % n] = (1.0 - q) / (1.0 + q) * q ** np.abs(z)
    dist = np.clip(np.fft.irfft(np.fft.rfft(pmf) ** k, n), 0.0, None)
    top = min(L * k, n // 2 - 1)
    pos = dist[:top + 1]  # Pr[N = 0..top]
    tail = np.cumsum(pos[::-1])[::-1]  # Pr[top >= N >= s] ~ Pr[N >= s] for s >= 1
    tail[0] = 0.5 * (1.0 + pos[0])  # Pr[N >= 0] by symmetry
    tail = np.minimum(tail, 1.0)
    tail.setflags(write=False)  # shared by the cache
    return tail


def _p_values(sums: np.ndarray, kappa: np.ndarray, q: float) -> np.ndarray:
    """``Pr[N_κ ≥ s]`` for each released sum ``s`` and its number of noises ``κ`` (1 for ``s ≤ 0``)."""
    p = np.ones(sums.size)
    b = 1.0 / -math.log(q)
    for k in np.unique(kappa[sums > 0]).tolist():
        sel = np.flatnonzero((kappa == k) & (sums > 0))
        table = _tail_table(int(k), q)
        if table is not None:
            p[sel] = table[np.minimum(sums[sel], table.size - 1)]
        else:  # tiny ε: a valid bound through the continuous law (|N - C| < k)
            vals, inv = np.unique(sums[sel], return_inverse=True)
            bound = [min(1.0, gamma_difference_sf(max(v - k, 0) / b, int(k))) for v in vals.tolist()]
            p[sel] = np.asarray(bound)[inv]
    return p


def fdr_cells(hist: NoisyHistogram, sums: np.ndarray, fdr: float = DEFAULT_FDR, neighbours=None):
    """Universe cells whose neighbourhood holds points, at false-discovery rate ``fdr`` (Benjamini–Hochberg).

    Parameters
    ----------
    hist : NoisyHistogram
        Dense released histogram.
    sums : numpy.ndarray
        ``(ny, nx)`` 3×3 sums of its counts (:func:`box_sums`).
    fdr : float
        Level ``q`` in (0, 1) of the procedure.
    neighbours : numpy.ndarray, optional
        ``(ny, nx)`` number of universe cells around each cell, if already known.

    Returns
    -------
    cells : numpy.ndarray
        Sorted flat ids of the kept cells.
    p_cut : float
        The largest p-value kept (0 when none).

    Notes
    -----
    The test of cell ``X`` is "no point lies in its 3×3 neighbourhood"; under
    it ``S̃(X)`` is a sum of ``κ_X ≤ 9`` discrete Laplace noises (the universe
    cells of the neighbourhood), and the p-value ``Pr[N_κ ≥ S̃(X)]`` is exact.
    Benjamini–Hochberg over all ``m`` universe cells keeps the cells with the
    ``r`` smallest p-values, ``r`` the largest rank with ``p_(r) ≤ q·r/m``.

    Examples
    --------
    >>> import numpy as np
    >>> from dpgeo.domain import StudyArea
    >>> from dpgeo.grid import Grid
    >>> from dpgeo.histogram import NoisyHistogram
    >>> g = Grid(StudyArea.from_bbox((0, 0, 100, 100), "EPSG:32615", working_crs="EPSG:32615"), 10.0)
    >>> c = np.zeros(100, int); c[55] = 60
    >>> h = NoisyHistogram(g, "dense", np.arange(100), c, 1.0, 1, float(np.exp(-1)))
    >>> cells, _ = fdr_cells(h, box_sums(h))
    >>> cells.tolist()   # the cell with 60 points and its eight neighbours
    [44, 45, 46, 54, 55, 56, 64, 65, 66]
    """
    if not (isinstance(fdr, (int, float)) and 0 < fdr < 1):
        raise ParameterError(f"fdr (false-discovery rate of the floor) must be in (0, 1), got {fdr!r}")
    g = hist.grid
    uni = hist.cell_id if hist.kind == "dense" else g.universe_ids()
    s = sums.ravel()[uni]
    kappa = (_neighbours_in_universe(g) if neighbours is None else neighbours).ravel()[uni]
    # p-values take one value per (κ, sum): sort those distinct values, not the m cells
    span = int(s.max() - s.min()) + 1
    key = kappa.astype(np.int64) * span + (s - s.min())  # ordered as (κ, sum)
    if key.max() < 4 * key.size + 1024:  # a table of the keys' presence instead of a sort
        tally = np.bincount(key)
        ukey = np.flatnonzero(tally)
        inv = (np.cumsum(tally > 0) - 1)[key]
        cnt = tally[ukey]
    else:
        ukey, inv, cnt = np.unique(key, return_inverse=True, return_counts=True)
    pu = _p_values(ukey % span + s.min(), ukey // span, hist.q)
    m = s.size
    order = np.argsort(pu, kind="stable")
    rank = np.cumsum(cnt[order])  # cells with a p-value <= pu[order[i]] (ties counted fully)
    ok = np.flatnonzero(pu[order] <= fdr * rank / m)
    if ok.size == 0:
        return np.zeros(0, dtype=np.int64), 0.0
    p_cut = float(pu[order[ok[-1]]])
    return uni[(pu <= p_cut)[inv]], p_cut
