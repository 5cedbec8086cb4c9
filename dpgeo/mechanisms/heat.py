"""Heat layers from one DP count release: cells with ``dp_count``, smoothed density bands, hot spots.

The only private step is the count release (:mod:`dpgeo.histogram`: exact
discrete Laplace noise on every cell of a public cell set, square cells of
:class:`~dpgeo.grid.Grid` or H3 cells of :class:`~dpgeo.h3cells.H3Cells`).
Everything here is post-processing of released values and public
parameters: clamping at 0, intervals from the known noise law, smoothing with
a public kernel, contours, Getis-Ord Gi* (:mod:`~dpgeo.mechanisms.hotspots`).

``dp_count`` is the released count clamped at 0 (a post-processing step: the
clamped value is not unbiased, ``dp_count_raw`` keeps the release itself,
which sums without bias). Its interval is ``[y - h, y + h]`` clipped at 0,
``h`` the 95% half-width of one noise draw. In a sparse release a cell not in
the layer was released as 0 (its noisy count was below θ).
"""

from __future__ import annotations

import math

import numpy as np
import shapely

from ..noise import discrete_laplace_variance, sum_interval_halfwidth
from .hotspots import getis_ord, sparse_sums, square_band_sums

__all__ = ["count_layer", "density_bands", "cell_hotspots", "released_vector", "HEAT_COLUMNS"]

#: Attribute columns of a heat (count) layer, in order (``h3`` only for H3 cells).
HEAT_COLUMNS = ["cell_id", "h3", "dp_count", "dp_count_low", "dp_count_high", "dp_count_raw"]


def released_vector(hist) -> np.ndarray:
    """Released count of every cell of the universe, in universe order (0 for cells not stored)."""
    grid = hist.grid
    ids = grid.universe_ids()
    return hist.lookup(ids) if hist.kind != "dense" else hist.count.copy()


def _geometry(grid, ids):
    if getattr(grid, "kind", None) == "h3":
        return grid.polygons(ids)
    return grid.cell_boxes(ids)


def count_layer(hist, *, level: float = 0.95, extra=None):
    """The count layer of a release: one feature per released cell (dense: every cell of the universe).

    Parameters
    ----------
    hist : dpgeo.histogram.NoisyHistogram
    level : float
        Coverage of each cell's interval.
    extra : dict, optional
        More columns (aligned with the features), e.g. Gi* results.

    Returns
    -------
    geopandas.GeoDataFrame
        :data:`HEAT_COLUMNS` (``h3`` only for H3 cells) and the cell polygons in the working CRS.
    """
    import geopandas as gpd

    grid = hist.grid
    ids = hist.cell_id
    raw = hist.count.astype(np.int64)
    h = sum_interval_halfwidth(1, hist.q, level)
    data = {"cell_id": ids.astype(np.int64)}
    if getattr(grid, "kind", None) == "h3":
        data["h3"] = grid.h3_strings(ids)
    data["dp_count"] = np.maximum(raw, 0)
    data["dp_count_low"] = np.maximum(raw - h, 0)
    data["dp_count_high"] = np.maximum(raw + h, 0)
    data["dp_count_raw"] = raw
    for k, v in (extra or {}).items():
        data[k] = v
    crs = grid.area.crs
    return gpd.GeoDataFrame(data, geometry=gpd.GeoSeries(_geometry(grid, ids), crs=crs), crs=crs)


# -- neighbourhoods ---------------------------------------------------------------------------------------

def band_offsets(cell_m: float, radius_m: float) -> np.ndarray:
    """``(dx, dy)`` of the square cells whose centre is within ``radius_m`` of a cell's centre (itself included).

    Examples
    --------
    >>> len(band_offsets(100.0, 100.0)), len(band_offsets(100.0, 150.0))
    (5, 9)
    """
    r = int(math.floor(radius_m / cell_m + 1e-9))
    d = np.arange(-r, r + 1)
    dx, dy = np.meshgrid(d, d)
    keep = (dx * dx + dy * dy) * cell_m * cell_m <= radius_m * radius_m * (1 + 1e-12)
    return np.column_stack([dx[keep], dy[keep]])


def _dense(grid, values):
    """``(ny, nx)`` float array of universe values and the universe mask (square grids)."""
    out = np.zeros(grid.ny * grid.nx)
    ids = grid.universe_ids()
    out[ids] = values
    mask = np.zeros(grid.ny * grid.nx, dtype=bool)
    mask[ids] = True
    return out.reshape(grid.ny, grid.nx), mask.reshape(grid.ny, grid.nx), ids


def neighbour_sums(grid, values, *, radius_m=None, k=None):
    """Sums of ``values`` over each universe cell's neighbourhood and its size (universe order).

    Square cells: the cells within ``radius_m`` (centre to centre); H3: the
    ``k``-ring. The cell itself is included (Gi*).
    """
    if getattr(grid, "kind", None) == "h3":
        i, j, _ = grid.ring_pairs(k)
        return sparse_sums(grid.n_cells, i, j, values)
    v2, m2, ids = _dense(grid, values)
    s, c = square_band_sums(v2, m2, band_offsets(grid.cell_m, radius_m))
    return s.ravel()[ids], c.ravel()[ids]


def cell_hotspots(hist, *, radius_m=None, k=None, fdr=False):
    """Gi* of every universe cell of a dense release (:func:`~dpgeo.mechanisms.hotspots.getis_ord`)."""
    y = released_vector(hist).astype(np.float64)
    s, w = neighbour_sums(hist.grid, y, radius_m=radius_m, k=k)
    return getis_ord(y, s, w, q=hist.q, fdr=fdr)


# -- density bands ----------------------------------------------------------------------------------------

class _Raster:
    """The square raster the smoothing runs on, and where each universe cell's centre lies in it.

    Square cells: the grid itself (one pixel per cell). H3 cells: pixels of
    half the mean centre spacing in the working CRS, each cell's count put in
    the pixel of its centre (centres are a whole spacing apart, so no two
    share a pixel; the centre moves by at most a quarter spacing).
    """

    def __init__(self, grid):
        if getattr(grid, "kind", None) == "h3":
            x, y = grid.centres()
            x, y = np.asarray(x), np.asarray(y)
            self.px = grid.spacing_m / 2.0
            self.x0, self.y0 = float(x.min()) - self.px, float(y.min()) - self.px
            self.ix = np.rint((x - self.x0) / self.px).astype(np.int64)
            self.iy = np.rint((y - self.y0) / self.px).astype(np.int64)
            self.nx, self.ny = int(self.ix.max()) + 2, int(self.iy.max()) + 2
            self.h3 = True
        else:
            ids = grid.universe_ids()
            self.px = grid.cell_m
            self.x0 = grid.origin_x - 0.5 * grid.cell_m  # pixel centres are the cell centres, one pixel around
            self.y0 = grid.origin_y - 0.5 * grid.cell_m
            self.ix, self.iy = ids % grid.nx + 1, ids // grid.nx + 1
            self.nx, self.ny = grid.nx + 2, grid.ny + 2
            self.h3 = False
        self.flat = self.iy * self.nx + self.ix

    def put(self, values) -> np.ndarray:
        return np.bincount(self.flat, weights=np.asarray(values, dtype=np.float64),
                           minlength=self.nx * self.ny).reshape(self.ny, self.nx)


def smooth(grid, values, bandwidth_m: float, *, surface: bool = False):
    """Gaussian kernel smoothing (σ = ``bandwidth_m``, cut at 3σ) of universe values, edge-corrected.

    The weighted mean count of the universe cells under the kernel centred on
    each cell (a Nadaraya–Watson estimate: cells outside the study area do not
    count as zeros). Square cells: an exact Gaussian over the cell centres;
    H3: over the centres put on a raster of half their spacing
    (:class:`_Raster`). Both by FFT, so the time does not depend on the
    bandwidth.

    Returns
    -------
    smoothed : numpy.ndarray
        Per universe cell (universe order).
    noise_factor : numpy.ndarray
        ``Σ w² / (Σ w)²`` per cell: the share of one cell's noise variance
        left in its smoothed value.
    raster : tuple, only with ``surface=True``
        ``(z, x, y)``: the smoothed surface on the whole raster (NaN where no
        cell is under the kernel) and its pixel centres (metres), for contours.
    """
    from scipy.signal import fftconvolve

    r = _Raster(grid)
    half = max(1, int(math.ceil(3.0 * bandwidth_m / r.px)))
    d = np.arange(-half, half + 1) * r.px
    g = np.exp(-0.5 * (d / bandwidth_m) ** 2)
    kern = np.outer(g, g)
    mask = r.put(np.ones(r.flat.size))
    num = fftconvolve(r.put(values), kern, mode="same")
    den = fftconvolve(mask, kern, mode="same")
    den2 = fftconvolve(mask, kern * kern, mode="same").ravel()[r.flat]
    sm = num.ravel()[r.flat] / den.ravel()[r.flat]
    factor = den2 / den.ravel()[r.flat] ** 2
    if not surface:
        return sm, factor
    with np.errstate(invalid="ignore", divide="ignore"):
        z = np.where(den > 1e-9 * kern.sum(), num / den, np.nan)
    x = r.x0 + np.arange(r.nx) * r.px
    y = r.y0 + np.arange(r.ny) * r.px
    return sm, factor, (z, x, y)


def band_levels(smoothed, noise_factor, q, n_bands: int):
    """Public band limits: a noise floor, then limits that share the smoothed count out equally between the
    bands, at least 2 noise standard deviations apart.

    * The floor is the 95% point of smoothed pure noise,
      ``1.645·σ·sqrt(Σw²)/Σw`` at the typical cell (σ the standard deviation of
      one cell's noise): a cell below it is not distinguishable from an empty
      area and belongs to no band.
    * Above it, the limits split the smoothed count of the cells into
      ``n_bands`` equal shares, densest cells first: band ``n`` is the densest
      area that holds a ``1/n_bands`` share of the points, band ``n - 1`` the
      next share, and so on (the nested "highest-density regions" of a kernel
      density map). Point densities have long tails; limits at quantiles of
      the cells would put most bands in the sparse background and one in
      every hot spot.
    * A limit closer than ``2·σ·sqrt(Σw²)/Σw`` (twice the smoothed noise's
      standard deviation) to the one below it is dropped: two bands whose
      limits differ by less than the noise would separate cells by the noise
      rather than by the data. With a small ε, or a narrow kernel, fewer bands
      than asked are made (the metadata says how many).

    Everything here is a function of the released values and public
    parameters (post-processing).

    Returns
    -------
    levels : numpy.ndarray
        The lower limit of each band, then ``inf``.
    floor : float
        The lowest limit (the noise floor).
    step : float
        The least distance between two limits.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> sm = np.r_[np.zeros(500), rng.exponential(30, 500)]
    >>> levels, floor, step = band_levels(sm, np.full(1000, 0.05), 0.5, 4)
    >>> np.round(levels, 1).tolist(), round(floor, 2), round(step, 2)
    ([0.7, 30.6, 53.4, 81.6, inf], 0.74, 0.89)
    >>> np.round(band_levels(sm, np.full(1000, 0.05), 0.98, 4)[0], 1).tolist()  # small ε: fewer bands
    [25.7, 62.2, inf]
    """
    sd = math.sqrt(discrete_laplace_variance(q)) * float(np.sqrt(np.median(noise_factor)))
    floor = 1.645 * sd
    step = 2.0 * sd
    above = smoothed[smoothed > floor]
    if above.size == 0:
        return np.array([floor, np.inf]), floor, step
    v = np.sort(above)
    mass = np.cumsum(v)  # the smoothed count of the cells up to each value: equal shares of it per band
    qs = v[np.minimum(np.searchsorted(mass, mass[-1] * np.arange(1, n_bands) / n_bands), v.size - 1)]
    kept = [floor]
    for v in np.sort(qs).tolist():  # at most 19 limits
        if v >= kept[-1] + step:
            kept.append(v)
    return np.array(kept + [np.inf]), floor, step


def density_bands(hist, *, n_bands: int, bandwidth_m: float, level: float = 0.95):
    """The release smoothed and cut into density bands, as polygons with the band's DP count.

    Each band holds the cells whose smoothed count lies in ``[lo, hi)``;
    ``dp_count`` is the sum of those cells' released counts (clamped at 0,
    interval from the exact law of the summed noise). The band outlines are
    contourpy's filled contours of the smoothed surface (:func:`smooth`),
    clipped to the study area: for square cells on the cell centres, for H3
    cells on the raster of half their spacing.

    Returns
    -------
    geopandas.GeoDataFrame
        ``band`` (1 = lowest), ``density_low``, ``density_high`` (smoothed
        count per km², ``null`` for an open top), ``n_cells``, ``dp_count``,
        ``dp_count_low``, ``dp_count_high``, geometry (MultiPolygon).
    dict
        Band metadata (kernel, levels, floor).
    """
    import geopandas as gpd

    grid = hist.grid
    y = released_vector(hist).astype(np.float64)
    sm, factor, surface = smooth(grid, y, bandwidth_m, surface=True)
    levels, floor, step = band_levels(sm, factor, hist.q, n_bands)
    band = np.searchsorted(levels, sm, side="right")  # 0: below the floor; 1..: bands
    nb = levels.size - 1
    area_km2 = _cell_area_km2(grid)
    gen = _contours(surface)
    rows = []
    for b in range(1, nb + 1):
        sel = band == b
        n = int(sel.sum())
        total = int(np.rint(y[sel].sum()))
        h = sum_interval_halfwidth(n, hist.q, level) if n else 0
        geom = _contour_band(gen, surface, grid, levels[b - 1], levels[b])
        hi = levels[b]
        rows.append({"band": b, "density_low": float(levels[b - 1] / area_km2),
                     "density_high": None if not np.isfinite(hi) else float(hi / area_km2), "n_cells": n,
                     "dp_count": max(total, 0), "dp_count_low": max(total - h, 0),
                     "dp_count_high": max(total + h, 0), "geometry": geom})
    gdf = gpd.GeoDataFrame(rows, geometry="geometry", crs=grid.area.crs) if rows else \
        gpd.GeoDataFrame({"band": []}, geometry=gpd.GeoSeries([], crs=grid.area.crs), crs=grid.area.crs)
    md = {"bands": nb, "bands_kernel": f"Gaussian, sigma {bandwidth_m:g} m, cut at 3 sigma, edge-corrected "
                                      "(weighted mean of the released counts of the study area's cells)",
          "bands_levels_per_cell": [float(v) for v in levels[:-1]],
          "bands_noise_floor_per_cell": float(floor),
          "bands_min_step_per_cell": float(step),
          "bands_requested": int(n_bands),
          "bands_rule": "lowest limit: the 95% point of smoothed pure noise; the others split the smoothed count "
                        "above it into equal shares, densest cells first, each dropped when closer than twice the "
                        "smoothed noise's standard deviation to the limit below (post-processing of the release)",
          "bands_outline": "filled contours of the smoothed surface, clipped to the study area"}
    return gdf, md


def _cell_area_km2(grid) -> float:
    if getattr(grid, "kind", None) == "h3":
        from ..h3cells import H3_AREA_M2

        return H3_AREA_M2[grid.resolution] / 1e6
    return grid.cell_m * grid.cell_m / 1e6


def _contours(surface):
    import contourpy

    z, x, y = surface
    return contourpy.contour_generator(x, y, np.ma.masked_invalid(z), fill_type=contourpy.FillType.OuterOffset)


def _contour_band(gen, surface, grid, lo, hi):
    z = surface[0]
    top = hi if np.isfinite(hi) else float(np.nanmax(z)) + 1.0
    if not np.isfinite(top) or top <= lo:
        return shapely.MultiPolygon()
    polys, offsets = gen.filled(float(lo), float(top))
    out = []
    for pts, offs in zip(polys, offsets):
        rings = [pts[a:b] for a, b in zip(offs[:-1], offs[1:]) if b - a >= 4]
        if rings:
            out.append(shapely.Polygon(rings[0], rings[1:]))
    if not out:
        return shapely.MultiPolygon()
    g = shapely.make_valid(shapely.union_all(np.asarray(out, dtype=object)))
    return _as_multipolygon(shapely.intersection(g, grid.area.polygon))


def _as_multipolygon(g):
    if g is None or g.is_empty:
        return shapely.MultiPolygon()
    if g.geom_type == "MultiPolygon":
        return g
    if g.geom_type == "Polygon":
        return shapely.MultiPolygon([g])
    return shapely.MultiPolygon([p for p in shapely.get_parts(g) if p.geom_type == "Polygon"])
