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

import math
import os
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import shapely

from .errors import DpgeoError, NotPrivateWarning, OutputError, ParameterError
from .release import Release

__all__ = ["compare", "CompareReport", "NOT_PRIVATE_NOTICE", "check_png_path"]

#: The notice printed with every comparison (and raised as a :class:`NotPrivateWarning`).
NOT_PRIVATE_NOTICE = (
    "NOT PRIVATE: this comparison is computed from the exact private data. It is for the data owner only; "
    "do not publish or share these numbers or the map. Publish only a layer from a separate private run."
)

ALGORITHMS = ("spans", "wavecluster", "kmeans", "eppkm", "diffhwt")
#: Comparison methods whose results are not differentially private (marked so wherever they appear).
NOT_DP_ALGORITHMS = ("eppkm", "diffhwt")
_SPANS_PARAMS = ("radius_m", "min_points", "beta", "eta", "histogram", "gamma", "extent", "sensitivity",
                 "max_dense_cells", "max_false_cells")
_WAVE_PARAMS = ("method", "cell_m", "grid_size", "percentile", "wavelet", "mode", "count_split", "count_cap",
                "n_public", "k_rule", "sensitivity")
_PARAMS = {
    "spans": _SPANS_PARAMS,
    "wavecluster": _WAVE_PARAMS,
    "kmeans": ("k", "iterations", "layer_share", "count_share", "sensitivity"),
    "eppkm": ("k", "bags"),
    "diffhwt": ("k", "level", "calibration"),
}
#: Largest number of points the non-private DBSCAN reference is run on (its memory grows with the
#: number of neighbours of every point).
DEFAULT_REFERENCE_MAX_POINTS = 500_000
#: Points used for the classification measures (OCM, 2CE) and drawn on the map, at most.
_MAX_CLASSIFY_POINTS = 200_000
_MAX_PLOT_POINTS = 100_000


@dataclass
class CompareReport:
    """Result of :func:`compare`. **Not private**: never publish any part of it.

    Attributes
    ----------
    algorithm : str
        One of :data:`ALGORITHMS`.
    measures : dict
        Utility measures (floats and ints), see :func:`compare`.
    private : Release
        The private run that was compared (one draw; not written anywhere).
    reference : dict
        Description of the non-private reference (``name``, parameters).
    reference_labels, private_labels : numpy.ndarray
        Cluster id (0 = noise) of every point inside the study area, by the
        reference and by the private layer.
    png : str or None
        Path of the side-by-side map, if one was written.
    notice : str
        :data:`NOT_PRIVATE_NOTICE`.
    """

    algorithm: str
    measures: dict
    private: Release
    reference: dict
    reference_labels: np.ndarray = field(repr=False)
    private_labels: np.ndarray = field(repr=False)
    png: str | None = None
    notice: str = NOT_PRIVATE_NOTICE

    def text(self) -> str:
        """The report as text, with the not-private notice at the top and the bottom."""
        m = self.measures
        md = self.private.metadata
        bar = "!" * 78
        lines = [bar, _wrap(self.notice), bar, ""]
        if self.algorithm in NOT_DP_ALGORITHMS:
            lines += [_wrap(f"{md['mechanism']} is NOT DIFFERENTIALLY PRIVATE:")]
            lines += [_wrap(r, initial="  - ", subsequent="    ") for r in md["not_private_reasons"]]
            lines.append("")
        if self.algorithm == "kmeans":
            sp = md["epsilon_split"]
            lines.append(f"private : DP k-means, epsilon={md['epsilon']:g} (centroids {sp['centroids_total']:g} over "
                         f"{md['iterations']} iterations, cell counts {sp['layer_counts']:g}), k={md['k']}")
        elif self.algorithm == "eppkm":
            lines.append(f"compared: EPP-KM (NOT differentially private), K={md['K']}, B={md['B']} bags")
        elif self.algorithm == "diffhwt":
            lines.append(f"compared: DiffHWT (NOT differentially private), epsilon={md['epsilon']:g} as in the paper "
                         f"(calibration {md['sensitivity']!r}), s={md['s']}, k-means with k={md['k']} on the "
                         "published rows")
        elif self.algorithm == "spans":
            lines.append(f"private : DP-DBSCAN spans, epsilon={md['epsilon']:g}, radius={md['radius_m']:g} m, "
                         f"MinPts={md['min_points']} (core threshold MinPts+Γ = {md['core_threshold']:.1f}), "
                         f"beta={md['beta']:g}, gamma={md['gamma_method']}")
        else:
            lines.append(f"private : DP WaveCluster {md['method']}, epsilon={md['epsilon']:g}, "
                         f"cell={md['cell_width_m']:.1f} m, percentile={md['percentile']:g}, "
                         f"wavelet={md['wavelet']}")
        lines.append(f"reference (NOT private): {self.reference['name']}")
        lines.append(f"points inside the study area: {m['n_points']:,}")
        lines.append("")
        rows = [
            ("clusters (reference / private)", f"{m['n_clusters_reference']} / {m['n_clusters_private']}"),
            ("share of points in a cluster (reference / private)",
             f"{m['clustered_share_reference']:.1%} / {m['clustered_share_private']:.1%}"),
            ("reference-clustered points inside a private cluster (recall)", _pct(m["recall"])),
            ("private-clustered points that the reference clusters (precision)", _pct(m["precision"])),
            ("adjusted Rand index (1 = same partition, 0 = chance)", f"{m['ari']:.3f}"),
            ("adjusted mutual information", f"{m['ami']:.3f}"),
            ("F-measure (reference as ground truth)", f"{m['f_measure']:.3f}"),
        ]
        if self.algorithm in ("spans", "kmeans"):
            what = "span" if self.algorithm == "spans" else "cell"
            rows += [
                (f"dp_count error: mean |dp_count - true count| per {what}", _num(m["count_mae"], "{:.1f}")),
                (f"dp_count error: median relative error per {what}", _pct(m["count_median_rel_error"])),
                (f"{what}s whose 95% interval holds the true count", _pct(m["count_interval_coverage"])),
            ]
        if self.algorithm in ("kmeans", "eppkm"):
            rows.append(("centroid shift: mean distance to the matched reference centroid (m)",
                         _num(m["centroid_shift_m"], "{:.1f}")))
        if self.algorithm == "wavecluster":
            rows += [
                ("k' relative error |k' - k| / k (significant coefficients)", _pct(m["kprime_error"])),
                ("DSG_C (0 = same cells and clusters)", f"{m['dsg_c']:.3f}"),
                ("OCM (classifier dissimilarity, 0 = same)", _num(m["ocm"], "{:.3f}")),
                ("2CE (pairwise classifier dissimilarity, 0 = same)", _num(m["two_ce"], "{:.4f}")),
            ]
        width = max(len(r[0]) for r in rows)
        lines += [f"{k.ljust(width)} : {v}" for k, v in rows]
        if self.png:
            lines += ["", f"side-by-side map (NOT private): {self.png}"]
        if self.algorithm in NOT_DP_ALGORITHMS:
            lines += ["", _wrap(f"{md['mechanism']}: NOT DIFFERENTIALLY PRIVATE (see above); never publish "
                                "its output.")]
        lines += ["", bar, _wrap(self.notice), bar]
        return "\n".join(lines)

    def to_dict(self) -> dict:
        """JSON-serialisable summary (NaN as ``None``), with the notice. Not private."""
        def clean(v):
            if isinstance(v, float) and math.isnan(v):
                return None
            return v

        md = self.private.metadata
        return {"notice": self.notice, "algorithm": self.algorithm, "reference": self.reference,
                "method_differentially_private": bool(md.get("differentially_private"))
                and self.algorithm not in NOT_DP_ALGORITHMS,
                "method_not_private_reasons": list(md.get("not_private_reasons") or []),
                "measures": {k: clean(v) for k, v in self.measures.items()}, "png": self.png}

    def __str__(self) -> str:
        return self.text()


def _wrap(text, width=78, initial="", subsequent=""):
    import textwrap

    return "\n".join(textwrap.wrap(text, width, initial_indent=initial, subsequent_indent=subsequent))


def _pct(v):
    return "n/a" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.1%}"


def _num(v, f):
    return "n/a" if v is None or (isinstance(v, float) and math.isnan(v)) else f.format(v)


def check_png_path(path) -> str:
    """Fail before reading any data if a PNG cannot be written at ``path``."""
    p = os.fspath(path)
    if not p.lower().endswith(".png"):
        raise OutputError(f"the comparison map is written as PNG; give a path ending in .png, got {p!r}")
    folder = os.path.dirname(os.path.abspath(p))
    if not os.path.isdir(folder):
        raise OutputError(f"output folder {folder!r} does not exist")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise OutputError("writing the comparison map needs matplotlib: pip install matplotlib "
                          "(or dpgeo[plot])") from None
    return p


def _check_params(algorithm, epsilon, params, domain, domain_crs, crs):
    """Validate every public parameter before the data is read."""
    from .domain import as_study_area
    from .pipeline import (
        WAVECLUSTER_METHODS,
        _check_dbscan_params,
        _wavecluster_grid,
        check_epsilon,
        check_int,
    )

    if algorithm not in ALGORITHMS:
        raise ParameterError(f"algorithm must be one of {', '.join(ALGORITHMS)}, got {algorithm!r}")
    if epsilon is None and algorithm != "eppkm":
        raise ParameterError(f"algorithm {algorithm!r} needs epsilon, the privacy budget (--epsilon)")
    allowed = _PARAMS[algorithm]
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        raise ParameterError(f"unknown parameter(s) for algorithm {algorithm!r}: {', '.join(unknown)}; "
                             f"accepted: {', '.join(allowed)}")
    area = as_study_area(domain, domain_crs=domain_crs, working_crs=crs)
    if algorithm == "spans":
        for req in ("radius_m", "min_points"):
            if params.get(req) is None:
                raise ParameterError(f"algorithm 'spans' needs {req} (--{req.replace('_m', '').replace('_', '-')})")
        _check_dbscan_params(epsilon, params["radius_m"], params["min_points"], params.get("beta", 0.05),
                             params.get("eta", 1.0), params.get("histogram", "auto"),
                             params.get("gamma", "laplace"), params.get("sensitivity", 1),
                             params.get("extent", "grown"))
        from .pipeline import noise_preview

        noise_preview(epsilon=epsilon, radius_m=params["radius_m"], min_points=params["min_points"], domain=area,
                      **{n: params[n] for n in ("beta", "eta", "histogram", "gamma", "extent", "sensitivity")
                         if n in params})  # the grid and memory of the run (dpgeo.resources)
    elif algorithm in ("kmeans", "eppkm", "diffhwt"):
        if params.get("k") is None:
            raise ParameterError(f"algorithm {algorithm!r} needs k, the number of clusters (--k)")
        check_int(params["k"], "k (number of clusters)")
        if algorithm == "kmeans":
            from .mechanisms.kmeans import kmeans_plan

            check_epsilon(epsilon)
            kmeans_plan(area.polygon.bounds, k=params["k"], epsilon=epsilon,
                        **{n: params[n] for n in ("iterations", "layer_share", "count_share", "sensitivity")
                           if n in params})
            from .pipeline.kmeans import check_kmeans_plan

            check_kmeans_plan(area, epsilon=epsilon, layer_share=params.get("layer_share"),
                              sensitivity=params.get("sensitivity", 1))
        elif algorithm == "eppkm":
            check_int(params.get("bags", 1), "bags (EPP-KM's number of bootstrap bags B)")
        else:
            from .mechanisms.diffhwt import SENSITIVITIES

            check_epsilon(epsilon)
            if params.get("level", 0) != 0:
                raise ParameterError("DiffHWT on 2-D points has only level s = 0 (the paper decomposes at least "
                                     f"once and n̄ = 2); got level={params['level']!r}")
            if params.get("calibration", "attribute") not in SENSITIVITIES:
                raise ParameterError("calibration must be 'attribute' (the paper's noise) or 'record', got "
                                     f"{params['calibration']!r}")
    else:
        method = params.get("method", "privthr")
        if method == "exact" or method not in WAVECLUSTER_METHODS:
            raise ParameterError("method must be one of privthr, privthr-em, privqt, baseline (the private "
                                 f"method compared with exact WaveCluster), got {method!r}")
        check_epsilon(epsilon)
        check_int(params.get("sensitivity", 1), "sensitivity (points per record)")
        p = params.get("percentile", 60.0)
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not 0 <= p < 100:
            raise ParameterError(f"percentile must be in [0, 100), got {p!r}")
        from .pipeline import wavecluster_count_epsilon

        _wavecluster_grid(area, params.get("cell_m"), params.get("grid_size"),
                          wavecluster_count_epsilon(method, epsilon, params.get("count_split")),
                          params.get("sensitivity", 1))
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
    from .pipeline import dbscan_spans, load_points, prepare_points, wavecluster

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
    from .pipeline import load_points, prepare_points

    try:
        from sklearn.cluster import KMeans
    except ImportError:
        raise DpgeoError("comparing with k-means needs scikit-learn: pip install scikit-learn") from None
    warnings.warn(NOT_PRIVATE_NOTICE, NotPrivateWarning, stacklevel=3)
    _step(progress, 0.0, "reading points")
    table = load_points(points, input_crs=input_crs)
    prep = prepare_points(table, domain=area, crs=crs, input_crs=input_crs)
    from .mechanisms.kmeans import _inside

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
        from .mechanisms.kmeans import kmeans_layer
        from .noise import NoiseSource

        res = kmeans_layer(x, y, area=area, k=k, epsilon=epsilon, rng=NoiseSource(seed),
                           **{n: params[n] for n in ("iterations", "layer_share", "count_share", "sensitivity")
                              if n in params})
        md = dict(res.metadata)
        layer, lab_p, centroids = res.layer, res.label_points(x, y), res.centroids
    elif algorithm == "eppkm":
        from .mechanisms.eppkm import eppkm
        from .mechanisms.kmeans import voronoi_cells

        res = eppkm(x, y, K=k, B=int(params.get("bags", 1)), rng=seed)
        md = dict(res.metadata, epsilon=None)
        lab_p, centroids = res.labels, res.centroids
        layer = _voronoi_frame(voronoi_cells(np.unique(centroids, axis=0), area.polygon), area.crs)
    else:
        from .mechanisms.diffhwt import diffhwt_points

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
    from . import evaluation as ev

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
    from . import evaluation as ev

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


def _matched_colours(lab_r, lab_p):
    """Colour index per reference and per private cluster id; matched clusters share a colour."""
    from scipy.optimize import linear_sum_assignment

    ur = np.unique(lab_r[lab_r > 0])
    up = np.unique(lab_p[lab_p > 0])
    col_r = {int(c): i for i, c in enumerate(ur)}
    col_p = {}
    both = (lab_r > 0) & (lab_p > 0)
    if ur.size and up.size and both.any():
        i = np.searchsorted(ur, lab_r[both])
        j = np.searchsorted(up, lab_p[both])
        table = np.zeros((ur.size, up.size), dtype=np.int64)
        np.add.at(table, (i, j), 1)
        rows, cols = linear_sum_assignment(table, maximize=True)
        for r_, c_ in zip(rows, cols):
            if table[r_, c_] > 0:
                col_p[int(up[c_])] = col_r[int(ur[r_])]
    nxt = len(ur)
    for c in up:
        if int(c) not in col_p:
            col_p[int(c)] = nxt
            nxt += 1
    return col_r, col_p


def _draw(path, rep, x, y, ref_layer, area):
    # a bare Figure: no pyplot state and no backend switch (safe inside QGIS and notebooks)
    from matplotlib import colormaps
    from matplotlib.figure import Figure

    lab_r, lab_p = rep.reference_labels, rep.private_labels
    col_r, col_p = _matched_colours(lab_r, lab_p)
    cmap = colormaps["tab20"]

    def colour(i):
        return cmap(i % 20)

    sel = np.arange(x.size)
    if x.size > _MAX_PLOT_POINTS:
        sel = np.sort(np.random.default_rng(0).choice(x.size, _MAX_PLOT_POINTS, replace=False))
    poly = area.polygon
    b = poly.bounds
    aspect = (b[2] - b[0]) / max(b[3] - b[1], 1e-9)
    panel_h = 6.0
    panel_w = min(max(panel_h * aspect, 3.5), 9.0)
    fig = Figure(figsize=(max(2 * panel_w + 1.2, 11.0), panel_h + 1.6))
    axes = fig.subplots(1, 2, sharex=True, sharey=True)
    crs_label = rep.private.metadata.get("working_crs", "")
    for ax in axes:
        for g in getattr(poly, "geoms", [poly]):
            ax.plot(*g.exterior.xy, color="0.4", lw=0.8)
        ax.scatter(x[sel], y[sel], s=0.6, color="0.75", lw=0, rasterized=True)
        ax.set_aspect("equal")
        ax.ticklabel_format(useOffset=False, style="plain")
        ax.tick_params(labelsize=7)
        ax.set_xlabel(f"x (m, {crs_label})", fontsize=8)
    axes[0].set_ylabel(f"y (m, {crs_label})", fontsize=8)
    ax = axes[0]
    if ref_layer is None:
        keep = sel[lab_r[sel] > 0]
        ax.scatter(x[keep], y[keep], s=1.2, lw=0, rasterized=True,
                   color=[colour(col_r[int(c)]) for c in lab_r[keep]])
    else:
        _draw_layer(ax, ref_layer.layer, {int(k): colour(v) for k, v in col_r.items()})
    ax.set_title(f"non-private reference: {rep.reference['name']}\n{rep.measures['n_clusters_reference']} clusters",
                 fontsize=9)
    if rep.private.layer is None:  # a per-record release: colour the points by their cluster
        keep = sel[lab_p[sel] > 0]
        axes[1].scatter(x[keep], y[keep], s=1.2, lw=0, rasterized=True,
                        color=[colour(col_p[int(c)]) for c in lab_p[keep]])
    else:
        _draw_layer(axes[1], rep.private.layer, {int(k): colour(v) for k, v in col_p.items()})
    md = rep.private.metadata
    eps = f", ε = {md['epsilon']:g}" if md.get("epsilon") is not None else ""
    if rep.algorithm in NOT_DP_ALGORITHMS:
        title = f"{md.get('mechanism')}\nNOT DIFFERENTIALLY PRIVATE{eps}"
    else:
        title = f"private ({md.get('mechanism')}){eps}"
    axes[1].set_title(f"{title}\n{rep.measures['n_clusters_private']} clusters", fontsize=9)
    m = rep.measures
    top = 1.0 - 1.0 / fig.get_figheight()
    fig.text(0.5, 0.985, "NOT PRIVATE — computed from the exact data — for the data owner only, do not publish",
             ha="center", va="top", fontsize=11, color="white", weight="bold",
             bbox=dict(boxstyle="round", facecolor="firebrick", edgecolor="none"))
    fig.text(0.5, top + 0.02, f"ARI {m['ari']:.3f}   AMI {m['ami']:.3f}   F {m['f_measure']:.3f}   "
             f"recall {_pct(m['recall'])}   precision {_pct(m['precision'])}", ha="center", va="bottom", fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, top))
    _save_atomic(fig, path)


def _draw_layer(ax, layer, colours):
    from matplotlib.patches import PathPatch
    from matplotlib.path import Path as MPath

    for cid, geom in zip(layer["cluster_id"].to_numpy(), layer.geometry):
        if geom is None or geom.is_empty:
            continue
        verts, codes = [], []
        for poly in getattr(geom, "geoms", [geom]):
            for ring in [poly.exterior, *poly.interiors]:
                xy = np.asarray(ring.coords)
                verts.append(xy)
                codes.append(np.r_[MPath.MOVETO, np.full(len(xy) - 2, MPath.LINETO), MPath.CLOSEPOLY])
        patch = PathPatch(MPath(np.concatenate(verts), np.concatenate(codes)),
                          facecolor=colours.get(int(cid), "tab:red"), edgecolor="k", lw=0.3, alpha=0.75)
        ax.add_patch(patch)


def _save_atomic(fig, path):
    """Write the PNG under a temporary name (usual permissions) and rename it into place."""
    from .io.files import atomic_write

    atomic_write(path, lambda tmp: fig.savefig(tmp, dpi=110, format="png", bbox_inches="tight", pad_inches=0.15))
