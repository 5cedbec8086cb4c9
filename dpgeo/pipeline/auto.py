"""DP-DBSCAN spans without a radius (``auto``): validate -> count on the finest grid -> mechanism -> two layers.

:func:`dpgeo.dbscan_spans` calls :func:`auto_spans` when neither ``radius_m`` nor
``min_points`` is given. One charge of ε to the ledger; the mechanism
(:mod:`dpgeo.mechanisms.auto`) releases a noisy total and one histogram from it.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from ..counting import count_points
from ..errors import ParameterError
from ..grid import Grid
from ..histogram import DEFAULT_MAX_DENSE_CELLS
from ..mechanisms.auto import auto_plan, auto_spans_cells
from ..mechanisms.dbscan import SpanCells
from ..mechanisms.levels import (
    DEFAULT_FDR,
    EXTENTS,
    MIN_MASS_SD,
    MIN_MASS_SHARE,
    MIN_PROMINENCE_SD,
    scale_mass,
    sum_noise_sd,
)
from ..mechanisms.resolution import (
    AUTO_MAX_CELLS,
    MAX_FINE_CELLS,
    TOTAL_SHARE,
    auto_budget,
    fine_width,
)
from ..noise import NoiseSource, discrete_laplace_q, noise_rate, sum_abs_bound
from ..polygons import cluster_polygons
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
    check_fraction,
)

__all__ = ["AUTO_MECHANISM", "auto_preview", "auto_spans", "check_auto_params"]

#: The mechanism's name in the metadata.
AUTO_MECHANISM = ("DP-DBSCAN spans, auto: cell width from a noisy total, density levels of one histogram "
                  "(Qiu & Yi's spans over every density threshold)")


def check_auto_params(epsilon, beta, fdr, extent):
    """Checked ``(epsilon, beta, fdr)`` of an ``auto`` run (a clear :class:`ParameterError` otherwise)."""
    epsilon = check_epsilon(epsilon)
    beta = check_fraction(beta, "beta (failure probability of the noise bound)")
    fdr = check_fraction(DEFAULT_FDR if fdr is None else fdr, "fdr (false-discovery rate of the floor)")
    if extent not in EXTENTS:
        raise ParameterError(f"extent must be 'grown' or 'core', got {extent!r}")
    eps0, eps1 = auto_budget(epsilon)
    return epsilon, beta, fdr, eps0, eps1


def _grid_for(epsilon_histogram, sensitivity, max_cells, max_memory_bytes):
    """``grid_for(area)``: the finest grid, after the memory of the largest run is checked (no data read)."""
    def grid_for(area):
        w0 = fine_width(area)
        minx, miny, maxx, maxy = area.polygon.bounds
        finest_auto = max(w0, math.sqrt((maxx - minx) * (maxy - miny) / max_cells))
        check_plan(plan_run(area, finest_auto, mechanism="dbscan", epsilon=epsilon_histogram, sensitivity=sensitivity,
                            kappa=9, histogram="dense", max_dense_cells=max_cells), max_memory_bytes,
                   cell_option="max_dense_cells")
        return Grid(area, w0)
    return grid_for


def auto_spans(points, *, epsilon, domain=None, domain_crs=None, crs=None, beta=0.05, fdr=None, extent="grown",
               sensitivity=1, person=None, max_points_per_person=None, seed=None, domain_from_data=False,
               input_crs=None, unattended=False, dataset=None, ledger=None, analyst=None, progress=None,
               scheduler=None, max_dense_cells=DEFAULT_MAX_DENSE_CELLS, max_memory_bytes=None) -> Release:
    """The ``auto`` run of :func:`dpgeo.dbscan_spans` (see there; parameters as there).

    Returns a :class:`~dpgeo.release.Release` whose ``layer`` is the flat map
    (each place in at most one cluster, with its ``level``) and whose
    ``levels`` is the tree of clusters over all density levels (nested
    polygons with ``parent_id``).
    """
    epsilon, beta, fdr, eps0, eps1 = check_auto_params(epsilon, beta, fdr, extent)
    if isinstance(max_dense_cells, bool) or not isinstance(max_dense_cells, numbers.Integral) or max_dense_cells < 1:
        raise ParameterError(f"max_dense_cells must be an integer >= 1, got {max_dense_cells!r}")
    sensitivity, cap = _contribution(person, max_points_per_person, sensitivity)
    noise_rate(eps0, sensitivity)  # the exact sampler's range, refused before the data is read
    noise_rate(eps1, sensitivity)
    check_seed(seed)
    protected = run_protected_files(points, domain, ledger)
    grid_for = _grid_for(eps1, sensitivity, min(int(max_dense_cells), AUTO_MAX_CELLS), max_memory_bytes)
    if not domain_from_data:  # the finest grid and the memory plan, before any data is read
        domain = _study_area(domain, domain_crs, crs)
        _, grid_for = _fixed_grid(domain, grid_for)
    noise_src = NoiseSource(seed)
    charge = start_charge(ledger=ledger, dataset=dataset, points=points, epsilon=epsilon,
                          mechanism="dp-dbscan-spans-auto", analyst=analyst,
                          private=noise_src.private and not domain_from_data)
    with charge:
        with charge.before_noise():
            _progress(progress, 0.0, _reading_message(points, scheduler))
            counts = count_points(points, grid_for=grid_for, domain=domain, domain_crs=domain_crs, crs=crs,
                                  domain_from_data=domain_from_data, input_crs=input_crs, person=person, cap=cap,
                                  rng=noise_src, unattended=unattended, scheduler=scheduler,
                                  progress=_reading(progress))
        _progress(progress, 0.4, "noisy total, cell width and the noisy histogram")
        fine = counts.grid
        run = auto_spans_cells(fine, counts.cell_id, counts.count, epsilon=epsilon, rng=noise_src,
                               sensitivity=sensitivity, fdr=fdr, extent=extent,
                               max_cells=min(int(max_dense_cells), AUTO_MAX_CELLS), beta=beta)
        diagnostics = counts.diagnostics
        del counts
        grid, hist, cl = run.grid, run.hist, run.clusters
        _progress(progress, 0.8, f"polygons for {cl.n_clusters} clusters and {len(cl.node_cells)} levels")
        layer = cluster_polygons(grid, cl.cell_id, cl.label, hist.lookup(cl.cell_id), q=hist.q)
        layer.insert(1, "level", cl.cluster_level)
        layer.insert(2, "level_top", cl.cluster_top)
        md = base_metadata(method="dbscan_spans", mechanism=AUTO_MECHANISM, epsilon=epsilon, area=grid.area,
                           source=noise_src, sensitivity=sensitivity, person=_person_label(person), cap=cap)
        md.update({"mode": "auto", "radius_m": None, "min_points": None, "beta": beta})
        md.update(run.settings)
        md["grid"] = grid.to_metadata()
        md["histogram"] = "dense"
        md["noise"] = "discrete Laplace (two-sided geometric)"
        md["noise_q"] = hist.q
        md["n_clusters"] = cl.n_clusters
        md["n_levels"] = len(cl.node_cells)
        md["n_span_cells"] = int(cl.cell_id.size)
        md["n_core_cells"] = cl.n_core_cells
        md["floor_guarantee"] = (f"among the cells shown, the expected share whose 3x3 neighbourhood holds no point "
                                 f"is at most {fdr:g} (Benjamini-Hochberg; see docs/privacy.md)")
        md["levels_guarantee"] = (f"with probability >= {1 - beta:g} every 3x3 sum is within "
                                  f"{run.settings['gamma_all_levels']:g} of its true value, and then at every level t "
                                  "each cluster lies inside one true cluster at t - Gamma and contains every true "
                                  "cluster at t + Gamma")
        md["dp_count_interval"] = "95%: sum of released cell counts ± noise quantile, clipped at 0"
        md.update(charge.metadata())
        charge.complete()
    _warn_if_not_private(md)
    _progress(progress, 1.0, "done")
    cells = SpanCells(grid, cl.cell_id, cl.label, hist.lookup(cl.cell_id), cl.n_clusters, cl.n_core_cells)
    return Release(layer=layer, metadata=md, diagnostics=diagnostics, cells=cells,
                   _levels=lambda: levels_layer(grid, hist, cl), _protected=protected)


def levels_layer(grid, hist, cl):
    """The tree of levels as nested polygons: ``level_id``, ``parent_id``, ``level``, ``level_top``, ..."""
    import pandas as pd

    n = len(cl.node_cells)
    if n:
        cells = np.concatenate(cl.node_cells)
        labels = np.repeat(np.arange(1, n + 1), [c.size for c in cl.node_cells])
    else:
        cells = labels = np.zeros(0, dtype=np.int64)
    lay = cluster_polygons(grid, cells, labels, hist.lookup(cells), q=hist.q)
    lay = lay.rename(columns={"cluster_id": "level_id"})
    nd = cl.nodes
    # the root (every cell above the floor) is listed last in the condensed tree: number it 1, top first
    order = np.arange(n)[::-1]
    new_id = np.empty(n, dtype=np.int64)
    new_id[order] = np.arange(1, n + 1)
    lay = lay.iloc[order].reset_index(drop=True)
    lay["level_id"] = np.arange(1, n + 1)
    par = np.asarray(nd["parent"])[order]
    lay.insert(1, "parent_id", pd.array([int(new_id[p]) if p >= 0 else None for p in par], dtype="Int64"))
    lay.insert(2, "level", np.asarray(nd["level"], dtype=float)[order])
    lay.insert(3, "level_top", np.asarray(nd["top"], dtype=float)[order])
    lay.insert(4, "stability", np.asarray(nd["stability"], dtype=float)[order])
    sel = np.asarray(nd["selected"])[order]
    lay.insert(5, "cluster_id", pd.array([int(s) if s > 0 else None for s in sel], dtype="Int64"))
    depth = np.zeros(n, dtype=np.int64)
    pidx = [int(new_id[p]) - 1 if p >= 0 else -1 for p in par]
    for i in range(n):  # parents come first
        depth[i] = depth[pidx[i]] + 1 if pidx[i] >= 0 else 0
    lay.insert(6, "depth", depth)
    return lay


def auto_preview(*, epsilon, domain, domain_crs=None, crs=None, fdr=None, sensitivity=1, n_points=None,
                 max_dense_cells=DEFAULT_MAX_DENSE_CELLS) -> dict:
    """What an ``auto`` run would do for this ε and study area, from public inputs alone (spends nothing).

    Parameters
    ----------
    n_points : int or sequence of int, optional
        Numbers of points to show the choice for (the run uses its noisy
        total); default ``10**3 ... 10**7``.

    Returns
    -------
    dict
        ``fine_cell_width_m``; ``by_points``: for each number of points, the
        ``cell_width_m``, ``n_cells``, ``smallest_cluster_points`` (the fewest
        points a cluster can hold and still be shown, concentrated in one
        cell) and ``floor_level_range`` (the lowest level shown lies in this
        range of noisy points per 3x3 cells: the floor of a map with signal
        everywhere, and of one with a single place of signal); the rule and
        its constants.

    Examples
    --------
    >>> p = auto_preview(epsilon=1.0, domain=(-93.33, 44.89, -93.19, 45.05), n_points=50_000)
    >>> row = p["by_points"][0]
    >>> row["n_points"], round(row["cell_width_m"]) > 50, row["smallest_cluster_points"] >= 20
    (50000, True, True)
    """
    epsilon, _, fdr, eps0, eps1 = check_auto_params(epsilon, 0.05, fdr, "grown")
    area = _study_area(domain, domain_crs, crs)
    w0 = fine_width(area)
    q = discrete_laplace_q(eps1, sensitivity)
    sd = sum_noise_sd(q)
    if n_points is None:
        n_points = [10 ** k for k in range(3, 8)]
    elif isinstance(n_points, numbers.Integral):
        n_points = [int(n_points)]
    rows = []
    for n in n_points:
        k, width = auto_plan(area, w0, n, epsilon_histogram=eps1, sensitivity=sensitivity,
                             max_cells=min(int(max_dense_cells), AUTO_MAX_CELLS))
        m = max(1, round(area.polygon.area / width ** 2))
        z_many = sum_abs_bound(9, q, 2 * fdr) if fdr < 0.5 else 0  # Pr[N > z] <= fdr: BH with signal everywhere
        z_one = sum_abs_bound(9, q, 2 * fdr / m)  # Pr[N > z] <= fdr / m: a single discovery
        smallest = max(z_one + 1, MIN_MASS_SD * sd, scale_mass(n, MIN_MASS_SHARE))
        rows.append({"n_points": int(n), "cell_width_m": width, "coarsening_factor": k, "n_cells": m,
                     "smallest_cluster_points": math.ceil(smallest),
                     "floor_level_range": [int(z_many) + 1, int(z_one) + 1]})
    return {
        "mode": "auto",
        "epsilon": epsilon,
        "epsilon_total": eps0,
        "epsilon_histogram": eps1,
        "total_share": TOTAL_SHARE,
        "fdr": fdr,
        "fine_cell_width_m": w0,
        "max_fine_cells": MAX_FINE_CELLS,
        "noise_sd_of_level": sd,
        "min_prominence": MIN_PROMINENCE_SD * sd,
        "level_unit": "noisy points in the 3x3 cells around a cell",
        "by_points": rows,
        "spends_budget": False,
    }
