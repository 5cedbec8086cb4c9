"""The density of each cell and the floor: which cells of a released histogram hold points.

Part of :mod:`dpgeo.mechanisms.levels` (post-processing of one released
histogram; no budget): the 3×3 kernels that give each cell its level (the box's
sum, or binomial weights), the noise of those levels, and the floor — the cells
whose neighbourhood holds points at a false-discovery rate (Benjamini–Hochberg,
exact p-values of sums of discrete Laplace noises), and its bridges along
lines of points between pieces of the floor. Its names are importable from
:mod:`dpgeo.mechanisms.levels` too.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from scipy import ndimage

from ..errors import ParameterError
from ..grid import Grid
from ..histogram import NoisyHistogram
from ..noise import discrete_laplace_variance, gamma_difference_sf, interval_fft_size
from .dbscan import neighbourhood_sums
from .level_tree import BOX_OFFSETS

__all__ = ["BRIDGE_MIN_PIECE_CELLS", "DEFAULT_FDR", "FLOOR_LINE_CELLS", "KERNELS", "LINE_DIRECTIONS", "binomial_sums",
           "box_sums", "fdr_cells", "floor_bridges", "level_noise", "line_offsets", "sum_noise_sd"]

#: The density kernel of the tree of levels: ``box`` (the sum of the 3×3 released counts) or ``binomial``
#: (their ``[1, 2, 1] ⊗ [1, 2, 1]`` weighted sum, in the box's units: :func:`binomial_sums`).
KERNELS = ("box", "binomial")
#: Default false-discovery rate of the floor (the share of shown cells whose neighbourhood is truly empty).
DEFAULT_FDR = 0.1
#: Length (cells) of the lines of the floor's bridges on maps of few cells (:func:`floor_bridges`; None: no bridges,
#: the 3×3 box's test alone). A thin line of points one cell wide with ``d`` points a cell gives the box ``3d`` over
#: nine noises and a line of ``L`` cells along it ``L·d`` over ``L`` noises: √L times the box's signal-to-noise
#: (2.6 times for ``L`` = 7).
FLOOR_LINE_CELLS = 7
#: The fewest cells of each of the pieces of the floor a bridge joins: the 3×3 neighbourhood of one cell of points
#: (a false discovery of the floor is mostly smaller; bridges between such specks would join noise).
BRIDGE_MIN_PIECE_CELLS = 9
#: The directions ``(dx, dy)`` of the floor's line tests: the two axes and the two diagonals.
LINE_DIRECTIONS = ((1, 0), (0, 1), (1, 1), (1, -1))


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


def line_offsets(length_cells: int, direction: tuple[int, int]) -> np.ndarray:
    """``(L, 2)`` offsets ``(dx, dy)`` of the line of ``L`` (odd) cells through a cell along ``direction``.

    Examples
    --------
    >>> line_offsets(5, (1, -1)).tolist()
    [[-2, 2], [-1, 1], [0, 0], [1, -1], [2, -2]]
    """
    if not (isinstance(length_cells, (int, float, np.integer)) and length_cells == int(length_cells)
            and length_cells >= 3 and int(length_cells) % 2 == 1):
        raise ParameterError(f"the floor's line tests need an odd length of at least 3 cells, got {length_cells!r}")
    length_cells = int(length_cells)
    r = np.arange(-(length_cells // 2), length_cells // 2 + 1)
    return np.stack([r * direction[0], r * direction[1]], axis=1).astype(np.int64)


def _neighbours_in_universe(grid: Grid, offsets: np.ndarray = BOX_OFFSETS) -> np.ndarray:
    """``(ny, nx)`` number of universe cells in each cell's window ``offsets`` (the noises in its sum; 3×3 box)."""
    mask = grid.universe_mask().astype(np.int64)
    ny, nx = mask.shape
    r = int(np.abs(offsets).max())
    pad = np.zeros((ny + 2 * r, nx + 2 * r), dtype=np.int64)
    pad[r:r + ny, r:r + nx] = mask
    out = np.zeros_like(mask)
    for dx, dy in offsets.tolist():
        out += pad[r + dy:r + dy + ny, r + dx:r + dx + nx]
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


def _test_p_values(s: np.ndarray, kappa: np.ndarray, q: float):
    """p-values of one test per cell, by its distinct ``(κ, sum)``: ``(p of each distinct pair, pair of each cell,
    cells of each pair)``; the pairs in increasing order of ``(κ, sum)``."""
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
    return _p_values(ukey % span + s.min(), ukey // span, q), inv, cnt


def _benjamini_hochberg(pu: np.ndarray, cnt: np.ndarray, fdr: float, m: int) -> float | None:
    """The largest of the distinct p-values ``pu`` (held by ``cnt`` cells each) that Benjamini–Hochberg at ``fdr``
    over ``m`` tests rejects, or None."""
    order = np.argsort(pu, kind="stable")
    rank = np.cumsum(cnt[order])  # cells with a p-value <= pu[order[i]] (ties counted fully)
    ok = np.flatnonzero(pu[order] <= fdr * rank / m)
    return None if ok.size == 0 else float(pu[order[ok[-1]]])


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
    Thin lines of points whose pieces this test keeps apart are joined by
    :func:`floor_bridges`.

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
    m = s.size
    pu, inv, cnt = _test_p_values(s, kappa, hist.q)
    p_cut = _benjamini_hochberg(pu, cnt, fdr, m)
    if p_cut is None:
        return np.zeros(0, dtype=np.int64), 0.0
    return uni[(pu <= p_cut)[inv]], p_cut


def floor_bridges(hist: NoisyHistogram, sums: np.ndarray, kept: np.ndarray, fdr: float = DEFAULT_FDR,
                  line_cells: int = FLOOR_LINE_CELLS, neighbours=None,
                  min_piece_cells: int = BRIDGE_MIN_PIECE_CELLS) -> np.ndarray:
    """Cells that join pieces of the floor along lines of points: sorted flat ids, none of them in ``kept``.

    Parameters
    ----------
    hist : NoisyHistogram
        Dense released histogram.
    sums : numpy.ndarray
        ``(ny, nx)`` 3×3 sums of its counts (:func:`box_sums`).
    kept : numpy.ndarray
        The floor's cells (:func:`fdr_cells` at ``fdr``).
    fdr : float
        Level of the second Benjamini–Hochberg procedure.
    line_cells : int
        Odd length ``L`` of the lines through each cell (:data:`FLOOR_LINE_CELLS`).
    neighbours : numpy.ndarray, optional
        ``(ny, nx)`` number of universe cells around each cell, if already known.
    min_piece_cells : int
        The pieces of the floor a bridge joins hold at least this many cells each
        (:data:`BRIDGE_MIN_PIECE_CELLS`).

    Notes
    -----
    Each universe cell ``X`` is tested against "no point in its 3×3
    neighbourhood nor on the lines of ``L`` cells through it along the two
    axes and the two diagonals" (:data:`LINE_DIRECTIONS`): under it each of
    the five sums is a sum of noises alone, so five times the smallest of the
    five exact p-values is a p-value (a union bound), and Benjamini–Hochberg
    at ``fdr`` runs over those ``m``. A line of points one cell wide stands out
    about ``√L`` times more along its length than in the box (``L·d`` over
    ``L`` noises against ``3d`` over nine). The cells that procedure keeps and
    the box's test does not are returned where they lie in one 8-connected
    set with two or more pieces (8-connected components) of ``kept`` of at least
    ``min_piece_cells`` cells each: the
    bridges between pieces of a thin shape, and the cells along lines of points
    next to them; not a fringe around a piece that joins nothing.
    Post-processing of the released counts.

    Examples
    --------
    >>> import numpy as np
    >>> from dpgeo.domain import StudyArea
    >>> from dpgeo.grid import Grid
    >>> from dpgeo.histogram import NoisyHistogram
    >>> g = Grid(StudyArea.from_bbox((0, 0, 200, 70), "EPSG:32615", working_crs="EPSG:32615"), 10.0)
    >>> c = np.zeros((7, 20), int); c[3, 1:19] = 3; c[3, 9:11] = 0   # a line of 3 points a cell, a gap of 2
    >>> h = NoisyHistogram(g, "dense", np.arange(140), c.ravel(), 1.0, 1, float(np.exp(-1)))
    >>> kept, _ = fdr_cells(h, box_sums(h))
    >>> np.unique(kept % 20).tolist()   # two pieces: the box's sums 6 and 3 at the gap are too low
    [2, 3, 4, 5, 6, 7, 12, 13, 14, 15, 16, 17]
    >>> b = floor_bridges(h, box_sums(h), kept)
    >>> sorted(set((b[(b // 20) == 3] % 20).tolist()))   # on the line's row: the gap and the line's ends
    [0, 1, 8, 9, 10, 11, 18, 19]
    """
    g = hist.grid
    uni = hist.cell_id if hist.kind == "dense" else g.universe_ids()
    kappa = (_neighbours_in_universe(g) if neighbours is None else neighbours).ravel()[uni]
    m = uni.size
    pu, inv, _ = _test_p_values(sums.ravel()[uni], kappa, hist.q)
    p = pu[inv]
    for direction in LINE_DIRECTIONS:
        off = line_offsets(line_cells, direction)
        pl, il, _ = _test_p_values(neighbourhood_sums(hist, off).ravel()[uni],
                                   _neighbours_in_universe(g, off).ravel()[uni], hist.q)
        np.minimum(p, pl[il], out=p)
    p = np.minimum(1.0, (1 + len(LINE_DIRECTIONS)) * p)  # Bonferroni over the cell's five tests
    pu, inv, cnt = np.unique(p, return_inverse=True, return_counts=True)
    p_cut = _benjamini_hochberg(pu, cnt, fdr, m)
    box = np.zeros(g.ny * g.nx, dtype=bool)
    box[kept] = True
    extra = np.zeros_like(box)
    if p_cut is not None:
        extra[uni[(pu <= p_cut)[inv]]] = True
    extra &= ~box
    if not extra.any():
        return np.zeros(0, dtype=np.int64)
    eight = np.ones((3, 3), dtype=bool)
    joined, _ = ndimage.label((box | extra).reshape(g.ny, g.nx), eight)
    pieces, _ = ndimage.label(box.reshape(g.ny, g.nx), eight)  # the pieces of the floor
    joined, pieces = joined.ravel(), pieces.ravel()
    big = np.bincount(pieces)[pieces[box]] >= min_piece_cells  # the cells of pieces large enough to join
    pairs = np.unique(np.stack([joined[box][big], pieces[box][big]], axis=1), axis=0)  # (joined set, piece)
    n_pieces = np.bincount(pairs[:, 0], minlength=int(joined.max()) + 1)
    return np.flatnonzero(extra & (n_pieces[joined] >= 2)).astype(np.int64)
