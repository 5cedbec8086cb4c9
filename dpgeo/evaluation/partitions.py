"""Partition agreement on points: ARI, AMI (the DP-DBSCAN paper's measures) and the F-measure."""

from __future__ import annotations

import numpy as np

from ..errors import ParameterError
from ._checks import _apply_noise, _comb2, _encode, _label_pair, _require_sklearn

__all__ = ["adjusted_rand_index", "adjusted_mutual_info", "f_measure"]


def adjusted_rand_index(labels_true, labels_pred, *, noise: str = "cluster") -> float:
    """Adjusted Rand index (Hubert & Arabie 1985) of two labellings of the same points.

    A thin wrapper over :func:`sklearn.metrics.adjusted_rand_score`, as used
    by the DP-DBSCAN paper (§8).

    Parameters
    ----------
    labels_true, labels_pred : array_like of int, shape (n,)
        Reference and found cluster ids, ``0`` = noise.
    noise : {"cluster", "singletons"}, default "cluster"
        How noise points are scored. ``"cluster"`` treats label 0 as one more
        cluster (the DP-DBSCAN paper's treatment: its labels are passed to
        scikit-learn with noise as a label of its own). ``"singletons"``
        puts every noise point in a cluster of its own, so two noise points
        never count as "together".

    Returns
    -------
    float
        1 for identical partitions, about 0 for independent ones; can be
        negative.

    Examples
    --------
    >>> adjusted_rand_index([1, 1, 2, 2], [3, 3, 1, 1])
    1.0
    """
    a, b = _label_pair(labels_true, labels_pred)
    a, b = _apply_noise(a, noise), _apply_noise(b, noise)
    _require_sklearn("adjusted_rand_index")
    from sklearn.metrics import adjusted_rand_score

    return float(adjusted_rand_score(a, b))


def adjusted_mutual_info(labels_true, labels_pred, *, noise: str = "cluster",
                         average_method: str = "arithmetic") -> float:
    """Adjusted mutual information (Vinh, Epps & Bailey 2010) of two labellings.

    A thin wrapper over :func:`sklearn.metrics.adjusted_mutual_info_score`,
    as used by the DP-DBSCAN paper (§8).

    Parameters
    ----------
    labels_true, labels_pred : array_like of int, shape (n,)
        Reference and found cluster ids, ``0`` = noise.
    noise : {"cluster", "singletons"}, default "cluster"
        Treatment of noise points, as in :func:`adjusted_rand_index`.
        ``"singletons"`` creates one label per noise point, which makes AMI
        slow when there are many thousands of noise points.
    average_method : {"arithmetic", "geometric", "min", "max"}, default "arithmetic"
        Normaliser of the mutual information (scikit-learn's default).

    Returns
    -------
    float
        1 for identical partitions, about 0 for independent ones.

    Examples
    --------
    >>> adjusted_mutual_info([1, 1, 2, 2], [3, 3, 1, 1])
    1.0
    """
    a, b = _label_pair(labels_true, labels_pred)
    a, b = _apply_noise(a, noise), _apply_noise(b, noise)
    if average_method not in ("arithmetic", "geometric", "min", "max"):
        raise ParameterError(
            "average_method must be 'arithmetic', 'geometric', 'min' or 'max', "
            f"got {average_method!r}"
        )
    _require_sklearn("adjusted_mutual_info")
    from sklearn.metrics import adjusted_mutual_info_score

    return float(adjusted_mutual_info_score(a, b, average_method=average_method))


def f_measure(labels_true, labels_pred, *, method: str = "set_matching",
              noise: str = "cluster") -> float:
    """F-measure of a found clustering against a reference clustering.

    Parameters
    ----------
    labels_true, labels_pred : array_like of int, shape (n,)
        Reference and found cluster ids, ``0`` = noise.
    method : {"set_matching", "pair_counting"}, default "set_matching"
        ``"set_matching"`` is the overall F-measure of Larsen & Aone (1999):
        with ``n_ij`` points of true class ``i`` in found cluster ``j``,
        precision ``P_ij = n_ij / |found_j|``, recall ``R_ij = n_ij /
        |true_i|``, ``F_ij = 2 P_ij R_ij / (P_ij + R_ij) = 2 n_ij / (|true_i|
        + |found_j|)``, and

        .. math:: F = \\sum_i \\frac{|true_i|}{n} \\max_j F_{ij}.

        This is the measure built from the clustering membership matrix
        described by the DiffHWT paper (row maxima of ``F_ij`` weighted by
        class size), and the one the DP WaveCluster paper has in mind when
        it says the F-measure "allows one-to-many or many-to-one mapping"
        (every true class picks its best found cluster independently). That
        paper cites the measure through Achtert et al. (2012) without
        printing a formula. It is not symmetric in its arguments.

        ``"pair_counting"`` is the F1 score over pairs of points: a pair is
        positive when both points share a cluster; precision and recall of
        the found positive pairs against the true ones (symmetric).
        If neither labelling has a positive pair the score is 1; if only
        one has, it is 0.
    noise : {"cluster", "singletons"}, default "cluster"
        Treatment of noise points, as in :func:`adjusted_rand_index`.

    Returns
    -------
    float
        In [0, 1]; 1 for identical partitions.

    Examples
    --------
    Class 1 (3 points) is best matched by found cluster 1 (F = 0.8), class
    2 (1 point) by found cluster 2 (F = 2/3):

    >>> round(f_measure([1, 1, 1, 2], [1, 1, 2, 2]), 4)   # 3/4 * 0.8 + 1/4 * 2/3
    0.7667
    """
    if method not in ("set_matching", "pair_counting"):
        raise ParameterError(f"method must be 'set_matching' or 'pair_counting', got {method!r}")
    a, b = _label_pair(labels_true, labels_pred)
    a, b = _apply_noise(a, noise), _apply_noise(b, noise)
    ua, a_inv, ub, b_inv, i, j, n_ij = _encode(a, b)
    size_a = np.bincount(a_inv, minlength=ua.size)
    size_b = np.bincount(b_inv, minlength=ub.size)
    if method == "set_matching":
        f_ij = 2.0 * n_ij / (size_a[i] + size_b[j])
        best = np.zeros(ua.size)
        np.maximum.at(best, i, f_ij)
        return float(np.sum(size_a * best) / a.size)
    together_both = int(_comb2(n_ij).sum())
    together_a = int(_comb2(size_a).sum())
    together_b = int(_comb2(size_b).sum())
    if together_a == 0 and together_b == 0:
        return 1.0
    if together_both == 0:
        return 0.0
    precision = together_both / together_b
    recall = together_both / together_a
    return float(2.0 * precision * recall / (precision + recall))
