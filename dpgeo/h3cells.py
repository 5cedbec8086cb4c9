"""H3 hexagon cells over the public study area: the cell set, fast point indexing, boundaries, k-rings.

The cell set is a function of public inputs only: every H3 cell of the given
resolution that intersects the study area (``h3ronpy``'s ``Covers`` mode on
the study area in EPSG:4326 longitude/latitude, together with the cells
within a small tolerance of its outline, so that no point inside the area
can fall in a cell left out). Cells are numbered by their position in the
sorted array of H3 indexes; that position is the cell id every other part
of dpgeo sees (counting, histograms, layers), so :class:`H3Cells` offers the
same interface as the square :class:`~dpgeo.grid.Grid` where they meet.

**Points.** A point is kept when it lies inside the study area (tested in
longitude/latitude against the study area's outline, exactly, for points in
cells that the outline crosses); its cell is the H3 cell
``latLngToCell(lat, lng, res)``. The index is computed in numpy
(:mod:`dpgeo._h3math`: face and lattice coordinates, then one table lookup
per point) and, for the few points within a hair of a face or cell edge, by
H3's reference C library (``h3``) itself, so the cell is exactly H3's. Points outside the study
area, or in no cell of the set, are dropped (the owner's diagnostics count
them, as for square cells).
"""

from __future__ import annotations

import math

import numpy as np
import shapely
from pyproj import CRS

from . import _h3math as hm
from .domain import StudyArea
from .errors import DomainError, ParameterError
from .grid import PointAssignment

__all__ = ["H3Cells", "MAX_H3_CELLS", "H3_EDGE_M", "require_h3", "h3_cells_estimate"]

#: The most cells an H3 layer may have (memory: about 100 bytes per cell through the layer).
MAX_H3_CELLS = 1 << 25
#: Mean edge length (metres) of H3 cells per resolution (h3geo.org tables).
H3_EDGE_M = (1281256.011, 483056.8391, 182512.9565, 68979.22179, 26071.75968, 9854.090990, 3724.532667,
             1406.475763, 531.4140101, 200.8568376, 75.86378287, 28.67251708, 10.83018784, 4.093212717,
             1.547012997, 0.5847150235)
#: Mean cell area (m²) per resolution.
H3_AREA_M2 = (4.357449416e12, 6.097884417e11, 8.680178039e10, 1.239343465e10, 1.770347654e9, 2.529038581e8,
              3.612906216e7, 5.161293360e6, 7.373275976e5, 1.053325135e5, 1.504750191e4, 2.149643654e3,
              3.070919507e2, 4.387027871e1, 6.267181250, 8.953115760e-1)
#: Entries of the lattice lookup tables (4 bytes each) beyond which a resolution is refused.
_MAX_TABLE_ENTRIES = 1 << 27
#: A point within this distance (lattice units) of a hexagon's side, or this close (squared chord) to
#: two faces, is indexed by h3ronpy itself: far above the floating-point error of either implementation.
_HEX_TOL = 1e-7
_FACE_TOL = 1e-10
_UNKNOWN = -2
_CHUNK = 1 << 18
#: A cell corner (or centre) closer than this (gap of face-centre dot products, about radians) to a face edge
#: takes H3's own boundary (h3ronpy), which bends there.
_CORNER_FACE_TOL = 1e-9


def require_h3():
    """Import h3ronpy (and pyarrow), or raise a ParameterError naming the install command."""
    try:
        import h3ronpy  # noqa: F401
        import h3ronpy.vector  # noqa: F401
        import pyarrow  # noqa: F401
    except ImportError:
        raise ParameterError("H3 cells need the h3ronpy package: pip install h3ronpy") from None


def h3_cells_estimate(area: StudyArea, resolution: int) -> int:
    """About how many cells of ``resolution`` cover ``area`` (public; before any cell is listed)."""
    return int(area.polygon.area / H3_AREA_M2[resolution] * 1.1 + area.polygon.length / H3_EDGE_M[resolution] * 2 + 7)


def check_resolution(resolution) -> int:
    if isinstance(resolution, bool) or not isinstance(resolution, (int, np.integer)) or not 0 <= resolution <= 15:
        raise ParameterError(f"h3_resolution must be an integer from 0 to 15, got {resolution!r}")
    return int(resolution)


class H3Cells:
    """The H3 cells of one resolution that intersect a public study area.

    Parameters
    ----------
    area : StudyArea
        The public study area.
    resolution : int
        H3 resolution, 0 (continents) to 15 (about 1 m²); 9 is about 0.1 km².
    max_cells : int
        Refuse a cell set larger than this (before listing it, from an estimate).

    Attributes
    ----------
    cells : numpy.ndarray
        Sorted uint64 H3 indexes; the position of a cell in it is its id.
    n_cells : int
    boundary : numpy.ndarray
        bool per cell: the study area's outline crosses it (points there are
        tested against the outline).

    Examples
    --------
    >>> from dpgeo.domain import StudyArea
    >>> area = StudyArea.from_bbox((-73.99, 40.74, -73.97, 40.76))
    >>> h = H3Cells(area, 8)
    >>> h.n_cells, h.h3_strings([0])[0][:2]
    (11, '88')
    >>> a = h.assign(np.array([-73.98, -70.0]), np.array([40.75, 40.75]))
    >>> a.n_in, a.n_outside
    (1, 1)
    """

    kind = "h3"

    def __init__(self, area: StudyArea, resolution: int, *, max_cells: int = MAX_H3_CELLS):
        require_h3()
        self.area = area
        self.resolution = check_resolution(resolution)
        self.point_crs = CRS.from_epsg(4326)
        est = h3_cells_estimate(area, self.resolution)
        if est > max_cells:
            raise ParameterError(f"H3 resolution {self.resolution} gives about {est:,} cells over the study area "
                                 f"(at most {max_cells:,}): choose a coarser resolution (a smaller number)")
        self._ll, self._lon0 = _area_lonlat(area)
        shapely.prepare(self._ll)
        self._tol_deg = 1e-3 * H3_EDGE_M[self.resolution] / 111_320.0
        bounds = self._ll.bounds
        self._bbox = (bounds[0] - self._tol_deg, bounds[1] - self._tol_deg, bounds[2] + self._tol_deg,
                      bounds[3] + self._tol_deg)
        inner = _cover(self._ll, self.resolution)
        ring = shapely.buffer(self._ll.boundary, self._tol_deg / max(math.cos(math.radians(
            min(max(abs(bounds[1]), abs(bounds[3])), 89.0))), 1e-3))
        edge = _cover(ring, self.resolution)
        self.cells = np.union1d(inner, edge).astype(np.uint64)
        if self.cells.size == 0:
            raise DomainError("the study area covers no H3 cell")
        if self.cells.size > max_cells:
            raise ParameterError(f"H3 resolution {self.resolution} gives {self.cells.size:,} cells over the study "
                                 f"area (at most {max_cells:,}): choose a coarser resolution")
        self.boundary = np.zeros(self.cells.size, dtype=bool)
        self.boundary[np.searchsorted(self.cells, edge)] = True
        self._build_tables()

    # -- the interface shared with Grid (counting, histograms) ----------------------------------------
    @property
    def n_cells(self) -> int:
        return int(self.cells.size)

    @property
    def nx(self) -> int:  # the counting sizes its running count with nx * ny
        return self.n_cells

    ny = 1

    def _cell_classes(self):
        return None

    def universe_ids(self) -> np.ndarray:
        return np.arange(self.n_cells, dtype=np.int64)

    def universe_rank(self, cell_id, *, is_sorted=False) -> np.ndarray:
        return np.asarray(cell_id, dtype=np.int64)

    def universe_id_at(self, rank) -> np.ndarray:
        return np.asarray(rank, dtype=np.int64)

    def in_universe(self, cell_id) -> np.ndarray:
        c = np.asarray(cell_id, dtype=np.int64)
        return (c >= 0) & (c < self.n_cells)

    # -- lookup tables --------------------------------------------------------------------------------
    def _build_tables(self):
        """Per face that the study area's bbox meets: the cell id of every lattice hexagon over the bbox.

        An entry is the id of the H3 cell of the hexagon's centre (``h3ronpy``), looked up in the cell
        set (-1: not in it), when the centre lies robustly on that face and in that hexagon; else
        unknown (points there go to h3ronpy one by one). All tables are one flat int32 array.
        """
        lon0, lat0, lon1, lat1 = self._bbox
        lo, la = np.meshgrid(np.linspace(lon0, lon1, 65), np.linspace(lat0, lat1, 65))
        edge_t = np.linspace(0.0, 1.0, 1025)
        slon = np.concatenate([lo.ravel(), lon0 + (lon1 - lon0) * edge_t, lon0 + (lon1 - lon0) * edge_t,
                               np.full(edge_t.size, lon0), np.full(edge_t.size, lon1)])
        slat = np.concatenate([la.ravel(), np.full(edge_t.size, lat0), np.full(edge_t.size, lat1),
                               lat0 + (lat1 - lat0) * edge_t, lat0 + (lat1 - lat0) * edge_t])
        p = hm.lonlat_to_p(slon, slat)
        # the faces the bbox meets: each sample's own face, and every face whose region comes within the
        # samples' spacing (plus two cell edges) of a sample; a point between samples is that close to one
        d = p @ hm.FACE_CENTRES.T
        own = np.argmax(d, axis=1)
        gap = d[np.arange(own.size), own][:, None] - d
        spacing = math.radians(max((lon1 - lon0) * math.cos(math.radians(min(max(abs(lat0), abs(lat1)), 89.9))),
                                   lat1 - lat0) / 64.0) + 2.0 * H3_EDGE_M[self.resolution] / 6_371_007.0
        faces = np.unique(np.concatenate([own, np.flatnonzero((gap < 4.0 * spacing).any(axis=0))]))
        self.faces = faces
        self._proj = hm.FaceProjector(self.resolution, faces)
        # per face (indexed by face number): table offset, lowest a and b, extents
        self._t_off = np.zeros(20, dtype=np.int64)
        self._t_alo = np.zeros(20, dtype=np.int64)
        self._t_blo = np.zeros(20, dtype=np.int64)
        self._t_na = np.zeros(20, dtype=np.int64)
        self._t_nb = np.zeros(20, dtype=np.int64)
        parts, total = [], 0
        for fc in faces.tolist():
            keep = (p @ hm.FACE_CENTRES[fc]) > 0.2  # the face's hemisphere (gnomonic)
            if not keep.any():
                continue
            one = hm.FaceProjector(self.resolution, [fc])
            _, hx, hy, _, _ = one.project(p[keep])
            bf = hy * hm.M_RSIN60
            af = hx + 0.5 * bf
            a_lo, a_hi = int(np.floor(af.min())) - 3, int(np.ceil(af.max())) + 3
            b_lo, b_hi = int(np.floor(bf.min())) - 3, int(np.ceil(bf.max())) + 3
            na, nb = a_hi - a_lo + 1, b_hi - b_lo + 1
            if total + na * nb > _MAX_TABLE_ENTRIES:
                raise ParameterError(f"H3 resolution {self.resolution} is too fine for a study area this large "
                                     "(its lookup tables would not fit in memory): choose a coarser resolution")
            self._t_off[fc], self._t_alo[fc], self._t_blo[fc] = total, a_lo, b_lo
            self._t_na[fc], self._t_nb[fc] = na, nb
            parts.append(self._fill_table(fc, a_lo, b_lo, na, nb))
            total += na * nb
        self._table = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int32)

    def _fill_table(self, face, a_lo, b_lo, na, nb):
        from h3ronpy.vector import coordinates_to_cells

        table = np.full(na * nb, _UNKNOWN, dtype=np.int32)
        step = max(1, (1 << 20) // nb)
        for a_start in range(a_lo, a_lo + na, step):
            ga, gb = np.meshgrid(np.arange(a_start, min(a_start + step, a_lo + na)), np.arange(b_lo, b_lo + nb),
                                 indexing="ij")
            ga, gb = ga.ravel(), gb.ravel()
            hx, hy = hm.axial_to_hex2d(ga, gb)
            x, y, z = hm.hex2d_to_vec3(hx, hy, face, self.resolution)
            f2, hx2, hy2, fmargin, _ = self._proj.project(np.column_stack([x, y, z]))
            a2, b2, hmargin = hm.hex2d_to_axial(hx2, hy2)
            ok = (f2 == face) & (a2 == ga) & (b2 == gb) & (fmargin > 1e-6) & (hmargin > 0.4)
            lon, lat = hm.vec3_to_lonlat(x, y, z)
            lon = self.wrap_lon(lon)
            lon0, lat0, lon1, lat1 = self._bbox
            pad = 2.0 * H3_EDGE_M[self.resolution] / 111_320.0
            near = (lat >= lat0 - pad) & (lat <= lat1 + pad)
            pad_lon = pad / max(math.cos(math.radians(min(max(abs(lat0), abs(lat1)) + pad, 89.9))), 1e-3)
            near &= (lon >= lon0 - pad_lon) & (lon <= lon1 + pad_lon)
            vals = np.where(ok, -1, _UNKNOWN).astype(np.int32)
            ask = ok & near
            if ask.any():
                lon_a, lat_a = hm.vec3_to_lonlat(x[ask], y[ask], z[ask])
                cell = np.asarray(coordinates_to_cells(lat_a, lon_a, self.resolution)).astype(np.uint64)
                vals[ask] = self._position(cell)
            rows = (ga - a_lo) * nb + (gb - b_lo)
            table[rows] = vals
        return table

    def _position(self, cell) -> np.ndarray:
        """Ids of H3 indexes in the cell set (-1 where not in it)."""
        cell = np.asarray(cell, dtype=np.uint64)
        pos = np.searchsorted(self.cells, cell)
        pos = np.minimum(pos, self.cells.size - 1)
        return np.where(self.cells[pos] == cell, pos, -1).astype(np.int32)

    # -- points -----------------------------------------------------------------------------------------
    def wrap_lon(self, lon):
        """Longitudes moved into the window ``[lon0 - 180, lon0 + 180)`` of the study area's outline."""
        lon = np.asarray(lon, dtype=np.float64)
        if self._lon0 == 0.0:
            return lon
        inside = (lon >= self._lon0 - 180.0) & (lon < self._lon0 + 180.0)
        return np.where(inside, lon, self._lon0 + np.mod(lon - self._lon0 + 180.0, 360.0) - 180.0)

    def cell_of(self, lon, lat) -> np.ndarray:
        """Cell id of each point (-1: in no cell of the set), ignoring the study area's outline.

        ``lon``/``lat`` in degrees (EPSG:4326). The cell is H3's
        ``latLngToCell`` at the resolution.
        """
        lon = self.wrap_lon(lon)
        lat = np.asarray(lat, dtype=np.float64)
        out = np.full(lon.size, -1, dtype=np.int32)
        lon0, lat0, lon1, lat1 = self._bbox
        inb = np.flatnonzero((lon >= lon0) & (lon <= lon1) & (lat >= lat0) & (lat <= lat1))
        for s in range(0, inb.size, _CHUNK):
            idx = inb[s:s + _CHUNK]
            out[idx] = self._cells_in_bbox(lon[idx], lat[idx])
        return out

    def _cells_in_bbox(self, lon, lat):
        face, hx, hy, fmargin, tol = self._proj.project(hm.lonlat_to_p(lon, lat))
        a, b, hmargin = hm.hex2d_to_axial(hx, hy)
        f = face.astype(np.intp)
        ia = a - self._t_alo[f]
        ib = b - self._t_blo[f]
        na, nb = self._t_na[f], self._t_nb[f]
        inside = (ia >= 0) & (ia < na) & (ib >= 0) & (ib < nb)
        row = np.where(inside, self._t_off[f] + ia * nb + ib, 0)
        pos = np.where(inside, self._table[row], _UNKNOWN)
        slow = np.flatnonzero((pos == _UNKNOWN) | (hmargin < tol) | (fmargin < _FACE_TOL))
        if slow.size:
            lo = lon[slow]
            lo = np.where((lo >= -180.0) & (lo <= 180.0), lo, np.mod(lo + 180.0, 360.0) - 180.0)  # exact if in range
            pos[slow] = self._position(_reference_cells(lat[slow], lo, self.resolution))
        return pos.astype(np.int32)

    def assign(self, x, y, *, return_mask: bool = False) -> PointAssignment:
        """Cell ids of the points inside the study area (``x`` longitude, ``y`` latitude, degrees)."""
        lon = self.wrap_lon(x)
        lat = np.asarray(y, dtype=np.float64)
        pos = self.cell_of(lon, lat)
        inside = pos >= 0
        b = np.flatnonzero(inside)
        b = b[self.boundary[pos[b]]]
        if b.size:
            inside[b] = shapely.intersects_xy(self._ll, lon[b], lat[b])
        kept = pos[inside].astype(np.int64)
        return PointAssignment(kept, int(kept.size), int(lon.size - kept.size), inside if return_mask else None)

    # -- what a layer shows -------------------------------------------------------------------------------
    def h3_strings(self, cell_id) -> np.ndarray:
        """H3 indexes of cell ids in their usual string form (15 hexadecimal digits), object array."""
        import h3ronpy
        import pyarrow as pa

        c = pa.array(self.cells[np.asarray(cell_id, dtype=np.int64)], type=pa.uint64())
        return pa.array(h3ronpy.cells_to_string(c)).to_numpy(zero_copy_only=False)

    def polygons(self, cell_id, crs=None) -> np.ndarray:
        """Hexagons (pentagons) of cell ids as shapely polygons in ``crs`` (default: the working CRS).

        The corners of a hexagon that lies on one icosahedron face are computed
        here, in numpy, from the face's lattice (:func:`dpgeo._h3math.corner_hex2d`:
        H3's ``cellToBoundary``, and neighbouring hexagons share their corners
        bit for bit); the few cells that touch a face edge (pentagons, and
        hexagons whose boundary H3 bends where it crosses a face) take their
        vertices from ``h3ronpy``. A cell that spans the antimeridian is
        unwrapped (longitudes made continuous) before projection, so it is drawn
        as one hexagon in a projected CRS; in EPSG:4326 (``crs=4326``) its
        longitudes may exceed 180 (:func:`dpgeo.io.geojson.split_antimeridian`
        splits it for GeoJSON).
        """
        from pyproj import Transformer

        ids = np.asarray(cell_id, dtype=np.int64).ravel()
        if ids.size == 0:
            return np.zeros(0, dtype=object)
        target = CRS.from_user_input(crs) if crs is not None else self.area.crs
        tr = None if target.equals(self.point_crs, ignore_axis_order=True) else \
            Transformer.from_crs(self.point_crs, target, always_xy=True)
        out = np.empty(ids.size, dtype=object)
        for s in range(0, ids.size, _CHUNK):
            part = ids[s:s + _CHUNK]
            lon, lat, ok = self._corners(part)
            lon = _unwrap_rings(self.wrap_lon(lon))
            if tr is not None:
                x, y = tr.transform(lon, lat)
            else:
                x, y = lon, lat
            xy = np.stack([np.asarray(x), np.asarray(y)], axis=-1)
            ring = np.concatenate([xy, xy[:, :1]], axis=1)  # closed rings of 7 points
            res = np.empty(part.size, dtype=object)
            if ok.any():
                m = int(ok.sum())
                res[ok] = shapely.from_ragged_array(shapely.GeometryType.POLYGON, ring[ok].reshape(-1, 2),
                                                    (np.arange(0, 7 * m + 1, 7), np.arange(m + 1)))
            if not ok.all():
                res[~ok] = self._polygons_h3ronpy(part[~ok], tr)
            out[s:s + part.size] = res
        return out

    def _corners(self, ids):
        """Corners (lon, lat; ``(n, 6)``) of cells that lie on one face, and which cells those are."""
        import pyarrow as pa
        from h3ronpy.vector import cells_to_coordinates

        t = pa.record_batch(cells_to_coordinates(pa.array(self.cells[ids], type=pa.uint64())))
        p = hm.lonlat_to_p(t.column("lng").to_numpy(), t.column("lat").to_numpy())
        face, hx, hy, fmargin, _ = self._proj.project(p)
        a, b, hmargin = hm.hex2d_to_axial(hx, hy)
        ok = (hmargin > 0.4) & (fmargin > _CORNER_FACE_TOL)  # the centre robustly on its face and lattice point
        chx, chy = hm.corner_hex2d(a, b)
        pc = self._proj.unproject(face, chx, chy)  # (n, 6, 3)
        ok &= (hm.face_margin(pc, face) > _CORNER_FACE_TOL).all(axis=1)  # every corner on the centre's face
        lon, lat = hm.vec3_to_lonlat(pc[..., 0], pc[..., 1], pc[..., 2])
        return lon, lat, ok

    def _polygons_h3ronpy(self, ids, tr):
        """Polygons of cells from h3ronpy's WKB (face-crossing cells and pentagons)."""
        import pyarrow as pa
        from h3ronpy.vector import cells_to_wkb_polygons

        wkb = cells_to_wkb_polygons(pa.array(self.cells[ids], type=pa.uint64()))
        geoms = shapely.from_wkb(pa.array(wkb).to_numpy(zero_copy_only=False))
        xy, part = shapely.get_coordinates(geoms, return_index=True)
        lon = self.wrap_lon(xy[:, 0])
        # a ring that jumps across ±180: move its western vertices by +360 (continuous longitudes)
        lo = np.full(ids.size, np.inf)
        hi = np.full(ids.size, -np.inf)
        np.minimum.at(lo, part, lon)
        np.maximum.at(hi, part, lon)
        wide = (hi - lo)[part] > 180.0
        lon = np.where(wide & (lon < 0), lon + 360.0, lon)
        out_xy = np.column_stack([lon, xy[:, 1]]) if tr is None else np.column_stack(tr.transform(lon, xy[:, 1]))
        return shapely.set_coordinates(geoms, out_xy)

    def centres(self, cell_id=None, crs=None):
        """Cell centres ``(x, y)`` in ``crs`` (default: the working CRS, metres)."""
        import pyarrow as pa
        from h3ronpy.vector import cells_to_coordinates
        from pyproj import Transformer

        ids = np.arange(self.n_cells) if cell_id is None else np.asarray(cell_id, dtype=np.int64)
        rb = cells_to_coordinates(pa.array(self.cells[ids], type=pa.uint64()))
        t = pa.record_batch(rb)
        lat = t.column("lat").to_numpy()
        lon = self.wrap_lon(t.column("lng").to_numpy())
        target = CRS.from_user_input(crs) if crs is not None else self.area.crs
        if target.equals(self.point_crs, ignore_axis_order=True):
            return lon, lat
        return Transformer.from_crs(self.point_crs, target, always_xy=True).transform(lon, lat)

    def ring_pairs(self, k: int):
        """Pairs of cell ids within grid distance ``k`` of each other (both in the set), and that distance.

        Returns
        -------
        i, j, d : numpy.ndarray
            int64 cell ids and uint8 grid distances (``d = 0`` for ``i == j``).
        """
        import h3ronpy
        import pyarrow as pa

        k = int(k)
        out_i, out_j, out_d = [], [], []
        step = max(1, (1 << 22) // (3 * k * (k + 1) + 1))
        for s in range(0, self.n_cells, step):
            ids = np.arange(s, min(s + step, self.n_cells))
            rb = pa.record_batch(h3ronpy.grid_disk_distances(pa.array(self.cells[ids], type=pa.uint64()), k))
            cells_l, dist_l = rb.column("cell"), rb.column("k")
            offs = cells_l.offsets.to_numpy()
            nbr = cells_l.values.to_numpy().astype(np.uint64)
            dist = dist_l.values.to_numpy()
            src = np.repeat(ids, np.diff(offs))
            pos = self._position(nbr)
            ok = pos >= 0
            out_i.append(src[ok])
            out_j.append(pos[ok].astype(np.int64))
            out_d.append(dist[ok].astype(np.uint8))
        return np.concatenate(out_i), np.concatenate(out_j), np.concatenate(out_d)

    @property
    def spacing_m(self) -> float:
        """Mean distance (metres) between the centres of neighbouring cells: √3 × the mean edge."""
        return math.sqrt(3.0) * H3_EDGE_M[self.resolution]

    def to_metadata(self) -> dict:
        """JSON-serialisable description of the (public) cell set."""
        return {
            "cells": "H3",
            "h3_resolution": self.resolution,
            "h3_mean_edge_m": H3_EDGE_M[self.resolution],
            "h3_mean_area_m2": H3_AREA_M2[self.resolution],
            "n_cells": self.n_cells,
            "cell_set": "every H3 cell that intersects the study area (h3ronpy 'Covers' on the study area in "
                        "EPSG:4326, plus the cells within "
                        f"{self._tol_deg:.2g} degrees of its outline)",
        }


def _unwrap_rings(lon):
    """Longitudes of ``(n, k)`` rings made continuous: a ring spanning more than 180° has its western
    vertices moved by +360."""
    lo, hi = lon.min(axis=1, keepdims=True), lon.max(axis=1, keepdims=True)
    return np.where((hi - lo > 180.0) & (lon < 0), lon + 360.0, lon)


def _reference_cells(lat, lon, res) -> np.ndarray:
    """``latLngToCell`` of H3's reference C library (h3-py) for a few points; h3ronpy's port if h3 is missing.

    Used for points within a hair of a cell or face edge, where the two
    implementations' floating point may round to different cells.
    """
    try:
        import h3
    except ImportError:  # pragma: no cover - h3 is a dependency
        from h3ronpy.vector import coordinates_to_cells

        return np.asarray(coordinates_to_cells(lat, lon, res)).astype(np.uint64)
    f, s2i = h3.latlng_to_cell, h3.str_to_int
    return np.fromiter((s2i(f(a, b, res)) for a, b in zip(lat.tolist(), lon.tolist())), dtype=np.uint64,
                       count=lat.size)


def _area_lonlat(area: StudyArea):
    """The study area in EPSG:4326 with continuous longitudes, and the longitude of its centre (0: unchanged)."""
    from pyproj import Transformer

    src = area.source_crs
    if src.is_geographic and src.equals(CRS.from_epsg(4326), ignore_axis_order=True):
        return area.geometry, 0.0
    tr = Transformer.from_crs(area.crs, 4326, always_xy=True)
    c = area.polygon.centroid
    lon0, _ = tr.transform(c.x, c.y)

    def fn(xy):
        lon, lat = tr.transform(xy[:, 0], xy[:, 1])
        lon = lon0 + np.mod(np.asarray(lon) - lon0 + 180.0, 360.0) - 180.0
        return np.column_stack([lon, lat])

    geom = shapely.transform(area.polygon, fn)
    if not shapely.is_valid(geom):
        geom = shapely.make_valid(geom)
    b = geom.bounds
    if b[2] - b[0] >= 360.0 or not (-90.0 <= b[1] and b[3] <= 90.0):
        raise DomainError("the study area spans all longitudes (it contains a pole): H3 cells need a study area "
                          "that does not")
    lon0 = float(lon0) if (b[0] < -180.0 or b[2] > 180.0) else 0.0
    return geom, lon0


def _cover(geom, res) -> np.ndarray:
    """Sorted uint64 H3 cells covering ``geom`` (lon/lat; parts beyond ±180 are moved back by 360)."""
    from h3ronpy.vector import ContainmentMode, geometry_to_cells

    out = []
    for shift in (-360.0, 0.0, 360.0):
        win = shapely.box(-180.0 - shift, -90.0, 180.0 - shift, 90.0)
        part = shapely.intersection(geom, win)
        if part.is_empty or part.area <= 0:
            continue
        part = shapely.transform(part, lambda xy, s=shift: xy + [s, 0.0])
        for p in shapely.get_parts(part):
            if p.geom_type != "Polygon" or p.area <= 0:
                continue
            out.append(np.asarray(geometry_to_cells(p, res, ContainmentMode.Covers)).astype(np.uint64))
    if not out:
        return np.zeros(0, dtype=np.uint64)
    return np.unique(np.concatenate(out))
