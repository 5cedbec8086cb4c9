"""Running totals over periods with the binary-tree mechanism (Dwork, Naor, Pitassi & Rothblum 2010; Chan,
Shi & Song 2011), on the cell counts of a public grid.

Input: the exact counts ``c[t, j]`` of each period ``t = 0 … T−1`` and cell ``j``
(private). Output: for every period ``t`` and cell ``j`` a noisy running total
``Ŝ[t, j] ≈ c[0, j] + … + c[t, j]``.

**The mechanism.** The dyadic intervals of periods ``[i·2^ℓ, (i+1)·2^ℓ)`` that lie
inside ``[0, T)`` are the nodes of a binary tree with ``L = ⌊log₂ T⌋ + 1`` levels
(``ℓ = 0 … L−1``). Every node's sum of counts, in every cell, is released with
discrete Laplace noise of decay ``q = exp(−ε / (s·L))``; the running total to
the end of period ``t`` is the sum of the nodes of the binary decomposition of
``t + 1`` (its set bits, largest first): at most ``L`` nodes, exactly
``popcount(t + 1)``. So the error of a running total is a sum of at most
``L = O(log T)`` noises of scale ``O(L/ε)``, standard deviation
``O(log^{1.5} T / ε)``, where summing ``t + 1`` per-period releases at ε each
has ``O(√t / ε)`` (docs/results.md compares them, measured).

**Privacy.** Add or remove one record of at most ``s`` points (or, with the
per-person cap counted over the whole series, one person with at most
``s = K`` points). Each point lies in one period and one cell, and a period lies
in at most one node of each level (nodes that would reach beyond ``T`` are
never formed): the vector of all node sums changes by at most ``s`` in each of
``L`` levels, an L1 sensitivity of ``s·L``. Discrete Laplace noise of decay
``exp(−ε/(s·L))`` on every coordinate is therefore ε-DP (the Laplace
mechanism, §2), and the running totals, the layers and their intervals are
post-processing. The noise is exact (:func:`dpgeo.noise.sample_discrete_laplace`).

The grid is public; every cell of its universe gets its noisy totals (a cell
with no point is released like any other).

Examples
--------
>>> from dpgeo.noise import NoiseSource
>>> c = np.array([[1, 0], [2, 0], [0, 5]])           # 3 periods, 2 cells
>>> r = tree_running_totals(c, epsilon=600.0, sensitivity=1, rng=NoiseSource(1))  # ε/(sL) = 300: noise ~0
>>> r.totals.tolist(), r.levels, r.nodes_used.tolist()
([[1, 0], [3, 0], [3, 5]], 2, [1, 1, 2])
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..noise import discrete_laplace_q, sample_discrete_laplace, sum_interval_halfwidth

__all__ = ["TreeTotals", "tree_levels", "tree_running_totals", "tree_node_count"]


def tree_levels(n_periods: int) -> int:
    """``L = ⌊log₂ T⌋ + 1``: the levels of complete dyadic nodes over ``T`` periods (each period lies in at most one
    node of each level)."""
    return int(n_periods).bit_length()


def tree_node_count(n_periods: int) -> int:
    """How many complete dyadic nodes ``T`` periods have (``Σ_ℓ ⌊T / 2^ℓ⌋``): noisy values per cell."""
    t, n = int(n_periods), 0
    while t:
        n += t
        t //= 2
    return n


@dataclass
class TreeTotals:
    """Noisy running totals: ``totals[t, j]`` for period ``t`` and cell ``j``, the nodes each total sums
    (``nodes_used[t]``), the tree's ``levels`` and the noise decay ``q`` of one node."""

    totals: np.ndarray
    nodes_used: np.ndarray
    levels: int
    q: float

    def halfwidth(self, level=0.95) -> np.ndarray:
        """Half-width of each period's interval for one cell's total (a sum of ``nodes_used`` noises)."""
        return np.array([sum_interval_halfwidth(int(k), self.q, level) for k in self.nodes_used], dtype=np.int64)


def tree_running_totals(counts, *, epsilon, sensitivity, rng) -> TreeTotals:
    """ε-DP running totals of ``counts[t, j]`` (periods × cells) with the binary-tree mechanism (see the module).

    Parameters
    ----------
    counts : numpy.ndarray
        ``(T, n)`` int64 exact counts of each period and cell (private).
    epsilon : float
        The whole release's ε.
    sensitivity : int
        Points one record (or one person, over all periods) may contribute: ``s``.
    rng : dpgeo.noise.NoiseSource
    """
    counts = np.asarray(counts, dtype=np.int64)
    t_n, n = counts.shape
    levels = tree_levels(t_n)
    node_s = sensitivity * levels
    prefix = np.zeros((t_n, n), dtype=np.int64)
    used = np.zeros(t_n, dtype=np.int64)
    # node (ℓ, i) covers periods [i·2^ℓ, (i+1)·2^ℓ); draw every complete node once, level by level
    cum = np.vstack([np.zeros((1, n), dtype=np.int64), np.cumsum(counts, axis=0)])
    noisy = {}
    for ell in range(levels):
        width = 1 << ell
        k = t_n // width
        if not k:
            continue
        starts = np.arange(k) * width
        sums = cum[starts + width] - cum[starts]
        z = sample_discrete_laplace(rng, k * n, epsilon=epsilon, sensitivity=node_s).reshape(k, n)
        noisy[ell] = sums + z
    for t in range(t_n):
        start, m = 0, t + 1
        for ell in reversed(range(levels)):
            if m >> ell & 1:
                prefix[t] += noisy[ell][start >> ell]
                start += 1 << ell
                used[t] += 1
    return TreeTotals(prefix, used, levels, discrete_laplace_q(epsilon, node_s))
