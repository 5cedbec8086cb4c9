"""DP histograms: the noise law, the sensitivity scaling, and sparse == dense in distribution.

Significance level for every statistical test: 1e-6 (fixed seeds, so the
tests are deterministic; a correct implementation would fail one with
probability at most 1e-6 over the choice of seed).
"""

import math

import numpy as np
import pytest
from scipy import stats

from dpgeo.domain import StudyArea
from dpgeo.grid import Grid
from dpgeo.histogram import (
    choose_histogram,
    dense_histogram,
    exact_counts,
    noisy_histogram,
    sparse_histogram,
    sparse_threshold,
)
from dpgeo.noise import NoiseSource, discrete_laplace_pmf

ALPHA = 1e-6


def small_grid(n_side=10, cell=10.0):
    area = StudyArea.from_bbox((0, 0, n_side * cell, n_side * cell), "EPSG:32615", working_crs="EPSG:32615")
    return Grid(area, cell)


def gof_discrete_laplace(z, q, hi=8):
    edges = np.arange(-hi, hi + 1)
    obs = np.r_[(z < -hi).sum(), [(z == v).sum() for v in edges], (z > hi).sum()]
    tail = q ** (hi + 1) / (1 + q)
    exp = np.r_[tail, discrete_laplace_pmf(edges, q), tail] * z.size
    keep = exp > 5
    o, e = obs[keep], exp[keep]
    return stats.chisquare(o, e * o.sum() / e.sum()).pvalue


@pytest.mark.parametrize("epsilon,sensitivity", [(1.0, 1), (0.5, 1), (1.0, 3)])
def test_dense_noise_law_and_sensitivity(epsilon, sensitivity):
    g = small_grid(100)  # 10,000 cells
    rng = NoiseSource(seed=2024)
    pts = np.random.default_rng(2024).integers(0, g.n_cells, 30_000)
    ids, counts = exact_counts(g, pts)
    true = np.zeros(g.n_cells, dtype=np.int64)
    true[ids] = counts
    noise = []
    for _ in range(10):
        h = dense_histogram(g, ids, counts, epsilon=epsilon, sensitivity=sensitivity, rng=rng)
        assert h.count.dtype == np.int64 and h.cell_id.size == g.n_cells
        noise.append(h.count - true)
    z = np.concatenate(noise)
    q = math.exp(-epsilon / sensitivity)
    assert gof_discrete_laplace(z, q) > ALPHA
    # the same data must reject the scale of a wrong sensitivity / budget
    q_wrong = math.exp(-epsilon / (sensitivity * 1.3))
    assert gof_discrete_laplace(z, q_wrong) < ALPHA


def test_sparse_threshold_is_public_and_bounds_false_cells():
    q = math.exp(-1.0)
    for n_cells in (10**4, 10**6, 10**9):
        theta = sparse_threshold(n_cells, q, 1000)
        assert theta >= 1
        assert n_cells * q**theta / (1 + q) <= 1000
        if theta > 1:
            assert n_cells * q ** (theta - 1) / (1 + q) > 1000


def test_choose_histogram_by_universe_size_only():
    g = small_grid(100)
    assert choose_histogram(g, "auto", max_dense_cells=10_000) == "dense"
    assert choose_histogram(g, "auto", max_dense_cells=9_999) == "sparse"


@pytest.mark.parametrize("runs", [3_000, pytest.param(20_000, marks=pytest.mark.slow)])
def test_sparse_equals_dense_then_truncate_in_distribution(runs):
    """Each cell's released value has the law of dense noise truncated below θ.

    Cells with true counts 0, 2 and 6; θ = 3, ε = 0.8. For each, the release
    is 0 with probability Pr[x + Z < θ] and v >= θ with Pr[Z = v - x].
    False-failure rate at most 1e-6 per check whatever ``runs``; 20,000 runs
    (with --run-slow) see smaller departures than 3,000.
    """
    g = small_grid(6)  # 36 cells
    theta, eps = 3, 0.8
    q = math.exp(-eps)
    pts = np.r_[np.full(2, 7), np.full(6, 20)]
    ids, counts = exact_counts(g, pts)
    rng = NoiseSource(seed=77)
    rel = np.zeros((runs, g.n_cells), dtype=np.int64)
    n_false = np.zeros(runs, dtype=np.int64)
    for r in range(runs):
        h = sparse_histogram(g, ids, counts, epsilon=eps, theta=theta, rng=rng)
        rel[r, h.cell_id] = h.count
        n_false[r] = h.n_false_cells
    assert rel[rel != 0].min() >= theta
    for cell, x in ((0, 0), (7, 2), (20, 6)):
        v = rel[:, cell]
        top = theta + 12
        support = np.arange(theta, top + 1)
        p_vals = discrete_laplace_pmf(support - x, q)
        p_zero = 1 - q ** (theta - x) / (1 + q) if theta - x >= 1 else q ** (x - theta + 1) / (1 + q)
        p_top = 1 - p_zero - p_vals.sum()
        obs = np.r_[(v == 0).sum(), [(v == s).sum() for s in support], (v > top).sum()]
        exp = np.r_[p_zero, p_vals, p_top] * runs
        keep = exp > 5
        o, e = obs[keep], exp[keep]
        assert stats.chisquare(o, e * o.sum() / e.sum()).pvalue > ALPHA, (cell, x)
    # the number of released empty cells is Binomial(M, Pr[Z >= θ])
    m, p = g.n_cells - ids.size, q**theta / (1 + q)
    k = np.arange(0, 8)
    obs = np.r_[[(n_false == i).sum() for i in k], (n_false > 7).sum()]
    exp = np.r_[stats.binom.pmf(k, m, p), stats.binom.sf(7, m, p)] * runs
    keep = exp > 5
    o, e = obs[keep], exp[keep]
    assert stats.chisquare(o, e * o.sum() / e.sum()).pvalue > ALPHA
    # and every empty cell is equally likely to be one of them
    empty = np.setdiff1d(np.arange(g.n_cells), ids)
    hits = (rel[:, empty] != 0).sum(axis=0)
    assert stats.chisquare(hits).pvalue > ALPHA


def test_sparse_on_a_huge_universe_costs_memory_of_the_data():
    area = StudyArea.from_bbox((0, 0, 1e5, 1e5), "EPSG:32615", working_crs="EPSG:32615")
    g = Grid(area, 1.0)  # 1e10 cells
    rng = NoiseSource(seed=3)
    pts = np.random.default_rng(3).integers(0, g.n_cells, 10_000)
    h = noisy_histogram(g, pts, epsilon=1.0, rng=rng, max_false_cells=5000)
    assert h.kind == "sparse"
    assert h.cell_id.size < 30_000
    assert np.all(np.diff(h.cell_id) > 0)
