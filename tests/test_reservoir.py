"""The per-person cap while streaming (reservoir) and from per-cell counts (Dask): the law of cap_per_person.

Each statistical test below uses a χ² goodness-of-fit test against the exact
law, with the critical value at a false-failure rate of 1e-6 per test (the
value is computed with scipy next to the test).
"""

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from dpgeo.contribution import cap_per_person
from dpgeo.counting import reservoir as res_mod
from dpgeo.counting.reservoir import PersonReservoir, cap_grouped_counts

FALSE_FAILURE = 1e-6


def _stream(reservoir, person, cell, batch, rng):
    a = 0
    while a < person.size:
        b = min(person.size, a + int(rng.integers(1, batch + 1)))
        reservoir.add(person[a:b], cell[a:b])
        a = b


@settings(max_examples=40, deadline=None)
@given(n=st.integers(0, 300), persons=st.integers(1, 30), k=st.integers(1, 6), batch=st.integers(1, 50),
       seed=st.integers(0, 2**32 - 1), prune=st.integers(1, 64))
def test_reservoir_keeps_exactly_what_cap_per_person_keeps(n, persons, k, batch, seed, prune):
    """Same generator state → the same kept points, whatever the batches and the prune schedule."""
    old = res_mod._MIN_PRUNE
    res_mod._MIN_PRUNE = prune
    try:
        r = np.random.default_rng(seed)
        person = r.integers(0, persons, n).astype(str).astype(object)
        cell = np.arange(n, dtype=np.int64)  # one cell per point: the kept set is visible
        want = cap_per_person(person, k, np.random.default_rng(seed + 1)) if n else np.zeros(0, bool)
        res = PersonReservoir(k, np.random.default_rng(seed + 1))
        _stream(res, person, cell, batch, np.random.default_rng(seed + 2))
        kept = res.result()
        assert sorted(kept.cell_id.tolist()) == np.flatnonzero(want).tolist()
        assert kept.n_dropped == n - int(want.sum())
    finally:
        res_mod._MIN_PRUNE = old


def test_reservoir_draws_a_uniform_k_subset(monkeypatch):
    """30,000 persons with 4 points each, K = 2, streamed in small interleaved batches with frequent prunes:
    each of the 6 possible kept pairs must have probability 1/6 (χ², 5 degrees of freedom)."""
    monkeypatch.setattr(res_mod, "_MIN_PRUNE", 5000)
    n_person, per, k = 30_000, 4, 2
    rng = np.random.default_rng(2024)
    person = np.repeat(np.arange(n_person), per)
    cell = np.arange(n_person * per, dtype=np.int64)  # cell = 4·person + index of the point
    order = rng.permutation(person.size)  # a person's points arrive in different batches
    res = PersonReservoir(k, np.random.default_rng(7))
    _stream(res, person[order], cell[order], 997, rng)
    kept = np.sort(res.result().cell_id)
    assert kept.size == n_person * k
    pairs = (kept % per).reshape(n_person, k)  # the two kept indices of each person, sorted
    subsets = list(itertools.combinations(range(per), k))
    code = {s: i for i, s in enumerate(subsets)}
    observed = np.bincount([code[tuple(p)] for p in pairs.tolist()], minlength=len(subsets))
    expected = np.full(len(subsets), n_person / len(subsets))
    chi2 = float(((observed - expected) ** 2 / expected).sum())
    critical = stats.chi2.isf(FALSE_FAILURE, len(subsets) - 1)  # ≈ 35.9
    assert chi2 < critical, (observed, chi2)


def _mvh_pmf(counts, k):
    """Outcomes and probabilities of a multivariate hypergeometric draw of k from the given counts."""
    total = math.comb(sum(counts), k)
    outs, probs = [], []
    for o in itertools.product(*[range(c + 1) for c in counts]):
        if sum(o) == k:
            outs.append(o)
            probs.append(math.prod(math.comb(c, x) for c, x in zip(counts, o)) / total)
    return outs, np.array(probs)


@pytest.mark.parametrize("counts,k", [((3, 1, 2), 3), ((1, 2, 1, 3, 1, 1, 2), 4)])
def test_cap_from_counts_is_multivariate_hypergeometric(counts, k):
    """The Dask path's cap: a uniformly random k-subset of each person's points, seen per cell
    (χ² against the exact multivariate hypergeometric pmf; outcomes with expectation < 5 pooled)."""
    n_person = 20_000
    m = len(counts)
    codes = np.repeat(np.arange(n_person), m)
    cell = np.tile(np.arange(m), n_person)
    cnt = np.tile(np.asarray(counts), n_person)
    kept = cap_grouped_counts(codes, cell, cnt, k, np.random.default_rng(11)).reshape(n_person, m)
    assert (kept.sum(axis=1) == k).all() and (kept <= np.asarray(counts)).all()
    outs, probs = _mvh_pmf(counts, k)
    index = {o: i for i, o in enumerate(outs)}
    observed = np.bincount([index[tuple(r)] for r in kept.tolist()], minlength=len(outs)).astype(float)
    expected = probs * n_person
    small = expected < 5
    if small.any():
        observed = np.r_[observed[~small], observed[small].sum()]
        expected = np.r_[expected[~small], expected[small].sum()]
    chi2 = float(((observed - expected) ** 2 / expected).sum())
    assert chi2 < stats.chi2.isf(FALSE_FAILURE, expected.size - 1), chi2


def test_cap_from_counts_keeps_everything_under_the_cap():
    kept = cap_grouped_counts(np.array([0, 0, 1, 2, 2]), np.array([1, 2, 1, 1, 3]), np.array([1, 1, 5, 2, 2]), 3,
                              np.random.default_rng(0))
    assert kept[:2].tolist() == [1, 1] and kept[2] == 3 and kept[3:].sum() == 3
