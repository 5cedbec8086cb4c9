"""DP-DBSCAN cluster spans (Qiu & Yi, Algorithm 1 with the optimisations of §6–7).

Pipeline: points → cells of width ``w = η′·α/√2`` over the public study area
→ ε-DP histogram (dense, or the linear-time sparse one) → noisy
neighbourhood sums over the κ cells of NB(X) → core cells → core cells
closer than α merged → connected components = spans.

With ``extent="grown"`` the spans are then grown, without merging, into
the neighbouring cells that pass the tightest certified threshold (see
:func:`grow_spans`).

Only the histogram touches the private data; everything after it is
post-processing of the released counts with public parameters, so the whole
output is ε-DP (see ``docs/privacy.md``).

A cell ``X`` is **core** when its noisy neighbourhood sum is at least
``MinPts + Γ``. ``Γ`` bounds, with probability ``1 - β`` simultaneously for
every cell of the universe, how far a noisy sum can exceed the true sum, so a
reported core cell really has ``UB(X) >= MinPts``; and every cell with
``UB(X) >= MinPts′ = MinPts + Γ + Γ_low`` is reported.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.sparse import coo_matrix, csr_matrix
from scipy.sparse.csgraph import connected_components, dijkstra

from ..errors import ParameterError
from ..grid import Grid, neighbourhood_offsets
from ..histogram import NoisyHistogram
from ..noise import sum_abs_bound, sum_positive_part_bound

__all__ = [
    "NoiseBound",
    "SpanCells",
    "noise_bound",
    "gamma_laplace",
    "neighbourhood_sums",
    "core_cells",
    "merge_cells",
    "grow_spans",
    "dbscan_cells",
    "DEFAULT_BETA",
    "EXTENTS",
]

#: Default failure probability β of the Γ bound (a 95% guarantee).
DEFAULT_BETA = 0.05

#: How far a span reaches: ``"core"`` (the core cells of Algorithm 1) or
#: ``"grown"`` (core cells grown into the cells certified by the exact Γ).
EXTENTS = ("core", "grown")


@dataclass
class NoiseBound:
    """Bounds on the noise in a neighbourhood sum, for all cells at once.

    Attributes
    ----------
    gamma : float
        Upper bound Γ: with probability ≥ 1 − β/2, no cell's noisy sum exceeds
        its true sum by more than Γ. The core threshold is ``MinPts + Γ``.
    gamma_low : float
        Lower bound: with probability ≥ 1 − β/2, no cell's noisy sum falls
        short of its true sum by more than ``gamma_low`` (includes ``κθ``
        for the sparse histogram).
    method : str
        ``"laplace"`` or ``"exact"``.
    gamma_laplace : float
        The paper's Γ_Lap (Thm 7.1) for the same setting, for reference.
    """

    gamma: float
    gamma_low: float
    method: str
    gamma_laplace: float


def gamma_laplace(kappa: int, n_cells: int, epsilon_eff: float, beta: float) -> float:
    """The paper's Γ_Lap = (2√2/ε)·max(√(κ ln(2|X|/β)), ln(2|X|/β)).

    ``epsilon_eff`` is ε/Δ. The bound is Theorem 2.9 (continuous Laplace)
    with a union bound over |X| cells.
    """
    lg = math.log(2.0 * n_cells / beta)
    return 2.0 * math.sqrt(2.0) / epsilon_eff * max(math.sqrt(kappa * lg), lg)


def noise_bound(
    *, kappa: int, n_cells: int, q: float, epsilon_eff: float, beta: float,
    theta: int | None = None, method: str = "exact"
) -> NoiseBound:
    """Γ (upper) and Γ_low (lower) for sums of κ released counts, union-bounded over the universe.

    ``exact``: the smallest integers with per-cell one-sided tail
    ``β / (2|X|)``, from the exact law of the sum of κ discrete Laplace
    noises. For the sparse histogram the released error of a cell is
    ``e = Z`` if kept and ``e = -x`` if truncated, so ``Z - θ <= e <=
    max(Z, 0)``: the upper bound uses the exact law of ``Σ max(Z_i, 0)`` and
    the lower bound adds ``κθ``.

    ``laplace`` (the default of :func:`dpgeo.dbscan_spans`): the paper's
    Γ_Lap (plus ``κθ`` on the lower side for sparse), or the exact bound
    where that is larger. Γ_Lap is proved for continuous Laplace noise; the
    maximum keeps the guarantee for discrete noise. It is the more
    conservative core threshold: spans are thinner and separate nearby
    clusters better (see ``docs/privacy.md``).
    """
    if not 0 < beta < 1:
        raise ParameterError(f"beta must be in (0, 1), got {beta!r}")
    if method not in ("exact", "laplace"):
        raise ParameterError(f"gamma must be 'exact' or 'laplace', got {method!r}")
    tail = beta / (2.0 * n_cells)
    glap = gamma_laplace(kappa, n_cells, epsilon_eff, beta)
    two_sided = sum_abs_bound(kappa, q, 2.0 * tail)  # Pr[S > G] <= tail, each side
    if theta:
        up = sum_positive_part_bound(kappa, q, tail)
        low = two_sided + kappa * theta
    else:
        up = low = two_sided
    if method == "laplace":
        # Γ_Lap is proved for continuous Laplace noise; taking the max with the
        # exact bound keeps the guarantee for our discrete noise.
        up = max(up, glap)
        low = max(low, glap + (kappa * theta if theta else 0))
    return NoiseBound(float(up), float(low), method, glap)


def neighbourhood_sums(hist: NoisyHistogram, offsets: np.ndarray, cells: np.ndarray | None = None):
    """Noisy sums over NB(X).

    Dense histograms: a ``(ny, nx)`` array of sums for every cell (``cells``
    ignored). Sparse: sums for the flat ids in ``cells``.
    """
    g = hist.grid
    r = int(np.abs(offsets).max())
    if cells is None:
        h = hist.to_dense()
        pad = np.zeros((g.ny + 2 * r, g.nx + 2 * r), dtype=np.int64)
        pad[r:r + g.ny, r:r + g.nx] = h
        out = np.zeros((g.ny, g.nx), dtype=np.int64)
        for dx, dy in offsets.tolist():
            out += pad[r + dy:r + dy + g.ny, r + dx:r + dx + g.nx]
        return out
    ix, iy = g.cell_xy(cells)
    total = np.zeros(cells.size, dtype=np.int64)
    for dx, dy in offsets.tolist():
        jx, jy = ix + dx, iy + dy
        ok = (jx >= 0) & (jx < g.nx) & (jy >= 0) & (jy < g.ny)
        total[ok] += hist.lookup(jy[ok] * g.nx + jx[ok])
    return total


def core_cells(hist: NoisyHistogram, offsets: np.ndarray, threshold: float, *, return_sums: bool = False):
    """Sorted flat ids of universe cells whose noisy NB-sum is ``>= threshold``.

    With ``return_sums=True`` also returns their noisy NB-sums (int64).
    """
    g = hist.grid
    kappa = len(offsets)
    # A cell can only reach the threshold if some released cell in its
    # neighbourhood holds at least threshold/κ: in a sparse histogram only
    # the neighbourhoods of those seeds are candidates.
    seeds = None
    if hist.kind != "dense":
        need = max(1, int(math.ceil(threshold / kappa)))
        seeds = hist.cell_id[hist.count >= need]
    # Candidate lists cost about 16·κ bytes per seed, the whole grid's sums 24 bytes per cell: when
    # nearly every cell is a seed (a billion points over a city), summing the whole grid is smaller and
    # faster, and gives the same cells (a cell without a seed in reach cannot pass).
    if seeds is None or (threshold > 0 and seeds.size * kappa * 16 > g.nx * g.ny * 24):
        sums = neighbourhood_sums(hist, offsets).ravel()
        ids = np.flatnonzero(sums >= threshold)
        sums = sums[ids]
    else:
        if seeds.size == 0:
            empty = np.zeros(0, dtype=np.int64)
            return (empty, empty.copy()) if return_sums else empty
        sx, sy = g.cell_xy(seeds)
        cand = []
        for dx, dy in offsets.tolist():  # NB is symmetric
            jx, jy = sx + dx, sy + dy
            ok = (jx >= 0) & (jx < g.nx) & (jy >= 0) & (jy < g.ny)
            cand.append(jy[ok] * g.nx + jx[ok])
        cand = np.unique(np.concatenate(cand))
        sums = neighbourhood_sums(hist, offsets, cand)
        keep = sums >= threshold
        ids, sums = cand[keep], sums[keep]
    inside = g.in_universe(ids)
    ids, sums = ids[inside], sums[inside]
    return (ids, sums) if return_sums else ids


def _offset_pairs(grid: Grid, cells: np.ndarray, offsets: np.ndarray):
    """For each NB offset ``(dx, dy)`` after ``(0, 0)`` (each unordered pair once), the index pairs ``(i, j)``
    of ``cells`` (sorted ids) that it joins, as int32, and the offset's length in cell widths."""
    n = cells.size
    ix, iy = grid.cell_xy(cells)
    for dx, dy in offsets.tolist():
        if (dy, dx) <= (0, 0):  # each unordered pair once; skip self
            continue
        jx, jy = ix + dx, iy + dy
        ok = (jx >= 0) & (jx < grid.nx) & (jy >= 0) & (jy < grid.ny)
        src = np.flatnonzero(ok)
        nid = jy[ok] * grid.nx + jx[ok]
        del jx, jy, ok
        pos = np.minimum(np.searchsorted(cells, nid), n - 1)
        hit = cells[pos] == nid
        yield src[hit].astype(np.int32), pos[hit].astype(np.int32), math.hypot(dx, dy)


def _pairs(grid: Grid, cells: np.ndarray, offsets: np.ndarray):
    """Index pairs ``(i, j)`` of ``cells`` (sorted ids) closer than α, each pair once (int32), and their lengths.

    int32 indices (|cells| < 2³¹): at a billion points nearly every cell of a city's grid is a candidate, and
    these lists are the largest arrays of the mechanism.
    """
    rows, cols, lens = [], [], []
    for r, c, length in _offset_pairs(grid, cells, offsets):
        rows.append(r)
        cols.append(c)
        lens.append((r.size, length))
    if not rows:
        z = np.zeros(0, dtype=np.int32)
        return z, z.copy(), np.zeros(0)
    rows = np.concatenate(rows)  # (each list is let go once joined: one copy at a time)
    cols = np.concatenate(cols)
    return rows, cols, np.repeat([length for _, length in lens], [size for size, _ in lens])


def merge_cells(grid: Grid, cells: np.ndarray, offsets: np.ndarray):
    """Connected components of ``cells`` joined when closer than α (NB offsets).

    O(|cells|·κ) time, O(|cells|) memory: the components are merged one offset at a time, so only one
    offset's pairs exist at once. Returns int labels 1..k in the order of ``cells`` (sorted ids), numbered
    by first appearance.
    """
    n = cells.size
    if n == 0:
        return np.zeros(0, dtype=np.int64), 0
    lab = np.arange(n, dtype=np.int64)  # a component id per cell (any representative)
    for r, c, _ in _offset_pairs(grid, cells, offsets):
        a, b = lab[r], lab[c]
        join = a != b
        if not join.any():
            continue
        a, b = a[join], b[join]
        adj = coo_matrix((np.ones(a.size, dtype=np.int8), (a, b)), shape=(n, n))
        _, comp = connected_components(adj, directed=False)
        lab = comp[lab]
    # renumber by first appearance so labels are stable and start at 1
    _, first, lab = np.unique(lab, return_index=True, return_inverse=True)
    k = first.size
    order = np.argsort(first)
    remap = np.empty(k, dtype=np.int64)
    remap[order] = np.arange(1, k + 1)
    return remap[lab.ravel()], int(k)


def grow_spans(grid: Grid, cells: np.ndarray, seed: np.ndarray, seed_label: np.ndarray, offsets: np.ndarray):
    """Grow labelled seed cells through ``cells`` without merging them.

    Every cell of ``cells`` takes the label of the seed cell nearest to it
    along paths of cells closer than α to each other (path length: the sum of
    the centre-to-centre distances, in cell widths). Seeds keep their own
    label; two spans that grow into each other stay two spans, split where
    they meet. Cells no path connects to a seed get label 0.

    Parameters
    ----------
    grid : Grid
    cells : numpy.ndarray
        Sorted flat ids of the cells that may be reached (seeds included).
    seed : numpy.ndarray of bool
        Which of ``cells`` are seeds.
    seed_label : numpy.ndarray
        Label (≥ 1) of each seed, in the order of ``cells[seed]``.
    offsets : numpy.ndarray
        NB offsets (cells closer than α).

    Returns
    -------
    numpy.ndarray
        Label of each of ``cells`` (0 = not reached).

    Examples
    --------
    >>> import numpy as np
    >>> from dpgeo.domain import StudyArea
    >>> from dpgeo.grid import Grid, neighbourhood_offsets
    >>> area = StudyArea.from_bbox((0, 0, 100, 10), crs="EPSG:32615", working_crs="EPSG:32615")
    >>> g = Grid(area, 10 / 2 ** 0.5)
    >>> cells = np.arange(12)                       # a row of 12 cells
    >>> seed = np.isin(cells, [0, 11])              # spans 1 and 2 at both ends
    >>> grow_spans(g, cells, seed, np.array([1, 2]), neighbourhood_offsets(1.0)).tolist()
    [1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2]
    """
    n = cells.size
    out = np.zeros(n, dtype=np.int64)
    if n == 0 or not seed.any():
        return out
    spos = np.flatnonzero(seed)
    out[spos] = seed_label
    r, c, lens = _pairs(grid, cells, offsets)
    graph = csr_matrix((lens, (r, c)), shape=(n, n))
    del r, c, lens  # the graph holds the pairs now (the largest arrays of a dense run)
    _, _, source = dijkstra(graph, directed=False, indices=spos, return_predecessors=True, min_only=True)
    reached = source >= 0
    out[reached] = out[source[reached]]
    return out


@dataclass
class SpanCells:
    """The cells of the DP-DBSCAN spans (public output, before polygons).

    Attributes
    ----------
    grid : Grid
    cell_id : numpy.ndarray
        Sorted flat ids of the core cells.
    label : numpy.ndarray
        Cluster id (1..k) of each core cell.
    count : numpy.ndarray
        Released noisy count of each core cell.
    n_clusters : int
    n_core_cells : int
        How many of the cells passed the core threshold ``MinPts + Γ`` (the
        rest were reached by growing, ``extent="grown"``).
    """

    grid: Grid
    cell_id: np.ndarray
    label: np.ndarray
    count: np.ndarray
    n_clusters: int
    n_core_cells: int = -1

    def label_grid(self) -> np.ndarray:
        """``(ny, nx)`` int array of cluster ids (0 = not in a span)."""
        out = np.zeros(self.grid.ny * self.grid.nx, dtype=np.int64)
        out[self.cell_id] = self.label
        return out.reshape(self.grid.ny, self.grid.nx)

    def label_points(self, x, y) -> np.ndarray:
        """Span id of each projected point (0 = outside every span). Evaluation only."""
        ids, ok = self.grid.cell_index(x, y)
        out = np.zeros(ids.size, dtype=np.int64)
        if self.cell_id.size:
            pos = np.minimum(np.searchsorted(self.cell_id, ids), self.cell_id.size - 1)
            hit = ok & (self.cell_id[pos] == ids)
            out[hit] = self.label[pos[hit]]
        return out


def dbscan_cells(hist: NoisyHistogram, *, min_points: int, eta: float, bound: NoiseBound,
                 extent_bound: NoiseBound | None = None):
    """Core cells and their spans from a released histogram (post-processing only).

    ``extent_bound`` (for ``extent="grown"``): the spans formed by the core
    cells at ``MinPts + bound.gamma`` are grown, without merging, into the
    cells whose noisy NB-sum reaches ``MinPts + extent_bound.gamma``.
    """
    offsets = neighbourhood_offsets(eta)
    threshold = min_points + bound.gamma
    if extent_bound is None or extent_bound.gamma >= bound.gamma:
        cells = core_cells(hist, offsets, threshold)
        labels, k = merge_cells(hist.grid, cells, offsets)
        return SpanCells(hist.grid, cells, labels, hist.lookup(cells), k, cells.size)
    cells, sums = core_cells(hist, offsets, min_points + extent_bound.gamma, return_sums=True)
    strong = sums >= threshold
    seed_label, k = merge_cells(hist.grid, cells[strong], offsets)
    labels = grow_spans(hist.grid, cells, strong, seed_label, offsets)
    keep = labels > 0
    cells, labels = cells[keep], labels[keep]
    return SpanCells(hist.grid, cells, labels, hist.lookup(cells), k, int(strong.sum()))
