"""The ``dpgeo`` command line: a thin shell over the library.

Exit codes: 0 success, 2 usage or input error (one-line message, no
traceback), 1 unexpected failure. Output files are written atomically.
"""

from __future__ import annotations

import argparse
import logging
import os
import contextlib
import json
import re
import sys
import time
import warnings

from .._version import __version__
from ..errors import BudgetWarning, DpgeoError, NotPrivateWarning
from .budget import register as register_budget_commands
from .export import register as register_export_command
from .outputs import budget_line, check_out_crs, check_output_paths, write_outputs
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


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2
        self.exit(2, f"{self.prog}: error: {message}\n")


def _add_domain_args(p, with_data_flag=True):
    g = p.add_argument_group("public study area")
    g.add_argument("--domain", metavar="BBOX|FILE",
                   help="public study area: minx,miny,maxx,maxy (in --domain-crs; a negative minx is fine: "
                        "--domain -93.3,44.9,-93.2,45.0) or a polygon file")
    g.add_argument("--domain-crs", default=None, metavar="CRS",
                   help="CRS of a bbox --domain (default EPSG:4326, lon/lat)")
    g.add_argument("--crs", default=None, metavar="CRS",
                   help="working CRS, projected in metres (default: UTM zone of the study area's centre)")
    if with_data_flag:
        g.add_argument("--domain-from-data", action="store_true",
                       help="use the data's own extent as study area: exploration only, the output is "
                            "marked NOT differentially private")


#: dpgeo.io.ENGINES, repeated so that building the parser does not import the I/O stack (a test keeps them equal).
_ENGINES = ("auto", "pyogrio", "fiona")


def _add_engine_arg(g, counting=False):
    if counting:
        g.add_argument("--engine", choices=(*_ENGINES, "dask"), default="auto",
                       help="GDAL binding that reads and writes vector files (default auto: pyogrio if installed, "
                            "else fiona); 'dask' counts the points with Dask instead (on --scheduler, else on a "
                            "local cluster started here) and uses the auto binding for files")
        return
    g.add_argument("--engine", choices=_ENGINES, default="auto",
                   help="GDAL binding that reads and writes vector files (default auto: pyogrio if installed, "
                        "else fiona)")


@contextlib.contextmanager
def _domain_engine(engine):
    """Read a --domain polygon file with the --engine asked for (geopandas' choice under auto)."""
    import geopandas

    switch = engine != "auto" and hasattr(geopandas.options, "io_engine")
    if switch:
        old, geopandas.options.io_engine = geopandas.options.io_engine, engine
    try:
        yield
    finally:
        if switch:
            geopandas.options.io_engine = old


_INPUT_HELP = ("point layer: GeoPackage, GeoJSON, Shapefile (anything GDAL reads), GeoParquet, Parquet or CSV "
               "(also .csv.gz) with coordinate columns, a glob of files ('data/*.parquet', quoted) or a folder of "
               "Parquet files (hive partitions included); read in batches, never whole")


def _add_input_args(p):
    p.add_argument("input", help=_INPUT_HELP)
    p.add_argument("-o", "--output", required=True, action="append", metavar="OUTPUT",
                   help="output .gpkg, .geojson, .html (self-contained web map) or .png (static map), written "
                        "atomically; give -o several times to write the same release (one charge) to several files")
    g = p.add_argument_group("input")
    g.add_argument("--layer", default=None, help="layer name in a multi-layer input")
    g.add_argument("--x", default=None, metavar="COLUMN", help="x/longitude column of a table (CSV, Parquet)")
    g.add_argument("--y", default=None, metavar="COLUMN", help="y/latitude column of a table (CSV, Parquet)")
    g.add_argument("--input-crs", default=None, metavar="CRS", help="CRS of an input that declares none")
    g.add_argument("--out-crs", default=None, metavar="CRS",
                   help="CRS of a GeoPackage output or of a PNG's drawing (default: the working CRS); "
                        "GeoJSON and HTML are always EPSG:4326")
    _add_engine_arg(g, counting=True)
    g.add_argument("--scheduler", default=None, metavar="local[:N]|ADDRESS",
                   help="count the points with Dask: 'local' starts a cluster of one worker per core on this "
                        "machine ('local:N': N workers), an address such as tcp://host:8786 uses a running Dask "
                        "cluster (needs pip install 'dpgeo[dask]'; see docs/scale.md). The workers only count; "
                        "the noise is drawn here. Implies --engine dask. Default: count here, in one process")
    g = p.add_argument_group("HTML map")
    g.add_argument("--basemap", default=None, metavar="URL",
                   help="XYZ tile URL template drawn under an .html map, e.g. "
                        "https://tile.example.org/{z}/{x}/{y}.png. Default: no basemap, and the map requests "
                        "nothing from any host (tile servers see who views the map)")
    g.add_argument("--basemap-attribution", default=None, metavar="TEXT",
                   help="credit shown for the --basemap tiles (plain text)")


def _add_privacy_args(p, epsilon_required=True, with_person=False,
                      epsilon_help="privacy budget ε (> 0); not used by exact"):
    g = p.add_argument_group("privacy")
    if epsilon_required:
        g.add_argument("--epsilon", type=float, required=True, help="privacy budget ε (> 0)")
    else:
        g.add_argument("--epsilon", type=float, default=None, help=epsilon_help)
    g.add_argument("--max-points-per-record", type=int, default=1, metavar="N",
                   help="points one record may contribute; scales the noise (default 1)")
    if with_person:
        g.add_argument("--person", default=None, metavar="COLUMN",
                       help="column naming each point's person: the guarantee becomes per person "
                            "(needs --max-points-per-person)")
        g.add_argument("--max-points-per-person", type=int, default=None, metavar="K",
                       help="keep at most K random points per person; the noise scales with K")
    g.add_argument("--seed", type=int, default=None,
                   help="fixed random seed, FOR TESTS ONLY: the output is marked not private")
    g.add_argument("--max-memory", default=None, metavar="SIZE",
                   help="refuse, before reading anything, a run estimated to need more memory than this (e.g. 8G; "
                        "default $DPGEO_MAX_MEMORY, else half of this machine's memory)")
    if with_person:  # the run commands
        g.add_argument("--dataset", default=None, metavar="NAME",
                       help="the population this release protects, as named in the privacy-budget ledger "
                            "(default: the input's resolved path); several files of the same people share one name")
        g.add_argument("--ledger", default=None, metavar="PATH",
                       help="privacy-budget ledger file (default: $DPGEO_LEDGER, else your user data directory)")
        g.add_argument("--unattended", action="store_true",
                       help="conditions of the data (no point in the study area, no usable record) are warnings "
                            "for you, not errors: a valid, possibly empty, layer is always written, so whoever "
                            "sees only the output learns nothing beyond the DP result")


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
    pv.add_argument("--json", action="store_true", help="print JSON")
    pv.add_argument("--max-memory", default=None, metavar="SIZE",
                    help="refuse parameters whose run would need more memory than this (e.g. 8G)")
    _add_domain_args(pv, with_data_flag=False)
    _add_engine_arg(pv)
    pv.set_defaults(func=_cmd_preview)

    info = sub.add_parser("info", help="print the privacy metadata of a dpgeo output file")
    info.add_argument("path", help="a .gpkg, .geojson, .html or .png written by dpgeo")
    info.add_argument("--json", action="store_true", help="print JSON")
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
    from ..pipeline import wavecluster

    from ..pipeline import (WAVECLUSTER_METHODS, _contribution, check_epsilon, check_wavecluster_params,
                            wavecluster_cell_width, wavecluster_count_epsilon)
    from ..errors import ParameterError

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


class _Progress:
    """Stage lines on stderr; while a long input is read, one line that updates (a new line every 10 s when
    stderr is not a terminal)."""

    def __init__(self, quiet):
        self.quiet = quiet
        self.t0 = time.perf_counter()
        self.tty = sys.stderr.isatty()
        self.open_line = False
        self.last = -1e9

    def __call__(self, frac, msg):
        if self.quiet:
            return
        now = time.perf_counter()
        line = f"[{frac * 100:3.0f}%] {msg}  ({now - self.t0:.1f} s)"
        if msg.startswith(("read ", "counted ")):  # a reading update
            if self.tty:
                print("\r" + line + "\033[K", end="", file=sys.stderr, flush=True)
                self.open_line = True
            elif now - self.last >= 10:
                print(line, file=sys.stderr, flush=True)
                self.last = now
            return
        if self.open_line:
            print(file=sys.stderr)
            self.open_line = False
        print(line, file=sys.stderr)


def resolve_domain(args):
    """The public study area from --domain/--domain-crs/--crs (None with --domain-from-data)."""
    from ..domain import as_study_area
    from ..errors import DomainError

    if getattr(args, "domain_from_data", False):
        if args.domain is not None:
            raise DomainError("give either --domain or --domain-from-data, not both")
        return None
    with _domain_engine(getattr(args, "engine", "auto")):
        return as_study_area(args.domain, domain_crs=args.domain_crs, working_crs=args.crs)


def _prepare_run(args, check=None):
    """Check the outputs and the public study area; describe the (private) input without reading it.

    ``check(area)`` checks the command's parameters against the study area (None with --domain-from-data),
    e.g. the grid and the memory of the run, before the input is opened.
    """
    from ..counting.inputs import PointFile
    from ..errors import DataError
    from ..formats import check_engine

    from ..pipeline import _contribution

    from ..randomness import check_seed
    from ..resources import max_memory_bytes

    _contribution(args.person, args.max_points_per_person, args.max_points_per_record)
    check_seed(args.seed)
    args.max_memory = max_memory_bytes(args.max_memory)
    if args.engine == "dask":  # count with Dask; files are read with the default GDAL binding
        args.engine = "auto"
        args.scheduler = args.scheduler or "local"
    check_output_paths(args.output, args)
    check_out_crs(args.output, args.out_crs)
    for out in args.output:
        check_engine(args.engine, read=args.input, write=out)
    if args.scheduler is not None:
        from ..counting.dask import _local_workers, _need_dask

        _local_workers(args.scheduler)
        _need_dask()
    domain = resolve_domain(args)
    if check is not None:
        check(domain)
    owner_log = logging.getLogger("dpgeo.owner")
    if not args.quiet and not owner_log.handlers:  # report_run prints the owner's warnings, once
        owner_log.addHandler(logging.NullHandler())
    prog = _Progress(args.quiet)
    # the input is read by the pipeline, after the privacy-budget charge: a refused run reads nothing
    table = PointFile(os.fspath(args.input), layer=args.layer, x=args.x, y=args.y, input_crs=args.input_crs,
                      person=args.person, engine=args.engine)
    try:  # the input's structure (files, layer, columns, CRS) is checked now; no record is read
        table.open()
    except DataError:  # a condition of the data itself: the counting step decides (owner or unattended)
        pass
    return prog, domain, table


def report_run(res, args, paths):
    """Print the local diagnostics and what was written (stderr)."""
    if args.quiet:
        return
    from ..counting.decode import describe_drops

    d = res.diagnostics
    for w in d.get("owner_warnings", []):
        print(f"warning (about your private data; exact, do not publish): {w}", file=sys.stderr)
    why = describe_drops(d.get("dropped_by_reason") or {})
    print(
        f"input: {d.get('n_read') or 0:,} records read, {d.get('n_dropped_invalid') or 0:,} dropped"
        + (f" ({why})" if d.get("n_dropped_invalid") else "")
        + f", {d.get('n_outside_domain', 0):,} outside the study area, {d.get('n_used', 0):,} used."
        + (f"\n       {d['n_dropped_by_person_cap']:,} points dropped by the per-person cap."
           if "n_dropped_by_person_cap" in d else "")
        + "\n       (these counts describe your private data: do not publish them)",
        file=sys.stderr,
    )
    md = res.metadata
    eps = "n/a" if md.get("epsilon") is None else f"{md['epsilon']:g}"
    print(f"wrote {', '.join(map(str, paths))}: {len(res.layer)} clusters; epsilon={eps}; "
          f"differentially_private={str(md['differentially_private']).lower()}", file=sys.stderr)
    if not md["differentially_private"]:
        print("WARNING: NOT differentially private: " + "; ".join(md["not_private_reasons"]), file=sys.stderr)
    line = budget_line(md)
    if line:
        print(line, file=sys.stderr)


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
    from ..release import format_metadata

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
    print(json.dumps(p, indent=2) if args.json else format_metadata(p))
    return 0


def _cmd_info(args):
    from ..io import read_layer_metadata
    from ..release import format_metadata

    md = read_layer_metadata(args.path, engine=args.engine)
    print(json.dumps(md, indent=2) if args.json else format_metadata(md))
    return 0


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
    if args.json:
        print(json.dumps(rep.to_dict(), indent=2))
    else:
        print(rep.text())
    print(f"WARNING: {NOT_PRIVATE_NOTICE}", file=sys.stderr)
    return 0


def _print_warnings(caught):
    """Warnings raised during a command, one line each (budget notes first)."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for w in caught:
        if issubclass(w.category, NotPrivateWarning):
            continue
        if not issubclass(w.category, BudgetWarning) and not os.path.abspath(w.filename).startswith(package):
            continue  # a library's own warning text is not for dpgeo's users
        kind = "note" if issubclass(w.category, BudgetWarning) else "warning"
        print(f"dpgeo: {kind}: {w.message}", file=sys.stderr)


#: A value that starts with '-' but is a list of numbers (a bbox such as -93.3,44.9,-93.2,45.0), not an option.
_NEGATIVE_LIST = re.compile(r"^-\.?\d[\d.eE+-]*(,\s*[-+]?[\d.eE+-]+)+$")


def _join_negative_values(argv):
    """``--domain -93.3,44.9,...`` as ``--domain=-93.3,44.9,...`` (argparse takes the value for an option)."""
    out = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if (a.startswith("--") and "=" not in a and len(a) > 2 and i + 1 < len(argv)
                and _NEGATIVE_LIST.match(argv[i + 1])):
            out.append(f"{a}={argv[i + 1]}")
            i += 2
            continue
        out.append(a)
        i += 1
    return out


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
    except Exception as exc:  # unexpected: one line unless --debug
        if getattr(args, "debug", False):
            raise
        print(f"dpgeo: unexpected error: {type(exc).__name__}: {exc} (run with --debug for details)",
              file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
