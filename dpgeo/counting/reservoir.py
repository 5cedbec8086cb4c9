"""The per-person cap, computed while the points stream by.

:func:`dpgeo.contribution.cap_per_person` keeps, for each person, the ``K``
points with the smallest of independent uniform keys — a uniformly random
``K``-subset of the person's points. :class:`PersonReservoir` does the same
without holding all points: one key per point is drawn batch by batch, in
stream order (``Generator.random(a)`` followed by ``Generator.random(b)``
yields the same numbers as ``Generator.random(a + b)``, so batching does not
change the result), and the reservoir keeps, per person, the ``K`` smallest keys seen so
far. The ``K`` smallest keys of a person among all points are the ``K``
smallest among (the ``K`` smallest of the points seen before) and (the new
points), so pruning between batches never drops a point that would have been
kept: the kept points are exactly those of the ``K`` smallest keys over the whole
input, so the law is that of ``cap_per_person`` (a uniformly random
``K``-subset per person; both use :func:`keep_smallest_keys`, the reservoir
with keys from a numpy generator seeded from the run's noise source, which
needs no cryptographic strength: any rule that looks only at one person's
records bounds that person's contribution by ``K``).

Memory: ``O(persons × K)`` entries between prunes, at most twice that (plus
one batch) before a prune; an entry is a key (8 bytes), a cell id (8 bytes),
the person identifier (8 bytes for integers; a Python object for text), and
with ``keep_xy`` the projected coordinates (16 bytes). A prune sorts the
entries, ``O(m log m)``; prunes happen when the entries have doubled, so the
total cost is ``O(n log n)`` for ``n`` points.

:func:`cap_grouped_counts` draws the same law from per-``(person, cell)``
counts instead of points (the Dask path, whose workers send counts and never
draw random numbers): a multivariate hypergeometric draw per person.
"""

from __future__ import annotations

import numpy as np

__all__ = ["PersonReservoir", "cap_grouped_counts"]

#: The reservoir is pruned when the pending entries exceed max(kept entries, this).
_MIN_PRUNE = 1 << 20


class PersonReservoir:
    """Keep at most ``k`` uniformly random points per person from a stream of batches.

    Parameters
    ----------
    k : int
        Points kept per person (``K >= 1``).
    rng : numpy.random.Generator
        The mechanism's generator: one uniform key per point, drawn in stream order.
    keep_xy : bool
        Also keep the coordinates of the kept points (for a later recount).
    group_cells : int, optional
        For a series whose cap counts per period (``person_accounting="period"``):
        the cells of one period's grid; the cell ids are then ``period ·
        group_cells + cell`` and at most ``k`` points are kept per person *and
        period*. Default: at most ``k`` per person over all the ids.

    Examples
    --------
    >>> import numpy as np
    >>> r = PersonReservoir(2, np.random.default_rng(0))
    >>> r.add(np.array(["a", "a", "b"], dtype=object), np.array([1, 2, 3]))
    >>> r.add(np.array(["a"], dtype=object), np.array([4]))
    >>> kept = r.result()
    >>> kept.n_kept, kept.n_dropped, 3 in kept.cell_id  # two of a's three points, b's one
    (3, 1, True)
    """

    def __init__(self, k: int, rng: np.random.Generator, *, keep_xy: bool = False, group_cells=None):
        self.k = int(k)
        self.rng = rng
        self.keep_xy = keep_xy
        self.group_cells = group_cells
        self._parts = []  # (person, key, cell_id[, x, y]) arrays
        self._n_kept = 0
        self._n_pending = 0
        self.n_added = 0

    def add(self, person, cell_id, x=None, y=None):
        """Add the points of one batch (person ids and cell ids of points inside the study area)."""
        n = int(np.asarray(cell_id).size)
        if n == 0:
            return
        keys = self.rng.random(n)
        part = [np.asarray(person), keys, np.asarray(cell_id, dtype=np.int64)]
        if self.keep_xy:
            part += [np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)]
        self._parts.append(part)
        self._n_pending += n
        self.n_added += n
        if self._n_pending > max(self._n_kept, _MIN_PRUNE):
            self._prune()

    def _prune(self):
        if len(self._parts) == 1 and self._n_pending == 0:
            return
        cols = [np.concatenate([p[i] for p in self._parts]) for i in range(len(self._parts[0]))]
        if self.group_cells is None:
            keep = _smallest_keys(cols[0], cols[1], self.k)
        else:  # a series with the cap counted in each period: per (person, period)
            keep = _smallest_keys(cols[0], cols[1], self.k, cols[2] // self.group_cells)
        cols = [c[keep] for c in cols]
        self._parts = [cols]
        self._n_kept = int(cols[1].size)
        self._n_pending = 0

    def result(self):
        """The kept points: ``cell_id`` (and ``x``, ``y``), ``n_kept``, ``n_dropped``."""
        if not self._parts:
            e = np.zeros(0)
            return _Kept(np.zeros(0, np.int64), e, e, 0, 0)
        self._prune()
        cols = self._parts[0]
        # the kept points in their original stream order is not needed: counts only
        x = cols[3] if self.keep_xy else None
        y = cols[4] if self.keep_xy else None
        return _Kept(cols[2], x, y, int(cols[2].size), self.n_added - int(cols[2].size))


class _Kept:
    def __init__(self, cell_id, x, y, n_kept, n_dropped):
        self.cell_id, self.x, self.y, self.n_kept, self.n_dropped = cell_id, x, y, n_kept, n_dropped


def _smallest_keys(person, keys, k, group=None):
    """Mask of the ``k`` smallest keys of each person (ties: first in order, as ``cap_per_person``); with
    ``group`` (an int64 array, e.g. the period), of each (person, group) pair."""
    import pandas as pd

    codes, _ = pd.factorize(person, use_na_sentinel=True)
    if group is not None:
        codes = codes.astype(np.int64) * (int(group.max(initial=0)) + 1) + group
    return keep_smallest_keys(codes, keys, k)


def keep_smallest_keys(codes, keys, k):
    """Mask of the ``k`` smallest ``keys`` within each group ``codes`` (ties: first in order).

    The rule of every per-person cap in dpgeo: with independent uniform keys
    it keeps a uniformly random ``k``-subset of each group.

    Examples
    --------
    >>> keep_smallest_keys(np.array([0, 0, 0, 1]), np.array([0.3, 0.1, 0.2, 0.9]), 2).tolist()
    [False, True, True, True]
    """
    n = codes.size
    order = np.lexsort((keys, codes))
    sorted_codes = codes[order]
    starts = np.r_[0, np.flatnonzero(np.diff(sorted_codes)) + 1]
    sizes = np.diff(np.r_[starts, n])
    rank = np.arange(n) - np.repeat(starts, sizes)
    keep = np.empty(n, dtype=bool)
    keep[order] = rank < k
    return keep


def cap_grouped_counts(person_code, cell_id, count, k, rng):
    """A uniformly random ``k``-subset of each person's points, from per-``(person, cell)`` counts.

    Parameters
    ----------
    person_code : numpy.ndarray
        int64 person of each ``(person, cell)`` row, rows of a person consecutive.
    cell_id, count : numpy.ndarray
        The cell and the number of the person's points in it (> 0).
    k : int
        Points kept per person.
    rng : numpy.random.Generator
        The mechanism's generator.

    Returns
    -------
    numpy.ndarray
        int64 points kept in each row (sum over a person's rows = min(k, total)).

    Notes
    -----
    Choosing ``k`` of a person's ``N`` points uniformly at random and
    counting them per cell is a multivariate hypergeometric draw. It is drawn
    by halving: the number of the ``m`` kept points that fall in the first
    half of the person's rows is hypergeometric(``N_left``, ``N_right``,
    ``m``), and each half is split again, all persons at once, so the work is
    ``O(rows · log(rows per person))`` numpy operations.

    Examples
    --------
    >>> import numpy as np
    >>> kept = cap_grouped_counts(np.array([0, 0, 1]), np.array([5, 6, 5]), np.array([3, 1, 2]), 2,
    ...                           np.random.default_rng(0))
    >>> int(kept[:2].sum()), int(kept[2])
    (2, 2)
    """
    person_code = np.asarray(person_code, dtype=np.int64)
    count = np.asarray(count, dtype=np.int64)
    n = count.size
    kept = np.zeros(n, dtype=np.int64)
    if n == 0:
        return kept
    starts = np.r_[0, np.flatnonzero(np.diff(person_code)) + 1]
    ends = np.r_[starts[1:], n]
    cum = np.r_[0, np.cumsum(count)]
    total = cum[ends] - cum[starts]
    m = np.minimum(total, int(k))
    # segments [lo, hi) with m points to place; whole segments when m == total
    lo, hi, need = starts, ends, m
    while lo.size:
        full = need == (cum[hi] - cum[lo])
        if full.any():  # every point of these rows is kept
            idx = _ranges(lo[full], hi[full])
            kept[idx] = count[idx]
        single = ~full & (hi - lo == 1)
        kept[lo[single]] = need[single]
        go = ~full & ~single & (need > 0)
        lo, hi, need = lo[go], hi[go], need[go]
        if not lo.size:
            break
        mid = (lo + hi) // 2
        good = cum[mid] - cum[lo]
        bad = cum[hi] - cum[mid]
        left = rng.hypergeometric(good, bad, need)
        lo, hi, need = np.r_[lo, mid], np.r_[mid, hi], np.r_[left, need - left]
    return kept


def _ranges(lo, hi):
    lengths = hi - lo
    if lengths.sum() == 0:
        return np.zeros(0, dtype=np.int64)
    return np.repeat(lo, lengths) + (np.arange(lengths.sum()) - np.repeat(np.cumsum(lengths) - lengths, lengths))
