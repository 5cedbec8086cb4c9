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

def smooth(grid, values, bandwidth_m: float):
    """Gaussian kernel smoothing (σ = ``bandwidth_m``, cut at 3σ) of universe values, edge-corrected.

    Returns the weighted mean count per cell over the universe cells under
    the kernel (universe order) and ``Σ w² / (Σ w)²`` per cell (the factor of
    one cell's noise variance left after smoothing).
    """
    if getattr(grid, "kind", None) == "h3":
        k = max(1, int(math.ceil(3.0 * bandwidth_m / grid.spacing_m)))
        i, j, d = grid.ring_pairs(min(k, 40))
        w = np.exp(-0.5 * (d.astype(np.float64) * grid.spacing_m / bandwidth_m) ** 2)
        num = np.bincount(i, weights=w * np.asarray(values, dtype=np.float64)[j], minlength=grid.n_cells)
        den = np.bincount(i, weights=w, minlength=grid.n_cells)
        den2 = np.bincount(i, weights=w * w, minlength=grid.n_cells)
        return num / den, den2 / (den * den)
    from scipy.signal import fftconvolve

    r = max(1, int(math.ceil(3.0 * bandwidth_m / grid.cell_m)))
    d = np.arange(-r, r + 1) * grid.cell_m
    g = np.exp(-0.5 * (d / bandwidth_m) ** 2)
    kern = np.outer(g, g)
    v2, m2, ids = _dense(grid, values)
    num = fftconvolve(v2, kern, mode="same").ravel()[ids]
    den = fftconvolve(m2.astype(float), kern, mode="same").ravel()[ids]
    den2 = fftconvolve(m2.astype(float), kern * kern, mode="same").ravel()[ids]
    return num / den, den2 / (den * den)


def band_levels(smoothed, noise_factor, q, n_bands: int):
    """Public band limits: a noise floor, then quantiles of the smoothed values above it.

    The floor is the 95% point of smoothed pure noise (``1.645·σ·sqrt(Σw²)/Σw``
    at the typical cell): cells below it are indistinguishable from an empty
    area and belong to no band.
    """
    sd = math.sqrt(discrete_laplace_variance(q))
    floor = 1.645 * sd * float(np.sqrt(np.median(noise_factor)))
    above = smoothed[smoothed > floor]
    if above.size == 0:
        return np.array([floor, np.inf]), floor
    qs = np.quantile(above, np.linspace(0.0, 1.0, n_bands + 1)[1:-1]) if n_bands > 1 else np.zeros(0)
    levels = np.unique(np.concatenate([[floor], qs]))
    return np.concatenate([levels, [np.inf]]), floor


def density_bands(hist, *, n_bands: int, bandwidth_m: float, level: float = 0.95):
    """The release smoothed and cut into density bands, as polygons with the band's DP count.

    Each band holds the cells whose smoothed count lies in ``[lo, hi)``;
    ``dp_count`` is the sum of those cells' released counts (clamped at 0,
    interval from the exact law of the summed noise). Square cells: the band
    outlines are contourpy's filled contours of the smoothed surface through
    the cell centres; H3 cells: the union of the band's hexagons.

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
    sm, factor = smooth(grid, y, bandwidth_m)
    levels, floor = band_levels(sm, factor, hist.q, n_bands)
    band = np.searchsorted(levels, sm, side="right")  # 0: below the floor; 1..: bands
    nb = levels.size - 1
    area_km2 = _cell_area_km2(grid)
    rows = []
    for b in range(1, nb + 1):
        sel = band == b
        n = int(sel.sum())
        total = int(np.rint(y[sel].sum()))
        h = sum_interval_halfwidth(n, hist.q, level) if n else 0
        geom = _band_geometry(grid, sm, levels[b - 1], levels[b], sel)
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
          "bands_rule": "lowest limit: the 95% point of smoothed pure noise; the others: quantiles of the smoothed "
                        "counts above it (post-processing of the release)"}
    return gdf, md


def _cell_area_km2(grid) -> float:
    if getattr(grid, "kind", None) == "h3":
        from ..h3cells import H3_AREA_M2

        return H3_AREA_M2[grid.resolution] / 1e6
    return grid.cell_m * grid.cell_m / 1e6


def _band_geometry(grid, sm, lo, hi, sel):
    if not sel.any():
        return shapely.MultiPolygon()
    if getattr(grid, "kind", None) == "h3":
        polys = grid.polygons(np.flatnonzero(sel))
        # neighbouring hexagons share their vertices up to rounding: snap to 1 mm before the union
        g = shapely.union_all(shapely.set_precision(polys, 1e-3))
    else:
        g = _contour_band(grid, sm, lo, hi)
    return _as_multipolygon(g)


def _contour_band(grid, sm, lo, hi):
    import contourpy

    v2, m2, _ = _dense(grid, sm)
    z = np.ma.masked_array(v2, mask=~m2)
    w = grid.cell_m
    x = grid.origin_x + (np.arange(grid.nx) + 0.5) * w
    y = grid.origin_y + (np.arange(grid.ny) + 0.5) * w
    gen = contourpy.contour_generator(x, y, z, fill_type=contourpy.FillType.OuterOffset)
    top = hi if np.isfinite(hi) else float(z.max()) + 1.0
    polys, offsets = gen.filled(float(lo), float(top))
    out = []
    for pts, offs in zip(polys, offsets):
        rings = [pts[a:b] for a, b in zip(offs[:-1], offs[1:]) if b - a >= 4]
        if rings:
            out.append(shapely.Polygon(rings[0], rings[1:]))
    g = shapely.union_all(np.asarray(out, dtype=object)) if out else shapely.MultiPolygon()
    if not grid.area.is_rectangle:
        g = shapely.intersection(g, grid.area.polygon)
    return g


def _as_multipolygon(g):
    if g is None or g.is_empty:
        return shapely.MultiPolygon()
    if g.geom_type == "MultiPolygon":
        return g
    if g.geom_type == "Polygon":
        return shapely.MultiPolygon([g])
    return shapely.MultiPolygon([p for p in shapely.get_parts(g) if p.geom_type == "Polygon"])
