"""The options of a map series, checked from public inputs alone, and how a series is accounted for.

Every declared mechanism runs as a series when a release is given ``time``
(the time column, or the times of points in memory) and ``period``
(``day``, ``week``, ``month``, ``quarter``, ``year``) between the public
bounds ``period_start`` and ``period_end`` (:mod:`dpgeo.periods`). The one
runner (:func:`dpgeo.pipeline.run.run_release`) reads the input once and
releases each period (or, with ``cumulative=True``, the running totals of
the periods: :mod:`dpgeo.pipeline.steps`).

What a series costs (docs/privacy.md §6, "Series"): one record lies in one
period, so under the record relation the periods compose in parallel and the
series costs its ε once (a record of ``c > 1`` points, whose points may lie in
several periods, only with a mechanism linear in the contribution); a later period appended at the same or a smaller ε
costs nothing more. Under the person relation the cap ``K`` counts either
over the whole series (``person_accounting="series"``, the default: the cap is
drawn in the one pass over all periods, the series costs ε once, and no period
can be appended) or in each period (``"period"``: every period costs ε, up to
the dataset's total).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..counting.times import TimeSpec, check_time_format
from ..errors import ParameterError
from ..periods import make_periods
from ..series_params import PERSON_ACCOUNTING, series_offered

__all__ = ["SERIES_KEYS", "SERIES_DEFAULTS", "PERSON_ACCOUNTING", "SeriesOptions", "series_options", "is_series",
           "composition"]

#: The keyword arguments of a series, besides the common ones (every release entry point takes them), with their
#: defaults as declared in :data:`dpgeo.series_params.SERIES_PARAMS`.
SERIES_DEFAULTS = {p.name: p.default for p in series_offered("api")}
SERIES_KEYS = tuple(SERIES_DEFAULTS)


def is_series(values: dict) -> bool:
    """Whether the keyword arguments ask for a series (any series keyword away from its default)."""
    for k, d in SERIES_DEFAULTS.items():
        v = values.get(k, d)
        if v is None or (isinstance(v, (str, bool)) and v == d):
            continue
        if k == "person_accounting" and v in (None, "series"):
            continue
        return True
    return False


@dataclass(frozen=True)
class SeriesOptions:
    """The checked, public options of a series."""

    time: TimeSpec
    times: object
    person_accounting: str
    append: object
    cumulative: bool

    @property
    def periods(self):
        return self.time.periods


def series_options(values: dict) -> SeriesOptions:
    """The series options of ``values`` checked (public inputs only): the periods come from the bounds alone."""
    time = values.get("time")
    if time is None:
        given = [k for k in SERIES_KEYS if k != "time" and values.get(k) not in (None, False, "series")]
        raise ParameterError(f"{', '.join(given)} make a series, which needs time=: the column that holds each "
                             "record's time (--time COLUMN), or the times of points given in memory")
    if values.get("period") is None:
        raise ParameterError("a series needs period= (--period): day, week, month, quarter or year")
    periods = make_periods(values["period"], values.get("period_start"), values.get("period_end"),
                           values.get("timezone"))
    fmt = check_time_format(values.get("time_format"))
    acc = values.get("person_accounting") or "series"
    if acc not in PERSON_ACCOUNTING:
        raise ParameterError(f"person_accounting must be one of {', '.join(PERSON_ACCOUNTING)}, got {acc!r}")
    if acc == "period" and values.get("person") is None:
        raise ParameterError("person_accounting='period' counts each person's cap in each period: it needs person= "
                             "and max_points_per_person=")
    cumulative = values.get("cumulative") or False
    if not isinstance(cumulative, bool):
        raise ParameterError(f"cumulative must be true or false, got {cumulative!r}")
    if isinstance(time, str):
        if not time.strip():
            raise ParameterError("time must name the column that holds each record's time")
        column, times = time, None
    else:
        column, times = None, time
    return SeriesOptions(TimeSpec(column, periods, fmt), times, acc, values.get("append"), cumulative)


def composition(c, acc) -> tuple:
    """``(composition, unit)`` of a series with contribution bound ``c`` and person accounting ``acc``: how its
    periods compose in the ledger (:data:`dpgeo.budget.records.COMPOSITIONS`) and its privacy unit."""
    if c.cap is None:
        return "parallel", f"record:{c.sensitivity}"
    return ("one-pass" if acc == "series" else "sequential"), f"person:{c.cap}"
