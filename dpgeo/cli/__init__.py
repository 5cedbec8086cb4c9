"""The ``dpgeo`` command line: a thin shell over the library.

Exit codes: 0 success, 2 usage or input error (one-line message, no
traceback), 1 unexpected failure. Output files are written atomically.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import warnings

from .._version import __version__
from ..errors import BudgetWarning, DpgeoError, NotPrivateWarning
from .args import (  # noqa: F401
    _ENGINES,
    _add_domain_args,
    _add_engine_arg,
    _add_input_args,
    _add_privacy_args,
    _domain_engine,
    _join_negative_values,
    _Parser,
)
from .budget import register as register_budget_commands
from .compare import _compare_command
from .export import register as register_export_command
from .outputs import write_outputs
from .running import (  # noqa: F401
    _prepare_run,
    _print_warnings,
    _Progress,
    report_run,
    resolve_domain,
)
from .serve import register as register_serve_command

__all__ = ["main", "build_parser"]

_SPANS_EXAMPLES = """\
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


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="dpgeo",
        description="Differentially private cluster map layers from sensitive point data.",
        epilog=_SPANS_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"dpgeo {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks of unexpected errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    sp = sub.add_parser(
        "spans", help="ε-DP DBSCAN cluster spans (Qiu & Yi)",
        description="ε-differentially private DBSCAN cluster spans as a polygon layer.",
        epilog=_SPANS_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_input_args(sp)
    _add_privacy_args(sp, with_person=True)
    g = sp.add_argument_group("DBSCAN")
    g.add_argument("--radius", type=float, required=True, help="DBSCAN radius α in metres")
    g.add_argument("--min-points", type=int, required=True, help="DBSCAN MinPts")
    g.add_argument("--beta", type=float, default=0.05,
                   help="failure probability of the noise bound Γ (default 0.05)")
    g.add_argument("--eta", type=float, default=1.0, help="cell width factor η′ in (0, 1] (default 1)")
    g.add_argument("--histogram", choices=["auto", "dense", "sparse"], default="auto",
                   help="DP histogram: auto picks by the number of cells (default)")
    g.add_argument("--gamma", choices=["laplace", "exact"], default="laplace",
                   help="core threshold bound: the paper's Γ_Lap (default; conservative, thinner spans) "
                        "or the smallest exact bound (finds smaller clusters, fatter spans)")
    g.add_argument("--extent", choices=["grown", "core"], default="grown",
                   help="spans reach: grown (default) = core spans grown, never merged, into the neighbouring cells "
                        "certified by the exact bound; core = only the core cells (the paper's Algorithm 1)")
    _add_domain_args(sp)
    g = sp.add_argument_group("output")
    g.add_argument("-q", "--quiet", action="store_true", help="no progress or diagnostics")
    sp.set_defaults(func=_cmd_spans)

    pv = sub.add_parser(
        "preview", help="noise preview for DP-DBSCAN from parameters alone (no data, no budget)",
        description="Show Γ, MinPts′ and the count error a DP-DBSCAN run would have. Reads no data.",
    )
    pv.add_argument("--epsilon", type=float, required=True, help="privacy budget ε (> 0)")
    pv.add_argument("--radius", type=float, required=True, help="DBSCAN radius α in metres")
    pv.add_argument("--min-points", type=int, required=True, help="DBSCAN MinPts")
    pv.add_argument("--beta", type=float, default=0.05)
    pv.add_argument("--eta", type=float, default=1.0)
    pv.add_argument("--histogram", choices=["auto", "dense", "sparse"], default="auto")
    pv.add_argument("--gamma", choices=["laplace", "exact"], default="laplace")
    pv.add_argument("--extent", choices=["grown", "core"], default="grown")
    pv.add_argument("--max-points-per-record", type=int, default=1, metavar="N")
    pv.add_argument("--json", action="store_true", help="print the preview as JSON (for scripts)")
    pv.add_argument("--max-memory", default=None, metavar="SIZE",
                    help="refuse parameters whose run would need more memory than this (e.g. 8G)")
    _add_domain_args(pv, with_data_flag=False)
    _add_engine_arg(pv)
    pv.set_defaults(func=_cmd_preview)

    info = sub.add_parser("info", help="print the privacy metadata of a dpgeo output file")
    info.add_argument("path", help="a .gpkg, .geojson, .html or .png written by dpgeo")
    info.add_argument("--json", action="store_true", help="print the metadata as JSON (for scripts)")
    _add_engine_arg(info)
    info.set_defaults(func=_cmd_info)

    _extra_commands(sub)
    _kmeans_command(sub)
    _compare_command(sub)
    register_budget_commands(sub)
    register_export_command(sub)
    register_serve_command(sub)
    return parser


_WAVECLUSTER_EXAMPLES = """\
examples:
  dpgeo wavecluster stops.gpkg -o hot.gpkg --method privthr --epsilon 1 --cell 200 \\
      --domain minneapolis_study_area.geojson
  dpgeo wavecluster stops.gpkg -o hot.geojson --method privthr-em --epsilon 1 --grid 128 \\
      --percentile 60 --domain=-93.33,44.89,-93.19,45.06
"""


def _extra_commands(sub):
    wc = sub.add_parser(
        "wavecluster", help="ε-DP WaveCluster hot-cell clusters (Chen, Yu & Chirkova)",
        description="DP WaveCluster: noisy grid counts, wavelet approximation, private threshold, "
                    "8-connected clusters, as a polygon layer.",
        epilog=_WAVECLUSTER_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_input_args(wc)
    _add_privacy_args(wc, epsilon_required=False, with_person=True)
    g = wc.add_argument_group("WaveCluster")
    g.add_argument("--method", choices=["privthr", "privthr-em", "privqt", "baseline", "exact"],
                   default="privthr", help="mechanism (default privthr; exact is NOT private; baseline reads the "
                                           "input three more times, to count it on its adaptive grids)")
    size = g.add_mutually_exclusive_group(required=True)
    size.add_argument("--cell", type=float, help="cell width in metres")
    size.add_argument("--grid", type=int, help="cells along the longer side of the study area")
    g.add_argument("--percentile", type=float, default=60.0,
                   help="share p (0-100) of positive coefficients that are not significant (default 60)")
    g.add_argument("--wavelet", choices=["haar", "bior2.2", "bior1.3", "db2"], default="haar")
    g.add_argument("--count-split", type=float, default=None,
                   help="share of ε for the counts (default 0.9 privthr, 0.7 privthr-em)")
    g.add_argument("--count-cap", type=float, default=None, help="public cap on points per cell (privthr-em)")
    g.add_argument("--n-public", type=int, default=None,
                   help="publicly known number of points (baseline; else released with 5%% of ε)")
    g.add_argument("--k-rule", choices=["direct", "prune", "prune-half"], default="direct",
                   help="privthr: estimate of the number of significant coefficients (default direct)")
    _add_domain_args(wc)
    wc.add_argument("-q", "--quiet", action="store_true", help="no progress or diagnostics")
    wc.set_defaults(func=_cmd_wavecluster)


def _cmd_wavecluster(args):
    from ..errors import ParameterError
    from ..pipeline import (
        WAVECLUSTER_METHODS,
        _contribution,
        check_epsilon,
        check_wavecluster_params,
        rehearse_wavecluster,
        wavecluster,
        wavecluster_cell_width,
        wavecluster_count_epsilon,
    )

    # everything public is checked before the (possibly large) input is opened
    if args.method not in WAVECLUSTER_METHODS:  # pragma: no cover - argparse choices
        raise ParameterError(f"--method must be one of {', '.join(WAVECLUSTER_METHODS)}")
    if args.method != "exact":
        if args.epsilon is None:
            raise ParameterError(f"--method {args.method} needs --epsilon (the privacy budget)")
        check_epsilon(args.epsilon)
    check_wavecluster_params(method=args.method, percentile=args.percentile, wavelet=args.wavelet, mode="zero",
                             count_split=args.count_split, count_cap=args.count_cap, n_public=args.n_public,
                             k_rule=args.k_rule)
    sensitivity, _ = _contribution(args.person, args.max_points_per_person, args.max_points_per_record)

    def check(area):
        if area is not None:
            wavecluster_cell_width(area, args.cell, args.grid, wavecluster_count_epsilon(
                args.method, args.epsilon, args.count_split), sensitivity, args.max_memory)
            rehearse_wavecluster(area, cell_m=args.cell, grid_size=args.grid, method=args.method,
                                 epsilon=args.epsilon, percentile=args.percentile, wavelet=args.wavelet, mode="zero",
                                 count_split=args.count_split, count_cap=args.count_cap, n_public=args.n_public,
                                 k_rule=args.k_rule, sensitivity=sensitivity)

    prog, domain, table = _prepare_run(args, check)
    res = wavecluster(
        table, method=args.method, epsilon=args.epsilon, cell_m=args.cell, grid_size=args.grid,
        percentile=args.percentile, domain=domain, crs=args.crs, wavelet=args.wavelet,
        count_split=args.count_split, count_cap=args.count_cap, n_public=args.n_public, k_rule=args.k_rule,
        sensitivity=args.max_points_per_record, person=args.person,
        max_points_per_person=args.max_points_per_person, seed=args.seed, domain_from_data=args.domain_from_data,
        unattended=args.unattended, dataset=args.dataset, ledger=args.ledger, progress=prog,
        scheduler=args.scheduler, max_memory_bytes=args.max_memory,
    )
    written = write_outputs(res, args)
    report_run(res, args, written)
    return 0


def _kmeans_command(sub):
    from .kmeans import DESCRIPTION, EXAMPLES, HELP, add_arguments

    km = sub.add_parser("kmeans", help=HELP, description=DESCRIPTION, epilog=EXAMPLES,
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_input_args(km)
    _add_privacy_args(km, with_person=True)
    add_arguments(km)
    _add_domain_args(km)
    km.add_argument("-q", "--quiet", action="store_true", help="no progress or diagnostics")
    km.set_defaults(func=_cmd_kmeans)


def _cmd_kmeans(args):
    from .kmeans import check_arguments, check_plan, run

    check_arguments(args)  # everything public is checked before the input is read
    prog, domain, table = _prepare_run(args, lambda area: check_plan(args, area))
    res = run(args, table, domain, prog)
    report_run(res, args, write_outputs(res, args))
    return 0


def _cmd_spans(args):
    from ..pipeline import _check_dbscan_params, dbscan_spans

    # everything public is checked before the (possibly large) input is read
    _check_dbscan_params(args.epsilon, args.radius, args.min_points, args.beta, args.eta,
                         args.histogram, args.gamma, args.max_points_per_record, args.extent)
    from ..pipeline import _contribution, noise_preview

    sensitivity, _ = _contribution(args.person, args.max_points_per_person, args.max_points_per_record)

    def check(area):  # the grid, Γ and the memory of the run, from the study area alone
        if area is not None:
            noise_preview(epsilon=args.epsilon, radius_m=args.radius, min_points=args.min_points, domain=area,
                          beta=args.beta, eta=args.eta, histogram=args.histogram, gamma=args.gamma,
                          extent=args.extent, sensitivity=sensitivity, max_memory_bytes=args.max_memory)

    prog, domain, table = _prepare_run(args, check)
    res = dbscan_spans(
        table, epsilon=args.epsilon, radius_m=args.radius, min_points=args.min_points,
        domain=domain, crs=args.crs, beta=args.beta, eta=args.eta,
        histogram=args.histogram, gamma=args.gamma, extent=args.extent, sensitivity=args.max_points_per_record,
        person=args.person, max_points_per_person=args.max_points_per_person,
        seed=args.seed, domain_from_data=args.domain_from_data, unattended=args.unattended, dataset=args.dataset,
        ledger=args.ledger, progress=prog, scheduler=args.scheduler, max_memory_bytes=args.max_memory,
    )
    written = write_outputs(res, args)
    report_run(res, args, written)
    return 0


def _cmd_preview(args):
    from ..pipeline import noise_preview
    from .show import format_preview

    if args.domain is None:
        from ..domain import as_study_area

        as_study_area(None)
    from ..formats import check_engine

    check_engine(args.engine)
    with _domain_engine(args.engine):
        p = noise_preview(epsilon=args.epsilon, radius_m=args.radius, min_points=args.min_points,
                          domain=args.domain, domain_crs=args.domain_crs, crs=args.crs, beta=args.beta,
                          eta=args.eta, histogram=args.histogram, gamma=args.gamma, extent=args.extent,
                          sensitivity=args.max_points_per_record, max_memory_bytes=args.max_memory)
    print(json.dumps(p, indent=2) if args.json else format_preview(p), end="\n" if args.json else "")
    return 0


def _cmd_info(args):
    from ..io import read_layer_metadata
    from .show import format_info

    md = read_layer_metadata(args.path, engine=args.engine)
    print(json.dumps(md, indent=2) if args.json else format_info(md), end="\n" if args.json else "")
    return 0


def main(argv=None) -> int:
    """The ``dpgeo`` command; a closed output pipe (``dpgeo info x.gpkg | head -1``) ends it quietly."""
    try:
        return _main(argv)
    except BrokenPipeError:
        # like a Unix tool: stop writing, no traceback; Python's own final flush must not fail either
        for stream in (sys.stdout, sys.stderr):
            try:
                os.dup2(os.open(os.devnull, os.O_WRONLY), stream.fileno())
            except (OSError, ValueError):
                pass
        return 128 + 13  # as if killed by SIGPIPE


def _main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(_join_negative_values(list(sys.argv[1:] if argv is None else argv)))
    if not getattr(args, "command", None):
        parser.print_help(sys.stderr)
        return 2
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("ignore", NotPrivateWarning)  # the CLI reports it itself
            warnings.simplefilter("always", BudgetWarning)
            try:
                return args.func(args)
            except DpgeoError:
                del caught[:]  # a refusal is one line: the notes and warnings of a refused run are moot
                raise
            finally:
                _print_warnings(caught)
    except DpgeoError as exc:
        print(f"dpgeo: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(("\n" if sys.stderr.isatty() else "") + "dpgeo: interrupted; no output written", file=sys.stderr)
        return 130
    except BrokenPipeError:
        raise
    except PermissionError as exc:  # a file or folder this user may not open (the checks up front missed it)
        if getattr(args, "debug", False):
            raise
        from ..formats import access_problem

        what = exc.filename and access_problem(exc.filename, "file")
        print(f"dpgeo: error: {what or f'permission denied: {exc.strerror or exc}'}", file=sys.stderr)
        return 2
    except Exception as exc:  # unexpected: one line unless --debug
        if getattr(args, "debug", False):
            raise
        print(f"dpgeo: unexpected error: {type(exc).__name__}: {exc} (run with --debug for details)",
              file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
