"""The exact samplers: thresholds, the equality fallback, tails, the sparse law, the exponential mechanism.

Every statistical test below uses a fixed seed (so it is deterministic) and
rejects at p < ALPHA = 1e-6: if the sampler had exactly the stated law, a
test of this kind would fail for a given seed with probability at most
1e-6 (the false-failure rate; written next to each test). Where a test also
checks power, it asserts that the same data reject a nearby wrong law.
"""

import math
from decimal import ROUND_FLOOR, Decimal, localcontext
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

import dpgeo
from dpgeo import _exact, noise
from dpgeo.domain import StudyArea
from dpgeo.errors import ParameterError
from dpgeo.grid import Grid
from dpgeo.histogram import dense_histogram, exact_counts, sparse_histogram
from dpgeo.noise import NoiseSource

ALPHA = 1e-6


# ---------------------------------------------------------------------------
# reference values in plain high-precision decimal (independent of _exact)
# ---------------------------------------------------------------------------


def ref_c(kind, r, k, K=None, theta=None, mult=1, prec=160):
    """c_k of a table, from plain 160-digit Decimal arithmetic."""
    with localcontext() as ctx:
        ctx.prec = prec
        R = Decimal(r.numerator) / Decimal(r.denominator)
        if theta is None:
            x = (-R * mult).exp()
        else:
            x = (1 - (-R * theta).exp() / (1 + (-R).exp())) ** mult
        if kind == "geom":
            return x**k
        if kind == "laplace":
            return 2 * x**k / (1 + x)
        b = K + 1
        return (x**k - x**b) / (1 - x**b)


def ref_floor(c, bits):
    with localcontext() as ctx:
        ctx.prec = 160
        return int((c * (1 << bits)).to_integral_value(rounding=ROUND_FLOOR))


CASES = [  # kind, r, K, theta, mult
    ("laplace", Fraction(1), 30, None, 1),
    ("laplace", Fraction(0.05), 600, None, 1),
    ("laplace", Fraction(2, 15), 210, None, 1),  # ε = 0.4, Δ = 3 (not a binary fraction)
    ("laplace", Fraction(60), 3, None, 1),  # thresholds below 2**-63: equal (0) thresholds
    ("geom", Fraction(0.3), 100, None, 1),
    ("geom", Fraction(0.8), 40, 3, 1),  # the sparse histogram's gap law
    ("trunc", Fraction(1, 10_000), 4095, None, 1),  # digits of a geometric with q near 1
    ("trunc", Fraction(2.0), 4095, 12, 1),  # gap law with p ≈ 3e-11: x = 1 - p close to 1
    ("geom", Fraction(1.5), 1, 30, 4096**3),  # Pr[G >= 4096**3] for p ≈ 2e-20
    ("trunc", Fraction(60), 4095, 1, 1),  # p ≈ 9e-27: c_k within ~k·p of the dyadic (4096 - k)/4096
]


@pytest.mark.parametrize("kind, r, K, theta, mult", CASES)
def test_thresholds_equal_an_independent_high_precision_computation(kind, r, K, theta, mult):
    tab = _exact.Table(kind, _exact.decay(r, theta, mult), K, kind != "trunc")
    ks = sorted({k for k in (1, 2, K // 2, K - 1, K) if 1 <= k <= K})
    want = [ref_floor(ref_c(kind, r, k, K, theta, mult), 63) for k in ks]
    assert [int(tab.t[k - 1]) for k in ks] == want
    # and deeper binary digits, as the equality fallback uses them
    for k in ks[:2]:
        assert tab.floor_scaled(k, 63 + 128) == ref_floor(ref_c(kind, r, k, K, theta, mult), 63 + 128)


def test_fast_path_equals_the_exact_path():
    """The float-guided count equals binary search for random words and words next to thresholds."""
    rng = np.random.default_rng(5)
    for kind, r, K, theta, mult in CASES:
        tab = _exact.table(kind, _exact.decay(r, theta, mult), K, kind != "trunc")
        t = tab.t
        v = np.r_[rng.integers(0, 1 << 63, 50_000, dtype=np.int64), t - 1, t + 1, 0, (1 << 63) - 1]
        v = v[(v >= 0) & ~np.isin(v, t)]  # no equal words here: those need extra words (tested below)
        w = (v.astype(np.uint64) << np.uint64(1)) | np.uint64(1)
        fast = np.empty(w.size, dtype=np.int64)
        tab.count_words(w, fast, NoiseSource(seed=1))
        exact = tab.exact_counts(v, NoiseSource(seed=1))
        # tails (a count of K) are completed with fresh words, differently ordered in the two paths
        np.testing.assert_array_equal(np.minimum(fast, K), np.minimum(exact, K))
        assert np.array_equal(fast < K, exact < K)


# ---------------------------------------------------------------------------
# the equality fallback, driven with chosen words
# ---------------------------------------------------------------------------


def test_equality_fallback_decides_with_further_words():
    r = Fraction(1)
    tab = _exact.table("laplace", _exact.decay(r), _exact.coverage(1.0), True)
    k = 2
    t_k = int(tab.t[k - 1])
    c = ref_c("laplace", r, k)
    d1 = ref_floor(c, 127) - (t_k << 64)  # the 64 bits of c_k after its first 63
    d2 = ref_floor(c, 191) - (ref_floor(c, 127) << 64)  # and the next 64
    assert 0 < d1 < (1 << 64) - 1 and 0 < d2 < (1 << 64) - 1
    w1 = t_k << 1  # v == t_k, sign bit 0 (positive)
    cases = [
        ([w1, d1 - 1], k),  # V < c_k: |Z| >= k, and V > c_(k+1) since t_(k+1) < v
        ([w1, d1 + 1], k - 1),  # V > c_k
        ([w1, d1, d2 - 1], k),  # equal again: decided by a third word
        ([w1, d1, d2 + 1], k - 1),
    ]
    for words, want in cases:
        src = NoiseSource._scripted(words)
        z = noise.sample_discrete_laplace(src, 1, epsilon=1.0)
        assert int(z[0]) == want and src.consumed == len(words), (words, want)
    # a word next to the threshold needs no further word
    for v, want in ((t_k - 1, k), (t_k + 1, k - 1)):
        src = NoiseSource._scripted([(v << 1) | 1])  # sign bit 1: negative
        assert int(noise.sample_discrete_laplace(src, 1, epsilon=1.0)[0]) == -want and src.consumed == 1
    # the same decisions inside a large vectorised draw (the fast path flags the word)
    words = [0x1234567 * (i + 1) for i in range(100)] + [w1, d1 - 1]
    src = NoiseSource._scripted(words[:100] + [w1] + [d1 - 1])
    big = noise.sample_discrete_laplace(src, 101, epsilon=1.0)
    assert int(big[100]) == k and src.consumed == 102


def test_equality_fallback_with_equal_thresholds():
    """ε/Δ = 60: c_1 ≈ 2e-26 and c_2 ≈ 1e-52 are both below 2**-63, so t_1 = t_2 = 0."""
    r = Fraction(60)
    tab = _exact.Table("laplace", _exact.decay(r), 3, True)
    assert list(tab.t) == [0, 0, 0]
    f1 = ref_floor(ref_c("laplace", r, 1), 127)  # about 3.6e12: c_1 > V when the next word is below it
    assert 0 < f1 < 1 << 64 and ref_floor(ref_c("laplace", r, 2), 127) == 0
    for words, want in (([0, f1 - 1], 1), ([0, f1 + 1], 0), ([0, 0, (1 << 64) - 1], 1)):
        # the last: c_1 > V after one more word; for c_2 the next 64 bits tie (both 0), a third decides
        src = NoiseSource._scripted(words)
        assert tab.sample(1, src).tolist() == [want] and src.consumed == len(words)


# ---------------------------------------------------------------------------
# the discrete Laplace law, tails included
# ---------------------------------------------------------------------------


def magnitude_pvalue(m, q, top):
    """Chi-square of |Z| samples against Pr[|Z| >= k] = 2q^k/(1+q) (k >= 1), all tail mass binned.

    Bins are single values up to ``top`` for narrow laws and ~100 equal-width
    bins for wide ones (so that a wrong scale is still detected).
    """
    width = max(1, -(-(top + 1) // 100))
    edges = np.arange(0, top + 1 + width, width)  # bins [e_i, e_(i+1)), then [e_last, inf)
    sf = np.where(edges == 0, 1.0, 2 * q ** edges.astype(float) / (1 + q))  # Pr[|Z| >= e]
    probs = np.r_[sf[:-1] - sf[1:], sf[-1]]
    obs = np.bincount(np.minimum(np.searchsorted(edges, m, side="right") - 1, edges.size - 1),
                      minlength=edges.size)
    exp = probs * m.size
    # merge bins with fewer than 5 expected into their neighbour towards the tail
    o, e = [], []
    acc_o = acc_e = 0.0
    for oi, ei in zip(obs, exp):
        acc_o += oi
        acc_e += ei
        if acc_e >= 5:
            o.append(acc_o)
            e.append(acc_e)
            acc_o = acc_e = 0.0
    if acc_e > 0:
        o[-1] += acc_o
        e[-1] += acc_e
    if len(o) < 2:  # nearly all zeros (large ε): exact binomial test of Pr[|Z| > 0] = 2q/(1+q)
        return stats.binomtest(int((m > 0).sum()), m.size, 2 * q / (1 + q)).pvalue
    return stats.chisquare(o, e).pvalue


@pytest.mark.parametrize("epsilon, sensitivity, n", [
    (0.05, 1, 200_000), (0.4, 3, 200_000), (1.0, 1, 200_000), (3.0, 1, 200_000), (12.0, 1, 200_000),
    (0.002, 1, 100_000),  # a table of 13,863 thresholds
    (0.0005, 1, 100_000),  # below ε/Δ = 0.00085: the digit decomposition
])
def test_discrete_laplace_law(epsilon, sensitivity, n):
    # false-failure rate: 2e-6 (two tests at 1e-6)
    q = math.exp(-epsilon / sensitivity)
    z = noise.sample_discrete_laplace(NoiseSource(seed=100), n, epsilon=epsilon, sensitivity=sensitivity)
    top = int(np.quantile(np.abs(z), 0.999)) + 1
    assert magnitude_pvalue(np.abs(z), q, top) > ALPHA
    # the sign is independent of the magnitude and fair: exact binomial test on the non-zero draws
    nz = z[z != 0]
    assert stats.binomtest(int((nz > 0).sum()), nz.size).pvalue > ALPHA
    if epsilon < 10:  # power: 10% more noise is rejected (at ε = 12 nearly every draw is 0)
        assert magnitude_pvalue(np.abs(z), math.exp(-epsilon / sensitivity / 1.1), top) < ALPHA


@pytest.mark.parametrize("K", [1, 2, 5])
def test_tail_beyond_the_table_is_the_geometric_tail(K):
    """Tables cut at K = 1, 2, 5 (instead of 28 at ε = 1) send most draws through the tail."""
    # false-failure rate: 1e-6
    q = math.exp(-1.0)
    tab = _exact.Table("laplace", _exact.decay(Fraction(1)), K, True)
    m = tab.sample(100_000, NoiseSource(seed=7))
    assert magnitude_pvalue(m, q, 14) > ALPHA


@pytest.mark.parametrize("epsilon, theta", [(0.7, 4), (0.004, 2), (0.0005, 3)])
def test_conditional_tail_sampler(epsilon, theta):
    # false-failure rate: 1e-6
    q = math.exp(-epsilon)
    z = noise.sample_discrete_laplace_tail(NoiseSource(seed=9), 100_000, epsilon=epsilon, theta=theta)
    assert z.min() >= theta
    d = z - theta  # geometric: Pr[d >= g] = q**g
    top = int(np.quantile(d, 0.999))
    edges = np.unique(np.linspace(0, top, 21).astype(np.int64))  # bins [e_i, e_(i+1)), last one open
    obs = np.histogram(d, bins=np.r_[edges, np.inf])[0]
    sf = q ** edges.astype(float)  # Pr[d >= e_i]
    exp = np.r_[sf[:-1] - sf[1:], sf[-1]] * d.size
    assert stats.chisquare(obs, exp).pvalue > ALPHA


# ---------------------------------------------------------------------------
# positions of the sparse histogram's released empty cells
# ---------------------------------------------------------------------------


def test_tail_positions_are_independent_bernoulli_trials():
    """1000 trials with p = Pr[Z >= 2] at ε = 0.5: counts Binomial(1000, p), positions uniform."""
    # false-failure rate: 2e-6 (two tests at 1e-6)
    q = math.exp(-0.5)
    p = q**2 / (1 + q)
    src = NoiseSource(seed=11)
    runs = 3000
    counts = np.empty(runs, dtype=np.int64)
    hits = np.zeros(1000, dtype=np.int64)
    for i in range(runs):
        pos = noise.sample_tail_positions(src, 1000, epsilon=0.5, theta=2)
        assert np.all(np.diff(pos) > 0) and (pos.size == 0 or (pos[0] >= 0 and pos[-1] < 1000))
        counts[i] = pos.size
        hits[pos] += 1
    lo, hi = stats.binom.ppf([1e-4, 1 - 1e-4], 1000, p).astype(int)
    k = np.arange(lo, hi + 1)
    obs = np.r_[(counts < lo).sum(), [(counts == v).sum() for v in k], (counts > hi).sum()]
    exp = np.r_[stats.binom.cdf(lo - 1, 1000, p), stats.binom.pmf(k, 1000, p), stats.binom.sf(hi, 1000, p)] * runs
    keep = exp >= 5
    assert stats.chisquare(np.r_[obs[keep], obs[~keep].sum()], np.r_[exp[keep], exp[~keep].sum()]).pvalue > ALPHA
    assert stats.chisquare(hits).pvalue > ALPHA


def test_tail_positions_on_a_huge_number_of_trials():
    """10**11 trials with p = Pr[Z >= 24] ≈ 2.8e-11 (digits path): the count is Binomial ≈ Poisson(2.8)."""
    # false-failure rate: 1e-6
    q = math.exp(-1.0)
    n, p = 10**11, q**24 / (1 + q)
    src = NoiseSource(seed=12)
    counts = np.array([noise.sample_tail_positions(src, n, epsilon=1.0, theta=24).size for _ in range(400)])
    k = np.arange(0, 9)
    obs = np.r_[[(counts == v).sum() for v in k], (counts > 8).sum()]
    exp = np.r_[stats.binom.pmf(k, n, p), stats.binom.sf(8, n, p)]
    exp = exp / exp.sum() * counts.size  # scipy's pmf at n = 1e11 sums to 1 only within 1e-7
    keep = exp >= 5
    assert stats.chisquare(np.r_[obs[keep], obs[~keep].sum()], np.r_[exp[keep], exp[~keep].sum()]).pvalue > ALPHA


# ---------------------------------------------------------------------------
# the sparse histogram has the law of "dense, then below θ set to 0"
# ---------------------------------------------------------------------------


def _release_law(x, q, theta):
    """Pr[x + Z >= θ] for discrete Laplace Z with decay q."""
    t = theta - x
    return q**t / (1 + q) if t >= 1 else 1 - q ** (1 - t) / (1 + q)


def test_sparse_histogram_joint_law_matches_dense_then_threshold():
    """Which of the 9 cells of a 3x3 grid are released: the exact product law, for sparse and dense.

    Cells with true counts 0 (six of them), 1, 2 and 4; θ = 2, ε = 0.7. The
    released pattern (one of 512) must follow the product of the per-cell
    laws, for the sparse histogram and for dense-then-threshold alike, and
    released values of empty cells must follow Z | Z >= θ.
    """
    # false-failure rate: 3e-6 (three tests at 1e-6)
    area = StudyArea.from_bbox((0, 0, 30, 30), "EPSG:32615", working_crs="EPSG:32615")
    g = Grid(area, 10.0)
    eps, theta = 0.7, 2
    q = math.exp(-eps)
    pts = np.r_[[1], [3, 3], [7, 7, 7, 7]]
    ids, counts = exact_counts(g, pts)
    true = np.zeros(9, dtype=np.int64)
    true[ids] = counts
    p_cell = np.array([_release_law(x, q, theta) for x in true])
    bits = (np.arange(512)[:, None] >> np.arange(9)) & 1
    pattern_p = np.prod(np.where(bits == 1, p_cell, 1 - p_cell), axis=1)

    def pattern_pvalue(pat):
        obs = np.bincount(pat, minlength=512)
        exp = pattern_p * pat.size
        keep = exp >= 5
        return stats.chisquare(np.r_[obs[keep], obs[~keep].sum()], np.r_[exp[keep], exp[~keep].sum()]).pvalue

    src = NoiseSource(seed=13)
    runs = 6000
    sp_pat = np.empty(runs, dtype=np.int64)
    de_pat = np.empty(runs, dtype=np.int64)
    empty_vals = []
    weights = 1 << np.arange(9)
    for i in range(runs):
        h = sparse_histogram(g, ids, counts, epsilon=eps, theta=theta, rng=src)
        rel = np.zeros(9, dtype=np.int64)
        rel[h.cell_id] = h.count
        sp_pat[i] = int(((rel != 0) * weights).sum())
        empty_vals.extend(rel[(true == 0) & (rel != 0)].tolist())
        d = dense_histogram(g, ids, counts, epsilon=eps, rng=src).count
        de_pat[i] = int(((d >= theta) * weights).sum())
    assert pattern_pvalue(sp_pat) > ALPHA
    assert pattern_pvalue(de_pat) > ALPHA
    v = np.array(empty_vals) - theta  # geometric with decay q
    obs = np.r_[np.bincount(np.minimum(v, 10), minlength=11)]
    exp = np.r_[(1 - q) * q ** np.arange(10), q**10] * v.size
    assert stats.chisquare(obs, exp).pvalue > ALPHA


def test_sparse_false_cells_are_uniform_over_the_empty_cells_of_an_irregular_universe():
    # false-failure rate: 1e-6
    from shapely.geometry import Polygon

    tri = StudyArea.from_geometry(Polygon([(0, 0), (200, 0), (0, 200)]), "EPSG:32615", working_crs="EPSG:32615")
    g = Grid(tri, 10.0)
    uni = g.universe_ids()
    ids, counts = exact_counts(g, uni[::7])  # every 7th universe cell holds one point
    empty = np.setdiff1d(uni, ids)
    src = NoiseSource(seed=14)
    hits = np.zeros(g.ny * g.nx, dtype=np.int64)
    for _ in range(400):
        h = sparse_histogram(g, ids, counts, epsilon=1.0, theta=1, rng=src)
        released = np.setdiff1d(h.cell_id, ids)
        assert np.all(np.isin(released, empty))
        hits[released] += 1
    assert stats.chisquare(hits[empty]).pvalue > ALPHA


def test_universe_rank_of_sorted_ids_inverts_universe_id_at():
    from shapely.geometry import Polygon

    area = StudyArea.from_geometry(Polygon([(0, 0), (900, 100), (300, 800)]), "EPSG:32615",
                                   working_crs="EPSG:32615")
    g = Grid(area, 10.0)
    rank = np.unique(np.random.default_rng(0).integers(0, g.n_cells, g.n_cells // 2))
    ids = g.universe_id_at(rank)
    assert np.array_equal(g.universe_rank(ids, is_sorted=True), rank)
    assert np.array_equal(g.universe_rank(ids), rank)


# ---------------------------------------------------------------------------
# the exponential mechanism and Bernoulli(exp(-γ))
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("gamma", [Fraction(1, 10), Fraction(1), Fraction(7, 3), Fraction(5)])
def test_bernoulli_exp(gamma):
    # false-failure rate: 1e-6 (exact binomial test)
    src = NoiseSource(seed=15)
    n = 20_000
    k = sum(noise.bernoulli_exp(src, gamma) for _ in range(n))
    assert stats.binomtest(k, n, math.exp(-gamma)).pvalue > ALPHA


def test_exponential_mechanism_law():
    # false-failure rate: 1e-6; power: the law without the factor 2, and with 1.3x the sensitivity
    u = np.array([0, -1, -2, -5, -10, 0, -3, -40])
    eps, du = 1.0, 1

    def law(scale):
        w = np.exp(eps * u / scale)
        return w / w.sum()

    src = NoiseSource(seed=16)
    n = 20_000
    got = np.bincount([noise.sample_exponential_mechanism(src, u, epsilon=eps, sensitivity=du)
                       for _ in range(n)], minlength=u.size)

    def pval(p):
        exp = p * n
        keep = exp >= 5
        return stats.chisquare(np.r_[got[keep], got[~keep].sum()], np.r_[exp[keep], exp[~keep].sum()]).pvalue

    assert pval(law(2 * du)) > ALPHA
    assert pval(law(du)) < ALPHA
    assert pval(law(2 * 1.3 * du)) < ALPHA


def test_exponential_mechanism_validates():
    with pytest.raises(ParameterError):
        noise.sample_exponential_mechanism(NoiseSource(seed=0), [0.5, 1.0], epsilon=1.0, sensitivity=1)
    with pytest.raises(ParameterError):
        noise.sample_exponential_mechanism(NoiseSource(seed=0), [], epsilon=1.0, sensitivity=1)


# ---------------------------------------------------------------------------
# the source, the budget split and the metadata
# ---------------------------------------------------------------------------


def test_below_rejects_exactly():
    # bound 3 takes the top two bits of a word; 3 (binary 11) is rejected and the next word used
    src = NoiseSource._scripted([3 << 62, 1 << 62])
    assert src.below(3) == 1 and src.consumed == 2


def test_seeded_sources_reproduce_and_numpy_generators_are_accepted():
    a = noise.sample_discrete_laplace(NoiseSource(seed=5), 1000, epsilon=0.5)
    b = noise.sample_discrete_laplace(NoiseSource(seed=5), 1000, epsilon=0.5)
    assert np.array_equal(a, b)
    g1 = noise.sample_discrete_laplace(np.random.default_rng(3), 50, epsilon=0.5)
    g2 = noise.sample_discrete_laplace(NoiseSource.from_generator(np.random.default_rng(3)), 50, epsilon=0.5)
    assert np.array_equal(g1, g2)
    with pytest.raises(ParameterError, match="rng must be"):
        noise.sample_discrete_laplace(12345, 5, epsilon=1.0)


@settings(max_examples=200, deadline=None)
@given(eps=st.floats(1e-6, 1e3), share=st.floats(0.01, 0.99))
def test_split_epsilon_never_spends_more(eps, share):
    a, b = noise.split_epsilon(eps, share)
    assert a > 0 and b > 0 and noise.noise_epsilon(a) + noise.noise_epsilon(b) <= noise.noise_epsilon(eps)
    assert a == pytest.approx(share * eps) and b == pytest.approx((1 - share) * eps)


def test_rate_limits():
    with pytest.raises(ParameterError, match="2\\*\\*-40"):
        noise.sample_discrete_laplace(NoiseSource(seed=0), 1, epsilon=1e-13)
    with pytest.raises(ParameterError, match="above the largest"):
        noise.sample_discrete_laplace(NoiseSource(seed=0), 1, epsilon=513.0)
    # the binary value of 0.1 is above 1/10, what the ledger charges: the noise uses the float below it
    assert noise.noise_rate(0.1, 1) == Fraction(math.nextafter(0.1, 0)) < Fraction(1, 10)
    assert noise.noise_rate(0.5, 1) == Fraction(1, 2)


def test_metadata_names_the_sampler_and_privacy_follows_the_source():
    rng = np.random.default_rng(0)
    x = np.r_[rng.normal(500, 30, 2000), rng.uniform(0, 2000, 300)]
    y = np.r_[rng.normal(500, 30, 2000), rng.uniform(0, 2000, 300)]
    kw = {"epsilon": 1.0, "radius_m": 50, "min_points": 20, "domain": (0, 0, 2000, 2000),
          "domain_crs": "EPSG:32615"}
    private = dpgeo.dbscan_spans((x, y, "EPSG:32615"), **kw).metadata
    assert private["differentially_private"] is True and private["delta"] == 0
    assert private["sampler"] == ("discrete Laplace, exact integer inverse-CDF sampler; "
                                  "ChaCha20 CSPRNG keyed from os.urandom")
    seeded = dpgeo.dbscan_spans((x, y, "EPSG:32615"), seed=3, **kw).metadata
    assert seeded["differentially_private"] is False and "seed" in seeded["not_private_reasons"][0]
    assert "fixed test seed" in seeded["sampler"]
    again = dpgeo.dbscan_spans((x, y, "EPSG:32615"), seed=3, **kw)
    assert again.metadata["n_span_cells"] == seeded["n_span_cells"]
    em = dpgeo.wavecluster((x, y, "EPSG:32615"), method="privthr-em", epsilon=1.0, cell_m=50,
                           domain=(0, 0, 2000, 2000), domain_crs="EPSG:32615").metadata
    assert em["differentially_private"] is True and em["delta"] == 0
    assert "exponential mechanism, exact rejection sampler" in em["sampler"]
    assert em["not_private_reasons"] == []
