"""Public entry points: points in, differentially private layer out.

Every mechanism is one declaration (:class:`dpgeo.declare.Mechanism`, listed
in :mod:`dpgeo.pipeline.registry`) and every release runs through the one
pipeline, :func:`dpgeo.pipeline.run.run_release`:

1. **validate** — every parameter against its declaration, the contribution
   bound, the seed;
2. **plan** — the public study area, the grid (and so the memory a run needs)
   and every public quantity, before any private data is read;
3. **charge** — the release in the privacy-budget ledger, refused beyond the
   dataset's total;
4. **count** — the private points are read, projected and added up per cell
   of the public grid (:func:`dpgeo.counting.count_points`): the exact
   :class:`~dpgeo.counting.CellCounts`, owner-only diagnostics beside them;
5. **mechanism** — the only step that draws noise; it sees the counts (or,
   for k-means, the points) and public parameters only;
6. **layer** — post-processing of the released values into polygons with
   ``dp_count`` and the privacy metadata.
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
from .dbscan import _dbscan_setup, _release_histogram, dbscan_spans, noise_preview  # noqa: F401
from .kmeans import kmeans  # noqa: F401
from .registry import MECHANISMS, mechanism  # noqa: F401
from .run import public_plan, run_release  # noqa: F401
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

__all__ = ["dbscan_spans", "wavecluster", "kmeans", "noise_preview", "run_release", "public_plan", "MECHANISMS",
           "load_points", "prepare_points"]
