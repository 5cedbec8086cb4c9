"""``dpgeo compare``: the data owner's private-vs-exact report (NOT private; never publish it)."""

from __future__ import annotations

import argparse
import json
import sys

from .args import _INPUT_HELP, _add_domain_args, _add_engine_arg, _add_privacy_args
from .running import _Progress, resolve_domain

_COMPARE_EXAMPLES = """\
examples:
  # DP-DBSCAN spans against scikit-learn's DBSCAN on the same points
  dpgeo compare stops.gpkg -o compare.png --epsilon 1 --radius 150 --min-points 40 \\
      --domain minneapolis_study_area.geojson
  # DP WaveCluster (PrivTHR) against exact WaveCluster on the same grid
  dpgeo compare stops.gpkg -o compare.png --algorithm wavecluster --epsilon 0.5 --cell 250 \\
      --domain minneapolis_study_area.geojson
  # DP k-means (Voronoi cells with noisy counts) against k-means, k = 8
  dpgeo compare stops.gpkg -o compare.png --algorithm kmeans --epsilon 1 --k 8 \\
      --domain minneapolis_study_area.geojson
  # comparison systems from the literature that are NOT differentially private
  dpgeo compare stops.gpkg -o compare.png --algorithm eppkm --k 8 --bags 1 --domain ...
  dpgeo compare stops.gpkg -o compare.png --algorithm diffhwt --epsilon 1 --k 8 --domain ...

The report and the map are computed from the exact data: they are NOT private.
Use them to choose ε and the parameters; never publish them.
"""


def _compare_command(sub):
    cp = sub.add_parser(
        "compare", help="data owner only: private vs non-private clustering of your data (NOT private)",
        description="Run the private mechanism and its non-private counterpart on the same points, print "
                    "utility measures and write a side-by-side PNG map. The report is computed from the exact "
                    "data and is NOT differentially private: it is for the data owner only.",
        epilog=_COMPARE_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    cp.add_argument("input", help=_INPUT_HELP.replace("; read in batches, never whole", "; held in memory"))
    cp.add_argument("-o", "--output", required=True, metavar="PNG",
                    help="side-by-side map, .png (written atomically; NOT private)")
    cp.add_argument("--algorithm", choices=["spans", "wavecluster", "kmeans", "eppkm", "diffhwt"],
                    default="spans",
                    help="spans: DP-DBSCAN vs DBSCAN (default); wavecluster: DP WaveCluster vs exact; kmeans: "
                         "DP k-means vs k-means; eppkm, diffhwt: comparison systems that are NOT differentially "
                         "private, vs k-means")
    cp.add_argument("--json", action="store_true", help="print the measures as JSON (with the notice)")
    cp.add_argument("-q", "--quiet", action="store_true", help="no progress")
    g = cp.add_argument_group("input")
    g.add_argument("--layer", default=None, help="layer name in a multi-layer input")
    g.add_argument("--x", default=None, metavar="COLUMN", help="x/longitude column of a table (CSV, Parquet)")
    g.add_argument("--y", default=None, metavar="COLUMN", help="y/latitude column of a table (CSV, Parquet)")
    g.add_argument("--input-crs", default=None, metavar="CRS", help="CRS of an input that declares none")
    _add_engine_arg(g)
    _add_privacy_args(cp, epsilon_required=False,
                      epsilon_help="privacy budget ε (> 0); required except for eppkm (which adds no noise)")
    g = cp.add_argument_group("DBSCAN (--algorithm spans)")
    g.add_argument("--radius", type=float, default=None, help="DBSCAN radius α in metres")
    g.add_argument("--min-points", type=int, default=None, help="DBSCAN MinPts")
    g.add_argument("--beta", type=float, default=0.05, help="failure probability of the noise bound Γ")
    g.add_argument("--eta", type=float, default=1.0, help="cell width factor η′ in (0, 1]")
    g.add_argument("--histogram", choices=["auto", "dense", "sparse"], default="auto")
    g.add_argument("--gamma", choices=["laplace", "exact"], default="laplace")
    g.add_argument("--extent", choices=["grown", "core"], default="grown")
    g.add_argument("--reference-max-points", type=int, default=500_000, metavar="N",
                   help="refuse the non-private DBSCAN on more points than this (memory; default 500000)")
    g = cp.add_argument_group("WaveCluster (--algorithm wavecluster)")
    g.add_argument("--method", choices=["privthr", "privthr-em", "privqt", "baseline"], default="privthr")
    size = g.add_mutually_exclusive_group()
    size.add_argument("--cell", type=float, help="cell width in metres")
    size.add_argument("--grid", type=int, help="cells along the longer side of the study area")
    g.add_argument("--percentile", type=float, default=60.0)
    g.add_argument("--wavelet", choices=["haar", "bior2.2", "bior1.3", "db2"], default="haar")
    g.add_argument("--count-split", type=float, default=None)
    g.add_argument("--count-cap", type=float, default=None)
    g.add_argument("--n-public", type=int, default=None)
    g.add_argument("--k-rule", choices=["direct", "prune", "prune-half"], default="direct")
    g = cp.add_argument_group("k-means family (--algorithm kmeans, eppkm, diffhwt)")
    g.add_argument("--k", type=int, default=None, help="number of clusters")
    g.add_argument("--iterations", type=int, default=None, help="kmeans: Lloyd iterations (default 5)")
    g.add_argument("--layer-share", type=float, default=None,
                   help="kmeans: share of ε for the cells' counts (default 0.1)")
    g.add_argument("--bags", type=int, default=1, help="eppkm: bootstrap bags B (default 1)")
    g.add_argument("--calibration", choices=["attribute", "record"], default="attribute",
                   help="diffhwt: noise for one attribute (the paper) or one whole record")
    _add_domain_args(cp, with_data_flag=False)
    cp.set_defaults(func=_cmd_compare)


def _cmd_compare(args):
    from ..compare import NOT_PRIVATE_NOTICE, check_png_path, compare
    from ..counting.readers import read_points
    from ..formats import check_engine

    if args.algorithm == "spans":
        params = dict(radius_m=args.radius, min_points=args.min_points, beta=args.beta, eta=args.eta,
                      histogram=args.histogram, gamma=args.gamma, extent=args.extent,
                      sensitivity=args.max_points_per_record)
        if args.radius is None or args.min_points is None:
            from ..errors import ParameterError

            raise ParameterError("--algorithm spans needs --radius and --min-points")
    elif args.algorithm == "kmeans":
        params = dict(k=args.k, iterations=args.iterations, layer_share=args.layer_share,
                      sensitivity=args.max_points_per_record)
    elif args.algorithm == "eppkm":
        params = dict(k=args.k, bags=args.bags)
    elif args.algorithm == "diffhwt":
        params = dict(k=args.k, calibration=args.calibration)
    else:
        params = dict(method=args.method, cell_m=args.cell, grid_size=args.grid, percentile=args.percentile,
                      wavelet=args.wavelet, count_split=args.count_split, count_cap=args.count_cap,
                      n_public=args.n_public, k_rule=args.k_rule, sensitivity=args.max_points_per_record)
    from ..randomness import check_seed

    check_seed(args.seed)
    check_png_path(args.output)
    from ..io.paths import check_not_input, protected_files

    check_not_input(args.output, protected_files(args.input, domain=args.domain))
    check_engine(args.engine, read=args.input)
    domain = resolve_domain(args)
    from ..compare import _check_params

    _check_params(args.algorithm, args.epsilon, {k: v for k, v in params.items() if v is not None}, domain,
                  None, args.crs)  # everything public is checked before the input is read
    prog = _Progress(args.quiet)
    prog(0.0, f"reading {args.input}")
    table = read_points(args.input, layer=args.layer, x=args.x, y=args.y, input_crs=args.input_crs,
                        engine=args.engine)
    rep = compare(table, algorithm=args.algorithm, epsilon=args.epsilon, domain=domain, crs=args.crs,
                  seed=args.seed, png=args.output, progress=prog,
                  reference_max_points=args.reference_max_points, **params)
    if args.json:  # the document carries the notice; a person at the terminal reads it here, once
        print(json.dumps(rep.to_dict(), indent=2))
        print(f"WARNING: {NOT_PRIVATE_NOTICE}", file=sys.stderr)
    else:  # the report opens with the notice
        print(rep.text())
    return 0
