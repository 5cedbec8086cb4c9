"""Clustering first, then classification (the DP WaveCluster paper's protocol for OCM and 2CE)."""

from __future__ import annotations

import numbers

import numpy as np

from ..errors import ParameterError
from ._checks import _check_seed, _coords, _int_array, _label_pair, _require_sklearn
from .wavecluster_measures import ocm, two_ce

__all__ = ["split_train_test", "cluster_then_classify", "classification_dissimilarity"]


def split_train_test(n_points: int, *, test_fraction: float = 0.1, seed: int = 0):
    """Split point indices at random into a training and a test part.

    Parameters
    ----------
    n_points : int, >= 2
        Number of points.
    test_fraction : float in (0, 1), default 0.1
        Share of points in the test part (the paper's 10 %). Rounded to the
        nearest count, with at least one point on each side.
    seed : int, default 0
        Seed of the permutation (this is evaluation, not a privacy
        mechanism, so a fixed seed is fine).

    Returns
    -------
    train_index, test_index : numpy.ndarray of int64
        Sorted, disjoint, together ``0 .. n_points - 1``.

    Examples
    --------
    >>> train, test = split_train_test(20, seed=1)
    >>> len(train), len(test)
    (18, 2)
    """
    if (isinstance(n_points, bool) or not isinstance(n_points, (numbers.Integral, np.integer))
            or n_points < 2):
        raise ParameterError(f"n_points must be an integer >= 2, got {n_points!r}")
    if not (isinstance(test_fraction, numbers.Real) and 0 < test_fraction < 1):
        raise ParameterError(f"test_fraction must be strictly between 0 and 1, got {test_fraction!r}")
    seed = _check_seed(seed)
    n = int(n_points)
    n_test = min(max(int(round(n * float(test_fraction))), 1), n - 1)
    perm = np.random.default_rng(seed).permutation(n)
    return np.sort(perm[n_test:]).astype(np.int64), np.sort(perm[:n_test]).astype(np.int64)


def cluster_then_classify(train_x, train_y, train_labels, test_x, test_y, *,
                          noise: str = "class", seed: int = 0, max_depth: int | None = None):
    """Train a decision tree on labelled training points and classify test points.

    The classifier is :class:`sklearn.tree.DecisionTreeClassifier` with the
    entropy (information gain) criterion on the features ``(x, y)``. The DP
    WaveCluster paper used C4.5; scikit-learn's tree is CART with the
    entropy criterion (binary splits, no gain ratio, no pruning by
    default), the closest widely available substitute.

    Parameters
    ----------
    train_x, train_y : array_like of float, shape (n_train,)
        Training point coordinates.
    train_labels : array_like of int, shape (n_train,)
        Cluster of each training point (``0`` = noise), e.g. from
        :func:`label_points_by_cells` or :func:`label_points_by_polygons`.
    test_x, test_y : array_like of float, shape (n_test,)
        Test point coordinates.
    noise : {"class", "drop"}, default "class"
        ``"class"``: noise (0) is one more class the tree can predict.
        ``"drop"``: train on clustered points only, so that every test point
        is assigned some cluster; this mirrors the paper, whose training
        data are the significant cells with their cluster labels. If no
        training point is clustered, every test point gets 0.
    seed : int, default 0
        ``random_state`` of the tree (it only breaks ties between splits).
    max_depth : int or None, default None
        Optional depth limit of the tree.

    Returns
    -------
    numpy.ndarray of int64, shape (n_test,)
        Predicted cluster ids.

    Examples
    --------
    >>> cluster_then_classify([0, 1, 10, 11], [0, 0, 0, 0], [1, 1, 2, 2], [0.5, 10.5], [0, 0])
    array([1, 2])
    """
    if noise not in ("class", "drop"):
        raise ParameterError(f"noise must be 'class' or 'drop', got {noise!r}")
    seed = _check_seed(seed)
    if max_depth is not None and (isinstance(max_depth, bool)
                                  or not isinstance(max_depth, numbers.Integral) or max_depth < 1):
        raise ParameterError(f"max_depth must be a positive integer or None, got {max_depth!r}")
    tx, ty = _coords(train_x, train_y)
    sx, sy = _coords(test_x, test_y)
    labels = _int_array(train_labels, "train_labels")
    if labels.size != tx.size:
        raise ParameterError(
            f"train_labels must give one label per training point: {labels.size} labels "
            f"for {tx.size} points"
        )
    if tx.size == 0:
        raise ParameterError("there are no training points")
    if not all(np.all(np.isfinite(v)) for v in (tx, ty, sx, sy)):
        raise ParameterError("training and test coordinates must be finite; drop points with NaN first")
    keep = labels > 0 if noise == "drop" else np.ones(labels.size, dtype=bool)
    if not keep.any() or sx.size == 0:
        return np.zeros(sx.size, dtype=np.int64)
    _require_sklearn("cluster_then_classify")
    from sklearn.tree import DecisionTreeClassifier

    clf = DecisionTreeClassifier(criterion="entropy", random_state=seed, max_depth=max_depth)
    clf.fit(np.column_stack([tx[keep], ty[keep]]), labels[keep])
    return np.asarray(clf.predict(np.column_stack([sx, sy])), dtype=np.int64)


def classification_dissimilarity(x, y, true_labels, private_labels, *, test_fraction: float = 0.1,
                                 seed: int = 0, split=None, noise: str = "class",
                                 max_depth: int | None = None) -> dict:
    """OCM and 2CE by "clustering first, then classification" (Chen, Yu & Chirkova, §6.2).

    The points are split into training and test parts; a true classifier is
    trained on the training points with their reference labels and a
    private classifier with their private labels (see
    :func:`cluster_then_classify`); both classify the test points, and the
    two predictions are compared with :func:`ocm` and :func:`two_ce`.

    Parameters
    ----------
    x, y : array_like of float, shape (n,)
        All point coordinates.
    true_labels, private_labels : array_like of int, shape (n,)
        Reference and private cluster of every point (``0`` = noise); only
        the training points' labels are used.
    test_fraction : float, default 0.1
        Share of test points when ``split`` is not given.
    seed : int, default 0
        Seed of the split and of the trees.
    split : (train_index, test_index), optional
        A split from :func:`split_train_test`. To follow the paper exactly,
        split first, compute both clusterings from the training points
        only, label all points by the resulting regions, then pass the same
        split here.
    noise : {"class", "drop"}, default "class"
        See :func:`cluster_then_classify`.
    max_depth : int or None
        Optional depth limit of the trees.

    Returns
    -------
    dict
        ``{"ocm": float, "two_ce": float, "n_train": int, "n_test": int}``.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> x = rng.uniform(0, 100, 200); y = rng.uniform(0, 100, 200)
    >>> lab = np.where(x < 50, 1, 2)
    >>> classification_dissimilarity(x, y, lab, 3 - lab)["ocm"]
    0.0
    """
    xx, yy = _coords(x, y)
    a, b = _label_pair(true_labels, private_labels, names=("true_labels", "private_labels"))
    if a.size != xx.size:
        raise ParameterError(
            f"the labels must give one label per point: {a.size} labels for {xx.size} points"
        )
    if split is None:
        train, test = split_train_test(xx.size, test_fraction=test_fraction, seed=seed)
    else:
        try:
            train, test = (np.asarray(s, dtype=np.int64).reshape(-1) for s in split)
        except (TypeError, ValueError) as exc:
            raise ParameterError(
                "split must be a pair (train_index, test_index) of integer arrays"
            ) from exc
        for part in (train, test):
            if part.size and (part.min() < 0 or part.max() >= xx.size):
                raise ParameterError(f"split indices must lie in 0 .. {xx.size - 1}")
        if train.size == 0 or test.size < 2:
            raise ParameterError("split needs at least 1 training point and 2 test points")
    kw = dict(noise=noise, seed=seed, max_depth=max_depth)
    pred_t = cluster_then_classify(xx[train], yy[train], a[train], xx[test], yy[test], **kw)
    pred_p = cluster_then_classify(xx[train], yy[train], b[train], xx[test], yy[test], **kw)
    return {
        "ocm": ocm(pred_t, pred_p),
        "two_ce": two_ce(pred_t, pred_p),
        "n_train": int(train.size),
        "n_test": int(test.size),
    }
