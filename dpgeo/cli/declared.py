"""The subcommands of the declared mechanisms, generated from each declaration (:mod:`dpgeo.declare`).

``dpgeo spans``, ``dpgeo wavecluster``, ``dpgeo kmeans``, ``dpgeo preview`` and
every mechanism added to :mod:`dpgeo.declarations.registry` get their options
here: the input, output, privacy and study-area options every run shares
(:mod:`.args`), and one option per declared parameter, with its type, range,
unit, default and help taken from the declaration.
"""

from __future__ import annotations

import argparse
import functools
import json

from .args import (
    _add_domain_args,
    _add_engine_arg,
    _add_input_args,
    _add_privacy_args,
    _add_series_args,
    _add_shared,
    _domain_engine,
)

__all__ = ["add_mechanism_commands", "add_param_options", "param_values"]

_TYPES = {"number": float, "integer": int, "text": str}


def add_param_options(parser, mech, *, title=None, required=True, seen=None):
    """One option per parameter of ``mech`` offered on the command line, in an argument group.

    ``required=False`` makes every option optional (the mechanism checks what
    it needs); ``seen`` (a set of flags) skips options already added by
    another mechanism sharing the parser (``dpgeo compare``).
    """
    g = parser.add_argument_group(title or mech.title)
    groups = {name: (group, req) for group, req in mech.exclusive_groups() for name in group}
    exclusive = {}
    for p in mech.offered("cli"):
        if seen is not None:
            if p.cli_flag in seen:
                continue
            seen.add(p.cli_flag)
        target = g
        if p.name in groups:
            key, needed = groups[p.name]
            if key not in exclusive:
                exclusive[key] = g.add_mutually_exclusive_group(required=required and needed)
            target = exclusive[key]
        kw = {"help": p.cli_help(), "dest": p.cli_dest}
        if p.kind == "flag":
            target.add_argument(p.cli_flag, action="store_true", **kw)
            continue
        if p.kind == "choice":
            kw["choices"] = list(p.choices)
        else:
            kw["type"] = _TYPES[p.kind]
        if p.required and required and p.name not in groups:
            kw["required"] = True
        else:
            kw["default"] = None if p.required else p.default
        target.add_argument(p.cli_flag, **kw)
    return g


def param_values(mech, args) -> dict:
    """The parameters of ``mech`` as given on the command line, by their Python names."""
    return {p.name: getattr(args, p.cli_dest) for p in mech.offered("cli")}


def add_mechanism_commands(sub, mechanisms):
    """A subcommand for every mechanism offered on the command line."""
    for mech in mechanisms:
        if mech.command is None or "cli" not in mech.fronts:
            continue
        sp = sub.add_parser(mech.command, help=mech.summary, description=mech.description, epilog=mech.examples,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
        if mech.reads is None:
            _preview_options(sp, mech)
            continue
        _add_input_args(sp)
        _add_privacy_args(sp, epsilon_required=mech.epsilon_required, with_person=True)
        add_param_options(sp, mech)
        _add_domain_args(sp)
        _add_series_args(sp)
        g = sp.add_argument_group("output")
        g.add_argument("-q", "--quiet", action="store_true", help="no progress or diagnostics")
        sp.set_defaults(func=functools.partial(_cmd_release, mech))


def _preview_options(sp, mech):
    g = sp.add_argument_group("privacy")
    for name in ("epsilon", "max_points_per_record", "max_memory_bytes"):
        _add_shared(g, name)
    add_param_options(sp, mech)
    _add_domain_args(sp, with_data_flag=False)
    _add_engine_arg(sp)
    sp.add_argument("--json", action="store_true", help="print the preview as JSON (for scripts)")
    sp.add_argument("--explain", action="store_true", help="say under every number what it means")
    sp.set_defaults(func=functools.partial(_cmd_preview, mech))


def _cmd_release(mech, args):
    from ..pipeline.run import public_plan, run_release
    from .outputs import write_outputs
    from .running import _prepare_run, report_run

    values = param_values(mech, args)
    contribution = dict(sensitivity=args.max_points_per_record, person=args.person,
                        max_points_per_person=args.max_points_per_person)
    # everything public is checked before the (possibly large) input is opened
    public_plan(mech, values, None, epsilon=args.epsilon, **contribution)

    def check(area):  # the grid, the noise bounds and the memory of the run, from the study area alone
        if area is not None:
            public_plan(mech, values, area, epsilon=args.epsilon, max_memory_bytes=args.max_memory, **contribution)

    series = series_values(args, contribution)
    prog, domain, table = _prepare_run(args, check, series=series)
    res = run_release(mech, table, {
        **values, **contribution, **series, "epsilon": args.epsilon, "domain": domain, "crs": args.crs,
        "seed": args.seed, "domain_from_data": args.domain_from_data, "unattended": args.unattended,
        "dataset": args.dataset, "ledger": args.ledger, "progress": prog, "max_memory_bytes": args.max_memory,
        "scheduler": args.scheduler if mech.reads == "counts" else None,
    })
    report_run(res, args, write_outputs(res, args))
    return 0


def series_values(args, contribution) -> dict:
    """The series options of the command line (empty without --time and its companions), checked before anything
    is opened: the periods from the public bounds, --append's file."""
    import os

    from ..errors import ParameterError
    from ..series.options import is_series, series_options

    v = {"time": args.time, "period": args.period, "period_start": args.period_start, "period_end": args.period_end,
         "timezone": args.timezone, "time_format": args.time_format, "person_accounting": args.person_accounting,
         "cumulative": bool(args.cumulative), "append": args.output[0] if args.append else None}
    if args.per_period_files and args.time is None:
        raise ParameterError("--per-period-files writes one file per period of a series: give --time and --period")
    if not is_series(v):
        return {}
    series_options({**v, **contribution})  # the periods and the options, before anything is read
    if args.append and not os.path.exists(args.output[0]):
        raise ParameterError(f"--append continues the series in {args.output[0]!r} (the first -o), which does not "
                             "exist: write the series first, without --append")
    return v


def _cmd_preview(mech, args):
    from ..domain import as_study_area
    from ..formats import check_engine
    from ..pipeline.run import run_preview
    from .show import format_preview

    if args.domain is None:
        as_study_area(None)  # the helpful message: a preview needs the public study area
    check_engine(args.engine)
    with _domain_engine(args.engine):
        p = run_preview(mech, {**param_values(mech, args), "epsilon": args.epsilon, "domain": args.domain,
                               "domain_crs": args.domain_crs, "crs": args.crs,
                               "sensitivity": args.max_points_per_record, "max_memory_bytes": args.max_memory})
    print(json.dumps(p, indent=2) if args.json else format_preview(p, explain=args.explain),
          end="\n" if args.json else "")
    return 0
