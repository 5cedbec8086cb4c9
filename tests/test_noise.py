"""The discrete Laplace noise and the exact tail of its sums.

Statistical tests use a fixed seed (deterministic) and a significance level
of 1e-6: if the code were right and the seed arbitrary, each such test would
fail with probability at most 1e-6; a wrong noise scale fails them by a wide
margin (checked in the tests below with a deliberately wrong scale).
"""

import math

import numpy as np
import pytest
from scipy import stats

from dpgeo import noise, noise_laws
from dpgeo.errors import ParameterError

ALPHA = 1e-6


def chi2_pvalue(samples, q, lo, hi):
    """Chi-square goodness of fit of integer samples to the discrete Laplace law.

    Bins: (-inf, lo-1], each integer lo..hi, [hi+1, inf), with lo = -hi <= -1.
    """
    edges = np.arange(lo, hi + 1)
    obs = np.r_[(samples < lo).sum(), [(samples == v).sum() for v in edges], (samples > hi).sum()]
    tail = q ** (hi + 1) / (1 + q)  # Pr[Z >= hi+1] = Pr[Z <= lo-1]
    probs = np.r_[tail, noise.discrete_laplace_pmf(edges, q), tail]
    assert abs(probs.sum() - 1) < 1e-12
    exp = probs * samples.size
    keep = exp > 5
    obs, exp = obs[keep], exp[keep]
    exp = exp * obs.sum() / exp.sum()
    return stats.chisquare(obs, exp).pvalue


@pytest.mark.parametrize("epsilon", [0.1, 0.5, 1.0, 3.0])
def test_discrete_laplace_goodness_of_fit(epsilon):
    q = math.exp(-epsilon)
    rng = noise.NoiseSource(seed=12345)
    z = noise.sample_discrete_laplace(rng, 200_000, epsilon=epsilon)
    assert z.dtype == np.int64
    hi = int(math.ceil(6 / epsilon))
    p = chi2_pvalue(z, q, -hi, hi)
    assert p > ALPHA


def test_goodness_of_fit_detects_wrong_scale():
    # the same test must reject noise drawn at 1.25x the scale
    q_true = math.exp(-1.0)
    rng = noise.NoiseSource(seed=12345)
    z = noise.sample_discrete_laplace(rng, 200_000, epsilon=1 / 1.25)
    p = chi2_pvalue(z, q_true, -6, 6)
    assert p < ALPHA


def test_variance_matches_formula():
    q = math.exp(-0.5)
    rng = noise.NoiseSource(seed=3)
    z = noise.sample_discrete_laplace(rng, 400_000, epsilon=0.5)
    var = noise.discrete_laplace_variance(q)
    # sample variance sd ≈ sqrt((m4 - var²)/n); allow 6 sd (two-sided p ≈ 2e-9)
    m4 = np.mean(z.astype(float) ** 4)
    assert abs(z.var() - var) < 6 * math.sqrt((m4 - var**2) / z.size)
    assert abs(z.mean()) < 6 * math.sqrt(var / z.size)


def test_tail_sampler_is_conditional_law():
    q = math.exp(-0.7)
    theta = 4
    rng = noise.NoiseSource(seed=9)
    z = noise.sample_discrete_laplace_tail(rng, 100_000, epsilon=0.7, theta=theta)
    assert z.min() >= theta
    # Z - theta ~ geometric on {0,1,...} with success 1-q
    d = z - theta
    edges = np.arange(0, 15)
    obs = np.r_[[(d == k).sum() for k in edges], (d > 14).sum()]
    probs = np.r_[(1 - q) * q**edges, q**15]
    assert stats.chisquare(obs, probs * d.size).pvalue > ALPHA


@pytest.mark.parametrize("k,eps", [(1, 1.0), (5, 0.5), (21, 1.0), (21, 0.2)])
def test_sum_tail_is_exact(k, eps):
    q = math.exp(-eps)
    # exact for k = 1: Pr[Z > t] = q^(t+1)/(1+q)
    if k == 1:
        for t in range(0, 6):
            assert noise.sum_sf(t, 1, q)[0] == pytest.approx(q ** (t + 1) / (1 + q), rel=1e-9)
    # against brute-force convolution of the pmf
    support = np.arange(-400, 401)
    pmf = noise.discrete_laplace_pmf(support, q)
    conv = pmf.copy()
    for _ in range(k - 1):
        conv = np.convolve(conv, pmf)
    vals = np.arange(conv.size) - 400 * k
    for t in (0, 3, 10, 25):
        assert noise.sum_sf(t, k, q)[0] == pytest.approx(conv[vals > t].sum(), rel=1e-6, abs=1e-300)


def test_sum_bound_is_smallest():
    q = math.exp(-1.0)
    for tail in (0.1, 1e-4, 1e-9):
        g = noise.sum_abs_bound(21, q, tail)
        assert 2 * noise.sum_sf(g, 21, q)[0] <= tail < 2 * noise.sum_sf(g - 1, 21, q)[0]


def test_positive_part_tail_against_simulation():
    q = math.exp(-1.0)
    rng = noise.NoiseSource(seed=5)
    z = noise.sample_discrete_laplace(rng, (200_000, 21), epsilon=1.0)
    s = np.maximum(z, 0).sum(axis=1)
    for t in (5, 10, 15):
        p = noise.sum_positive_part_sf(t, 21, q)[0]
        obs = (s > t).mean()
        assert abs(obs - p) < 6 * math.sqrt(p * (1 - p) / s.size)


def test_interval_halfwidth_normal_branch_close_to_exact():
    q = math.exp(-1.0)
    exact = noise.sum_abs_bound(300, q, 0.05)
    approx = noise.sum_interval_halfwidth(300, q)
    assert abs(exact - approx) <= 2


def test_source_seeding():
    a = noise.NoiseSource()
    b = noise.NoiseSource()
    assert not a.seeded and not b.seeded and a.private and b.private
    assert not np.array_equal(a.words(4), b.words(4))
    s1, s2 = noise.NoiseSource(seed=42), noise.NoiseSource(seed=42)
    assert s1.seeded and not s1.private and "seed" in s1.not_private_reason
    assert np.array_equal(s1.words(4), s2.words(4))
    assert not np.array_equal(noise.NoiseSource(seed=43).words(4), noise.NoiseSource(seed=42).words(4))
    for bad in (-1, 1.5, True, "7"):
        with pytest.raises(ParameterError):
            noise.NoiseSource(seed=bad)


def test_bad_epsilon():
    for bad in (0, -1, float("nan"), float("inf")):
        with pytest.raises(ParameterError, match="epsilon"):
            noise.discrete_laplace_q(bad)


def test_discrete_laplace_sf_matches_pmf():
    q = math.exp(-0.7)
    z = np.arange(-200, 201)
    pmf = noise.discrete_laplace_pmf(z, q)
    for t in (-5, -1, 0, 1, 2, 7):
        assert noise.discrete_laplace_sf(t, q) == pytest.approx(pmf[z >= t].sum(), rel=1e-12)


# -- tiny epsilon: bounds through the continuous Laplace law ---------------------------------------------------------

@pytest.mark.parametrize("k", [1, 3, 21, 100])
@pytest.mark.parametrize("eps", [1.0, 0.1, 0.02])
@pytest.mark.parametrize("tail", [0.05, 1e-6])
def test_continuous_bound_is_valid_and_at_most_2k_above_the_exact_one(k, eps, tail):
    q = math.exp(-eps)
    exact = noise_laws._smallest_t(lambda t: 2.0 * noise.sum_sf(t, k, q)[0], tail, k, q)
    g = noise.continuous_abs_bound(k, q, tail)
    assert exact <= g <= exact + 2 * k + 1, (exact, g)
    assert 2.0 * noise.sum_sf(g, k, q)[0] <= tail  # valid by the exact law


def test_gamma_difference_tail_matches_its_closed_form_for_one_term():
    # k = 1: G1 - G2 is Laplace(1), Pr[> u] = exp(-u) / 2
    for u in (0.0, 0.3, 2.0, 15.0, 60.0):
        assert noise.gamma_difference_sf(u, 1) == pytest.approx(0.5 * math.exp(-u), rel=1e-9)
    # k = 2: Pr[G1 - G2 > u] = exp(-u) (2 + u) / 4
    for u in (0.0, 1.0, 7.5, 40.0):
        assert noise.gamma_difference_sf(u, 2) == pytest.approx(math.exp(-u) * (2 + u) / 4, rel=1e-9)


def test_tiny_epsilon_bounds_scale_as_one_over_epsilon_and_need_no_exact_law():
    # below about epsilon = 0.005 the bounds do not build the exact law (it would take minutes and gigabytes);
    # they must still scale exactly like the noise: 1/epsilon
    g5 = noise.sum_abs_bound(21, math.exp(-1e-5), 1e-8)
    g6 = noise.sum_abs_bound(21, math.exp(-1e-6), 1e-8)
    assert noise.sum_law_terms(21, math.exp(-1e-5)) > noise.EXACT_SUM_MAX_TERMS
    assert g6 / g5 == pytest.approx(10.0, rel=1e-4)
    # one draw: the 95% half-width of a Laplace of scale b is b ln 20 (plus at most 2k + 1 from the bound)
    b = 1e6
    h = noise.sum_interval_halfwidth(1, math.exp(-1.0 / b))
    assert noise.interval_fft_size(1, math.exp(-1.0 / b)) > noise.EXACT_INTERVAL_MAX_FFT
    assert b * math.log(20.0) <= h <= b * math.log(20.0) + 3


def test_interval_fallback_covers_at_least_95_percent(monkeypatch):
    # force the fallback where the exact law is cheap, and check it against that law
    q = math.exp(-0.05)
    monkeypatch.setattr(noise_laws, "EXACT_INTERVAL_MAX_FFT", 1)
    for k in (1, 4, 16):
        h = noise.sum_interval_halfwidth(k, q)
        assert 2.0 * noise.sum_sf(h, k, q)[0] <= 0.05
        assert h <= noise_laws._halfwidth_exact(k, q, 0.95) + 2 * k + 1
