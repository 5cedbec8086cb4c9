"""The square grid laid over the public study area, and cell neighbourhoods.

The grid is a function of public inputs only: the projected study area
fixes the origin (its lower-left corner in the working CRS) and the number
of rows and columns; the cell width in metres is a parameter. Moving,
adding or removing a private point never moves a cell.

Cells are numbered row-major, ``cell_id = iy * nx + ix``, where ``ix`` counts
columns eastwards from ``origin_x`` and ``iy`` rows northwards from
``origin_y``. Cell ``(ix, iy)`` covers ``[origin_x + ix·w, origin_x +
(ix+1)·w) × [origin_y + iy·w, origin_y + (iy+1)·w)``.

The *universe* of the grid is the set of cells that touch the study area;
only those cells are counted, noised and published. It is stored as runs
(row, first column, last column), so that grids of billions of cells cost
memory in proportion to their number of rows, not cells.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import shapely

from .domain import StudyArea
from .errors import DomainError, ParameterError

__all__ = ["Grid", "neighbourhood_offsets", "cell_width_for_radius", "PointAssignment", "area_m2",
           "AREA_M2_DECIMALS"]

#: Decimals of every published ``area_m2`` (0.01 m²): polygons made of cells metres wide, clipped to a
#: study area, are not known better; the rest is floating-point noise of coordinates in the millions.
AREA_M2_DECIMALS = 2


def area_m2(geoms) -> np.ndarray:
    """Areas of polygons in a metric CRS, in m², to :data:`AREA_M2_DECIMALS` decimals.

    Examples
    --------
    >>> w = 106.06601717798212  # cells of 150/√2 m, in UTM coordinates: 7 × 9 of them
    >>> cells = [shapely.box(473941.23 + i * w, 4970748.47 + j * w, 473941.23 + (i + 1) * w, 4970748.47 + (j + 1) * w)
    ...          for i in range(7) for j in range(9)]
    >>> span = shapely.union_all(cells)
    >>> float(shapely.area(span)) == 708_750.0, area_m2([span]).tolist()
    (False, [708750.0])
    """
    geoms = np.asarray(geoms, dtype=object)
    if geoms.size == 0:
        return np.zeros(0)
    return np.round(shapely.area(geoms).astype(float), AREA_M2_DECIMALS)

#: Grids up to this many cells keep a one-byte class per cell for fast point assignment.
_CLASS_MASK_MAX_CELLS = 1 << 28
#: Inputs of at least this many points are assigned to cells on two threads.
_PARALLEL_MIN_POINTS = 1 << 21
_CHUNK_POINTS = 1 << 20


def cell_width_for_radius(radius_m: float, eta: float = 1.0) -> float:
    """DP-DBSCAN cell width ``w = η′·α/√2`` in metres (diagonal ``η′·α``)."""
    return float(eta) * float(radius_m) / math.sqrt(2.0)


def neighbourhood_offsets(eta: float = 1.0) -> np.ndarray:
    """Offsets ``(dx, dy)`` of the cells in the α-neighbourhood NB(X) of a cell.

    NB(X) holds every cell whose minimum distance to X is **strictly** less
    than α. For cells of width ``w = η′α/√2`` at offset ``(dx, dy)`` the
    minimum distance is ``w·sqrt(a² + b²)`` with ``a = max(|dx|-1, 0)``,
    ``b = max(|dy|-1, 0)``, so the condition is ``η′²(a² + b²) < 2``: α drops
    out, and the test is done in exact rational arithmetic on the binary
    value of ``η′`` (a float), never in floating point. (Floating point puts
    the four cells at exactly distance α inside for α = 100 m, giving
    κ = 25 instead of 21.)

    Parameters
    ----------
    eta : float
        ``η′`` in (0, 1].

    Returns
    -------
    numpy.ndarray
        ``(κ, 2)`` int64 array of ``(dx, dy)``, including ``(0, 0)``.

    Examples
    --------
    >>> len(neighbourhood_offsets(1.0))
    21
    >>> len(neighbourhood_offsets(0.5))
    45
    """
    e = Fraction(float(eta))
    if not (0 < e <= 1):
        raise ParameterError(f"eta (η′) must be in (0, 1], got {eta!r}")
    # a² + b² < 2 / η′²; the largest a with a² < 2/η′²
    limit = Fraction(2) / (e * e)
    amax = 0
    while Fraction((amax + 1) ** 2) < limit:
        amax += 1
    r = amax + 1
    out = []
    for dy in range(-r, r + 1):
        b = max(abs(dy) - 1, 0)
        for dx in range(-r, r + 1):
            a = max(abs(dx) - 1, 0)
            if Fraction(a * a + b * b) < limit:
                out.append((dx, dy))
    return np.asarray(out, dtype=np.int64)


@dataclass
class PointAssignment:
    """Cells of the points that fall in the study area (private; not published).

    Attributes
    ----------
    cell_id : numpy.ndarray
        int64 flat cell id of every kept point.
    n_in : int
        Points kept (inside the study area).
    n_outside : int
        Points dropped because they lie outside the study area.
    """

    cell_id: np.ndarray
    n_in: int
    n_outside: int
    mask: np.ndarray | None = None


class Grid:
    """Square cells of ``cell_m`` metres over a :class:`~dpgeo.domain.StudyArea`.

    Parameters
    ----------
    area : StudyArea
        Public study area (its projected polygon fixes the grid).
    cell_m : float
        Cell width in metres (> 0).

    Examples
    --------
    >>> from dpgeo.domain import StudyArea
    >>> area = StudyArea.from_bbox((0, 0, 1000, 500), "EPSG:32615")
    >>> g = Grid(area, 100.0)
    >>> (g.nx, g.ny, g.n_cells)
    (10, 5, 50)
    """

    def __init__(self, area: StudyArea, cell_m: float):
        if not (isinstance(cell_m, (int, float, np.floating)) and math.isfinite(cell_m) and cell_m > 0):
            raise ParameterError(f"cell width must be a positive number of metres, got {cell_m!r}")
        self.area = area
        self.cell_m = float(cell_m)
        minx, miny, maxx, maxy = area.polygon.bounds
        self.origin_x = float(minx)
        self.origin_y = float(miny)
        self.nx = max(1, int(math.ceil((maxx - minx) / self.cell_m - 1e-9)))
        self.ny = max(1, int(math.ceil((maxy - miny) / self.cell_m - 1e-9)))
        if self.nx * self.ny > 2**53:
            raise ParameterError(
                f"a {self.nx} x {self.ny} grid is too large; use a larger cell or a smaller study area"
            )
        self._build_universe()

    # -- universe ----------------------------------------------------------
    def _build_universe(self):
        """Runs of cells touching the study area, and the boundary cells."""
        w = self.cell_m
        poly = self.area.polygon
        self._rect = self.area.is_rectangle
        if self._rect:
            # every cell of the bounding grid touches the rectangle; points are
            # tested against its bounds
            rows = np.arange(self.ny, dtype=np.int64)
            self._runs = np.column_stack([rows, np.zeros_like(rows), np.full_like(rows, self.nx - 1)])
            self._boundary_runs = np.zeros((0, 3), dtype=np.int64)
            self._boundary_ids = np.zeros(0, dtype=np.int64)
            self._finish_runs()
            return
        rows = np.arange(self.ny)
        y0 = self.origin_y + rows * w
        strips = shapely.box(self.origin_x - w, y0, self.origin_x + (self.nx + 1) * w, y0 + w)
        shapely.prepare(poly)
        inter = shapely.intersection(strips, poly)
        parts, idx = shapely.get_parts(inter, return_index=True)
        keep = shapely.area(parts) > 0
        parts, idx = parts[keep], idx[keep]
        b = shapely.bounds(parts)
        x0 = np.clip(np.floor((b[:, 0] - self.origin_x) / w), 0, self.nx - 1).astype(np.int64)
        x1 = np.clip(np.ceil((b[:, 2] - self.origin_x) / w) - 1, 0, self.nx - 1).astype(np.int64)
        self._runs = _merge_runs(idx.astype(np.int64), x0, x1)
        # boundary cells: cells touched by the boundary of the study area
        binter = shapely.intersection(strips, poly.boundary)
        bparts, bidx = shapely.get_parts(binter, return_index=True)
        bb = shapely.bounds(bparts)
        ok = np.isfinite(bb).all(axis=1)
        bb, bidx = bb[ok], bidx[ok]
        bx0 = np.clip(np.floor((bb[:, 0] - self.origin_x) / w), 0, self.nx - 1).astype(np.int64)
        bx1 = np.clip(np.floor((bb[:, 2] - self.origin_x) / w), 0, self.nx - 1).astype(np.int64)
        self._boundary_runs = _merge_runs(bidx.astype(np.int64), bx0, bx1)
        self._boundary_ids = _runs_to_ids(self._boundary_runs, self.nx)
        self._finish_runs()

    def _finish_runs(self):
        r = self._runs
        self._run_start = r[:, 0] * self.nx + r[:, 1]
        self._run_end = r[:, 0] * self.nx + r[:, 2]
        self._run_cum = np.concatenate([[0], np.cumsum(r[:, 2] - r[:, 1] + 1)])
        if self.n_cells == 0:
            raise DomainError("the study area covers no grid cell")

    @property
    def n_cells(self) -> int:
        """Number of cells in the universe (cells touching the study area)."""
        return int(self._run_cum[-1])

    @property
    def shape(self) -> tuple:
        """``(ny, nx)``: rows and columns of the grid's bounding rectangle."""
        return (self.ny, self.nx)

    @property
    def bounds(self) -> tuple:
        """``(minx, miny, maxx, maxy)`` of the grid in the working CRS (metres)."""
        w = self.cell_m
        return (self.origin_x, self.origin_y, self.origin_x + self.nx * w, self.origin_y + self.ny * w)

    def universe_mask(self) -> np.ndarray:
        """Boolean ``(ny, nx)`` array, ``True`` for cells of the universe."""
        mask = np.zeros(self.ny * self.nx, dtype=bool)
        for a, b in zip(self._run_start.tolist(), self._run_end.tolist()):
            mask[a:b + 1] = True
        return mask.reshape(self.ny, self.nx)

    def universe_ids(self) -> np.ndarray:
        """Sorted flat ids of all universe cells (use only for grids that fit in memory)."""
        return _runs_to_ids(self._runs, self.nx)

    def boundary_ids(self) -> np.ndarray:
        """Sorted flat ids of the cells that the study area's boundary touches (none for a rectangle, whose
        cells are not clipped); every other cell of the universe lies inside the study area."""
        return self._boundary_ids

    def in_universe(self, cell_id: np.ndarray) -> np.ndarray:
        """Whether each flat cell id belongs to the universe (vectorised)."""
        cell_id = np.asarray(cell_id, dtype=np.int64)
        k = np.searchsorted(self._run_start, cell_id, side="right") - 1
        ok = k >= 0
        kk = np.where(ok, k, 0)
        return ok & (cell_id <= self._run_end[kk])

    def universe_id_at(self, rank: np.ndarray) -> np.ndarray:
        """The flat id of the ``rank``-th universe cell (0-based, sorted order)."""
        rank = np.asarray(rank, dtype=np.int64)
        k = np.searchsorted(self._run_cum, rank, side="right") - 1
        return self._run_start[k] + (rank - self._run_cum[k])

    def universe_rank(self, cell_id: np.ndarray, *, is_sorted: bool = False) -> np.ndarray:
        """The rank (0-based, sorted order) of universe cells; inverse of :meth:`universe_id_at`.

        ``is_sorted=True`` promises increasing ids and finds their runs in
        linear time (one binary search per run instead of one per id).
        """
        cell_id = np.asarray(cell_id, dtype=np.int64)
        if is_sorted and cell_id.size > 4 * self._run_start.size:
            # run of id i = (number of run starts <= id i) - 1, counted by a cumulative sum
            first = np.searchsorted(cell_id, self._run_start, side="left")
            k = np.cumsum(np.bincount(first, minlength=cell_id.size + 1)[:cell_id.size]) - 1
        else:
            k = np.searchsorted(self._run_start, cell_id, side="right") - 1
        return self._run_cum[k] + (cell_id - self._run_start[k])

    # -- points --------------------------------------------------------------
    def cell_index(self, x: np.ndarray, y: np.ndarray):
        """Flat cell id of each point and whether it falls on the grid at all.

        ``ix = trunc((x - origin_x) · (1/w))`` for points east of the origin
        (the same as ``floor``), likewise ``iy``. Every part of dpgeo that maps
        points to cells uses this one function.

        Returns
        -------
        ids : numpy.ndarray
            int64 flat ids (meaningless where ``on_grid`` is False).
        on_grid : numpy.ndarray
            bool, inside the grid's bounding rectangle.
        """
        inv = 1.0 / self.cell_m
        fx = np.asarray(x, dtype=np.float64) - self.origin_x
        fx *= inv
        fy = np.asarray(y, dtype=np.float64) - self.origin_y
        fy *= inv
        on = (fx >= 0) & (fx < self.nx) & (fy >= 0) & (fy < self.ny)
        ix = fx.astype(np.int64)
        del fx
        ids = fy.astype(np.int64)
        del fy
        ids *= self.nx
        ids += ix
        return ids, on

    def _cell_classes(self):
        """uint8 per grid cell: 0 outside the universe, 1 inside, 2 cut by the boundary.

        Built once, only for grids up to 2**28 cells (one byte per cell).
        """
        if getattr(self, "_cls", None) is None and self.nx * self.ny <= _CLASS_MASK_MAX_CELLS:
            cls = np.zeros(self.nx * self.ny, dtype=np.uint8)
            for a, b in zip(self._run_start.tolist(), self._run_end.tolist()):
                cls[a:b + 1] = 1
            cls[self._boundary_ids] = 2
            self._cls = cls
        return getattr(self, "_cls", None)

    def assign(self, x: np.ndarray, y: np.ndarray, *, return_mask: bool = False) -> PointAssignment:
        """Flat cell ids of the points inside the study area.

        A point is kept when it lies inside (or on the edge of) the study area
        polygon; points in cells that the boundary crosses are tested exactly
        against the polygon, all others by their cell alone.
        """
        x = np.asarray(x, dtype=np.float64)
        y = np.asarray(y, dtype=np.float64)
        if x.size >= _PARALLEL_MIN_POINTS and not return_mask:
            # Work in chunks of about a million points: the temporaries stay
            # small and are reused from the heap instead of being faulted in
            # afresh, and numpy releases the GIL, so two threads share the work.
            from concurrent.futures import ThreadPoolExecutor

            self._cell_classes()
            cuts = list(range(0, x.size, _CHUNK_POINTS)) + [x.size]
            slices = [slice(a, b) for a, b in zip(cuts[:-1], cuts[1:])]
            with ThreadPoolExecutor(2) as ex:
                parts = list(ex.map(lambda sl: self._assign(x[sl], y[sl]).cell_id, slices))
            kept = np.concatenate(parts)
            return PointAssignment(cell_id=kept, n_in=int(kept.size), n_outside=int(x.size - kept.size))
        return self._assign(x, y, return_mask)

    def _assign(self, x, y, return_mask=False) -> PointAssignment:
        ids, ok = self.cell_index(x, y)
        if self._rect:
            minx, miny, maxx, maxy = self.area.polygon.bounds
            ok &= x <= maxx
            ok &= y <= maxy
            kept = ids[ok]
            return PointAssignment(kept, int(kept.size), int(x.size - kept.size), ok if return_mask else None)
        cls = self._cell_classes()
        if cls is not None:
            ids[~ok] = 0
            c = cls[ids]
            c[~ok] = 0
            inside = c > 0
            b = np.flatnonzero(c == 2)
            del c
        else:  # huge grids: look cells up in the run list
            sel = np.flatnonzero(ok)
            inside = np.zeros(x.size, dtype=bool)
            inside[sel] = self.in_universe(ids[sel])
            b = np.zeros(0, dtype=np.int64)
            if self._boundary_ids.size and sel.size:
                pos = np.minimum(np.searchsorted(self._boundary_ids, ids[sel]), self._boundary_ids.size - 1)
                b = sel[self._boundary_ids[pos] == ids[sel]]
        if b.size:
            inside[b] = shapely.intersects_xy(self.area.polygon, x[b], y[b])
        kept = ids[inside]
        return PointAssignment(kept, int(kept.size), int(x.size - kept.size), inside if return_mask else None)

    # -- geometry ------------------------------------------------------------
    def cell_xy(self, cell_id: np.ndarray):
        """Column and row indices ``(ix, iy)`` of flat cell ids."""
        cell_id = np.asarray(cell_id, dtype=np.int64)
        return cell_id % self.nx, cell_id // self.nx

    def cell_boxes(self, cell_id: np.ndarray) -> np.ndarray:
        """Shapely boxes (working CRS, metres) of the given cells."""
        ix, iy = self.cell_xy(cell_id)
        w = self.cell_m
        x0 = self.origin_x + ix * w
        y0 = self.origin_y + iy * w
        return shapely.box(x0, y0, x0 + w, y0 + w)

    def to_metadata(self) -> dict:
        """JSON-serialisable description of the (public) grid; without its origin and shape when it was laid over
        the private data's own extent (exploration only: they would locate the extreme points)."""
        if getattr(self.area, "from_data", False):
            return {"cell_width_m": self.cell_m, "origin": None, "nx": None, "ny": None, "n_cells": None}
        return {
            "cell_width_m": self.cell_m,
            "origin": [self.origin_x, self.origin_y],
            "nx": self.nx,
            "ny": self.ny,
            "n_cells": self.n_cells,
        }


def _merge_runs(row, x0, x1) -> np.ndarray:
    """Sort runs ``(row, x0, x1)`` and merge overlapping/adjacent runs of a row."""
    if row.size == 0:
        return np.zeros((0, 3), dtype=np.int64)
    order = np.lexsort((x0, row))
    row, x0, x1 = row[order], x0[order], x1[order]
    # running max of x1 within each row
    out = []
    cur_r, cur_a, cur_b = int(row[0]), int(x0[0]), int(x1[0])
    for r, a, b in zip(row[1:].tolist(), x0[1:].tolist(), x1[1:].tolist()):
        if r == cur_r and a <= cur_b + 1:
            if b > cur_b:
                cur_b = b
        else:
            out.append((cur_r, cur_a, cur_b))
            cur_r, cur_a, cur_b = r, a, b
    out.append((cur_r, cur_a, cur_b))
    return np.asarray(out, dtype=np.int64)


def _runs_to_ids(runs: np.ndarray, nx: int) -> np.ndarray:
    if runs.size == 0:
        return np.zeros(0, dtype=np.int64)
    lengths = runs[:, 2] - runs[:, 1] + 1
    starts = runs[:, 0] * nx + runs[:, 1]
    total = int(lengths.sum())
    offs = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    return np.repeat(starts, lengths) + offs
