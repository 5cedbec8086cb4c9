"""The one release runner: public inputs in, one charge, the private points counted once, a Release out.

Every mechanism is one declaration (:class:`dpgeo.declare.Mechanism`, listed
in :mod:`dpgeo.declarations.registry`) and every release runs through the one
runner, :func:`dpgeo.pipeline.run.run_release`:

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

The mechanisms' declarations and their Python entry points are in
:mod:`dpgeo.declarations`.
"""

from __future__ import annotations

from ..counting import load_points, prepare_points
from .run import public_plan, run_preview, run_release

__all__ = ["run_release", "run_preview", "public_plan", "load_points", "prepare_points"]
