"""The cells heat layers and hot spots share, declared once: their parameters, the public cell set (given, or
chosen from ε and a noisy total), the one count release and its metadata (:class:`CellsMechanism`).

:mod:`dpgeo.declarations.heat` declares the layers on top of it (heat cells and density bands, hot spots,
the cells preview). Privacy: ``docs/privacy.md`` §9.
"""

from __future__ import annotations

import math

from ..declare import Field, Mechanism, Meta, Param
from ..domain import _crs_label
from ..errors import ParameterError
from ..grid import Grid
from ..histogram import (
    DEFAULT_MAX_DENSE_CELLS,
    DEFAULT_MAX_FALSE_CELLS,
    choose_histogram,
    sparse_threshold,
)
from ..mechanisms.heat_cells import (
    AUTO_MAX_HEAT_CELLS,
    FINE_H3_CELLS,
    HEAT_POINTS_PER_NOISE_SD,
    MIN_AUTO_CELLS,
    auto_cells_plan,
    auto_h3_plan,
    choose_cells,
    choose_h3_cells,
    fine_h3_resolution,
)
from ..mechanisms.resolution import TOTAL_SHARE, auto_budget, fine_width
from ..noise import discrete_laplace_q, discrete_laplace_variance, noise_rate, sum_interval_halfwidth
from ..pipeline._common import _progress
from ..resources import check_plan, plan_heat
from .spans import SPANS_OUTPUTS, _release_histogram

__all__ = ["CELL_PARAMS", "HEAT_PARAMS", "HOTSPOT_PARAMS", "CELL_OUTPUTS", "AUTO_CELL_OUTPUTS", "BAND_OUTPUTS",
           "HOTSPOT_OUTPUTS", "BANDWIDTH_CELLS", "HOTSPOT_RADIUS_CELLS", "MAX_NEIGHBOURHOOD_CELLS",
           "MAX_NEIGHBOURHOOD_PAIRS", "CellsMechanism", "is_auto_cells"]

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


class CellsMechanism(Mechanism):
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
