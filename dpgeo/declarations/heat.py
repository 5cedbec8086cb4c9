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

from ..declare import Field, Mechanism, Meta, Outcome, Param
from ..errors import ParameterError
from ..grid import Grid
from ..histogram import (
    DEFAULT_MAX_DENSE_CELLS,
    DEFAULT_MAX_FALSE_CELLS,
    choose_histogram,
    sparse_threshold,
)
from ..mechanisms.heat import cell_hotspots, count_layer, density_bands
from ..mechanisms.heat_cells import (
    AUTO_MAX_HEAT_CELLS,
    FINE_H3_CELLS,
    HEAT_POINTS_PER_NOISE_SD,
    HOTSPOT_POINTS_PER_NOISE_SD,
    MIN_AUTO_CELLS,
    auto_cells_plan,
    auto_h3_plan,
    choose_cells,
    choose_h3_cells,
    fine_h3_resolution,
)
from ..mechanisms.resolution import TOTAL_SHARE, auto_budget, coarse_grid, fine_width
from ..mechanisms.hotspots import HOTSPOT_CLASSES
from ..noise import discrete_laplace_q, discrete_laplace_variance, noise_rate, sum_interval_halfwidth
from ..release import Release
from ..resources import check_plan, plan_heat
from ..domain import _crs_label
from ..pipeline._common import _progress
from ..generators.docs import entry_point
from .spans import SPANS_OUTPUTS, _release_histogram
from ..pipeline.run import run_preview, run_release

__all__ = ["heat", "hotspots", "cells_preview", "HEAT", "HOTSPOTS", "CELLS_PREVIEW", "HeatMechanism",
           "HotspotsMechanism", "CellsPreviewMechanism"]

_CLAMP = ("dp_count is the released noisy count clamped at 0 (post-processing; dp_count_raw is the release itself, "
          "unbiased and may be negative); dp_count_low/high: 95% interval of the true count, clipped at 0")
#: The most cells a square hot-spot neighbourhood may have.
MAX_NEIGHBOURHOOD_CELLS = 40_000
#: Hot spots with a radius and no cell size: the cells are kept wide enough that all neighbourhoods together
#: hold at most this many (cell, neighbour) pairs.
MAX_NEIGHBOURHOOD_PAIRS = 1 << 24

#: Default σ of the bands' smoothing kernel, in cell widths (H3: centre spacings). A convention (about the
#: cells' own scale), not tuned.
BANDWIDTH_CELLS = 2.0
#: Default neighbourhood radius of hot spots on square cells, in cell widths: the 3 × 3 block (queen
#: contiguity, the usual Gi* neighbourhood). A convention, not tuned.
HOTSPOT_RADIUS_CELLS = 1.5

#: The two ways of laying cells over the study area (exactly one is given).
CELL_PARAMS = (
    Param("cell_m", "number", "Cell size",
          "Width of a square cell, the grid anchored to the study area's corner; give this or the H3 resolution, "
          "or neither: the width is then chosen from epsilon and a noisy count of the points (a share of epsilon).",
          unit="metres", default=None, minimum=0, exclusive_minimum=True, maximum=1_000_000, flag="--cell",
          qgis_name="CELL_SIZE", label="cell_m (cell width)", none_means="none"),
    Param("h3_resolution", "integer", "H3 resolution",
          "H3 hexagon cells of this resolution instead of squares: 7 ≈ 5 km², 8 ≈ 0.7 km², 9 ≈ 0.1 km² (174 m "
          "edges), 10 ≈ 0.015 km²; give this or the cell size (or neither: square cells chosen from epsilon).",
          default=None, minimum=0, maximum=15, flag="--h3", qgis_name="H3_RESOLUTION",
          label="h3_resolution (H3 resolution)", none_means="none"),
    Param("cells", "choice", "Cell shape without a cell size",
          "With neither a cell size nor an H3 resolution, the cells chosen from epsilon are squares, or H3 "
          "hexagons of the resolution chosen.",
          default="square", choices=("square", "h3"), labels=("Squares", "H3 hexagons"), flag="--cells",
          qgis_name="CELL_SHAPE", advanced=True),
)
_MAX_DENSE = Param("max_dense_cells", "integer", "Largest dense release",
                   "The most cells whose counts are all released (dense); histogram='auto' takes the sparse "
                   "release beyond it, and density bands and hot spots are refused beyond it.",
                   default=DEFAULT_MAX_DENSE_CELLS, minimum=1, fronts=frozenset({"api"}))

HEAT_PARAMS = CELL_PARAMS + (
    Param("bands", "integer", "Density bands",
          "Publish this many smoothed density bands (polygons, each with the DP count of its cells) instead of "
          "the cells; the same release, smoothed with a public kernel (no extra budget). Needs every cell's count "
          "(a dense release).",
          default=None, minimum=1, maximum=20, flag="--bands", qgis_name="BANDS", label="bands (density bands)",
          none_means="none (the cells)"),
    Param("bandwidth_m", "number", "Smoothing bandwidth",
          "σ of the Gaussian kernel that smooths the counts before they are cut into bands (default: "
          f"{BANDWIDTH_CELLS:g} cell widths, or {BANDWIDTH_CELLS:g} H3 centre spacings).",
          unit="metres", default=None, minimum=0, exclusive_minimum=True, maximum=1_000_000, advanced=True,
          flag="--bandwidth", label="bandwidth_m (smoothing kernel)"),
    Param("histogram", "choice", "Empty cells",
          "dense: every cell of the study area gets a noisy count; sparse: only cells whose noisy count reaches "
          "the threshold θ are published (the others are released as 0; an empty cell passes with a small, "
          "known probability); auto decides from the number of cells (public).",
          default="auto", choices=("auto", "dense", "sparse"), advanced=True),
    _MAX_DENSE,
    Param("max_false_cells", "number", "Expected false cells of the sparse release",
          "The sparse release's threshold θ keeps the expected number of empty cells it publishes below this.",
          default=DEFAULT_MAX_FALSE_CELLS, minimum=0, exclusive_minimum=True, fronts=frozenset({"api"})),
)

HOTSPOT_PARAMS = CELL_PARAMS + (
    Param("radius_m", "number", "Neighbourhood radius",
          "Square cells: a cell's neighbourhood is every cell whose centre lies within this distance of its "
          f"centre, itself included (default {HOTSPOT_RADIUS_CELLS:g} cell widths: the 3 × 3 block).",
          unit="metres", default=None, minimum=0, exclusive_minimum=True, maximum=1_000_000, flag="--radius",
          qgis_name="RADIUS", label="radius_m (neighbourhood radius)"),
    Param("k", "integer", "H3 neighbourhood ring",
          "H3 cells: a cell's neighbourhood is its k-ring, itself included (1: the cell and its six neighbours).",
          unit="cells", default=1, minimum=1, maximum=20, flag="--ring", qgis_name="H3_RING",
          label="k (H3 ring)"),
    Param("fdr", "flag", "False discovery rate",
          "Benjamini–Hochberg false-discovery-rate cut-offs over all cells instead of the plain 90/95/99% ones "
          "(ArcGIS's FDR correction).",
          default=False, qgis_name="FDR"),
    _MAX_DENSE,
)

_CELL_FIELDS = (
    Field("cell_id", "int", "the cell's number in the public cell set"),
    Field("h3", "str", "H3 cells: the cell's H3 index (15 hexadecimal digits)"),
    Field("dp_count", "int", "noisy number of points in the cell, clamped at 0"),
    Field("dp_count_low", "int", "lower end of the 95% interval of the cell's count"),
    Field("dp_count_high", "int", "upper end of the 95% interval of the cell's count"),
    Field("dp_count_raw", "int", "the released noisy count itself (unbiased, may be negative)"),
)


def is_auto_cells(p) -> bool:
    """Whether a heat or hot-spot run has neither a cell size nor an H3 resolution (its cells chosen from ε)."""
    return p.get("cell_m") is None and p.get("h3_resolution") is None


def _h3(p) -> bool:
    """Whether a run's cells are H3 hexagons (a given resolution, or one chosen from ε)."""
    return p.get("h3_resolution") is not None or (is_auto_cells(p) and p.get("cells") == "h3")


def _auto_cap(p, need_dense) -> int:
    """The most cells a run without a cell size may choose (public): :data:`AUTO_MAX_HEAT_CELLS`, and at most the
    dense release's limit (``need_dense``: bands and hot spots need every count; a heat layer below the cap is
    always dense)."""
    return min(int(p.max_dense_cells), AUTO_MAX_HEAT_CELLS)


def _cost_params(area, p, need_dense):
    """``p`` with the cells a run without a cell size could choose at its finest (the service's worst case)."""
    if not is_auto_cells(p):
        return p
    from ..h3cells import h3_cells_estimate

    cap = _auto_cap(p, need_dense)
    q = type(p)(p)
    if p.get("cells") == "h3":
        q["h3_resolution"] = max([r for r in range(16) if h3_cells_estimate(area, r) <= cap] or [0])
    else:
        q["cell_m"] = _finest_auto_width(area, cap)
    return q


def _finest_auto_width(area, cap) -> float:
    """The narrowest cells (metres) a run without a cell size could choose on ``area``."""
    minx, miny, maxx, maxy = area.polygon.bounds
    return max(fine_width(area), math.sqrt((maxx - minx) * (maxy - miny) / cap))


def _cells(area, p, c, max_memory_bytes, *, histogram, need_dense, neighbours=0, bands=False, min_width=0.0):
    """The public cell set of a run (square Grid or H3Cells), its memory planned and checked first.

    Without a cell size: the memory of the finest cells the run could choose is checked, and the points are
    counted on the study area's finest grid (the cells are chosen from a noisy total when the data is read).
    """
    if is_auto_cells(p) and p.get("cells") == "h3":
        from ..h3cells import H3Cells, h3_cells_estimate, require_h3

        require_h3()
        fine = fine_h3_resolution(area)
        cap = _auto_cap(p, need_dense)
        finest = max([r for r in range(fine + 1) if h3_cells_estimate(area, r) <= cap] or [0])
        plan = plan_heat(area, h3_resolution=finest, epsilon=p.epsilon, sensitivity=c.sensitivity,
                         histogram=histogram, max_dense_cells=p.max_dense_cells,
                         max_false_cells=p.get("max_false_cells", DEFAULT_MAX_FALSE_CELLS), neighbours=neighbours,
                         bands=bands)
        check_plan(plan, max_memory_bytes, cell_option="max_dense_cells, or an H3 resolution")
        return H3Cells(area, fine, max_cells=max(4 * FINE_H3_CELLS, 1))
    if is_auto_cells(p):
        from ..mechanisms.resolution import fine_grid

        width = max(_finest_auto_width(area, _auto_cap(p, need_dense)), min_width)
        plan = plan_heat(area, cell_m=width, epsilon=p.epsilon, sensitivity=c.sensitivity, histogram=histogram,
                         max_dense_cells=p.max_dense_cells,
                         max_false_cells=p.get("max_false_cells", DEFAULT_MAX_FALSE_CELLS), neighbours=neighbours,
                         bands=bands)
        check_plan(plan, max_memory_bytes, cell_option="max_dense_cells, or a cell size (cell_m)")
        return fine_grid(area)
    plan = plan_heat(area, cell_m=p.cell_m, h3_resolution=p.h3_resolution, epsilon=p.epsilon,
                     sensitivity=c.sensitivity, histogram=histogram, max_dense_cells=p.max_dense_cells,
                     max_false_cells=p.get("max_false_cells", DEFAULT_MAX_FALSE_CELLS), neighbours=neighbours,
                     bands=bands)
    check_plan(plan, max_memory_bytes, cell_option="cell size (cell_m) or a coarser H3 resolution")
    if need_dense and p.h3_resolution is not None and plan.cells > 2 * p.max_dense_cells:
        _too_many(need_dense, plan.cells, p.max_dense_cells, "about ")  # before a large H3 cell set is listed
    if p.h3_resolution is not None:
        from ..h3cells import H3Cells

        grid = H3Cells(area, p.h3_resolution)
    else:
        grid = Grid(area, p.cell_m)
    if need_dense and grid.n_cells > p.max_dense_cells:
        _too_many(need_dense, grid.n_cells, p.max_dense_cells)
    return grid


def _too_many(what, n, limit, about=""):
    raise ParameterError(f"{what} need every cell's noisy count (a dense release), and the study area has "
                         f"{about}{n:,} cells (at most {limit:,}): use larger cells (a coarser H3 resolution)")


def _count_setup(grid, p, c, histogram, epsilon=None):
    """The public quantities of the count release on ``grid``: dense or sparse, q, θ (``epsilon``: the counts'
    budget, default the run's)."""
    epsilon = p.epsilon if epsilon is None else epsilon
    noise_rate(epsilon, c.sensitivity)  # the exact sampler's range, refused before any data is read
    kind = choose_histogram(grid, histogram, max_dense_cells=p.max_dense_cells)
    q = discrete_laplace_q(epsilon, c.sensitivity)
    theta = sparse_threshold(grid.n_cells, q, p.get("max_false_cells", DEFAULT_MAX_FALSE_CELLS)) \
        if kind == "sparse" else None
    return {"kind": kind, "q": q, "theta": theta, "epsilon": epsilon}


def _auto_setup(p, c, histogram, rho):
    """The public quantities of a run without a cell size: the two shares of ε (both in the sampler's range)."""
    eps0, eps1 = auto_budget(p.epsilon)
    noise_rate(eps0, c.sensitivity)
    noise_rate(eps1, c.sensitivity)
    return {"auto_cells": True, "epsilon_total": eps0, "epsilon_counts": eps1, "histogram": histogram, "rho": rho}


def _release(counts, p, c, setup, rng, progress, *, need_dense=False, factor_bounds=(1, None)):
    """The one private step: the noisy counts of every cell (dense) or of the cells above θ (sparse).

    Without a cell size (``setup["auto_cells"]``) the noisy total is released first and picks the cells
    (:func:`dpgeo.mechanisms.heat_cells.choose_cells`); the counts then use the rest of ε.
    """
    auto = None
    if setup.get("auto_cells"):
        _progress(progress, 0.4, "noisy total and the cells it picks")
        if getattr(counts.grid, "kind", None) == "h3":
            auto = choose_h3_cells(counts, epsilon=p.epsilon, sensitivity=c.sensitivity, rho=setup["rho"],
                                   max_cells=_auto_cap(p, need_dense), rng=rng)
        else:
            auto = choose_cells(counts, epsilon=p.epsilon, sensitivity=c.sensitivity, rho=setup["rho"],
                                max_cells=_auto_cap(p, need_dense), rng=rng, min_factor=factor_bounds[0],
                                max_factor=factor_bounds[1])
        counts = auto.counts
        setup = _count_setup(counts.grid, p, c, setup["histogram"], epsilon=setup["epsilon_counts"])
    grid = counts.grid
    _progress(progress, 0.45, f"noisy {setup['kind']} counts of {grid.n_cells:,} cells")
    hist = _release_histogram(counts, kind=setup["kind"], epsilon=setup["epsilon"], sensitivity=c.sensitivity,
                              theta=setup["theta"], rng=rng)
    md = _cells_metadata(grid, setup["kind"], setup["theta"], setup["q"])
    if auto is not None:
        md.update(auto.settings)
        md["cells_chosen"] = True
    return hist, md


def _cells_metadata(grid, kind, theta, q):
    md = {"noise": "discrete Laplace (two-sided geometric)", "noise_q": q,
          "noise_variance_per_cell": discrete_laplace_variance(q),
          "count_error_95": sum_interval_halfwidth(1, q, 0.95), "histogram": kind, "theta": theta,
          "n_cells": grid.n_cells, "grid": grid.to_metadata(), "clamp": _CLAMP,
          "dp_count_interval": "95%: released count ± the 95% half-width of its noise, clipped at 0"}
    if getattr(grid, "kind", None) == "h3":
        md["cells"] = "H3"
        md["h3_resolution"] = grid.resolution
    else:
        md["cells"] = "square"
        md["cell_width_m"] = grid.cell_m
    if kind == "sparse":
        md["layer_cells"] = (f"sparse release: only cells whose noisy count reached theta = {theta} are in the "
                             "layer; every other cell of the study area was released as 0")
    else:
        md["layer_cells"] = "dense release: every cell that intersects the study area is in the layer"
    return md


def _spacing(grid) -> float:
    return grid.spacing_m if getattr(grid, "kind", None) == "h3" else grid.cell_m


#: What a release of noisy cell counts publishes besides the common fields (dpgeo.metadata_fields).
CELL_OUTPUTS = (
    Meta("cells", "cell kind", "Study area and grid", "square cells or H3 hexagons", panel=True),
    Meta("layer", "layer", "Result", "what the layer's features are", panel=True),
    Meta("layer_cells", "cells in the layer", "Result", "which cells are in the layer"),
    Meta("clamp", "dp_count clamping", "Result", "how dp_count relates to the released noisy count"),
    Meta("noise_variance_per_cell", "noise variance of a cell", "Thresholds",
         "the variance of one cell's noise", unit="points"),
)
#: What a layer without a cell size adds: the noisy total and the cells it chose (dpgeo.mechanisms.heat_cells).
AUTO_CELL_OUTPUTS = (
    Meta("cells_chosen", "cells chosen from ε", "Auto: its choices",
         "whether the cells were chosen from ε and a noisy total (no cell size given)", unit="yes/no", panel=True),
    Meta("cells_rule", "cell rule", "Auto: its choices", "how the cells follow from the noisy total"),
    Meta("cells_points_per_noise_sd", "ρ (points per noise s.d.)", "Auto: its choices",
         "evenly spread points per cell, in noise standard deviations, that the rule aims at"),
    Meta("epsilon_counts", "ε of the cell counts", "Privacy", "the part of ε spent on the cells' counts"),
    Meta("fine_h3_resolution", "finest H3 resolution", "Auto: its choices",
         "the H3 resolution the points were counted on"),
) + tuple(m for m in SPANS_OUTPUTS if m.key in ("noisy_total", "total_share", "epsilon_total", "fine_cell_width_m",
                                                "coarsening_factor", "noise_sd_of_cell"))  # declared once, with spans
#: What density bands add.
BAND_OUTPUTS = (
    Meta("bands", "bands", "Parameters", "the density bands made", panel=True),
    Meta("bands_requested", "bands asked for", "Parameters", "the density bands asked for"),
    Meta("bands_bandwidth_m", "smoothing bandwidth", "Parameters",
         "the smoothing kernel's bandwidth", unit="metres", panel=True),
    Meta("bands_kernel", "smoothing kernel", "Parameters", "the public kernel the counts are smoothed with"),
    Meta("bands_rule", "band limits", "Thresholds", "how the band limits are chosen"),
    Meta("bands_levels_per_cell", "band limits (count per cell)", "Thresholds",
         "the band limits, in smoothed count per cell", render="list"),
    Meta("bands_noise_floor_per_cell", "lowest limit: smoothed noise (count per cell)", "Thresholds",
         "the lowest limit: where smoothed noise alone stays below, 95% of the time"),
    Meta("bands_min_step_per_cell", "smallest step between limits (count per cell)", "Thresholds",
         "the smallest step between two limits"),
    Meta("bands_outline", "band outlines", "Result", "how the bands' polygons are drawn"),
)
#: What a hot-spot analysis adds.
HOTSPOT_OUTPUTS = (
    Meta("hotspot_statistic", "statistic", "Parameters", "the hot-spot statistic", panel=True),
    Meta("hotspot_neighbourhood", "neighbourhood", "Parameters", "the public neighbourhood of a cell", panel=True),
    Meta("hotspot_test", "test", "Thresholds", "the significance test, which accounts for the noise"),
    Meta("hotspot_fdr", "false discovery rate control", "Thresholds",
         "whether the p-values are corrected for testing every cell (Benjamini-Hochberg)", unit="yes/no", panel=True),
    Meta("hotspot_cutoffs", "p-value cut-offs", "Thresholds", "the p-values of the confidence levels", render="share"),
    Meta("hotspot_variance", "variance of the counts", "Thresholds",
         "the variance of the released counts, of the noise and of the true counts (estimated)", render="share"),
    Meta("hotspot_classes", "classes", "Result", "the classes, by gi_bin"),
    Meta("hotspot_counts", "cells per class", "Result", "the cells in each class", panel=True),
)


class _CellsMechanism(Mechanism):
    """What heat and hot-spot layers share: the cell set, the count release, its metadata."""

    at_most_one = (("cell_m", "h3_resolution"),)
    cell_option = "the cell size (a larger cell_m, or a coarser h3_resolution)"
    read_share = 0.4
    #: ``ρ`` of a run without a cell size (:mod:`dpgeo.mechanisms.heat_cells`).
    points_per_noise_sd = HEAT_POINTS_PER_NOISE_SD

    def chooses_grid(self, p):
        return is_auto_cells(p)

    @staticmethod
    def _factor_bounds(area, p):
        """``(min, max)`` factor of the cells a run without a cell size may choose (public)."""
        return 1, None

    def _needs_dense(self, p):
        return False

    def check(self, p):
        if p.get("cells") == "h3" and p.cell_m is not None:
            raise ParameterError("cells='h3' (--cells h3) asks for H3 cells of a resolution chosen from epsilon: "
                                 "leave out the cell size, or give the H3 resolution instead")
        if p.h3_resolution is not None or p.get("cells") == "h3":
            from ..h3cells import require_h3

            require_h3()

    def check_run(self, p, epsilon, c):
        noise_rate(epsilon, c.sensitivity)  # the exact sampler's range, refused here rather than after reading

    def linear_in_contribution(self, grid, p, c):
        # one count release with discrete Laplace noise of decay exp(-ε/s): one point moves one cell by one, a
        # loss of ε/s; bands and Gi* classes are post-processing (privacy.md §9)
        return True

    def preview(self, area, p, c):
        """The cells a run would use on ``area`` and their noise (public inputs only; reads no data)."""
        from ..mechanisms.resolution import coarse_grid as _coarse

        out = {"layer": self.short_title(p), "epsilon": p.epsilon, "working_crs": _crs_label(area.crs)}
        if not is_auto_cells(p):
            grid = self.grid(area, p, c, p.get("max_memory_bytes"))
            setup = self.setup(grid, p, c)
            q = setup["q"]
            out.update(cells="H3" if p.h3_resolution is not None else "square", n_cells=grid.n_cells,
                       cell_width_m=None if p.h3_resolution is not None else p.cell_m,
                       h3_resolution=p.h3_resolution, noise_sd_of_cell=math.sqrt(discrete_laplace_variance(q)),
                       count_error_95=sum_interval_halfwidth(1, q, 0.95), spends_budget=False)
            return out
        grid = self.grid(area, p, c, p.get("max_memory_bytes"))  # the same refusals as a run
        setup = self.setup(None, p, c)
        if _h3(p):
            from ..h3cells import h3_cells_estimate

            q = discrete_laplace_q(setup["epsilon_counts"], c.sensitivity)
            rows = []
            for n in ([10 ** k for k in range(3, 8)] if p.get("n_points") is None else [int(p["n_points"])]):
                r = auto_h3_plan(area, n, finest=grid.resolution, epsilon_counts=setup["epsilon_counts"],
                                 sensitivity=c.sensitivity, rho=setup["rho"],
                                 max_cells=_auto_cap(p, self._needs_dense(p)))
                m = h3_cells_estimate(area, r)
                rows.append({"n_points": n, "h3_resolution": r, "n_cells_about": m, "mean_points_per_cell": n / m})
            out.update(cells="H3, the resolution chosen from epsilon and a noisy count of the points",
                       total_share=TOTAL_SHARE, epsilon_total=setup["epsilon_total"],
                       epsilon_counts=setup["epsilon_counts"], cells_points_per_noise_sd=setup["rho"],
                       min_cells=MIN_AUTO_CELLS, fine_h3_resolution=grid.resolution,
                       noise_sd_of_cell=math.sqrt(discrete_laplace_variance(q)),
                       count_error_95=sum_interval_halfwidth(1, q, 0.95), cells_by_points=rows, spends_budget=False)
            return out
        w0 = fine_width(area)
        q = discrete_laplace_q(setup["epsilon_counts"], c.sensitivity)
        bounds = self._factor_bounds(area, p)
        n_points = p.get("n_points")
        rows = []
        for n in ([10 ** k for k in range(3, 8)] if n_points is None else [int(n_points)]):
            k = auto_cells_plan(area, w0, n, epsilon_counts=setup["epsilon_counts"], sensitivity=c.sensitivity,
                                rho=setup["rho"], max_cells=_auto_cap(p, self._needs_dense(p)), min_factor=bounds[0],
                                max_factor=bounds[1])
            m = _coarse(area, w0, k).n_cells
            rows.append({"n_points": n, "cell_width_m": k * w0, "n_cells": m, "mean_points_per_cell": n / m})
        out.update(cells="square, chosen from epsilon and a noisy count of the points", total_share=TOTAL_SHARE,
                   epsilon_total=setup["epsilon_total"], epsilon_counts=setup["epsilon_counts"],
                   cells_points_per_noise_sd=setup["rho"], min_cells=MIN_AUTO_CELLS, fine_cell_width_m=w0,
                   noise_sd_of_cell=math.sqrt(discrete_laplace_variance(q)),
                   count_error_95=sum_interval_halfwidth(1, q, 0.95), cells_by_points=rows, spends_budget=False)
        return out

    def cell_width(self, area, p):
        if is_auto_cells(p):
            return _finest_auto_width(area, _auto_cap(p, self._needs_dense(p)))
        if p.h3_resolution is not None:
            from ..h3cells import H3_AREA_M2

            return math.sqrt(H3_AREA_M2[p.h3_resolution])  # a square of the mean hexagon's area
        return p.cell_m

    def cost(self, area, p, c):
        from ..costs import bands_cost, heat_cost

        q = _cost_params(area, p, self._needs_dense(p))
        return bands_cost(area, q, self.cell_width(area, q)) if p.get("bands") else heat_cost(area, q)


class HeatMechanism(_CellsMechanism):
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


class HotspotsMechanism(_CellsMechanism):
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


class CellsPreviewMechanism(_CellsMechanism):
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
