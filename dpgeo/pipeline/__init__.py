"""Public entry points: points in, differentially private cluster layer out.

Every entry point has the same four steps, in this order:

1. **validate** — every parameter, the public study area and the grid (and
   so the memory a run needs) are checked from public inputs alone, before
   any private data is read;
2. **count** — the private points are read, projected and added up per cell
   of the public grid (:func:`dpgeo.counting.count_points`): the exact
   :class:`~dpgeo.counting.CellCounts`, owner-only diagnostics beside them;
3. **mechanism** — the only step that draws noise; it sees the counts and
   public parameters only;
4. **layer** — post-processing of the released values into polygons with
   ``dp_count`` and the privacy metadata.

DP k-means (:func:`dpgeo.kmeans`) follows the same steps in
:mod:`dpgeo.pipeline.kmeans`, with the helpers defined here.
"""

from __future__ import annotations

import math
import numbers
import os
import warnings

import numpy as np

from .._version import __version__
from ..mechanisms.dbscan import DEFAULT_BETA, EXTENTS, dbscan_cells, noise_bound
from ..counting import CellCounts, count_points, load_points, prepare_points
from ..domain import as_study_area
from ..errors import NotPrivateWarning, ParameterError
from ..grid import Grid, cell_width_for_radius, neighbourhood_offsets
from ..histogram import (
    DEFAULT_MAX_DENSE_CELLS,
    DEFAULT_MAX_FALSE_CELLS,
    choose_histogram,
    dense_histogram,
    sparse_histogram,
    sparse_threshold,
)
from ..randomness import check_seed
from ..noise import NoiseSource, discrete_laplace_q, sampler_description, sum_interval_halfwidth
from ..polygons import cluster_polygons
from .._dates import today
from ..release import Release, run_protected_files, start_charge
from ..resources import check_plan, grid_shape, plan_run

__all__ = ["dbscan_spans", "wavecluster", "noise_preview", "load_points", "prepare_points"]


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


# -- contribution ----------------------------------------------------------------

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


# -- metadata --------------------------------------------------------------------

def base_metadata(*, method, mechanism, epsilon, area, source, sensitivity, person=None, cap=None):
    reasons = []
    if not source.private:
        reasons.append(source.not_private_reason)
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
        "sampler": sampler_description(source),
        "working_crs": _crs_label(area.crs),
        "domain": area.to_metadata(),
        "dpgeo_version": __version__,
        # the day only: a time of day to the second would tell how long the run took (the data's size)
        "created_utc": today(),
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


def _reading(cb, span=0.4):
    """The progress callback of the counting step: records read, mapped onto [0, span) of the run."""
    if cb is None:
        return None
    return lambda frac, msg: cb(float(span * frac), msg)


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


def _dbscan_setup(grid, *, epsilon, radius_m, min_points, beta, eta, histogram, gamma, sensitivity,
                  max_dense_cells, max_false_cells, extent="grown"):
    """All public quantities of a DP-DBSCAN run on ``grid`` (no data involved)."""
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
    return kind, q, theta, bound, extent_bound, params


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
    unattended: bool = False,
    dataset: str | None = None,
    ledger=None,
    analyst: str | None = None,
    progress=None,
    scheduler=None,
    max_dense_cells: int = DEFAULT_MAX_DENSE_CELLS,
    max_false_cells: int = DEFAULT_MAX_FALSE_CELLS,
    max_memory_bytes=None,
) -> Release:
    """ε-differentially private DBSCAN cluster spans as a polygon layer.

    Implements Qiu & Yi's DP-DBSCAN (Algorithm 1) with the linear-time sparse
    histogram (Algorithm 2) for large grids and the tighter noise bound of
    §7, in metres over a public study area.

    Parameters
    ----------
    points : GeoDataFrame, GeoSeries, str, tuple, PointTable or PointSource
        The private points: a point layer with a CRS, a file path (also a
        glob such as ``"data/*.parquet"`` or a folder of Parquet files), a
        :class:`~dpgeo.counting.PointSource` from
        :func:`~dpgeo.counting.open_points` (to choose a layer, columns or
        engine), or ``(x, y, crs)``. Files are read in batches, never whole.
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
    unattended : bool
        Run so that the outcome depends on the data only through the DP
        output: conditions of the private data (no point inside the study
        area, no usable record) are not errors but warnings for the data
        owner (``diagnostics["owner_warnings"]`` and the ``dpgeo.owner``
        logger), and a valid, possibly empty, layer is released. A service
        always runs this way. Default ``False``: such conditions raise
        :class:`~dpgeo.errors.DataError`, an owner-only message, before any
        noise is drawn.
    dataset : str, optional
        The name of the population the guarantee protects, under which the
        release is charged in the privacy-budget ledger (several files of the
        same people share one name). Default: the input file's resolved path,
        or one shared key for in-memory inputs.
    ledger : dpgeo.budget.Ledger, path, None or False
        The persistent ledger that records the release and refuses it beyond
        the dataset's total (:mod:`dpgeo.budget`). ``None`` (default): the
        default ledger (``$DPGEO_LEDGER``, else the user's data directory).
        ``False``: record nothing. The charge is made before any private
        data is read; runs that are not private (a seed, ``domain_from_data``)
        are never charged.
    analyst : str, optional
        Who runs the release, for the ledger (default: the operating-system user).
    progress : callable, optional
        ``progress(fraction, message)`` between stages, and about every
        second while a long input is read (records read, records per
        second); raise from it to cancel.
    scheduler : None, "local", int, str or distributed.Client
        Count the points with Dask instead of in this process (see
        :func:`dpgeo.counting.dask.count_with_dask`): ``"local"`` or a number
        of workers starts a ``LocalCluster`` here, ``"tcp://host:8786"`` or
        a ``Client`` uses an existing cluster. The workers only count; the
        noise is drawn here, from the counts. Same layer as without a
        scheduler for the same seed (with a per-person cap: the same law).
    max_memory_bytes : int or str, optional
        Refuse, before any data is read, a run whose grid and noise laws are
        estimated (:mod:`dpgeo.resources`) to need more memory than this
        (bytes, or e.g. ``"8G"``); default ``$DPGEO_MAX_MEMORY``, else half
        the machine's memory.

    Returns
    -------
    Release

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
    check_seed(seed)
    protected = run_protected_files(points, domain, ledger)
    setup = dict(epsilon=epsilon, radius_m=radius_m, min_points=min_points, beta=beta, eta=eta,
                 histogram=histogram, gamma=gamma, sensitivity=sensitivity, max_dense_cells=max_dense_cells,
                 max_false_cells=max_false_cells, extent=extent)

    kappa = len(neighbourhood_offsets(eta))

    def grid_for(area):  # the run's size is checked before the grid is built (and before any data is read)
        cell_m = cell_width_for_radius(radius_m, eta)
        check_plan(plan_run(area, cell_m, mechanism="dbscan", epsilon=epsilon, sensitivity=sensitivity, kappa=kappa,
                            histogram=histogram, max_dense_cells=max_dense_cells, max_false_cells=max_false_cells),
                   max_memory_bytes, cell_option="radius (or eta)")
        return Grid(area, cell_m)

    if not domain_from_data:  # the grid and every public quantity, before any data is read
        domain = _study_area(domain, domain_crs, crs)
        grid, grid_for = _fixed_grid(domain, grid_for)
        _dbscan_setup(grid, **setup)
    noise_src = NoiseSource(seed)
    # -- charge: before any private data is read; refused beyond the dataset's total --
    charge = start_charge(ledger=ledger, dataset=dataset, points=points, epsilon=epsilon,
                          mechanism="dp-dbscan-spans", analyst=analyst,
                          private=noise_src.private and not domain_from_data)
    with charge:
        # -- count (private; an error here cancels the charge: no noise yet) --
        with charge.before_noise():
            _progress(progress, 0.0, _reading_message(points, scheduler))
            counts = count_points(points, grid_for=grid_for, domain=domain, domain_crs=domain_crs, crs=crs,
                                  domain_from_data=domain_from_data, input_crs=input_crs, person=person, cap=cap,
                                  rng=noise_src, unattended=unattended, scheduler=scheduler,
                                  progress=_reading(progress))
            grid = counts.grid
            kind, q, theta, bound, extent_bound, params = _dbscan_setup(grid, **setup)
        # -- mechanism (the only step that draws noise) --
        _progress(progress, 0.4, f"noisy {kind} histogram over {grid.n_cells:,} cells")
        hist = _release_histogram(counts, kind=kind, epsilon=epsilon, sensitivity=sensitivity, theta=theta,
                                  rng=noise_src)
        diagnostics = counts.diagnostics
        del counts
        _progress(progress, 0.6, "core cells and spans")
        spans = dbscan_cells(hist, min_points=min_points, eta=eta, bound=bound, extent_bound=extent_bound)
        # -- layer (post-processing) --
        _progress(progress, 0.8, f"polygons for {spans.n_clusters} spans")
        layer = cluster_polygons(grid, spans.cell_id, spans.label, spans.count, q=q, theta=theta)
        md = base_metadata(method="dbscan_spans", mechanism="DP-DBSCAN spans (Qiu & Yi, Algorithm 1)",
                           epsilon=epsilon, area=grid.area, source=noise_src, sensitivity=sensitivity,
                           person=_person_label(person), cap=cap)
        md.update(params)
        md["grid"] = grid.to_metadata()
        md["n_clusters"] = spans.n_clusters
        md["n_span_cells"] = int(spans.cell_id.size)
        md["n_core_cells"] = spans.n_core_cells
        md["dp_count_interval"] = "95%: sum of released cell counts ± noise quantile, clipped at 0"
        md.update(charge.metadata())
        charge.complete()
    _warn_if_not_private(md)
    _progress(progress, 1.0, "done")
    return Release(layer=layer, metadata=md, diagnostics=diagnostics, cells=spans, _protected=protected)


def _reading_message(points, scheduler) -> str:
    return f"reading {_input_label(points)}" + (f" with Dask ({scheduler})" if scheduler is not None else "")


def _input_label(points) -> str:
    if isinstance(points, (str, bytes)) or hasattr(points, "__fspath__"):
        return os.fsdecode(os.fspath(points))
    return "points"


def _study_area(domain, domain_crs, crs):
    """The public study area (raises the helpful message when none is given)."""
    return as_study_area(domain, domain_crs=domain_crs, working_crs=crs)


def _fixed_grid(area, grid_for):
    """The grid of ``area``, built once, and a ``grid_for`` that returns it for that area."""
    grid = grid_for(area)
    return grid, (lambda a: grid if a is area else grid_for(a))


def _release_histogram(counts: CellCounts, *, kind, epsilon, sensitivity, theta, rng):
    """The ε-DP histogram of ``counts`` (dense, or sparse with threshold ``theta``)."""
    if kind == "dense":
        return dense_histogram(counts.grid, counts.cell_id, counts.count, epsilon=epsilon, sensitivity=sensitivity,
                               rng=rng)
    return sparse_histogram(counts.grid, counts.cell_id, counts.count, epsilon=epsilon, sensitivity=sensitivity,
                            theta=theta, rng=rng)


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
    max_memory_bytes=None,
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
    cell_m = cell_width_for_radius(radius_m, eta)
    check_plan(plan_run(area, cell_m, mechanism="dbscan", epsilon=epsilon, sensitivity=sensitivity,
                        kappa=len(neighbourhood_offsets(eta)), histogram=histogram, max_dense_cells=max_dense_cells,
                        max_false_cells=max_false_cells), max_memory_bytes, cell_option="radius (or eta)")
    grid = Grid(area, cell_m)
    kind, q, theta, bound, _, params = _dbscan_setup(
        grid, epsilon=epsilon, radius_m=radius_m, min_points=min_points, beta=beta, eta=eta,
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


def check_wavecluster_params(*, method, percentile, wavelet, mode, count_split, count_cap, n_public, k_rule):
    """Every WaveCluster parameter that the mechanism checks, checked before any data is read."""
    from ..mechanisms.wavecluster._checks import _K_RULES, _check_epsilon, _check_n_public, _check_percentile, \
        _check_split
    from ..mechanisms.wavecluster.transform import _check_mode, _filter

    _filter(wavelet)
    _check_mode(mode)
    _check_percentile(percentile)
    if k_rule not in _K_RULES:
        raise ParameterError(f"k_rule must be one of {', '.join(_K_RULES)}; got {k_rule!r}")
    if count_cap is not None:
        _check_epsilon(count_cap, "count_cap")
    if n_public is not None:
        _check_n_public(n_public)
    if method in ("privthr", "privthr-em"):
        _check_split(count_split, method)


def _wavecluster_grid(area, cell_m, grid_size, epsilon=None, sensitivity=1, max_memory_bytes=None):
    cell_m = wavecluster_cell_width(area, cell_m, grid_size, epsilon, sensitivity, max_memory_bytes)
    grid = Grid(area, cell_m)
    if grid.nx * grid.ny > MAX_WAVECLUSTER_CELLS:
        raise ParameterError(
            f"a {grid.nx} x {grid.ny} grid is too large for WaveCluster (at most {MAX_WAVECLUSTER_CELLS:,} "
            "cells); use a larger cell or a smaller study area"
        )
    return grid


def wavecluster_cell_width(area, cell_m, grid_size, epsilon=None, sensitivity=1, max_memory_bytes=None) -> float:
    """The checked cell width of a WaveCluster run (metres), its grid size and memory planned; builds no grid."""
    if (cell_m is None) == (grid_size is None):
        raise ParameterError("give exactly one of cell_m (cell width in metres, --cell) or grid_size "
                             "(cells per side of the study area, --grid)")
    if grid_size is not None:
        grid_size = check_int(grid_size, "grid_size (cells per side)", minimum=2)
        b = area.polygon.bounds
        cell_m = max(b[2] - b[0], b[3] - b[1]) / grid_size
    cell_m = check_positive(cell_m, "cell_m (cell width)", " (metres)")
    nx, ny = grid_shape(area.polygon.bounds, cell_m)
    if nx * ny > MAX_WAVECLUSTER_CELLS:
        raise ParameterError(
            f"a {nx:,} x {ny:,} grid is too large for WaveCluster (at most {MAX_WAVECLUSTER_CELLS:,} "
            "cells); use a larger cell or a smaller study area"
        )
    check_plan(plan_run(area, cell_m, mechanism="wavecluster", epsilon=epsilon, sensitivity=sensitivity),
               max_memory_bytes, cell_option="cell (--cell) or fewer cells (--grid)")
    return cell_m


def wavecluster_count_epsilon(method, epsilon, count_split):
    """The ε of WaveCluster's noisy counts (None for the exact method), for the run's plan."""
    if method == "exact" or epsilon is None:
        return None
    return epsilon * (count_split if count_split is not None else {"privthr": 0.9, "privthr-em": 0.7}.get(method, 1.0))


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
    unattended: bool = False,
    dataset: str | None = None,
    ledger=None,
    analyst: str | None = None,
    progress=None,
    scheduler=None,
    max_memory_bytes=None,
) -> Release:
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
    unattended : bool
        Conditions of the private data are warnings for the owner, not
        errors; a valid, possibly empty, layer is released (see
        :func:`dbscan_spans`).
    dataset, ledger, analyst
        The privacy-budget ledger's record of the release (see :func:`dbscan_spans`).
    progress : callable, optional
        ``progress(fraction, message)`` between stages and during long reads.
    scheduler : optional
        Count with Dask (see :func:`dbscan_spans`). ``baseline`` counts the
        same points on three more binnings; each is another counting pass
        (the input is read again, never held in memory; with a per-person
        cap the reservoir of kept points is recounted).
    max_memory_bytes : int or str, optional
        Refuse, before any data is read, a run whose grid and noise laws are
        estimated (:mod:`dpgeo.resources`) to need more memory than this
        (bytes, or e.g. ``"8G"``); default ``$DPGEO_MAX_MEMORY``, else half
        the machine's memory.

    Returns
    -------
    Release

    Examples
    --------
    >>> import numpy as np, dpgeo
    >>> rng = np.random.default_rng(0)
    >>> x = np.r_[rng.normal(300, 40, 4000), rng.normal(1400, 60, 4000)]
    >>> y = np.r_[rng.normal(300, 40, 4000), rng.normal(1200, 60, 4000)]
    >>> res = dpgeo.wavecluster((x, y, "EPSG:32615"), method="privthr", epsilon=1.0, cell_m=50,
    ...                         domain=(0, 0, 2000, 2000), domain_crs="EPSG:32615", crs="EPSG:32615", seed=1)
    >>> len(res.layer), res.metadata["method"]
    (2, 'privthr')
    """
    # -- validate (public inputs only) --
    if method not in WAVECLUSTER_METHODS:
        raise ParameterError(f"method must be one of {', '.join(WAVECLUSTER_METHODS)}; got {method!r}")
    if method != "exact":
        if epsilon is None:
            raise ParameterError(f"method {method!r} needs epsilon (the privacy budget)")
        epsilon = check_epsilon(epsilon)
    sensitivity, cap = _contribution(person, max_points_per_person, sensitivity)
    check_wavecluster_params(method=method, percentile=percentile, wavelet=wavelet, mode=mode,
                             count_split=count_split, count_cap=count_cap, n_public=n_public, k_rule=k_rule)
    check_seed(seed)
    protected = run_protected_files(points, domain, ledger)

    count_eps = wavecluster_count_epsilon(method, epsilon, count_split)

    def grid_for(area):
        return _wavecluster_grid(area, cell_m, grid_size, count_eps, sensitivity, max_memory_bytes)

    if not domain_from_data:
        domain = _study_area(domain, domain_crs, crs)
        _, grid_for = _fixed_grid(domain, grid_for)
    noise_src = NoiseSource(seed)
    # -- charge: before any private data is read; refused beyond the dataset's total --
    charge = start_charge(ledger=ledger, dataset=dataset, points=points, epsilon=epsilon,
                          mechanism=f"dp-wavecluster-{method}", analyst=analyst,
                          private=noise_src.private and not domain_from_data and method != "exact")
    with charge:
        # -- count (private; an error here cancels the charge: no noise yet) --
        with charge.before_noise():
            _progress(progress, 0.0, _reading_message(points, scheduler))
            counts = count_points(points, grid_for=grid_for, domain=domain, domain_crs=domain_crs, crs=crs,
                                  domain_from_data=domain_from_data, input_crs=input_crs, person=person, cap=cap,
                                  rng=noise_src, unattended=unattended, recountable=(method == "baseline"),
                                  scheduler=scheduler, progress=_reading(progress, 0.5))
            grid = counts.grid
        # -- mechanism (the only step that draws noise) --
        _progress(progress, 0.5, f"{method} on a {grid.nx} x {grid.ny} grid: wavelet approximation and threshold")
        res = _wavecluster_mechanism(counts, method=method, epsilon=epsilon, percentile=percentile,
                                     wavelet=wavelet, mode=mode, count_split=count_split, count_cap=count_cap,
                                     n_public=n_public, k_rule=k_rule, sensitivity=sensitivity, source=noise_src)
        diagnostics = counts.diagnostics
        del counts
        charge.complete()
    # -- layer (post-processing) --
    _progress(progress, 0.8, f"polygons for {res.n_clusters} clusters")
    flat = res.labels.ravel()
    cell_id = np.flatnonzero(flat)
    label = flat[cell_id].astype(np.int64)
    count = res.noisy_counts.ravel()[cell_id].astype(np.int64)
    layer = cluster_polygons(grid, cell_id, label, count, q=None if method == "exact" else res.q)
    md = base_metadata(method=method, mechanism=f"DP WaveCluster ({_WC_NAMES[method]})", epsilon=epsilon,
                       area=grid.area, source=noise_src, sensitivity=sensitivity,
                       person=_person_label(person), cap=cap)
    rep = dict(res.report)
    reasons = md["not_private_reasons"] + [r for r in rep.pop("not_private_reasons", [])
                                           if r not in md["not_private_reasons"]]
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
    md.update(charge.metadata())
    md["dp_count_interval"] = (
        "none: exact counts (not private)" if method == "exact" else
        "none: baseline counts are synthetic" if res.q is None else
        "95%: sum of released cell counts ± noise quantile, clipped at 0")
    _warn_if_not_private(md)
    _progress(progress, 1.0, "done")
    from ..mechanisms.dbscan import SpanCells

    cells = SpanCells(grid, cell_id, label, count, res.n_clusters)
    return Release(layer=layer, metadata=md, diagnostics=diagnostics, cells=cells, _protected=protected)


def _wavecluster_mechanism(counts: CellCounts, *, method, epsilon, percentile, wavelet, mode, count_split,
                           count_cap, n_public, k_rule, sensitivity, source):
    """Run one WaveCluster method on the counts (the baseline recounts the same points on its own grids)."""
    from ..mechanisms.wavecluster import wavecluster_baseline, wavecluster_cells

    grid = counts.grid
    if method == "baseline":
        return wavecluster_baseline(None, None, bounds=grid.bounds, shape=(grid.ny, grid.nx), epsilon=epsilon,
                                    percentile=percentile, wavelet=wavelet, mode=mode, n_public=n_public,
                                    sensitivity=sensitivity, rng=source, count_on=counts.recount)
    dense = counts.dense()
    res = wavecluster_cells(dense, method=method, epsilon=epsilon, percentile=percentile, wavelet=wavelet,
                            mode=mode, count_split=count_split, count_cap=count_cap, n_public=n_public,
                            sensitivity=sensitivity, universe=grid.universe_mask(), k_rule=k_rule, rng=source)
    if method == "exact":
        res.noisy_counts = dense  # the true counts: the output is not private anyway
    return res


_WC_NAMES = {"privthr": "PrivTHR", "privthr-em": "PrivTHR_EM", "privqt": "PrivQT",
             "baseline": "Baseline: DP synthetic points from adaptive grids", "exact": "exact, not private"}
