"""Each cell's own noise on cells of different sizes (dpgeo.mechanisms.cell_noise) and how the rules read it."""

import math

import numpy as np
import pytest

from dpgeo.domain import StudyArea
from dpgeo.grid import Grid
from dpgeo.histogram import dense_histogram
from dpgeo.mechanisms.cell_noise import leaf_cell_noise, uniform_reading
from dpgeo.mechanisms.level_floor import level_noise, sum_noise_sd
from dpgeo.mechanisms.level_select import select_clusters
from dpgeo.mechanisms.level_tree import build_level_tree
from dpgeo.mechanisms.levels import density_levels
from dpgeo.noise import NoiseSource, discrete_laplace_q, discrete_laplace_variance, sample_discrete_laplace


def _grid(nx, ny, w=10.0):
    return Grid(StudyArea.from_bbox((0, 0, nx * w, ny * w), "EPSG:32615", working_crs="EPSG:32615"), w)


def _two_sizes(ny=12, nx=16):
    """Leaves: the left half blocks of 4×4 cells, the right half single cells."""
    jy, jx = np.indices((ny, nx))
    left = jx < nx // 2
    key = np.where(left, (jy // 4) * 100 + jx // 4, 10_000 + jy * nx + jx)
    _, leaf = np.unique(key.ravel(), return_inverse=True)
    leaf = leaf.reshape(ny, nx)
    return leaf, np.bincount(leaf.ravel())


@pytest.mark.parametrize("kernel", ["box", "binomial"])
def test_one_cell_leaves_read_as_the_uniform_grid(kernel):
    q = discrete_laplace_q(0.7, 1)
    sd = math.sqrt(discrete_laplace_variance(q))
    leaf = np.arange(64).reshape(8, 8)
    counts = np.arange(64) - 10
    n = leaf_cell_noise(leaf, np.ones(64, int), counts, sd, kernel=kernel)
    inner = np.zeros((8, 8), bool)
    inner[1:-1, 1:-1] = True
    want_sd, want_var = level_noise(q, kernel)
    assert np.allclose(n.level_sd.reshape(8, 8)[inner], want_sd)
    assert np.allclose(n.level_variance.reshape(8, 8)[inner], want_var)
    assert np.allclose(n.box_sd.reshape(8, 8)[inner], sum_noise_sd(q))
    assert np.allclose(n.count_z, counts / sd)
    assert uniform_reading(sd, kernel) == pytest.approx((want_sd, want_var))


@pytest.mark.parametrize("kernel", ["box", "binomial"])
def test_a_window_s_noise_is_the_sum_of_its_leaves_shares(kernel):
    """Simulated: each leaf's noise spread over its cells (unrounded), summed over each cell's window by the
    kernel; the empirical variance of 6,000 draws is within 12% of the formula at every cell. The variance
    estimate's relative s.d. is about √((2 + excess kurtosis of a weighted sum ≤ 3)/6000) ≤ 0.029, so 12% is
    over 4 s.d. of it: a false failure below 1e-4 per cell-kernel pair (about 0.02 over the 384 cells)."""
    leaf, cells = _two_sizes()
    q = math.exp(-1.0 / 1.4)
    sd = math.sqrt(discrete_laplace_variance(q))
    n = leaf_cell_noise(leaf, cells, np.zeros(cells.size, int), sd, kernel=kernel)  # counts 0: no rounding term
    rng = NoiseSource(seed=11)
    draws = 6000
    z = sample_discrete_laplace(rng, draws * cells.size, epsilon=1 / 1.4).reshape(draws, cells.size)
    spread = (z / cells)[:, leaf]  # (draws, ny, nx)
    ny, nx = leaf.shape
    pad = np.zeros((draws, ny + 2, nx + 2))
    pad[:, 1:-1, 1:-1] = spread
    w = {"box": lambda dx, dy: 1.0, "binomial": lambda dx, dy: (2 - abs(dx)) * (2 - abs(dy)) * 9 / 16}[kernel]
    s = sum(w(dx, dy) * pad[:, 1 + dy:1 + dy + ny, 1 + dx:1 + dx + nx] for dy in (-1, 0, 1) for dx in (-1, 0, 1))
    emp = s.var(axis=0).ravel()
    assert np.allclose(emp, n.level_sd ** 2, rtol=0.12)
    # a window inside a 4x4 leaf has (Σ w)²/16² of one leaf's variance; of single cells Σ w² of it
    assert n.box_sd.reshape(ny, nx)[1, 1] == pytest.approx(sd * 9 / 16)
    assert n.box_sd.reshape(ny, nx)[5, 12] == pytest.approx(sd * 3)


def _bumps(values, counts):
    g = _grid(len(values), 1)
    return build_level_tree(g, np.arange(len(values)), np.asarray(values), np.asarray(counts))


def test_a_large_leaf_s_real_dip_is_read_with_its_own_small_noise():
    """Two flat plateaus of large leaves (level noise s.d. 1) with a real dip between them: one s.d. for all
    cells (10, that of single-cell leaves elsewhere on the map) reads the dip as noise; each cell's own
    reads it as two clusters."""
    t = _bumps([20, 26, 20, 16, 20, 26, 20], [5, 8, 5, 2, 5, 8, 5])
    kw = dict(min_mass=10, extent="core", dip_ratio=0.25, dip_z=1.0, level_variance=1.0)
    assert select_clusters(t, min_prominence=10.0, noise_sd=10.0, **kw).n_clusters == 1
    own = select_clusters(t, min_prominence=np.full(7, 1.0), noise_sd=np.full(7, 1.0), **kw)
    assert own.n_clusters == 2 and own.label.tolist() == [1, 1, 1, 2, 2, 2]


def test_single_cells_noise_bumps_are_not_read_with_a_large_leaf_s_small_noise():
    """The other way round: two bumps of single-cell leaves (level noise s.d. 12) joined at a saddle; one small
    s.d. (2, of the large leaves elsewhere) reads them as two clusters, each cell's own as one."""
    t = _bumps([30, 45, 36, 36, 36, 45, 30], [5, 12, 6, 6, 6, 12, 5])
    kw = dict(min_mass=10, extent="core", dip_ratio=0.0, dip_z=1.0, level_variance=1.0)
    assert select_clusters(t, min_prominence=2.0, noise_sd=2.0, **kw).n_clusters == 2
    assert select_clusters(t, min_prominence=np.full(7, 12.0), noise_sd=np.full(7, 12.0), **kw).n_clusters == 1


def test_a_split_is_read_at_its_saddle_and_a_branch_at_its_peak():
    t = _bumps([20, 26, 20, 16, 20, 26, 20], [5, 8, 5, 2, 5, 8, 5])
    kw = dict(min_mass=10, extent="core", dip_ratio=0.25, dip_z=1.0, level_variance=1.0)
    noisy_saddle = np.r_[1.0, 1.0, 1.0, 10.0, 1.0, 1.0, 1.0]
    assert select_clusters(t, min_prominence=1.0, noise_sd=noisy_saddle, **kw).n_clusters == 1
    noisy_flanks = np.r_[10.0, 1.0, 10.0, 1.0, 10.0, 1.0, 10.0]  # not the peaks', not the saddle's
    assert select_clusters(t, min_prominence=1.0, noise_sd=noisy_flanks, **kw).n_clusters == 2
    prominence_at_peaks = np.r_[1.0, 20.0, 1.0, 1.0, 1.0, 20.0, 1.0]
    # the peaks ask 20: neither rises that far above the split, nor the whole above the floor
    assert select_clusters(t, min_prominence=prominence_at_peaks, noise_sd=1.0, **kw).n_clusters == 0
    prominence_at_flanks = np.r_[20.0, 1.0, 20.0, 20.0, 20.0, 1.0, 20.0]
    assert select_clusters(t, min_prominence=prominence_at_flanks, noise_sd=1.0, **kw).n_clusters == 2


def test_constant_per_cell_noise_gives_the_scalar_rule_exactly():
    """The uniform grid's histogram read with one noise per cell as arrays (1-cell leaves) gives the same map,
    tree and settings as the scalars: the per-cell reading is the rule before where every cell is alike."""
    rng = np.random.default_rng(5)
    x = np.r_[rng.normal(250, 20, 600), rng.normal(700, 20, 600), rng.normal(480, 60, 400), rng.uniform(0, 1000, 300)]
    y = np.r_[rng.normal(500, 20, 600), rng.normal(520, 20, 600), rng.normal(800, 30, 400), rng.uniform(0, 1000, 300)]
    g = _grid(50, 50, 20.0)
    ids, counts = np.unique(g.assign(x, y).cell_id, return_counts=True)
    h = dense_histogram(g, ids, counts, epsilon=1.0, rng=NoiseSource(seed=4))
    sd = math.sqrt(discrete_laplace_variance(h.q))
    for kernel in ("box", "binomial"):
        a, sa = density_levels(h, n_hat=1900, kernel=kernel)
        cn = leaf_cell_noise(np.arange(g.nx * g.ny).reshape(g.ny, g.nx), np.ones(g.nx * g.ny, int),
                             h.to_dense().ravel(), sd, kernel=kernel, inside=g.universe_mask())
        inner = np.zeros((g.ny, g.nx), bool)
        inner[1:-1, 1:-1] = True
        # the edges read fewer noises (a smaller s.d. there); the rule before reads every cell as inner
        for arr, want in ((cn.level_sd, level_noise(h.q, kernel)[0]), (cn.level_variance, level_noise(h.q, kernel)[1]),
                          (cn.box_sd, sum_noise_sd(h.q))):
            assert np.allclose(arr.reshape(g.ny, g.nx)[inner], want)
            arr[:] = want
        b, sb = density_levels(h, n_hat=1900, kernel=kernel, cell_noise=cn)
        assert a.n_clusters >= 3
        assert b.cell_id.tolist() == a.cell_id.tolist() and b.label.tolist() == a.label.tolist()
        assert {k: v for k, v in sb.items() if k != "noise_per_cell"} == sa


@pytest.mark.parametrize("own", [True, False])
def test_auto_with_privtree_reads_each_cell_s_own_noise_by_default(own):
    """``resolution="privtree"`` reads each cell's own noise unless ``privtree_cell_noise=False`` (the one s.d.
    before); both find the two blobs, and the settings say which reading was used."""
    from dpgeo.mechanisms.auto import auto_spans_cells
    from dpgeo.mechanisms.resolution import fine_grid

    rng = np.random.default_rng(0)
    x = np.r_[rng.normal(600, 40, 3000), rng.normal(1400, 40, 3000), rng.uniform(0, 2000, 600)]
    y = np.r_[rng.normal(1000, 40, 3000), rng.normal(1000, 40, 3000), rng.uniform(0, 2000, 600)]
    f = fine_grid(StudyArea.from_bbox((0, 0, 2000, 2000), "EPSG:32615", working_crs="EPSG:32615"))
    ids, counts = np.unique(f.assign(x, y).cell_id, return_counts=True)
    r = auto_spans_cells(f, ids, counts, epsilon=1.0, rng=NoiseSource(seed=2), resolution="privtree",
                         privtree_cell_noise=own)
    assert r.clusters.n_clusters == 2
    assert (r.settings["privtree_sd_rule"] == "each cell's own") == own
    assert ("noise_per_cell" in r.settings) == own
