"""DP k-means as a release, declared once (:class:`KMeansMechanism`): the Voronoi cells of private centroids,
with noisy counts.

The mechanism reads the points themselves (not cell counts): DPLloyd with
exact discrete Laplace noise (:func:`~dpgeo.mechanisms.kmeans.kmeans_layer`);
ε is split exactly into ``layer_share·ε`` for the published counts of the
cells and equal shares per Lloyd iteration (counts and coordinate sums), see
:func:`~dpgeo.mechanisms.kmeans.kmeans_plan` and ``docs/privacy.md`` §7.1.
"""

from __future__ import annotations

from ..declare import Field, Mechanism, Meta, Outcome, Param
from ..grid import Grid
from ..mechanisms.kmeans import (
    DEFAULT_ITERATIONS,
    DEFAULT_LAYER_SHARE,
    MAX_K,
    kmeans_layer,
    kmeans_plan,
)
from ..release import Release
from ..resources import check_plan, plan_run
from ..pipeline._common import _progress
from ..generators.docs import entry_point
from ..pipeline.run import run_release

__all__ = ["kmeans", "KMEANS_MECHANISM", "KMEANS", "KMeansMechanism"]

#: The mechanism's name in the ledger.
KMEANS_MECHANISM = "dp-kmeans"
#: Cells along the longer side of the (public) grid used only to test which points lie in the study area.
_MEMBERSHIP_CELLS = 256
#: Keys of the mechanism's own metadata that the pipeline states itself (for the person cap, the seed, ...).
_OWN_KEYS = ("mechanism", "method", "differentially_private", "not_private_reasons", "neighbouring_relation",
             "delta", "epsilon")

KMEANS_PARAMS = (
    Param("k", "integer", "Number of clusters k",
          "Number of clusters. Cells whose centroids coincide are merged and cells outside the study area "
          "dropped, so the layer may have fewer than k cells.",
          minimum=1, maximum=MAX_K, label="k (number of clusters)", suggested=5),
    Param("iterations", "integer", "Noisy Lloyd iterations",
          "Lloyd iterations T; each spends an equal share of the ε left after the layer's counts.",
          default=DEFAULT_ITERATIONS, minimum=1, maximum=100, advanced=True),
    Param("layer_share", "number", "Share of ε for the cells' counts",
          "Share of ε for the published counts of the Voronoi cells; the rest is spread evenly over the "
          "iterations.",
          default=DEFAULT_LAYER_SHARE, minimum=0, maximum=1, exclusive_minimum=True, exclusive_maximum=True,
          advanced=True, label="layer_share (share of epsilon for the layer's counts)"),
    Param("count_share", "number", "Share of each iteration's ε for the cluster sizes",
          "Share of each iteration's ε for the per-cluster counts (default: the rule that balances the noise of "
          "the sizes and the coordinate sums for the study area's shape, about 0.39 for a square).",
          default=None, minimum=0, maximum=1, exclusive_minimum=True, exclusive_maximum=True, advanced=True,
          label="count_share (share of each iteration's epsilon for the counts)"),
)


#: What a DP k-means release publishes besides the common fields (dpgeo.metadata_fields).
KMEANS_OUTPUTS = (
    Meta("k", "k (clusters asked)", "Parameters", "the clusters asked for", panel=True),
    Meta("iterations", "iterations", "Parameters", "the noisy Lloyd iterations", panel=True),
    Meta("count_share", "share of ε for counts", "Parameters", "the share of an iteration's ε spent on the counts"),
    Meta("layer_share", "share of ε for the layer", "Parameters", "the share of ε spent on the layer's counts"),
    Meta("initialisation", "initial centroids", "Parameters",
         "how the first centroids are placed (never from the data)"),
    Meta("lattice_m", "lattice step", "Study area and grid",
         "the step of the lattice the sums are counted on", unit="metres"),
    Meta("lattice_origin", "lattice origin", "Study area and grid", "the lattice's origin"),
    Meta("lattice_half_steps", "lattice half-width (steps)", "Study area and grid",
         "the lattice's half-width, in steps"),
    Meta("sensitivity_count", "sensitivity of a count", "Privacy",
         "the sensitivity of a cluster's count", unit="points"),
    Meta("sensitivity_sum_lattice", "sensitivity of a sum (lattice steps)", "Privacy",
         "the sensitivity of a coordinate sum, in lattice steps"),
    Meta("sensitivity_sum_m", "sensitivity of a sum", "Privacy", "the sensitivity of a coordinate sum", unit="metres"),
    Meta("noise_q_count", "noise parameter q of the counts", "Privacy", "the discrete Laplace q of the counts"),
    Meta("noise_q_sum", "noise parameter q of the sums", "Privacy", "the discrete Laplace q of the sums"),
    Meta("noise_q_layer", "noise parameter q of the layer's counts", "Privacy",
         "the discrete Laplace q of the layer's counts"),
    Meta("min_count", "smallest count kept", "Thresholds",
         "a cluster with a smaller noisy count is dropped", unit="points"),
)


class KMeansMechanism(Mechanism):
    """DP k-means (DPLloyd of Su et al., exact noise): the Voronoi cells of the private centroids."""

    name = KMEANS_MECHANISM
    entry_point = "kmeans"
    command = "kmeans"
    qgis_id = "kmeans"
    title = "DP k-means (Voronoi cells)"
    layer_name = "DP k-means Voronoi cells"
    summary = "ε-DP k-means: Voronoi cells of private centroids with noisy counts"
    description = ("ε-differentially private k-means (DPLloyd: noisy Lloyd iterations over the public study "
                   "area, exact discrete Laplace noise), released as the Voronoi cells of the private centroids "
                   "clipped to the study area, each with a noisy point count (dp_count), its 95% interval and "
                   "the centroid (centroid_x, centroid_y, working CRS).")
    keywords = ("differential privacy", "k-means", "Voronoi", "clusters")
    params = KMEANS_PARAMS
    reads = "points"
    read_share = 0.3
    outputs = KMEANS_OUTPUTS
    fields = (
        Field("cluster_id", "int", "cluster number, 1, 2, ..."),
        Field("dp_count", "int", "noisy number of points in the cell (at least 0)"),
        Field("dp_count_low", "int", "lower end of dp_count's 95% interval"),
        Field("dp_count_high", "int", "upper end of dp_count's 95% interval"),
        Field("area_m2", "float", "area of the cell (m²)"),
        Field("centroid_x", "float", "the private centroid's x (working CRS, metres)"),
        Field("centroid_y", "float", "the private centroid's y (working CRS, metres)"),
    )
    examples = """\
examples:
  # eight clusters of police stops, public study area from a polygon file
  dpgeo kmeans stops.gpkg -o kmeans.gpkg --epsilon 1 --k 8 --domain minneapolis_study_area.geojson

  # per driver (at most 5 trips each), a GeoPackage and a web map from one release
  dpgeo kmeans trips.gpkg -o kmeans.gpkg -o kmeans.html --epsilon 1 --k 6 \\
      --person driver_id --max-points-per-person 5 --dataset trips --domain=-74.26,40.49,-73.69,40.92

The budget split: --layer-share of ε (default {layer_share:g}) for the cells' counts, the rest spread evenly over the
--iterations noisy Lloyd iterations (counts and coordinate sums); the metadata states it (epsilon_split).
""".format(layer_share=DEFAULT_LAYER_SHARE)

    def method_name(self, p):
        return "kmeans"

    def short_title(self, p):
        return f"DP k-means (k = {p.k})"


    def _plan(self, bounds, p, c):
        return kmeans_plan(bounds, k=p.k, epsilon=p.epsilon, iterations=p.iterations, layer_share=p.layer_share,
                           count_share=p.count_share, sensitivity=c.sensitivity)

    def check_run(self, p, epsilon, c):
        p["epsilon"] = epsilon
        self._plan((0.0, 0.0, 1.0, 1.0), p, c)  # the parameters, whatever the study area

    def grid(self, area, p, c, max_memory_bytes=None):
        """The grid that only tells which points lie in the study area; the run's plan and memory checked."""
        self._plan(area.polygon.bounds, p, c)
        check_kmeans_plan(area, epsilon=p.epsilon, layer_share=p.layer_share, sensitivity=c.sensitivity,
                          max_memory_bytes=max_memory_bytes)
        b = area.polygon.bounds
        return Grid(area, max(b[2] - b[0], b[3] - b[1]) / _MEMBERSHIP_CELLS)

    def count_options(self, p):
        return {"keep_points": True}

    def cost(self, area, p, c):
        from ..costs import kmeans_cost

        return kmeans_cost(area, p, _MEMBERSHIP_CELLS * _MEMBERSHIP_CELLS)

    def linear_in_contribution(self, grid, p, c):
        # every noisy count has sensitivity s and every coordinate sum s times one point's clipped range
        # (§7.1): one point costs ε/s
        return True

    def run(self, counts, p, c, setup, rng, progress):
        area = counts.grid.area
        x, y = counts.points.x[counts.kept], counts.points.y[counts.kept]
        _progress(progress, 0.3, f"DP k-means: k = {p.k}, noisy Lloyd iterations")
        res = kmeans_layer(x, y, area=area, rng=rng, k=p.k, epsilon=p.epsilon, iterations=p.iterations,
                           layer_share=p.layer_share, count_share=p.count_share, sensitivity=c.sensitivity)
        _progress(progress, 0.9, f"{res.n_clusters} Voronoi cells")
        md = {key: v for key, v in res.metadata.items() if key not in _OWN_KEYS}
        return Outcome(res.layer, md, res)

    def mechanism_title(self, p):
        return "DP k-means (DPLloyd of Su et al. with discrete Laplace noise; Voronoi cells)"


KMEANS = KMeansMechanism()


def check_kmeans_plan(area, *, epsilon, layer_share=None, sensitivity=1, max_memory_bytes=None):
    """Refuse a k-means run too large for memory (its count intervals grow as 1/ε), before any data is read."""
    b = area.polygon.bounds
    check_plan(plan_run(area, max(b[2] - b[0], b[3] - b[1]) / _MEMBERSHIP_CELLS, mechanism="kmeans",
                        epsilon=epsilon * (layer_share or DEFAULT_LAYER_SHARE), sensitivity=sensitivity),
               max_memory_bytes, cell_option="study area")


@entry_point(KMEANS, returns="Release\n    ``layer``: ``cluster_id``, ``dp_count``, ``dp_count_low``, ``dp_count_high``, "
             "``area_m2``,\n    ``centroid_x``, ``centroid_y`` (working CRS, metres) and the cell's (multi)polygon.")
def kmeans(
    points,
    *,
    epsilon: float,
    k: int,
    iterations: int = DEFAULT_ITERATIONS,
    layer_share: float = DEFAULT_LAYER_SHARE,
    count_share: float | None = None,
    **common,
) -> Release:
    """ε-differentially private k-means as a map layer: Voronoi cells of the private centroids.

    DPLloyd (Su et al.) over the public study area, with exact discrete
    Laplace noise; see :mod:`dpgeo.mechanisms.kmeans` for the mechanism and
    its privacy argument. ε is split into ``layer_share·ε`` for the published
    counts of the cells and ``(1 − layer_share)·ε / iterations`` per Lloyd
    iteration (counts and coordinate sums); the split is in the metadata
    (``epsilon_split``). The lattice of the coordinate sums and the starting
    centroids come from the public study area.

    Examples
    --------
    >>> import numpy as np, dpgeo
    >>> rng = np.random.default_rng(0)
    >>> x = np.r_[rng.normal(500, 60, 4000), rng.normal(1500, 60, 4000)]
    >>> y = np.r_[rng.normal(500, 60, 4000), rng.normal(1400, 60, 4000)]
    >>> res = dpgeo.kmeans((x, y, "EPSG:32615"), epsilon=1.0, k=2, domain=(0, 0, 2000, 2000),
    ...                    domain_crs="EPSG:32615", crs="EPSG:32615", seed=1)
    >>> len(res.layer), res.metadata["method"], res.metadata["differentially_private"]
    (2, 'kmeans', False)
    >>> sorted(np.round(res.layer["centroid_x"].to_numpy(), -2).tolist())
    [500.0, 1500.0]
    """
    return run_release(KMEANS, points, {**locals(), **common})
