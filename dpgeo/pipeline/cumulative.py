"""Running totals of a series (``cumulative=True``): the binary-tree mechanism on the cell counts of a public grid.

Instead of the mechanism's layer per period, a cumulative series releases,
for every period ``t``, the noisy number of points in each cell of the
mechanism's public grid from the series' start to the end of ``t``
(:func:`dpgeo.mechanisms.tree.tree_running_totals`): the error of a running
total grows with ``log T`` instead of with the number of periods summed. The
input is read once, as for every series; the release is one ε-DP mechanism
over all periods, charged once (docs/privacy.md §6, "Running totals").

The layer of period ``t``: the cells whose running total's 95% interval
lies above 0 (post-processing of the released totals: the other cells are
still released, as their totals below that bound), with ``dp_total`` and its
interval. A cumulative series covers a fixed number of periods; it takes no
appended period.
"""

from __future__ import annotations

import numpy as np

from ..counting import count_points
from ..declare import Field
from ..errors import ParameterError
from ..mechanisms.tree import tree_node_count, tree_running_totals
from ..noise import NoiseSource, noise_rate
from ..release import Release, run_protected_files, start_charge
from ._common import _fixed_grid, _progress, _reading, _reading_message, _study_area, _warn_if_not_private, \
    base_metadata

__all__ = ["run_cumulative", "CUMULATIVE_FIELDS", "MAX_TREE_VALUES"]

#: Noisy values (cells × tree nodes) a cumulative series may draw (about 8 s of exact sampling).
MAX_TREE_VALUES = 1 << 26

#: The attributes of a running-totals layer.
CUMULATIVE_FIELDS = (
    Field("cell_id", "int", "the grid cell (flat id over the public grid)"),
    Field("dp_total", "int", "noisy number of points in the cell from the series' start to the end of the period"),
    Field("dp_total_low", "int", "lower end of dp_total's 95% interval (at least 0)"),
    Field("dp_total_high", "int", "upper end of dp_total's 95% interval"),
    Field("n_tree_nodes", "int", "noisy tree nodes summed for this period's totals"),
)


def run_cumulative(mech, points, values, *, p, epsilon, c, so, v, composition, unit, stacklevel=2):
    """Running totals of ``mech``'s grid over the series' periods (see the module notes)."""
    from ..series import SeriesRelease, series_layer
    from ..series.info import series_info

    if so.append is not None:
        raise ParameterError("running totals (cumulative) cover the series' periods from its start: they take no "
                             "appended period; release the longer series anew")
    if composition == "sequential":
        raise ParameterError("running totals count each person's cap over the whole series: they need "
                             "person_accounting='series'")
    if epsilon is None:
        raise ParameterError("running totals add noise: they need epsilon")
    if v["domain_from_data"]:
        raise ParameterError("a series needs the public study area (domain=), not domain_from_data")
    protected = run_protected_files(points, v["domain"], v["ledger"])
    p["epsilon"] = epsilon
    area = _study_area(v["domain"], v["domain_crs"], v["crs"])
    grid, grid_for = _fixed_grid(area, lambda a: mech.grid(a, p, c, v["max_memory_bytes"]))
    periods = so.periods
    n = len(periods)
    levels = n.bit_length()
    noise_rate(epsilon, c.sensitivity * levels)  # the exact sampler's range, before anything is read
    draws = grid.n_cells * tree_node_count(n)
    if draws > MAX_TREE_VALUES:
        raise ParameterError(f"running totals over {n} periods on {grid.n_cells:,} cells draw {draws:,} noisy values "
                             f"(at most {MAX_TREE_VALUES:,}): use larger cells ({mech.cell_option}) or fewer periods")
    source = NoiseSource(v["seed"])
    charge = start_charge(ledger=v["ledger"], dataset=v["dataset"], points=points, epsilon=epsilon,
                          mechanism=f"{mech.ledger_name(p)}-running-totals", analyst=v["analyst"],
                          # the tree's noisy totals are the release, whatever the mechanism's own method (a
                          # non-private reference such as WaveCluster's 'exact' only picks the grid here)
                          private=source.private, unattended=v["unattended"],
                          stacklevel=stacklevel + 2,
                          series={"periods": [(a, b, lab) for (a, b), lab in zip(periods.pairs(), periods.labels)],
                                  "composition": composition, "unit": unit, "append": None})
    progress = v["progress"]
    with charge:
        with charge.before_noise():
            _progress(progress, 0.0, _reading_message(points, v["scheduler"]))
            counts = count_points(points, grid_for=grid_for, domain=area, crs=v["crs"], input_crs=v["input_crs"],
                                  person=v["person"], cap=c.cap, rng=source, unattended=v["unattended"],
                                  scheduler=v["scheduler"] if mech.reads == "counts" else None,
                                  progress=_reading(progress, 0.5), time=so.time, times=so.times)
            universe = grid.universe_ids()
            dense = np.zeros((n, universe.size), dtype=np.int64)
            for i, part in enumerate(counts.by_period()):
                dense[i, np.searchsorted(universe, part.cell_id)] = part.count
        diagnostics = counts.diagnostics
        del counts
        _progress(progress, 0.5, f"running totals: a binary tree of {levels} levels over {n} periods")
        tree = tree_running_totals(dense, epsilon=epsilon, sensitivity=c.sensitivity, rng=source)
        del dense
        half = tree.halfwidth()
        layers = [_totals_layer(grid, universe, tree.totals[i], int(half[i]), int(tree.nodes_used[i]))
                  for i in range(n)]
        md = base_metadata(method=f"{mech.method_name(p)}+running_totals",
                           mechanism="running totals of cell counts (binary-tree mechanism, Chan, Shi & Song 2011)",
                           epsilon=epsilon, area=grid.area, source=source, sensitivity=c.sensitivity,
                           person=c.person, cap=c.cap)
        md.update(grid=grid.to_metadata(), cell_width_m=getattr(grid, "cell_m", None), n_cells=grid.n_cells,
                  tree_levels=levels,
                  noise="discrete Laplace (two-sided geometric) on every tree node",
                  noise_q=tree.q, node_sensitivity=c.sensitivity * levels,
                  shown_cells="cells whose running total's 95% interval lies above 0",
                  grid_of=mech.title)
        charge_md = charge.metadata()
        series_id = charge_md.get("series_id") or charge.release_id
        info = series_info(periods, so, composition, c, series_id)
        layer, period_layers = series_layer(layers, periods)
        releases = []
        for i, pl in enumerate(period_layers):
            start, end = periods.interval(i)
            mdi = dict(md, **charge_md)
            mdi.update(series_id=series_id, period=periods.labels[i], period_index=i, period_start=start,
                       period_end=end, series=info, halfwidth_95=int(half[i]), n_tree_nodes=int(tree.nodes_used[i]))
            releases.append(Release(layer=pl, metadata=mdi, diagnostics=diagnostics, _protected=protected,
                                    _charge=charge))
        smd = dict(md, **charge_md)
        smd.update(release_id=series_id, series=info, parameters={k: x for k, x in p.items() if k != "epsilon"},
                   period_start=info["period_start"], period_end=info["period_end"],
                   periods=[{"label": r.metadata["period"], "period_start": r.metadata["period_start"],
                             "period_end": r.metadata["period_end"], "release_id": r.metadata["release_id"],
                             "epsilon": epsilon, "halfwidth_95": r.metadata["halfwidth_95"],
                             "n_tree_nodes": r.metadata["n_tree_nodes"]} for r in releases])
        charge.complete()
    _warn_if_not_private(smd, stacklevel=stacklevel + 2)
    _progress(progress, 1.0, "done")
    return SeriesRelease(layer=layer, metadata=smd, diagnostics=diagnostics, _protected=protected, _charge=charge,
                         releases=releases)


def _totals_layer(grid, universe, totals, half, nodes):
    """The cells whose running total is above its 95% half-width, as squares with the total and its interval."""
    import geopandas as gpd

    keep = totals > half
    ids = universe[keep]
    v = totals[keep]
    return gpd.GeoDataFrame({"cell_id": ids, "dp_total": v, "dp_total_low": np.maximum(v - half, 0),
                             "dp_total_high": v + half, "n_tree_nodes": np.full(ids.size, nodes, dtype=np.int64)},
                            geometry=grid.cell_boxes(ids) if hasattr(grid, "cell_boxes") else grid.polygons(ids),
                            crs=grid.area.crs)
