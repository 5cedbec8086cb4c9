"""DP-DBSCAN spans and the free noise preview: validate -> count -> mechanism -> layer."""

from __future__ import annotations

import math

from ..counting import CellCounts, count_points
from ..domain import as_study_area
from ..errors import ParameterError
from ..grid import Grid, cell_width_for_radius, neighbourhood_offsets
from ..histogram import (
    DEFAULT_MAX_DENSE_CELLS,
    DEFAULT_MAX_FALSE_CELLS,
    choose_histogram,
    dense_histogram,
    sparse_histogram,
    sparse_threshold,
)
from ..mechanisms.dbscan import DEFAULT_BETA, EXTENTS, dbscan_cells, noise_bound
from ..noise import NoiseSource, discrete_laplace_q, noise_rate, sum_interval_halfwidth
from ..polygons import cluster_polygons
from ..randomness import check_seed
from ..release import Release, run_protected_files, start_charge
from ..resources import check_plan, plan_run
from ._common import (
    _contribution,
    _crs_label,
    _fixed_grid,
    _person_label,
    _progress,
    _reading,
    _reading_message,
    _study_area,
    _warn_if_not_private,
    base_metadata,
    check_epsilon,
    check_fraction,
    check_int,
    check_positive,
)

__all__ = ["dbscan_spans", "noise_preview"]


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
    noise_rate(epsilon, sensitivity)  # the exact sampler's range, refused here rather than after the data is read
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
    radius_m: float | None = None,
    min_points: int | None = None,
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
    fdr: float | None = None,
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
    radius_m : float, optional
        DBSCAN radius α in metres.
    min_points : int, optional
        DBSCAN MinPts: a span must certainly hold cells whose α-neighbourhood
        holds at least this many points. Give both ``radius_m`` and
        ``min_points``, or neither: then the run is **auto** — 5% of ε buys a
        noisy total that fixes the cell width, the rest one histogram, and
        the clusters are chosen over every density level of it
        (:mod:`dpgeo.pipeline.auto`); the release then also has ``levels``,
        the tree of clusters, and its layer a ``level`` per cluster.
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
    fdr : float, optional
        Auto only: the false-discovery rate of the floor (default 0.1): among
        the cells a cluster may cover, the expected share whose
        neighbourhood holds no point at all.

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

    Without ``radius_m`` and ``min_points`` (auto):

    >>> res = dpgeo.dbscan_spans((x, y, "EPSG:32615"), epsilon=1.0, domain=(0, 0, 2000, 2000),
    ...                          domain_crs="EPSG:32615", seed=1)
    >>> len(res.layer), res.metadata["mode"], list(res.levels.columns[:3])
    (1, 'auto', ['level_id', 'parent_id', 'level'])
    """
    if radius_m is None and min_points is None:
        _check_auto_only(eta, histogram, gamma)
        from .auto import auto_spans

        return auto_spans(points, epsilon=epsilon, domain=domain, domain_crs=domain_crs, crs=crs, beta=beta, fdr=fdr,
                          extent=extent, sensitivity=sensitivity, person=person,
                          max_points_per_person=max_points_per_person, seed=seed, domain_from_data=domain_from_data,
                          input_crs=input_crs, unattended=unattended, dataset=dataset, ledger=ledger,
                          analyst=analyst, progress=progress, scheduler=scheduler, max_dense_cells=max_dense_cells,
                          max_memory_bytes=max_memory_bytes)
    _check_fixed_only(radius_m, min_points, fdr)
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


def _check_auto_only(eta, histogram, gamma):
    """Settings of a run with a radius are refused without one (auto), rather than silently ignored."""
    given = [name for name, v, default in (("eta", eta, 1.0), ("histogram", histogram, "auto"),
                                           ("gamma", gamma, "laplace")) if v != default]
    if given:
        raise ParameterError(f"{', '.join(given)} set(s) the grid of a run with a radius; without radius_m and "
                             "min_points (auto) the grid and thresholds are chosen from epsilon: leave them out")


def _check_fixed_only(radius_m, min_points, fdr):
    if radius_m is None or min_points is None:
        raise ParameterError("give both radius_m and min_points, or neither (auto: the cell width and the density "
                             "levels are then chosen from epsilon)")
    if fdr is not None:
        raise ParameterError("fdr sets the floor of a run without a radius (auto); with radius_m and min_points the "
                             "core threshold is MinPts + Gamma")


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
    radius_m: float | None = None,
    min_points: int | None = None,
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
    n_points=None,
) -> dict:
    """What a DP-DBSCAN run would look like, from public parameters alone (spends no budget).

    Returns Γ, MinPts′ and the expected count error for the given ε, so a
    budget can be chosen before any data is touched. Without ``radius_m``
    and ``min_points``: what an auto run would do
    (:func:`dpgeo.pipeline.auto.auto_preview`: its cell width and smallest
    cluster for ``n_points`` points, and the range of its lowest level).

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
    if radius_m is None and min_points is None:
        _check_auto_only(eta, histogram, gamma)
        from .auto import auto_preview

        return auto_preview(epsilon=epsilon, domain=domain, domain_crs=domain_crs, crs=crs, sensitivity=sensitivity,
                            n_points=n_points, max_dense_cells=max_dense_cells)
    _check_fixed_only(radius_m, min_points, None)
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
