"""The layer of running totals (``cumulative=True``): post-processing of the binary-tree mechanism's noisy totals.

A series with running totals releases, for every period ``t``, the noisy
number of points in each cell of the mechanism's public grid from the series'
start to the end of ``t`` (:func:`dpgeo.mechanisms.tree.tree_running_totals`,
run by the runner's step :class:`dpgeo.pipeline.steps.RunningTotals`). The
layer of period ``t``: the cells whose running total's 95% interval lies above
0 (the other cells are still released, as their totals below that bound),
with ``dp_total`` and its interval.
"""

from __future__ import annotations

import numpy as np

from ..declare import Field

__all__ = ["CUMULATIVE_FIELDS", "MAX_TREE_VALUES", "totals_layer"]

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


def totals_layer(grid, universe, totals, half, nodes):
    """The cells whose running total is above its 95% half-width, as squares with the total and its interval."""
    import geopandas as gpd

    keep = totals > half
    ids = universe[keep]
    v = totals[keep]
    return gpd.GeoDataFrame({"cell_id": ids, "dp_total": v, "dp_total_low": np.maximum(v - half, 0),
                             "dp_total_high": v + half, "n_tree_nodes": np.full(ids.size, nodes, dtype=np.int64)},
                            geometry=grid.cell_boxes(ids) if hasattr(grid, "cell_boxes") else grid.polygons(ids),
                            crs=grid.area.crs)
