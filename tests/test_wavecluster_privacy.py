"""Privacy of the WaveCluster mechanisms: sensitivities by brute force, noise
scales, budget splits and the exponential mechanism's law.

Statistical tests use fixed seeds (so they are deterministic) and reject at
p < 1e-6: a correct implementation fails a given test with probability 1e-6
over the choice of seed. Each test also checks that the same data *would*
be rejected under the nearest wrong parameter (power), so that a wrong noise
scale, budget split or sensitivity cannot pass.
"""

import itertools
import math

import numpy as np
import pytest
import pywt
from scipy import stats

from dpgeo.mechanisms import wavecluster as wc
from dpgeo.mechanisms.wavecluster import privthr, thresholds, transform
from dpgeo.noise import NoiseSource

ALPHA = 1e-6  # false-alarm rate of each statistical test


def dlap_chisquare_pvalue(z, q):
    """Chi-square goodness of fit of integer samples to DLap(q), tails merged."""
    z = np.asarray(z, dtype=np.int64)
    n = z.size
    pmf0 = (1 - q) / (1 + q)
    # largest K with expected count >= 5 in the single-value bins
    K = 0
    while n * pmf0 * q ** (K + 1) >= 5:
        K += 1
    vals = np.arange(-K, K + 1)
    probs = pmf0 * q ** np.abs(vals.astype(float))
    tail = q**K / (1 + q)  # Pr[Z >= K] = Pr[Z <= -K]
    probs[0] = tail
    probs[-1] = tail
    obs = np.bincount(np.clip(z, -K, K) + K, minlength=2 * K + 1)
    return stats.chisquare(obs, probs / probs.sum() * n).pvalue


def grid_counts(shape, seed=0):
    g = np.random.default_rng(seed)
    c = g.poisson(3.0, shape) * (g.random(shape) < 0.5)
    return c.astype(np.int64)


# ---------------------------------------------------------------------------
# sensitivities
# ---------------------------------------------------------------------------

BRUTE_SHAPES = [(6, 6), (7, 5), (9, 9), (3, 4)]


def _pywt_tap_counts(shape, wavelet, mode):
    """Most positive and most negative approximation coefficients one unit count can touch,
    from PyWavelets' own float transform at every cell (signs read with a tolerance)."""
    pmax = nmax = 0
    for i, j in itertools.product(range(shape[0]), range(shape[1])):
        e = np.zeros(shape)
        e[i, j] = 1.0
        a = pywt.dwt2(e, wavelet, mode=mode)[0]
        pmax = max(pmax, int((a > 1e-9).sum()))
        nmax = max(nmax, int((a < -1e-9).sum()))
    return pmax, nmax, a.size


@pytest.mark.parametrize("wavelet", wc.WAVELETS)
@pytest.mark.parametrize("mode", wc.SAFE_MODES)
def test_tap_counts_match_pywavelets_impulse_response(wavelet, mode):
    # independent of our integer transform: pywt's own float transform of a
    # unit count at every cell, signs read with a tolerance
    for shape in BRUTE_SHAPES:
        table = wc.approximation_sensitivity(shape, wavelet=wavelet, mode=mode)
        pmax, nmax, n_coef = _pywt_tap_counts(shape, wavelet, mode)
        assert (table["max_positive_taps"], table["max_negative_taps"]) == (pmax, nmax), shape
        assert table["n_coefficients"] == n_coef


def _nonpositive(c, wavelet, mode):
    coefs = transform._exact_approximation(c, transform._filter(wavelet), mode)
    return coefs.P.size - int(coefs.positive().sum())


def _quality(c, wavelet, mode, p, thresholds):
    coefs = transform._exact_approximation(c, transform._filter(wavelet), mode)
    m = int(coefs.positive().sum())
    k = m - (int(round(p * 1e6)) * m) // 100_000_000
    return -np.abs(coefs.count_greater(thresholds) - k)


def _bases(shape):
    yield np.zeros(shape, dtype=np.int64)
    for seed in range(3):
        yield grid_counts(shape, seed)
    g = np.random.default_rng(9)
    yield g.integers(0, 2, shape)


@pytest.mark.parametrize("wavelet", wc.WAVELETS)
@pytest.mark.parametrize("mode", ["zero", "symmetric", "smooth", "reflect"])
def test_nonpositive_count_sensitivity_brute_force(wavelet, mode):
    for shape in [(6, 6), (7, 5)]:
        table = wc.approximation_sensitivity(shape, wavelet=wavelet, mode=mode)
        worst = 0
        for base in _bases(shape):
            z0 = _nonpositive(base, wavelet, mode)
            for i, j in itertools.product(range(shape[0]), range(shape[1])):
                c = base.copy()
                c[i, j] += 1  # add one point; removing it is the reverse pair
                worst = max(worst, abs(_nonpositive(c, wavelet, mode) - z0))
        assert worst <= table["nonpositive_count"], shape
        if table["max_positive_taps"] >= table["max_negative_taps"]:
            # the empty grid attains the bound: every positive tap leaves Z
            assert worst == table["nonpositive_count"], shape


@pytest.mark.parametrize("wavelet", wc.WAVELETS)
@pytest.mark.parametrize("percentile", [0.0, 10.0, 60.0])
def test_em_quality_sensitivity_brute_force(wavelet, percentile):
    mode = "zero"
    shape = (6, 6)
    table = wc.approximation_sensitivity(shape, wavelet=wavelet, mode=mode, percentile=percentile)
    scale = transform._filter(wavelet).gain // 4
    thresholds = np.arange(0, 40 * scale, max(1, scale // 4))
    worst = 0
    for base in _bases(shape):
        u0 = _quality(base, wavelet, mode, percentile, thresholds)
        for i, j in itertools.product(range(shape[0]), range(shape[1])):
            c = base.copy()
            c[i, j] += 1
            worst = max(worst, int(np.abs(_quality(c, wavelet, mode, percentile, thresholds) - u0).max()))
    assert worst <= table["em_quality"]
    if wavelet == "haar":
        # monotone: rank and k move together, never 1 + (1 - p)
        assert worst == table["em_quality"] == 1


def test_record_sensitivity_scales_with_points_per_record():
    shape = (4, 4)
    for wavelet in ("haar", "bior2.2"):
        table = wc.approximation_sensitivity(shape, wavelet=wavelet, sensitivity=2)
        one = wc.approximation_sensitivity(shape, wavelet=wavelet, sensitivity=1)
        assert table["counts"] == 2
        assert table["nonpositive_count"] == min(2 * one["nonpositive_count"], one["n_coefficients"])
        worst = 0
        cells = list(itertools.product(range(4), range(4)))
        for base in _bases(shape):
            z0 = _nonpositive(base, wavelet, "zero")
            for a, b in itertools.combinations_with_replacement(cells, 2):
                c = base.copy()
                c[a] += 1
                c[b] += 1
                worst = max(worst, abs(_nonpositive(c, wavelet, "zero") - z0))
        assert worst <= table["nonpositive_count"]
        assert worst > one["nonpositive_count"]


# ---------------------------------------------------------------------------
# noise scales and budget splits
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("method, share, split", [
    ("privqt", 1.0, None),
    ("privthr", 0.9, None),
    ("privthr-em", 0.7, None),
    ("privthr", 0.5, 0.5),
])
@pytest.mark.parametrize("sensitivity", [1, 3])
def test_count_noise_scale(method, share, split, sensitivity):
    eps = 0.8
    c = grid_counts((150, 150), seed=1)
    r = wc.wavecluster_cells(c, method=method, epsilon=eps, count_split=split, sensitivity=sensitivity,
                             rng=NoiseSource(seed=11))
    q = math.exp(-share * eps / sensitivity)
    assert r.q == pytest.approx(q)
    z = (r.noisy_counts - c).ravel()
    assert dlap_chisquare_pvalue(z, q) > ALPHA
    # power: the whole ε, or the wrong sensitivity, would be detected
    wrong = math.exp(-eps / sensitivity) if share < 1 else math.exp(-0.9 * eps / sensitivity)
    assert dlap_chisquare_pvalue(z, wrong) < ALPHA
    wrong_s = math.exp(-share * eps / (sensitivity + 1))
    assert dlap_chisquare_pvalue(z, wrong_s) < ALPHA


@pytest.mark.parametrize("wavelet, split", [("haar", None), ("bior2.2", None), ("haar", 0.6)])
def test_noisy_nonpositive_count_centred_with_right_scale(wavelet, split):
    eps = 1.0
    c = grid_counts((8, 8), seed=4)
    true_z = wc.wavecluster_cells(c, method="exact", wavelet=wavelet).report["n_nonpositive"]
    dz = wc.approximation_sensitivity(c.shape, wavelet=wavelet)["nonpositive_count"]
    alpha = 0.9 if split is None else split
    src = NoiseSource(seed=21)
    draws = []
    for _ in range(1500):
        r = wc.wavecluster_cells(c, method="privthr", epsilon=eps, wavelet=wavelet, count_split=split, rng=src)
        draws.append(r.report["noisy_nonpositive_count"] - true_z)
    q = math.exp(-(1 - alpha) * eps / dz)
    assert r.report["sensitivities"]["nonpositive_count"] == dz
    assert r.report["noise_q"]["nonpositive_count"] == pytest.approx(q)
    draws = np.array(draws)
    assert dlap_chisquare_pvalue(draws, q) > ALPHA
    # centred: a t-test on the mean at the same level
    assert stats.ttest_1samp(draws, 0.0).pvalue > ALPHA
    # power: twice or half the scale would be rejected
    assert dlap_chisquare_pvalue(draws, math.exp(-2 * (1 - alpha) * eps / dz)) < ALPHA
    assert dlap_chisquare_pvalue(draws, math.exp(-0.5 * (1 - alpha) * eps / dz)) < ALPHA


def test_baseline_noisy_n_scale():
    g = np.random.default_rng(0)
    x, y = g.uniform(0, 10, 300), g.uniform(0, 10, 300)
    src = NoiseSource(seed=5)
    eps, share = 2.0, 0.05
    draws = np.array([
        wc.adaptive_grid_counts(x, y, bounds=(0, 0, 10, 10), shape=(5, 5), epsilon=eps, n_share=share,
                                rng=src).report["noisy_n"] - 300
        for _ in range(1200)
    ])
    q = math.exp(-share * eps)
    assert dlap_chisquare_pvalue(draws, q) > ALPHA
    assert dlap_chisquare_pvalue(draws, math.exp(-2 * share * eps)) < ALPHA


# ---------------------------------------------------------------------------
# the exponential mechanism
# ---------------------------------------------------------------------------


def _grouped_chisquare(obs_groups, probs, groups, n):
    """Chi-square of group counts against candidate probabilities summed per group."""
    exp = np.array([probs[groups == v].sum() for v in range(obs_groups.size)]) * n
    keep = exp >= 5
    o = np.r_[obs_groups[keep], obs_groups[~keep].sum()]
    e = np.r_[exp[keep], exp[~keep].sum()]
    if e[-1] == 0:
        o, e = o[:-1], e[:-1]
    return stats.chisquare(o, e).pvalue


def test_em_threshold_law_matches_closed_form():
    # 8x8 grid whose 16 Haar block sums are the values below: |L| = 15,
    # p = 60 -> k = 15 - floor(9) = 6
    vals = np.array([0, 2, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53])
    c = np.zeros((8, 8), dtype=int)
    c[0::2, 0::2] = vals.reshape(4, 4)
    assert sorted(wc.approximation(c).ravel().tolist()) == vals.tolist()
    eps, alpha = 2.0, 0.7
    eps2 = (1 - alpha) * eps
    # public candidates with count_cap = 1: the integers 0..64
    cand = np.arange(65)
    ccount = np.array([np.sum(vals > t) for t in cand])

    def law(du, two=2):
        lw = -eps2 * np.abs(ccount - 6) / (two * du)
        pr = np.exp(lw - lw.max())
        return pr / pr.sum()

    src = NoiseSource(seed=8)
    n = 4000
    got = np.array([
        wc.wavecluster_cells(c, method="privthr-em", epsilon=eps, count_cap=1, rng=src).report["threshold"]
        for _ in range(n)
    ]).astype(int)
    assert set(got) <= set(cand)
    # group candidates by c(t), i.e. by their quality
    obs = np.bincount(ccount[got], minlength=16)
    assert _grouped_chisquare(obs, law(1.0), ccount, n) > ALPHA
    # uniform within a class: the 12 candidates 53..64 all have c(t) = 0
    top = np.bincount(got[got >= 53] - 53, minlength=12)
    assert stats.chisquare(top).pvalue > ALPHA
    # power: the sensitivity 1 + (1 - p) or a missing factor 2 would be detected
    assert _grouped_chisquare(obs, law(1.4), ccount, n) < ALPHA
    assert _grouped_chisquare(obs, law(1.0, two=1), ccount, n) < ALPHA


def test_one_em_draw_per_release(monkeypatch):
    c = grid_counts((32, 32), seed=2)
    calls = []
    from dpgeo.mechanisms.wavecluster import privqt, privthr_em

    for module, name in ((privthr_em, "sample_exponential_mechanism"), (privqt, "sample_discrete_laplace")):
        real = getattr(module, name)

        def counted(*a, _real=real, _name=name, **k):
            calls.append((_name, k.get("epsilon")))
            return _real(*a, **k)
        monkeypatch.setattr(module, name, counted)
    r = wc.wavecluster_cells(c, method="privthr-em", epsilon=1.0, rng=NoiseSource(seed=0))
    eps = r.report["epsilon_split"]
    assert eps == {"counts": pytest.approx(0.7), "threshold": pytest.approx(0.3)}
    # one exponential-mechanism draw at the threshold's share, one noise call for the counts
    assert calls == [("sample_exponential_mechanism", eps["threshold"]), ("sample_discrete_laplace", eps["counts"])]


def test_privthr_releases_only_noisy_statistics():
    # the post-processing step sees only (noisy counts, |Z|′): feeding the
    # same released values must give the same labels whatever the true counts
    c = grid_counts((20, 20), seed=3)
    r = wc.wavecluster_cells(c, method="privthr", epsilon=1.0, rng=NoiseSource(seed=4))
    filt = transform._filter("haar")
    coefs = transform._exact_approximation(r.noisy_counts, filt, "zero")
    pos, w = coefs.positive(), coefs.normalised()
    n_drop, _ = privthr._privthr_rank(int(pos.sum()), r.report["noisy_nonpositive_count"], w.size,
                                 60_000_000, "direct", None)
    t = thresholds._threshold_from_positives(w[pos], n_drop)
    np.testing.assert_array_equal(r.significant, pos & (w >= t))


@pytest.mark.parametrize("wavelet", wc.WAVELETS)
def test_tap_counts_on_a_grid_larger_than_the_edge_zone(wavelet):
    # grids wider than 2·(2F + 2) use the periodic-interior shortcut: compare
    # with PyWavelets at every cell
    shape = (31, 30)
    for mode in wc.SAFE_MODES:
        table = wc.approximation_sensitivity(shape, wavelet=wavelet, mode=mode)
        pmax, nmax, n_coef = _pywt_tap_counts(shape, wavelet, mode)
        assert (table["max_positive_taps"], table["max_negative_taps"]) == (pmax, nmax), mode
