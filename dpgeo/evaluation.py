"""Utility measures for comparing a private cluster layer with a reference.

These functions are for **evaluation only**: for benchmarks on labelled data
and for a data owner who wants to compare, on their own machine, a private
layer with the clustering of the raw data. They read exact labels and exact
point positions, release nothing, and are never called by the private
pipeline. Their results describe the private data and must not be published
as if they were differentially private.

Three groups of measures are offered.

*Point labelling.* A cluster layer is a set of regions (grid cells or
polygons). :func:`label_points_by_cells` and :func:`label_points_by_polygons`
give each point the id of the region it falls in, ``0`` (noise) outside
every region, which is how the DP-DBSCAN paper (Qiu & Yi, §8) scores its
spans.

*Partition agreement on points.* :func:`adjusted_rand_index` and
:func:`adjusted_mutual_info` (the measures of the DP-DBSCAN paper, §8, from
scikit-learn) and :func:`f_measure` (the F-measure the DP WaveCluster paper
compares against, §7.3).

*The DP WaveCluster measures* (Chen, Yu & Chirkova, §6 and §7.2):
:func:`dsg_c` (dissimilarity of significant grids and clusters, with the
Hungarian method), :func:`ocm` and :func:`two_ce` (dissimilarity of two
classifiers' predictions; :func:`classification_dissimilarity` runs the
whole "clustering first, then classification" protocol with an entropy
decision tree) and :func:`kprime_error` (relative error ``|k' - k| / k`` of
the significance rank).

Label conventions: labels are non-negative integers and ``0`` means noise
(no cluster); the ids of the clusters themselves are arbitrary. scikit-learn
is imported only by the functions that need it (:func:`adjusted_rand_index`,
:func:`adjusted_mutual_info` and the classification helpers).

Examples
--------
>>> import numpy as np
>>> true = np.array([1, 1, 2, 2, 0])
>>> found = np.array([5, 5, 7, 7, 0])   # same partition, other ids
>>> float(f_measure(true, found))
1.0
>>> float(two_ce(true, found))
0.0
"""

from __future__ import annotations

import numbers

import numpy as np
from scipy.optimize import linear_sum_assignment

from .errors import ParameterError

__all__ = [
    "label_points_by_cells",
    "label_points_by_polygons",
    "adjusted_rand_index",
    "adjusted_mutual_info",
    "f_measure",
    "dsg_c",
    "ocm",
    "two_ce",
    "kprime_error",
    "split_train_test",
    "cluster_then_classify",
    "classification_dissimilarity",
]

_NOISE_MODES = ("cluster", "singletons")


# ---------------------------------------------------------------------------
# validation helpers


def _coords(x, y):
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    if x.ndim != 1 or y.ndim != 1:
        raise ParameterError(
            f"x and y must be 1-D arrays of coordinates, got shapes {x.shape} and {y.shape}"
        )
    if x.shape != y.shape:
        raise ParameterError(
            f"x and y must have the same length, got {x.size} and {y.size}"
        )
    return x, y


def _int_array(a, name: str, *, ndim: int | None = 1) -> np.ndarray:
    """Return ``a`` as an int64 array of non-negative integers (0 = noise)."""
    arr = np.asarray(a)
    if ndim is not None and arr.ndim != ndim:
        raise ParameterError(f"{name} must be a {ndim}-D array, got shape {arr.shape}")
    if arr.dtype.kind == "b":
        raise ParameterError(f"{name} must hold integer cluster ids, not booleans")
    if arr.dtype.kind in "iu":
        out = arr.astype(np.int64, copy=False)
    elif arr.dtype.kind == "f":
        if arr.size and not (np.all(np.isfinite(arr)) and np.all(arr == np.round(arr))):
            raise ParameterError(
                f"{name} must hold integer cluster ids; found non-integer or non-finite values"
            )
        out = arr.astype(np.int64)
    elif arr.size == 0:
        out = arr.astype(np.int64)
    else:
        raise ParameterError(f"{name} must hold integer cluster ids, got dtype {arr.dtype}")
    if out.size and out.min() < 0:
        raise ParameterError(
            f"{name} must hold non-negative cluster ids with 0 for noise; if noise is -1 "
            "(as in scikit-learn's DBSCAN), map it first, e.g. np.where(l < 0, 0, l + 1)"
        )
    return out


def _label_pair(labels_true, labels_pred, *, names=("labels_true", "labels_pred")):
    a = _int_array(labels_true, names[0])
    b = _int_array(labels_pred, names[1])
    if a.shape != b.shape:
        raise ParameterError(
            f"{names[0]} and {names[1]} must label the same points, got lengths "
            f"{a.size} and {b.size}"
        )
    if a.size == 0:
        raise ParameterError(f"{names[0]} and {names[1]} are empty; give at least one point")
    return a, b


def _apply_noise(labels: np.ndarray, noise: str) -> np.ndarray:
    if noise not in _NOISE_MODES:
        raise ParameterError(f"noise must be one of {_NOISE_MODES}, got {noise!r}")
    if noise == "cluster":
        return labels
    is_noise = labels == 0
    n_noise = int(is_noise.sum())
    if n_noise == 0:
        return labels
    out = labels.copy()
    out[is_noise] = labels.max() + 1 + np.arange(n_noise, dtype=np.int64)
    return out


def _encode(a: np.ndarray, b: np.ndarray):
    """Compact codes and the non-zero cells of the contingency table of a, b.

    Returns ``(ua, a_inv, ub, b_inv, i, j, n_ij)`` where ``(i, j, n_ij)`` are
    the non-zero entries of the contingency table (rows = classes of a).
    """
    ua, a_inv = np.unique(a, return_inverse=True)
    ub, b_inv = np.unique(b, return_inverse=True)
    a_inv = a_inv.reshape(-1).astype(np.int64)
    b_inv = b_inv.reshape(-1).astype(np.int64)
    key = a_inv * ub.size + b_inv
    keys, n_ij = np.unique(key, return_counts=True)
    return ua, a_inv, ub, b_inv, keys // ub.size, keys % ub.size, n_ij.astype(np.int64)


def _comb2(n) -> np.ndarray:
    n = np.asarray(n, dtype=np.int64)
    return n * (n - 1) // 2


def _require_sklearn(what: str):
    try:
        import sklearn  # noqa: F401
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            f"{what} needs scikit-learn, which dpgeo does not install by default; "
            "install it with `pip install scikit-learn` (or `pip install dpgeo[test]`)"
        ) from exc


def _check_seed(seed) -> int:
    if isinstance(seed, bool) or not isinstance(seed, (numbers.Integral, np.integer)) or seed < 0:
        raise ParameterError(f"seed must be a non-negative integer, got {seed!r}")
    return int(seed)


# ---------------------------------------------------------------------------
# labelling points by regions


def label_points_by_cells(x, y, *, origin_x: float, origin_y: float, cell_m: float, cell_labels):
    """Label points by the grid cell they fall in.

    Parameters
    ----------
    x, y : array_like of float, shape (n,)
        Point coordinates in metres, in the grid's (projected) CRS.
    origin_x, origin_y : float
        Lower-left corner of the grid, metres.
    cell_m : float
        Cell width in metres (> 0).
    cell_labels : array_like of int, shape (ny, nx)
        Cluster id of every cell, ``0`` for a cell in no cluster. Row ``i``
        is the ``i``-th row of cells from the bottom (y index), column ``j``
        the ``j``-th column from the left (x index): cell ``(i, j)`` covers
        ``[origin_x + j*cell_m, origin_x + (j+1)*cell_m) ×
        [origin_y + i*cell_m, origin_y + (i+1)*cell_m)``.

    Returns
    -------
    numpy.ndarray of int64, shape (n,)
        The id of the cell each point falls in; ``0`` (noise) for points in
        an unlabelled cell, outside the grid or with a non-finite coordinate.

    Examples
    --------
    >>> import numpy as np
    >>> cells = np.array([[1, 0],
    ...                   [0, 2]])           # 2 x 2 cells of 10 m
    >>> label_points_by_cells([1.0, 15.0, 15.0, 25.0], [1.0, 15.0, 1.0, 1.0],
    ...                       origin_x=0.0, origin_y=0.0, cell_m=10.0, cell_labels=cells)
    array([1, 2, 0, 0])
    """
    x, y = _coords(x, y)
    for name, v in (("origin_x", origin_x), ("origin_y", origin_y)):
        if not (isinstance(v, numbers.Real) and np.isfinite(v)):
            raise ParameterError(f"{name} must be a finite number of metres, got {v!r}")
    if not (isinstance(cell_m, numbers.Real) and np.isfinite(cell_m) and cell_m > 0):
        raise ParameterError(f"cell_m must be a finite cell width > 0 metres, got {cell_m!r}")
    grid = _int_array(cell_labels, "cell_labels", ndim=2)
    ny, nx = grid.shape
    fj = np.floor((x - float(origin_x)) / float(cell_m))
    fi = np.floor((y - float(origin_y)) / float(cell_m))
    with np.errstate(invalid="ignore"):
        inside = (fj >= 0) & (fj < nx) & (fi >= 0) & (fi < ny)  # False for NaN
    out = np.zeros(x.shape, dtype=np.int64)
    out[inside] = grid[fi[inside].astype(np.int64), fj[inside].astype(np.int64)]
    return out


def label_points_by_polygons(x, y, polygons, cluster_ids=None, *, include_boundary: bool = True):
    """Label points by the (multi)polygon they fall in.

    Parameters
    ----------
    x, y : array_like of float, shape (n,)
        Point coordinates, in the CRS of ``polygons`` (nothing is
        reprojected here: for a :class:`dpgeo` layer use its working CRS).
    polygons : sequence of shapely geometries, GeoSeries or GeoDataFrame
        One Polygon or MultiPolygon per cluster (missing or empty
        geometries match no point).
    cluster_ids : array_like of int, optional
        Positive id of each polygon. Defaults to the ``cluster_id`` column
        of a GeoDataFrame that has one, otherwise ``1, 2, ..., m``.
    include_boundary : bool, default True
        If True a point on a polygon's boundary belongs to it (shapely's
        ``intersects_xy``, i.e. covered by); if False only interior points
        do (``contains_xy``, i.e. within).

    Returns
    -------
    numpy.ndarray of int64, shape (n,)
        Cluster id of the polygon each point falls in, ``0`` (noise) for
        points in no polygon or with a non-finite coordinate. Where
        polygons overlap (cluster spans may overlap by less than the
        DBSCAN radius), the point gets the first polygon in the given
        order.

    Notes
    -----
    Each polygon is prepared and tested, in one vectorised call, against
    the points inside its bounding box (found by binary search on the
    points sorted by x). The time grows with the number of points in each
    polygon's x-range, summed over polygons: about 3 s for 10^6 points and
    50 fragmented cluster polygons, or 10^5 small ones. The geometries are
    left unprepared, as they were given.

    Examples
    --------
    >>> from shapely.geometry import box
    >>> label_points_by_polygons([0.5, 2.5, 9.0], [0.5, 0.5, 9.0],
    ...                          [box(0, 0, 1, 1), box(2, 0, 3, 1)], [4, 7])
    array([4, 7, 0])
    """
    import shapely

    x, y = _coords(x, y)
    if cluster_ids is None and hasattr(polygons, "columns") and "cluster_id" in polygons.columns:
        cluster_ids = np.asarray(polygons["cluster_id"])
    if hasattr(polygons, "geometry") and hasattr(polygons, "columns"):
        polygons = polygons.geometry
    if isinstance(polygons, shapely.Geometry):
        raise ParameterError(
            "polygons must be a sequence of geometries (one per cluster); wrap a single "
            "polygon in a list"
        )
    geoms = np.empty(len(polygons), dtype=object)
    geoms[:] = list(polygons)
    m = geoms.size
    bad = [
        k for k, g in enumerate(geoms)
        if not (g is None or (isinstance(g, shapely.Geometry)
                              and g.geom_type in ("Polygon", "MultiPolygon")))
    ]
    if bad:
        raise ParameterError(
            f"polygons must be Polygon or MultiPolygon geometries; item {bad[0]} is "
            f"{type(geoms[bad[0]]).__name__}"
        )
    if cluster_ids is None:
        ids = np.arange(1, m + 1, dtype=np.int64)
    else:
        ids = _int_array(cluster_ids, "cluster_ids")
        if ids.size != m:
            raise ParameterError(
                f"cluster_ids must give one id per polygon: {ids.size} ids for {m} polygons"
            )
        if ids.size and ids.min() < 1:
            raise ParameterError("cluster_ids must be positive integers (0 is reserved for noise)")
    out = np.zeros(x.shape, dtype=np.int64)
    finite = np.isfinite(x) & np.isfinite(y)
    if m == 0 or not finite.any():
        return out
    rows = np.flatnonzero(finite)
    # Points sorted by x: the candidates of a polygon are a contiguous slab
    # found by binary search, then filtered by y. Each polygon is prepared
    # and tested against its candidates in one vectorised call; the loop
    # runs over clusters, never over points.
    order = np.argsort(x[rows], kind="stable")
    xs, ys = x[rows][order], y[rows][order]
    done = np.zeros(rows.size, dtype=bool)
    lab = np.zeros(rows.size, dtype=np.int64)
    test = shapely.intersects_xy if include_boundary else shapely.contains_xy
    for k, g in enumerate(geoms):
        if g is None or g.is_empty:
            continue
        minx, miny, maxx, maxy = g.bounds
        lo = int(np.searchsorted(xs, minx, side="left"))
        hi = int(np.searchsorted(xs, maxx, side="right"))
        if lo >= hi:
            continue
        cand = lo + np.flatnonzero(~done[lo:hi] & (ys[lo:hi] >= miny) & (ys[lo:hi] <= maxy))
        if cand.size == 0:
            continue
        was_prepared = bool(shapely.is_prepared(g))
        shapely.prepare(g)
        try:
            hit = cand[test(g, xs[cand], ys[cand])]
        finally:
            if not was_prepared:
                shapely.destroy_prepared(g)
        lab[hit] = ids[k]
        done[hit] = True  # the first polygon in the given order wins
    out[rows[order]] = lab
    return out


# ---------------------------------------------------------------------------
# partition agreement on points


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


# ---------------------------------------------------------------------------
# DP WaveCluster measures


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


# ---------------------------------------------------------------------------
# clustering first, then classification


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
