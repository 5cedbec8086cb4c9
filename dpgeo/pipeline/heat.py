"""Heat (count) layers, density bands and hot spots: validate -> cells -> charge -> count -> release -> layer."""

from __future__ import annotations

import math

from ..counting import count_points
from ..errors import ParameterError
from ..grid import Grid
from ..histogram import (
    DEFAULT_MAX_DENSE_CELLS,
    DEFAULT_MAX_FALSE_CELLS,
    choose_histogram,
    sparse_threshold,
)
from ..mechanisms.heat import cell_hotspots, count_layer, density_bands
from ..mechanisms.hotspots import HOTSPOT_CLASSES
from ..noise import NoiseSource, discrete_laplace_q, discrete_laplace_variance, noise_rate, sum_interval_halfwidth
from ..randomness import check_seed
from ..release import Release, run_protected_files, start_charge
from ..resources import check_plan, plan_run
from ._common import (
    _contribution,
    _fixed_grid,
    _person_label,
    _progress,
    _reading,
    _reading_message,
    _study_area,
    _warn_if_not_private,
    base_metadata,
    check_epsilon,
    check_int,
    check_positive,
)
from .dbscan import _release_histogram

__all__ = ["heat", "hotspots"]

_CLAMP = ("dp_count is the released noisy count clamped at 0 (post-processing; dp_count_raw is the release itself, "
          "unbiased and may be negative); dp_count_low/high: 95% interval of the true count, clipped at 0")


def _cells_setup(cell_m, h3_resolution):
    if (cell_m is None) == (h3_resolution is None):
        raise ParameterError("give exactly one of cell_m (square cells, metres) and h3_resolution (H3 cells, 0-15)")
    if cell_m is not None:
        return check_positive(cell_m, "cell_m (cell width)", " (metres)"), None
    from ..h3cells import check_resolution, require_h3

    require_h3()
    return None, check_resolution(h3_resolution)


def _grid_maker(cell_m, h3_resolution, *, epsilon, sensitivity, histogram, max_dense_cells, max_false_cells,
                max_memory_bytes, need_dense):
    def grid_for(area):
        if h3_resolution is not None:
            from ..h3cells import H3Cells

            grid = H3Cells(area, h3_resolution)
        else:
            check_plan(plan_run(area, cell_m, mechanism="dbscan", epsilon=epsilon, sensitivity=sensitivity, kappa=1,
                                histogram=histogram, max_dense_cells=max_dense_cells,
                                max_false_cells=max_false_cells), max_memory_bytes, cell_option="cell width")
            grid = Grid(area, cell_m)
        if need_dense and grid.n_cells > max_dense_cells:
            raise ParameterError(f"{need_dense} need every cell's noisy count (a dense release), and the study area "
                                 f"has {grid.n_cells:,} cells (at most {max_dense_cells:,}): use larger cells (a "
                                 "coarser H3 resolution) or raise max_dense_cells")
        return grid
    return grid_for


def _release(points, *, epsilon, domain, domain_crs, crs, cell_m, h3_resolution, histogram, sensitivity, person,
             max_points_per_person, seed, input_crs, unattended, dataset, ledger, analyst, progress, scheduler,
             max_dense_cells, max_false_cells, max_memory_bytes, mechanism, need_dense, post):
    """The shared run: public cells, charge, count, one noisy histogram, then ``post(hist, md)`` → layer."""
    epsilon = check_epsilon(epsilon)
    cell_m, h3_resolution = _cells_setup(cell_m, h3_resolution)
    if histogram not in ("auto", "dense", "sparse"):
        raise ParameterError(f"histogram must be 'auto', 'dense' or 'sparse', got {histogram!r}")
    if need_dense:
        if histogram == "sparse":
            raise ParameterError(f"{need_dense} need a dense release: histogram must be 'auto' or 'dense'")
        histogram = "dense"
    sensitivity, cap = _contribution(person, max_points_per_person, check_int(sensitivity, "sensitivity"))
    check_seed(seed)
    noise_rate(epsilon, sensitivity)  # the exact sampler's range, before any data is read
    protected = run_protected_files(points, domain, ledger)
    grid_for = _grid_maker(cell_m, h3_resolution, epsilon=epsilon, sensitivity=sensitivity, histogram=histogram,
                           max_dense_cells=max_dense_cells, max_false_cells=max_false_cells,
                           max_memory_bytes=max_memory_bytes, need_dense=need_dense)
    area = _study_area(domain, domain_crs, crs)
    grid, grid_for = _fixed_grid(area, grid_for)
    kind = choose_histogram(grid, histogram, max_dense_cells=max_dense_cells)
    q = discrete_laplace_q(epsilon, sensitivity)
    theta = sparse_threshold(grid.n_cells, q, max_false_cells) if kind == "sparse" else None
    noise_src = NoiseSource(seed)
    charge = start_charge(ledger=ledger, dataset=dataset, points=points, epsilon=epsilon, mechanism=mechanism,
                          analyst=analyst, private=noise_src.private)
    with charge:
        with charge.before_noise():
            _progress(progress, 0.0, _reading_message(points, scheduler))
            counts = count_points(points, grid_for=grid_for, domain=area, crs=crs, input_crs=input_crs,
                                  person=person, cap=cap, rng=noise_src, unattended=unattended, scheduler=scheduler,
                                  progress=_reading(progress))
        _progress(progress, 0.4, f"noisy {kind} counts of {grid.n_cells:,} cells")
        hist = _release_histogram(counts, kind=kind, epsilon=epsilon, sensitivity=sensitivity, theta=theta,
                                  rng=noise_src)
        diagnostics = counts.diagnostics
        del counts
        md = base_metadata(method=mechanism.replace("-", "_"), mechanism=mechanism, epsilon=epsilon, area=grid.area,
                           source=noise_src, sensitivity=sensitivity, person=_person_label(person), cap=cap)
        md.update(_cells_metadata(grid, hist, kind, theta, q))
        _progress(progress, 0.6, "layer")
        layer = post(hist, md)
        md.update(charge.metadata())
        charge.complete()
    _warn_if_not_private(md)
    _progress(progress, 1.0, "done")
    return Release(layer=layer, metadata=md, diagnostics=diagnostics, cells=hist, _protected=protected)


def _cells_metadata(grid, hist, kind, theta, q):
    md = {"noise": "discrete Laplace (two-sided geometric)", "noise_q": q,
          "noise_variance_per_cell": discrete_laplace_variance(q),
          "count_error_95": sum_interval_halfwidth(1, q, 0.95), "histogram": kind, "theta": theta,
          "n_cells": grid.n_cells, "grid": grid.to_metadata(), "clamp": _CLAMP,
          "dp_count_interval": "95%: released count ± the 95% half-width of its noise, clipped at 0"}
    if getattr(grid, "kind", None) == "h3":
        md["cells"] = "H3"
        md["h3_resolution"] = grid.resolution
    else:
        md["cells"] = "square"
        md["cell_width_m"] = grid.cell_m
    if kind == "sparse":
        md["layer_cells"] = (f"sparse release: only cells whose noisy count reached theta = {theta} are in the "
                             "layer; every other cell of the study area was released as 0")
    else:
        md["layer_cells"] = "dense release: every cell that intersects the study area is in the layer"
    return md


def heat(points, *, epsilon: float, domain, cell_m: float | None = None, h3_resolution: int | None = None,
         bands: int | None = None, bandwidth_m: float | None = None, domain_crs=None, crs=None,
         histogram: str = "auto", sensitivity: int = 1, person=None, max_points_per_person: int | None = None,
         seed: int | None = None, input_crs=None, unattended: bool = False, dataset: str | None = None, ledger=None,
         analyst: str | None = None, progress=None, scheduler=None, max_dense_cells: int = DEFAULT_MAX_DENSE_CELLS,
         max_false_cells: int = DEFAULT_MAX_FALSE_CELLS, max_memory_bytes=None) -> Release:
    """ε-DP point counts per cell (square or H3) as a polygon layer, or smoothed density bands.

    One release: exact discrete Laplace noise on the count of every cell
    that intersects the public study area (:mod:`dpgeo.histogram`; sensitivity
    = points per record), charged once before any data is read. Everything
    else — clamping, intervals, smoothing, bands — is post-processing.

    Parameters
    ----------
    points
        The private points (as for :func:`dpgeo.dbscan_spans`).
    epsilon : float
        Privacy budget ε of the release (δ = 0).
    domain
        The **public** study area; points outside it are dropped.
    cell_m : float, optional
        Square cells of this width in metres, anchored to the study area.
    h3_resolution : int, optional
        H3 cells of this resolution (0–15; 9 ≈ 0.1 km², 174 m edges) instead.
    bands : int, optional
        Publish ``bands`` smoothed density bands (polygons with their DP
        count) instead of the cells; needs a dense release.
    bandwidth_m : float, optional
        σ of the Gaussian smoothing kernel in metres (default: 2 cell widths,
        or 2 H3 centre spacings).
    histogram : {"auto", "dense", "sparse"}
        Noise every cell (dense) or only non-empty ones plus exact false cells
        (sparse, above θ); ``auto`` decides from the number of cells (public).
    sensitivity, person, max_points_per_person, seed, input_crs, unattended, dataset, ledger, analyst, progress,
    scheduler, max_dense_cells, max_false_cells, max_memory_bytes
        As for :func:`dpgeo.dbscan_spans`.

    Returns
    -------
    Release
        ``layer``: one feature per cell with ``cell_id``, ``h3`` (H3 only),
        ``dp_count`` (clamped at 0), ``dp_count_low``, ``dp_count_high``,
        ``dp_count_raw``; or, with ``bands``, one feature per band.
        ``cells``: the released histogram.

    Examples
    --------
    >>> import numpy as np, dpgeo
    >>> rng = np.random.default_rng(0)
    >>> x, y = rng.normal(500, 80, 2000), rng.normal(500, 80, 2000)
    >>> r = dpgeo.heat((x, y, "EPSG:32615"), epsilon=1.0, cell_m=100, domain=(0, 0, 1000, 1000),
    ...                domain_crs="EPSG:32615", seed=1, ledger=False)
    >>> len(r.layer), r.metadata["histogram"], int(r.layer["dp_count_raw"].sum()) - 2000 < 100
    (100, 'dense', True)
    """
    if bands is not None:
        bands = check_int(bands, "bands", 1)
        if bands > 20:
            raise ParameterError(f"bands must be at most 20, got {bands}")
    if bandwidth_m is not None:
        bandwidth_m = check_positive(bandwidth_m, "bandwidth_m (smoothing kernel)", " (metres)")

    def post(hist, md):
        if bands is None:
            return count_layer(hist)
        bw = bandwidth_m if bandwidth_m is not None else 2.0 * _spacing(hist.grid)
        layer, bmd = density_bands(hist, n_bands=bands, bandwidth_m=bw)
        md.update(bmd)
        md["layer"] = "density bands"
        md["bands_bandwidth_m"] = bw
        return layer

    mechanism = "dp-heat-bands" if bands is not None else "dp-heat"
    return _release(points, epsilon=epsilon, domain=domain, domain_crs=domain_crs, crs=crs, cell_m=cell_m,
                    h3_resolution=h3_resolution, histogram=histogram, sensitivity=sensitivity, person=person,
                    max_points_per_person=max_points_per_person, seed=seed, input_crs=input_crs,
                    unattended=unattended, dataset=dataset, ledger=ledger, analyst=analyst, progress=progress,
                    scheduler=scheduler, max_dense_cells=max_dense_cells, max_false_cells=max_false_cells,
                    max_memory_bytes=max_memory_bytes, mechanism=mechanism,
                    need_dense="density bands" if bands is not None else None, post=post)


def _spacing(grid) -> float:
    return grid.spacing_m if getattr(grid, "kind", None) == "h3" else grid.cell_m


def hotspots(points, *, epsilon: float, domain, cell_m: float | None = None, h3_resolution: int | None = None,
             radius_m: float | None = None, k: int = 1, fdr: bool = False, domain_crs=None, crs=None,
             sensitivity: int = 1, person=None, max_points_per_person: int | None = None, seed: int | None = None,
             input_crs=None, unattended: bool = False, dataset: str | None = None, ledger=None,
             analyst: str | None = None, progress=None, scheduler=None,
             max_dense_cells: int = DEFAULT_MAX_DENSE_CELLS, max_memory_bytes=None) -> Release:
    """Getis-Ord Gi* hot and cold spots of ε-DP cell counts, with a test that accounts for the noise.

    The counts are released exactly as by :func:`heat` (dense); Gi* and its
    classes are post-processing (:mod:`dpgeo.mechanisms.hotspots`).

    Parameters
    ----------
    radius_m : float, optional
        Square cells: the neighbourhood is every cell whose centre is within
        ``radius_m`` of the cell's (itself included). Default ``1.5 × cell_m``
        (the 3 × 3 block).
    k : int
        H3 cells: the neighbourhood is the ``k``-ring (``1``: the cell and its
        six neighbours).
    fdr : bool
        Benjamini–Hochberg false-discovery-rate cut-offs instead of the plain
        90/95/99% ones.

    Other parameters as for :func:`heat`.

    Returns
    -------
    Release
        ``layer``: the cells of :func:`heat` plus ``gi_z``, ``gi_p``,
        ``gi_bin`` (−3…3) and ``hotspot`` (the seven classes).

    Examples
    --------
    >>> import numpy as np, dpgeo
    >>> rng = np.random.default_rng(0)
    >>> x = np.r_[rng.uniform(0, 2000, 4000), rng.normal(700, 60, 1500)]
    >>> y = np.r_[rng.uniform(0, 2000, 4000), rng.normal(1300, 60, 1500)]
    >>> r = dpgeo.hotspots((x, y, "EPSG:32615"), epsilon=1.0, cell_m=100, domain=(0, 0, 2000, 2000),
    ...                    domain_crs="EPSG:32615", crs="EPSG:32615", seed=3, ledger=False)
    >>> hot = r.layer[r.layer["gi_bin"] == 3]
    >>> bool(hot.geometry.union_all().contains(__import__("shapely").Point(700, 1300)))
    True
    """
    k = check_int(k, "k (H3 ring)", 1)
    if k > 20:
        raise ParameterError(f"k must be at most 20, got {k}")
    if radius_m is not None:
        radius_m = check_positive(radius_m, "radius_m (neighbourhood)", " (metres)")
    if cell_m is not None and h3_resolution is None:
        cm = check_positive(cell_m, "cell_m (cell width)", " (metres)")
        radius_m = 1.5 * cm if radius_m is None else radius_m
        if radius_m < cm:
            raise ParameterError(f"radius_m ({radius_m:g} m) must be at least the cell width ({cm:g} m), or the "
                                 "neighbourhood is the cell alone")
        if (2 * math.floor(radius_m / cm) + 1) ** 2 > 40_000:
            raise ParameterError(f"radius_m ({radius_m:g} m) spans too many cells of {cm:g} m: use a smaller radius "
                                 "or larger cells")

    def post(hist, md):
        res = cell_hotspots(hist, radius_m=radius_m, k=k, fdr=fdr)
        layer = count_layer(hist, extra={"gi_z": res.gi_z, "gi_p": res.gi_p, "gi_bin": res.gi_bin,
                                         "hotspot": res.hotspot})
        md["layer"] = "cells with Getis-Ord Gi* hot/cold spot classes"
        md["hotspot_statistic"] = "Getis-Ord Gi* (star: the cell is in its own neighbourhood), binary weights"
        md["hotspot_neighbourhood"] = (f"H3 {k}-ring" if h3_resolution is not None else
                                       f"cells whose centre is within {radius_m:g} m")
        md["hotspot_test"] = ("two-sided; null: the true counts are exchangeable over the cells and the noise is i.i.d. "
                              "discrete Laplace, so the released counts are exchangeable: p-value from the exact law "
                              "of a sum of W draws from the released counts (noise included)")
        md["hotspot_fdr"] = bool(fdr)
        md["hotspot_cutoffs"] = res.cutoffs
        md["hotspot_classes"] = {str(kk): v for kk, v in HOTSPOT_CLASSES.items()}
        md["hotspot_variance"] = {"released": res.s2_total, "noise": res.s2_noise, "true_estimated": res.s2_true}
        md["hotspot_counts"] = {HOTSPOT_CLASSES[b]: int((res.gi_bin == b).sum()) for b in range(3, -4, -1)}
        return layer

    return _release(points, epsilon=epsilon, domain=domain, domain_crs=domain_crs, crs=crs, cell_m=cell_m,
                    h3_resolution=h3_resolution, histogram="dense", sensitivity=sensitivity, person=person,
                    max_points_per_person=max_points_per_person, seed=seed, input_crs=input_crs,
                    unattended=unattended, dataset=dataset, ledger=ledger, analyst=analyst, progress=progress,
                    scheduler=scheduler, max_dense_cells=max_dense_cells, max_false_cells=DEFAULT_MAX_FALSE_CELLS,
                    max_memory_bytes=max_memory_bytes, mechanism="dp-hotspots", need_dense="hot spots", post=post)
