"""The DP WaveCluster paper's measures: DSG_C, OCM, 2CE and the relative error of k'."""

from __future__ import annotations

import numpy as np
from scipy.optimize import linear_sum_assignment

from ..errors import ParameterError
from ._checks import _comb2, _encode, _int_array, _label_pair

__all__ = ["dsg_c", "ocm", "two_ce", "kprime_error"]


def dsg_c(true_cells, private_cells) -> float:
    """DSG_C: dissimilarity of significant grid cells and clusters (Chen, Yu & Chirkova, §6.1).

    Each clustering is a set of clusters of grid cells. Clusters of the two
    results are matched one-to-one; matched clusters ``C_i`` (true) and
    ``C_j`` (private) cost their distance ``d = max(|C_i \\ C_j|, |C_j \\
    C_i|)`` and every unmatched cluster costs its number of cells. With
    ``t >= s`` (the paper's case: ``t`` true clusters, ``s`` private ones)
    every private cluster is matched to a distinct true cluster; with
    ``s > t`` (not covered by the paper) every true cluster is matched and
    the ``s - t`` unmatched private clusters cost their cells, the symmetric
    extension. The matching of least total cost ``M_cost`` is found with the
    Hungarian method (:func:`scipy.optimize.linear_sum_assignment`) and

    .. math:: DSG_C = M_{cost} / |T|,

    with ``|T|`` the number of true significant cells.

    Parameters
    ----------
    true_cells, private_cells : array_like of int, same shape
        Cluster id of every cell of one common grid (any shape, e.g.
        ``(ny, nx)``, or 1-D over an enumeration of cells); ``0`` for a cell
        that is not significant.

    Returns
    -------
    float
        0 when the two clusterings are identical up to relabelling; 1 when
        the private result has no cluster; can exceed 1.

    Notes
    -----
    Memory and time grow with ``t * s`` (a dense cost matrix).

    Examples
    --------
    The paper's example: ``C_i = {g1, g3, g5}`` and ``C_j = {g1, g5, g7, g9}``
    are at distance 2, so with ``C_i`` the only true cluster DSG_C = 2 / 3.

    >>> true = [0, 1, 0, 1, 0, 1, 0, 0, 0, 0]     # cells g0 ... g9
    >>> priv = [0, 1, 0, 0, 0, 1, 0, 1, 0, 1]
    >>> round(dsg_c(true, priv), 6)
    0.666667
    """
    a = _int_array(true_cells, "true_cells", ndim=None).reshape(-1)
    b = _int_array(private_cells, "private_cells", ndim=None).reshape(-1)
    if np.shape(true_cells) != np.shape(private_cells):
        raise ParameterError(
            "true_cells and private_cells must label the same grid cells, got shapes "
            f"{np.shape(true_cells)} and {np.shape(private_cells)}"
        )
    n_true_cells = int(np.count_nonzero(a))
    if n_true_cells == 0:
        raise ParameterError(
            "true_cells has no significant cell, so DSG_C (which divides by their number) "
            "is undefined; compare against a reference with at least one cluster"
        )
    ua, a_code = np.unique(a[a > 0], return_inverse=True)
    ub, b_code = np.unique(b[b > 0], return_inverse=True)
    size_a = np.bincount(a_code.reshape(-1), minlength=ua.size).astype(np.int64)
    size_b = np.bincount(b_code.reshape(-1), minlength=ub.size).astype(np.int64)
    t, s = ua.size, ub.size
    if s == 0:
        return 1.0
    both = (a > 0) & (b > 0)
    inter = np.zeros((t, s), dtype=np.int64)
    if both.any():
        ia = np.searchsorted(ua, a[both])
        jb = np.searchsorted(ub, b[both])
        np.add.at(inter, (ia, jb), 1)
    dist = np.maximum(size_a[:, None] - inter, size_b[None, :] - inter)
    # A rectangular assignment matches min(t, s) pairs; the clusters of the
    # larger side left over cost their size. Subtracting that size from the
    # matched entries makes the rectangular optimum the optimum of M_cost.
    if t >= s:
        reduced = dist - size_a[:, None]
        offset = int(size_a.sum())
    else:
        reduced = dist - size_b[None, :]
        offset = int(size_b.sum())
    rows, cols = linear_sum_assignment(reduced)
    m_cost = offset + int(reduced[rows, cols].sum())
    return m_cost / n_true_cells


def ocm(true_pred, private_pred) -> float:
    """OCM: dissimilarity of two classifiers by optimal class matching (Chen, Yu & Chirkova, §6.2).

    The classes predicted for the same test samples by the true classifier
    (``L_t``) and the private one (``L_p``) are matched one-to-one with the
    Hungarian method so as to maximise ``CT``, the number of test samples
    whose two predicted classes form a matched pair; ``OCM = 1 - CT / TT``
    with ``TT`` the number of test samples. Class ids are treated as
    arbitrary, the noise class 0 included (it can be matched to any class).

    Parameters
    ----------
    true_pred, private_pred : array_like of int, shape (n,)
        Classes predicted for the same test samples by the two classifiers.

    Returns
    -------
    float
        In [0, 1); 0 when the predictions agree up to relabelling.

    Examples
    --------
    >>> ocm([1, 1, 2, 2], [5, 5, 5, 6])
    0.25
    """
    a, b = _label_pair(true_pred, private_pred, names=("true_pred", "private_pred"))
    ua, _, ub, _, i, j, n_ij = _encode(a, b)
    table = np.zeros((ua.size, ub.size), dtype=np.int64)
    table[i, j] = n_ij
    rows, cols = linear_sum_assignment(table, maximize=True)
    ct = int(table[rows, cols].sum())
    return 1.0 - ct / a.size


def two_ce(true_pred, private_pred) -> float:
    """2CE: dissimilarity of two classifiers over pairs of test samples (Chen, Yu & Chirkova, §6.2).

    A pair of test samples is classified consistently when both
    classifiers put the two samples in the same class, or both put them in
    different classes. 2CE is the fraction of the ``n (n - 1) / 2`` pairs
    that are not classified consistently (it equals one minus the Rand
    index of the two predictions). Computed from the contingency table, in
    ``O(n log n)``, not by enumerating pairs.

    Parameters
    ----------
    true_pred, private_pred : array_like of int, shape (n,), n >= 2
        Classes predicted for the same test samples by the two classifiers.

    Returns
    -------
    float
        In [0, 1]; 0 when the predictions agree up to relabelling.

    Examples
    --------
    >>> round(two_ce([1, 1, 2, 2], [5, 5, 5, 6]), 6)   # 3 of the 6 pairs differ
    0.5
    """
    a, b = _label_pair(true_pred, private_pred, names=("true_pred", "private_pred"))
    if a.size < 2:
        raise ParameterError("two_ce needs at least 2 test samples (it compares pairs)")
    ua, a_inv, ub, b_inv, _, _, n_ij = _encode(a, b)
    together_both = int(_comb2(n_ij).sum())
    together_a = int(_comb2(np.bincount(a_inv)).sum())
    together_b = int(_comb2(np.bincount(b_inv)).sum())
    inconsistent = together_a + together_b - 2 * together_both
    n = a.size
    return inconsistent / (n * (n - 1) // 2)


def kprime_error(k_true, k_found):
    """Relative error ``|k' - k| / k`` of the significance rank (Chen, Yu & Chirkova, §7.2).

    In WaveCluster, ``k = (1 - p) |L|`` is the number of positive wavelet
    values kept as significant for the density percentile ``p``; a private
    variant finds ``k'`` instead. (``k`` is a number of values, i.e. of
    cells, not a number of clusters.)

    Parameters
    ----------
    k_true : float or array_like, > 0
        The exact rank ``k``.
    k_found : float or array_like, >= 0
        The private rank(s) ``k'``; broadcast against ``k_true``.

    Returns
    -------
    float or numpy.ndarray
        A float for scalar inputs, otherwise an array.

    Examples
    --------
    >>> kprime_error(144, 141)   # DS2 of the paper, PrivTHR at epsilon = 1
    0.020833333333333332
    """
    k = np.asarray(k_true, dtype=float)
    kp = np.asarray(k_found, dtype=float)
    if not (np.all(np.isfinite(k)) and np.all(k > 0)):
        raise ParameterError("k_true must be finite and > 0 (the error is relative to it)")
    if not (np.all(np.isfinite(kp)) and np.all(kp >= 0)):
        raise ParameterError("k_found must be finite and >= 0")
    err = np.abs(kp - k) / k
    return float(err) if err.ndim == 0 else err
