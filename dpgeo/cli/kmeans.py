"""``dpgeo kmeans``: DP k-means as a map layer, the Voronoi cells of private centroids with noisy counts.

The command's own options and its call of :func:`dpgeo.kmeans`; the input,
privacy, study-area and output options are those of every run command
(:mod:`dpgeo.cli`).
"""

from __future__ import annotations

__all__ = ["HELP", "DESCRIPTION", "EXAMPLES", "add_arguments", "check_arguments", "check_plan", "run"]

HELP = "ε-DP k-means: Voronoi cells of private centroids with noisy counts"

DESCRIPTION = (
    "ε-differentially private k-means (DPLloyd with exact discrete Laplace noise) over the public study area, "
    "released as the Voronoi cells of the private centroids clipped to the study area, each with a noisy "
    "point count dp_count, its 95% interval and the centroid (centroid_x, centroid_y, working CRS)."
)

EXAMPLES = """\
examples:
  # eight clusters of police stops, public study area from a polygon file
  dpgeo kmeans stops.gpkg -o kmeans.gpkg --epsilon 1 --k 8 --domain minneapolis_study_area.geojson

  # per driver (at most 5 trips each), a GeoPackage and a web map from one release
  dpgeo kmeans trips.gpkg -o kmeans.gpkg -o kmeans.html --epsilon 1 --k 6 \\
      --person driver_id --max-points-per-person 5 --dataset trips --domain=-74.26,40.49,-73.69,40.92

The budget split: --layer-share of ε (default 0.1) for the cells' counts, the rest spread evenly over the
--iterations noisy Lloyd iterations (counts and coordinate sums); the metadata states it (epsilon_split).
"""


def add_arguments(p):
    """The k-means options of ``dpgeo kmeans``."""
    g = p.add_argument_group("k-means")
    g.add_argument("--k", type=int, required=True, help="number of clusters (1 to 1000)")
    g.add_argument("--iterations", type=int, default=None, help="noisy Lloyd iterations (default 5)")
    g.add_argument("--layer-share", type=float, default=None,
                   help="share of ε for the cells' published counts, in (0, 1) (default 0.1)")
    g.add_argument("--count-share", type=float, default=None,
                   help="share of each iteration's ε for the cluster counts, in (0, 1) (default: the rule in "
                        "docs/privacy.md, about 0.39 for a square study area)")


def _options(args) -> dict:
    opts = {"iterations": args.iterations, "layer_share": args.layer_share, "count_share": args.count_share}
    return {key: v for key, v in opts.items() if v is not None}


def check_arguments(args):
    """Check every k-means parameter before anything else (no file is touched)."""
    from ..mechanisms.kmeans import kmeans_plan

    sensitivity = args.max_points_per_person if args.person is not None else args.max_points_per_record
    kmeans_plan((0.0, 0.0, 1.0, 1.0), k=args.k, epsilon=args.epsilon,
                sensitivity=sensitivity if isinstance(sensitivity, int) and sensitivity >= 1 else 1,
                **_options(args))


def check_plan(args, area):
    """The run's memory from the study area (None with --domain-from-data), before the input is opened."""
    if area is None:
        return
    from ..pipeline.kmeans import check_kmeans_plan

    sensitivity = args.max_points_per_person if args.person is not None else args.max_points_per_record
    check_kmeans_plan(area, epsilon=args.epsilon, layer_share=args.layer_share, sensitivity=sensitivity,
                      max_memory_bytes=args.max_memory)


def run(args, points, domain, progress):
    """The release of ``dpgeo kmeans`` (charged to the ledger, not yet written)."""
    from ..pipeline.kmeans import kmeans

    return kmeans(points, epsilon=args.epsilon, k=args.k, domain=domain, crs=args.crs,
                  sensitivity=args.max_points_per_record, person=args.person,
                  max_points_per_person=args.max_points_per_person, seed=args.seed, domain_from_data=args.domain_from_data,
                  unattended=args.unattended,
                  dataset=args.dataset, ledger=args.ledger, progress=progress, max_memory_bytes=args.max_memory,
                  **_options(args))
