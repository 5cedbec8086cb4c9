"""Public entry points: points in, differentially private cluster layer out.

Each entry point validates its parameters before touching the data, then
runs the stages of the data flow — study area → projection → grid → DP
histogram → mechanism → polygons — reporting progress between stages.
"""

from __future__ import annotations

import datetime as _dt
import math
import numbers
import warnings

import numpy as np
from pyproj import Transformer

from ._version import __version__
from .dbscan import DEFAULT_BETA, EXTENTS, dbscan_cells, noise_bound
from .domain import StudyArea, as_study_area
from .errors import DomainError, InputError, NotPrivateWarning, ParameterError
from .grid import Grid, cell_width_for_radius, neighbourhood_offsets
from .histogram import (
    DEFAULT_MAX_DENSE_CELLS,
    DEFAULT_MAX_FALSE_CELLS,
    choose_histogram,
    noisy_histogram,
    sparse_threshold,
)
from .io import PointTable, points_from_frame, read_points
from .noise import discrete_laplace_q, make_generator, sum_interval_halfwidth
from .polygons import cluster_polygons
from .result import ClusterLayer

__all__ = ["dbscan_spans", "wavecluster", "noise_preview", "load_points", "prepare_points", "PreparedPoints"]


# -- validation ------------------------------------------------------------------

def check_epsilon(epsilon):
    if isinstance(epsilon, bool) or not isinstance(epsilon, numbers.Real) or not math.isfinite(epsilon) \
            or epsilon <= 0:
        raise ParameterError(f"epsilon (the privacy budget) must be a finite number > 0, got {epsilon!r}")
    return float(epsilon)


def check_positive(value, name, unit=""):
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) or value <= 0:
        raise ParameterError(f"{name} must be a number > 0{unit}, got {value!r}")
    return float(value)


def check_int(value, name, minimum=1):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ParameterError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def check_fraction(value, name, lo_open=True, hi_closed=False):
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise ParameterError(f"{name} must be a number, got {value!r}")
    ok = (0 < value if lo_open else 0 <= value) and (value <= 1 if hi_closed else value < 1)
    if not ok:
        rng = f"{'(' if lo_open else '['}0, 1{']' if hi_closed else ')'}"
        raise ParameterError(f"{name} must be in {rng}, got {value!r}")
    return float(value)


# -- points ----------------------------------------------------------------------

def load_points(points, *, input_crs=None, person=None) -> PointTable:
    """Coordinates from a path, GeoDataFrame/GeoSeries, (x, y, crs) tuple or PointTable.

    ``person`` is a column name for files and frames, or an array aligned with
    the coordinates for a tuple.
    """
    if isinstance(points, PointTable):
        if person is not None and points.person is None:
            raise InputError("the PointTable was read without a person column; read it with person=...")
        return points
    if isinstance(points, (str, bytes)) or hasattr(points, "__fspath__"):
        return read_points(points, input_crs=input_crs, person=person)
    if hasattr(points, "crs") and (hasattr(points, "geometry") or type(points).__name__ == "GeoSeries"):
        return points_from_frame(points, input_crs=input_crs, person=person)
    if isinstance(points, tuple) and len(points) == 3:
        x, y, crs = points
        from .io import _finish_table, _resolve_crs

        crs = _resolve_crs(crs, input_crs, "the coordinate arrays")
        x = np.asarray(x, dtype=float).ravel()
        y = np.asarray(y, dtype=float).ravel()
        if x.shape != y.shape:
            raise InputError(f"x and y must have the same length, got {x.size} and {y.size}")
        if x.size == 0:
            raise InputError("the point arrays are empty")
        pers = None
        if person is not None:
            pers = np.asarray(person).ravel()
            if pers.shape != x.shape:
                raise InputError(f"person must have one identifier per point ({x.size}), got {pers.size}")
        table = _finish_table(x, y, crs, x.size, "arrays", pers)
        if table.x.size == 0:
            raise InputError(f"no usable points: all {x.size} coordinates are NaN or infinite")
        return table
    raise InputError(
        "points must be a GeoDataFrame/GeoSeries of points, a file path, or a tuple (x, y, crs); "
        f"got {type(points).__name__}"
    )


class PreparedPoints:
    """Points projected to the working CRS and assigned to the study area (private)."""

    def __init__(self, area: StudyArea, x, y, diagnostics: dict, person=None):
        self.area = area
        self.x = x
        self.y = y
        self.diagnostics = diagnostics
        self.person = person


def prepare_points(points, *, domain, domain_crs=None, crs=None, domain_from_data=False,
                   input_crs=None, person=None) -> PreparedPoints:
    """Load points, fix the public study area and project the points into metres."""
    if domain is not None and domain_from_data:
        raise DomainError("give either a study area (--domain) or --domain-from-data, not both")
    if domain is None and not domain_from_data:
        as_study_area(None)  # raises the helpful message
    area = None
    if domain is not None:  # validate the public inputs before touching the data
        area = as_study_area(domain, domain_crs=domain_crs, working_crs=crs)
    table = load_points(points, input_crs=input_crs, person=person)
    if area is None:
        area = StudyArea.from_points_extent(table.x, table.y, table.crs, working_crs=crs)
    x, y = _project(table, area)
    pers = table.person if person is not None else None
    ok = np.isfinite(x) & np.isfinite(y)
    n_bad = int((~ok).sum())
    if n_bad:
        x, y = x[ok], y[ok]
        pers = None if pers is None else pers[ok]
    diag = {
        "n_read": table.n_read,
        "n_dropped_invalid": table.n_dropped + n_bad,
        "input_crs": table.crs.to_string(),
        "source": table.source,
    }
    return PreparedPoints(area, x, y, diag, pers)


def _contribution(person, max_points_per_person, sensitivity):
    """Sensitivity and privacy unit from the person/cap/sensitivity parameters (checked)."""
    sensitivity = check_int(sensitivity, "sensitivity (points per record)")
    if person is None:
        if max_points_per_person is not None:
            raise ParameterError("max_points_per_person needs person (the column or ids that identify "
                                 "each point's person)")
        return sensitivity, None
    if sensitivity != 1:
        raise ParameterError("with person=..., bound the contribution with max_points_per_person, not sensitivity")
    if max_points_per_person is None:
        raise ParameterError("person=... needs max_points_per_person: the most points one person may contribute "
                             "(the noise scales with it; extra points are dropped at random)")
    k = check_int(max_points_per_person, "max_points_per_person")
    return k, k


def _kept_cells(assign, prep, cap, rng, diag):
    """Cell ids after capping each person's points at ``cap`` (``assign`` has a mask)."""
    if cap is None:
        return assign.cell_id, assign.mask
    from .contribution import cap_per_person

    keep = cap_per_person(prep.person[assign.mask], cap, rng)
    diag["n_dropped_by_person_cap"] = int((~keep).sum())
    diag["n_used"] = int(keep.sum())
    mask = assign.mask.copy()
    mask[np.flatnonzero(assign.mask)[~keep]] = False
    return assign.cell_id[keep], mask


def _project(table: PointTable, area: StudyArea):
    if table.crs.equals(area.crs):
        return table.x, table.y
    tr = Transformer.from_crs(table.crs, area.crs, always_xy=True)
    n = table.x.size
    if n < 2_000_000:
        return tr.transform(table.x, table.y, errcheck=False)
    # PROJ releases the GIL: split big inputs over two threads
    from concurrent.futures import ThreadPoolExecutor

    x = np.empty(n)
    y = np.empty(n)
    cuts = np.linspace(0, n, 3).astype(int)

    def work(i):
        t = Transformer.from_crs(table.crs, area.crs, always_xy=True)
        a, b = cuts[i], cuts[i + 1]
        x[a:b], y[a:b] = t.transform(table.x[a:b], table.y[a:b], errcheck=False)

    with ThreadPoolExecutor(2) as ex:
        list(ex.map(work, range(2)))
    return x, y


# -- metadata --------------------------------------------------------------------

def base_metadata(*, method, mechanism, epsilon, area, seeded, sensitivity, person=None, cap=None):
    reasons = []
    if seeded:
        reasons.append("a fixed random seed was used (reproducible noise is for tests only)")
    if area.from_data:
        reasons.append("the study area was derived from the private data's own extent")
    return {
        "mechanism": mechanism,
        "method": method,
        "differentially_private": not reasons,
        "not_private_reasons": reasons,
        "neighbouring_relation": (
            f"add or remove one record; each record contributes at most {sensitivity:g} point(s)"
            if cap is None else
            f"add or remove one person (identified by {person}); at most {cap} point(s) per person are kept, "
            "chosen uniformly at random"
        ),
        "privacy_unit": "record" if cap is None else "person",
        "sensitivity_points_per_record": sensitivity,
        "epsilon": epsilon,
        "delta": 0.0,
        "working_crs": _crs_label(area.crs),
        "domain": area.to_metadata(),
        "dpgeo_version": __version__,
        "created_utc": _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat(),
    }


def _person_label(person):
    if person is None:
        return None
    if isinstance(person, str):
        return f"column {person!r}"
    name = getattr(person, "name", None)  # a named pandas Series, e.g. df["driver_id"]
    return f"column {name!r}" if isinstance(name, str) and name else "the given person identifiers"


def _crs_label(crs):
    e = crs.to_epsg()
    return f"EPSG:{e}" if e else crs.name


def _warn_if_not_private(md):
    if not md["differentially_private"]:
        warnings.warn("result is NOT differentially private: " + "; ".join(md["not_private_reasons"]),
                      NotPrivateWarning, stacklevel=3)


def _progress(cb, frac, msg):
    if cb is not None:
        cb(float(frac), msg)


# -- DP-DBSCAN -------------------------------------------------------------------

def _check_dbscan_params(epsilon, radius_m, min_points, beta, eta, histogram, gamma, sensitivity, extent="grown"):
    epsilon = check_epsilon(epsilon)
    radius_m = check_positive(radius_m, "radius", " (metres)")
    min_points = check_int(min_points, "min_points (MinPts)")
    beta = check_fraction(beta, "beta (failure probability of the noise bound)")
    eta = check_fraction(eta, "eta (η′, cell width factor)", hi_closed=True)
    if histogram not in ("auto", "dense", "sparse"):
        raise ParameterError(f"histogram must be 'auto', 'dense' or 'sparse', got {histogram!r}")
    if gamma not in ("exact", "laplace"):
        raise ParameterError(f"gamma must be 'laplace' or 'exact', got {gamma!r}")
    if extent not in EXTENTS:
        raise ParameterError(f"extent must be 'grown' or 'core', got {extent!r}")
    sensitivity = check_int(sensitivity, "sensitivity (points per record)")
    return epsilon, radius_m, min_points, beta, eta, sensitivity


def check_overlap(assign, prep):
    """Refuse to run when no point lies in the study area (a local message to the data owner)."""
    if assign.n_in == 0:
        raise DomainError(
            f"none of the {assign.n_outside:,} points lies inside the study area "
            f"({prep.area.description}); check --domain and --domain-crs against the data's CRS "
            f"({prep.diagnostics['input_crs']})"
        )


def _dbscan_setup(area, *, epsilon, radius_m, min_points, beta, eta, histogram, gamma, sensitivity,
                  max_dense_cells, max_false_cells, extent="grown"):
    """All public quantities of a DP-DBSCAN run (no data involved)."""
    grid = Grid(area, cell_width_for_radius(radius_m, eta))
    kappa = len(neighbourhood_offsets(eta))
    kind = choose_histogram(grid, histogram, max_dense_cells=max_dense_cells)
    q = discrete_laplace_q(epsilon, sensitivity)
    theta = sparse_threshold(grid.n_cells, q, max_false_cells) if kind == "sparse" else None
    bound = noise_bound(kappa=kappa, n_cells=grid.n_cells, q=q, epsilon_eff=epsilon / sensitivity,
                        beta=beta, theta=theta, method=gamma)
    # grown spans reach the cells certified by the tightest bound at the same β
    extent_bound = None
    if extent == "grown":
        extent_bound = noise_bound(kappa=kappa, n_cells=grid.n_cells, q=q, epsilon_eff=epsilon / sensitivity,
                                   beta=beta, theta=theta, method="exact")
    params = {
        "epsilon": epsilon,
        "beta": beta,
        "radius_m": radius_m,
        "min_points": min_points,
        "min_points_prime": min_points + bound.gamma + bound.gamma_low,
        "core_threshold": min_points + bound.gamma,
        "gamma": bound.gamma,
        "gamma_low": bound.gamma_low,
        "gamma_method": gamma,
        "gamma_laplace": bound.gamma_laplace,
        "extent": extent,
        "extent_threshold": min_points + (extent_bound or bound).gamma,
        "kappa": kappa,
        "eta": eta,
        "cell_width_m": grid.cell_m,
        "n_cells": grid.n_cells,
        "histogram": kind,
        "theta": theta,
        "noise": "discrete Laplace (two-sided geometric)",
        "noise_q": q,
    }
    return grid, kind, q, theta, bound, extent_bound, params


def dbscan_spans(
    points,
    *,
    epsilon: float,
    radius_m: float,
    min_points: int,
    domain=None,
    domain_crs=None,
    crs=None,
    beta: float = DEFAULT_BETA,
    eta: float = 1.0,
    histogram: str = "auto",
    gamma: str = "laplace",
    extent: str = "grown",
    sensitivity: int = 1,
    person=None,
    max_points_per_person: int | None = None,
    seed: int | None = None,
    domain_from_data: bool = False,
    input_crs=None,
    progress=None,
    max_dense_cells: int = DEFAULT_MAX_DENSE_CELLS,
    max_false_cells: int = DEFAULT_MAX_FALSE_CELLS,
) -> ClusterLayer:
    """ε-differentially private DBSCAN cluster spans as a polygon layer.

    Implements Qiu & Yi's DP-DBSCAN (Algorithm 1) with the linear-time sparse
    histogram (Algorithm 2) for large grids and the tighter noise bound of
    §7, in metres over a public study area.

    Parameters
    ----------
    points : GeoDataFrame, GeoSeries, str or tuple
        The private points: a point layer with a CRS, a file path, or
        ``(x, y, crs)``.
    epsilon : float
        Privacy budget ε (> 0). The whole run is ε-DP (δ = 0).
    radius_m : float
        DBSCAN radius α in metres.
    min_points : int
        DBSCAN MinPts: a span must certainly hold cells whose α-neighbourhood
        holds at least this many points.
    domain : bbox, polygon, GeoDataFrame, path or StudyArea
        The **public** study area. Points outside it are dropped.
    domain_crs : optional
        CRS of a bbox / shapely polygon domain (default EPSG:4326).
    crs : optional
        Working CRS (projected, metres); default the UTM zone of the study
        area's centre.
    beta : float
        Failure probability of the noise bound Γ (default 0.05: with
        probability ≥ 95% every reported core cell is a true candidate and
        every cell with ≥ MinPts′ neighbours is reported).
    eta : float
        Cell width factor η′ in (0, 1]: cells are ``η′·α/√2`` metres wide.
    histogram : {"auto", "dense", "sparse"}
        DP histogram implementation; ``auto`` chooses from the number of
        cells (public) and ``max_dense_cells``.
    gamma : {"laplace", "exact"}
        Core threshold bound. ``laplace`` (default): the paper's Γ_Lap, or the
        exact bound if larger — conservative, thinner spans. ``exact``: the
        smallest Γ with the guarantee, from the exact law of the summed
        discrete noise — finds smaller clusters, fatter spans.
    extent : {"grown", "core"}
        How far each span reaches. ``grown`` (default): the spans formed by
        the core cells (threshold ``MinPts + Γ``, which decides which
        clusters exist and which are separate) are grown, without ever
        merging two of them, into the neighbouring cells whose noisy sum
        reaches ``MinPts + Γ_exact`` — the tightest threshold with the same
        guarantee — so a cluster's fringe is not eroded by a conservative Γ.
        ``core``: only the core cells (the paper's Algorithm 1 as published).
    sensitivity : int
        Maximum points per record (default 1: one point per record).
    person : str or array_like, optional
        Make the guarantee per **person**: a column name (file or frame
        input) or an array of identifiers (tuple input) saying whose each
        point is; a named pandas Series is recorded in the metadata by its
        name. Each person keeps at most ``max_points_per_person`` points,
        chosen uniformly at random, and the noise scales with that number.
    max_points_per_person : int, optional
        Required with ``person``.
    seed : int, optional
        Fixed seed for tests. The output is then marked **not private**.
    domain_from_data : bool
        Use the data's own extent as the study area. Exploration only; the
        output is marked **not private**.
    input_crs : optional
        CRS for inputs that declare none.
    progress : callable, optional
        ``progress(fraction, message)`` between stages; raise from it to cancel.

    Returns
    -------
    ClusterLayer

    Examples
    --------
    >>> import numpy as np, dpgeo
    >>> rng = np.random.default_rng(0)
    >>> x = np.r_[rng.normal(500, 30, 3000), rng.uniform(0, 2000, 500)]
    >>> y = np.r_[rng.normal(500, 30, 3000), rng.uniform(0, 2000, 500)]
    >>> res = dpgeo.dbscan_spans((x, y, "EPSG:32615"), epsilon=1.0, radius_m=50, min_points=20,
    ...                          domain=(0, 0, 2000, 2000), domain_crs="EPSG:32615", seed=1)
    >>> len(res.layer), res.metadata["kappa"], res.metadata["differentially_private"]
    (1, 21, False)
    """
    epsilon, radius_m, min_points, beta, eta, sensitivity = _check_dbscan_params(
        epsilon, radius_m, min_points, beta, eta, histogram, gamma, sensitivity, extent)
    sensitivity, cap = _contribution(person, max_points_per_person, sensitivity)
    noise_src = make_generator(seed)
    _progress(progress, 0.0, "reading points")
    prep = prepare_points(points, domain=domain, domain_crs=domain_crs, crs=crs,
                          domain_from_data=domain_from_data, input_crs=input_crs, person=person)
    _progress(progress, 0.25, "fixing the grid")
    grid, kind, q, theta, bound, extent_bound, params = _dbscan_setup(
        prep.area, epsilon=epsilon, radius_m=radius_m, min_points=min_points, beta=beta, eta=eta,
        histogram=histogram, gamma=gamma, sensitivity=sensitivity,
        max_dense_cells=max_dense_cells, max_false_cells=max_false_cells, extent=extent)
    assign = grid.assign(prep.x, prep.y, return_mask=cap is not None)
    check_overlap(assign, prep)
    diag = dict(prep.diagnostics, n_outside_domain=assign.n_outside, n_used=assign.n_in)
    cell_id, _ = _kept_cells(assign, prep, cap, noise_src.generator, diag)
    del assign
    _progress(progress, 0.4, f"noisy {kind} histogram over {grid.n_cells:,} cells")
    hist = noisy_histogram(grid, cell_id, epsilon=epsilon, sensitivity=sensitivity,
                           rng=noise_src.generator, method=kind, max_false_cells=max_false_cells)
    del cell_id
    _progress(progress, 0.6, "core cells and spans")
    spans = dbscan_cells(hist, min_points=min_points, eta=eta, bound=bound, extent_bound=extent_bound)
    _progress(progress, 0.8, f"polygons for {spans.n_clusters} spans")
    layer = cluster_polygons(grid, spans.cell_id, spans.label, spans.count, q=q, theta=theta)
    md = base_metadata(method="dbscan_spans", mechanism="DP-DBSCAN spans (Qiu & Yi, Algorithm 1)",
                       epsilon=epsilon, area=prep.area, seeded=noise_src.seeded, sensitivity=sensitivity,
                       person=_person_label(person), cap=cap)
    md.update(params)
    md["grid"] = grid.to_metadata()
    md["n_clusters"] = spans.n_clusters
    md["n_span_cells"] = int(spans.cell_id.size)
    md["n_core_cells"] = spans.n_core_cells
    md["dp_count_interval"] = "95%: sum of released cell counts ± noise quantile, clipped at 0"
    _warn_if_not_private(md)
    _progress(progress, 1.0, "done")
    return ClusterLayer(layer=layer, metadata=md, diagnostics=diag, cells=spans)


def noise_preview(
    *,
    epsilon: float,
    radius_m: float,
    min_points: int,
    domain,
    domain_crs=None,
    crs=None,
    beta: float = DEFAULT_BETA,
    eta: float = 1.0,
    histogram: str = "auto",
    gamma: str = "laplace",
    extent: str = "grown",
    sensitivity: int = 1,
    max_dense_cells: int = DEFAULT_MAX_DENSE_CELLS,
    max_false_cells: int = DEFAULT_MAX_FALSE_CELLS,
) -> dict:
    """What a DP-DBSCAN run would look like, from public parameters alone (spends no budget).

    Returns Γ, MinPts′ and the expected count error for the given ε, so a
    budget can be chosen before any data is touched.

    Returns
    -------
    dict
        ``kappa``, ``n_cells``, ``cell_width_m``, ``histogram``, ``theta``,
        ``gamma``, ``gamma_low``, ``min_points_prime``, ``core_threshold``,
        ``count_error_95`` (half-width of the 95% interval of one cell's
        count), ``count_sd`` (standard deviation of one cell's noise), ...

    Examples
    --------
    >>> p = noise_preview(epsilon=1.0, radius_m=100, min_points=30, domain=(-93.33, 44.89, -93.19, 45.05))
    >>> p["kappa"], p["count_error_95"]
    (21, 3)
    """
    epsilon, radius_m, min_points, beta, eta, sensitivity = _check_dbscan_params(
        epsilon, radius_m, min_points, beta, eta, histogram, gamma, sensitivity, extent)
    area = as_study_area(domain, domain_crs=domain_crs, working_crs=crs)
    grid, kind, q, theta, bound, _, params = _dbscan_setup(
        area, epsilon=epsilon, radius_m=radius_m, min_points=min_points, beta=beta, eta=eta,
        histogram=histogram, gamma=gamma, sensitivity=sensitivity,
        max_dense_cells=max_dense_cells, max_false_cells=max_false_cells, extent=extent)
    params["count_error_95"] = sum_interval_halfwidth(1, q, 0.95)
    params["count_sd"] = math.sqrt(2 * q) / (1 - q)
    params["working_crs"] = _crs_label(area.crs)
    params["spends_budget"] = False
    return params


# -- DP WaveCluster ----------------------------------------------------------------

WAVECLUSTER_METHODS = ("privthr", "privthr-em", "privqt", "baseline", "exact")
#: Largest grid (cells) WaveCluster works on; the wavelet transform is dense.
MAX_WAVECLUSTER_CELLS = 1 << 26


def _wavecluster_grid(area, cell_m, grid_size):
    if (cell_m is None) == (grid_size is None):
        raise ParameterError("give exactly one of cell_m (cell width in metres, --cell) or grid_size "
                             "(cells per side of the study area, --grid)")
    if grid_size is not None:
        grid_size = check_int(grid_size, "grid_size (cells per side)", minimum=2)
        b = area.polygon.bounds
        cell_m = max(b[2] - b[0], b[3] - b[1]) / grid_size
    cell_m = check_positive(cell_m, "cell_m (cell width)", " (metres)")
    grid = Grid(area, cell_m)
    if grid.nx * grid.ny > MAX_WAVECLUSTER_CELLS:
        raise ParameterError(
            f"a {grid.nx} x {grid.ny} grid is too large for WaveCluster (at most {MAX_WAVECLUSTER_CELLS:,} "
            "cells); use a larger cell or a smaller study area"
        )
    return grid


def wavecluster(
    points,
    *,
    method: str = "privthr",
    epsilon: float | None = None,
    cell_m: float | None = None,
    grid_size: int | None = None,
    percentile: float = 60.0,
    domain=None,
    domain_crs=None,
    crs=None,
    wavelet: str = "haar",
    mode: str = "zero",
    count_split: float | None = None,
    count_cap: float | None = None,
    n_public: int | None = None,
    k_rule: str = "direct",
    sensitivity: int = 1,
    person=None,
    max_points_per_person: int | None = None,
    seed: int | None = None,
    domain_from_data: bool = False,
    input_crs=None,
    progress=None,
) -> ClusterLayer:
    """DP WaveCluster (Chen, Yu & Chirkova) as a polygon layer.

    Counts on a grid over the public study area → (noisy) counts → level-1
    wavelet approximation → significant coefficients (private threshold)
    → 8-connected components → cells → polygons.

    Parameters
    ----------
    points : GeoDataFrame, GeoSeries, str or tuple
        The private points (see :func:`dbscan_spans`).
    method : {"privthr", "privthr-em", "privqt", "baseline", "exact"}
        ``privthr`` (default): noisy counts plus a noisy count of the
        non-positive coefficients, ε split 0.9/0.1. ``privthr-em``: the
        threshold by the exponential mechanism, split 0.7/0.3. ``privqt``:
        noisy counts only. ``baseline``: DP synthetic points from adaptive
        grids. ``exact``: non-private reference (marked not private).
    epsilon : float
        Privacy budget ε (> 0); not used by ``exact``.
    cell_m, grid_size : float, int
        Exactly one: the cell width in metres, or the number of cells along
        the longer side of the study area.
    percentile : float
        ``p`` in [0, 100): share of the positive coefficients that are not
        significant (default 60).
    domain, domain_crs, crs
        The public study area and working CRS, as for :func:`dbscan_spans`.
    wavelet : {"haar", "bior2.2", "bior1.3", "db2"}
    mode : str
        Signal extension (default ``"zero"``); modes that wrap around are refused.
    count_split : float, optional
        Share of ε for the counts (PrivTHR 0.9, PrivTHR_EM 0.7 by default).
    count_cap, n_public : optional
        Public cap on points per cell / public number of points (EM
        candidates; baseline's N — otherwise N is released with 5% of ε).
    k_rule : {"direct", "prune", "prune-half"}
        PrivTHR's estimate of the number of significant coefficients.
    sensitivity : int
        Maximum points per record (default 1).
    person, max_points_per_person : optional
        Per-person guarantee with a cap on points per person, as for
        :func:`dbscan_spans`.
    seed : int, optional
        Fixed seed for tests; the output is marked not private.
    domain_from_data : bool
        Exploration only; the output is marked not private.
    progress : callable, optional
        ``progress(fraction, message)`` between stages.

    Returns
    -------
    ClusterLayer

    Examples
    --------
    >>> import numpy as np, dpgeo
    >>> rng = np.random.default_rng(0)
    >>> x = np.r_[rng.normal(300, 40, 4000), rng.normal(1400, 60, 4000)]
    >>> y = np.r_[rng.normal(300, 40, 4000), rng.normal(1200, 60, 4000)]
    >>> res = dpgeo.wavecluster((x, y, "EPSG:32615"), method="privthr", epsilon=1.0, cell_m=50,
    ...                         domain=(0, 0, 2000, 2000), domain_crs="EPSG:32615", crs="EPSG:32615", seed=2)
    >>> len(res.layer), res.metadata["method"]
    (2, 'privthr')
    """
    if method not in WAVECLUSTER_METHODS:
        raise ParameterError(f"method must be one of {', '.join(WAVECLUSTER_METHODS)}; got {method!r}")
    if method != "exact":
        if epsilon is None:
            raise ParameterError(f"method {method!r} needs epsilon (the privacy budget)")
        epsilon = check_epsilon(epsilon)
    sensitivity, cap = _contribution(person, max_points_per_person, sensitivity)
    if not (isinstance(percentile, numbers.Real) and 0 <= percentile < 100):
        raise ParameterError(f"percentile must be in [0, 100), got {percentile!r}")
    if domain is not None:
        _wavecluster_grid(as_study_area(domain, domain_crs=domain_crs, working_crs=crs), cell_m, grid_size)
    from .wave import wavecluster_baseline, wavecluster_cells

    noise_src = make_generator(seed)
    _progress(progress, 0.0, "reading points")
    prep = prepare_points(points, domain=domain, domain_crs=domain_crs, crs=crs,
                          domain_from_data=domain_from_data, input_crs=input_crs, person=person)
    grid = _wavecluster_grid(prep.area, cell_m, grid_size)
    _progress(progress, 0.3, f"counting on a {grid.nx} x {grid.ny} grid")
    assign = grid.assign(prep.x, prep.y, return_mask=(method == "baseline" or cap is not None))
    check_overlap(assign, prep)
    diag = dict(prep.diagnostics, n_outside_domain=assign.n_outside, n_used=assign.n_in)
    cell_id, kept = _kept_cells(assign, prep, cap, noise_src.generator, diag)
    _progress(progress, 0.5, f"{method}: wavelet approximation and threshold")
    if method == "baseline":
        res = wavecluster_baseline(prep.x[kept], prep.y[kept], bounds=grid.bounds,
                                   shape=(grid.ny, grid.nx), epsilon=epsilon, percentile=percentile,
                                   wavelet=wavelet, mode=mode, n_public=n_public, sensitivity=sensitivity,
                                   rng=noise_src)
    else:
        counts = np.bincount(cell_id, minlength=grid.nx * grid.ny).reshape(grid.ny, grid.nx)
        res = wavecluster_cells(counts, method=method, epsilon=epsilon, percentile=percentile, wavelet=wavelet,
                                mode=mode, count_split=count_split, count_cap=count_cap, n_public=n_public,
                                sensitivity=sensitivity, universe=grid.universe_mask(), k_rule=k_rule,
                                rng=noise_src)
        if method == "exact":
            res.noisy_counts = counts  # the true counts: the output is not private anyway
        del counts
    del assign, cell_id, kept
    _progress(progress, 0.8, f"polygons for {res.n_clusters} clusters")
    flat = res.labels.ravel()
    cell_id = np.flatnonzero(flat)
    label = flat[cell_id].astype(np.int64)
    count = res.noisy_counts.ravel()[cell_id].astype(np.int64)
    if method == "exact":
        layer = cluster_polygons(grid, cell_id, label, count, q=None)
    else:
        layer = cluster_polygons(grid, cell_id, label, count, q=res.q)
    md = base_metadata(method=method, mechanism=f"DP WaveCluster ({_WC_NAMES[method]})", epsilon=epsilon,
                       area=prep.area, seeded=noise_src.seeded, sensitivity=sensitivity,
                       person=_person_label(person), cap=cap)
    rep = dict(res.report)
    reasons = md["not_private_reasons"] + [r for r in rep.pop("not_private_reasons", [])
                                           if "seeded" not in r]
    rep.pop("differentially_private", None)
    rep.pop("epsilon", None)
    rep.pop("mechanism", None)
    md.update(rep)
    md["not_private_reasons"] = reasons
    md["differentially_private"] = not reasons
    md["percentile"] = float(percentile)
    md["cell_width_m"] = grid.cell_m
    md["n_cells"] = grid.n_cells
    md["grid"] = grid.to_metadata()
    md["n_clusters"] = res.n_clusters
    md["dp_count_interval"] = (
        "none: exact counts (not private)" if method == "exact" else
        "none: baseline counts are synthetic" if res.q is None else
        "95%: sum of released cell counts ± noise quantile, clipped at 0")
    _warn_if_not_private(md)
    _progress(progress, 1.0, "done")
    from .dbscan import SpanCells

    cells = SpanCells(grid, cell_id, label, count, res.n_clusters)
    return ClusterLayer(layer=layer, metadata=md, diagnostics=diag, cells=cells)


_WC_NAMES = {"privthr": "PrivTHR", "privthr-em": "PrivTHR_EM", "privqt": "PrivQT",
             "baseline": "Baseline: DP synthetic points from adaptive grids", "exact": "exact, not private"}
