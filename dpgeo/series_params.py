"""The options of a map series, declared once for every front end.

Every release of a mechanism that reads data can be a series: one release per
public period (:mod:`dpgeo.series.options`, run by :mod:`dpgeo.pipeline.steps`). Its options — the time column,
the period kind, the public bounds, the time zone, the time format, how a
person's cap counts, continuing an earlier series, one file per period and
running totals — are declared here as :class:`~dpgeo.declare.Param`, with one
title, one help text, their choices and defaults, and where they are offered.
The command line (:mod:`dpgeo.cli.args`), the service's process inputs
(:mod:`dpgeo.server.processes.declared`), the QGIS parameters
(``qgis_plugin/dpgeo_qgis/parameters.py``) and the entry points' documentation
(:mod:`dpgeo.generators.docs`, ``docs/parameters.md``) read them from here; what
stays specific to a front end is its widget or its value's form (a field of
the input layer in QGIS, a date-time widget for the bounds, ``--append`` as a
switch on the first ``-o`` file, the service's patterns and lengths).

Like :mod:`dpgeo.declare`, this module imports nothing of the data side:
building the command-line parser reads it.

Examples
--------
>>> series_param("period").choices
('day', 'week', 'month', 'quarter', 'year')
>>> series_param("person_accounting").default
'series'
"""

from __future__ import annotations

from .declare import Param, named, offered_on

__all__ = ["PERIOD_KINDS", "PERSON_ACCOUNTING", "DEFAULT_TIMEZONE", "SERIES_PARAMS", "series_param",
           "series_offered", "states_default"]

#: The period kinds a series may have, shortest first.
PERIOD_KINDS = ("day", "week", "month", "quarter", "year")
#: How the per-person cap counts in a series: over the whole series, or in each period.
PERSON_ACCOUNTING = ("series", "period")
#: The time zone of the calendar, and of times written without a zone, unless one is given.
DEFAULT_TIMEZONE = "UTC"

_ALL = frozenset({"api", "cli", "qgis", "service"})
_NOT_SERVICE = frozenset({"api", "cli", "qgis"})  # the service takes them from the dataset's configuration

#: The options of a map series, in the order every front end shows them.
SERIES_PARAMS = (
    Param("time", "text", "Time column (makes a map series)",
          "The column holding each record's time: makes the run a series, one release per period, all from one "
          "reading of the data. ISO 8601 text (year first, with or without a zone, e.g. 2014-04-01T00:11:00Z or "
          "2014/4/1 00:11), epoch seconds or timestamps; records without a usable time, or outside the bounds, are "
          "dropped and counted for the data owner.",
          default=None, qgis_name="TIME_FIELD", fronts=_ALL, none_means="none"),
    Param("period", "choice", "Period of the series",
          "The length of a period (weeks start on Monday); needs the time column.",
          choices=PERIOD_KINDS, labels=tuple(k.capitalize() for k in PERIOD_KINDS), default=None, fronts=_ALL,
          none_means="none"),
    Param("period_start", "text", "Series start (public, included)",
          "The public start of the series, included (ISO 8601, e.g. 2014-04-01): the periods come from the start "
          "and the end, never from the data, and a period without data is released like any other.",
          default=None, fronts=_ALL, none_means="none"),
    Param("period_end", "text", "Series end (public, excluded)",
          "The public end of the series, excluded (ISO 8601, e.g. 2014-10-01).",
          default=None, fronts=_ALL, none_means="none"),
    Param("timezone", "text", "Time zone of the calendar (IANA name)",
          "The IANA time zone whose calendar the periods follow, and in which times written without a zone are "
          "read, e.g. America/New_York.",
          default=None, advanced=True, fronts=_NOT_SERVICE, none_means=DEFAULT_TIMEZONE),
    Param("time_format", "text", "Time format of text times (strptime)",
          "The strptime format of text times that are not ISO 8601, e.g. '%m/%d/%Y %H:%M:%S' (%z reads a zone).",
          default=None, advanced=True, fronts=_NOT_SERVICE, none_means="ISO 8601"),
    Param("person_accounting", "choice", "Person cap in a series",
          "With a person column: 'series' keeps at most K points per person over the whole series, and the series "
          "costs ε once; 'period' keeps K points per person in each period, and every period costs ε.",
          choices=PERSON_ACCOUNTING,
          labels=("K points per person over the whole series (the series costs ε once)",
                  "K points per person in each period (each period costs ε)"),
          default="series", advanced=True, fronts=_ALL),
    Param("append", "text", "Series to continue",
          "Continue an earlier series with later periods (same mechanism, parameters, study area and privacy "
          "unit); per record, periods after the series' end at its ε or less cost nothing more, and the result "
          "holds every period.",
          default=None, fronts=frozenset({"api", "cli", "service"}), none_means="none"),
    Param("per_period_files", "flag", "One file per period",
          "Also write one file per period beside each -o (series_2014-04.gpkg, ...).",
          default=False, fronts=frozenset({"cli"})),
    Param("cumulative", "flag", "Running totals of the cell counts (binary-tree mechanism)",
          "Release running totals of the cell counts over the periods (binary-tree mechanism) instead of the "
          "mechanism's layer per period. Up to about two thousand periods, summing the per-period layers' "
          "counts is more accurate on average (docs/results.md §6).",
          default=False, advanced=True, fronts=_ALL),
)


def series_param(name) -> Param:
    """The declared series option called ``name``."""
    return named(SERIES_PARAMS, name)


def series_offered(front) -> tuple:
    """The series options offered on ``front`` (``"api"``, ``"cli"``, ``"qgis"``, ``"service"``)."""
    return offered_on(SERIES_PARAMS, front)


def states_default(p) -> bool:
    """Whether a front end's help states ``p``'s default: not for a switch, nor for an option whose absence
    simply means none (no series, no bound, nothing to continue)."""
    return p.kind != "flag" and not (p.default is None and p.none_means == "none")
