"""DiffHWT (:mod:`dpgeo.mechanisms.diffhwt`): the transform, the noise scale, the sensitivity check and the verdict.

The noise-law test uses a fixed seed and a 1e-6 significance level, with a
companion that the paper's scale is rejected for the record calibration.
"""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from dpgeo import StudyArea
from dpgeo.errors import OutputError, ParameterError
from dpgeo.mechanisms.diffhwt import diffhwt, diffhwt_points, haar_approximation
from dpgeo.noise import discrete_laplace_pmf

ALPHA = 1e-6


def test_haar_is_the_papers_averaging_transform():
    r = np.array([[9.0, 7.0, 3.0, 5.0]])
    assert haar_approximation(r, 2).tolist() == [[9, 7, 3, 5]]
    assert haar_approximation(r, 1).tolist() == [[8, 4]]
    assert haar_approximation(r, 0).tolist() == [[6]]
    with pytest.raises(ParameterError, match="power-of-2"):
        haar_approximation(np.ones((1, 3)), 0)


@pytest.mark.parametrize("n, s, negative, eps, lam, d", [
    (30, 0, False, 1.0, 1 / 32, 1),   # Breast Cancer Wisconsin: the paper's λ = 0.03, d_r = 1
    (31, 0, False, 1.0, 1 / 32, 1),   # the paper counts 31 attributes; the same n̄ = 32
    (5, 2, False, 1.0, 0.5, 3),       # the paper's worked example: T_max = 10, s = 2, n̄ = 8
    (2, 0, False, 1.0, 0.5, 1),       # 2-D points: one value (x + y)/2
    (16, 2, True, 0.5, 4 * 2 / (16 * 0.5), 4),
])
def test_lambda_and_dimension_follow_the_paper(n, s, negative, eps, lam, d):
    T = np.random.default_rng(0).uniform(0, 1, (10, n))
    rel = diffhwt(T, epsilon=eps, T_max=1.0, s=s, hasnegativevalues=negative, rng=0)
    md = rel.metadata
    assert md["lambda"] == pytest.approx(lam) and md["d"] == d and rel.P.shape == (10, d)
    assert md["n_bar"] == 1 << (n - 1).bit_length() and md["IntervalLength"] == (2 if negative else 1)
    rec = diffhwt(T, epsilon=eps, T_max=1.0, s=s, hasnegativevalues=negative, sensitivity="record", rng=0)
    assert rec.metadata["lambda"] == pytest.approx(n * lam)
    assert md["epsilon_under_replacement"] == pytest.approx(n * eps)
    assert rec.metadata["epsilon_under_replacement"] == pytest.approx(eps)


def test_coefficients_without_noise_are_the_haar_approximation():
    rng = np.random.default_rng(1)
    T = rng.uniform(0, 10, (50, 6))
    rel = diffhwt(T, epsilon=4e7, T_max=10.0, s=1, lattice_bits=20, rng=2)  # q = e^-38: noise 0 w.p. ~1
    R = np.zeros((50, 8))
    R[:, :6] = T / 10.0
    assert np.allclose(rel.P, haar_approximation(R, 1)[:, :2], atol=2 ** -20)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(2, 9), seed=st.integers(0, 10_000), data=st.data())
def test_sensitivity_of_the_block_sums(n, seed, data):
    """Brute force: one attribute moves the integer block sums by <= Δ_attr in L1; one record by <= n·Δ_attr."""
    L = (n - 1).bit_length()
    s = data.draw(st.integers(0, L - 1))
    bits = 6
    rng = np.random.default_rng(seed)
    T = rng.uniform(0, 1, (3, n))
    T2 = T.copy()
    j = data.draw(st.integers(0, n - 1))
    T2[1, j] = data.draw(st.sampled_from([0.0, 1.0, float(rng.uniform())]))
    T3 = T.copy()
    T3[1] = rng.integers(0, 2, n).astype(float)

    def sums(X):
        # noise-free block sums in lattice units (ε so large that the noise is 0 w.p. 1 - 1e-20)
        rel = diffhwt(X, epsilon=3000.0, T_max=1.0, s=s, lattice_bits=bits, rng=0)  # q = e^-47
        return np.rint(rel.P / ((1 << s) / ((1 << L) * (1 << bits)))).astype(np.int64)

    base = sums(T)
    d_attr = 1 << bits
    assert np.abs(sums(T2) - base).sum() <= d_attr
    assert np.abs(sums(T3) - base).sum() <= n * d_attr
    # attained: a record going from all 0 to all 1
    z, o = np.zeros((1, n)), np.ones((1, n))
    assert np.abs(sums(o) - sums(z)).sum() == n * d_attr


def test_noise_law_matches_the_calibration():
    m, n, bits = 4000, 4, 4
    T = np.full((m, n), 0.5)
    for calib, delta in (("attribute", 16), ("record", 64)):
        rel = diffhwt(T, epsilon=2.0, T_max=1.0, s=0, lattice_bits=bits, sensitivity=calib, rng=5)
        unit = 1 / (4 * 16)
        z = np.rint(rel.P[:, 0] / unit).astype(np.int64) - 4 * 8  # block sum of four 0.5s = 32
        q = math.exp(-2.0 / delta)
        half = int(3 * delta / 2)
        edges = np.arange(-half, half + 1)
        obs = np.r_[(z < -half).sum(), [(z == v).sum() for v in edges], (z > half).sum()]
        tail = q ** (half + 1) / (1 + q)
        probs = np.r_[tail, discrete_laplace_pmf(edges, q), tail]
        exp = probs * m
        keep = exp > 5
        p = stats.chisquare(obs[keep], exp[keep] * obs[keep].sum() / exp[keep].sum()).pvalue
        assert p > ALPHA, calib
        if calib == "record":  # the same test rejects the paper's scale, 4 times too narrow for n = 4
            q_paper = math.exp(-2.0 / 16)
            probs = np.r_[q_paper ** (half + 1) / (1 + q_paper), discrete_laplace_pmf(edges, q_paper),
                          q_paper ** (half + 1) / (1 + q_paper)]
            e2 = probs * m
            k2 = e2 > 5
            assert stats.chisquare(obs[k2], e2[k2] * obs[k2].sum() / e2[k2].sum()).pvalue < ALPHA


def test_not_private_and_never_written(tmp_path):
    rel = diffhwt(np.ones((5, 3)), epsilon=1.0, T_max=2.0, rng=0)
    md = rel.metadata
    assert md["differentially_private"] is False and md["publishable"] is False
    assert any("number of rows" in r for r in md["not_private_reasons"])
    assert any("3·epsilon" in r for r in md["not_private_reasons"])
    assert rel.differentially_private is False
    with pytest.raises(OutputError, match="DiffHWT is NOT differentially private"):
        rel.to_file(tmp_path / "d.gpkg")
    assert list(tmp_path.iterdir()) == []


def test_determinism_and_parameter_errors():
    T = np.random.default_rng(3).uniform(0, 5, (20, 4))
    a = diffhwt(T, epsilon=1.0, T_max=5.0, s=1, rng=9)
    b = diffhwt(T, epsilon=1.0, T_max=5.0, s=1, rng=9)
    assert np.array_equal(a.P, b.P)
    for kw, match in [(dict(s=2), "stop level"), (dict(epsilon=0), "epsilon"), (dict(T_max=-1), "T_max"),
                      (dict(sensitivity="person"), "sensitivity"), (dict(lattice_bits=2), "lattice_bits")]:
        args = dict(epsilon=1.0, T_max=5.0, s=1)
        args.update(kw)
        with pytest.raises(ParameterError, match=match):
            diffhwt(T, **args)
    with pytest.raises(ParameterError, match="n >= 2"):
        diffhwt(np.ones((3, 1)), epsilon=1.0, T_max=1.0)


def test_points_over_a_study_area_and_clustering():
    area = StudyArea.from_bbox((0, 0, 1000, 500), crs="EPSG:32615", working_crs="EPSG:32615")
    rng = np.random.default_rng(0)
    x = np.r_[rng.normal(100, 10, 300), rng.normal(900, 10, 300), 5000.0]
    y = np.r_[rng.normal(100, 10, 300), rng.normal(400, 10, 300), 10.0]
    rel = diffhwt_points(x, y, area=area, epsilon=1.0, rng=1)
    assert rel.P.shape == (600, 1) and np.array_equal(rel.rows, np.arange(600))
    assert rel.metadata["T_max"] == 1000.0 and rel.metadata["lambda"] == 0.5
    # at a huge ε the two groups are separated along (x + y)/2: clustering recovers them
    sharp = diffhwt_points(x, y, area=(0, 0, 1000, 500), epsilon=1e6, rng=1)
    lab = sharp.cluster(2, rng=0)
    assert set(np.unique(lab)) == {1, 2}
    assert len(set(lab[:300])) == 1 and len(set(lab[300:])) == 1 and lab[0] != lab[300]
    with pytest.raises(ParameterError, match="K must"):
        sharp.cluster(0)
