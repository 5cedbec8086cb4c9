"""EPP-KM (:mod:`dpgeo.mechanisms.eppkm`): the algorithm, its not-private verdict, and the refusal to publish."""

import math

import numpy as np
import pytest
from scipy import stats

from dpgeo.errors import OutputError, ParameterError
from dpgeo.mechanisms.eppkm import NOT_DP_REASONS, eppkm, membership_delta


def paper_synthetic(seed=0):
    """The paper's synthetic set: 3 clusters of 60 points, sd 1, centred at (0, 0), (5, 0), (4, 4)."""
    rng = np.random.default_rng(seed)
    centres = np.array([[0.0, 0.0], [5.0, 0.0], [4.0, 4.0]])
    X = np.concatenate([rng.normal(c, 1.0, (60, 2)) for c in centres])
    return X, np.repeat([1, 2, 3], 60)


def test_shapes_determinism_and_flags():
    X, _ = paper_synthetic()
    a = eppkm(X[:, 0], X[:, 1], K=3, B=5, rng=1)
    b = eppkm(X, K=3, B=5, rng=1)
    assert a.centroids.shape == (3, 2) and a.labels.shape == (180,)
    assert set(np.unique(a.labels)) <= {1, 2, 3}
    assert np.array_equal(a.centroids, b.centroids) and np.array_equal(a.labels, b.labels)
    md = a.metadata
    assert md["differentially_private"] is False and md["publishable"] is False
    assert md["not_private_reasons"] == NOT_DP_REASONS and md["K"] == 3 and md["B"] == 5
    assert md["membership_delta_lower_bound"] == pytest.approx(1 - math.exp(-5))
    assert a.differentially_private is False
    assert np.array_equal(a.label_points(X[:, 0], X[:, 1]), a.labels)


def test_refuses_to_be_written(tmp_path):
    X, _ = paper_synthetic()
    res = eppkm(X, K=3, B=1, rng=0)
    with pytest.raises(OutputError, match="EPP-KM is NOT differentially private"):
        res.to_file(tmp_path / "eppkm.gpkg")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("kw, match", [(dict(K=0, B=1), "K "), (dict(K=3, B=0), "B "), (dict(K=3, B=1.5), "B "),
                                       (dict(K=500, B=1), "at least K")])
def test_parameter_errors(kw, match):
    X, _ = paper_synthetic()
    with pytest.raises(ParameterError, match=match):
        eppkm(X, **kw)


def test_utility_is_that_of_kmeans():
    """The paper's headline: NMI close to k-means'. Bagging only adds a bootstrap error σ/√(B·N_k)."""
    from sklearn.metrics import normalized_mutual_info_score as nmi

    from dpgeo.mechanisms._lloyd import lloyd

    X, truth = paper_synthetic(3)
    for B in (1, 100):
        res = eppkm(X, K=3, B=B, rng=7)
        C, lab, _ = lloyd(X, 3, np.random.default_rng(7), init="points")  # the same start, no bagging
        assert nmi(truth, res.labels) == pytest.approx(nmi(truth, lab + 1), abs=0.05)
        shift = np.linalg.norm(res.centroids - C, axis=1).max()
        assert shift < 6 / math.sqrt(B * 50)  # 6 sd of the bagged mean of ~60 points with sd ~1.2


def test_membership_attack_shows_it_is_not_dp():
    """A record far from the rest moves the output out of the others' hull exactly when it is drawn.

    ``D'``: 59 points; ``D = D' ∪ {x_r}`` with ``x_r`` farther than ``2·B·N·diam(D')`` from them. The event
    "the centroid's x + y exceeds the largest x + y of D'" has probability ``1 - (1 - 1/N)^(B·N)``
    (``membership_delta``) on ``D`` and 0 on ``D'``: δ is at least that for every ε. The count over 400
    runs is checked against Binomial(400, δ) quantiles at 1e-6.
    """
    rng = np.random.default_rng(0)
    base = rng.normal(0, 1, (59, 2))
    edge = base.sum(axis=1).max()
    runs = 400
    for B in (1, 3):
        far = np.vstack([base, [[1000.0 * B, 1000.0 * B]]])
        hits_with = sum(eppkm(far, K=1, B=B, rng=s).centroids[0].sum() > edge for s in range(runs))
        hits_without = sum(eppkm(base, K=1, B=B, rng=s).centroids[0].sum() > edge for s in range(runs))
        lo, hi = stats.binom.ppf([1e-6, 1 - 1e-6], runs, membership_delta(B, 60))
        assert lo <= hits_with <= hi, (B, hits_with)
        assert hits_without == 0
