"""Exact cell counts of the private points: the one thing a mechanism reads.

:func:`count_points` is the private half of every run. It reads the points
**in batches** (:mod:`~dpgeo.counting.sources`), projects each batch into
the working CRS, keeps the points inside the public study area, snaps them to
the cells of a public grid and adds them to a running count; the points are
never all in memory. The result, :class:`CellCounts`, is exact and therefore
**private**: it is input to a mechanism only, never published. No noise is
drawn here, and the budget is never seen here.

Memory: one batch (about a million records, ≈ 100 MB of temporaries; two
are processed at once on two threads), plus the running count — a dense
array of 8 bytes per cell of the grid's bounding rectangle up to 2**25
cells, else sorted sparse arrays of 16 bytes per non-empty cell — plus a
buffer of 2**24 cell ids (128 MB). With a per-person cap, add the reservoir:
``O(persons × K)`` (:mod:`~dpgeo.counting.reservoir`).

Two audiences, two rules (``docs/privacy.md``, "Who sees what"):

* In the owner's mode (the default), a condition of the data that makes the
  run pointless — no record, no usable point, most coordinates out of range,
  most geometries not points, no point inside the study area — is an error
  (:class:`~dpgeo.errors.DataError`) raised *before* any noise is drawn or
  budget charged, with a message for the data owner only. A few bad records
  are not: they are dropped and counted, by reason.
* In unattended mode (``unattended=True``; a service always uses it) the
  same conditions are not errors: the run goes on with whatever counts there
  are (possibly none) and releases a valid, possibly empty, layer, so that
  its success and the shape of its output do not depend on the data. The
  owner's warnings go to ``diagnostics["owner_warnings"]`` and to the
  ``dpgeo.owner`` logger, never to the output.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import numpy as np

from ..errors import DataError, OutsideStudyAreaError
from ..grid import Grid
from .accumulate import CountAccumulator, sum_by_id
from .checks import OWNER_LABEL, for_owner
from .points import PreparedPoints
from .sources import input_label
from .inputs import open_points
from .sources import DEFAULT_BATCH_ROWS

__all__ = ["CellCounts", "count_points", "exact_counts", "owner_problem", "for_owner", "OWNER_LOG", "OWNER_LABEL",
           "CountAccumulator", "sum_by_id"]

#: Logger of the data owner's messages (exact facts about the private data: never publish). It reaches no
#: handler unless the owner attaches one to it: not Python's last-resort handler (stderr), and not the root
#: logger's handlers, which an application may send anywhere. The service attaches its owner_log file.
OWNER_LOG = logging.getLogger("dpgeo.owner")
OWNER_LOG.addHandler(logging.NullHandler())
OWNER_LOG.propagate = False

#: Largest bounding grid counted with ``numpy.bincount`` (8 bytes per cell).
_BINCOUNT_MAX_CELLS = 1 << 27


@dataclass
class CellCounts:
    """Exact point counts of the non-empty cells of a public grid — **private**.

    Attributes
    ----------
    grid : Grid
        The public grid the points were counted on.
    cell_id : numpy.ndarray
        Sorted, unique int64 flat ids of the non-empty cells.
    count : numpy.ndarray
        int64 number of points in each of those cells (> 0).
    diagnostics : dict
        Owner-only facts about the input (records read, dropped by reason,
        outside the study area, dropped by the per-person cap, warnings).
        Never published.
    points : PreparedPoints or None
        The projected points counted, only with ``keep_points=True`` (the
        owner's comparison report); ``kept`` is then all True.
    kept : numpy.ndarray or None
    recount : callable or None
        ``recount(binning, n_bins) -> counts``: the same points (inside the
        study area, after the per-person cap) counted again on another
        binning, for mechanisms that need several countings (the
        synthetic-data baseline). ``binning(x, y) -> (bin_id, ok)`` maps
        projected coordinates (metres) to int64 bins in ``[0, n_bins)``; it
        must be built from public parameters and earlier DP outputs only.
        The input is read again (or, with a per-person cap, the reservoir of
        kept points is used).
    """

    grid: Grid
    cell_id: np.ndarray
    count: np.ndarray
    diagnostics: dict = field(default_factory=dict)
    points: PreparedPoints | None = field(default=None, repr=False)
    kept: np.ndarray | None = field(default=None, repr=False)
    recount: object = field(default=None, repr=False)
    #: For a series: the public periods; ``cell_id`` is then ``period · grid.n_ids + cell`` (see :meth:`by_period`).
    periods: object = field(default=None, repr=False)
    #: For a series with ``keep_points``: the period of each kept point.
    kept_period: np.ndarray | None = field(default=None, repr=False)

    def dense(self) -> np.ndarray:
        """``(ny, nx)`` int64 array of the counts (0 for empty cells)."""
        g = self.grid
        out = np.zeros(g.ny * g.nx, dtype=np.int64)
        out[self.cell_id] = self.count
        return out.reshape(g.ny, g.nx)

    @property
    def n_points(self) -> int:
        """Number of points counted (private)."""
        return int(self.count.sum())

    def by_period(self):
        """The counts of each period of a series, one :class:`CellCounts` per period, in order.

        Each holds that period's cells of the same public grid (and, with
        ``keep_points``, that period's points; its ``recount`` counts that
        period's points only). The diagnostics are the whole input's.

        Examples
        --------
        >>> from dpgeo.domain import StudyArea
        >>> from dpgeo.periods import make_periods
        >>> g = Grid(StudyArea.from_bbox((0, 0, 200, 100), "EPSG:32615"), 100.0)
        >>> c = CellCounts(g, np.array([1, 2, 3]), np.array([5, 1, 2]), periods=make_periods("year", "2020", "2022"))
        >>> [(p.cell_id.tolist(), p.count.tolist()) for p in c.by_period()]
        [([1], [5]), ([0, 1], [1, 2])]
        """
        if self.periods is None:
            return [self]
        n = self.grid.nx * self.grid.ny
        cuts = np.searchsorted(self.cell_id, np.arange(len(self.periods) + 1, dtype=np.int64) * n)
        out = []
        for i in range(len(self.periods)):
            a, b = cuts[i], cuts[i + 1]
            pts = kept = None
            if self.points is not None and self.kept_period is not None:
                sel = self.kept_period == i
                pts = PreparedPoints(self.points.area, self.points.x[sel], self.points.y[sel], self.diagnostics, None)
                kept = np.ones(int(sel.sum()), dtype=bool)
            recount = None
            if self.recount is not None:
                recount = _period_recount(self.recount, i)
            out.append(CellCounts(self.grid, self.cell_id[a:b] - i * n, self.count[a:b], self.diagnostics, pts, kept,
                                  recount))
        return out


def _period_recount(recount, period):
    def one(binning, n_bins):
        return recount(binning, n_bins, period=period)

    return one


def exact_counts(grid: Grid, cell_id: np.ndarray):
    """Exact counts of the non-empty cells — **private**, input to a mechanism only.

    Returns
    -------
    ids, counts : numpy.ndarray
        Sorted unique flat ids and their int64 counts.

    Examples
    --------
    >>> from dpgeo.domain import StudyArea
    >>> g = Grid(StudyArea.from_bbox((0, 0, 1000, 1000), "EPSG:32615"), 100.0)
    >>> exact_counts(g, np.array([5, 0, 5]))
    (array([0, 5]), array([1, 2]))
    """
    cell_id = np.asarray(cell_id, dtype=np.int64)
    total = grid.nx * grid.ny
    if total <= _BINCOUNT_MAX_CELLS:
        c = np.bincount(cell_id, minlength=total)
        ids = np.flatnonzero(c)
        return ids.astype(np.int64), c[ids].astype(np.int64)
    ids, counts = np.unique(cell_id, return_counts=True)
    return ids.astype(np.int64), counts.astype(np.int64)


def owner_problem(message: str, diagnostics: dict, *, unattended: bool, error=DataError) -> None:
    """A condition of the private data: an owner-only ``error``, or in unattended mode a logged warning."""
    if not unattended:
        raise error(for_owner(message))
    diagnostics.setdefault("owner_warnings", []).append(message)
    OWNER_LOG.warning("%s", for_owner(message))

# -- count_points ---------------------------------------------------------------------------------------


def _cap_generator(rng):
    """The numpy generator that picks each person's kept points.

    The choice needs no cryptographic strength: the cap bounds a person's
    contribution by ``cap`` points whatever rule picks them, as long as the
    rule looks only at that person's records (docs/privacy.md, person cap).
    """
    if rng is None:
        return np.random.default_rng()
    if hasattr(rng, "numpy_generator"):
        return rng.numpy_generator()
    return rng

def count_points(points, *, grid_for, domain, domain_crs=None, crs=None, domain_from_data=False, input_crs=None,
                 person=None, cap=None, rng=None, unattended=False, keep_points=False, recountable=False,
                 scheduler=None, progress=None, batch_rows=DEFAULT_BATCH_ROWS, time=None, times=None,
                 cap_per_period=False, sketch=None) -> CellCounts:
    """Read, project and count the private points on the grid of the public study area, batch by batch.

    Parameters
    ----------
    points : path, glob, folder, GeoDataFrame, GeoSeries, (x, y, crs) tuple, PointTable or PointSource
        The private points (see :func:`~dpgeo.counting.open_points`; open
        it yourself to choose a layer, columns or engine).
    grid_for : callable
        ``grid_for(area) -> Grid``: the public grid of a study area (its cell
        width comes from public parameters only).
    domain, domain_crs, crs, domain_from_data, input_crs
        The public study area, the working CRS and the CRS of an input that
        declares none (see :func:`dpgeo.dbscan_spans`).
    person : str or array_like, optional
        Person of each point (column name or aligned identifiers).
    cap : int, optional
        With ``person``: keep at most ``cap`` points per person, chosen
        uniformly at random with ``rng`` (a reservoir while streaming, see
        :mod:`~dpgeo.counting.reservoir`).
    rng : dpgeo.noise.NoiseSource, numpy.random.Generator or None
        Randomness for the per-person cap only (a source gives a numpy
        generator seeded from it, so a seeded run is reproducible).
    unattended : bool
        Data conditions are logged for the owner instead of raised.
    keep_points : bool
        Keep the projected points counted in the result (the owner's
        comparison; holds them all in memory).
    recountable : bool
        Make :attr:`CellCounts.recount` available also with a per-person cap
        (the reservoir then keeps the coordinates of the kept points, 16
        bytes more per kept point). Without a cap the input is simply read
        again and this costs nothing.
    scheduler : None, "local", int, str or distributed.Client
        ``None``: count in this process. Otherwise count with Dask (see
        :func:`dpgeo.counting.dask.count_with_dask`): ``"local"`` or a number
        of workers starts a ``LocalCluster`` on this machine, an address
        such as ``"tcp://host:8786"`` or a ``Client`` uses an existing cluster.
    progress : callable, optional
        ``progress(fraction_read, message)`` about every second during long
        reads (records read and records per second); raise from it to stop.
    batch_rows : int
        Records per batch.
    time : TimeSpec, optional
        A series (:class:`~dpgeo.counting.times.TimeSpec`): every point is
        counted in its public period too, all periods in the same pass; the
        result's :meth:`CellCounts.by_period` splits the counts. Records
        without a usable time, or outside the bounds, are dropped and counted by
        reason (owner-only diagnostics).
    times : array_like, optional
        With ``time`` and points in memory: the time of each point.
    cap_per_period : bool
        With ``cap`` and ``time``: keep at most ``cap`` points per person *in each
        period* (default: per person over the whole series).
    sketch : dpgeo.counting.sketch.RecordSketch, optional
        Filled with the records read, in the same pass (the ledger's check of which dataset the input holds:
        :mod:`dpgeo.budget.sketches`).

    Returns
    -------
    CellCounts

    Raises
    ------
    DataError
        Owner's mode only: no record, no usable point, most coordinates out
        of range or most geometries not points, or no point inside the study
        area.

    Examples
    --------
    >>> from dpgeo.grid import Grid
    >>> c = count_points(([50.0, 60.0, 250.0], [50.0, 55.0, 50.0], "EPSG:32615"),
    ...                  grid_for=lambda a: Grid(a, 100.0), domain=(0, 0, 300, 100), domain_crs="EPSG:32615",
    ...                  crs="EPSG:32615")
    >>> c.cell_id.tolist(), c.count.tolist()
    ([0, 2], [2, 1])
    """
    from ..domain import as_study_area

    area = None
    if not domain_from_data:
        area = as_study_area(domain, domain_crs=domain_crs, working_crs=crs)
    try:
        if _is_tuple(points) or isinstance(person, str) or person is None:
            source = open_points(points, input_crs=input_crs, person=person, batch_rows=batch_rows, time=time,
                                 times=times)
        else:
            from ..errors import InputError

            raise InputError("person identifiers as an array go with (x, y, crs) arrays; for a file or frame give "
                             "the name of its person column")
    except DataError as exc:
        if not unattended or area is None:
            raise
        return _empty(grid_for(area), str(exc), time)
    if person is not None and not source.has_person:
        from ..errors import InputError

        raise InputError("the input was opened without its person column; open it with person=...")
    if area is None:
        area = _area_from_data(source, crs)
    grid = grid_for(area)
    with_person = cap is not None
    if with_person:
        rng = _cap_generator(rng)
    if scheduler is not None:
        from .dask import count_with_dask

        r = count_with_dask(source, grid, cap=cap, rng=rng, scheduler=scheduler, progress=progress,
                            unattended=unattended, cap_per_period=cap_per_period, sketch=sketch)
    else:
        from .stream import count_stream

        r = count_stream(source, grid, cap=cap, rng=rng, progress=progress, unattended=unattended,
                         keep_xy=keep_points, recountable=recountable, cap_per_period=cap_per_period,
                         sketch=sketch)
    tally = r.tally
    diag = tally.diagnostics()
    if r.n_unprojectable:
        diag["dropped_by_reason"]["unprojectable"] = r.n_unprojectable
        diag["n_dropped_invalid"] += r.n_unprojectable
    n_used = int(r.count.sum())
    diag.update(input_crs=source.crs.to_string(), source=str(source.label), n_outside_domain=int(r.n_outside),
                n_used=n_used, counting="dask" if scheduler is not None else "stream")
    if with_person:
        diag["n_dropped_by_person_cap"] = int(r.n_cap_dropped)
    for msg in tally.problems():
        owner_problem(msg, diag, unattended=unattended)
    usable = tally.n_points - r.n_unprojectable
    if n_used + r.n_cap_dropped == 0 and usable > 0:
        why = ""
        if r.swap is not None and r.swap[0] and r.swap[1] > 0.5 * r.swap[0]:
            why = ("; looks like lat/lon swapped: with the two coordinates exchanged most would lie inside it "
                   "(name the columns the other way round with --x/--y, or fix the file's axis order)")
        owner_problem(
            f"none of the {usable:,} usable points lies inside the study area ({area.description}){why}; "
            f"check --domain and --domain-crs against the data's CRS ({diag.get('input_crs')})",
            diag, unattended=unattended, error=OutsideStudyAreaError)
    prep = kept = None
    if keep_points and r.kept_xy is not None:
        prep = PreparedPoints(area, r.kept_xy[0], r.kept_xy[1], diag, None)
        kept = np.ones(r.kept_xy[0].size, dtype=bool)
    return CellCounts(grid, r.cell_id, r.count, diag, prep, kept, r.recount,
                      None if time is None else time.periods, r.kept_period)


def _is_tuple(points):
    return isinstance(points, tuple) and len(points) == 3


def _empty(grid, message, time=None):
    diag = {"n_read": None, "n_dropped_invalid": None, "n_outside_domain": 0, "n_used": 0}
    owner_problem(message, diag, unattended=True)
    e = np.zeros(0, dtype=np.int64)
    return CellCounts(grid, e, e.copy(), diag,
                      recount=lambda binning, n_bins, period=None: np.zeros(n_bins, dtype=np.int64),
                      periods=None if time is None else time.periods)


def _area_from_data(source, crs):
    """The data's own extent (``domain_from_data``: exploration only, not private): one extra pass."""
    from ..domain import StudyArea

    lo = np.array([np.inf, np.inf])
    hi = -lo
    for b in source.batches():
        if b.x.size:
            lo = np.minimum(lo, [b.x.min(), b.y.min()])
            hi = np.maximum(hi, [b.x.max(), b.y.max()])
    if not np.isfinite(lo).all():
        raise DataError(f"{input_label(source)} has no usable points to take an extent from")
    return StudyArea.from_points_extent([lo[0], hi[0]], [lo[1], hi[1]], source.crs, working_crs=crs)
