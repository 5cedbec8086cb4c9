"""DP-DBSCAN spans without a radius (``auto``): the steps :class:`~dpgeo.declarations.spans.SpansMechanism` takes
when neither ``radius_m`` nor ``min_points`` is given.

The pipeline (:func:`dpgeo.pipeline.run.run_release`) is the same as for spans
with a radius: one charge of ε, the points counted once — here on the finest
grid of the study area — and the mechanism (:mod:`dpgeo.mechanisms.auto`)
releasing a noisy total and one histogram from those counts. The release
carries two layers: the flat map (each place in at most one cluster, with its
``level``) and the tree of levels (:attr:`dpgeo.release.Release.levels`, built
on first use).
"""

from __future__ import annotations

import functools
import math

import numpy as np

from ..declare import Outcome
from ..errors import ParameterError
from ..grid import Grid
from ..mechanisms.auto import auto_spans_cells, gamma_all_levels, occupancy_plan
from ..mechanisms.concentration import (
    CONCENTRATION_SHARE,
    FALLBACK_REFINEMENT,
    LARGE_CONCENTRATION_SHARE,
    OCCUPANCY_FDR,
    concentration_budget,
)
from ..mechanisms.dbscan import DEFAULT_BETA, SpanCells
from ..mechanisms.levels import (
    DEFAULT_FDR,
    FEW_CELLS_KERNEL,
    FEW_CELLS_SCALE,
    GROW_STEPS,
    MIN_MASS_SD,
    MIN_MASS_SHARE,
    MIN_PROMINENCE_SD,
    scale_mass,
    level_noise,
    sum_noise_sd,
)
from ..mechanisms.resolution import (
    AUTO_MAX_CELLS,
    MAX_FINE_CELLS,
    TOTAL_SHARE,
    auto_budget,
    cached_grid,
    fine_width,
)
from ..noise import discrete_laplace_q, noise_rate, sum_abs_bound
from ..polygons import cluster_polygons, nested_cluster_polygons
from ..resources import check_plan, plan_run
from ..pipeline._common import _crs_label, _progress

__all__ = [
    "AUTO_MECHANISM",
    "LEVEL_FIELDS",
    "auto_cell_width",
    "auto_grid",
    "auto_preview",
    "auto_run",
    "auto_setup",
    "check_auto",
    "is_auto",
    "levels_layer",
]

#: The mechanism's name in the metadata.
AUTO_MECHANISM = "DP-DBSCAN spans without a radius (auto: density levels of one histogram)"

#: The attributes the flat map adds to a cluster layer, and those of the levels layer.
LEVEL_FIELDS = {
    "level": "density (noisy points in the 3x3 cells around a cell) at which the cluster separates",
    "level_top": "highest density in the cluster (or where it splits, in the levels layer)",
}


def is_auto(p) -> bool:
    """Whether a run of spans has neither a radius nor MinPts (then it is ``auto``)."""
    return p.get("radius_m") is None and p.get("min_points") is None


def check_auto(p, params) -> None:
    """The spans' parameters together: both radius and MinPts, or neither; the settings of each kind of run
    (``params``: the spans' declared parameters, whose defaults the run without a radius must keep)."""
    if is_auto(p):
        grid_params = [q for q in params if q.name in ("eta", "histogram", "gamma")]
        given = [q.name for q in grid_params if p.get(q.name, q.default) != q.default]
        if given:
            raise ParameterError(f"{', '.join(given)} set(s) the grid of a run with a radius; without radius_m and "
                                 "min_points (auto) the grid and thresholds are chosen from epsilon: leave them out")
        return
    if p.get("radius_m") is None or p.get("min_points") is None:
        raise ParameterError("give both radius_m and min_points, or neither (auto: the cell width and the density "
                             "levels are then chosen from epsilon)")
    if p.get("fdr") is not None:
        raise ParameterError("fdr sets the floor of a run without a radius (auto); with radius_m and min_points the "
                             "core threshold is MinPts + Gamma")
    if p.get("levels"):
        raise ParameterError("levels (the tree of density levels) comes with a run without a radius (auto): leave "
                             "out radius_m and min_points")


def _cap(p) -> int:
    return min(int(p.get("max_dense_cells") or AUTO_MAX_CELLS), AUTO_MAX_CELLS)


def auto_budget_checked(epsilon, sensitivity):
    """``(ε₀, ε₁)`` of the total and of the histogram the clusters are read from, and the occupancy
    histogram's ``ε_c`` in between, all in the exact sampler's range (refused before anything is read or
    charged)."""
    eps0, eps_h = auto_budget(epsilon)
    eps_c, eps1 = concentration_budget(eps_h, CONCENTRATION_SHARE)
    for e in (eps0, eps_c, eps1, *concentration_budget(eps_h, LARGE_CONCENTRATION_SHARE)):
        noise_rate(e, sensitivity)
    return eps0, eps1


def auto_cell_width(area, p):
    """The smallest cell width ``auto`` could pick on ``area`` (metres): the run's largest grid."""
    minx, miny, maxx, maxy = area.polygon.bounds
    return max(fine_width(area), math.sqrt((maxx - minx) * (maxy - miny) / _cap(p)))


def auto_grid(area, p, c, max_memory_bytes=None) -> Grid:
    """The finest grid of ``area`` (the points are counted on it), after the memory of the largest histogram
    ``auto`` could release is checked."""
    eps1 = None if p.get("epsilon") is None else concentration_budget(auto_budget(p["epsilon"])[1])[1]
    check_plan(plan_run(area, auto_cell_width(area, p), mechanism="dbscan", epsilon=eps1, sensitivity=c.sensitivity,
                        kappa=9, histogram="dense", max_dense_cells=_cap(p)),
               max_memory_bytes, cell_option="max_dense_cells")
    return Grid(area, fine_width(area))


def auto_setup(grid, p, c) -> dict:
    """The public quantities of an ``auto`` run: the budget's two shares and the largest grid."""
    eps0, eps1 = auto_budget_checked(p["epsilon"], c.sensitivity)
    return {"auto": True, "epsilon_total": eps0, "epsilon_histogram": eps1, "max_cells": _cap(p),
            "fdr": DEFAULT_FDR if p.get("fdr") is None else p["fdr"]}


def auto_run(counts, p, c, setup, rng, progress) -> Outcome:
    """The noisy total, the grid it picks, the histogram and the clusters; the flat map and (lazily) the tree."""
    _progress(progress, 0.4, "noisy total, cell width, noisy histogram and density levels")
    run = auto_spans_cells(counts.grid, counts.cell_id, counts.count, epsilon=p["epsilon"], rng=rng,
                           sensitivity=c.sensitivity, fdr=setup["fdr"], extent=p.get("extent", "grown"),
                           max_cells=setup["max_cells"], beta=p.get("beta", DEFAULT_BETA))
    grid, hist, cl = run.grid, run.hist, run.clusters
    _progress(progress, 0.8, f"polygons for {cl.n_clusters} clusters")
    layer = cluster_polygons(grid, cl.cell_id, cl.label, hist.lookup(cl.cell_id), q=hist.q)
    layer.insert(1, "level", cl.cluster_level)
    layer.insert(2, "level_top", cl.cluster_top)
    layer["parts"] = _parts(layer)
    md = {"auto": True, "radius_m": None, "min_points": None, "beta": p.get("beta", DEFAULT_BETA)}
    md.update(run.settings)
    md["grid"] = grid.to_metadata()
    md["histogram"] = "dense"
    md["noise"] = "discrete Laplace (two-sided geometric)"
    md["noise_q"] = hist.q
    md["n_clusters"] = cl.n_clusters
    md["n_levels"] = len(cl.nodes["node"])  # one level per entry of the condensed tree
    md["n_span_cells"] = int(cl.cell_id.size)
    md["n_core_cells"] = cl.n_core_cells
    md["floor_guarantee"] = (f"among the cells a cluster may cover, the expected share whose 3x3 neighbourhood holds "
                             f"no point is at most {setup['fdr']:g} (Benjamini-Hochberg; see docs/privacy.md)")
    if run.settings.get("n_floor_bridge_cells"):
        md["floor_guarantee"] += (f"; not so for the floor's {run.settings['n_floor_bridge_cells']} bridge cells, "
                                  "kept where points along lines through them join pieces of the floor (measured, "
                                  "not proved: docs/privacy.md)")
    md["levels_guarantee"] = (f"with probability >= {1 - md['beta']:g} every 3x3 sum is within "
                              f"{run.settings['gamma_all_levels']:g} of its true value, and then at every level t "
                              "each cluster lies inside one true cluster at t - Gamma and contains every true cluster "
                              "at t + Gamma")
    md["dp_count_interval"] = "95%: sum of released cell counts ± noise quantile, clipped at 0"
    md["parts_rule"] = ("no two clusters are neighbours (a grown cell next to another cluster is left out); a "
                        "cluster's cells are connected through edges or corners, and parts > 1 where they meet "
                        "only at a corner or the study area's edge cuts them")
    if cl.n_clusters == 0:
        md["too_small"] = (f"no cluster: at this epsilon a group must hold about {smallest_group(run.settings)} "
                           "points to be shown (preview says it before reading any data)")
    if p.get("levels"):
        md["levels_layer"] = True  # files written from this release carry the tree of levels too
    cells = SpanCells(grid, cl.cell_id, cl.label, hist.lookup(cl.cell_id), cl.n_clusters, cl.n_core_cells)
    return Outcome(layer, md, cells, levels=lambda: levels_layer(grid, hist, cl))


def _parts(layer) -> np.ndarray:
    """How many polygons each cluster's outline has."""
    import shapely

    return shapely.get_num_geometries(layer.geometry.values).astype(np.int64)


def smallest_group(settings) -> int:
    """The fewest points a compact group needs to be shown (public: the floor and the minimum mass)."""
    return int(math.ceil(max(settings.get("min_cluster_mass", 0.0), settings.get("floor_level") or 0.0)))


def levels_layer(grid, hist, cl):
    """The tree of levels as nested polygons: ``level_id``, ``parent_id``, ``level``, ``level_top``, ..."""
    import pandas as pd

    nd = cl.nodes
    n = len(nd["node"])
    # every entry's polygon from the one list of cells, each with its deepest entry (a cell is read once,
    # not once for each entry it lies in)
    cells = cl.tree.cell_id if n else np.zeros(0, dtype=np.int64)
    lay = nested_cluster_polygons(grid, cells, cl.cell_entry, nd["parent"], hist.lookup(cells), q=hist.q)
    lay = lay.rename(columns={"cluster_id": "level_id"})
    # the root (every cell above the floor) is listed last in the condensed tree: number it 1, top first
    order = np.arange(n)[::-1]
    new_id = np.empty(n, dtype=np.int64)
    new_id[order] = np.arange(1, n + 1)
    lay = lay.iloc[order].reset_index(drop=True)
    lay["level_id"] = np.arange(1, n + 1)
    par = np.asarray(nd["parent"])[order]
    lay.insert(1, "parent_id", pd.array([int(new_id[q]) if q >= 0 else None for q in par], dtype="Int64"))
    lay.insert(2, "level", np.asarray(nd["level"], dtype=float)[order])
    lay.insert(3, "level_top", np.asarray(nd["top"], dtype=float)[order])
    lay.insert(4, "stability", np.asarray(nd["stability"], dtype=float)[order])
    sel = np.asarray(nd["selected"])[order]
    lay.insert(5, "cluster_id", pd.array([int(s) if s > 0 else None for s in sel], dtype="Int64"))
    depth = np.zeros(n, dtype=np.int64)
    pidx = [int(new_id[q]) - 1 if q >= 0 else -1 for q in par]
    for i in range(n):  # parents come first
        depth[i] = depth[pidx[i]] + 1 if pidx[i] >= 0 else 0
    lay.insert(6, "depth", depth)
    return lay


def auto_preview(area, p, c) -> dict:
    """What an ``auto`` run would do for this ε and study area, from public inputs alone (spends nothing).

    For each number of points in ``p["n_points"]`` (default ``10**3 ... 10**7``;
    the run uses its noisy total): the ``cell_width_m`` and ``n_cells`` (the
    cells of the grid it would release where the points spread over the study
    area, as the run counts them: with few cells, where the occupancy
    histogram finds no part that stands out, a little finer than the uniform
    rule's), the
    ``smallest_cluster_points`` (the fewest points a cluster can hold and still
    be shown, concentrated in one cell), ``smallest_group_points`` (the fewest
    points of a compact group in an otherwise empty study area that the map
    can show: the occupancy histogram must find it, then the map show it;
    with fewer the map says the data is too small for the budget), ``floor_level_range`` (the lowest
    level shown lies in this range of noisy points per 3x3 cells: the floor of
    a map with points everywhere, and of one with a single place of points)
    ``gamma_all_levels`` (Γ: with probability ``1 - beta`` every level is
    within Γ of its true value, as the run's metadata states it), ``max_refinement`` (how many times finer
    than ``cell_width_m`` the occupancy step may make the cells where the points are compact) and
    ``concentration_share`` (the occupancy histogram's share of the histogram's ε at that number of
    points; 0 where the grid is the largest allowed already). The split of ε stated once (``epsilon_occupancy``,
    ``epsilon_histogram``, ``noise_sd_of_level``) is that of the number of points given, or without one that
    of a uniform grid of more than 1,024 cells.

    Examples
    --------
    >>> import dpgeo
    >>> pv = dpgeo.noise_preview(epsilon=1.0, domain=(-93.33, 44.89, -93.19, 45.05), n_points=50_000)
    >>> row = pv["by_points"][0]
    >>> row["n_points"], round(row["cell_width_m"]) > 50, row["smallest_cluster_points"] >= 20
    (50000, True, True)
    """
    eps0, _ = auto_budget_checked(p["epsilon"], c.sensitivity)
    eps_h = auto_budget(p["epsilon"])[1]
    fdr = DEFAULT_FDR if p.get("fdr") is None else p["fdr"]
    w0 = fine_width(area)
    n_points = p.get("n_points")
    n_points = [10 ** k for k in range(3, 8)] if n_points is None else [int(n_points)]
    beta = p.get("beta", DEFAULT_BETA)
    rows, splits = [], []
    grid_of = functools.partial(cached_grid, {}, area, w0)  # each grid made once (public: the study area)
    for n in n_points:
        plan = occupancy_plan(area, w0, n, epsilon_histogram=eps_h, sensitivity=c.sensitivity, max_cells=_cap(p),
                              grid_of=grid_of)  # the run's own rule
        few, share, refinement = plan.few, plan.share, plan.refinement
        eps_c, eps1, k = plan.epsilon_occupancy, plan.epsilon_histogram, plan.factor
        splits.append((share, eps_c, eps1))
        q = discrete_laplace_q(eps1, c.sensitivity)
        q_c = discrete_laplace_q(eps_c, c.sensitivity) if share > 0 else None
        sd = sum_noise_sd(q)
        if share > 0 and few:  # spread points: the occupancy histogram finds no part, the cells a little finer
            k = int(min(k, max(plan.k_min, round(k / FALLBACK_REFINEMENT))))
        width = k * w0
        m = grid_of(k).n_cells  # the universe cells of the grid the run would release (public: the study area)
        z_many = sum_abs_bound(9, q, 2 * fdr) if fdr < 0.5 else 0  # Pr[N > z] <= fdr: points everywhere
        z_one = sum_abs_bound(9, q, 2 * fdr / m)  # Pr[N > z] <= fdr / m: a single discovery
        scale = FEW_CELLS_SCALE if few else 1.0  # few cells: a smaller share of the map's scale, as the run
        smallest = max(z_one + 1, MIN_MASS_SD * sd, scale * scale_mass(n, MIN_MASS_SHARE))
        # a compact group in a large empty study area, few cells (wide ones): the occupancy histogram must find
        # its cell first; with more cells the uniform ones show it whether or not the occupancy step finds it
        z_occ = sum_abs_bound(1, q_c, 2 * OCCUPANCY_FDR / m) if share > 0 and few else 0
        # the cell width of points spread over the study area; compact points get cells up to `refinement` finer
        rows.append({"n_points": int(n), "cell_width_m": width, "coarsening_factor": k, "n_cells": m,
                     "smallest_cluster_points": math.ceil(smallest),
                     "smallest_group_points": math.ceil(max(smallest, z_occ + 1)), "occupancy_step": share > 0,
                     "max_refinement": refinement, "concentration_share": share,
                     "floor_level_range": [int(z_many) + 1, int(z_one) + 1],
                     "gamma_all_levels": int(gamma_all_levels(q, m, beta))})
    kernel = "box"
    if len(splits) == 1:  # the split of the number of points given; without one, of more than 1,024 cells
        share, eps_c, eps1 = splits[0]
        kernel = FEW_CELLS_KERNEL if few else "box"  # the run's density kernel, and so the noise of a level
    else:
        share = LARGE_CONCENTRATION_SHARE
        eps_c, eps1 = concentration_budget(eps_h, share)
    sd = level_noise(discrete_laplace_q(eps1, c.sensitivity), kernel)[0]
    return {
        "auto": True,
        "epsilon": p["epsilon"],
        "epsilon_total": eps0,
        "epsilon_occupancy": eps_c,
        "concentration_share": share,
        "epsilon_histogram": eps1,
        "total_share": TOTAL_SHARE,
        "fdr": fdr,
        "fine_cell_width_m": w0,
        "max_fine_cells": MAX_FINE_CELLS,
        "max_cells": _cap(p),
        "noise_sd_of_level": sd,
        "min_prominence": MIN_PROMINENCE_SD * sd,
        "grow_steps": GROW_STEPS,
        "level_unit": "noisy points in the 3x3 cells around a cell",
        "working_crs": _crs_label(area.crs),
        "by_points": rows,
        "spends_budget": False,
    }
