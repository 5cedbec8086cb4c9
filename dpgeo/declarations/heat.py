"""Heat (count) layers, density bands and Getis-Ord hot spots, declared once (:class:`HeatMechanism`,
:class:`HotspotsMechanism`) and run through the one pipeline.

Both release the same thing: one exact discrete Laplace count per cell of a
public cell set (square cells anchored to the study area, or the H3 cells
that intersect it), charged once before the data is read. The layers are
post-processing of that release (:mod:`dpgeo.mechanisms.heat`,
:mod:`dpgeo.mechanisms.hotspots`; ``docs/privacy.md`` §9).
"""

from __future__ import annotations

import math

from ..declare import Field, Outcome, Param
from ..errors import ParameterError
from ..histogram import DEFAULT_MAX_DENSE_CELLS, DEFAULT_MAX_FALSE_CELLS
from ..mechanisms.heat import cell_hotspots, count_layer, density_bands
from ..mechanisms.heat_cells import HOTSPOT_POINTS_PER_NOISE_SD
from ..mechanisms.hotspots import HOTSPOT_CLASSES
from ..mechanisms.resolution import fine_width
from ..pipeline._common import _progress
from ..pipeline.run import run_preview, run_release
from ..release import Release
from ..generators.docs import entry_point
from .cells import (  # noqa: F401 (BANDWIDTH_CELLS, HOTSPOT_RADIUS_CELLS: the layers' conventions, named here too)
    AUTO_CELL_OUTPUTS,
    BAND_OUTPUTS,
    BANDWIDTH_CELLS,
    CELL_OUTPUTS,
    CELL_PARAMS,
    HEAT_PARAMS,
    HOTSPOT_OUTPUTS,
    HOTSPOT_PARAMS,
    HOTSPOT_RADIUS_CELLS,
    MAX_NEIGHBOURHOOD_CELLS,
    MAX_NEIGHBOURHOOD_PAIRS,
    CellsMechanism,
    _CELL_FIELDS,
    _auto_cap,
    _cost_params,
    _MAX_DENSE,
    _auto_setup,
    _cells,
    _count_setup,
    _finest_auto_width,
    _h3,
    _release,
    _spacing,
    is_auto_cells,
)

__all__ = ["heat", "hotspots", "cells_preview", "HEAT", "HOTSPOTS", "CELLS_PREVIEW", "HeatMechanism",
           "HotspotsMechanism", "CellsPreviewMechanism"]

class HeatMechanism(CellsMechanism):
    """Noisy counts of square or H3 cells over the public study area; or smoothed density bands of them."""

    name = "dp-heat"
    entry_point = "heat"
    command = "heat"
    qgis_id = "heat"
    title = "DP heat layer (cell counts or density bands)"
    layer_name = "DP heat layer"
    summary = "ε-DP point counts of square or H3 hexagon cells, or smoothed density bands"
    description = ("ε-differentially private point counts per cell: every square cell (anchored to the public "
                   "study area) or every H3 hexagon cell that intersects the study area is a feature with a noisy "
                   "count (exact discrete Laplace noise; dp_count clamped at 0, dp_count_raw the release itself) "
                   "and its 95% interval. With bands, the same release is smoothed with a public Gaussian kernel "
                   "and cut into density bands, each a polygon with the DP count of its cells (no extra budget). "
                   "Give the cell size or the H3 resolution, or neither: square cells (or H3, cells='h3') chosen from "
                   "epsilon and a noisy count of the points.")
    keywords = ("differential privacy", "heat map", "grid counts", "H3", "hexagons", "density")
    params = HEAT_PARAMS
    fields = _CELL_FIELDS + (
        Field("band", "int", "with bands: the band, 1 = lowest density"),
        Field("density_low", "float", "with bands: the band's lower limit (smoothed count per km²)"),
        Field("density_high", "float", "with bands: the band's upper limit (none for the top band)"),
        Field("n_cells", "int", "with bands: cells in the band"),
    )
    outputs = CELL_OUTPUTS + AUTO_CELL_OUTPUTS + BAND_OUTPUTS
    style = "heat"
    examples = """\
examples:
  # 100 m squares over a study area given as a lon/lat bbox
  dpgeo heat crashes.csv -o heat.gpkg --epsilon 1 --cell 100 --domain=-74.26,40.49,-73.69,40.92

  # H3 resolution 9 hexagons (about 0.1 km²), an HTML map
  dpgeo heat trips.parquet -o heat.html --epsilon 0.5 --h3 9 --domain city.geojson

  # five smoothed density bands of the same release
  dpgeo heat trips.parquet -o bands.geojson --epsilon 0.5 --h3 9 --bands 5 --domain city.geojson
"""

    def check(self, p):
        super().check(p)
        if p.bands is not None and p.histogram == "sparse":
            raise ParameterError("density bands need every cell's noisy count (a dense release): histogram must "
                                 "be 'auto' or 'dense'")

    def _histogram(self, p):
        return "dense" if p.bands is not None else p.histogram

    def _needs_dense(self, p):
        return p.get("bands") is not None

    # (the titles also take the service's request values, where an unset option is absent)
    def ledger_name(self, p):
        return "dp-heat-bands" if p.get("bands") is not None else "dp-heat"

    def method_name(self, p):
        return "dp_heat_bands" if p.get("bands") is not None else "dp_heat"

    def mechanism_title(self, p):
        return "DP density bands" if p.get("bands") is not None else "DP cell counts"

    def short_title(self, p):
        return "DP density bands" if p.get("bands") is not None else "DP heat layer"

    def grid(self, area, p, c, max_memory_bytes=None):
        return _cells(area, p, c, max_memory_bytes, histogram=self._histogram(p),
                      need_dense="density bands" if p.bands is not None else None, bands=p.bands is not None)

    def setup(self, grid, p, c):
        if is_auto_cells(p):
            return _auto_setup(p, c, self._histogram(p), self.points_per_noise_sd)
        return _count_setup(grid, p, c, self._histogram(p))

    def run(self, counts, p, c, setup, rng, progress):
        hist, md = _release(counts, p, c, setup, rng, progress, need_dense=self._needs_dense(p))
        _progress(progress, 0.6, "layer")
        if p.bands is None:
            return Outcome(count_layer(hist), md, hist)
        bw = p.bandwidth_m if p.bandwidth_m is not None else BANDWIDTH_CELLS * _spacing(hist.grid)
        layer, bmd = density_bands(hist, n_bands=p.bands, bandwidth_m=bw)
        md.update(bmd)
        md["layer"] = "density bands"
        md["bands_bandwidth_m"] = bw
        return Outcome(layer, md, hist)


class HotspotsMechanism(CellsMechanism):
    """Getis-Ord Gi* hot and cold spots of the noisy cell counts, with a test that accounts for the noise."""

    name = "dp-hotspots"
    entry_point = "hotspots"
    command = "hotspots"
    qgis_id = "hotspots"
    title = "DP hot spots (Getis-Ord Gi*)"
    layer_name = "DP hot spots"
    summary = "ε-DP Getis-Ord Gi* hot and cold spots of square or H3 cell counts"
    description = ("Getis-Ord Gi* hot-spot analysis of ε-differentially private cell counts: every cell of the "
                   "public study area (square or H3) gets a noisy count, then Gi* over a public neighbourhood "
                   "(a distance band in metres, or an H3 k-ring) with a significance test that accounts for the "
                   "noise, in the usual seven classes (hot and cold spots at 99, 95 and 90% confidence, not "
                   "significant). Everything after the counts is post-processing (no extra budget). Give the cell "
                   "size or the H3 resolution, or neither: cells chosen from epsilon and a noisy count of the points.")
    keywords = ("differential privacy", "hot spots", "Getis-Ord", "Gi*", "H3", "clusters")
    params = HOTSPOT_PARAMS
    fields = _CELL_FIELDS + (
        Field("gi_z", "float", "Gi* z-score of the cell's neighbourhood"),
        Field("gi_p", "float", "two-sided p-value of gi_z under the noise-aware null"),
        Field("gi_bin", "int", "3 … -3: hot spot 99/95/90%, 0 not significant, cold spot 90/95/99%"),
        Field("hotspot", "str", "gi_bin in words"),
    )
    outputs = CELL_OUTPUTS + AUTO_CELL_OUTPUTS + HOTSPOT_OUTPUTS
    style = "hotspots"
    examples = """\
examples:
  # hot spots of 250 m squares, neighbourhood of 400 m
  dpgeo hotspots crashes.csv -o hot.gpkg --epsilon 1 --cell 250 --radius 400 --domain=-74.26,40.49,-73.69,40.92

  # H3 resolution 8 with the 2-ring as neighbourhood and a false-discovery-rate correction, an HTML map
  dpgeo hotspots trips.parquet -o hot.html --epsilon 1 --h3 8 --ring 2 --fdr --domain city.geojson
"""

    points_per_noise_sd = HOTSPOT_POINTS_PER_NOISE_SD

    def _needs_dense(self, p):
        return True

    def check(self, p):
        super().check(p)
        if p.cell_m is not None:
            radius = self._radius(p)
            if radius < p.cell_m:
                raise ParameterError(f"radius_m ({radius:g} m) must be at least the cell width ({p.cell_m:g} m), "
                                     "or the neighbourhood is the cell alone")
            if (2 * math.floor(radius / p.cell_m) + 1) ** 2 > MAX_NEIGHBOURHOOD_CELLS:
                raise ParameterError(f"radius_m ({radius:g} m) spans too many cells of {p.cell_m:g} m: use a smaller "
                                     "radius or larger cells")

    @staticmethod
    def _radius(p, cell_m=None):
        cell_m = p.cell_m if cell_m is None else cell_m
        return p.radius_m if p.radius_m is not None else HOTSPOT_RADIUS_CELLS * cell_m

    def _neighbours(self, p, cell_m=None):
        if _h3(p):
            return 3 * p.k * (p.k + 1) + 1
        r = self._radius(p, cell_m) / (p.cell_m if cell_m is None else cell_m)
        return min(int(math.pi * r * r) + 1, MAX_NEIGHBOURHOOD_CELLS)

    @staticmethod
    def _factor_bounds(area, p):
        """``(min, max)`` factor of the square cells a run without a cell size may choose, so that a given radius holds
        more than the cell alone, at most :data:`MAX_NEIGHBOURHOOD_CELLS` cells, and all the neighbourhoods
        together at most :data:`MAX_NEIGHBOURHOOD_PAIRS` (cell, neighbour) pairs (public)."""
        if p.radius_m is None:
            return 1, None
        fine_w = fine_width(area)
        r = p.radius_m
        most = max(1, math.floor(r / fine_w))  # cells no wider than the radius
        # (2 floor(r / w) + 1)^2 <= MAX: w >= r / ((sqrt(MAX) - 1) / 2)
        w_side = r / ((math.sqrt(MAX_NEIGHBOURHOOD_CELLS) - 1) / 2)
        # (A / w^2) * (pi r^2 / w^2) <= PAIRS
        w_pairs = (area.polygon.envelope.area * math.pi * r * r / MAX_NEIGHBOURHOOD_PAIRS) ** 0.25
        least = max(1, math.ceil(max(w_side, w_pairs) / fine_w))
        return least, most

    def method_name(self, p):
        return "dp_hotspots"

    def cost(self, area, p, c):
        from ..costs import hotspots_cost

        q = _cost_params(area, p, True)
        if is_auto_cells(p) and not _h3(p) and p.get("radius_m") is not None:  # cells no narrower than its bound
            q["cell_m"] = max(q["cell_m"], self._factor_bounds(area, p)[0] * fine_width(area))
        return hotspots_cost(area, q)

    def grid(self, area, p, c, max_memory_bytes=None):
        if is_auto_cells(p) and not _h3(p):
            w0 = fine_width(area)
            least, most = self._factor_bounds(area, p)
            if p.radius_m is not None and (p.radius_m < w0 or least > most):
                raise ParameterError(f"radius_m ({p.radius_m:g} m) leaves no cell width to choose on this study area "
                                     f"(its finest cells are {w0:.3g} m wide): give a larger radius, or a cell size")
            width = max(_finest_auto_width(area, _auto_cap(p, True)), least * w0)
            return _cells(area, p, c, max_memory_bytes, histogram="dense", need_dense="hot spots",
                          neighbours=self._neighbours(p, width), min_width=width)
        return _cells(area, p, c, max_memory_bytes, histogram="dense", need_dense="hot spots",
                      neighbours=self._neighbours(p))

    def setup(self, grid, p, c):
        if is_auto_cells(p):
            return _auto_setup(p, c, "dense", self.points_per_noise_sd)
        return _count_setup(grid, p, c, "dense")

    def run(self, counts, p, c, setup, rng, progress):
        bounds = self._factor_bounds(counts.grid.area, p)
        hist, md = _release(counts, p, c, setup, rng, progress, need_dense=True, factor_bounds=bounds)
        _progress(progress, 0.6, "Getis-Ord Gi*")
        h3 = getattr(hist.grid, "kind", None) == "h3"
        radius = None if h3 else self._radius(p, hist.grid.cell_m)
        res = cell_hotspots(hist, radius_m=radius, k=p.k, fdr=p.fdr)
        layer = count_layer(hist, extra={"gi_z": res.gi_z, "gi_p": res.gi_p, "gi_bin": res.gi_bin,
                                         "hotspot": res.hotspot})
        md["layer"] = "cells with Getis-Ord Gi* hot/cold spot classes"
        md["hotspot_statistic"] = "Getis-Ord Gi* (star: the cell is in its own neighbourhood), binary weights"
        md["hotspot_neighbourhood"] = f"H3 {p.k}-ring" if h3 else f"cells whose centre is within {radius:g} m"
        md["hotspot_test"] = ("two-sided; null: the true counts are exchangeable over the cells and the noise is "
                              "i.i.d. discrete Laplace, so the released counts are exchangeable: p-value from the "
                              "exact law of a sum of W draws from the released counts (noise included)")
        md["hotspot_fdr"] = bool(p.fdr)
        md["hotspot_cutoffs"] = res.cutoffs
        md["hotspot_classes"] = {str(kk): v for kk, v in HOTSPOT_CLASSES.items()}
        md["hotspot_variance"] = {"released": res.s2_total, "noise": res.s2_noise, "true_estimated": res.s2_true}
        md["hotspot_counts"] = {HOTSPOT_CLASSES[b]: int((res.gi_bin == b).sum()) for b in range(3, -4, -1)}
        return Outcome(layer, md, hist)


class CellsPreviewMechanism(CellsMechanism):
    """The cells a heat, density-band or hot-spot layer would use, and their noise: reads no data, spends nothing."""

    name = "cells-preview"
    entry_point = "cells_preview"
    command = "preview-cells"
    qgis_id = None  # QGIS's preview algorithm shows the spans' preview; this one is on the command line and API
    fronts = frozenset({"api", "cli", "service"})
    title = "Cells preview for heat and hot-spot layers (spends no budget)"
    summary = "the cells a heat or hot-spot layer would use, and their noise (no data, no budget)"
    description = ("The cells a heat layer, density bands or hot spots would have on the public study area, and "
                   "the noise of each cell's count; without a cell size, the cell width the run would choose "
                   "from epsilon for a number of points (a run uses its noisy count). Reads no data and spends no "
                   "budget.")
    keywords = ("differential privacy", "heat map", "hot spots", "cells", "preview")
    reads = None
    examples = """\
examples:
  # the cells hot spots would choose without a cell size, at epsilon 1
  dpgeo preview-cells --layer hotspots --epsilon 1 --domain=-93.33,44.89,-93.19,45.06
"""
    params = CELL_PARAMS + (
        Param("layer", "choice", "Layer",
              "The layer to preview: heat (cell counts), bands (density bands: every cell's count) or hotspots.",
              default="heat", choices=("heat", "bands", "hotspots"), labels=("Heat cells", "Density bands",
                                                                               "Hot spots")),
        Param("n_points", "integer", "Number of points (no cell size)",
              "Without a cell size: the number of points to show the choice for (a run uses its noisy count); "
              "default 1,000 to 10 million.",
              default=None, unit="points", minimum=1, maximum=10 ** 12, advanced=True),
        _MAX_DENSE,
    )

    def _target(self, p):
        return HOTSPOTS if p.layer == "hotspots" else HEAT

    def _as_target(self, p):
        t = self._target(p)
        q = t.validate({**p, "bands": 5 if p.layer == "bands" else None})  # p holds cells, cell_m, h3_resolution
        q["epsilon"] = p.get("epsilon")
        q["n_points"] = p.get("n_points")
        q["max_memory_bytes"] = p.get("max_memory_bytes")
        return t, q

    def preview(self, area, p, c):
        t, q = self._as_target(p)
        out = t.preview(area, q, c)
        out["layer"] = p.layer
        return out


#: The declarations (one instance each; the registry lists them).
HEAT = HeatMechanism()
HOTSPOTS = HotspotsMechanism()
CELLS_PREVIEW = CellsPreviewMechanism()

_HEAT_RETURNS = """Release
    ``layer``: one feature per cell with ``cell_id``, ``h3`` (H3 cells only), ``dp_count``
    (clamped at 0), ``dp_count_low``, ``dp_count_high``, ``dp_count_raw``; or, with ``bands``,
    one feature per band (``band``, ``density_low``, ``density_high``, ``n_cells``, ``dp_count``
    and its interval). ``cells``: the released histogram."""

_HOTSPOTS_RETURNS = """Release
    ``layer``: the cells of :func:`heat` plus ``gi_z``, ``gi_p``, ``gi_bin`` (3 … -3) and
    ``hotspot`` (the seven classes). ``cells``: the released histogram."""


@entry_point(HEAT, returns=_HEAT_RETURNS)
def heat(points, *, epsilon: float, domain, cell_m: float | None = None, h3_resolution: int | None = None,
         cells: str = "square", bands: int | None = None, bandwidth_m: float | None = None, domain_crs=None, crs=None,
         histogram: str = "auto", sensitivity: int = 1, person=None, max_points_per_person: int | None = None,
         seed: int | None = None, domain_from_data: bool = False, input_crs=None, unattended: bool = False,
         dataset: str | None = None, ledger=None, analyst: str | None = None, progress=None, scheduler=None,
         max_dense_cells: int = DEFAULT_MAX_DENSE_CELLS,
         max_false_cells: int = DEFAULT_MAX_FALSE_CELLS, max_memory_bytes=None) -> Release:
    """ε-DP point counts per cell (square or H3) as a polygon layer, or smoothed density bands.

    One release: exact discrete Laplace noise on the count of every cell
    that intersects the public study area (:mod:`dpgeo.histogram`; sensitivity
    = points per record), charged once before any data is read. Everything
    else — clamping, intervals, smoothing, bands — is post-processing.

    Examples
    --------
    >>> import numpy as np, dpgeo
    >>> rng = np.random.default_rng(0)
    >>> x, y = rng.normal(500, 80, 2000), rng.normal(500, 80, 2000)
    >>> r = dpgeo.heat((x, y, "EPSG:32615"), epsilon=1.0, cell_m=100, domain=(0, 0, 1000, 1000),
    ...                domain_crs="EPSG:32615", seed=1, ledger=False)
    >>> len(r.layer), r.metadata["histogram"], int(r.layer["dp_count_raw"].sum()) - 2000 < 100
    (100, 'dense', True)
    """
    return run_release(HEAT, points, locals())


@entry_point(HOTSPOTS, returns=_HOTSPOTS_RETURNS)
def hotspots(points, *, epsilon: float, domain, cell_m: float | None = None, h3_resolution: int | None = None,
             cells: str = "square", radius_m: float | None = None, k: int = 1, fdr: bool = False, domain_crs=None, crs=None,
             sensitivity: int = 1, person=None, max_points_per_person: int | None = None, seed: int | None = None,
             domain_from_data: bool = False, input_crs=None, unattended: bool = False, dataset: str | None = None,
             ledger=None,
             analyst: str | None = None, progress=None, scheduler=None,
             max_dense_cells: int = DEFAULT_MAX_DENSE_CELLS, max_memory_bytes=None) -> Release:
    """Getis-Ord Gi* hot and cold spots of ε-DP cell counts, with a test that accounts for the noise.

    The counts are released exactly as by :func:`heat` (dense); Gi* and its
    classes are post-processing (:mod:`dpgeo.mechanisms.hotspots`).

    Examples
    --------
    >>> import numpy as np, dpgeo
    >>> rng = np.random.default_rng(0)
    >>> x = np.r_[rng.uniform(0, 2000, 4000), rng.normal(700, 60, 1500)]
    >>> y = np.r_[rng.uniform(0, 2000, 4000), rng.normal(1300, 60, 1500)]
    >>> r = dpgeo.hotspots((x, y, "EPSG:32615"), epsilon=1.0, cell_m=100, domain=(0, 0, 2000, 2000),
    ...                    domain_crs="EPSG:32615", crs="EPSG:32615", seed=3, ledger=False)
    >>> hot = r.layer[r.layer["gi_bin"] == 3]
    >>> bool(hot.geometry.union_all().contains(__import__("shapely").Point(700, 1300)))
    True
    """
    return run_release(HOTSPOTS, points, locals())


@entry_point(CELLS_PREVIEW)
def cells_preview(*, epsilon: float, domain, layer: str = "heat", cell_m: float | None = None,
                  h3_resolution: int | None = None, cells: str = "square", domain_crs=None, crs=None, sensitivity: int = 1,
                  n_points: int | None = None, max_dense_cells: int = DEFAULT_MAX_DENSE_CELLS,
                  max_memory_bytes=None) -> dict:
    """The cells a heat, density-band or hot-spot layer would use, and their noise (spends no budget).

    Without a cell size, the width the run would choose from ε for each number
    of points in ``n_points`` (default 10³ … 10⁷; a run uses its noisy count).

    Examples
    --------
    >>> pv = cells_preview(epsilon=1.0, layer="hotspots", domain=(-93.33, 44.89, -93.19, 45.05), n_points=50_000)
    >>> row = pv["cells_by_points"][0]
    >>> row["n_points"], 300 < row["cell_width_m"] < 1000
    (50000, True)
    """
    return run_preview(CELLS_PREVIEW, locals())
