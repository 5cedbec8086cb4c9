"""DP WaveCluster (PrivTHR, PrivTHR_EM, PrivQT, the baseline, the exact reference), declared once
(:class:`WaveClusterMechanism`) and run through the one pipeline."""

from __future__ import annotations

import numpy as np

from ..counting import CellCounts
from ..declare import Mechanism, Meta, Outcome, Param
from ..errors import ParameterError
from ..grid import Grid
from ..mechanisms.wavecluster._checks import _DEFAULT_SPLIT
from ..noise import RATE_MAX, NoiseSource
from ..polygons import cluster_polygons
from ..release import Release
from ..resources import check_plan, grid_shape, plan_run
from ..pipeline._common import _progress, check_int, check_positive
from ..generators.docs import entry_point
from .spans import CLUSTER_FIELDS
from ..pipeline.run import run_release

__all__ = ["wavecluster", "WAVECLUSTER", "WaveClusterMechanism"]

WAVECLUSTER_METHODS = ("privthr", "privthr-em", "privqt", "baseline", "exact")
#: Largest grid (cells) WaveCluster works on; the wavelet transform is dense.
MAX_WAVECLUSTER_CELLS = 1 << 26

_WC_NAMES = {"privthr": "PrivTHR", "privthr-em": "PrivTHR_EM", "privqt": "PrivQT",
             "baseline": "Baseline: DP synthetic points from adaptive grids", "exact": "exact, not private"}

WAVECLUSTER_PARAMS = (
    Param("method", "choice", "Method",
          f"privthr: noisy counts and a noisy count of the non-positive coefficients (ε split "
          f"{_DEFAULT_SPLIT['privthr']:g}/{1 - _DEFAULT_SPLIT['privthr']:.2g}); privthr-em: the threshold by the "
          f"exponential mechanism ({_DEFAULT_SPLIT['privthr-em']:g}/{1 - _DEFAULT_SPLIT['privthr-em']:.2g}); "
          "privqt: noisy counts only; "
          "baseline: WaveCluster on DP synthetic points from adaptive grids (reads the input three more times); "
          "exact: no noise, NOT private, for comparison only.",
          default="privthr", choices=WAVECLUSTER_METHODS,
          labels=("PrivTHR (noisy grid, threshold)",
                  "PrivTHR_EM (threshold chosen with the exponential mechanism)",
                  "PrivQT (noise on the grid counts only)",
                  "Baseline (WaveCluster on DP synthetic points from adaptive grids)",
                  "exact (no noise — NOT private, for comparison only)"),
          service_choices=("privthr", "privthr-em", "privqt")),
    Param("cell_m", "number", "Cell size", "Cell width; give this or the grid size.", unit="metres",
          default=None, minimum=0, exclusive_minimum=True, maximum=1_000_000, flag="--cell",
          qgis_name="CELL_SIZE", label="cell_m (cell width)"),
    Param("grid_size", "integer", "Grid size", "Cells along the longer side of the study area; give this or the "
          "cell size.", unit="cells", default=None, minimum=2, maximum=16384, flag="--grid",
          label="grid_size (cells per side)"),
    Param("percentile", "number", "Percentile p",
          "Share p (in %) of the positive wavelet coefficients that are not significant (the density threshold).",
          unit="%", default=60.0, minimum=0, maximum=100, exclusive_maximum=True),
    Param("wavelet", "choice", "Wavelet", "The wavelet of the transform.", default="haar",
          choices=("haar", "bior2.2", "bior1.3", "db2"), advanced=True),
    Param("mode", "text", "Signal extension", "Signal extension at the grid's edges; modes that wrap around are "
          "refused.", default="zero", fronts=frozenset({"api"})),
    Param("count_split", "number", "Share of ε for the counts",
          "Share of ε for the noisy counts (default 0.9 for privthr, 0.7 for privthr-em).",
          default=None, minimum=0, maximum=1, exclusive_minimum=True, exclusive_maximum=True, advanced=True,
          label="count_split (share of epsilon for the counts)"),
    Param("count_cap", "number", "Public cap on points per cell",
          "privthr-em: a public cap on the points of one cell (the exponential mechanism's candidates).",
          default=None, minimum=0, exclusive_minimum=True, advanced=True, fronts=frozenset({"api", "cli"})),
    Param("n_public", "integer", "Public number of points",
          "baseline: the publicly known number of points (else it is released with 5% of ε).",
          default=None, minimum=1, advanced=True, fronts=frozenset({"api", "cli"}),
          label="n_public (public number of points)"),
    Param("k_rule", "choice", "Estimate of the number of significant coefficients",
          "privthr: how the number of significant coefficients is estimated.", default="direct",
          choices=("direct", "prune", "prune-half"), advanced=True),
)


def check_wavecluster_params(*, method, percentile, wavelet, mode, count_split, count_cap, n_public, k_rule):
    """Every WaveCluster parameter that the mechanism checks, checked before any data is read."""
    from ..mechanisms.wavecluster._checks import (
        _K_RULES,
        _check_epsilon,
        _check_n_public,
        _check_percentile,
        _check_split,
    )
    from ..mechanisms.wavecluster.transform import _check_mode, _filter

    _filter(wavelet)
    _check_mode(mode)
    _check_percentile(percentile)
    if k_rule not in _K_RULES:
        raise ParameterError(f"k_rule must be one of {', '.join(_K_RULES)}; got {k_rule!r}")
    if count_cap is not None:
        _check_epsilon(count_cap, "count_cap")
    if n_public is not None:
        _check_n_public(n_public)
    if method in ("privthr", "privthr-em"):
        _check_split(count_split, method)


def _wavecluster_grid(area, cell_m, grid_size, epsilon=None, sensitivity=1, max_memory_bytes=None):
    cell_m = wavecluster_cell_width(area, cell_m, grid_size, epsilon, sensitivity, max_memory_bytes)
    grid = Grid(area, cell_m)
    if grid.nx * grid.ny > MAX_WAVECLUSTER_CELLS:
        raise ParameterError(
            f"a {grid.nx} x {grid.ny} grid is too large for WaveCluster (at most {MAX_WAVECLUSTER_CELLS:,} "
            "cells); use a larger cell or a smaller study area"
        )
    return grid


def wavecluster_cell_width(area, cell_m, grid_size, epsilon=None, sensitivity=1, max_memory_bytes=None) -> float:
    """The checked cell width of a WaveCluster run (metres), its grid size and memory planned; builds no grid."""
    if (cell_m is None) == (grid_size is None):
        raise ParameterError("give exactly one of cell_m (cell width in metres, --cell) or grid_size "
                             "(cells per side of the study area, --grid)")
    if grid_size is not None:
        grid_size = check_int(grid_size, "grid_size (cells per side)", minimum=2)
        b = area.polygon.bounds
        cell_m = max(b[2] - b[0], b[3] - b[1]) / grid_size
    cell_m = check_positive(cell_m, "cell_m (cell width)", " (metres)")
    nx, ny = grid_shape(area.polygon.bounds, cell_m)
    if nx * ny > MAX_WAVECLUSTER_CELLS:
        raise ParameterError(
            f"a {nx:,} x {ny:,} grid is too large for WaveCluster (at most {MAX_WAVECLUSTER_CELLS:,} "
            "cells); use a larger cell or a smaller study area"
        )
    check_plan(plan_run(area, cell_m, mechanism="wavecluster", epsilon=epsilon, sensitivity=sensitivity),
               max_memory_bytes, cell_option="cell (--cell) or fewer cells (--grid)")
    return cell_m


def wavecluster_count_epsilon(method, epsilon, count_split):
    """The ε of WaveCluster's noisy counts (None for the exact method), for the run's plan."""
    if method == "exact" or epsilon is None:
        return None
    return epsilon * (count_split if count_split is not None else _DEFAULT_SPLIT.get(method, 1.0))


def _near_the_samplers_limit(epsilon, sensitivity, count_split) -> bool:
    """Whether some part of ε, over its sensitivity, may fall outside the exact sampler's range (public inputs).

    The parts and their sensitivities (wavelet ones included) are worked out
    inside each method; far from the range's ends no part can leave it.
    """
    share = 0.1 if count_split is None else min(count_split, 1.0 - count_split, 0.1)
    rate = epsilon * share / sensitivity
    return rate < 1e-6 or epsilon / sensitivity > float(RATE_MAX) / 2  # no part's rate exceeds ε/Δ


def rehearse_wavecluster(grid, *, method, epsilon, count_split, sensitivity, **kw):
    """Run the method once on an empty grid, before any data is read and before the charge, near the
    exact sampler's limits (tiny ε or an extreme split; elsewhere it returns at once).

    Everything a method checks about its noise (each part of ε against the
    exact sampler's range, with the sensitivities it derives from the grid's
    shape) depends on public inputs only; an empty grid brings those checks
    forward, so a run that cannot be made is refused before it reads the
    data or spends budget. The throwaway source is seeded: nothing here is
    published.
    """
    if method == "exact" or not _near_the_samplers_limit(epsilon, sensitivity, count_split):
        return
    if not isinstance(grid, Grid):  # a study area: the run's grid on it
        grid = _wavecluster_grid(grid, kw.pop("cell_m", None), kw.pop("grid_size", None))
    empty = CellCounts(grid=grid, cell_id=np.zeros(0, np.int64), count=np.zeros(0, np.int64),
                       recount=lambda binning, n_bins: np.zeros(n_bins, np.int64))
    _wavecluster_mechanism(empty, source=NoiseSource(0), method=method, epsilon=epsilon, count_split=count_split,
                           sensitivity=sensitivity, **kw)


def _wavecluster_mechanism(counts: CellCounts, *, method, epsilon, percentile, wavelet, mode, count_split,
                           count_cap, n_public, k_rule, sensitivity, source):
    """Run one WaveCluster method on the counts (the baseline recounts the same points on its own grids)."""
    from ..mechanisms.wavecluster import wavecluster_baseline, wavecluster_cells

    grid = counts.grid
    if method == "baseline":
        return wavecluster_baseline(None, None, bounds=grid.bounds, shape=(grid.ny, grid.nx), epsilon=epsilon,
                                    percentile=percentile, wavelet=wavelet, mode=mode, n_public=n_public,
                                    sensitivity=sensitivity, rng=source, count_on=counts.recount)
    dense = counts.dense()
    res = wavecluster_cells(dense, method=method, epsilon=epsilon, percentile=percentile, wavelet=wavelet,
                            mode=mode, count_split=count_split, count_cap=count_cap, n_public=n_public,
                            sensitivity=sensitivity, universe=grid.universe_mask(), k_rule=k_rule, rng=source)
    if method == "exact":
        res.noisy_counts = dense  # the true counts: the output is not private anyway
    return res


#: What a DP WaveCluster release publishes besides the common fields (dpgeo.metadata_fields).
WAVECLUSTER_OUTPUTS = (
    Meta("wavelet", "wavelet", "Parameters", "the wavelet of the transform", panel=True),
    Meta("mode", "boundary mode", "Parameters", "how the transform treats the grid's edge"),
    Meta("level", "wavelet level", "Parameters", "the level of the wavelet approximation"),
    Meta("percentile", "percentile p", "Parameters",
         "the percentile of the coefficients the threshold aims at", unit="%", panel=True),
    Meta("connectivity", "connectivity", "Parameters",
         "the neighbours that join cells into one cluster", unit="neighbours"),
    Meta("count_split", "share of ε for counts", "Parameters", "the share of ε spent on the cell counts"),
    Meta("count_cap", "count cap", "Parameters",
         "the cap on a cell's count in the exponential mechanism", unit="points"),
    Meta("k_rule", "k rule", "Parameters", "how k, the coefficients to keep, is chosen"),
    Meta("prune_fraction", "pruned fraction", "Parameters", "the share of coefficients pruned"),
    Meta("sensitivity", "sensitivity of the counts", "Privacy", "the sensitivity of the cell counts", unit="points"),
    Meta("sensitivities", "sensitivities", "Privacy", "the sensitivity of each noisy step", render="share"),
    Meta("grid_shape", "grid (rows × columns)", "Study area and grid", "the grid's rows and columns", render="shape"),
    Meta("cell_offset", "cell offset", "Study area and grid", "the grid's offset, in cells"),
    Meta("synthetic", "synthetic counts", "Study area and grid", "how the baseline's synthetic counts were made"),
    Meta("threshold", "threshold", "Thresholds", "the private significance threshold of the coefficients", panel=True),
    Meta("threshold_rule", "threshold rule", "Thresholds",
         "how a coefficient compares with the threshold", template="coefficient {} threshold"),
    Meta("threshold_units", "threshold units", "Thresholds", "what the threshold is measured in"),
    Meta("noisy_nonpositive_count", "noisy count of non-positive coefficients", "Thresholds",
         "the noisy count of coefficients ≤ 0"),
    Meta("n_positive_noisy", "positive noisy coefficients", "Thresholds", "the noisy coefficients > 0"),
    Meta("k_target", "k (coefficients to keep)", "Thresholds", "the coefficients the threshold should keep"),
    Meta("candidate_max", "largest candidate threshold", "Thresholds",
         "the largest threshold the exponential mechanism may choose"),
    Meta("n_candidates", "candidate thresholds", "Thresholds", "the thresholds the exponential mechanism chose from"),
    Meta("n_significant", "significant coefficients", "Result", "the coefficients above the threshold"),
    Meta("k_prime", "k′", "Result", "the coefficients kept"),
    Meta("n_coefficients", "coefficients", "Result", "the coefficients of the approximation"),
)


class WaveClusterMechanism(Mechanism):
    """DP WaveCluster (Chen, Yu & Chirkova): noisy counts → wavelet approximation → private threshold → clusters."""

    name = "dp-wavecluster"
    entry_point = "wavecluster"
    command = "wavecluster"
    qgis_id = "wavecluster"
    title = "DP WaveCluster"
    layer_name = "DP WaveCluster clusters"
    summary = "ε-DP WaveCluster hot-cell clusters (Chen, Yu & Chirkova)"
    description = ("ε-differentially private WaveCluster (Chen, Yu & Chirkova): noisy grid counts, a level-1 "
                   "wavelet approximation, a private significance threshold and 8-connected clusters, as "
                   "polygons with a noisy count (dp_count). Give exactly one of the cell size and the grid size.")
    keywords = ("differential privacy", "WaveCluster", "wavelets", "clusters")
    params = WAVECLUSTER_PARAMS
    exactly_one = (("cell_m", "grid_size"),)
    epsilon_required = False
    fields = CLUSTER_FIELDS
    outputs = WAVECLUSTER_OUTPUTS
    read_share = 0.5
    examples = """\
examples:
  dpgeo wavecluster stops.gpkg -o hot.gpkg --method privthr --epsilon 1 --cell 200 \\
      --domain minneapolis_study_area.geojson
  dpgeo wavecluster stops.gpkg -o hot.geojson --method privthr-em --epsilon 1 --grid 128 \\
      --percentile 60 --domain=-93.33,44.89,-93.19,45.06
"""

    cell_option = "cell_m or grid_size"

    def cell_width(self, area, p):
        if p.grid_size is not None:
            b = area.polygon.bounds
            return max(b[2] - b[0], b[3] - b[1]) / p.grid_size
        return p.cell_m

    def cost(self, area, p, c):
        from ..costs import clusters_cost

        return clusters_cost(area, self.cell_width(area, p), cell_bytes=96)  # the wavelet's sub-bands too

    def short_title(self, p):
        return f"DP WaveCluster ({p.method})"

    def needs_epsilon(self, p):
        return p.method != "exact"

    def missing_epsilon(self, p):
        return ParameterError(f"method {p.method!r} needs epsilon (the privacy budget)")

    def is_private(self, p):
        return p.method != "exact"

    def ledger_name(self, p):
        return f"dp-wavecluster-{p.method}"

    def method_name(self, p):
        return p.method

    def mechanism_title(self, p):
        return f"DP WaveCluster ({_WC_NAMES[p.method]})"

    def check(self, p):
        check_wavecluster_params(method=p.method, percentile=p.percentile, wavelet=p.wavelet, mode=p.mode,
                                 count_split=p.count_split, count_cap=p.count_cap, n_public=p.n_public,
                                 k_rule=p.k_rule)

    def grid(self, area, p, c, max_memory_bytes=None):
        return _wavecluster_grid(area, p.cell_m, p.grid_size, wavecluster_count_epsilon(p.method, p.epsilon,
                                 p.count_split), c.sensitivity, max_memory_bytes)

    def setup(self, grid, p, c):
        rehearse_wavecluster(grid, method=p.method, epsilon=p.epsilon, percentile=p.percentile, wavelet=p.wavelet,
                             mode=p.mode, count_split=p.count_split, count_cap=p.count_cap, n_public=p.n_public,
                             k_rule=p.k_rule, sensitivity=c.sensitivity)
        return {}

    def count_options(self, p):
        return {"recountable": p.method == "baseline"}

    def linear_in_contribution(self, grid, p, c):
        """The counts' sensitivity is s; |Z|′ and the exponential mechanism's quality have sensitivities that
        are s times one point's until they saturate at the number of coefficients, or round up (§5.5): then
        one point costs more than ε/s, and a one-pass person series is refused."""
        if p.method in ("exact", "privqt", "baseline"):
            return True
        from ..mechanisms.wavecluster import approximation_sensitivity

        kw = dict(wavelet=p.wavelet, mode=p.mode, percentile=p.percentile)
        one = approximation_sensitivity((grid.ny, grid.nx), sensitivity=1, **kw)
        many = approximation_sensitivity((grid.ny, grid.nx), sensitivity=c.sensitivity, **kw)
        keys = ("nonpositive_count",) if p.method == "privthr" else ("em_quality",)
        return all(many[k] == c.sensitivity * one[k] for k in keys)

    def run(self, counts, p, c, setup, rng, progress):
        grid = counts.grid
        _progress(progress, 0.5, f"{p.method} on a {grid.nx} x {grid.ny} grid: wavelet approximation and threshold")
        res = _wavecluster_mechanism(counts, method=p.method, epsilon=p.epsilon, percentile=p.percentile,
                                     wavelet=p.wavelet, mode=p.mode, count_split=p.count_split,
                                     count_cap=p.count_cap, n_public=p.n_public, k_rule=p.k_rule,
                                     sensitivity=c.sensitivity, source=rng)
        _progress(progress, 0.8, f"polygons for {res.n_clusters} clusters")
        flat = res.labels.ravel()
        cell_id = np.flatnonzero(flat)
        label = flat[cell_id].astype(np.int64)
        count = res.noisy_counts.ravel()[cell_id].astype(np.int64)
        layer = cluster_polygons(grid, cell_id, label, count, q=None if p.method == "exact" else res.q)
        md = dict(res.report)
        reasons = md.pop("not_private_reasons", [])
        for key in ("differentially_private", "epsilon", "mechanism"):
            md.pop(key, None)
        md["percentile"] = float(p.percentile)
        md["cell_width_m"] = grid.cell_m
        md["n_cells"] = grid.n_cells
        md["grid"] = grid.to_metadata()
        md["n_clusters"] = res.n_clusters
        md["dp_count_interval"] = (
            "none: exact counts (not private)" if p.method == "exact" else
            "none: baseline counts are synthetic" if res.q is None else
            "95%: sum of released cell counts ± noise quantile, clipped at 0")
        from ..mechanisms.dbscan import SpanCells

        return Outcome(layer, md, SpanCells(grid, cell_id, label, count, res.n_clusters), list(reasons))


WAVECLUSTER = WaveClusterMechanism()


@entry_point(WAVECLUSTER)
def wavecluster(
    points,
    *,
    method: str = "privthr",
    epsilon: float | None = None,
    cell_m: float | None = None,
    grid_size: int | None = None,
    percentile: float = 60.0,
    wavelet: str = "haar",
    mode: str = "zero",
    count_split: float | None = None,
    count_cap: float | None = None,
    n_public: int | None = None,
    k_rule: str = "direct",
    **common,
) -> Release:
    """DP WaveCluster (Chen, Yu & Chirkova) as a polygon layer.

    Counts on a grid over the public study area → (noisy) counts → level-1
    wavelet approximation → significant coefficients (private threshold)
    → 8-connected components → cells → polygons. ``epsilon`` is not used by
    the exact method; the baseline counts the same points on three more
    binnings (each another counting pass; the input is never held in memory).

    Examples
    --------
    >>> import numpy as np, dpgeo
    >>> rng = np.random.default_rng(0)
    >>> x = np.r_[rng.normal(300, 40, 4000), rng.normal(1400, 60, 4000)]
    >>> y = np.r_[rng.normal(300, 40, 4000), rng.normal(1200, 60, 4000)]
    >>> res = dpgeo.wavecluster((x, y, "EPSG:32615"), method="privthr", epsilon=1.0, cell_m=50,
    ...                         domain=(0, 0, 2000, 2000), domain_crs="EPSG:32615", crs="EPSG:32615", seed=1)
    >>> len(res.layer), res.metadata["method"]
    (2, 'privthr')
    """
    return run_release(WAVECLUSTER, points, {**locals(), **common})
