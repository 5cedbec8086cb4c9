"""``dpgeo budget``: declare each dataset's total privacy budget and show what its releases spent.

Reads and writes the same ledger as the run commands, the Python API and the
QGIS plugin (``--ledger PATH``, else ``$DPGEO_LEDGER``, else the user's data
folder). Errors are one line and exit 2, like every dpgeo command.
"""

from __future__ import annotations

import argparse
import json
import sys

__all__ = ["register"]

_EXAMPLES = """\
examples:
  # declare the police-stop data once: its name, the file it lives in and its total budget
  dpgeo budget declare minneapolis-stops --file sample_layers/minneapolis_police_stops_2017.gpkg --total 3
  # change the total later
  dpgeo budget set minneapolis-stops --total 4
  # every release of it, what is spent and what is left
  dpgeo budget show minneapolis-stops
  # one line per dataset; every release of every dataset
  dpgeo budget show
  dpgeo budget history --json
  # once datasets are declared: refuse any run that is not charged to one (checked before a record is read)
  dpgeo budget policy --require-declared

The ledger is --ledger PATH, else $DPGEO_LEDGER, else ledger.sqlite in your user data folder.
"""


def register(subparsers):
    """Add ``budget declare|set|show|history|policy`` to the ``dpgeo`` command's subparsers."""
    from ..budget import DEFAULT_LOCK_TIMEOUT_S

    common = argparse.ArgumentParser(add_help=False)
    g = common.add_argument_group("ledger")
    g.add_argument("--ledger", default=None, metavar="PATH",
                   help="ledger file (default: $DPGEO_LEDGER, else ledger.sqlite in your user data folder), or a "
                        "ledger on PostgreSQL: postgresql://USER@HOST/DATABASE (the password from ~/.pgpass)")
    g.add_argument("--lock-timeout", type=float, default=DEFAULT_LOCK_TIMEOUT_S, metavar="SECONDS",
                   help=f"wait this long for another run's lock on the ledger (default {DEFAULT_LOCK_TIMEOUT_S:g})")
    g.add_argument("--json", action="store_true", help="print JSON")

    bp = subparsers.add_parser(
        "budget", help="privacy budget of each dataset: declare it and its total, show its releases",
        description="The privacy-budget ledger: every release of a dataset spends part of its total budget "
                    "(sequential composition); a release that would exceed the total is refused.",
        epilog=_EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    bsub = bp.add_subparsers(dest="budget_command", metavar="ACTION", parser_class=type(bp))
    bp.set_defaults(func=lambda args: _usage(bp))

    dp = bsub.add_parser(
        "declare", parents=[common], help="declare a dataset once: its name, its file(s) and its total budget",
        description="Declare dataset NAME: the file(s) it lives in and the total epsilon all its releases together "
                    "may spend. Every run on the content of these files, under any file name or in any folder, and "
                    "from any front end, is then charged to NAME. Declaring again is safe: a total already declared "
                    "is kept (change it with: dpgeo budget set).")
    dp.add_argument("name", metavar="NAME", help="dataset name")
    dp.add_argument("--file", dest="files", action="append", required=True, metavar="FILE",
                    help="a file (or a glob or folder of Parquet files) the dataset lives in; repeat for several")
    dp.add_argument("--total", default=None, metavar="EPSILON",
                    help="total ε of all releases together (required the first time; e.g. 2, 0.5, 1/3)")
    dp.add_argument("--total-delta", default="0", metavar="DELTA", help="total δ (default 0)")
    dp.set_defaults(func=_cmd_declare)

    sp = bsub.add_parser("set", parents=[common], help="declare (or change) a dataset's total budget",
                         description="Declare the total ε (and δ) that all releases of NAME together may spend.")
    sp.add_argument("name", metavar="NAME", help="dataset name (or the key a run without --dataset was charged to)")
    sp.add_argument("--total", required=True, metavar="EPSILON",
                    help="total ε of all releases together (e.g. 2, 0.5, 1/3)")
    sp.add_argument("--total-delta", default="0", metavar="DELTA",
                    help="total δ (default 0: only pure ε-DP releases fit)")
    sp.set_defaults(func=_cmd_set)

    sh = bsub.add_parser("show", parents=[common], help="a dataset's releases, spent and left (all datasets: a summary)",
                         description="Each release of NAME (date, release id, mechanism, ε, δ, who, status, outputs) "
                                     "and the total spent and left. Without NAME, one line per dataset.")
    sh.add_argument("name", nargs="?", metavar="NAME", help="dataset name")
    sh.set_defaults(func=_cmd_show)

    hi = bsub.add_parser("history", parents=[common], help="every release of every dataset",
                         description="Every dataset in the ledger with each of its releases.")
    hi.set_defaults(func=_cmd_history)

    po = bsub.add_parser(
        "policy", parents=[common], help="whether every run must be charged to a declared dataset",
        description="The ledger's policy. --require-declared: once any dataset has a declared total, a run that is "
                    "charged to none (an input that is not a declared file, without --dataset NAME of a declared "
                    "dataset) is refused before any record is read. --allow-undeclared: such runs are charged to a "
                    "key of their own, without a limit, and warned about. --default: strict for --unattended runs "
                    "and dpgeo serve, lenient otherwise. Without an option, print the policy.")
    how = po.add_mutually_exclusive_group()
    for flag, value in (("--require-declared", "require-declared"), ("--allow-undeclared", "allow-undeclared"),
                        ("--default", None)):
        how.add_argument(flag, dest="policy", action="store_const", const=value or "default")
    po.set_defaults(func=_cmd_policy, policy=False)

    mi = bsub.add_parser("migrate", parents=[common], help="copy a SQLite ledger into a ledger on PostgreSQL",
                         description="Copy every dataset, release and declared file of the SQLite ledger FILE into "
                                     "the PostgreSQL ledger given by --ledger postgresql://USER@HOST/DATABASE (or "
                                     "DPGEO_LEDGER), which must hold no release yet. The file is left as it was: "
                                     "point every dpgeo at the new ledger afterwards (docs/service.md).")
    mi.add_argument("file", metavar="FILE", help="the SQLite ledger to copy")
    mi.set_defaults(func=_cmd_migrate)


def _cmd_migrate(args):
    counts = _ledger(args).copy_from(args.file)
    if args.json:
        print(json.dumps(counts))
    else:
        print("copied into the PostgreSQL ledger: " + ", ".join(f"{n} {t}" for t, n in counts.items()))
    return 0


def _usage(parser):
    parser.print_help(sys.stderr)
    return 2


def _ledger(args):
    from ..budget import Ledger

    return Ledger(args.ledger, timeout=args.lock_timeout)


def _num(value):
    from ..budget import format_exact

    return "-" if value is None else format_exact(value)


def _summary_lines(b):
    if b.total_epsilon is None:
        total = ("none declared: nothing limits its spending (releases are recorded, none refused; declare one with: "
                 "dpgeo budget declare NAME --file FILE --total EPSILON)")
        left = "no total declared"
    else:
        total = (f"epsilon {_num(b.total_epsilon)}, delta {_num(b.total_delta)} "
                 f"(declared {b.total_set_date} by {b.total_set_by})")
        left = f"epsilon {_num(b.left_epsilon)}, delta {_num(b.left_delta)}"
    n = b.n_charged
    return [f"dataset: {b.dataset}",
            f"total:   {total}",
            f"spent:   epsilon {_num(b.spent_epsilon)}, delta {_num(b.spent_delta)} ({n} release{'s' * (n != 1)})",
            f"left:    {left}"]


_LEGEND = {
    "incomplete": "incomplete: charged, not finished (running now, or stopped by a crash)",
    "spent, no release": "spent, no release: charged, stopped after noise may have been drawn; nothing released",
    "cancelled": "cancelled: stopped before any noise was drawn, not charged",
}


def _table(rows):
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    return ["  ".join(c.ljust(w) for c, w in zip(r[:-1], widths)) + "  " + r[-1] for r in rows]


def _releases_lines(b):
    from ..budget import STATUS_LABELS

    if not b.releases:
        return ["no releases recorded"]
    rows = [("date (UTC)", "release id", "mechanism", "epsilon", "delta", "who", "status", "outputs")]
    rows += [(r.date, r.release_id, r.mechanism, _num(r.epsilon), _num(r.delta), r.analyst, STATUS_LABELS[r.status],
              ", ".join(r.outputs) or "-") for r in b.releases]
    lines = _table(rows)
    seen = {row[6] for row in rows[1:]}
    lines += [f"  {text}" for key, text in _LEGEND.items() if key in seen]
    for r in b.releases:
        if r.composition is None:
            continue
        used = [p for p in r.periods if p.status != "cancelled"]
        span = f"{used[0].label} to {used[-1].label}" if used else "none"
        cost = {"parallel": "epsilon once: one record lies in one period",
                "one-pass": "epsilon once: at most K points per person over the whole series",
                "sequential": "epsilon for every period: at most K points per person in each"}[r.composition]
        lines.append(f"series {r.release_id}: {len(used)} period(s), {span}; {r.composition} ({cost}); spends "
                     f"epsilon {_num(r.cost[0])}")
        lines += [f"    {p.label}  {p.to_dict()['period_start']} to {p.to_dict()['period_end']}  epsilon "
                  f"{_num(p.epsilon)}  {STATUS_LABELS[p.status]}" + ("" if p.run_id == r.release_id else
                                                                      f"  (appended by {p.run_id})")
                  for p in r.periods]
    return lines


def _print_json(ledger, **payload):
    # str(): a ledger on PostgreSQL prints as "(PostgreSQL)" (json.dumps would write its connection string)
    print(json.dumps({"ledger": str(ledger.path), **payload}, indent=2, ensure_ascii=False))


def _cmd_set(args):
    ledger = _ledger(args)
    b = ledger.set_total(args.name, args.total, total_delta=args.total_delta)
    if args.json:
        _print_json(ledger, dataset=b.to_dict(releases=False))
    else:
        print("\n".join([f"ledger:  {ledger.path}"] + _summary_lines(b)))
    if b.spent_epsilon > b.total_epsilon or b.spent_delta > b.total_delta:
        print(f"dpgeo: note: {args.name!r} has already spent more than the new total: no further release fits",
              file=sys.stderr)
    return 0


def _cmd_declare(args):
    ledger = _ledger(args)
    b, notes = ledger.declare(args.name, args.files, total_epsilon=args.total, total_delta=args.total_delta)
    if args.json:
        _print_json(ledger, dataset=b.to_dict(releases=False), files=_files_json(ledger, b.dataset))
    else:
        print("\n".join([f"ledger:  {ledger.path}"] + _summary_lines(b) + _files_lines(ledger, b.dataset)))
    for n in notes:
        print(f"dpgeo: note: {n}", file=sys.stderr)
    return 0


def _files_lines(ledger, name):
    rows = ledger.files(name)
    return [f"{'file:' if i == 0 else '':8} {path}{'' if declared else '  (seen in a run without a name)'}"
            for i, (path, declared, _) in enumerate(rows)]


def _files_json(ledger, name):
    return [{"path": p, "declared": d, "size_bytes": n} for p, d, n in ledger.files(name)]


def _cmd_policy(args):
    ledger = _ledger(args)
    if args.policy:
        policy = ledger.set_policy(None if args.policy == "default" else args.policy)
    else:
        policy = ledger.policy()
    meaning = {"require-declared": "every run must be charged to a declared dataset (refused before reading)",
               "allow-undeclared": "a run may be charged to an undeclared key (unlimited, warned about)",
               None: "strict for --unattended runs and dpgeo serve, lenient otherwise"}[policy]
    if args.json:
        _print_json(ledger, policy=policy or "default", meaning=meaning)
    else:
        print(f"ledger:  {ledger.path}\npolicy:  {policy or 'default'}: {meaning}")
    return 0


def _cmd_show(args):
    ledger = _ledger(args)
    if args.name is None:
        budgets = ledger.history()
        if args.json:
            _print_json(ledger, datasets=[b.to_dict(releases=False) for b in budgets])
            return 0
        lines = [f"ledger: {ledger.path}"]
        if not budgets:
            lines.append("no datasets recorded yet")
        else:
            rows = [("dataset", "releases", "spent epsilon", "total epsilon", "left epsilon", "spent delta",
                     "total delta")]
            rows += [(b.dataset, str(b.n_charged), _num(b.spent_epsilon), _num(b.total_epsilon), _num(b.left_epsilon),
                      _num(b.spent_delta), _num(b.total_delta)) for b in budgets]
            lines += _table(rows)
        print("\n".join(lines))
        return 0
    names = ledger.datasets()
    if args.name not in names:
        from ..errors import ParameterError

        known = ", ".join(repr(n) for n in names) if names else "none yet"
        raise ParameterError(f"dataset {args.name!r} is not in the ledger {ledger.path} (datasets there: {known})")
    b = ledger.budget(args.name)
    if args.json:
        _print_json(ledger, dataset=b.to_dict(), files=_files_json(ledger, b.dataset))
    else:
        print("\n".join([f"ledger:  {ledger.path}"] + _summary_lines(b) + _files_lines(ledger, b.dataset) + [""]
                        + _releases_lines(b)))
    return 0


def _cmd_history(args):
    ledger = _ledger(args)
    budgets = ledger.history()
    if args.json:
        _print_json(ledger, datasets=[b.to_dict() for b in budgets])
        return 0
    lines = [f"ledger: {ledger.path}"]
    if not budgets:
        lines.append("no datasets recorded yet")
    for b in budgets:
        lines += [""] + _summary_lines(b) + _releases_lines(b)
    print("\n".join(lines))
    return 0
