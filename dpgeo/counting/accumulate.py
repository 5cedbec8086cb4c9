"""The running count of cell ids that counting adds batches to (memory O(non-empty cells)).

Shared by the in-process stream (:mod:`~dpgeo.counting.stream`) and the Dask
path (:mod:`~dpgeo.counting.dask`); everything here is exact and **private**.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .checks import InputTally

__all__ = ["CountAccumulator", "CountResult", "sum_by_id"]

#: Largest bounding grid whose running count is a dense array (8 bytes per cell: 256 MB).
_DENSE_MAX_CELLS = 1 << 25
#: Cell ids buffered before they are added to the running count.
_BUFFER_IDS = 1 << 24


class CountAccumulator:
    """A running count of cell ids, in memory O(non-empty cells) (dense for small grids).

    Examples
    --------
    >>> acc = CountAccumulator(10)
    >>> acc.add(np.array([3, 1, 3])); acc.add(np.array([9]))
    >>> [a.tolist() for a in acc.result()]
    [[1, 3, 9], [1, 2, 1]]
    """

    def __init__(self, n_cells: int, *, buffer_ids: int = _BUFFER_IDS):
        self.n_cells = int(n_cells)
        self._dense = np.zeros(self.n_cells, dtype=np.int64) if self.n_cells <= _DENSE_MAX_CELLS else None
        self._ids = np.zeros(0, dtype=np.int64)
        self._counts = np.zeros(0, dtype=np.int64)
        self._buf = np.empty(min(int(buffer_ids), 1 << 30), dtype=np.int64)
        self._fill = 0

    def add(self, ids):
        ids = np.asarray(ids, dtype=np.int64)
        while ids.size:
            room = self._buf.size - self._fill
            if room == 0:
                self._flush()
                continue
            take = ids[:room]
            self._buf[self._fill:self._fill + take.size] = take
            self._fill += take.size
            ids = ids[take.size:]

    def add_counts(self, ids, counts):
        """Add counts already aggregated per cell (sorted or not)."""
        ids = np.asarray(ids, dtype=np.int64)
        counts = np.asarray(counts, dtype=np.int64)
        if self._dense is not None:
            np.add.at(self._dense, ids, counts) if ids.size < 4096 else \
                self._dense.__iadd__(np.bincount(ids, weights=counts, minlength=self.n_cells).astype(np.int64))
        else:
            self._merge(ids, counts)

    def _flush(self):
        if not self._fill:
            return
        buf = self._buf[:self._fill]
        if self._dense is not None:
            self._dense += np.bincount(buf, minlength=self.n_cells)
        else:
            u, c = np.unique(buf, return_counts=True)
            self._merge(u, c.astype(np.int64))
        self._fill = 0

    def _merge(self, ids, counts):
        if self._ids.size:
            ids = np.concatenate([self._ids, ids])
            counts = np.concatenate([self._counts, counts])
        self._ids, self._counts = sum_by_id(ids, counts)

    def result(self):
        """Sorted unique ids of the non-empty cells and their int64 counts."""
        self._flush()
        self._buf = np.empty(0, dtype=np.int64)
        if self._dense is not None:
            ids = np.flatnonzero(self._dense).astype(np.int64)
            return ids, self._dense[ids]
        keep = self._counts > 0
        return self._ids[keep], self._counts[keep]


def sum_by_id(ids, counts, n_cells=None):
    """Sorted unique ``ids`` and the sums of their ``counts`` (dense bincount when ``n_cells`` is small).

    Examples
    --------
    >>> [a.tolist() for a in sum_by_id(np.array([5, 2, 5]), np.array([1, 1, 3]))]
    [[2, 5], [1, 4]]
    """
    ids = np.asarray(ids, dtype=np.int64)
    counts = np.asarray(counts, dtype=np.int64)
    if not ids.size:
        return ids, counts
    if n_cells is not None and n_cells <= _DENSE_MAX_CELLS:
        dense = np.bincount(ids, weights=counts, minlength=n_cells)  # exact: counts < 2**53
        u = np.flatnonzero(dense)
        return u.astype(np.int64), dense[u].astype(np.int64)
    order = np.argsort(ids, kind="stable")  # concatenated sorted runs: a linear merge (timsort)
    ids, counts = ids[order], counts[order]
    start = np.r_[0, np.flatnonzero(np.diff(ids)) + 1]
    return ids[start], np.add.reduceat(counts, start)


@dataclass
class CountResult:
    """What one counting (streaming or Dask) found: counts, the tally of the input and owner-only totals."""

    cell_id: np.ndarray
    count: np.ndarray
    tally: InputTally
    n_outside: int = 0
    n_unprojectable: int = 0
    n_cap_dropped: int = 0
    swap: tuple | None = None
    kept_xy: tuple | None = None
    recount: object = None
    kept_period: np.ndarray | None = None
