"""PrivTree on grid blocks (dpgeo.mechanisms.privtree): the split decisions' noise, the partition, the leaf counts."""

import math
from fractions import Fraction

import numpy as np
import pytest

from dpgeo.domain import StudyArea
from dpgeo.grid import Grid
from dpgeo.mechanisms.privtree import (
    BRANCHING,
    privtree_leaves,
    privtree_noise,
    rasterise_leaves,
    release_leaf_counts,
)
from dpgeo.noise import NoiseSource, noise_epsilon, noise_rate


def _grid(nx, ny=None):
    ny = nx if ny is None else ny
    return Grid(StudyArea.from_bbox((0, 0, nx, ny), "EPSG:32615", working_crs="EPSG:32615"), 1.0)


def _split_probability(b: int, theta: int, q: float) -> float:
    """``Pr[b + Z > θ]`` for discrete Laplace ``Pr[Z=z] ∝ q**|z|`` (``Pr[Z ≤ -j] = q**j/(1+q)``, j ≥ 0)."""
    a = theta - b  # split ⇔ Z ≥ a + 1
    if a + 1 >= 1:
        return q ** (a + 1) / (1 + q)
    return 1.0 - q ** (-a) / (1 + q)


@pytest.mark.parametrize("eps", [0.05, 0.3, 1.0, 2.0])
def test_noise_and_bias_meet_the_proof(eps):
    e_node, bias = privtree_noise(eps)
    rate = noise_rate(e_node, 1)  # 1/λ as the sampler realises it
    assert rate * Fraction(2 * BRANCHING - 1, BRANCHING - 1) <= noise_epsilon(eps)
    assert bias * float(rate) >= math.log(BRANCHING)  # δ ≥ λ ln β
    assert isinstance(bias, int)


def test_split_decisions_follow_the_biased_count_law():
    """Roots of 2×2 cells holding ``c`` points each split with ``Pr[max(θ-δ, c) + Z > θ]``; children of depth 1
    holding ``c₁`` with ``Pr[max(θ-δ, c₁ - δ) + Z > θ]`` (the bias). Each frequency is within 4.5 binomial
    s.d. of its exact probability: a false failure at most 2 × 6.8e-6 per run (two normal tails each)."""
    eps, theta = 0.6, 5
    e_node, bias = privtree_noise(eps)
    q = math.exp(-float(noise_rate(e_node, 1)))
    g = _grid(256)
    ids = np.arange(256 * 256)

    def check(successes, trials, p):
        assert trials > 1000
        assert abs(successes / trials - p) <= 4.5 * math.sqrt(p * (1 - p) / trials)

    # depth limit 1: 128 x 128 roots of 2 x 2 cells, 2 points per cell (8 per root) -- near the threshold
    n = k = 0
    for seed in range(3):
        t = privtree_leaves(g, ids, np.full(ids.size, 2), depth=1, epsilon_tree=eps, theta=theta,
                            rng=NoiseSource(seed=seed))
        n += 128 * 128
        k += int((t.leaf_depth == 1).sum()) // 4
    check(k, n, _split_probability(max(theta - bias, 8), theta, q))
    # depth limit 2: roots of 4 x 4 cells (4·c1 points: nearly always split), children of 2 x 2 cells holding
    # c1 points; only the children of split roots decide
    c1 = 4 * math.ceil((bias + theta - 1) / 4)  # biased count about θ: split with probability near one half
    n = k = 0
    for seed in range(3):
        t = privtree_leaves(g, ids, np.full(ids.size, c1 // 4), depth=2,
                            epsilon_tree=eps, theta=theta, rng=NoiseSource(seed=10 + seed))
        split_children = int((t.leaf_depth == 2).sum()) // 4
        n += split_children + int((t.leaf_depth == 1).sum())
        k += split_children
    check(k, n, _split_probability(max(theta - bias, c1 - bias), theta, q))


def test_leaves_partition_the_grid_into_aligned_blocks():
    rng = np.random.default_rng(1)
    g = _grid(50, 37)  # not a multiple of the root size: the last roots are cut by the grid
    ids = rng.integers(0, g.nx * g.ny, 4000)
    ids, counts = np.unique(ids, return_counts=True)
    t = privtree_leaves(g, ids, counts, depth=3, epsilon_tree=1.0, theta=3, rng=NoiseSource(seed=4))
    lc = t.leaf_of_cell
    assert lc.shape == (g.ny, g.nx) and lc.min() == 0
    assert np.bincount(lc.ravel()).tolist() == t.leaf_cells.tolist()  # every cell in exactly one leaf
    assert t.leaf_cells.sum() == g.nx * g.ny
    jy, jx = np.indices(lc.shape)
    for leaf in np.unique(lc):
        side = 1 << (3 - int(t.leaf_depth[leaf]))
        ys, xs = jy[lc == leaf], jx[lc == leaf]
        assert ys.min() % side == 0 and xs.min() % side == 0  # an aligned block of its depth ...
        assert ys.max() - ys.min() < side and xs.max() - xs.min() < side  # ... and within it
        assert ys.size == (min(ys.min() + side, g.ny) - ys.min()) * (min(xs.min() + side, g.nx) - xs.min())


def test_one_point_changes_one_leaf_count_by_one():
    rng = np.random.default_rng(2)
    g = _grid(64)
    ids, counts = np.unique(rng.integers(0, 64 * 64, 3000), return_counts=True)
    t = privtree_leaves(g, ids, counts, depth=3, epsilon_tree=1.0, theta=4, rng=NoiseSource(seed=5))
    for cell in (0, 777, 4095):
        ids2, counts2 = np.unique(np.r_[np.repeat(ids, counts), cell], return_counts=True)
        a = release_leaf_counts(t, g, ids, counts, epsilon=1.0, rng=NoiseSource(seed=6)).leaf_count.copy()
        b = release_leaf_counts(t, g, ids2, counts2, epsilon=1.0, rng=NoiseSource(seed=6)).leaf_count.copy()
        diff = b - a
        assert np.abs(diff).sum() == 1 and diff[t.leaf_of_cell[cell // 64, cell % 64]] == 1


def test_rasterised_leaves_keep_each_leaf_count():
    rng = np.random.default_rng(3)
    g = _grid(40, 24)
    ids, counts = np.unique(rng.integers(0, 40 * 24, 900), return_counts=True)
    t = privtree_leaves(g, ids, counts, depth=3, epsilon_tree=0.5, theta=2, rng=NoiseSource(seed=7))
    release_leaf_counts(t, g, ids, counts, epsilon=0.5, rng=NoiseSource(seed=8))
    v = rasterise_leaves(t, 3)
    sums = np.bincount(t.leaf_of_cell.ravel(), weights=v.ravel(), minlength=t.leaf_cells.size)
    assert sums.astype(np.int64).tolist() == t.leaf_count.tolist()
    spread = np.full(t.leaf_cells.size, -np.inf)
    np.maximum.at(spread, t.leaf_of_cell.ravel(), v.ravel())
    low = np.full(t.leaf_cells.size, np.inf)
    np.minimum.at(low, t.leaf_of_cell.ravel(), v.ravel())
    assert (spread - low <= 1).all()  # as even as integers allow


def _two_blobs():
    from dpgeo.mechanisms.resolution import fine_grid

    rng = np.random.default_rng(0)
    x = np.r_[rng.normal(600, 40, 3000), rng.normal(1400, 40, 3000), rng.uniform(0, 2000, 600)]
    y = np.r_[rng.normal(1000, 40, 3000), rng.normal(1000, 40, 3000), rng.uniform(0, 2000, 600)]
    f = fine_grid(StudyArea.from_bbox((0, 0, 2000, 2000), "EPSG:32615", working_crs="EPSG:32615"))
    ids, counts = np.unique(f.assign(x, y).cell_id, return_counts=True)
    return f, ids, counts


@pytest.mark.parametrize("resolution", ["privtree", "privtree_few"])
def test_auto_with_privtree_spends_at_most_its_budget(resolution):
    from dpgeo.mechanisms.auto import auto_spans_cells

    f, ids, counts = _two_blobs()
    r = auto_spans_cells(f, ids, counts, epsilon=1.0, rng=NoiseSource(seed=2), resolution=resolution)
    s = r.settings
    parts = [s["epsilon_total"], s["epsilon_occupancy"], s["epsilon_histogram"]]
    assert sum(noise_epsilon(p) for p in parts if p) <= 1
    assert r.clusters.n_clusters == 2
    if resolution == "privtree":
        assert s["privtree_leaves"] < r.grid.n_cells  # coarser than the fine grid somewhere


def test_privtree_refuses_records_of_several_points():
    from dpgeo.errors import ParameterError
    from dpgeo.mechanisms.auto import auto_spans_cells

    f, ids, counts = _two_blobs()
    with pytest.raises(ParameterError, match="sensitivity 1"):
        auto_spans_cells(f, ids, counts, epsilon=1.0, rng=NoiseSource(seed=2), resolution="privtree", sensitivity=2)


@pytest.mark.parametrize("eps", [0.1, 0.5, 2.0])
def test_worst_path_loses_at_most_the_tree_budget(eps):
    """The exact privacy loss of adding one point, summed over the split nodes of its path (the proof's
    sum of ρ), for every path whose biased counts fall by exactly δ per level (the worst case) and every
    last value around the threshold: never above ε_tree; the leaf's loss the other way at most 1/λ."""
    e_node, bias = privtree_noise(eps)
    r = float(noise_rate(e_node, 1))
    q, theta = math.exp(-r), 0

    def log_split(b):  # ln Pr[b + Z > θ]
        return math.log(_split_probability(b, theta, q))

    def rho(x):  # loss of a split node whose unbiased-floor value is x (the record adds one to its count)
        b, b1 = max(theta - bias, x), max(theta - bias, x + 1)
        return log_split(b1) - log_split(b)

    worst = 0.0
    for last in range(theta - bias - 2, theta + 2 * bias + 2):
        path = [last + j * bias for j in range(60)]  # x of the split nodes, deepest first
        worst = max(worst, sum(rho(x) for x in path))
    assert worst <= float(noise_epsilon(eps)) * (1 + 1e-9)
    assert worst >= 0.5 * float(noise_epsilon(eps))  # the bound is not loose by much: the test can see a change
    for b in range(theta - bias, theta + 3 * bias):  # the leaf: ln Pr[no split | P] - ln Pr[no split | P + r]
        leaf = math.log(1 - _split_probability(b, theta, q)) - math.log(1 - _split_probability(b + 1, theta, q))
        assert leaf <= r * (1 + 1e-9)
