"""DP-DBSCAN spans and its free noise preview, declared once (:class:`SpansMechanism`, :class:`PreviewMechanism`).

The entry points :func:`dbscan_spans` and :func:`noise_preview` run the
declarations through the one pipeline (:func:`dpgeo.pipeline.run.run_release`).
"""

from __future__ import annotations

import math

from ..declare import Field, Mechanism, Outcome, Param
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
from .spans_outputs import PREVIEW_OUTPUTS, SPANS_OUTPUTS
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

