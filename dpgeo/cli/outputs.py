"""Outputs of a run: checked before any data is read, written from one release, recorded in the ledger."""

from __future__ import annotations

import argparse
import os

from ..formats import output_driver

__all__ = ["check_output_path", "check_output_paths", "check_out_crs", "output_crs_for", "write_outputs",
           "budget_line"]


def check_output_path(path, args=None):
    """Fail before reading any data if the output cannot be written (format, folder, CRS, basemap)."""
    from ..io.files import check_output

    a = args if args is not None else argparse.Namespace()
    check_output(path, crs=output_crs_for(path, getattr(a, "out_crs", None)), basemap=_basemap_for(path, a),
                 attribution=_basemap_for(path, a, "basemap_attribution"), title=getattr(a, "title", None))


def check_output_paths(paths, args=None):
    """Check every ``-o`` before any data is read: none may replace an input (the private input, the study area
    file, the ledger, a release being exported), and the same file may not be named twice."""
    from ..errors import OutputError

    if (getattr(args, "basemap", None) is not None or getattr(args, "basemap_attribution", None) is not None) \
            and all(output_driver(p) != "HTML" for p in paths):
        from ..io.files import check_output

        # says that a basemap is drawn only on an HTML map ("none" and the default pass)
        check_output(paths[0], basemap=args.basemap, attribution=args.basemap_attribution)
    from ..io.paths import check_not_input, protected_files
    from ..release import ledger_file

    protected = protected_files(getattr(args, "input", None), domain=getattr(args, "domain", None),
                                ledger_file=ledger_file(getattr(args, "ledger", None)),
                                release=getattr(args, "release", None))
    seen = {}
    for p in paths:
        if output_driver(p) == "PostGIS":  # a table: valid, reachable, new (or --replace); never named with its host
            from ..io.postgis import check_postgis_output, postgis_label

            check_output_path(p, args)
            check_postgis_output(p, replace=bool(getattr(args, "replace", False)))
            if postgis_label(p) in seen:
                raise OutputError(f"{postgis_label(p)} is given twice as an output (-o); name each output once")
            seen[postgis_label(p)] = p
            continue
        check_not_input(p, protected)
        check_output_path(p, args)
        key = os.path.normcase(os.path.realpath(p))
        if key in seen:
            raise OutputError(f"{p!r} is given twice as an output (-o); name each output file once")
        seen[key] = p


def output_crs_for(path, out_crs):
    """``--out-crs`` applies to the outputs that have a CRS of choice; GeoJSON and HTML are always EPSG:4326."""
    return None if output_driver(path) in ("GeoJSON", "HTML") else out_crs


def _basemap_for(path, args, name="basemap"):
    """``--basemap`` (default OpenStreetMap's tiles) and its attribution go to the HTML outputs only."""
    if output_driver(path) != "HTML":
        return None
    value = getattr(args, name, None)
    return "osm" if name == "basemap" and value is None else value


def check_out_crs(paths, out_crs):
    """Refuse ``--out-crs`` when no output can take it (all GeoJSON), before any data is read."""
    if out_crs is not None and all(output_crs_for(p, out_crs) is None for p in paths):
        from ..errors import OutputError

        raise OutputError("GeoJSON output is always EPSG:4326 (RFC 7946); drop --out-crs or also write a .gpkg")


def write_outputs(res, args):
    """Write the one release to every ``-o`` (free: post-processing) and record the files in the ledger."""
    # each file is recorded with the release in the ledger as it is written (Release.to_file)
    written = []
    for out in args.output:
        kw = dict(crs=output_crs_for(out, args.out_crs), engine=args.engine, basemap=_basemap_for(out, args),
                  attribution=_basemap_for(out, args, "basemap_attribution"), title=getattr(args, "title", None))
        if output_driver(out) == "PostGIS":
            kw["replace"] = bool(getattr(args, "replace", False))
        written.append(res.to_file(out, **kw))
        if getattr(args, "per_period_files", False) and hasattr(res, "period_files"):
            written += res.period_files(out, **kw)
    return written


def budget_line(res) -> str | None:
    """One line for the owner on the dataset's privacy budget after a release (None when nothing was charged)."""
    from ..budget import format_exact

    rec = res.ledger_record
    if rec is None:
        return None
    name, spent, total = rec["dataset"], format_exact(rec["spent_epsilon"]), rec["total_epsilon"]
    if total is None:
        return f"privacy budget of dataset {name!r}: epsilon {spent} spent so far, no total declared"
    left = max(total - rec["spent_epsilon"], 0)
    return f"privacy budget of dataset {name!r}: epsilon {spent} of {format_exact(total)} spent, {format_exact(left)} left"

