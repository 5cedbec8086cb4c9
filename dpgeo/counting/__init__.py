"""The private side of the counts boundary: points in, cell counts out.

Everything that touches raw points lives here: reading the point layer in
batches (:mod:`~dpgeo.counting.sources`, with the format readers in
:mod:`~dpgeo.counting.layers` and :mod:`~dpgeo.counting.tables`), projecting
each batch into the working CRS and adding it up per cell of a public grid
(:mod:`~dpgeo.counting.cells`), in one process or on a Dask cluster
(:mod:`~dpgeo.counting.dask`), with the per-person cap drawn as the points
stream by (:mod:`~dpgeo.counting.reservoir`), and, when the ledger asks for it,
a keyed sketch of the records read filled in the same pass
(:mod:`~dpgeo.counting.sketch`: it never leaves the owner). What leaves this package is a
:class:`CellCounts` — exact counts of the non-empty cells, **private**, input
to a mechanism only — plus *owner-only* diagnostics. No noise is drawn here
and the privacy budget is never seen here.
"""

from .cells import OWNER_LOG, CellCounts, CountAccumulator, count_points, exact_counts, owner_problem
from .decode import DROP_REASONS, PointBatch
from .points import PreparedPoints, load_points, prepare_points, project_table
from .readers import PointTable, points_from_frame, read_points
from .reservoir import PersonReservoir, cap_grouped_counts
from .inputs import PointFile, open_points
from .sources import MemorySource, PointSource

__all__ = [
    "CellCounts",
    "count_points",
    "exact_counts",
    "owner_problem",
    "OWNER_LOG",
    "CountAccumulator",
    "PointSource",
    "MemorySource",
    "PointBatch",
    "DROP_REASONS",
    "open_points",
    "PointTable",
    "PointFile",
    "read_points",
    "points_from_frame",
    "load_points",
    "prepare_points",
    "PreparedPoints",
    "project_table",
    "PersonReservoir",
    "cap_grouped_counts",
]
