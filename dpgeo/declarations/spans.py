"""DP-DBSCAN spans and its free noise preview, declared once (:class:`SpansMechanism`, :class:`PreviewMechanism`).

The entry points :func:`dbscan_spans` and :func:`noise_preview` run the
declarations through the one pipeline (:func:`dpgeo.pipeline.run.run_release`).
"""

from __future__ import annotations

import math

from ..declare import Field, Mechanism, Meta, Outcome, Param
from ..grid import Grid, cell_width_for_radius, neighbourhood_offsets
from ..histogram import (
    DEFAULT_MAX_DENSE_CELLS,
    DEFAULT_MAX_FALSE_CELLS,
    choose_histogram,
    dense_histogram,
    sparse_histogram,
    sparse_threshold,
)
from ..mechanisms.dbscan import DEFAULT_BETA, dbscan_cells, noise_bound
from ..mechanisms.levels import DEFAULT_FDR
from ..mechanisms.resolution import TOTAL_SHARE
from ..noise import discrete_laplace_q, noise_rate, sum_interval_halfwidth
from ..polygons import cluster_polygons
from ..release import Release
from ..resources import check_plan, plan_run
from ..pipeline._common import _crs_label, _progress
from ..generators.docs import entry_point
from .spans_auto import (
    AUTO_MECHANISM,
    LEVEL_FIELDS,
    auto_budget_checked,
    auto_cell_width,
    auto_grid,
    auto_preview,
    auto_run,
    auto_setup,
    check_auto,
    is_auto,
)
from ..pipeline.run import run_preview, run_release

__all__ = ["dbscan_spans", "noise_preview", "SPANS", "PREVIEW", "SpansMechanism", "PreviewMechanism",
           "CLUSTER_FIELDS"]

#: The attributes of a cluster layer (spans, WaveCluster).
CLUSTER_FIELDS = (
    Field("cluster_id", "int", "cluster number, 1, 2, ..."),
    Field("n_cells", "int", "grid cells in the cluster"),
    Field("area_m2", "float", "area of the cluster's cells (m²)"),
    Field("dp_count", "int", "noisy number of points in the cluster (sum of released cell counts, clipped at 0)"),
    Field("dp_count_low", "int", "lower end of dp_count's 95% interval"),
    Field("dp_count_high", "int", "upper end of dp_count's 95% interval"),
)

#: The parameters of DP-DBSCAN spans (and of its noise preview).
SPANS_PARAMS = (
    Param("radius_m", "number", "DBSCAN radius r",
          "DBSCAN radius α: a cell is a core cell when its α-neighbourhood holds at least MinPts points "
          "(certainly, with the noise bound Γ added). Cells are η′·α/√2 wide. Leave out together with MinPts "
          f"(auto): {TOTAL_SHARE:.0%} of ε then buys a noisy total that fixes the cell width, and the clusters are chosen over "
          "every density level of one histogram.",
          default=None, unit="metres", minimum=0, exclusive_minimum=True, maximum=100_000, flag="--radius",
          qgis_name="RADIUS", label="radius"),
    Param("min_points", "integer", "MinPts",
          "DBSCAN MinPts: the fewest points in a core cell's α-neighbourhood. Leave out together with the "
          "radius (auto).",
          default=None, unit="points", minimum=1, maximum=1_000_000_000, label="min_points (MinPts)"),
    Param("beta", "number", "β: failure probability of the noise bound Γ",
          "With probability at least 1 − β every reported core cell is a true candidate and every cell with at "
          "least MinPts′ neighbours is reported.",
          default=DEFAULT_BETA, minimum=0, maximum=1, exclusive_minimum=True, exclusive_maximum=True,
          advanced=True, label="beta (failure probability of the noise bound)"),
    Param("eta", "number", "η′: cell width factor",
          "Cells are η′·α/√2 metres wide: larger cells mean fewer cells per neighbourhood and less noise, but "
          "coarser shapes.",
          default=1.0, minimum=0, maximum=1, exclusive_minimum=True, advanced=True,
          label="eta (η′, cell width factor)"),
    Param("histogram", "choice", "Noisy histogram",
          "DP histogram: auto picks dense or sparse from the number of cells (public).",
          default="auto", choices=("auto", "dense", "sparse"), advanced=True),
    Param("gamma", "choice", "Noise bound Γ",
          "Core threshold bound: laplace = the paper's Γ_Lap (conservative, thinner spans); exact = the smallest "
          "bound with the same guarantee (finds smaller clusters, fatter spans).",
          default="laplace", choices=("laplace", "exact"), advanced=True, qgis_name="GAMMA_BOUND"),
    Param("extent", "choice", "Span extent",
          "How far a span reaches: grown = the core spans grown, never merged, into neighbouring cells certified "
          "dense by the exact bound (no extra budget); core = only the core cells (the paper's Algorithm 1).",
          default="grown", choices=("grown", "core"),
          labels=("Grown: core spans grown into certified cells (recommended)",
                  "Core cells only (paper's Algorithm 1)"),
          advanced=True, qgis_name="SPAN_EXTENT"),
    Param("fdr", "number", "False-discovery rate of the floor (auto)",
          "Without a radius: among the cells a cluster may cover, the expected share whose neighbourhood holds no "
          f"point at all (Benjamini–Hochberg over every cell). Default {DEFAULT_FDR:g}.",
          default=None, minimum=0, maximum=1, exclusive_minimum=True, exclusive_maximum=True, advanced=True,
          label="fdr (false-discovery rate of the floor)"),
    Param("levels", "flag", "Tree of density levels (auto)",
          "Without a radius: also write the tree of clusters over every density level — the GeoPackage layer "
          "<name>_levels, or <name>_levels.geojson beside a GeoJSON file (the same release); in QGIS a second, "
          "optional output layer (it may go into the same GeoPackage).",
          default=False, fronts=frozenset({"api", "cli", "qgis"}), qgis_name="OUTPUT_LEVELS", layer_style="levels"),
    Param("max_dense_cells", "integer", "Largest dense histogram",
          "histogram='auto' takes the dense histogram up to this many cells.",
          default=DEFAULT_MAX_DENSE_CELLS, minimum=1, fronts=frozenset({"api"})),
    Param("max_false_cells", "number", "Expected false cells of the sparse histogram",
          "The sparse histogram's threshold θ keeps the expected number of empty cells it releases below this.",
          default=DEFAULT_MAX_FALSE_CELLS, minimum=0, exclusive_minimum=True, fronts=frozenset({"api"})),
)


#: What a DP-DBSCAN release (or its preview) publishes besides the common fields (dpgeo.metadata_fields).
SPANS_OUTPUTS = (
    Meta("radius_m", "radius α", "Parameters",
         "the DBSCAN radius: a cell is core when its α-neighbourhood holds MinPts points", unit="metres", panel=True),
    Meta("min_points", "MinPts", "Parameters",
         "the fewest points in a core cell's α-neighbourhood", unit="points", panel=True),
    Meta("beta", "β", "Parameters", "the probability with which the noise bounds may fail", render="beta"),
    Meta("eta", "η′ (cell width factor)", "Parameters",
         "the cell width as a share of α/√2", template="{} (cells of η′·α/√2)"),
    Meta("gamma_method", "Γ bound", "Parameters", "how Γ, the bound on the noise, is computed"),
    Meta("extent", "span extent", "Parameters",
         "how far a span reaches: its core cells, or grown into certified cells"),
    Meta("auto", "radius and MinPts chosen from ε (auto)", "Parameters",
         "whether the radius and MinPts were chosen from ε (none given)", unit="yes/no"),
    Meta("gamma", "Γ", "Thresholds", "the most the noise adds to a neighbourhood sum (probability ≥ 1 − β); a core "
         "cell needs MinPts + Γ", unit="points", panel=True, column="Γ", note=True),
    Meta("gamma_low", "Γ_low", "Thresholds",
         "the bound on the noise below a neighbourhood sum (probability ≥ 1 − β)", unit="points"),
    Meta("gamma_laplace", "Γ of the paper (Γ_Lap)", "Thresholds",
         "Γ by the paper's Laplace bound, for comparison", unit="points"),
    Meta("core_threshold", "core threshold", "Thresholds",
         "a cell is core when its noisy neighbourhood sum reaches this",
         unit="points", template="{} (MinPts + Γ)", column="core threshold"),
    Meta("min_points_prime", "MinPts′", "Thresholds", "every cell whose α-neighbourhood truly holds MinPts′ points "
         "is found (probability ≥ 1 − β)", unit="points", template="{} (MinPts + Γ + Γ_low)", column="MinPts′",
         note=True),
    Meta("extent_threshold", "extent threshold", "Thresholds",
         "the noisy count a grown span reaches into", unit="points", column="extent threshold"),
    Meta("kappa", "κ (neighbourhood)", "Thresholds",
         "the cells in one α-neighbourhood", unit="cells", template="{} summed per neighbourhood", column="κ"),
    Meta("count_sd", "count noise s.d.", "Thresholds", "the standard deviation of one cell's noise", unit="points"),
    Meta("n_core_cells", "core cells", "Result", "the cells found core"),
    Meta("n_span_cells", "cells in spans", "Result", "the cells in the spans"),
    # without a radius and MinPts (auto): the density levels of one histogram
    Meta("epsilon_total", "ε of the noisy total", "Privacy", "the part of ε spent on the noisy total"),
    Meta("epsilon_histogram", "ε of the histogram", "Privacy", "the part of ε spent on the histogram"),
    Meta("total_share", "share of ε for the noisy total", "Privacy",
         "the share of ε spent on the noisy total", render="share"),
    Meta("noisy_total", "noisy total n̂", "Result", "released with ε₀; it fixes the cell width", unit="points", note=True),
    Meta("resolution_rule", "cell width rule", "Study area and grid",
         "how the cell width follows from the noisy total"),
    Meta("fine_cell_width_m", "finest grid", "Study area and grid",
         "the finest cell the rule allows", unit="metres", template="cells of {}"),
    Meta("coarsening_factor", "coarsening", "Study area and grid",
         "how many finest cells a cell is wide", template="cells {} × as wide as the finest"),
    Meta("max_cells", "largest grid", "Study area and grid", "the most cells the grid may have", unit="cells"),
    Meta("max_fine_cells", "largest finest grid", "Study area and grid",
         "the most cells the finest grid may have", unit="cells"),
    Meta("level_unit", "level unit", "Thresholds", "what a density level counts"),
    Meta("density_kernel", "density kernel", "Thresholds", "the neighbourhood a level sums over"),
    Meta("floor_rule", "floor: rule", "Thresholds", "how the lowest level shown is chosen"),
    Meta("floor_fdr", "floor: FDR", "Thresholds", "the expected share of shown cells whose 3×3 neighbourhood is "
         "empty", note=True),
    Meta("fdr", "floor: FDR", "Thresholds", "the expected share of shown cells whose 3×3 neighbourhood is empty",
         note=True),
    Meta("floor_p_value_cut", "floor: p-value cut", "Thresholds", "the p-value below which a cell is above the floor"),
    Meta("floor_level", "floor", "Thresholds", "the lowest density level shown", unit="points", panel=True),
    Meta("floor_guarantee", "floor: guarantee", "Thresholds", "what the floor guarantees"),
    Meta("n_floor_cells", "cells above the floor", "Result", "the cells above the floor"),
    Meta("noise_sd_of_level", "noise s.d. of a level", "Thresholds",
         "the standard deviation of the noise of a level (a 3×3 sum)", unit="points", column="level noise s.d."),
    Meta("noise_sd_of_cell", "noise s.d. of a cell", "Thresholds",
         "the standard deviation of one cell's noise", unit="points"),
    Meta("points_per_noise_sd", "points per noise s.d.", "Thresholds",
         "how many points one noise standard deviation is"),
    Meta("min_cluster_mass", "smallest cluster", "Thresholds",
         "the fewest noisy points a cluster must hold to be shown", unit="points"),
    Meta("min_prominence", "smallest prominence", "Thresholds",
         "how far a cluster must rise above where it joins another", unit="points"),
    Meta("gamma_all_levels", "Γ (every level at once)", "Thresholds",
         "every level is within this of its true value (probability ≥ 1 − β)", unit="points", column="Γ every level"),
    Meta("gamma_beta", "β of Γ (every level)", "Thresholds", "the β of Γ over every level"),
    Meta("levels_guarantee", "levels: guarantee", "Thresholds", "what the levels guarantee"),
    Meta("n_thresholds", "density levels tried", "Result", "the density levels tried"),
    Meta("n_levels", "levels (tree)", "Result", "the levels of the tree of clusters"),
    Meta("selection", "cluster selection", "Result", "how the clusters are chosen among the levels"),
    Meta("grow_steps", "growing steps", "Parameters", "how many cells a span may grow"),
    Meta("by_points", "for n points", "Auto: its choices",
         "what an auto run would do, for a few numbers of points", render="by_points"),
    # where the points are (dpgeo.mechanisms.concentration), the dip rule and the gap between clusters
    Meta("epsilon_occupancy", "ε of the occupancy histogram", "Privacy",
         "the part of ε spent on finding where the points are"),
    Meta("concentration_share", "share of the histogram's ε for the occupancy", "Privacy",
         "the share of the histogram's ε the occupancy histogram takes: 20% when the uniform grid has at most "
         "1,024 cells, 10% otherwise", render="share"),
    Meta("max_refinement", "cells at most this many times finer", "Auto: its choices",
         "how many times finer than the uniform rule's the cells may be where the points are compact"),
    Meta("fallback_refinement", "cells this many times finer where no part stands out", "Auto: its choices",
         "with few cells, where the occupancy histogram cannot tell where the points are (no block size's "
         "occupied blocks hold 80% of the noisy total), the cells are this many times finer than the uniform "
         "rule's (the uniform rule at half its points per noise s.d.)"),
    Meta("few_cells_scale", "share of √n̂ a cluster holds", "Auto: its choices",
         "a cluster holds at least this share of √n̂ noisy points (n̂ the noisy total; and at least two s.d. of a "
         "3×3 sum's noise): 0.6 when the uniform grid has at most 1,024 cells (few points, often in small "
         "groups), 1 otherwise"),
    Meta("sparse_mass_share", "share of points whose sparsest blocks set the width", "Auto: its choices",
         "the cell width follows the density of the sparsest occupied blocks holding this share of their points",
         render="share"),
    Meta("sparse_density_per_km2", "density of the sparser occupied parts", "Auto: its choices",
         "the noisy points per km² of those sparsest occupied blocks, which set the cell width"),
    Meta("uniform_cell_width_m", "uniform rule's cell width", "Auto: its choices",
         "the cell width the noisy total alone gives", unit="metres"),
    Meta("occupancy_block", "occupancy block", "Auto: its choices",
         "the block size (in uniform cells) whose occupied blocks set the area the cells are fitted to"),
    Meta("occupancy_blocks", "occupancy block sizes tried", "Auto: its choices",
         "the block sizes (in uniform cells) tried, smallest first"),
    Meta("occupancy_fdr", "occupancy: FDR", "Auto: its choices",
         "the false-discovery rate at which a block is found occupied"),
    Meta("occupied_area_m2", "occupied area", "Auto: its choices", "the area of the occupied blocks (m²)"),
    Meta("occupied_mass", "points in occupied blocks", "Auto: its choices",
         "the noisy points the occupied blocks hold", unit="points"),
    Meta("occupied_mass_share", "least share of points in occupied blocks", "Auto: its choices",
         "the share of the noisy total the occupied blocks must hold for the cells to follow them"),
    Meta("occupied_share_of_area", "occupied share of the study area", "Auto: its choices",
         "the occupied blocks' share of the study area"),
    Meta("max_occupied_area_share", "largest occupied share", "Auto: its choices",
         "the largest share of the study area the occupied blocks may cover for the cells to follow them"),
    Meta("min_dip_ratio", "dip rule: share", "Thresholds",
         "a branch counts only if its peak rises this share above the level where it joins its sibling "
         "(0.25: a peak 1.25 times that level)"),
    Meta("min_dip_z", "dip rule: significance", "Thresholds",
         "a branch must also rise this many noise standard deviations above its split level"),
    Meta("ridge_elongation", "ridge rule: elongation", "Thresholds",
         "a branch whose cells vary at least this many times as much along its long axis as across it (a "
         "ratio of variances: 4 is twice as long as wide), lying along that axis from its parent, "
         "is a piece of a ridge (a road, a trail)"),
    Meta("ridge_alignment", "ridge rule: alignment", "Thresholds",
         "... lying along: the cosine of the angle between its long axis and the way from its parent's centre "
         "to its own is at least this"),
    Meta("ridge_dip_ratio", "ridge rule: share", "Thresholds",
         "a piece of a ridge counts only if its peak, less its noise, rises this share above the level where "
         "it joins its sibling, plus that level's noise (1: the ridge's density falls to half)"),
    Meta("ridge_min_length_cells", "ridge rule: shortest ridge", "Thresholds",
         "a branch shorter than this (its long axis, in cells) is no ridge, whatever its shape (0: any length)"),
    Meta("ridge_blob_elongation", "ridge rule: round blobs", "Thresholds",
         "a long thin branch that splits into branches less elongated than this (a ratio of variances), each "
         "significant by the dip rule, is a row of round blobs, not a ridge, and held to the dip rule"),
    Meta("ridge_dip_z", "ridge rule: significance", "Thresholds",
         "the standard deviations of the peak and of the split level (noise and Poisson variation) taken off "
         "and added by the ridge rule"),
    Meta("parts_rule", "parts", "Result", "why a cluster can be several polygons, and the gap between clusters"),
    Meta("too_small", "too small", "Result", "why the map has no cluster", note=True, panel=True),
    Meta("levels_layer", "levels layer", "Result", "whether the release carries the tree of levels",
         unit="yes/no"),
)

#: What only a preview adds: auto's choices for one number of points, one column each in a table of previews.
PREVIEW_OUTPUTS = (
    Meta("n_points", "points (auto)", "Auto: its choices",
         "the number of points the auto outputs are for", column="points"),
    Meta("smallest_cluster_points", "smallest cluster (auto)", "Auto: its choices",
         "the fewest points a cluster can hold and still be shown", unit="points", column="smallest cluster"),
    Meta("lowest_level_min", "lowest level from (auto)", "Auto: its choices",
         "the lowest level shown is at least this (noisy points in 3×3 cells; a map with points everywhere)",
         unit="points", column="lowest level from"),
    Meta("lowest_level_max", "lowest level to (auto)", "Auto: its choices",
         "the lowest level shown is at most this (a map with one place of points)",
         unit="points", column="lowest level to"),
)


class SpansMechanism(Mechanism):
    """DP-DBSCAN spans (Qiu & Yi, Algorithm 1): noisy neighbourhood sums on a grid, core cells, spans."""

    name = "dp-dbscan-spans"
    entry_point = "dbscan_spans"
    command = "spans"
    qgis_id = "dbscanspans"
    title = "DP-DBSCAN cluster spans"
    layer_name = "DP-DBSCAN cluster spans"
    summary = "ε-DP DBSCAN cluster spans (Qiu & Yi)"
    description = ("ε-differentially private DBSCAN cluster spans (Qiu & Yi): polygons where clusters of points "
                   "certainly are — the grid cells that span each cluster — each with a noisy point count "
                   "(dp_count) and its 95% interval.")
    keywords = ("differential privacy", "DBSCAN", "clusters", "hot spots")
    params = SPANS_PARAMS
    # without a radius (auto), the flat map adds each cluster's level
    fields = CLUSTER_FIELDS + tuple(Field(name, "int", text) for name, text in LEVEL_FIELDS.items()) + (
        Field("parts", "int", "without a radius (auto): the polygons of the cluster's outline (more than 1 where its "
                              "cells meet only at a corner or the study area's edge cuts them)"),)
    outputs = SPANS_OUTPUTS
    read_share = 0.4
    examples = """\
examples:
  # police stops in Minneapolis, public study area from a polygon file
  dpgeo spans stops.gpkg -o spans.gpkg --epsilon 1 --radius 200 --min-points 30 \\
      --domain minneapolis_study_area.geojson

  # CSV with lon/lat columns, study area as a lon/lat bbox, GeoJSON out
  dpgeo spans crashes.csv -o spans.geojson --epsilon 0.5 --radius 100 --min-points 50 \\
      --domain=-74.26,40.49,-73.69,40.92

  # preview the noise (spends no budget, reads no data)
  dpgeo preview --epsilon 1 --radius 100 --min-points 30 --domain=-93.33,44.89,-93.19,45.06
"""

    cell_option = "radius_m (with eta)"

    def chooses_grid(self, p):
        return is_auto(p)  # without a radius the cell width comes from a noisy total

    def method_name(self, p):
        return "dbscan_spans"

    def steps(self, p):
        """The steps of a run with parameters ``p``: with a radius and MinPts (Qiu & Yi), or without (auto)."""
        return AUTO_SPANS if is_auto(p) else FIXED_SPANS

    def ledger_name(self, p):
        return self.steps(p).ledger_name or self.name

    def cell_width(self, area, p):
        return self.steps(p).cell_width(area, p)

    def cost(self, area, p, c):
        from ..costs import clusters_cost

        return clusters_cost(area, self.cell_width(area, p), layers=2 if p.get("levels") else 1)

    def mechanism_title(self, p):
        return self.steps(p).title

    def check(self, p):
        check_auto(p, self.params)

    def check_run(self, p, epsilon, c):
        self.steps(p).check_run(p, epsilon, c)
        noise_rate(epsilon, c.sensitivity)  # the exact sampler's range, refused here rather than after reading

    def grid(self, area, p, c, max_memory_bytes=None):
        return self.steps(p).grid(area, p, c, max_memory_bytes)

    def linear_in_contribution(self, grid, p, c):
        # one histogram with discrete Laplace noise of decay exp(-ε/s), dense or sparse: one point moves one
        # cell by one, a loss of ε/s; the spans are post-processing (§4)
        return True

    def setup(self, grid, p, c):
        """All public quantities of a DP-DBSCAN run on ``grid`` (no data involved)."""
        return self.steps(p).setup(grid, p, c)

    def run(self, counts, p, c, setup, rng, progress):
        return self.steps(p).run(counts, p, c, setup, rng, progress)

    def preview(self, area, p, c):
        return self.steps(p).preview(area, p, c)


class FixedSpans:
    """The steps of DP-DBSCAN spans with a radius and MinPts (Qiu & Yi, Algorithm 1)."""

    ledger_name = None  # the declaration's name
    title = "DP-DBSCAN spans (Qiu & Yi, Algorithm 1)"

    @staticmethod
    def cell_width(area, p):
        return cell_width_for_radius(p.radius_m, p.eta)

    @staticmethod
    def check_run(p, epsilon, c):
        pass

    @staticmethod
    def grid(area, p, c, max_memory_bytes=None):
        cell_m = cell_width_for_radius(p.radius_m, p.eta)
        check_plan(plan_run(area, cell_m, mechanism="dbscan", epsilon=p.epsilon, sensitivity=c.sensitivity,
                            kappa=len(neighbourhood_offsets(p.eta)), histogram=p.histogram,
                            max_dense_cells=p.max_dense_cells, max_false_cells=p.max_false_cells),
                   max_memory_bytes, cell_option="radius (or eta)")
        return Grid(area, cell_m)

    @staticmethod
    def setup(grid, p, c):
        return _dbscan_setup(grid, epsilon=p.epsilon, radius_m=p.radius_m, min_points=p.min_points, beta=p.beta,
                             eta=p.eta, histogram=p.histogram, gamma=p.gamma, sensitivity=c.sensitivity,
                             max_dense_cells=p.max_dense_cells, max_false_cells=p.max_false_cells, extent=p.extent)

    @staticmethod
    def run(counts, p, c, setup, rng, progress):
        kind, q, theta, bound, extent_bound, params = setup
        grid = counts.grid
        _progress(progress, 0.4, f"noisy {kind} histogram over {grid.n_cells:,} cells")
        hist = _release_histogram(counts, kind=kind, epsilon=p.epsilon, sensitivity=c.sensitivity, theta=theta,
                                  rng=rng)
        _progress(progress, 0.6, "core cells and spans")
        spans = dbscan_cells(hist, min_points=p.min_points, eta=p.eta, bound=bound, extent_bound=extent_bound)
        _progress(progress, 0.8, f"polygons for {spans.n_clusters} spans")
        layer = cluster_polygons(grid, spans.cell_id, spans.label, spans.count, q=q, theta=theta)
        md = dict(params)
        md["grid"] = grid.to_metadata()
        md["n_clusters"] = spans.n_clusters
        md["n_span_cells"] = int(spans.cell_id.size)
        md["n_core_cells"] = spans.n_core_cells
        md["dp_count_interval"] = "95%: sum of released cell counts ± noise quantile, clipped at 0"
        return Outcome(layer, md, spans)

    @classmethod
    def preview(cls, area, p, c):
        grid = cls.grid(area, p, c, p.get("max_memory_bytes"))
        kind, q, theta, bound, _, params = cls.setup(grid, p, c)
        params["count_error_95"] = sum_interval_halfwidth(1, q, 0.95)
        params["count_sd"] = math.sqrt(2 * q) / (1 - q)
        params["working_crs"] = _crs_label(area.crs)
        params["spends_budget"] = False
        return params


class AutoSpans:
    """The steps of DP-DBSCAN spans without a radius (auto: density levels of one histogram;
    :mod:`dpgeo.declarations.spans_auto`)."""

    ledger_name = "dp-dbscan-spans-auto"
    title = AUTO_MECHANISM
    cell_width = staticmethod(auto_cell_width)
    grid = staticmethod(auto_grid)
    setup = staticmethod(auto_setup)
    run = staticmethod(auto_run)
    preview = staticmethod(auto_preview)

    @staticmethod
    def check_run(p, epsilon, c):
        if epsilon is not None:
            auto_budget_checked(epsilon, c.sensitivity)


FIXED_SPANS, AUTO_SPANS = FixedSpans(), AutoSpans()


def _dbscan_setup(grid, *, epsilon, radius_m, min_points, beta, eta, histogram, gamma, sensitivity,
                  max_dense_cells, max_false_cells, extent="grown"):
    """All public quantities of a DP-DBSCAN run on ``grid`` (no data involved)."""
    kappa = len(neighbourhood_offsets(eta))
    kind = choose_histogram(grid, histogram, max_dense_cells=max_dense_cells)
    noise_rate(epsilon, sensitivity)  # the exact sampler's range, refused here rather than after the data is read
    q = discrete_laplace_q(epsilon, sensitivity)
    theta = sparse_threshold(grid.n_cells, q, max_false_cells) if kind == "sparse" else None
    bound = noise_bound(kappa=kappa, n_cells=grid.n_cells, q=q, epsilon_eff=epsilon / sensitivity,
                        beta=beta, theta=theta, method=gamma)
    # grown spans reach the cells certified by the tightest bound at the same β
    extent_bound = None
    if extent == "grown":
        extent_bound = noise_bound(kappa=kappa, n_cells=grid.n_cells, q=q, epsilon_eff=epsilon / sensitivity,
                                   beta=beta, theta=theta, method="exact")
    params = {
        "epsilon": epsilon,
        "beta": beta,
        "radius_m": radius_m,
        "min_points": min_points,
        "min_points_prime": min_points + bound.gamma + bound.gamma_low,
        "core_threshold": min_points + bound.gamma,
        "gamma": bound.gamma,
        "gamma_low": bound.gamma_low,
        "gamma_method": gamma,
        "gamma_laplace": bound.gamma_laplace,
        "extent": extent,
        "extent_threshold": min_points + (extent_bound or bound).gamma,
        "kappa": kappa,
        "eta": eta,
        "cell_width_m": grid.cell_m,
        "n_cells": grid.n_cells,
        "histogram": kind,
        "theta": theta,
        "noise": "discrete Laplace (two-sided geometric)",
        "noise_q": q,
    }
    return kind, q, theta, bound, extent_bound, params


def _release_histogram(counts, *, kind, epsilon, sensitivity, theta, rng):
    """The ε-DP histogram of ``counts`` (dense, or sparse with threshold ``theta``)."""
    if kind == "dense":
        return dense_histogram(counts.grid, counts.cell_id, counts.count, epsilon=epsilon, sensitivity=sensitivity,
                               rng=rng)
    return sparse_histogram(counts.grid, counts.cell_id, counts.count, epsilon=epsilon, sensitivity=sensitivity,
                            theta=theta, rng=rng)


class PreviewMechanism(SpansMechanism):
    """What a DP-DBSCAN run would look like, from public parameters alone: reads no data, spends nothing."""

    name = "noise-preview"
    entry_point = "noise_preview"
    command = "preview"
    qgis_id = "noisepreview"
    title = "Noise preview for DP-DBSCAN (spends no budget)"
    summary = "noise preview for DP-DBSCAN from parameters alone (no data, no budget)"
    description = ("Γ, MinPts′, the thresholds and the count error a DP-DBSCAN release with these parameters "
                   "would have on the public study area; without a radius and MinPts, what an auto run would do "
                   "(its cell width, the smallest cluster it can show and the range of its lowest level, for a "
                   "number of points). Reads no data and spends no budget.")
    keywords = ("differential privacy", "DBSCAN", "noise", "preview")
    outputs = SPANS_OUTPUTS + PREVIEW_OUTPUTS
    reads = None

    def table_rows(self, preview):
        """Auto's choices, one row per number of points, the lowest level's range as two numbers."""
        out = []
        for r in preview.get("by_points") or []:
            r = dict(r)
            lo_hi = r.pop("floor_level_range", None)
            if isinstance(lo_hi, (list, tuple)) and len(lo_hi) == 2:
                r["lowest_level_min"], r["lowest_level_max"] = lo_hi
            out.append(r)
        return out
    examples = ""
    params = SPANS_PARAMS + (
        Param("n_points", "integer", "Number of points (auto)",
              "Without a radius: the number of points to show auto's choices for (a run uses its noisy total); "
              "default 1,000 to 10 million.",
              default=None, unit="points", minimum=1, maximum=10 ** 12, advanced=True),
    )

    def cost(self, area, p, c):
        from ..costs import preview_cost

        return preview_cost(area, self.cell_width(area, p))


#: The declarations (one instance each; the registry lists them).
SPANS = SpansMechanism()
PREVIEW = PreviewMechanism()


@entry_point(SPANS)
def dbscan_spans(
    points,
    *,
    epsilon: float,
    radius_m: float | None = None,
    min_points: int | None = None,
    beta: float = DEFAULT_BETA,
    eta: float = 1.0,
    histogram: str = "auto",
    gamma: str = "laplace",
    extent: str = "grown",
    fdr: float | None = None,
    levels: bool = False,
    max_dense_cells: int = DEFAULT_MAX_DENSE_CELLS,
    max_false_cells: int = DEFAULT_MAX_FALSE_CELLS,
    **common,
) -> Release:
    """ε-differentially private DBSCAN cluster spans as a polygon layer.

    Implements Qiu & Yi's DP-DBSCAN (Algorithm 1) with the linear-time sparse
    histogram (Algorithm 2) for large grids and the tighter noise bound of
    §7, in metres over a public study area. A cell ``X`` is core when its noisy
    neighbourhood sum reaches ``MinPts + Γ``, where Γ bounds the noise of every
    cell's sum at once with probability ``1 − β``; with ``extent="grown"`` the
    spans are then grown, never merged, into the cells certified by the exact
    bound.

    Examples
    --------
    >>> import numpy as np, dpgeo
    >>> rng = np.random.default_rng(0)
    >>> x = np.r_[rng.normal(500, 30, 3000), rng.uniform(0, 2000, 500)]
    >>> y = np.r_[rng.normal(500, 30, 3000), rng.uniform(0, 2000, 500)]
    >>> res = dpgeo.dbscan_spans((x, y, "EPSG:32615"), epsilon=1.0, radius_m=50, min_points=20,
    ...                          domain=(0, 0, 2000, 2000), domain_crs="EPSG:32615", seed=1)
    >>> len(res.layer), res.metadata["kappa"], res.metadata["differentially_private"]
    (1, 21, False)

    Without ``radius_m`` and ``min_points`` (auto; the release also has ``levels``, the tree of clusters):

    >>> res = dpgeo.dbscan_spans((x, y, "EPSG:32615"), epsilon=1.0, domain=(0, 0, 2000, 2000),
    ...                          domain_crs="EPSG:32615", seed=1)
    >>> len(res.layer), res.metadata["auto"], list(res.levels.columns[:3])
    (1, True, ['level_id', 'parent_id', 'level'])
    """
    return run_release(SPANS, points, {**locals(), **common})


@entry_point(PREVIEW, returns="dict\n    ``kappa``, ``n_cells``, ``cell_width_m``, ``histogram``, ``theta``, ``gamma``, "
             "``gamma_low``,\n    ``min_points_prime``, ``core_threshold``, ``count_error_95`` (half-width of the 95%\n"
             "    interval of one cell's count), ``count_sd`` (standard deviation of one cell's noise), ...")
def noise_preview(
    *,
    epsilon: float,
    radius_m: float | None = None,
    min_points: int | None = None,
    domain,
    domain_crs=None,
    crs=None,
    beta: float = DEFAULT_BETA,
    eta: float = 1.0,
    histogram: str = "auto",
    gamma: str = "laplace",
    extent: str = "grown",
    fdr: float | None = None,
    levels: bool = False,
    sensitivity: int = 1,
    max_dense_cells: int = DEFAULT_MAX_DENSE_CELLS,
    max_false_cells: int = DEFAULT_MAX_FALSE_CELLS,
    n_points: int | None = None,
    max_memory_bytes=None,
) -> dict:
    """What a DP-DBSCAN run would look like, from public parameters alone (spends no budget).

    Returns Γ, MinPts′ and the expected count error for the given ε, so a
    budget can be chosen before any data is touched.

    Examples
    --------
    >>> p = noise_preview(epsilon=1.0, radius_m=100, min_points=30, domain=(-93.33, 44.89, -93.19, 45.05))
    >>> p["kappa"], p["count_error_95"]
    (21, 3)
    """
    return run_preview(PREVIEW, locals())

