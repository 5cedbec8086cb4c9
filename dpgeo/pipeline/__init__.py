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

from ..counting import load_points, prepare_points
from ..mechanisms.dbscan import noise_bound  # noqa: F401 (dpgeo.pipeline.noise_bound)
from ._common import (  # noqa: F401
    _contribution,
    _crs_label,
    _fixed_grid,
    _input_label,
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
from .dbscan import (  # noqa: F401
    _check_dbscan_params,
    _dbscan_setup,
    _release_histogram,
    dbscan_spans,
    noise_preview,
)
from .wave import (  # noqa: F401
    _WC_NAMES,
    MAX_WAVECLUSTER_CELLS,
    WAVECLUSTER_METHODS,
    _wavecluster_grid,
    _wavecluster_mechanism,
    check_wavecluster_params,
    rehearse_wavecluster,
    wavecluster,
    wavecluster_cell_width,
    wavecluster_count_epsilon,
)

__all__ = ["dbscan_spans", "wavecluster", "noise_preview", "load_points", "prepare_points"]
