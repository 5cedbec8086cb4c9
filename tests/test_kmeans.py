"""DP k-means (:mod:`dpgeo.mechanisms.kmeans`): plan, noise law and budget split, Voronoi layer.

Statistical tests use fixed seeds and a significance level of 1e-6: with
correct code each fails with probability at most 1e-6 (for the seed chosen it
either passes or fails deterministically); each has a companion showing that
the nearest wrong parameter (a wrong split or sensitivity) fails it.
"""

import math

import numpy as np
import pytest
import shapely
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import stats

from dpgeo import StudyArea
from dpgeo.errors import OutputError, ParameterError
from dpgeo.io import read_layer_metadata, write_layer
from dpgeo.mechanisms.kmeans import (
    KMEANS_LAYER_COLUMNS,
    cell_counts,
    dp_lloyd,
    initial_centroids,
    kmeans_layer,
    kmeans_plan,
    voronoi_cells,
)
from dpgeo.noise import NoiseSource, discrete_laplace_pmf

ALPHA = 1e-6
CRS = "EPSG:32615"


def area_box(b=(0, 0, 2000, 1000)):
    return StudyArea.from_bbox(b, crs=CRS, working_crs=CRS)


def blobs(seed=0, n=600):
    rng = np.random.default_rng(seed)
    x = np.r_[rng.normal(400, 50, n), rng.normal(1500, 60, n), rng.normal(1000, 40, n)]
    y = np.r_[rng.normal(300, 50, n), rng.normal(700, 60, n), rng.normal(500, 40, n)]
    return np.clip(x, 1, 1999), np.clip(y, 1, 999)


def chi2_pvalue(z, q, half):
    """Goodness of fit of integer samples ``z`` to the discrete Laplace law with decay ``q``.

    Bins: each integer in [-half, half] and the two tails (merged until the expected count is > 5).
    """
    edges = np.arange(-half, half + 1)
    obs = np.r_[(z < -half).sum(), [(z == v).sum() for v in edges], (z > half).sum()]
    tail = q ** (half + 1) / (1 + q)
    probs = np.r_[tail, discrete_laplace_pmf(edges, q), tail]
    exp = probs * z.size
    keep = exp > 5
    obs, exp = obs[keep], exp[keep]
    return stats.chisquare(obs, exp * obs.sum() / exp.sum()).pvalue


# -- the plan -----------------------------------------------------------------------------------------


def test_plan_budget_adds_up_and_split_is_the_stated_rule():
    p = kmeans_plan((0, 0, 2000, 1000), k=4, epsilon=2.0, iterations=4, layer_share=0.2)
    assert p.iterations * (p.epsilon_count + p.epsilon_sum) + p.epsilon_layer == pytest.approx(2.0, abs=1e-12)
    assert p.epsilon_layer == pytest.approx(0.4)
    mx, my = p.half_steps
    assert (mx, my) == (32768, 16384)  # 2**15 steps along the longer half side
    ratio = (2 * (mx + my) ** 2 / (mx**2 + my**2)) ** (1 / 3)
    assert p.epsilon_sum / p.epsilon_count == pytest.approx(ratio)
    assert p.sensitivity_sum == mx + my
    assert p.q_count == pytest.approx(math.exp(-p.epsilon_count))
    assert p.q_sum == pytest.approx(math.exp(-p.epsilon_sum / (mx + my)))
    assert p.q_layer == pytest.approx(math.exp(-0.4))
    # a square box: the cube-root rule gives 4**(1/3)
    sq = kmeans_plan((0, 0, 10, 10), k=2, epsilon=1.0)
    assert sq.epsilon_sum / sq.epsilon_count == pytest.approx(4 ** (1 / 3))
    md = p.to_metadata()
    assert md["sensitivity_sum_m"] == pytest.approx((mx + my) * p.lattice_m)
    assert md["epsilon_split"]["layer_counts"] == pytest.approx(0.4)


def test_plan_scales_with_points_per_record():
    p1 = kmeans_plan((0, 0, 100, 100), k=2, epsilon=1.0, lattice_m=10.0)
    p3 = kmeans_plan((0, 0, 100, 100), k=2, epsilon=1.0, lattice_m=10.0, sensitivity=3)
    assert p1.half_steps == (5, 5) and p1.sensitivity_sum == 10 and p3.sensitivity_sum == 30
    assert p3.q_count == pytest.approx(p1.q_count ** (1 / 3))
    assert p3.q_layer == pytest.approx(p1.q_layer ** (1 / 3))


@pytest.mark.parametrize("kw, match", [
    (dict(k=0), "k "), (dict(k=2.5), "k "), (dict(epsilon=0), "epsilon"), (dict(epsilon=float("nan")), "epsilon"),
    (dict(iterations=0), "iterations"), (dict(layer_share=1.0), "layer_share"), (dict(count_share=0), "count_share"),
    (dict(lattice_m=-1), "lattice_m"), (dict(sensitivity=0), "sensitivity"), (dict(lattice_m=1e-12), "steps"),
])
def test_plan_refuses_bad_parameters(kw, match):
    args = dict(k=3, epsilon=1.0)
    args.update(kw)
    with pytest.raises(ParameterError, match=match):
        kmeans_plan((0, 0, 1000, 1000), **args)


def test_sum_sensitivity_is_attained_and_never_exceeded():
    """One added point moves the two sum vectors by |a| + |b| <= M_x + M_y lattice steps (equality at a corner)."""
    from dpgeo.mechanisms.kmeans import _lattice

    p = kmeans_plan((0, 0, 2000, 1000), k=3, epsilon=1.0)
    rng = np.random.default_rng(5)
    x, y = rng.uniform(0, 2000, 20_000), rng.uniform(0, 1000, 20_000)
    a, b = _lattice(x, y, p)
    assert (np.abs(a) + np.abs(b)).max() <= p.sensitivity_sum
    a, b = _lattice(np.array([0.0, 2000.0]), np.array([0.0, 1000.0]), p)
    assert (np.abs(a) + np.abs(b) == p.sensitivity_sum).all()


# -- the noise law of one iteration -------------------------------------------------------------------


def _iteration_noise(plan, x, y, init, runs, seed):
    """Noisy minus true count and x-sum of the first iteration, over ``runs`` independent draws."""
    from dpgeo.mechanisms._lloyd import nearest_2d
    from dpgeo.mechanisms.kmeans import _lattice

    lab = nearest_2d(x, y, init[:, 0], init[:, 1])
    a, _ = _lattice(x, y, plan)
    true_n = np.bincount(lab, minlength=plan.k)
    true_sx = np.array([a[lab == j].sum() for j in range(plan.k)])
    single = type(plan)(**{**plan.__dict__, "iterations": 1})
    gen = NoiseSource(seed)
    zn, zs = [], []
    for _ in range(runs):
        _, hist = dp_lloyd(x, y, plan=single, init=init, rng=gen)
        zn.append(hist[0]["noisy_count"] - true_n)
        zs.append(hist[0]["noisy_sum_x"] - true_sx)
    return np.concatenate(zn), np.concatenate(zs)


@pytest.fixture(scope="module")
def noise_setting():
    # a coarse lattice keeps the sum noise narrow enough for a per-integer test: M_x = M_y = 5
    x, y = np.random.default_rng(2).uniform(0, 100, (2, 500))
    init = np.array([[25.0, 25.0], [75.0, 75.0], [25.0, 75.0]])
    return x, y, init


@pytest.mark.parametrize("sensitivity", [1, 2])
def test_one_iteration_noise_has_the_stated_law(noise_setting, sensitivity):
    # false-failure rate: 2 tests × 1e-6 per parameter value
    x, y, init = noise_setting
    plan = kmeans_plan((0, 0, 100, 100), k=3, epsilon=4.0, iterations=2, layer_share=0.2, lattice_m=10.0,
                       sensitivity=sensitivity)
    assert plan.sensitivity_sum == 10 * sensitivity
    zn, zs = _iteration_noise(plan, x, y, init, runs=3000, seed=11 + sensitivity)
    # the split: ε_it = 0.8·4/2 = 1.6; counts c·ε_it at Δ = s, sums (1 − c)·ε_it at Δ = s·(M_x + M_y)
    eps_it = 1.6
    assert plan.epsilon_count + plan.epsilon_sum == pytest.approx(eps_it)
    q_n = math.exp(-plan.count_share * eps_it / sensitivity)
    q_s = math.exp(-(1 - plan.count_share) * eps_it / (10 * sensitivity))
    assert chi2_pvalue(zn, q_n, 12) > ALPHA
    assert chi2_pvalue(zs, q_s, 60) > ALPHA
    assert abs(zn.mean()) < 6 * math.sqrt(2 * q_n / (1 - q_n) ** 2 / zn.size)


def test_noise_test_rejects_a_wrong_split(noise_setting):
    x, y, init = noise_setting
    plan = kmeans_plan((0, 0, 100, 100), k=3, epsilon=4.0, iterations=2, layer_share=0.2, lattice_m=10.0)
    zn, zs = _iteration_noise(plan, x, y, init, runs=3000, seed=12)
    eps_it = 1.6
    # counts priced as if they had the whole iteration's ε, sums as if Δ were max(M_x, M_y) or one iteration
    assert chi2_pvalue(zn, math.exp(-eps_it), 12) < ALPHA
    assert chi2_pvalue(zs, math.exp(-(1 - plan.count_share) * eps_it / 5), 60) < ALPHA
    assert chi2_pvalue(zn, math.exp(-plan.count_share * 3.2), 12) < ALPHA  # ε not split over 2 iterations


def test_layer_counts_have_the_layer_budget(noise_setting):
    """The Voronoi cells' counts get noise at ε_layer with Δ = s (1e-6 false-failure rate per check)."""
    x, y, init = noise_setting
    plan = kmeans_plan((0, 0, 100, 100), k=3, epsilon=2.0, layer_share=0.25, sensitivity=2)
    from dpgeo.mechanisms._lloyd import nearest_2d

    true = np.bincount(nearest_2d(x, y, init[:, 0], init[:, 1]), minlength=3)
    gen = NoiseSource(21)
    z = np.concatenate([cell_counts(x, y, init, plan=plan, rng=gen) - true for _ in range(3000)])
    assert chi2_pvalue(z, math.exp(-0.5 / 2), 16) > ALPHA
    assert chi2_pvalue(z, math.exp(-0.5), 16) < ALPHA  # Δ = 1 instead of s = 2
    assert chi2_pvalue(z, math.exp(-2.0 / 2), 16) < ALPHA  # the whole ε on the counts


def test_published_dp_count_is_the_cell_count_plus_noise():
    area = area_box((0, 0, 100, 100))
    rng = np.random.default_rng(4)
    x = np.r_[rng.normal(30, 3, 400), rng.normal(70, 3, 400)]
    y = np.r_[rng.normal(30, 3, 400), rng.normal(70, 3, 400)]
    res = kmeans_layer(x, y, area=area, k=2, epsilon=50.0, layer_share=0.5, rng=NoiseSource(0))
    true = np.bincount(res.label_points(x, y), minlength=3)[res.layer["cluster_id"].to_numpy()]
    # at ε_layer = 25 the noise is 0 with probability (1 - q)/(1 + q) > 0.999999
    assert (res.layer["dp_count"].to_numpy() == true).all() and sorted(true) == [400, 400]


# -- behaviour ------------------------------------------------------------------------------------


def test_layer_shape_bounds_and_metadata():
    x, y = blobs()
    area = area_box()
    res = kmeans_layer(x, y, area=area, k=3, epsilon=1.0, rng=NoiseSource(3))
    lay = res.layer
    assert list(lay.columns) == KMEANS_LAYER_COLUMNS + ["geometry"]
    assert len(lay) == res.n_clusters == 3 and lay.crs.to_epsg() == 32615
    assert (lay["cluster_id"].to_numpy() == [1, 2, 3]).all()
    assert set(lay.geometry.geom_type) == {"MultiPolygon"}
    assert ((lay["centroid_x"] >= 0) & (lay["centroid_x"] <= 2000) & (lay["centroid_y"] >= 0)
            & (lay["centroid_y"] <= 1000)).all()
    assert (lay["dp_count_low"] <= lay["dp_count"]).all() and (lay["dp_count"] <= lay["dp_count_high"]).all()
    assert np.allclose(lay["area_m2"], lay.geometry.area)
    # the three blobs are found: each true centre has a centroid within 60 m
    for cx, cy in [(400, 300), (1500, 700), (1000, 500)]:
        assert np.hypot(lay["centroid_x"] - cx, lay["centroid_y"] - cy).min() < 60
    md = res.metadata
    assert md["method"] == "kmeans" and md["delta"] == 0.0 and md["k"] == 3
    assert md["differentially_private"] is False and "seed" in md["not_private_reasons"][0]
    assert md["n_clusters"] == 3
    assert sum(v for k, v in md["epsilon_split"].items() if k in ("centroids_total", "layer_counts")) == \
        pytest.approx(1.0)
    assert res.diagnostics["n_used"] == x.size and "n_used" not in md


def test_private_by_default_and_deterministic_with_a_seed():
    x, y = blobs()
    area = area_box()
    a = kmeans_layer(x, y, area=area, k=3, epsilon=1.0, rng=NoiseSource(8))
    b = kmeans_layer(x, y, area=area, k=3, epsilon=1.0, rng=NoiseSource(8))
    c = kmeans_layer(x, y, area=area, k=3, epsilon=1.0, rng=NoiseSource(9))
    assert a.layer.drop(columns="geometry").equals(b.layer.drop(columns="geometry"))
    assert not np.array_equal(a.centroids, c.centroids)
    priv = kmeans_layer(x, y, area=area, k=3, epsilon=1.0)
    assert priv.metadata["differentially_private"] is True and priv.metadata["not_private_reasons"] == []
    gen = kmeans_layer(x, y, area=area, k=3, epsilon=1.0, rng=np.random.default_rng(1))
    assert gen.metadata["differentially_private"] is False  # a bare numpy Generator: unknown seed
    with pytest.raises(ParameterError, match="rng"):
        kmeans_layer(x, y, area=area, k=3, epsilon=1.0, rng=7)
    with pytest.raises(ParameterError, match="StudyArea"):
        kmeans_layer(x, y, area=(0, 0, 2000, 1000), k=3, epsilon=1.0)


def test_initial_centroids_do_not_depend_on_the_data():
    area = area_box()
    x1, y1 = blobs(0)
    x2, y2 = np.random.default_rng(1).uniform(0, 100, (2, 50))
    h1 = kmeans_layer(x1, y1, area=area, k=4, epsilon=1.0, rng=NoiseSource(5)).history
    h2 = kmeans_layer(x2, y2, area=area, k=4, epsilon=1.0, rng=NoiseSource(5)).history
    assert np.array_equal(h1[0]["centroids"], h2[0]["centroids"])
    c = initial_centroids(area.polygon, 4, np.random.default_rng(0))
    assert shapely.contains_xy(area.polygon, c[:, 0], c[:, 1]).all()
    assert np.unique(c, axis=0).shape[0] == 4


def test_points_outside_the_study_area_are_dropped_and_no_point_is_fine():
    area = area_box()
    x, y = blobs()
    res = kmeans_layer(np.r_[x, 5000.0, np.nan], np.r_[y, 50.0, 1.0], area=area, k=3, epsilon=1.0,
                       rng=NoiseSource(1))
    assert res.diagnostics == {"n_used": x.size, "n_outside_domain": 1, "n_dropped_invalid": 1}
    empty = kmeans_layer(np.zeros(0), np.zeros(0), area=area, k=3, epsilon=1.0, rng=NoiseSource(1))
    assert len(empty.layer) >= 1 and (empty.layer["dp_count"] >= 0).all()


def test_non_convex_study_area():
    # an L-shaped area: cells are clipped to it and still partition it
    poly = shapely.Polygon([(0, 0), (2000, 0), (2000, 400), (600, 400), (600, 1000), (0, 1000)])
    area = StudyArea.from_geometry(poly, CRS, working_crs=CRS)
    rng = np.random.default_rng(3)
    x = np.r_[rng.normal(300, 40, 500), rng.normal(1600, 40, 500)]
    y = np.r_[rng.normal(700, 40, 500), rng.normal(200, 40, 500)]
    res = kmeans_layer(x, y, area=area, k=2, epsilon=2.0, rng=NoiseSource(2))
    union = shapely.union_all(res.layer.geometry.values)
    assert abs(union.area - poly.area) < 1e-6 * poly.area
    assert res.layer["area_m2"].sum() == pytest.approx(poly.area, abs=0.005 * len(res.layer))  # each to 0.01 m²


def test_publishable_layer_round_trip(tmp_path):
    x, y = blobs()
    res = kmeans_layer(x, y, area=area_box(), k=3, epsilon=1.0)
    path = write_layer(res.layer, tmp_path / "km.gpkg", res.metadata)
    md = read_layer_metadata(path)
    assert md["method"] == "kmeans" and md["differentially_private"] is True
    import geopandas as gpd

    back = gpd.read_file(path)
    assert list(back.columns) == KMEANS_LAYER_COLUMNS + ["geometry"]


def test_write_layer_refuses_non_publishable_metadata(tmp_path):
    x, y = blobs()
    res = kmeans_layer(x, y, area=area_box(), k=3, epsilon=1.0, rng=NoiseSource(1))
    md = dict(res.metadata, publishable=False, mechanism="EPP-KM", not_private_reasons=["no noise"])
    with pytest.raises(OutputError, match="NOT differentially private.*no noise"):
        write_layer(res.layer, tmp_path / "x.gpkg", md)
    assert list(tmp_path.iterdir()) == []


# -- the Voronoi cells ------------------------------------------------------------------------------


POLYGONS = [
    shapely.box(0, 0, 1000, 600),
    shapely.Polygon([(0, 0), (1000, 0), (1000, 300), (400, 300), (400, 600), (0, 600)]),
    shapely.Polygon([(0, 0), (1000, 0), (500, 600)]),
]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(poly=st.sampled_from(POLYGONS),
       pts=st.lists(st.tuples(st.floats(-200, 1200), st.floats(-200, 800)), min_size=1, max_size=12))
def test_voronoi_cells_partition_the_study_area(poly, pts):
    c = np.unique(np.round(np.array(pts), 3), axis=0)
    cells = voronoi_cells(c, poly)
    assert cells.shape == (c.shape[0],)
    nonempty = [g for g in cells if not g.is_empty]
    union = shapely.union_all(nonempty)
    # cover: the union is the study area; no overlap: the areas add up to it
    assert shapely.symmetric_difference(union, poly).area < 1e-6 * poly.area
    assert sum(g.area for g in nonempty) == pytest.approx(poly.area, rel=1e-9)
    # every cell holds the points nearest to its own centroid
    probe = np.array([g.representative_point().coords[0] for g in nonempty])
    own = np.array([i for i, g in enumerate(cells) if not g.is_empty])
    d = np.hypot(probe[:, None, 0] - c[None, :, 0], probe[:, None, 1] - c[None, :, 1])
    assert np.allclose(d[np.arange(own.size), own], d.min(axis=1))


def test_voronoi_cells_refuse_duplicates_and_handle_one_and_collinear():
    poly = shapely.box(0, 0, 10, 10)
    with pytest.raises(ParameterError, match="distinct"):
        voronoi_cells(np.array([[1.0, 1.0], [1.0, 1.0]]), poly)
    assert voronoi_cells(np.array([[5.0, 5.0]]), poly)[0].equals(poly)
    cells = voronoi_cells(np.array([[1.0, 5.0], [5.0, 5.0], [9.0, 5.0]]), poly)
    assert [round(g.area) for g in cells] == [30, 40, 30]


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), k=st.integers(1, 6), eps=st.sampled_from([0.1, 1.0, 10.0]))
def test_layer_counts_intervals_and_labels_are_consistent(seed, k, eps):
    rng = np.random.default_rng(seed)
    x, y = rng.uniform(0, 2000, 300), rng.uniform(0, 1000, 300)
    res = kmeans_layer(x, y, area=area_box(), k=k, epsilon=eps, rng=np.random.default_rng(seed))
    lay = res.layer
    assert 1 <= len(lay) <= k
    h = res.metadata["count_error_95"]
    raw_low, raw_high = lay["dp_count_low"].to_numpy(), lay["dp_count_high"].to_numpy()
    assert (raw_low <= lay["dp_count"]).all() and (lay["dp_count"] <= raw_high).all()
    assert ((raw_high - raw_low == 2 * h) | (raw_low == 0)).all()
    assert abs(lay["area_m2"].sum() - 2000 * 1000) < 1e-6 * 2e6
    lab = res.label_points(x, y)
    assert set(np.unique(lab)) <= set(lay["cluster_id"])
    # a point's label is the cell its polygon says
    geoms = dict(zip(lay["cluster_id"], lay.geometry, strict=True))
    sample = np.arange(0, 300, 17)
    for i in sample:
        assert geoms[lab[i]].buffer(1e-6).contains(shapely.Point(x[i], y[i]))
