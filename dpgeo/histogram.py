"""Differentially private histograms of point counts on a grid.

One interface, two implementations:

* **dense** — every cell of the universe gets an independent discrete
  Laplace noise; memory and time are proportional to the number of cells.
* **sparse** (Qiu & Yi, Algorithm 2, with discrete noise) — only non-empty
  cells are noised; a noisy count below the integer threshold ``θ`` is
  released as 0; then each of the ``M`` empty cells is released,
  independently with probability ``p = Pr[Z >= θ]``, with a value from the
  noise tail ``Z | Z >= θ``. The released empty cells are found by exact
  geometric skips over the empty cells' ranks, never by visiting them. Its
  output has exactly the law of "dense histogram, then every count below θ
  set to 0", so it is ε-DP by post-processing; time and memory are
  proportional to the number of non-empty cells plus the number of
  released empty cells.

The choice between them, and ``θ``, depend only on public quantities — the
number of cells in the universe and a memory bound — never on the data.

Neighbouring relation: two point sets are neighbours when one is the other
plus or minus one *record*; a record contributes at most ``sensitivity``
points (default 1). The count vector then has L1 sensitivity
``sensitivity``, and the noise is discrete Laplace with
``q = exp(-ε / sensitivity)``, drawn exactly (:mod:`dpgeo.noise`) from the
given :class:`~dpgeo.noise.NoiseSource`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .errors import ParameterError
from .counting.cells import exact_counts
from .grid import Grid
from .noise import (
    LAPLACE_SAMPLER,
    as_source,
    discrete_laplace_q,
    sample_discrete_laplace,
    sample_discrete_laplace_tail,
    sample_tail_positions,
)

__all__ = [
    "NoisyHistogram",
    "exact_counts",
    "dense_histogram",
    "sparse_histogram",
    "sparse_threshold",
    "choose_histogram",
    "noisy_histogram",
    "DEFAULT_MAX_DENSE_CELLS",
    "DEFAULT_MAX_FALSE_CELLS",
]

#: Largest universe (cells) noised densely by ``histogram="auto"``.
DEFAULT_MAX_DENSE_CELLS = 1 << 22
#: Expected number of empty cells the sparse histogram may release.
DEFAULT_MAX_FALSE_CELLS = 1 << 18


@dataclass
class NoisyHistogram:
    """A released DP histogram (public; safe to post-process).

    Attributes
    ----------
    grid : Grid
    kind : {"dense", "sparse"}
    cell_id : numpy.ndarray
        Sorted int64 flat ids of the cells with a stored count (dense: every
        universe cell; sparse: the cells whose released count is non-zero).
    count : numpy.ndarray
        int64 noisy counts of ``cell_id``. Every other cell's release is 0.
    epsilon, sensitivity, q : float
        Budget, L1 sensitivity and noise decay ``exp(-ε/Δ)``.
    theta : int or None
        Sparse threshold: noisy counts below it were released as 0.
    sampler : str
        How the noise was drawn and where its randomness came from.
    """

    grid: Grid
    kind: str
    cell_id: np.ndarray
    count: np.ndarray
    epsilon: float
    sensitivity: float
    q: float
    theta: int | None = None
    n_false_cells: int | None = field(default=None, repr=False)
    sampler: str | None = None

    def lookup(self, ids: np.ndarray) -> np.ndarray:
        """Released counts of arbitrary flat ids (0 for cells not stored)."""
        ids = np.asarray(ids, dtype=np.int64)
        if self.cell_id.size == 0:
            return np.zeros(ids.shape, dtype=np.int64)
        pos = np.searchsorted(self.cell_id, ids)
        pos = np.minimum(pos, self.cell_id.size - 1)
        hit = self.cell_id[pos] == ids
        return np.where(hit, self.count[pos], 0)

    def to_dense(self) -> np.ndarray:
        """``(ny, nx)`` int64 array of released counts (0 outside the universe)."""
        g = self.grid
        out = np.zeros(g.ny * g.nx, dtype=np.int64)
        out[self.cell_id] = self.count
        return out.reshape(g.ny, g.nx)

    def to_metadata(self) -> dict:
        return {
            "histogram": self.kind,
            "noise": "discrete Laplace (two-sided geometric)",
            "sampler": self.sampler,
            "noise_q": self.q,
            "sensitivity": self.sensitivity,
            "theta": self.theta,
        }


def dense_histogram(grid, ids, counts, *, epsilon, sensitivity=1.0, rng) -> NoisyHistogram:
    """Noise every universe cell with discrete Laplace noise of decay ``exp(-ε/Δ)``.

    ``rng`` is a :class:`~dpgeo.noise.NoiseSource` (a numpy Generator is
    accepted for experiments; its output is not private).
    """
    src = as_source(rng)
    q = discrete_laplace_q(epsilon, sensitivity)
    uni = grid.universe_ids()
    vals = sample_discrete_laplace(src, uni.size, epsilon=epsilon, sensitivity=sensitivity)
    if ids.size:
        pos = np.searchsorted(uni, ids)
        vals[pos] += counts
    return NoisyHistogram(grid, "dense", uni, vals, float(epsilon), float(sensitivity), q, None,
                          sampler=_describe(src))


def _describe(src) -> str:
    return f"{LAPLACE_SAMPLER}; {src.description}"


def sparse_threshold(n_cells: int, q: float, max_false_cells: int = DEFAULT_MAX_FALSE_CELLS) -> int:
    """Smallest integer ``θ >= 1`` with ``n_cells · Pr[Z >= θ] <= max_false_cells``.

    A function of public quantities only. ``Pr[Z >= θ] = q**θ / (1+q)``.
    """
    if max_false_cells <= 0:
        raise ParameterError(f"max_false_cells must be > 0, got {max_false_cells}")
    need = math.log(max_false_cells * (1 + q) / max(n_cells, 1)) / math.log(q)
    return max(1, int(math.ceil(need - 1e-12)))


def sparse_histogram(grid, ids, counts, *, epsilon, sensitivity=1.0, theta, rng) -> NoisyHistogram:
    """Qiu & Yi's linear-time histogram with exact discrete Laplace noise.

    Parameters
    ----------
    grid : Grid
    ids, counts : numpy.ndarray
        Exact non-empty cells (from :func:`exact_counts`).
    epsilon : float
    sensitivity : float
    theta : int
        Release threshold (>= 1), chosen from public quantities
        (:func:`sparse_threshold`).
    rng : dpgeo.noise.NoiseSource
        (a numpy Generator is accepted for experiments: not private)

    Notes
    -----
    Empty cell ``j`` would, in the dense histogram, be released as non-zero
    exactly when its noise ``Z_j >= θ``: an event of probability
    ``p = q**θ / (1+q)``, independent across cells. The released empty cells
    are therefore the successes of ``M`` Bernoulli(p) trials over the empty
    cells in rank order (:func:`dpgeo.noise.sample_tail_positions`, exact
    geometric gaps), and each gets an independent value from ``Z | Z >= θ``.
    An empty cell's rank is mapped to its cell id through the non-empty
    cells' universe ranks, without listing the universe.
    """
    theta = int(theta)
    if theta < 1:
        raise ParameterError(f"theta must be an integer >= 1, got {theta}")
    src = as_source(rng)
    q = discrete_laplace_q(epsilon, sensitivity)
    # 1. non-empty cells: noise, keep if >= theta
    noisy = counts + sample_discrete_laplace(src, counts.size, epsilon=epsilon, sensitivity=sensitivity)
    keep = noisy >= theta
    kept_ids, kept_vals = ids[keep], noisy[keep]
    # 2. empty cells: which ones reach theta (in rank order among the empty cells), and their values
    n_empty = grid.n_cells - ids.size
    empty_rank = sample_tail_positions(src, n_empty, epsilon=epsilon, sensitivity=sensitivity, theta=theta)
    false_ids = _empty_cell_ids(grid, ids, empty_rank)  # sorted
    false_vals = sample_discrete_laplace_tail(src, false_ids.size, epsilon=epsilon, sensitivity=sensitivity,
                                              theta=theta)
    # merge the (small) set of false cells into the sorted kept cells
    at = np.searchsorted(kept_ids, false_ids)
    all_ids = np.insert(kept_ids, at, false_ids)
    all_vals = np.insert(kept_vals, at, false_vals)
    return NoisyHistogram(grid, "sparse", all_ids, all_vals, float(epsilon), float(sensitivity), q, theta,
                          int(false_ids.size), sampler=_describe(src))


def _empty_cell_ids(grid: Grid, nonempty: np.ndarray, empty_rank: np.ndarray) -> np.ndarray:
    """Flat ids of the empty universe cells with the given ranks (0-based, among empty cells only).

    With ``a_i`` the sorted universe ranks of the non-empty cells, the number
    of empty cells before ``a_i`` is ``a_i - i`` (non-decreasing); the empty
    cell of rank ``e`` has universe rank ``e + #{i : a_i - i <= e}``.
    """
    if empty_rank.size == 0:
        return np.zeros(0, dtype=np.int64)
    if nonempty.size == 0:
        return grid.universe_id_at(empty_rank)
    before = grid.universe_rank(nonempty, is_sorted=True) - np.arange(nonempty.size, dtype=np.int64)
    urank = empty_rank + np.searchsorted(before, empty_rank, side="right")
    return grid.universe_id_at(urank)


def choose_histogram(grid: Grid, method: str = "auto", *, max_dense_cells: int = DEFAULT_MAX_DENSE_CELLS) -> str:
    """``"dense"`` or ``"sparse"`` from the public universe size and a memory bound."""
    if method not in ("auto", "dense", "sparse"):
        raise ParameterError(f"histogram must be 'auto', 'dense' or 'sparse', got {method!r}")
    if method != "auto":
        return method
    return "dense" if grid.n_cells <= max_dense_cells else "sparse"


def noisy_histogram(
    grid: Grid,
    cell_id: np.ndarray,
    *,
    epsilon: float,
    rng,
    sensitivity: float = 1.0,
    method: str = "auto",
    max_dense_cells: int = DEFAULT_MAX_DENSE_CELLS,
    max_false_cells: int = DEFAULT_MAX_FALSE_CELLS,
) -> NoisyHistogram:
    """Release an ε-DP histogram of the points' cells.

    Parameters
    ----------
    grid : Grid
    cell_id : numpy.ndarray
        Flat cell id of every point inside the study area (private).
    epsilon : float
        Privacy budget spent on the histogram.
    rng : dpgeo.noise.NoiseSource
        Where the noise's randomness comes from (a numpy Generator is
        accepted for experiments; its output is not private).
    sensitivity : float
        Points per record (L1 sensitivity of the counts), default 1.
    method : {"auto", "dense", "sparse"}
    max_dense_cells : int
        ``auto`` noises densely up to this many universe cells.
    max_false_cells : int
        Sparse only: θ is chosen so that at most this many empty cells are
        released in expectation.

    Examples
    --------
    >>> import numpy as np
    >>> from dpgeo.domain import StudyArea
    >>> from dpgeo.grid import Grid
    >>> from dpgeo.noise import NoiseSource
    >>> g = Grid(StudyArea.from_bbox((0, 0, 1000, 1000), "EPSG:32615"), 100.0)
    >>> h = noisy_histogram(g, np.array([0, 0, 5]), epsilon=1.0, rng=NoiseSource(seed=1))
    >>> h.kind, h.count.size
    ('dense', 100)
    """
    kind = choose_histogram(grid, method, max_dense_cells=max_dense_cells)
    ids, counts = exact_counts(grid, cell_id)
    if kind == "dense":
        return dense_histogram(grid, ids, counts, epsilon=epsilon, sensitivity=sensitivity, rng=rng)
    q = discrete_laplace_q(epsilon, sensitivity)
    theta = sparse_threshold(grid.n_cells, q, max_false_cells)
    return sparse_histogram(grid, ids, counts, epsilon=epsilon, sensitivity=sensitivity, theta=theta, rng=rng)
