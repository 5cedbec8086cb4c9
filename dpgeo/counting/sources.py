"""Private point inputs, read in batches.

A :class:`PointSource` says *what* to read (a file, a glob of files, a
partitioned Parquet directory, or points already in memory) and reads it as
a stream of :class:`~dpgeo.counting.decode.PointBatch` — a bounded number of
records at a time, so that no input is ever held whole in memory by the
counting step. :func:`open_points` makes the right source for any accepted
input and checks what can be checked from the file's structure alone
(columns, declared geometry type, CRS, layers) before any record is read.

A source can be read more than once (the synthetic-data baseline counts the
same points on several grids) and split into *fragments* — row groups of
Parquet files, CSV files, ranges of features of a GDAL layer — that are read
independently, on other processes or machines (:mod:`dpgeo.counting.dask`).

Examples
--------
>>> from dpgeo.counting import open_points
>>> src = open_points(([0.5, 1.5, float("nan")], [0.5, 0.5, 0.5], "EPSG:32615"))
>>> [(b.x.size, b.n_read, b.drops) for b in src.batches()]
[(2, 3, {'non_finite': 1})]
"""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass, field
from typing import Iterator

import numpy as np
from pyproj import CRS

from ..errors import InputError
from .decode import PointBatch, finish_batch

__all__ = ["PointSource", "MemorySource", "PointTable", "DEFAULT_BATCH_ROWS", "expand_paths", "input_label"]

#: Records per batch: about 60 MB of working memory per batch in the counting step.
DEFAULT_BATCH_ROWS = 1 << 20


class PointSource:
    """A private point input that can be read in batches (base class).

    Attributes
    ----------
    crs : pyproj.CRS
        CRS of the coordinates the batches hold.
    label : str
        What the input is, for messages and the owner's diagnostics.
    person : str or None
        Name of the person column read beside the coordinates.
    has_person : bool
        Whether the batches carry person identifiers.
    total_rows : int or None
        Number of records when the format tells it without reading them
        (for progress reports to the owner), else None.
    time : TimeSpec or None
        For a series: the time column and the public periods; every batch then
        carries the period of each point (:attr:`PointBatch.period`).
    """

    crs: CRS
    label: str = ""
    person = None
    time = None
    total_rows = None
    batch_rows = DEFAULT_BATCH_ROWS

    @property
    def n_periods(self) -> int:
        """Periods the points are counted in (1 without a series)."""
        return 1 if self.time is None else len(self.time.periods)

    @property
    def has_person(self) -> bool:
        return self.person is not None

    def batches(self) -> Iterator[PointBatch]:  # pragma: no cover - abstract
        raise NotImplementedError

    def fragments(self, target_rows: int) -> list:
        """Independent parts of the input of about ``target_rows`` records each (default: the whole)."""
        return [self]

    def describe(self) -> str:
        return self.label


class MemorySource(PointSource):
    """Points already in memory (arrays, a GeoDataFrame or a :class:`~dpgeo.counting.PointTable`), in chunks.

    ``drops`` are the records the caller already dropped (counted in the
    first batch).
    """

    def __init__(self, x, y, crs, *, person=None, n_read=None, drops=None, label="the point arrays",
                 batch_rows=DEFAULT_BATCH_ROWS, person_name=None, person_null=None, valid=None, kinds=(),
                 time=None, times=None):
        self.x = np.asarray(x, dtype=np.float64).ravel()
        self.y = np.asarray(y, dtype=np.float64).ravel()
        if self.x.shape != self.y.shape:
            raise InputError(f"x and y must have the same length, got {self.x.size} and {self.y.size}")
        self.crs = crs
        self._person = None if person is None else np.asarray(person).ravel()
        if self._person is not None and self._person.shape != self.x.shape:
            raise InputError(f"person must have one identifier per point ({self.x.size}), got {self._person.size}")
        self.person = None if self._person is None else (person_name or "person")
        self._person_null = person_null
        self._valid = valid
        self._kinds = set(kinds)
        self.n_extra = 0 if n_read is None else int(n_read) - self.x.size
        self._drops = dict(drops or {})
        self.label = label
        self.batch_rows = int(batch_rows)
        self.total_rows = self.x.size + self.n_extra
        self.time = time
        self._times = None
        if time is not None:
            self._times = _time_array(times, self.x.size)

    def batches(self):
        n = self.x.size
        step = max(1, self.batch_rows)
        if n == 0:
            yield PointBatch(self.x, self.y, self._person, self.n_extra, dict(self._drops), 0, set(self._kinds),
                             None if self.time is None else np.zeros(0, dtype=np.int64))
            return
        for a in range(0, n, step):
            sl = slice(a, min(n, a + step))
            first = a == 0
            period = None
            if self.time is not None:
                period = self.time.period_of(self._times.slice(sl.start, sl.stop - sl.start))[0]
            b = finish_batch(self.x[sl], self.y[sl], sl.stop - sl.start, self.crs,
                             person=None if self._person is None else self._person[sl],
                             person_null=None if self._person_null is None else self._person_null[sl],
                             valid=None if self._valid is None else self._valid[sl],
                             drops=self._drops if first else None, kinds=self._kinds if first else (),
                             period=period)
            if first:
                b.n_read += self.n_extra
            yield b

    def fragments(self, target_rows):
        return [self]


def _time_array(times, n):
    """Times given beside coordinates in memory (array, list, pandas Series) as one Arrow array of ``n``."""
    import pyarrow as pa

    if times is None:
        raise InputError("a series needs the time of every point: give time= as a column name (files, frames) or "
                         "as an array aligned with the coordinates")
    if isinstance(times, (pa.Array, pa.ChunkedArray)):
        arr = times
    else:
        from .values import arrow_of

        if hasattr(times, "to_numpy") and not hasattr(times, "dt") and not hasattr(times, "array"):
            times = times.to_numpy()
        arr = arrow_of(times, "time")  # a value of another type is read alone, as text
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if len(arr) != n:
        raise InputError(f"time must have one value per point ({n}), got {len(arr)}")
    return arr


def is_glob(p: str) -> bool:
    return any(ch in p for ch in "*?[")


def expand_paths(path) -> tuple[list[str], str]:
    """Files of an input: one file, a glob, or a (partitioned) directory. ``(files, label)``.

    Raises :class:`~dpgeo.errors.InputError` when nothing matches.
    """
    from ..formats import check_readable, special_file_kind

    p = os.fspath(path)
    if is_glob(p):
        check_readable(_glob_root(p), "the folder")
        files = sorted(f for f in glob.glob(p, recursive=True) if os.path.isfile(f))
        if not files:
            raise InputError(f"no file matches {p!r}")
        for f in files:
            check_readable(f, "input")
        return files, p
    check_readable(p, "input")  # before isdir/exists: a folder on the path that may not be opened reads as "missing"
    if os.path.isdir(p):
        if _is_gdal_dataset_dir(p):
            return [p], p
        files = _data_files(p)
        if not files:
            raise InputError(f"the folder {p!r} holds no Parquet or CSV files")
        for f in files:
            check_readable(f, "input")
        return files, p
    if not os.path.exists(p):
        raise InputError(f"input file {p!r} does not exist")
    kind = special_file_kind(p)
    if kind:
        raise InputError(f"input {p!r} is {kind}, not a file: dpgeo reads its input more than once (to check it, "
                         "then to count it); save the data to a file and give that")
    return [p], p


def _glob_root(pattern):
    """The folder part of a glob before its first wildcard (``"."`` when the pattern starts with one)."""
    parts = []
    for part in pattern.replace("\\", "/").split("/"):
        if is_glob(part):
            break
        parts.append(part)
    root = "/".join(parts)
    return root or ("/" if pattern.startswith("/") else ".")


def _is_gdal_dataset_dir(p):
    """A folder GDAL opens as one dataset (a file geodatabase)."""
    return p.rstrip("/\\").lower().endswith(".gdb")


def _data_files(folder):
    """Parquet (or else CSV) files under ``folder``, in sorted order, skipping hidden and ``_`` files."""
    from ..formats import is_csv, is_parquet

    from ..formats import check_readable

    def refuse(err):  # os.walk skips a subfolder it may not list; a partition left out silently would be wrong
        if isinstance(err, PermissionError):
            check_readable(err.filename, "the folder")
        raise InputError(f"cannot list the folder {err.filename!r}: {err.strerror}") from None

    found = []
    for root, dirs, files in os.walk(folder, onerror=refuse):
        dirs[:] = sorted(d for d in dirs if not d.startswith((".", "_")))
        found += [os.path.join(root, f) for f in sorted(files) if not f.startswith((".", "_"))]
    pq = [f for f in found if is_parquet(f)]
    if pq:
        return pq
    csv = [f for f in found if is_csv(f)]
    if csv:
        return csv
    return [f for f in found if not f.endswith((".crc", ".json", ".txt", ".md"))]


@dataclass
class PointTable:
    """Coordinates of a point layer in its own CRS (private data).

    Attributes
    ----------
    x, y : numpy.ndarray
        float64 coordinates of the usable points.
    crs : pyproj.CRS
    n_read : int
        Records read.
    n_dropped : int
        Records dropped (see ``drops`` for why).
    source : str
    person : numpy.ndarray or None
        Person (or other privacy unit) identifier of each point, when a
        person column was asked for; records without one are dropped.
    drops : dict
        Records dropped by reason (null, empty or non-point geometry,
        unparsable, non-finite or out-of-range coordinates, no person).
    """

    x: np.ndarray
    y: np.ndarray
    crs: CRS
    n_read: int
    n_dropped: int
    source: str = ""
    person: np.ndarray | None = None
    drops: dict = field(default_factory=dict)


def input_label(source: PointSource) -> str:
    """How messages name an input: the file's name, the glob or folder, or what was passed."""
    import os

    files = getattr(source, "files", None)
    if files and len(files) == 1:
        return f"input {os.path.basename(files[0])!r}"
    return f"input {source.label!r}" if files else str(source.label)


def _columns(src):
    spec = getattr(src, "_spec", None) or {}
    if "xcol" in spec:
        return (spec["xcol"], spec["ycol"])
    return None
