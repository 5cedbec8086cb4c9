"""One pass over a private input: batches read, projected, snapped to cells and counted.

:func:`stream_cells` is the loop every counting runs (in this process, or
on each Dask worker for its fragment of the input): a batch is read while
the previous ones are projected into the working CRS and assigned to the
cells of the public grid on two threads (PROJ and numpy release the GIL);
results come back in input order, so that the per-person reservoir draws its
keys in the same order as the in-memory cap. :func:`count_stream` is the
single-process counting of :func:`dpgeo.counting.count_points`.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from dataclasses import dataclass

import numpy as np

from ..errors import DataError
from ..grid import Grid
from .accumulate import CountAccumulator, CountResult
from .checks import InputTally, for_owner
from .sources import _columns, input_label
from .sources import PointSource

__all__ = ["stream_cells", "count_stream", "ReadProgress"]

#: Points of a lon/lat input also tried with the two coordinates exchanged (owner's diagnostics).
_SWAP_PROBE_POINTS = 100_000
#: Batches processed at once (two threads; PROJ and numpy release the GIL).
_THREADS = 2
#: Progress reports: the first after this many seconds of reading, then at most one per interval.
PROGRESS_FIRST_S = 1.0
PROGRESS_EVERY_S = 1.0


@dataclass
class _BatchCells:
    cell_id: np.ndarray
    n_in: int
    n_outside: int
    n_unprojectable: int
    person: np.ndarray | None = None
    x: np.ndarray | None = None
    y: np.ndarray | None = None


class _Projector:
    """Source CRS → working CRS, one PROJ transformer per thread (they are not thread-safe)."""

    def __init__(self, src_crs, dst_crs):
        self.same = src_crs.equals(dst_crs)
        self.src, self.dst = src_crs, dst_crs
        self._local = threading.local()

    def __call__(self, x, y):
        if self.same:
            return x, y
        tr = getattr(self._local, "tr", None)
        if tr is None:
            from pyproj import Transformer

            tr = self._local.tr = Transformer.from_crs(self.src, self.dst, always_xy=True)
        return tr.transform(x, y, errcheck=False)


def _point_crs(grid):
    """The CRS a grid's cells take points in: the working CRS (square cells) or lon/lat (H3 cells)."""
    return getattr(grid, "point_crs", None) or grid.area.crs


def _cells_of_batch(b, grid, project, *, with_person, with_xy, sketch=None):
    """The cells of a batch's points inside the study area; for a series, ids of (period, cell) pairs.

    A series counts each point in the cell ``period · n_cells + cell`` of a
    grid repeated once per period, so that every counting path (in memory,
    streaming, Dask, with the per-person cap) counts all periods in one pass
    without knowing about periods. ``sketch`` (a
    :class:`~dpgeo.counting.sketch.RecordSketch`) takes the batch's records too.
    """
    if sketch is not None:
        sketch.add_points(b.x, b.y, project.src)
    x, y = project(b.x, b.y)
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    fin = np.isfinite(x) & np.isfinite(y)
    n_bad = int(x.size - np.count_nonzero(fin))
    person = b.person if with_person else None
    period = b.period
    if n_bad:
        x, y = x[fin], y[fin]
        person = None if person is None else person[fin]
        period = None if period is None else period[fin]
    need_mask = with_person or with_xy or period is not None
    a = grid.assign(x, y, return_mask=need_mask)
    cell_id = a.cell_id
    if period is not None:
        cell_id = cell_id + period[a.mask] * np.int64(grid.nx * grid.ny)
    out = _BatchCells(cell_id, a.n_in, a.n_outside, n_bad)
    if need_mask:
        m = a.mask
        out.person = None if person is None else person[m]
        if with_xy:
            out.x, out.y = x[m], y[m]
    return out


def stream_cells(source: PointSource, grid: Grid, *, with_person=False, with_xy=False, threads=_THREADS,
                 sketch=None):
    """Yield ``(batch, cells)`` for each batch of ``source``, in input order.

    ``cells`` holds the cell ids of the batch's points inside the study area
    (and their persons/coordinates when asked). Up to ``threads`` batches are
    projected and assigned at once while the next one is read; the reader is
    closed and the threads stopped when the caller stops early (an error, a
    cancelled progress callback, Ctrl-C). ``sketch`` takes every batch's records (in the same threads).
    """
    project = _Projector(source.crs, _point_crs(grid))
    grid._cell_classes()  # build the cell lookup once, before the threads share it
    batches = iter(source.batches())
    pool = ThreadPoolExecutor(max(1, threads), thread_name_prefix="dpgeo-count")
    pending = deque()
    try:
        for b in batches:
            pending.append((b, pool.submit(_cells_of_batch, b, grid, project, with_person=with_person,
                                           with_xy=with_xy, sketch=sketch)))
            if len(pending) >= threads:
                b0, f0 = pending.popleft()
                yield b0, f0.result()
        while pending:
            b0, f0 = pending.popleft()
            yield b0, f0.result()
    finally:
        for _, f in pending:
            f.cancel()
        pool.shutdown(wait=True, cancel_futures=True)
        close = getattr(batches, "close", None)
        if close is not None:
            close()


class ReadProgress:
    """Throttled ``progress(fraction, message)`` reports of records read and records per second."""

    def __init__(self, callback, total=None, *, every_s=None, first_s=None):
        self.cb = callback
        self.total = total
        self.every = PROGRESS_EVERY_S if every_s is None else every_s
        self.t0 = time.perf_counter()
        self.next = self.t0 + (PROGRESS_FIRST_S if first_s is None else first_s)
        self.rows = 0

    def __call__(self, rows):
        self.rows += rows
        if self.cb is None:
            return
        now = time.perf_counter()
        if now < self.next:
            return
        self.next = now + self.every
        rate = self.rows / max(now - self.t0, 1e-9)
        frac = min(self.rows / self.total, 1.0) if self.total else 0.0
        of = f" of {self.total:,}" if self.total else ""
        self.cb(frac, f"read {self.rows:,}{of} records ({_rate(rate)} records/s)")


def _rate(r):
    return f"{r / 1e6:.2f} M" if r >= 1e6 else f"{r / 1e3:.0f} k" if r >= 1e3 else f"{r:.0f}"


def id_space(source, grid) -> int:
    """How many ids the counting of ``source`` on ``grid`` uses: the cells, times the periods of a series."""
    return grid.nx * grid.ny * getattr(source, "n_periods", 1)


def count_stream(source, grid, *, cap, rng, progress, unattended, keep_xy, recountable, cap_per_period=False,
                 sketch=None):
    """The single-process streaming count. See :func:`~dpgeo.counting.count_points`."""
    from .reservoir import PersonReservoir

    with_person = cap is not None
    n_ids = id_space(source, grid)
    acc = None if with_person else CountAccumulator(n_ids)
    res = PersonReservoir(cap, rng, keep_xy=recountable or keep_xy,
                          group_cells=grid.nx * grid.ny if cap_per_period else None) if with_person else None
    keep_all = keep_xy and not with_person
    xs, ys, ids = [], [], []
    tally = InputTally(label=input_label(source), columns=_columns(source))
    n_out = n_unproj = 0
    swap = _SwapProbe(source, grid)
    report = ReadProgress(progress, source.total_rows)
    first = True
    with closing(stream_cells(source, grid, with_person=with_person,
                              with_xy=keep_all or (with_person and res.keep_xy), sketch=sketch)) as cells_of:
        for b, cells in cells_of:
            tally.add(b)
            if first and not unattended:
                early = tally.problems(early=True)
                if early:
                    raise DataError(for_owner(early[0]))
            first = False
            n_out += cells.n_outside
            n_unproj += cells.n_unprojectable
            swap.add(b)
            if with_person:
                res.add(cells.person, cells.cell_id, cells.x, cells.y)
            else:
                acc.add(cells.cell_id)
                if keep_all:
                    xs.append(cells.x)
                    ys.append(cells.y)
                    if source.time is not None:
                        ids.append(cells.cell_id)
            report(b.n_read)
    out = CountResult(None, None, tally, n_out, n_unproj, 0, swap.result())
    n_cells = grid.nx * grid.ny
    if with_person:
        kept = res.result()
        out.n_cap_dropped = kept.n_dropped
        acc = CountAccumulator(n_ids, buffer_ids=max(kept.cell_id.size, 1))
        acc.add(kept.cell_id)
        if res.keep_xy:
            out.kept_xy = (kept.x, kept.y)
            if source.time is not None:
                out.kept_period = kept.cell_id // n_cells
            out.recount = _memory_recount(kept.x, kept.y, kept.cell_id, n_cells)
    else:
        if keep_all:
            out.kept_xy = (np.concatenate(xs), np.concatenate(ys)) if xs else (np.zeros(0), np.zeros(0))
            if source.time is not None:
                out.kept_period = np.concatenate(ids) // n_cells if ids else np.zeros(0, dtype=np.int64)
        out.recount = _source_recount(source, grid, tally.n_read)
    out.cell_id, out.count = acc.result()
    return out


class _SwapProbe:
    """For lon/lat inputs: of the first points, how many would lie in the study area with x and y exchanged."""

    def __init__(self, source, grid):
        self.on = bool(getattr(source.crs, "is_geographic", False))
        self.grid = grid
        self.n = self.n_in = 0
        if self.on:
            self.project = _Projector(source.crs, _point_crs(grid))

    def add(self, b):
        if not self.on or self.n >= _SWAP_PROBE_POINTS or not b.x.size:
            return
        k = min(b.x.size, _SWAP_PROBE_POINTS - self.n)
        ok = (np.abs(b.y[:k]) <= 180) & (np.abs(b.x[:k]) <= 90)
        x, y = self.project(b.y[:k][ok], b.x[:k][ok])
        x, y = np.asarray(x), np.asarray(y)
        fin = np.isfinite(x) & np.isfinite(y)
        self.n += k
        self.n_in += self.grid.assign(x[fin], y[fin]).n_in

    def result(self):
        return (self.n, self.n_in) if self.on else None


def _memory_recount(x, y, cell_id=None, n_cells=None):
    def recount(binning, n_bins, period=None):
        px, py = x, y
        if period is not None:  # one period of a series: its points only
            sel = cell_id // n_cells == period
            px, py = x[sel], y[sel]
        ids, ok = binning(px, py)
        return np.bincount(np.asarray(ids)[np.asarray(ok)], minlength=n_bins).astype(np.int64)

    return recount


def _source_recount(source, grid, n_read):
    """Count the same points again on another binning by reading the input once more.

    For a series, ``recount(binning, n_bins, period=i)`` counts the points of period ``i`` only.
    """
    n_cells = grid.nx * grid.ny

    def recount(binning, n_bins, period=None):
        out = np.zeros(n_bins, dtype=np.int64)
        seen = 0
        with closing(stream_cells(source, grid, with_xy=True)) as cells_of:
            for b, cells in cells_of:
                seen += b.n_read
                px, py = cells.x, cells.y
                if period is not None:
                    sel = cells.cell_id // n_cells == period
                    px, py = px[sel], py[sel]
                ids, ok = binning(px, py)
                out += np.bincount(np.asarray(ids)[np.asarray(ok)], minlength=n_bins)
        if seen != n_read:
            raise DataError(for_owner(f"{input_label(source)} changed while it was read ({n_read:,} records, then "
                                     f"{seen:,})"))
        return out

    return recount
