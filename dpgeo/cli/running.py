"""One private run on the command line: checks before reading, progress lines, the report after."""

from __future__ import annotations

import os
import sys
import time

from ..errors import BudgetWarning, NotPrivateWarning
from .args import _domain_engine
from .outputs import budget_line, check_out_crs, check_output_paths


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


def _prepare_run(args, check=None, series=None):
    """Check the outputs and the public study area; describe the (private) input without reading it.

    ``check(area)`` checks the command's parameters against the study area (None with --domain-from-data),
    e.g. the grid and the memory of the run, before the input is opened.
    """
    from ..counting.inputs import PointFile
    from ..errors import DataError
    from ..formats import check_engine
    from ..pipeline._common import _contribution
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
    database = _database_input(args)
    for out in args.output:
        check_engine(args.engine, read=None if database else args.input, write=out)
    if args.scheduler is not None:
        from ..counting.dask import _local_workers, _need_dask

        _local_workers(args.scheduler)
        _need_dask()
    domain = resolve_domain(args)
    if check is not None:
        check(domain)
    # unattended: no progress lines (how far and how fast a run goes depends on the data's size)
    prog = _Progress(args.quiet or _unattended(args))
    # the input is read by the pipeline, after the privacy-budget charge: a refused run reads nothing
    if database:
        table = database
    else:
        table = PointFile(os.fspath(args.input), layer=args.layer, x=args.x, y=args.y, input_crs=args.input_crs,
                          person=args.person, engine=args.engine,
                          quoted_newlines=getattr(args, "quoted_newlines", False))
    time = None
    if series:  # a series reads one more column: its time (checked with the rest of the structure)
        from ..series.options import series_options

        time = series_options(series).time
        if time.column is None:
            time = None
    try:  # the input's structure (files, layer, columns, CRS) is checked now; no record is read
        table.open(time=time)
    except DataError:  # a condition of the data itself: the counting step decides (owner or unattended)
        pass
    return prog, domain, table


def _database_input(args):
    """The PostGIS input of ``postgresql://... --table/--sql`` (no connection yet), or None for a file."""
    from ..errors import InputError
    from ..postgres import is_postgres

    table, sql, geometry = (getattr(args, k, None) for k in ("table", "sql", "geometry"))
    if not is_postgres(args.input):
        if table is not None or sql is not None or geometry is not None:
            raise InputError("--table, --sql and --geometry read a PostGIS database: give a postgresql:// URL as "
                             "the input")
        return None
    for opt in ("layer", "x", "y"):
        if getattr(args, opt, None) is not None:
            raise InputError(f"--{opt} is for files; a PostGIS input takes --table or --sql (and --geometry)")
    from ..counting.postgis import postgis

    return postgis(args.input, table=table, sql=sql, geometry=geometry, input_crs=args.input_crs,
                   person=args.person)


def _unattended(args) -> bool:
    return bool(getattr(args, "unattended", False))


def report_run(res, args, paths):
    """Print the local diagnostics and what was written (stderr).

    Unattended, only what follows from the command line and the ledger is
    printed, the same whatever the data holds: not the owner's counts or
    warnings, not the number of clusters (the owner reads those in the
    output or runs without ``--unattended``).
    """
    if args.quiet:
        return
    md = res.metadata
    eps = "n/a" if md.get("epsilon") is None else f"{md['epsilon']:g}"
    private = str(md["differentially_private"]).lower()
    if _unattended(args):
        print(f"wrote {', '.join(map(str, paths))}: epsilon={eps}; differentially_private={private}", file=sys.stderr)
        _report_privacy(res, unattended=True)
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
    periods = md.get("periods")
    noun = "clusters" if "cluster_id" in res.layer.columns else "features"  # cells, bands of a heat layer
    what = f"{len(periods)} periods, {len(res.layer)} features" if periods is not None else f"{len(res.layer)} {noun}"
    print(f"wrote {', '.join(map(str, paths))}: {what}; epsilon={eps}; "
          f"differentially_private={private}", file=sys.stderr)
    _report_privacy(res)


def _report_privacy(res, unattended=False):
    md = res.metadata
    if not md["differentially_private"]:
        print("WARNING: NOT differentially private: " + "; ".join(md["not_private_reasons"]), file=sys.stderr)
    rec = res.ledger_record
    if unattended and (rec is None or rec["published_dataset"] is None):
        return  # the key of an unnamed input comes from its content: not for stderr when unattended
    line = budget_line(res)
    if line:
        print(line, file=sys.stderr)


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
