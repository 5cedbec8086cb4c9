"""The public study area (domain) and the working coordinate reference system.

Everything a mechanism needs to know about *where* — the grid extent, its
anchor, the projection — comes from a **public** study area given by the
user, never from the private points. The working CRS is a projected CRS in
metres: the one given by the user, or else the UTM zone that contains the
centre of the study area (as listed in the PROJ database).

:meth:`StudyArea.from_points_extent` builds a study area from the data's own
bounding box for exploration only; the result is flagged and every output
made with it says it is not differentially private.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, field

import numpy as np
import shapely
from pyproj import CRS, Proj, Transformer

from .errors import DomainError, StudyAreaWarning

__all__ = ["StudyArea", "as_study_area", "utm_crs_for", "working_crs_for"]

#: Vertices added along each edge of the study area before it is projected,
#: so that straight lines in the domain CRS become the right curves.
_DENSIFY_SEGMENTS = 256


@dataclass
class StudyArea:
    """A public study area, held both in its own CRS and in the working CRS.

    Use the constructors (:meth:`from_bbox`, :meth:`from_geometry`,
    :meth:`from_file`) or :func:`as_study_area` rather than the dataclass
    directly.

    Attributes
    ----------
    geometry : shapely.Polygon or shapely.MultiPolygon
        The study area in :attr:`source_crs`.
    source_crs : pyproj.CRS
        The CRS the study area was given in.
    crs : pyproj.CRS
        Working CRS: projected, axis units metres.
    polygon : shapely.Polygon or shapely.MultiPolygon
        The study area projected to :attr:`crs` (metres), densified.
    description : str
        How the study area was given (for the metadata).
    from_data : bool
        ``True`` when the area was derived from the private data (not private).

    Examples
    --------
    >>> area = StudyArea.from_bbox((-93.33, 44.89, -93.19, 45.05))
    >>> area.crs.to_epsg()
    32615
    >>> round(area.polygon.area / 1e6)  # km²
    196
    """

    geometry: shapely.Geometry
    source_crs: CRS
    crs: CRS
    polygon: shapely.Geometry
    description: str
    from_data: bool = False
    bbox: tuple = field(default=None)

    # -- constructors -----------------------------------------------------
    @classmethod
    def from_bbox(cls, bounds, crs="EPSG:4326", *, working_crs=None) -> "StudyArea":
        """Study area from ``(minx, miny, maxx, maxy)`` in ``crs`` (default lon/lat)."""
        try:
            minx, miny, maxx, maxy = (float(v) for v in bounds)
        except (TypeError, ValueError):
            raise DomainError(
                f"domain bbox must be four numbers minx,miny,maxx,maxy; got {bounds!r}"
            ) from None
        if not (np.isfinite([minx, miny, maxx, maxy]).all() and minx < maxx and miny < maxy):
            raise DomainError(
                f"domain bbox must have minx < maxx and miny < maxy; got {minx},{miny},{maxx},{maxy}"
            )
        src = _as_crs(crs, "domain CRS")
        if src.is_geographic and not (-180 <= minx and maxx <= 180 and -90 <= miny and maxy <= 90):
            raise DomainError(
                f"domain bbox {minx},{miny},{maxx},{maxy} is not valid longitude/latitude for {src.name}; "
                "give --domain-crs if the bbox is in another CRS"
            )
        geom = shapely.box(minx, miny, maxx, maxy)
        return cls._make(geom, src, working_crs, f"bbox {minx:g},{miny:g},{maxx:g},{maxy:g} ({_crs_label(src)})")

    @classmethod
    def from_geometry(cls, geometry, crs, *, working_crs=None, description=None) -> "StudyArea":
        """Study area from a shapely (Multi)Polygon in ``crs``."""
        src = _as_crs(crs, "domain CRS")
        return cls._make(geometry, src, working_crs, description or f"polygon ({_crs_label(src)})")

    @classmethod
    def from_file(cls, path, *, layer=None, working_crs=None) -> "StudyArea":
        """Study area as the union of the polygons in a vector file."""
        import geopandas as gpd

        from ._access import check_readable

        path = os.fspath(path)
        check_readable(path, "domain file", DomainError)
        if not os.path.exists(path):
            raise DomainError(f"domain file {path!r} does not exist")
        if not os.path.isdir(path) and not os.path.isfile(path):  # a named pipe would block until written to
            raise DomainError(f"domain file {path!r} is not a regular file (a named pipe or a device): save the "
                              "study area to a file (e.g. area.geojson) and give that")
        if os.path.isdir(path) and not path.rstrip("/\\").lower().endswith(".gdb"):
            raise DomainError(f"--domain {path!r} is a folder; give a polygon file (e.g. area.geojson) or a bbox")
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the library's own warning text is not for dpgeo's users
                gdf = gpd.read_file(path, layer=layer) if layer else gpd.read_file(path)
        except Exception as exc:  # the driver's message is the useful part (the study area is public)
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise DomainError(f"cannot read domain file {path!r}: {first}") from None
        return cls.from_frame(gdf, working_crs=working_crs, description=f"polygons from {os.path.basename(path)}")

    @classmethod
    def from_frame(cls, gdf, *, working_crs=None, description=None) -> "StudyArea":
        """Study area as the union of the polygons of a GeoDataFrame/GeoSeries."""
        geoms = np.asarray(gdf.geometry.values if hasattr(gdf, "geometry") else gdf.values)
        if gdf.crs is None:
            raise DomainError("the domain layer has no CRS; set one (e.g. gdf.set_crs('EPSG:4326'))")
        geoms = geoms[~shapely.is_empty(geoms) & ~shapely.is_missing(geoms)]
        if len(geoms) == 0:
            raise DomainError("the domain layer has no geometries")
        kinds = set(shapely.get_type_id(geoms).tolist())
        if not kinds <= {3, 6}:
            raise DomainError("the domain layer must contain polygons (the public study area), not points or lines")
        invalid = ~shapely.is_valid(geoms)
        why = shapely.is_valid_reason(geoms[invalid][0]) if invalid.any() else None
        geom = shapely.union_all(_polygonal(shapely.make_valid(geoms)) if why else geoms)
        return cls._make(geom, gdf.crs, working_crs, description or "polygon layer", repaired=why)

    @classmethod
    def from_points_extent(cls, x, y, crs, *, working_crs=None) -> "StudyArea":
        """Study area from the bounding box of the (private) points. **Not private.**

        For exploration only: the extent of the data reveals the extreme
        points. Results made with it are marked ``differentially_private:
        false``.
        """
        x = np.asarray(x, dtype=float)
        y = np.asarray(y, dtype=float)
        if x.size == 0:
            raise DomainError("cannot derive a domain from an empty point set")
        minx, maxx, miny, maxy = x.min(), x.max(), y.min(), y.max()
        pad_x = max((maxx - minx) * 1e-6, 1e-9)
        pad_y = max((maxy - miny) * 1e-6, 1e-9)
        src = _as_crs(crs, "input CRS")
        geom = shapely.box(minx - pad_x, miny - pad_y, maxx + pad_x, maxy + pad_y)
        area = cls._make(geom, src, working_crs, "extent of the private data (NOT differentially private)")
        area.from_data = True
        return area

    @classmethod
    def _make(cls, geom, src: CRS, working, description, *, repaired=None) -> "StudyArea":
        """The study area of ``geom`` in ``src``; an invalid polygon is repaired, with a :class:`StudyAreaWarning`.

        ``repaired``: why the caller already repaired the polygons it unioned.
        """
        if geom is None or shapely.is_empty(geom):
            raise DomainError("the study area is empty: it has no polygon with an area"
                              + (f" once its invalid polygons are repaired ({repaired})" if repaired else "")
                              + "; fix the polygon or give a bbox")
        if shapely.get_type_id(geom) not in (3, 6):
            raise DomainError("the study area must be a polygon or multipolygon, got a "
                              f"{shapely.get_type_id(geom) and geom.geom_type}")
        if not shapely.is_valid(geom):
            repaired = repaired or shapely.is_valid_reason(geom)
            geom = shapely.union_all(_polygonal(shapely.make_valid(geom)))
            if shapely.is_empty(geom) or geom.area <= 0:
                raise DomainError(f"the study area polygon is invalid ({repaired}) and has no area once repaired; "
                                  "fix the polygon")
        if src.is_geographic:
            b = geom.bounds
            if not (-180 <= b[0] and b[2] <= 180 and -90 <= b[1] and b[3] <= 90):
                raise DomainError(
                    f"the study area's coordinates ({b[0]:.6g},{b[1]:.6g},{b[2]:.6g},{b[3]:.6g}) are not "
                    f"longitude/latitude, but its CRS says {_crs_label(src)} (a GeoJSON file without a 'crs' member "
                    "is read as EPSG:4326): reproject the file to EPSG:4326 or give it its true CRS")
        wcrs = working_crs_for(geom, src, working)
        poly = _project(geom, src, wcrs)
        if poly.is_empty or poly.area <= 0:
            raise DomainError("the study area has no area in the working CRS")
        _check_distortion(geom, src, wcrs, chosen=working is None)
        if repaired:
            b = geom.bounds
            warnings.warn(
                f"the study area polygon was not valid ({repaired}) and was repaired; the area used is "
                f"{poly.area / 1e6:,.6g} km² with bbox {b[0]:.6g},{b[1]:.6g},{b[2]:.6g},{b[3]:.6g} "
                f"({_crs_label(src)}): check that this is the area you meant, or fix the polygon",
                StudyAreaWarning, stacklevel=2)
        return cls(
            geometry=geom,
            source_crs=src,
            crs=wcrs,
            polygon=poly,
            description=description + (" (invalid polygon repaired)" if repaired else ""),
            bbox=tuple(float(v) for v in geom.bounds),
        )

    # -- helpers -----------------------------------------------------------
    @property
    def is_rectangle(self) -> bool:
        """``True`` if the projected polygon fills its bounding box."""
        b = self.polygon.bounds
        box_area = (b[2] - b[0]) * (b[3] - b[1])
        return abs(box_area - self.polygon.area) <= 1e-9 * box_area

    def to_metadata(self) -> dict:
        """JSON-serialisable description of the public study area.

        ``wkt`` is the exact outline when it has at most 2,000 vertices; a
        larger one is stored as ``wkt_simplified`` (at most 2,000 vertices,
        simplified by ``simplify_tolerance`` in the study area's CRS units),
        so a map of the release can still draw it. An area taken from the
        private data (exploration only) is described, never located: no
        bounds, no outline.
        """
        if self.from_data:  # the extent of the private data reveals its extreme points: never written anywhere
            return {"description": self.description, "crs": _crs_label(self.source_crs), "bounds": None, "wkt": None,
                    "from_private_data": True}
        n = shapely.get_num_coordinates(self.geometry)
        md = {
            "description": self.description,
            "crs": _crs_label(self.source_crs),
            "bounds": list(self.bbox),
            "wkt": shapely.to_wkt(self.geometry, rounding_precision=7, trim=True) if n <= _MAX_WKT_VERTICES else None,
            "from_private_data": self.from_data,
        }
        if n > _MAX_WKT_VERTICES:
            md["wkt_simplified"], md["simplify_tolerance"] = _simplified_wkt(self.geometry)
        return md


#: Largest study-area outline (vertices) stored exactly in the metadata.
_MAX_WKT_VERTICES = 2000


def _simplified_wkt(geom):
    """``(wkt, tolerance)``: ``geom`` simplified until it has at most ``_MAX_WKT_VERTICES`` vertices."""
    b = geom.bounds
    tol = max(b[2] - b[0], b[3] - b[1]) / 4000
    for _ in range(40):
        g = shapely.simplify(geom, tol, preserve_topology=True)
        if shapely.get_num_coordinates(g) <= _MAX_WKT_VERTICES:
            break
        tol *= 1.6
    return shapely.to_wkt(g, rounding_precision=7, trim=True), float(f"{tol:.3g}")


def as_study_area(domain, *, domain_crs=None, working_crs=None) -> StudyArea:
    """Turn any accepted description of the public study area into a :class:`StudyArea`.

    Parameters
    ----------
    domain : StudyArea, sequence of 4 numbers, str, os.PathLike, shapely geometry, GeoDataFrame or GeoSeries
        A bbox ``(minx, miny, maxx, maxy)`` or ``"minx,miny,maxx,maxy"`` in
        ``domain_crs``; a polygon file path; a shapely polygon in
        ``domain_crs``; or a polygon layer with its own CRS.
    domain_crs : anything pyproj accepts, optional
        CRS of a bbox or shapely geometry; default ``EPSG:4326`` (lon/lat).
    working_crs : anything pyproj accepts, optional
        Projected CRS in metres to work in; default the UTM zone of the
        study area's centre.
    """
    if domain is None:
        raise DomainError(
            "no study area given: pass the public area the data could come from, e.g. "
            "--domain minx,miny,maxx,maxy (lon/lat) or --domain area.gpkg; "
            "--domain-from-data exists for exploration only and is not differentially private"
        )
    if isinstance(domain, StudyArea):
        if working_crs is not None and not domain.crs.equals(_as_crs(working_crs, "working CRS")):
            return StudyArea._make(domain.geometry, domain.source_crs, working_crs, domain.description)
        return domain
    crs = domain_crs if domain_crs is not None else "EPSG:4326"
    if isinstance(domain, (str, os.PathLike)):
        s = os.fspath(domain)
        parts = s.split(",")
        if len(parts) > 1 and not os.path.exists(s):
            try:
                nums = [float(p) for p in parts]
            except ValueError:
                nums = None
            if nums is not None and len(nums) != 4:
                raise DomainError(f"a study-area bbox needs 4 numbers minx,miny,maxx,maxy, got {len(nums)}")
            if nums is not None:
                return StudyArea.from_bbox(nums, crs, working_crs=working_crs)
        return StudyArea.from_file(s, working_crs=working_crs)
    if isinstance(domain, shapely.Geometry):
        return StudyArea.from_geometry(domain, crs, working_crs=working_crs)
    if hasattr(domain, "crs") and hasattr(domain, "geometry") or type(domain).__name__ == "GeoSeries":
        return StudyArea.from_frame(domain, working_crs=working_crs)
    try:
        seq = list(domain)
    except TypeError:
        raise DomainError(f"cannot use {type(domain).__name__} as a study area") from None
    if len(seq) == 4:
        return StudyArea.from_bbox(seq, crs, working_crs=working_crs)
    raise DomainError(f"a study-area bbox needs 4 numbers (minx, miny, maxx, maxy), got {len(seq)}")


def utm_crs_for(lon: float, lat: float) -> CRS:
    """The WGS 84 / UTM zone CRS (EPSG 326zz north, 327zz south) for ``(lon, lat)``.

    Zones are 6° wide from 180°W, with the two official exceptions: zone 32V
    is widened to 3°–12°E over southern Norway (56°–64°N), and around
    Svalbard (72°–84°N) zones 31X, 33X, 35X and 37X replace 32X, 34X and 36X.

    Examples
    --------
    >>> utm_crs_for(-93.26, 44.98).to_epsg()   # Minneapolis
    32615
    >>> utm_crs_for(151.2, -33.9).to_epsg()    # Sydney
    32756
    >>> utm_crs_for(5.3, 60.4).to_epsg()       # Bergen, zone 32V
    32632
    """
    if not (-180 <= lon <= 180 and -80 <= lat <= 84):
        raise DomainError(
            f"the study area's centre (lon={lon:.4f}, lat={lat:.4f}) is outside the UTM latitude range "
            "80°S–84°N; pass a projected --crs"
        )
    zone = min(int((lon + 180) // 6) + 1, 60)
    if 56 <= lat < 64 and 3 <= lon < 12:
        zone = 32
    elif 72 <= lat <= 84 and 0 <= lon < 42:
        zone = 31 if lon < 9 else 33 if lon < 21 else 35 if lon < 33 else 37
    return CRS.from_epsg((32600 if lat >= 0 else 32700) + zone)


def working_crs_for(geom, src: CRS, working=None) -> CRS:
    """Working CRS for a study area: ``working`` if given (checked), else UTM of its centre."""
    if working is not None:
        w = _as_crs(working, "working CRS")
        if not w.is_projected:
            raise DomainError(f"--crs must be a projected CRS in metres; {_crs_label(w)} is not projected")
        units = {ax.unit_name for ax in w.axis_info}
        if not units <= {"metre", "meter"}:
            raise DomainError(f"--crs must have axes in metres; {_crs_label(w)} uses {sorted(units)}")
        return w
    c = geom.envelope.centroid
    lon, lat = Transformer.from_crs(src, "EPSG:4326", always_xy=True).transform(c.x, c.y)
    if not (np.isfinite(lon) and np.isfinite(lat)):
        raise DomainError("cannot locate the study area's centre on the globe; pass a projected --crs")
    return utm_crs_for(lon, lat)




#: Largest relative area distortion accepted in a working CRS that dpgeo chose itself (a UTM zone).
_MAX_AREA_DISTORTION = 0.10


def _check_distortion(geom, src: CRS, wcrs: CRS, *, chosen: bool):
    """Refuse a study area that the working CRS cannot represent: not projectable, or (UTM) too wide.

    A UTM zone keeps areas within 0.1 % over its 6° of longitude; a study
    area much wider than that gets cells whose ground size differs from the
    asked one. Checked from the projection's areal scale along the outline.
    """
    b = geom.bounds
    step = max(b[2] - b[0], b[3] - b[1]) / 64
    xy = shapely.get_coordinates(shapely.segmentize(geom, step) if step > 0 else geom)
    if not src.is_geographic:
        lon, lat = Transformer.from_crs(src, "EPSG:4326", always_xy=True).transform(xy[:, 0], xy[:, 1])
    else:
        lon, lat = xy[:, 0], xy[:, 1]
    with np.errstate(all="ignore"):
        try:
            scale = np.asarray(Proj(wcrs).get_factors(lon, lat, errcheck=False).areal_scale, dtype=float)
        except Exception:  # a CRS without factors (rare): the projection check in _project is all there is
            return
    where = f"{b[0]:.6g},{b[1]:.6g},{b[2]:.6g},{b[3]:.6g} ({_crs_label(src)})"
    if not np.isfinite(scale).all():
        raise DomainError(
            f"the study area ({where}) reaches beyond what the working CRS {_crs_label(wcrs)} can represent"
            + (" (the UTM zone of its centre)" if chosen else "")
            + "; give a smaller study area or a projected --crs that covers all of it")
    worst = float(np.max(np.abs(scale / 0.9996**2 - 1))) if chosen else 0.0
    if worst > _MAX_AREA_DISTORTION:
        raise DomainError(
            f"the study area ({where}) is too wide for {_crs_label(wcrs)}, the UTM zone of its centre (areas "
            f"there are distorted by up to {worst:.0%}); give a projected --crs made for the whole area (a "
            "national grid, or an equal-area CRS such as EPSG:6933) or a smaller study area")


def _polygonal(geoms):
    """Only the polygonal parts of (repaired) geometries: ``make_valid`` may add lines or points."""
    parts = shapely.get_parts(np.atleast_1d(geoms))
    return parts[np.isin(shapely.get_type_id(parts), (3, 6))]


def _project(geom, src: CRS, dst: CRS):
    if src.equals(dst):
        return geom
    b = geom.bounds
    step = max(b[2] - b[0], b[3] - b[1]) / _DENSIFY_SEGMENTS
    dense = shapely.segmentize(geom, step) if step > 0 else geom
    tr = Transformer.from_crs(src, dst, always_xy=True)

    def fn(coords):
        x, y = tr.transform(coords[:, 0], coords[:, 1])
        return np.column_stack([x, y])

    out = shapely.transform(dense, fn)
    if not np.isfinite(shapely.get_coordinates(out)).all():
        raise DomainError("the study area cannot be projected to the working CRS (outside its area of use)")
    if not shapely.is_valid(out):
        out = shapely.make_valid(out)
    return out


def _as_crs(crs, what) -> CRS:
    try:
        return CRS.from_user_input(crs)
    except Exception:
        raise DomainError(f"{what} {crs!r} is not a CRS pyproj understands (try e.g. EPSG:4326)") from None


def _crs_label(crs: CRS) -> str:
    epsg = crs.to_epsg()
    return f"EPSG:{epsg}" if epsg else crs.name
