"""Compare a private cluster layer with the non-private clustering of the same data.

**For the data owner only.** :func:`compare` runs the private mechanism
(DP-DBSCAN spans or DP WaveCluster) *and* its non-private counterpart on the
raw points, and reports how far apart they are: agreement of the point
labels, number and coverage of the clusters, accuracy of the released
counts, and a side-by-side map. Everything it returns and draws is computed
from the exact private data, so **the report is not differentially private
and must not be published or shared** — it answers "how much worse is the
private map than the real one?" before a budget is chosen.

Two more cautions follow from the same fact:

* the private layer made here is one draw of the mechanism; :func:`compare`
  does not write it anywhere. Publish a layer made by a separate run;
* choosing ε or the parameters by looking at these measures uses the private
  data. Do it on data you will not publish from (an earlier year, a similar
  city), or accept that the selection itself is outside the guarantee.

The non-private references are

* ``algorithm="spans"``: scikit-learn's DBSCAN with the same radius and
  MinPts on the points inside the study area (a point is labelled by its
  DBSCAN cluster, 0 = noise); the private labels are the span cell each point
  falls in (as in Qiu & Yi's evaluation);
* ``algorithm="wavecluster"``: exact WaveCluster (``method="exact"``) on the
  same grid, wavelet and percentile;
* ``algorithm="kmeans"`` (DP k-means, :mod:`dpgeo.mechanisms.kmeans`),
  ``"eppkm"`` and ``"diffhwt"``: scikit-learn's k-means with the same ``k``
  on the points inside the study area; a point's private label is its
  Voronoi cell (k-means, EPP-KM) or its cluster in k-means on the published
  DiffHWT rows.

``"eppkm"`` (:mod:`dpgeo.mechanisms.eppkm`) and ``"diffhwt"``
(:mod:`dpgeo.mechanisms.diffhwt`) are comparison systems from the literature
that are **NOT differentially private** under dpgeo's neighbouring relation;
the report says so next to their numbers (``method_differentially_private``
and ``method_not_private_reasons``), and their results cannot be written as
layers.

Examples
--------
>>> import warnings, numpy as np, dpgeo
>>> from dpgeo.compare import compare
>>> rng = np.random.default_rng(0)
>>> x = np.r_[rng.normal(500, 30, 3000), rng.uniform(0, 2000, 500)]
>>> y = np.r_[rng.normal(500, 30, 3000), rng.uniform(0, 2000, 500)]
>>> with warnings.catch_warnings():
...     warnings.simplefilter("ignore", dpgeo.NotPrivateWarning)
...     rep = compare((x, y, "EPSG:32615"), algorithm="spans", epsilon=1.0, radius_m=50, min_points=20,
...                   domain=(0, 0, 2000, 2000), domain_crs="EPSG:32615", seed=1)
>>> rep.measures["n_clusters_reference"], rep.measures["n_clusters_private"]
(1, 1)
>>> rep.measures["ari"] > 0.8
True
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import shapely

from ..errors import DpgeoError, NotPrivateWarning, ParameterError
from ..release import Release
from .figure import _draw, check_png_path
from .report import ALGORITHMS, NOT_DP_ALGORITHMS, NOT_PRIVATE_NOTICE, CompareReport  # noqa: F401 (public names)

__all__ = ["compare", "CompareReport", "NOT_PRIVATE_NOTICE", "check_png_path"]
#: Largest number of points the non-private DBSCAN reference is run on (its memory grows with the
#: number of neighbours of every point).
DEFAULT_REFERENCE_MAX_POINTS = 500_000
#: Points used for the classification measures (OCM, 2CE) and drawn on the map, at most.
_MAX_CLASSIFY_POINTS = 200_000


def _check_params(algorithm, epsilon, params, domain, domain_crs, crs):
    """Validate every public parameter, against the algorithm's declaration, before the data is read."""
    from ..domain import as_study_area
    from ..pipeline.run import public_plan
    from .systems import COMPARED, required

    if algorithm not in ALGORITHMS:
        raise ParameterError(f"algorithm must be one of {', '.join(ALGORITHMS)}, got {algorithm!r}")
    mech = COMPARED[algorithm]
    allowed = [p.name for p in mech.params] + (["sensitivity"] if mech.fronts != {"compare"} else [])
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        raise ParameterError(f"unknown parameter(s) for algorithm {algorithm!r}: {', '.join(unknown)}; "
                             f"accepted: {', '.join(allowed)}")
    for p in required(algorithm):  # (the non-private reference may need more than the mechanism)
        if params.get(p.name) is None:
            raise ParameterError(f"algorithm {algorithm!r} needs {p.name}, the {p.title.lower()} ({p.cli_flag})")
    if algorithm == "wavecluster" and params.get("method", "privthr") == "exact":
        raise ParameterError("method must be one of privthr, privthr-em, privqt, baseline (the private method "
                             "compared with exact WaveCluster), got 'exact'")
    if epsilon is None and algorithm != "eppkm":
        raise ParameterError(f"algorithm {algorithm!r} needs epsilon, the privacy budget (--epsilon)")
    area = as_study_area(domain, domain_crs=domain_crs, working_crs=crs)
    sensitivity = params.get("sensitivity", 1)
    values = {k: v for k, v in params.items() if k != "sensitivity"}
    if mech.fronts == {"compare"}:  # a comparison system: its parameters only
        mech.validate(values)
    else:  # the grid, the noise bounds and the memory of the run (dpgeo.resources)
        public_plan(mech, values, area, epsilon=epsilon, sensitivity=sensitivity)
    return area


def compare(points, *, algorithm: str = "spans", epsilon: float | None = None, domain=None, domain_crs=None,
            crs=None, input_crs=None, seed: int | None = None, png=None, progress=None,
            reference_max_points: int = DEFAULT_REFERENCE_MAX_POINTS, **params) -> CompareReport:
    """Run the private mechanism and its non-private counterpart on the same points and compare them.

    **The result is not private** (see the module notes): it reads the exact
    data, and a :class:`~dpgeo.errors.NotPrivateWarning` is always raised.

    Parameters
    ----------
    points : GeoDataFrame, GeoSeries, str, tuple or PointTable
        The private points, as for :func:`dpgeo.dbscan_spans`.
    algorithm : {"spans", "wavecluster", "kmeans", "eppkm", "diffhwt"}
        DP-DBSCAN spans against scikit-learn's DBSCAN, DP WaveCluster
        against exact WaveCluster, or one of the k-means family against
        scikit-learn's k-means: DP k-means, and the comparison systems
        EPP-KM and DiffHWT, which are **not differentially private** (the
        report says so).
    epsilon : float
        Privacy budget ε of the private run (DiffHWT: the ε its paper
        claims). Not used by EPP-KM, which adds no noise.
    domain, domain_crs, crs, input_crs
        The public study area, the working CRS and the CRS of an input that
        declares none, as for :func:`dpgeo.dbscan_spans`.
    seed : int, optional
        Fixed seed of the private run (reproducible comparisons, tests).
    png : str or os.PathLike, optional
        Write a side-by-side map (reference left, private right) to this
        ``.png`` file, atomically. Needs matplotlib.
    progress : callable, optional
        ``progress(fraction, message)`` between stages.
    reference_max_points : int
        ``spans`` only: refuse to run scikit-learn's DBSCAN on more points
        than this (its memory grows with every point's number of
        neighbours); compare on a sample of the data instead.
    **params
        The algorithm's own parameters. ``spans``: ``radius_m``,
        ``min_points`` (both required), ``beta``, ``eta``, ``histogram``,
        ``gamma``, ``sensitivity``. ``wavecluster``: ``method`` (default
        ``"privthr"``), exactly one of ``cell_m``/``grid_size``,
        ``percentile``, ``wavelet``, ``mode``, ``count_split``,
        ``count_cap``, ``n_public``, ``k_rule``, ``sensitivity``.
        ``kmeans``: ``k`` (required), ``iterations``, ``layer_share``,
        ``count_share``, ``sensitivity``. ``eppkm``: ``k``, ``bags`` (the
        paper's B, default 1). ``diffhwt``: ``k``, ``level`` (the paper's
        s; only 0 for points), ``calibration`` (``"attribute"``, the
        paper's noise, or ``"record"``).

    Returns
    -------
    CompareReport
        ``measures`` holds, for the points inside the study area:
        ``n_points``; ``n_clusters_reference``/``_private``;
        ``clustered_share_reference``/``_private`` (share of points in a
        cluster); ``recall`` (share of reference-clustered points inside a
        private cluster) and ``precision`` (share of private-clustered points
        that the reference clusters); ``ari``, ``ami`` (noise as one more
        cluster) and ``f_measure`` (reference as ground truth). ``spans``
        adds ``count_mae``, ``count_median_rel_error`` and
        ``count_interval_coverage`` (dp_count of each span against the true
        number of points in its cells); ``wavecluster`` adds ``k``,
        ``k_prime``, ``kprime_error``, ``dsg_c``, ``ocm`` and ``two_ce``
        (decision trees on a fixed 90/10 split of at most 200,000 points).
        ``kmeans`` adds the ``count_*`` measures per Voronoi cell;
        ``kmeans`` and ``eppkm`` add ``centroid_shift_m`` (mean distance of
        each private centroid to its matched reference centroid).
    """
    from ..counting import load_points, prepare_points
    from ..declarations.spans import dbscan_spans
    from ..declarations.wavecluster import wavecluster

    params = {k: v for k, v in params.items() if v is not None}
    area = _check_params(algorithm, epsilon, params, domain, domain_crs, crs)
    png_path = check_png_path(png) if png is not None else None
    if algorithm in ("kmeans", "eppkm", "diffhwt"):
        return _compare_kmeans_family(points, algorithm=algorithm, epsilon=epsilon, area=area, crs=crs,
                                      input_crs=input_crs, seed=seed, png_path=png_path, progress=progress,
                                      params=params)
    if algorithm == "spans":
        try:
            import sklearn  # noqa: F401
        except ImportError:
            raise DpgeoError("comparing DP-DBSCAN spans with DBSCAN needs scikit-learn: "
                             "pip install scikit-learn") from None
    warnings.warn(NOT_PRIVATE_NOTICE, NotPrivateWarning, stacklevel=2)
    _step(progress, 0.0, "reading points")
    table = load_points(points, input_crs=input_crs)
    common = dict(domain=area, crs=crs, input_crs=input_crs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NotPrivateWarning)  # announced above, once
        _step(progress, 0.1, "private run")
        if algorithm == "spans":
            priv = dbscan_spans(table, epsilon=epsilon, seed=seed, ledger=False, **common, **params)
        else:
            priv = wavecluster(table, epsilon=epsilon, seed=seed, ledger=False, **common, **params)
        prep = prepare_points(table, **common)
    grid = priv.cells.grid
    inside = grid.assign(prep.x, prep.y, return_mask=True).mask
    x, y = prep.x[inside], prep.y[inside]
    if x.size == 0:
        raise ParameterError("no point lies inside the study area; nothing to compare")
    lab_p = priv.cells.label_points(x, y)
    _step(progress, 0.5, "non-private reference")
    if algorithm == "spans":
        if x.size > reference_max_points:
            raise ParameterError(
                f"{x.size:,} points are more than reference_max_points={reference_max_points:,} for the "
                "non-private DBSCAN reference (its memory grows with every point's neighbours); compare on a "
                "random sample of the points, or raise the limit (--reference-max-points)")
        from sklearn.cluster import DBSCAN

        raw = DBSCAN(eps=float(params["radius_m"]), min_samples=int(params["min_points"])).fit(
            np.column_stack([x, y])).labels_
        lab_r = np.where(raw < 0, 0, raw + 1).astype(np.int64)
        reference = {"name": f"scikit-learn DBSCAN, eps={params['radius_m']:g} m, "
                             f"min_samples={params['min_points']}", "algorithm": "DBSCAN",
                     "radius_m": float(params["radius_m"]), "min_points": int(params["min_points"])}
        ref_layer = None
    else:
        exact_params = {k: v for k, v in params.items()
                        if k in ("cell_m", "grid_size", "percentile", "wavelet", "mode")}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", NotPrivateWarning)
            ref = wavecluster(table, method="exact", **common, **exact_params)
        lab_r = ref.cells.label_points(x, y)
        reference = {"name": f"exact WaveCluster (same grid, percentile {ref.metadata['percentile']:g})",
                     "algorithm": "WaveCluster", "k": ref.metadata.get("k")}
        ref_layer = ref
    _step(progress, 0.7, "utility measures")
    measures = _measures(algorithm, x, y, lab_r, lab_p, priv, ref_layer)
    rep = CompareReport(algorithm=algorithm, measures=measures, private=priv, reference=reference,
                        reference_labels=lab_r, private_labels=lab_p)
    if png_path is not None:
        _step(progress, 0.85, "drawing the map")
        _draw(png_path, rep, x, y, ref_layer, area)
        rep.png = png_path
    _step(progress, 1.0, "done")
    return rep


def _compare_kmeans_family(points, *, algorithm, epsilon, area, crs, input_crs, seed, png_path, progress,
                           params) -> CompareReport:
    """DP k-means, EPP-KM or DiffHWT against scikit-learn's k-means on the points inside the study area."""
    from ..counting import load_points, prepare_points

    try:
        from sklearn.cluster import KMeans
    except ImportError:
        raise DpgeoError("comparing with k-means needs scikit-learn: pip install scikit-learn") from None
    warnings.warn(NOT_PRIVATE_NOTICE, NotPrivateWarning, stacklevel=3)
    _step(progress, 0.0, "reading points")
    table = load_points(points, input_crs=input_crs)
    prep = prepare_points(table, domain=area, crs=crs, input_crs=input_crs)
    from ..mechanisms.kmeans import _inside

    ok = np.isfinite(prep.x) & np.isfinite(prep.y)
    inside = np.zeros(prep.x.size, dtype=bool)
    inside[ok] = _inside(area.polygon, prep.x[ok], prep.y[ok])
    x, y = prep.x[inside], prep.y[inside]
    k = int(params["k"])
    if x.size < k:
        raise ParameterError(f"only {x.size} point(s) lie inside the study area; k={k} needs at least k")
    _step(progress, 0.1, f"{algorithm} run")
    centroids = None
    if algorithm == "kmeans":
        from ..mechanisms.kmeans import kmeans_layer
        from ..noise import NoiseSource

        res = kmeans_layer(x, y, area=area, k=k, epsilon=epsilon, rng=NoiseSource(seed),
                           **{n: params[n] for n in ("iterations", "layer_share", "count_share", "sensitivity")
                              if n in params})
        md = dict(res.metadata)
        layer, lab_p, centroids = res.layer, res.label_points(x, y), res.centroids
    elif algorithm == "eppkm":
        from ..mechanisms.eppkm import eppkm
        from ..mechanisms.kmeans import voronoi_cells

        res = eppkm(x, y, K=k, B=int(params.get("bags", 1)), rng=seed)
        md = dict(res.metadata, epsilon=None)
        lab_p, centroids = res.labels, res.centroids
        layer = _voronoi_frame(voronoi_cells(np.unique(centroids, axis=0), area.polygon), area.crs)
    else:
        from ..mechanisms.diffhwt import diffhwt_points

        rel = diffhwt_points(x, y, area=area, epsilon=epsilon, s=int(params.get("level", 0)),
                             sensitivity=params.get("calibration", "attribute"), rng=seed)
        md = dict(rel.metadata, k=k)
        lab_p = np.zeros(x.size, dtype=np.int64)
        lab_p[rel.rows] = rel.cluster(k, rng=seed)
        layer = None
    md.setdefault("working_crs", area.crs.to_string())
    priv = Release(layer=layer, metadata=md, cells=None)
    _step(progress, 0.5, "non-private reference")
    ref = KMeans(n_clusters=k, n_init=10, random_state=0).fit(np.column_stack([x, y]))
    lab_r = ref.labels_.astype(np.int64) + 1
    reference = {"name": f"scikit-learn k-means, k={k}, n_init=10", "algorithm": "k-means", "k": k}
    _step(progress, 0.7, "utility measures")
    from .. import evaluation as ev

    m: dict[str, Any] = {
        "n_points": int(x.size),
        "n_clusters_reference": int(np.unique(lab_r).size),
        "n_clusters_private": int(np.unique(lab_p[lab_p > 0]).size),
        "clustered_share_reference": 1.0,
        "clustered_share_private": float((lab_p > 0).mean()),
        "recall": float((lab_p > 0).mean()),
        "precision": 1.0,
        "ari": ev.adjusted_rand_index(lab_r, lab_p),
        "ami": ev.adjusted_mutual_info(lab_r, lab_p),
        "f_measure": ev.f_measure(lab_r, lab_p),
    }
    if algorithm == "kmeans":
        ids = layer["cluster_id"].to_numpy(np.int64)
        if ids.size:
            true = np.bincount(lab_p, minlength=int(ids.max()) + 1)[ids]
            dp = layer["dp_count"].to_numpy(float)
            lo, hi = layer["dp_count_low"].to_numpy(float), layer["dp_count_high"].to_numpy(float)
            m["count_mae"] = float(np.mean(np.abs(dp - true)))
            m["count_median_rel_error"] = float(np.median(np.abs(dp - true) / np.maximum(true, 1)))
            m["count_interval_coverage"] = float(np.mean((lo <= true) & (true <= hi)))
        else:  # pragma: no cover - the Voronoi cells cover the study area
            m["count_mae"] = m["count_median_rel_error"] = m["count_interval_coverage"] = float("nan")
    if centroids is not None:
        from scipy.optimize import linear_sum_assignment

        d = np.hypot(centroids[:, None, 0] - ref.cluster_centers_[None, :, 0],
                     centroids[:, None, 1] - ref.cluster_centers_[None, :, 1])
        r_, c_ = linear_sum_assignment(d)
        m["centroid_shift_m"] = float(d[r_, c_].mean())
    rep = CompareReport(algorithm=algorithm, measures=m, private=priv, reference=reference,
                        reference_labels=lab_r, private_labels=lab_p)
    if png_path is not None:
        _step(progress, 0.85, "drawing the map")
        _draw(png_path, rep, x, y, None, area)
        rep.png = png_path
    _step(progress, 1.0, "done")
    return rep


def _voronoi_frame(cells, crs):
    import geopandas as gpd

    keep = ~shapely.is_empty(cells)
    return gpd.GeoDataFrame({"cluster_id": np.arange(1, cells.size + 1)[keep]},
                            geometry=gpd.GeoSeries(cells[keep], crs=crs), crs=crs)


def _step(cb, frac, msg):
    if cb is not None:
        cb(float(frac), msg)


def _measures(algorithm, x, y, lab_r, lab_p, priv, ref_layer) -> dict:
    from .. import evaluation as ev

    n = int(x.size)
    in_r, in_p = lab_r > 0, lab_p > 0
    m: dict[str, Any] = {
        "n_points": n,
        "n_clusters_reference": int(np.unique(lab_r[in_r]).size) if ref_layer is None
        else int(ref_layer.metadata["n_clusters"]),
        "n_clusters_private": int(priv.metadata["n_clusters"]),
        "clustered_share_reference": float(in_r.mean()),
        "clustered_share_private": float(in_p.mean()),
        "recall": float((in_r & in_p).sum() / in_r.sum()) if in_r.any() else float("nan"),
        "precision": float((in_r & in_p).sum() / in_p.sum()) if in_p.any() else float("nan"),
        "ari": ev.adjusted_rand_index(lab_r, lab_p),
        "ami": ev.adjusted_mutual_info(lab_r, lab_p),
        "f_measure": ev.f_measure(lab_r, lab_p),
    }
    if algorithm == "spans":
        layer = priv.layer
        if len(layer):
            ids = layer["cluster_id"].to_numpy(np.int64)
            true = np.bincount(lab_p, minlength=int(ids.max()) + 1)[ids]
            dp = layer["dp_count"].to_numpy(float)
            lo, hi = layer["dp_count_low"].to_numpy(float), layer["dp_count_high"].to_numpy(float)
            m["count_mae"] = float(np.mean(np.abs(dp - true)))
            m["count_median_rel_error"] = float(np.median(np.abs(dp - true) / np.maximum(true, 1)))
            m["count_interval_coverage"] = float(np.mean((lo <= true) & (true <= hi)))
        else:
            m["count_mae"] = m["count_median_rel_error"] = m["count_interval_coverage"] = float("nan")
    else:
        k = ref_layer.metadata.get("k")
        kp = priv.metadata.get("k_prime")
        m["k"] = None if k is None else int(k)
        m["k_prime"] = None if kp is None else int(kp)
        m["kprime_error"] = float(ev.kprime_error(k, kp)) if k and kp is not None else float("nan")
        m["dsg_c"] = (ev.dsg_c(ref_layer.cells.label_grid(), priv.cells.label_grid())
                      if ref_layer.metadata["n_clusters"] else float("nan"))
        sel = np.arange(n)
        if n > _MAX_CLASSIFY_POINTS:
            sel = np.sort(np.random.default_rng(0).choice(n, _MAX_CLASSIFY_POINTS, replace=False))
        if sel.size >= 20:
            c = ev.classification_dissimilarity(x[sel], y[sel], lab_r[sel], lab_p[sel], noise="drop", seed=0)
            m["ocm"], m["two_ce"] = c["ocm"], c["two_ce"]
        else:
            m["ocm"] = m["two_ce"] = float("nan")
    return m
