"""Cell counts on a Dask cluster: many processes or machines read and count, the client only adds up.

Topology (one run)::

    fragments of the input          workers                                   client
    (Parquet row groups, CSV  ──►  read in batches → project → snap   ──►  tree of merges  ──►  CellCounts ──► mechanism
     files, ranges of features)    → count (one task per fragment)         (fan-in 8)           (noise is drawn here only)

* The input is split into *fragments* (:meth:`PointSource.fragments
  <dpgeo.counting.sources.PointSource.fragments>`): groups of Parquet row
  groups of about ``fragment_rows`` records, one CSV file each, ranges of
  features of a GDAL layer. Each fragment is one task; a worker reads it with
  the very code the single-process path uses, batch by batch, so it holds one
  batch plus its partial counts.
* A task returns the *counts* of its fragment (sorted cell ids and counts,
  and owner-only tallies: records read, dropped by reason, outside the study
  area). Merges add them up in a tree, ``split_every`` at a time, on the
  workers; the client receives one result of size O(non-empty cells).
* With a per-person cap a task returns counts per ``(person, cell)``
  instead; the merges add those up, and the client draws each person's
  uniformly random ``K``-subset from them
  (:func:`~dpgeo.counting.reservoir.cap_grouped_counts`) with the
  mechanism's generator. Workers never draw random numbers and never see ε or
  the budget; the grid they receive is public.

For the same input the counts are exactly those of the single-process path,
so the same seed gives the same layer; with a per-person cap the kept subset
has the same law but is drawn differently (the single-process path draws one
key per point in input order; the workers here send no points).

The scheduler: ``"local"`` (one single-threaded worker process per core),
``"local:N"`` or ``N`` (``N`` workers) start a ``distributed.LocalCluster``
on this machine for the run; ``"tcp://host:8786"`` (or any address
``distributed.Client`` accepts) uses an existing cluster, whose workers must
have the same dpgeo installed and be able to open the input's path; a
``distributed.Client`` is used as it is. See ``docs/scale.md``.
"""

from __future__ import annotations

import logging
import os
import time

import numpy as np

from ..errors import ParameterError
from .accumulate import CountAccumulator, CountResult, sum_by_id
from .stream import stream_cells
from .checks import InputTally, for_owner

__all__ = ["count_with_dask", "dask_client", "DEFAULT_FRAGMENT_ROWS"]

#: Records per task (about 4 million: a few seconds of work, ≈ 0.4 GB of worker memory at most).
DEFAULT_FRAGMENT_ROWS = 1 << 22
#: Partial results merged per merge task.
SPLIT_EVERY = 8


def _need_dask():
    try:
        import dask  # noqa: F401  (imported to check it is installed)
        import distributed  # noqa: F401
    except ImportError:
        raise ParameterError("counting with a Dask scheduler needs dask and distributed: "
                             "pip install dask distributed") from None


class dask_client:
    """Context manager: a ``distributed.Client`` for ``scheduler`` (and its LocalCluster, closed on exit).

    Examples
    --------
    >>> dask_client(0)
    Traceback (most recent call last):
    ...
    dpgeo.errors.ParameterError: scheduler must be 'local', 'local:N', a number of workers N >= 1, an address such as 'tcp://host:8786' or a distributed.Client; got 0
    """

    def __init__(self, scheduler):
        self.scheduler = scheduler
        self.workers = _local_workers(scheduler)
        self.client = self.cluster = None
        self.own = True

    def __enter__(self):
        _need_dask()
        import distributed

        s = self.scheduler
        if isinstance(s, distributed.Client):
            self.client, self.own = s, False
            return s
        if self.workers is not None:
            for name in ("distributed", "distributed.worker", "distributed.scheduler", "distributed.nanny"):
                logging.getLogger(name).setLevel(logging.ERROR)
            self.cluster = distributed.LocalCluster(n_workers=self.workers, threads_per_worker=1, processes=True,
                                                    dashboard_address=None, silence_logs=logging.ERROR)
            self.client = distributed.Client(self.cluster)
        else:
            try:
                self.client = distributed.Client(str(s), timeout="20s")
            except Exception as exc:
                raise ParameterError(f"cannot reach the Dask scheduler {s!r} ({type(exc).__name__}); start it "
                                     "(dask scheduler) or check the address") from None
        return self.client

    def __exit__(self, *exc):
        if self.own and self.client is not None:
            self.client.close()
        if self.cluster is not None:
            self.cluster.close()
        return False


def _local_workers(s):
    """Workers of a LocalCluster for ``s``, or None for an address or a Client."""
    bad = ParameterError("scheduler must be 'local', 'local:N', a number of workers N >= 1, an address such as "
                         f"'tcp://host:8786' or a distributed.Client; got {s!r}")
    if isinstance(s, bool):
        raise bad
    if isinstance(s, (int, np.integer)):
        if s < 1:
            raise bad
        return int(s)
    if isinstance(s, str):
        if s == "local":
            return os.cpu_count() or 1
        if s.startswith("local:"):
            try:
                n = int(s.split(":", 1)[1])
            except ValueError:
                raise bad from None
            if n < 1:
                raise bad
            return n
        if "://" in s or ":" in s:
            return None
        raise bad
    if type(s).__name__ == "Client":
        return None
    raise bad


# -- tasks (run on the workers) ----------------------------------------------------------------------

class _Part:
    """Counts of one or more fragments (what a task returns)."""

    def __init__(self, ids, counts, tally, n_out, n_unproj, persons=None, swap=(0, 0), n_cells=None, sketch=None):
        self.ids, self.counts, self.tally = ids, counts, tally
        self.n_out, self.n_unproj, self.persons, self.swap = n_out, n_unproj, persons, swap
        self.n_cells = n_cells
        self.sketch = sketch


def _count_fragment(frag, grid, with_person, sketch=None):
    import pandas as pd

    from .sources import _columns, input_label

    from .stream import id_space

    tally = InputTally(label=input_label(frag), columns=_columns(frag))
    sketch = None if sketch is None else sketch.empty()  # this fragment's own (a threaded client shares objects)
    n_ids = id_space(frag, grid)
    acc = None if with_person else CountAccumulator(n_ids, buffer_ids=1 << 22)
    tables = []
    n_out = n_unproj = 0
    probe = _probe(frag, grid)
    for b, cells in stream_cells(frag, grid, with_person=with_person, threads=1, sketch=sketch):
        tally.add(b)
        n_out += cells.n_outside
        n_unproj += cells.n_unprojectable
        probe.add(b)
        if with_person:
            if cells.cell_id.size:
                tables.append(pd.DataFrame({"person": cells.person, "cell": cells.cell_id})
                              .groupby(["person", "cell"], sort=False).size().rename("n").reset_index())
        else:
            acc.add(cells.cell_id)
    persons = None
    if with_person:
        persons = _sum_person_tables(tables)
        ids = counts = np.zeros(0, dtype=np.int64)
    else:
        ids, counts = acc.result()
    return _Part(ids, counts, tally, n_out, n_unproj, persons, probe.result() or (0, 0), n_ids, sketch)


def _probe(frag, grid):
    from .stream import _SwapProbe

    return _SwapProbe(frag, grid)


def _sum_person_tables(tables):
    import pandas as pd

    if not tables:
        return pd.DataFrame({"person": pd.Series([], dtype=object), "cell": pd.Series([], dtype=np.int64),
                             "n": pd.Series([], dtype=np.int64)})
    t = pd.concat(tables, ignore_index=True)
    return t.groupby(["person", "cell"], sort=False)["n"].sum().reset_index()


def _merge_parts(*parts):
    n_cells = parts[0].n_cells
    ids, counts = sum_by_id(np.concatenate([p.ids for p in parts]), np.concatenate([p.counts for p in parts]),
                            n_cells)
    tally = InputTally(label=parts[0].tally.label, columns=parts[0].tally.columns)
    for p in parts:
        tally.merge(p.tally)
    persons = None
    if parts[0].persons is not None:
        persons = _sum_person_tables([p.persons for p in parts])
    swap = (sum(p.swap[0] for p in parts), sum(p.swap[1] for p in parts))
    sketch = None
    for p in parts:  # the record sketches of the fragments: the sketch of the whole
        if p.sketch is not None:
            sketch = (p.sketch.empty() if sketch is None else sketch).merge(p.sketch)
    return _Part(ids, counts, tally, sum(p.n_out for p in parts), sum(p.n_unproj for p in parts), persons, swap,
                 n_cells, sketch)


def _recount_fragment(frag, grid, binning, n_bins, period=None):
    out = np.zeros(n_bins, dtype=np.int64)
    n = 0
    for b, cells in stream_cells(frag, grid, with_xy=True, threads=1):
        n += b.n_read
        px, py = cells.x, cells.y
        if period is not None:
            sel = cells.cell_id // (grid.nx * grid.ny) == period
            px, py = px[sel], py[sel]
        ids, ok = binning(px, py)
        out += np.bincount(np.asarray(ids)[np.asarray(ok)], minlength=n_bins)
    return out, n


def _add_recounts(*parts):
    return sum(p[0] for p in parts), sum(p[1] for p in parts)


# -- Dask DataFrames as input ----------------------------------------------------------------------------

class _FrameSpec:
    """How to find the points in a partition of a Dask (Geo)DataFrame (small: shipped with every task)."""

    def __init__(self, kind, crs, person, batch_rows, xcol=None, ycol=None, gcol=None, time=None):
        self.kind, self.crs, self.person, self.batch_rows = kind, crs, person, batch_rows
        self.xcol, self.ycol, self.gcol = xcol, ycol, gcol
        self.time = time

    def source_of(self, df):
        """The points of one (pandas or GeoPandas) partition, as a MemorySource."""
        import pyarrow as pa

        from .decode import decode_wkb, numbers_from_arrow, person_from_arrow
        from .values import arrow_of
        from .sources import MemorySource

        person = person_null = None
        if self.person is not None:
            person, person_null = person_from_arrow(arrow_of(df[self.person]))
        if self.kind == "geo":
            import shapely

            wkb = pa.array(shapely.to_wkb(np.asarray(df[self.gcol].values)), type=pa.binary())
            x, y, valid, drops, kinds = decode_wkb(wkb)
        else:
            x, xmiss, xbad = numbers_from_arrow(arrow_of(df[self.xcol], "number"))
            y, ymiss, ybad = numbers_from_arrow(arrow_of(df[self.ycol], "number"))
            bad, miss = xbad | ybad, (xmiss | ymiss) & ~(xbad | ybad)
            valid, kinds = ~(bad | miss), ()
            drops = {"unparsed": int(bad.sum()), "missing_coordinate": int(miss.sum())}
        times = None
        if self.time is not None:
            times = arrow_of(df[self.time.column], "time")
        return MemorySource(x, y, self.crs, person=person, person_null=person_null, valid=valid, drops=drops,
                            kinds=kinds, label="the Dask DataFrame", batch_rows=self.batch_rows,
                            person_name=self.person, time=self.time, times=times)


class DaskFrameSource:
    """A ``dask.dataframe.DataFrame`` with coordinate columns, or a ``dask_geopandas.GeoDataFrame`` of points.

    With a scheduler each partition is counted on the worker that holds it
    (``map_partitions``-style: one task per partition, then the same tree of
    merges); without one, the partitions are computed and counted one after
    the other in this process.
    """

    label = "the Dask DataFrame"
    total_rows = None

    def __init__(self, ddf, *, x=None, y=None, input_crs=None, person=None, batch_rows=None, time=None):
        from .decode import check_time_column, pick_columns, resolve_crs
        from .sources import DEFAULT_BATCH_ROWS

        self.ddf = ddf
        self.person = person
        self.time = time
        self.batch_rows = int(batch_rows or DEFAULT_BATCH_ROWS)
        cols = [str(c) for c in ddf.columns]
        if hasattr(ddf, "crs") and hasattr(ddf, "geometry") and x is None and y is None:
            self.crs = resolve_crs(ddf.crs, input_crs, self.label)
            if person is not None and person not in cols:
                from ..errors import InputError

                raise InputError(f"person column {person!r} is not in {self.label}")
            self.spec = _FrameSpec("geo", self.crs, person, self.batch_rows, gcol=ddf.geometry.name, time=time)
        else:
            xcol, ycol, self.crs = pick_columns(cols, x, y, person, input_crs, self.label)
            self.spec = _FrameSpec("xy", self.crs, person, self.batch_rows, xcol=xcol, ycol=ycol, time=time)
        if time is not None:
            check_time_column(cols, time.column, self.label)

    @property
    def has_person(self):
        return self.person is not None

    def batches(self):
        for i in range(self.ddf.npartitions):
            yield from self.spec.source_of(self.ddf.get_partition(i).compute()).batches()

    def fragments(self, target_rows):
        return [self]

    def describe(self):
        return self.label


def _on_partition(df, spec, func, **kw):
    return func(spec.source_of(df), **kw)


def _leaves(client, source, frags, func, **kw):
    """One task per fragment (files) or per partition (a Dask DataFrame): futures of ``func``'s results."""
    if isinstance(source, DaskFrameSource):
        import dask

        tasks = [dask.delayed(_on_partition)(d, source.spec, func, **kw) for d in source.ddf.to_delayed()]
        return client.compute(tasks)
    return client.map(func, frags, pure=False, **kw)


def is_dask_collection(obj) -> bool:
    """Whether ``obj`` is a Dask DataFrame (without importing dask when it is not)."""
    return type(obj).__module__.split(".")[0] in ("dask", "dask_geopandas", "dask_expr") and \
        hasattr(obj, "to_delayed")


# -- the client side ---------------------------------------------------------------------------------

def _tree(client, futures, merge):
    level = list(futures)
    while len(level) > 1:
        level = [client.submit(merge, *level[i:i + SPLIT_EVERY], pure=False)
                 for i in range(0, len(level), SPLIT_EVERY)]
    return level[0]


def count_with_dask(source, grid, *, cap=None, rng=None, scheduler="local", progress=None, unattended=False,
                    fragment_rows=None, cap_per_period=False, sketch=None) -> CountResult:
    """Count ``source`` on ``grid`` with Dask (see the module notes); the client receives counts only.

    ``progress(fraction, message)`` is called as tasks finish. With ``cap``
    the per-person cap is drawn here, on the client, with ``rng``. ``sketch`` (an empty
    :class:`~dpgeo.counting.sketch.RecordSketch`) is sent to every task and the results merged into it.
    """
    if type(scheduler).__name__ != "Client":
        _local_workers(scheduler)
    _need_dask()
    from distributed import as_completed

    frags = [] if isinstance(source, DaskFrameSource) else source.fragments(int(fragment_rows or
                                                                                  DEFAULT_FRAGMENT_ROWS))
    with_person = cap is not None
    t0 = time.perf_counter()
    with dask_client(scheduler) as client:
        [grid_f] = client.scatter([grid], broadcast=True)
        leaves = _leaves(client, source, frags, _count_fragment, grid=grid_f, with_person=with_person,
                         sketch=sketch)
        # the merges are submitted at once, so they run as the counts arrive and each partial count is
        # released as soon as it is merged (the client keeps no reference to it)
        root = _tree(client, leaves, _merge_parts)
        n = len(leaves)
        pending = as_completed(leaves)
        del leaves
        try:
            done = 0
            for f in pending:
                del f
                done += 1
                if progress is not None:
                    el = time.perf_counter() - t0
                    progress(done / n, f"counted {done} of {n} parts of the input on the Dask cluster ({el:.0f} s)")
            part = root.result()
        except BaseException:
            client.cancel([root])
            raise
        from .sources import _columns, input_label

        part.tally.label, part.tally.columns = input_label(source), _columns(source)
        if sketch is not None and part.sketch is not None:
            sketch.merge(part.sketch)
        out = CountResult(part.ids, part.counts, part.tally, part.n_out, part.n_unproj, 0,
                          part.swap if getattr(source.crs, "is_geographic", False) else None)
        if with_person:
            out.cell_id, out.count, out.n_cap_dropped = _cap_on_client(
                part.persons, cap, rng, grid, n_ids=part.n_cells,
                group_cells=grid.nx * grid.ny if cap_per_period else None)
            out.recount = _no_recount
        else:
            out.recount = _dask_recount(scheduler, source, frags, grid, part.tally.n_read)
    return out


def _no_recount(binning, n_bins, period=None):
    raise ParameterError("with a per-person cap, counting the same points again (the WaveCluster baseline) needs "
                         "the single-process count: run it without a Dask scheduler")


def _cap_on_client(persons, cap, rng, grid, n_ids=None, group_cells=None):
    """Each person's uniformly random ``cap``-subset, from the per-(person, cell) counts (with ``group_cells``:
    per person and period of a series)."""
    import pandas as pd

    from .reservoir import cap_grouped_counts

    if persons is None or not len(persons):
        e = np.zeros(0, dtype=np.int64)
        return e, e.copy(), 0
    codes, _ = pd.factorize(persons["person"].to_numpy(), use_na_sentinel=True)
    cell = persons["cell"].to_numpy(np.int64)
    n = persons["n"].to_numpy(np.int64)
    if group_cells is not None:
        group = cell // group_cells
        codes = codes.astype(np.int64) * (int(group.max(initial=0)) + 1) + group
    order = np.lexsort((cell, codes))  # rows of a person together, in a fixed order
    codes, cell, n = codes[order], cell[order], n[order]
    kept = cap_grouped_counts(codes, cell, n, cap, rng)
    acc = CountAccumulator(n_ids or grid.nx * grid.ny, buffer_ids=1)
    acc.add_counts(cell, kept)
    ids, counts = acc.result()
    return ids, counts, int(n.sum() - kept.sum())


def _dask_recount(scheduler, source, frags, grid, n_read):
    def recount(binning, n_bins, period=None):
        with dask_client(scheduler) as client:
            [grid_f] = client.scatter([grid], broadcast=True)
            leaves = _leaves(client, source, frags, _recount_fragment, grid=grid_f, binning=binning, n_bins=n_bins,
                             period=period)
            root = _tree(client, leaves, _add_recounts)
            del leaves
            counts, seen = root.result()
        if seen != n_read:
            from ..errors import DataError

            raise DataError(for_owner(f"the input changed while it was read ({n_read:,} records, then {seen:,})"))
        return counts

    return recount
