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
from .running import (  # noqa: F401
    _prepare_run,
    _print_warnings,
    _Progress,
    report_run,
    resolve_domain,
)
from .serve import register as register_serve_command

__all__ = ["main", "build_parser"]

_EXAMPLES = """\
examples:
  dpgeo spans stops.gpkg -o spans.gpkg --epsilon 1 --radius 150 --min-points 40 \\
      --domain minneapolis_study_area.geojson
  dpgeo preview --epsilon 1 --radius 100 --min-points 30 --domain=-93.33,44.89,-93.19,45.06
  dpgeo COMMAND --help          # every option of a command, with examples
"""


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="dpgeo",
        description="Differentially private cluster map layers from sensitive point data.",
        epilog=_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"dpgeo {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks of unexpected errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    from ..declarations.registry import MECHANISMS
    from .declared import add_mechanism_commands

    add_mechanism_commands(sub, MECHANISMS)

    info = sub.add_parser("info", help="print the privacy metadata of a dpgeo output file")
    info.add_argument("path", help="a .gpkg, .geojson, .html or .png written by dpgeo")
    info.add_argument("--json", action="store_true", help="print the metadata as JSON (for scripts)")
    info.add_argument("--explain", action="store_true", help="say under every field what it means")
    _add_engine_arg(info)
    info.set_defaults(func=_cmd_info)

    _compare_command(sub)
    register_budget_commands(sub)
    register_export_command(sub)
    register_serve_command(sub)
    return parser


def _cmd_info(args):
    from ..io import read_layer_metadata
    from .show import format_info

    md = read_layer_metadata(args.path, engine=args.engine)
    print(json.dumps(md, indent=2) if args.json else format_info(md, explain=args.explain),
          end="\n" if args.json else "")
    return 0


def command_line_words(message: str) -> str:
    """A library message in the command line's words: each declared option named as typed (``radius_m`` →
    ``--radius``, ``min_points`` → ``--min-points``). Only names with an underscore are replaced: a plain
    word (``levels``, ``epsilon``) may be ordinary English.

    Examples
    --------
    >>> command_line_words("give both radius_m and min_points, or neither")
    'give both --radius and --min-points, or neither'
    >>> command_line_words("needs period_start and period_end (--period-start, --period-end)")
    'needs --period-start and --period-end'
    """
    import re

    from ..declarations.registry import MECHANISMS
    from ..series_params import SERIES_PARAMS

    flags = {}
    for p in [*SERIES_PARAMS, *(q for m in MECHANISMS for q in m.params)]:
        if "_" in p.name and "cli" in p.fronts:
            flags.setdefault(p.name, p.cli_flag)
    if not flags:
        return message
    pattern = re.compile(r"(?<![\w-])(" + "|".join(map(re.escape, sorted(flags, key=len, reverse=True)))
                         + r")(?![\w(=])")
    out = pattern.sub(lambda m: flags[m.group(1)], message)

    def drop_repeat(m):  # "(--a, --b)" after --a and --b themselves: said twice once the names are flags
        named = re.findall(r"--[\w-]+", m.group(1))
        return "" if all(f in out[:m.start()] for f in named) else m.group(0)

    return re.sub(r"\s*\(((?:--[\w-]+)(?:,\s*--[\w-]+)*)\)", drop_repeat, out)


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
        print(f"dpgeo: error: {command_line_words(str(exc))}", file=sys.stderr)
        return 2
    except PermissionError as exc:  # a file or folder this user may not open (the checks up front missed it)
        if getattr(args, "debug", False):
            raise
        from ..formats import access_problem

        what = exc.filename and access_problem(exc.filename, "file")
        print(f"dpgeo: error: {what or f'permission denied: {exc.strerror or exc}'}", file=sys.stderr)
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
