"""DP-DBSCAN spans: the noise bound Γ, merging, utility on the paper's benchmarks."""

import math
import warnings

import numpy as np
import pytest
from scipy import stats

import dpgeo
from helpers import BENCH_CRS, load_benchmark
from dpgeo.mechanisms.dbscan import gamma_laplace, merge_cells, neighbourhood_sums, noise_bound
from dpgeo.domain import StudyArea
from dpgeo.grid import Grid, neighbourhood_offsets
from dpgeo.histogram import NoisyHistogram, dense_histogram, exact_counts, sparse_histogram
from dpgeo.noise import NoiseSource

warnings.simplefilter("ignore", dpgeo.NotPrivateWarning)  # seeded runs throughout


def grid_of(n_side, cell=10.0):
    area = StudyArea.from_bbox((0, 0, n_side * cell, n_side * cell), BENCH_CRS, working_crs=BENCH_CRS)
    return Grid(area, cell)


@pytest.mark.parametrize("kind", ["dense", "sparse"])
def test_gamma_holds_for_every_cell_at_once(kind):
    """Pr[some cell's noisy NB-sum deviates beyond Γ] <= β, measured.

    400 cells, β = 0.2, 400 trials. Under a correct bound the number of
    failing trials is stochastically below Binomial(400, 0.2); the test
    fails if it exceeds the 1 - 1e-6 quantile of that binomial. With the
    noise 1.5x too wide, it fails almost surely (checked below).
    """
    g = grid_of(20)
    offs = neighbourhood_offsets(1.0)
    eps, beta = 1.0, 0.2
    q = math.exp(-eps)
    rng = NoiseSource(seed=11)
    pts = np.random.default_rng(11).integers(0, g.n_cells, 3000)
    ids, counts = exact_counts(g, pts)
    true = np.zeros(g.n_cells, dtype=np.int64)
    true[ids] = counts
    exact = NoisyHistogram(g, "dense", np.arange(g.n_cells), true, 1.0, 1.0, q)  # no noise: true sums
    true_sums = neighbourhood_sums(exact, offs).ravel()
    theta = 2 if kind == "sparse" else None
    b = noise_bound(kappa=len(offs), n_cells=g.n_cells, q=q, epsilon_eff=eps, beta=beta, theta=theta,
                    method="exact")
    trials, fail = 400, 0
    for _ in range(trials):
        if kind == "dense":
            h = dense_histogram(g, ids, counts, epsilon=eps, rng=rng)
        else:
            h = sparse_histogram(g, ids, counts, epsilon=eps, theta=theta, rng=rng)
        s = neighbourhood_sums(h, offs, np.arange(g.n_cells)) if kind == "sparse" else \
            neighbourhood_sums(h, offs).ravel()
        dev = s - true_sums
        fail += bool(dev.max() > b.gamma or -dev.min() > b.gamma_low)
    assert fail <= stats.binom.ppf(1 - 1e-6, trials, beta)


def test_gamma_test_has_power():
    g = grid_of(20)
    offs = neighbourhood_offsets(1.0)
    rng = NoiseSource(seed=12)
    b = noise_bound(kappa=21, n_cells=g.n_cells, q=math.exp(-1.0), epsilon_eff=1.0, beta=0.2)
    ids = np.zeros(0, dtype=np.int64)
    counts = np.zeros(0, dtype=np.int64)
    fail = 0
    for _ in range(200):
        h = dense_histogram(g, ids, counts, epsilon=1 / 1.5, rng=rng)  # noise 1.5x too wide
        fail += bool(np.abs(neighbourhood_sums(h, offs)).max() > b.gamma)
    assert fail > stats.binom.ppf(1 - 1e-6, 200, 0.2)


def test_gamma_laplace_formula_and_dominance():
    # the paper's worked example: ε = 1, β = 1/3, κ = 21, |X| = 1000 gives Γ_Lap = 38.2
    assert gamma_laplace(21, 1000, 1.0, 1 / 3) == pytest.approx(38.2, abs=0.05)
    b = noise_bound(kappa=21, n_cells=1000, q=math.exp(-1), epsilon_eff=1.0, beta=1 / 3, method="laplace")
    e = noise_bound(kappa=21, n_cells=1000, q=math.exp(-1), epsilon_eff=1.0, beta=1 / 3, method="exact")
    assert b.gamma == pytest.approx(38.2, abs=0.05) and e.gamma < b.gamma
    assert e.gamma == e.gamma_low
    s = noise_bound(kappa=21, n_cells=1000, q=math.exp(-1), epsilon_eff=1.0, beta=1 / 3, theta=3,
                    method="exact")
    assert s.gamma_low == e.gamma + 21 * 3


def test_merge_joins_cells_closer_than_alpha_only():
    g = grid_of(10)
    offs = neighbourhood_offsets(1.0)
    # (0,0)-(2,1): offset (2,1) -> distance w < α: joined. (5,5)-(7,7): distance w√2 = α: NOT joined.
    cells = np.array(sorted([0 * 10 + 0, 1 * 10 + 2, 5 * 10 + 5, 7 * 10 + 7]))
    labels, k = merge_cells(g, cells, offs)
    lab = dict(zip(cells.tolist(), labels.tolist()))
    assert k == 3
    assert lab[0] == lab[12]
    assert lab[55] != lab[77]


def test_merge_is_linear_in_core_cells():
    # a 2000 x 2000 grid with only 3 core cells: memory and time do not depend on |X|
    g = grid_of(2000, cell=1.0)
    labels, k = merge_cells(g, np.array([5, 7, 3_999_999]), neighbourhood_offsets(1.0))
    assert k == 2


def test_sparse_and_dense_paths_find_the_same_clusters():
    x, y, lab = load_benchmark("cluto_t5_8k")
    dom = (0, 0, 1000, 700)
    out = {}
    for kind in ("dense", "sparse"):
        r = dpgeo.dbscan_spans((x, y, BENCH_CRS), epsilon=1.0, radius_m=9, min_points=20, domain=dom,
                               domain_crs=BENCH_CRS, crs=BENCH_CRS, seed=1, histogram=kind)
        out[kind] = r
    assert out["sparse"].metadata["theta"] >= 1 and out["dense"].metadata["theta"] is None
    from sklearn.metrics import adjusted_rand_score

    a = adjusted_rand_score(lab, out["dense"].cells.label_points(x, y))
    b = adjusted_rand_score(lab, out["sparse"].cells.label_points(x, y))
    assert a > 0.8 and b > 0.8


def _mean_ari(x, y, lab, alpha, minpts, dom, seeds=10, **kw):
    from sklearn.metrics import adjusted_rand_score

    scores = []
    for seed in range(seeds):
        r = dpgeo.dbscan_spans((x, y, BENCH_CRS), epsilon=1.0, radius_m=alpha, min_points=minpts, domain=dom,
                               domain_crs=BENCH_CRS, crs=BENCH_CRS, seed=seed, **kw)
        scores.append(adjusted_rand_score(lab, r.cells.label_points(x, y)))
    return float(np.mean(scores))


def test_utility_moons():
    """Moons as in the paper's experiments: make_moons(2000, noise=0.05), standardised
    (the paper's fixed preprocessing of its synthetic sets), α = 0.2, MinPts = 7, ε = 1."""
    from sklearn.datasets import make_moons
    from sklearn.preprocessing import StandardScaler

    pts, lab = make_moons(2000, noise=0.05, random_state=30)
    pts = StandardScaler().fit_transform(pts)
    assert _mean_ari(pts[:, 0], pts[:, 1], lab, 0.2, 7, (-3, -3, 3, 3)) >= 0.9


def test_utility_cluto_t5():
    x, y, lab = load_benchmark("cluto_t5_8k")
    assert _mean_ari(x, y, lab, 9, 20, (0, 0, 1000, 700)) >= 0.85


def test_no_point_in_the_study_area_is_an_error():
    with pytest.raises(dpgeo.DomainError, match="inside the study area"):
        dpgeo.dbscan_spans((np.array([1e7]), np.array([1e7]), BENCH_CRS), epsilon=1.0, radius_m=10,
                           min_points=5, domain=(0, 0, 1000, 1000), domain_crs=BENCH_CRS, crs=BENCH_CRS)


def test_layer_columns_with_no_cluster():
    rng = np.random.default_rng(0)
    r = dpgeo.dbscan_spans((rng.uniform(0, 1000, 50), rng.uniform(0, 1000, 50), BENCH_CRS), epsilon=1.0,
                           radius_m=10, min_points=500, domain=(0, 0, 1000, 1000), domain_crs=BENCH_CRS,
                           crs=BENCH_CRS, seed=3)
    assert len(r.layer) == 0
    assert list(r.layer.columns) == ["cluster_id", "n_cells", "area_m2", "dp_count", "dp_count_low",
                                     "dp_count_high", "geometry"]


# -- grown spans -----------------------------------------------------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from dpgeo.mechanisms.dbscan import core_cells, dbscan_cells, grow_spans  # noqa: E402


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n_pts=st.integers(0, 1500), strong=st.integers(5, 60),
       weak_gap=st.integers(0, 40))
def test_grown_spans_keep_core_spans_and_stay_certified(seed, n_pts, strong, weak_gap):
    """On any released histogram: every core cell keeps its span, spans are never merged,
    every added cell passes the extent threshold, and each cell joins a span within reach."""
    g = grid_of(24)
    rng = np.random.default_rng(seed)
    # clumpy points so that there are spans, gaps and fringes
    centres = rng.integers(0, g.n_cells, 4)
    pts = np.where(rng.random(n_pts) < 0.7, rng.choice(centres, n_pts), rng.integers(0, g.n_cells, n_pts))
    ids, counts = exact_counts(g, pts)
    h = dense_histogram(g, ids, counts, epsilon=1.0, rng=NoiseSource(seed=seed))
    offs = neighbourhood_offsets(1.0)
    strong_b = noise_bound(kappa=21, n_cells=g.n_cells, q=h.q, epsilon_eff=1.0, beta=0.05, method="exact")
    weak_b = noise_bound(kappa=21, n_cells=g.n_cells, q=h.q, epsilon_eff=1.0, beta=0.05, method="exact")
    strong_b.gamma, weak_b.gamma = float(strong), float(max(strong - weak_gap, 0))
    core = dbscan_cells(h, min_points=0, eta=1.0, bound=strong_b)
    grown = dbscan_cells(h, min_points=0, eta=1.0, bound=strong_b, extent_bound=weak_b)
    # the same spans exist, with the same ids, and every core cell keeps its label
    assert grown.n_clusters == core.n_clusters
    assert grown.n_core_cells == core.cell_id.size
    pos = np.searchsorted(grown.cell_id, core.cell_id)
    assert np.array_equal(grown.cell_id[pos], core.cell_id)
    assert np.array_equal(grown.label[pos], core.label)
    # every cell of a grown span is certified at the extent threshold
    weak = core_cells(h, offs, weak_b.gamma)
    assert np.isin(grown.cell_id, weak).all()
    # and is connected, through cells of its own span closer than α, to that span's core cells
    for lab in range(1, grown.n_clusters + 1):
        cells = grown.cell_id[grown.label == lab]
        sub, k = merge_cells(g, cells, offs)
        assert k == 1


def test_grow_spans_splits_a_shared_fringe_by_distance():
    g = grid_of(30)
    cells = np.arange(20)  # one row of 20 cells
    seed = np.isin(cells, [2, 15])
    lab = grow_spans(g, cells, seed, np.array([1, 2]), neighbourhood_offsets(1.0))
    # cell i is at distance |i - 2| from span 1 and |15 - i| from span 2
    expect = np.where(np.abs(cells - 2) <= np.abs(15 - cells), 1, 2)
    tie = np.abs(cells - 2) == np.abs(15 - cells)
    assert np.array_equal(lab[~tie], expect[~tie])
    # cells no path of α-close cells reaches stay out
    lab2 = grow_spans(g, np.array([0, 1, 10, 11]), np.array([True, False, False, False]), np.array([7]),
                      neighbourhood_offsets(1.0))
    assert lab2.tolist() == [7, 7, 0, 0]


def test_grown_equals_core_when_the_bounds_coincide():
    x, y, _ = load_benchmark("cluto_t5_8k")
    kw = dict(epsilon=1.0, radius_m=9, min_points=20, domain=(0, 0, 850, 200), domain_crs=BENCH_CRS,
              crs=BENCH_CRS, seed=4, gamma="exact")
    a = dpgeo.dbscan_spans((x, y, BENCH_CRS), extent="core", **kw)
    b = dpgeo.dbscan_spans((x, y, BENCH_CRS), extent="grown", **kw)
    assert np.array_equal(a.cells.cell_id, b.cells.cell_id) and np.array_equal(a.cells.label, b.cells.label)
    assert b.metadata["extent_threshold"] == b.metadata["core_threshold"]


@pytest.mark.parametrize("kind", ["dense", "sparse"])
def test_grown_spans_cover_the_core_spans_in_the_published_layer(kind):
    x, y, _ = load_benchmark("cluto_t4_8k")
    kw = dict(epsilon=1.0, radius_m=9, min_points=11, domain=(0, 0, 650, 350), domain_crs=BENCH_CRS,
              crs=BENCH_CRS, seed=2, histogram=kind)
    a = dpgeo.dbscan_spans((x, y, BENCH_CRS), extent="core", **kw)
    b = dpgeo.dbscan_spans((x, y, BENCH_CRS), **kw)
    assert b.metadata["extent"] == "grown" and a.metadata["extent"] == "core"
    assert b.metadata["extent_threshold"] < b.metadata["core_threshold"] == a.metadata["core_threshold"]
    assert len(a.layer) == len(b.layer) == a.metadata["n_clusters"]
    core_union = a.layer.geometry.union_all() if hasattr(a.layer.geometry, "union_all") else a.layer.unary_union
    grown_union = b.layer.geometry.union_all() if hasattr(b.layer.geometry, "union_all") else b.layer.unary_union
    assert core_union.difference(grown_union).area < 1e-6 * core_union.area
    assert grown_union.area > 1.2 * core_union.area  # the fringe that Γ erodes on t4


def test_utility_cluto_t4_grown_beats_core():
    """t4 (α = 9, MinPts = 11, ε = 1): the conservative Γ erodes the sparse fringe of every
    cluster; growing into certified cells recovers it (mean ARI over 5 seeds ≈ 0.86 vs 0.52)."""
    x, y, lab = load_benchmark("cluto_t4_8k")
    dom = (0, 0, 650, 350)
    core = _mean_ari(x, y, lab, 9, 11, dom, seeds=5, extent="core")
    grown = _mean_ari(x, y, lab, 9, 11, dom, seeds=5)
    assert core < 0.6 and grown > 0.8


@pytest.mark.parametrize("fill", [0.02, 0.9])
def test_core_cells_of_a_sparse_histogram_with_few_or_nearly_all_cells_as_seeds(fill):
    """Candidates around seeds (few seeds) and the whole grid's sums (nearly every cell a seed, a billion
    points over a city) give the same core cells and sums."""
    from dpgeo.histogram import NoisyHistogram

    area = StudyArea.from_bbox((0, 0, 2000, 1500), BENCH_CRS, working_crs=BENCH_CRS)
    g = Grid(area, 10.0)
    rng = np.random.default_rng(3)
    ids = np.flatnonzero(rng.random(g.n_cells) < fill)
    counts = rng.integers(1, 40, ids.size)
    offs = neighbourhood_offsets(1.0)
    sparse = NoisyHistogram(g, "sparse", ids, counts, 1.0, 1.0, 0.5, theta=5)
    dense_counts = np.zeros(g.n_cells, dtype=np.int64)
    dense_counts[ids] = counts
    dense = NoisyHistogram(g, "dense", np.arange(g.n_cells), dense_counts, 1.0, 1.0, 0.5)
    for threshold in (30, 150, 400):
        a_ids, a_sums = core_cells(sparse, offs, threshold, return_sums=True)
        b_ids, b_sums = core_cells(dense, offs, threshold, return_sums=True)
        assert a_ids.tolist() == b_ids.tolist() and a_sums.tolist() == b_sums.tolist()
