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
from .dbscan import _dbscan_setup, dbscan_spans, noise_preview  # noqa: F401 (the benchmarks use _dbscan_setup)
from .kmeans import kmeans
from .registry import MECHANISMS, mechanism
from .run import public_plan, run_preview, run_release
from .wave import wavecluster

__all__ = ["dbscan_spans", "wavecluster", "kmeans", "noise_preview", "run_release", "run_preview", "public_plan",
           "MECHANISMS", "mechanism", "load_points", "prepare_points"]
