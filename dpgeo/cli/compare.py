"""``dpgeo compare``: the data owner's private-vs-exact report (NOT private; never publish it)."""

from __future__ import annotations

import argparse
import json
import sys

from .args import _INPUT_HELP, QUOTED_NEWLINES_HELP, _add_domain_args, _add_engine_arg, _add_privacy_args
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
    from ..compare.report import ALGORITHMS

    cp.add_argument("--algorithm", choices=ALGORITHMS,
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
    g.add_argument("--quoted-newlines", action="store_true", help=QUOTED_NEWLINES_HELP)
    _add_engine_arg(g)
    _add_privacy_args(cp, epsilon_required=False,
                      epsilon_note=" Required except for eppkm (which adds no noise).")
    from ..compare.systems import COMPARED
    from .declared import add_param_options

    seen = {"--epsilon"}
    for algorithm, mech in COMPARED.items():  # every algorithm's options, from its declaration, each flag once
        add_param_options(cp, mech, title=f"{mech.title} (--algorithm {algorithm})", required=False, seen=seen)
    cp.add_argument_group("DBSCAN reference (--algorithm spans)").add_argument(
        "--reference-max-points", type=int, default=500_000, metavar="N",
        help="refuse the non-private DBSCAN on more points than this (memory; default 500000)")
    _add_domain_args(cp, with_data_flag=False)
    cp.set_defaults(func=_cmd_compare)


def _cmd_compare(args):
    from ..compare import NOT_PRIVATE_NOTICE, check_png_path, compare
    from ..counting.readers import read_points
    from ..formats import check_engine

    from ..compare.systems import COMPARED, required
    from .declared import param_values

    mech = COMPARED[args.algorithm]
    params = param_values(mech, args)
    missing = [p.cli_flag for p in required(args.algorithm) if params.get(p.name) is None]
    if missing:
        from ..errors import ParameterError

        raise ParameterError(f"--algorithm {args.algorithm} needs {' and '.join(missing)}")
    if mech.fronts != {"compare"}:
        params["sensitivity"] = args.max_points_per_record
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
                        engine=args.engine, quoted_newlines=args.quoted_newlines)
    rep = compare(table, algorithm=args.algorithm, epsilon=args.epsilon, domain=domain, crs=args.crs,
                  seed=args.seed, png=args.output, progress=prog,
                  reference_max_points=args.reference_max_points, **params)
    if args.json:  # the document carries the notice; a person at the terminal reads it here, once
        print(json.dumps(rep.to_dict(), indent=2))
        print(f"WARNING: {NOT_PRIVATE_NOTICE}", file=sys.stderr)
    else:  # the report opens with the notice
        print(rep.text())
    return 0
