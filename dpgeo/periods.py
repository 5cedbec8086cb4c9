"""The periods of a map series: calendar periods between two public bounds, in one time zone.

A series (``time=``, ``period=``) releases one map per period. The periods
are **public**: they come from the period kind (``day``, ``week``,
``month``, ``quarter``, ``year``), the public bounds ``period_start``
(included) and ``period_end`` (excluded) and the time zone whose calendar
they follow, never from the data's first or last timestamp. A period with no
data is a period like any other: it gets its own DP release.

Periods follow the calendar of ``timezone`` (an IANA name such as
``"America/New_York"``; default ``"UTC"``): a month starts at local midnight
on its first day, a week on Monday (ISO 8601 weeks), a quarter in January,
April, July or October. The first and last periods are cut at the bounds when
the bounds are not period boundaries. Times without a zone (in the bounds and
in the data) are read as wall-clock times of ``timezone``.

Every instant is kept as whole seconds since 1970-01-01T00:00:00Z (int64), so
that a record's period is one ``searchsorted`` away and two series' periods
compare exactly in the ledger.

Examples
--------
>>> p = make_periods("month", "2014-04-01", "2014-10-01", "America/New_York")
>>> len(p), p.labels[:2], p.interval(0)
(6, ('2014-04', '2014-05'), ('2014-04-01T04:00:00Z', '2014-05-01T04:00:00Z'))
>>> p.index(np.array([p.bounds[0], p.bounds[1] - 1, p.bounds[-1]])).tolist()
[0, 0, -1]
>>> make_periods("week", "2014-04-01", "2014-04-15").labels  # cut at the bounds (Tuesday to Tuesday)
('2014-W14', '2014-W15', '2014-W16')
"""

from __future__ import annotations

import datetime as _dt
import numbers
import re
from dataclasses import dataclass

import numpy as np

from .errors import ParameterError
from .series_params import DEFAULT_TIMEZONE, PERIOD_KINDS

__all__ = ["PERIOD_KINDS", "MAX_PERIODS", "Periods", "count_periods", "make_periods", "parse_instant", "check_timezone",
           "iso_utc", "DEFAULT_TIMEZONE", "periods_from_metadata"]

#: The most periods one series may have (each is a release of its own: a grid, a layer, metadata).
MAX_PERIODS = 1000

_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)


def check_timezone(name):
    """The ``zoneinfo`` time zone called ``name`` (an IANA name such as ``"Europe/Paris"``), checked."""
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    if name is None:
        name = DEFAULT_TIMEZONE
    if not isinstance(name, str) or not name.strip():
        raise ParameterError(f"timezone must be an IANA time zone name such as 'UTC' or 'America/New_York', got "
                             f"{name!r}")
    try:
        return ZoneInfo(name.strip())
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise ParameterError(f"timezone {name!r} is not a time zone this system knows (an IANA name such as 'UTC', "
                             "'Europe/Berlin' or 'America/New_York')") from None


_BOUND = re.compile(r"^\s*(\d{4})(?:[-/](\d{1,2})(?:[-/](\d{1,2})"
                    r"(?:[T ](\d{1,2}):(\d{2})(?::(\d{2})(?:[.,](\d+))?)?)?)?)?"
                    r"\s*(Z|z|[+-]\d{2}(?::?\d{2})?)?\s*$")


def parse_instant(value, tz, what="a period bound") -> int:
    """Whole seconds since the epoch (UTC) of a public instant: ISO 8601 text, a date, a datetime or epoch seconds.

    Text and values without a zone are wall-clock times of ``tz``.

    Examples
    --------
    >>> from zoneinfo import ZoneInfo
    >>> parse_instant("2014-04-01", ZoneInfo("UTC")), parse_instant("2014-04-01T02:00+02:00", ZoneInfo("UTC"))
    (1396310400, 1396310400)
    >>> parse_instant("2014-04-01", ZoneInfo("America/New_York")) - 1396310400
    14400
    >>> parse_instant("2014-04", ZoneInfo("UTC")) == parse_instant("2014-04-01T00:00Z", ZoneInfo("UTC"))
    True
    """
    if isinstance(value, bool) or value is None:
        raise ParameterError(f"{what} must be a date or time (ISO 8601 text such as '2014-04-01'), got {value!r}")
    if isinstance(value, numbers.Real):
        if not np.isfinite(float(value)):
            raise ParameterError(f"{what} must be a finite number of seconds since 1970-01-01 UTC, got {value!r}")
        return int(np.floor(float(value)))
    if isinstance(value, np.datetime64):
        value = value.astype("datetime64[us]").astype(_dt.datetime)
    if hasattr(value, "to_pydatetime"):  # a pandas Timestamp
        value = value.to_pydatetime()
    if isinstance(value, _dt.datetime):
        dt = value if value.tzinfo is not None else value.replace(tzinfo=tz)
        return _seconds(dt)
    if isinstance(value, _dt.date):
        return _seconds(_dt.datetime(value.year, value.month, value.day, tzinfo=tz))
    if not isinstance(value, str):
        raise ParameterError(f"{what} must be a date or time (ISO 8601 text such as '2014-04-01'), got {value!r}")
    m = _BOUND.match(value)
    if not m:
        raise ParameterError(f"{what} {value!r} is not an ISO 8601 date or time (such as 2014, 2014-04, 2014-04-01 "
                             "or 2014-04-01T06:00:00Z)")
    y, mo, d, hh, mi, ss, frac, zone = m.groups()
    try:
        dt = _dt.datetime(int(y), int(mo or 1), int(d or 1), int(hh or 0), int(mi or 0), int(ss or 0),
                          int((frac or "0")[:6].ljust(6, "0")))
    except ValueError as exc:
        raise ParameterError(f"{what} {value!r} is not a valid date or time ({exc})") from None
    if zone:
        dt = dt.replace(tzinfo=_zone(zone))
    else:
        dt = dt.replace(tzinfo=tz)
    return _seconds(dt)


def _zone(text):
    if text in ("Z", "z"):
        return _dt.timezone.utc
    sign = -1 if text[0] == "-" else 1
    digits = text[1:].replace(":", "")
    hours, minutes = int(digits[:2]), int(digits[2:4] or 0)
    if hours > 23 or minutes > 59:
        raise ParameterError(f"the UTC offset {text!r} is out of range: an offset is -23:59 to +23:59")
    return _dt.timezone(sign * _dt.timedelta(minutes=hours * 60 + minutes))


def _seconds(dt) -> int:
    delta = dt - _EPOCH
    return delta.days * 86400 + delta.seconds


def iso_utc(seconds: int) -> str:
    """``2014-04-01T04:00:00Z`` for whole seconds since the epoch."""
    return (_EPOCH + _dt.timedelta(seconds=int(seconds))).strftime("%Y-%m-%dT%H:%M:%SZ")


def _local(seconds, tz):
    return (_EPOCH + _dt.timedelta(seconds=int(seconds))).astimezone(tz)


def _period_of(local: _dt.datetime, kind):
    """The first day of the calendar period that holds ``local`` (a date)."""
    d = local.date()
    if kind == "day":
        return d
    if kind == "week":
        return d - _dt.timedelta(days=d.weekday())
    if kind == "month":
        return d.replace(day=1)
    if kind == "quarter":
        return d.replace(month=3 * ((d.month - 1) // 3) + 1, day=1)
    return d.replace(month=1, day=1)


def _next(day: _dt.date, kind) -> _dt.date:
    if kind == "day":
        return day + _dt.timedelta(days=1)
    if kind == "week":
        return day + _dt.timedelta(days=7)
    months = {"month": 1, "quarter": 3, "year": 12}[kind]
    m = day.month - 1 + months
    return _dt.date(day.year + m // 12, m % 12 + 1, 1)


def _label(day: _dt.date, kind) -> str:
    if kind == "day":
        return day.isoformat()
    if kind == "week":
        y, w, _ = day.isocalendar()
        return f"{y}-W{w:02d}"
    if kind == "month":
        return f"{day.year}-{day.month:02d}"
    if kind == "quarter":
        return f"{day.year}-Q{(day.month - 1) // 3 + 1}"
    return str(day.year)


@dataclass(frozen=True)
class Periods:
    """The public periods of a series.

    Attributes
    ----------
    kind : str
        One of :data:`PERIOD_KINDS`.
    timezone : str
        The IANA time zone whose calendar the periods follow.
    bounds : tuple of int
        ``len(self) + 1`` instants (seconds since the epoch, UTC): period ``i`` is
        ``[bounds[i], bounds[i + 1])``.
    labels : tuple of str
        ``2014-04-01`` (day), ``2014-W14`` (ISO week), ``2014-04``, ``2014-Q2``, ``2014``.
    """

    kind: str
    timezone: str
    bounds: tuple
    labels: tuple

    def __len__(self):
        return len(self.labels)

    @property
    def start(self) -> int:
        return self.bounds[0]

    @property
    def end(self) -> int:
        return self.bounds[-1]

    def index(self, seconds) -> np.ndarray:
        """The period of each instant (int64 seconds since the epoch, UTC); -1 outside the bounds."""
        t = np.asarray(seconds, dtype=np.int64)
        b = np.asarray(self.bounds, dtype=np.int64)
        i = np.searchsorted(b, t, side="right") - 1
        i[(t < b[0]) | (t >= b[-1])] = -1
        return i.astype(np.int64)

    def interval(self, i) -> tuple[str, str]:
        """``(start, end)`` of period ``i`` as ISO 8601 UTC text (end excluded)."""
        return iso_utc(self.bounds[i]), iso_utc(self.bounds[i + 1])

    def pairs(self) -> list:
        """``[(start, end), ...]`` of every period, in seconds since the epoch (UTC)."""
        return [(self.bounds[i], self.bounds[i + 1]) for i in range(len(self))]

    def to_metadata(self) -> dict:
        """What a release's metadata says of its periods (public)."""
        return {"period": self.kind, "timezone": self.timezone, "period_start": iso_utc(self.start),
                "period_end": iso_utc(self.end), "n_periods": len(self)}


def make_periods(period, period_start, period_end, timezone=None) -> Periods:
    """The periods of kind ``period`` from ``period_start`` (included) to ``period_end`` (excluded).

    Parameters
    ----------
    period : {"day", "week", "month", "quarter", "year"}
    period_start, period_end : str, date, datetime or number
        The public bounds: ISO 8601 text (``"2014-04-01"``, ``"2014-04-01T00:00:00-04:00"``), a date, a
        datetime or seconds since the epoch. Without a zone, a wall-clock time of ``timezone``.
    timezone : str, optional
        IANA time zone of the calendar (default UTC).

    Raises
    ------
    ParameterError
        An unknown period kind or time zone, a bound that does not parse, an end not after the start, or more
        than :data:`MAX_PERIODS` periods.
    """
    _check_kind_and_bounds(period, period_start, period_end)
    tz = check_timezone(timezone)
    name = getattr(tz, "key", None) or str(tz)
    start = parse_instant(period_start, tz, "period_start")
    end = parse_instant(period_end, tz, "period_end")
    if end <= start:
        raise ParameterError(f"period_end ({iso_utc(end)}) must be after period_start ({iso_utc(start)}); the end "
                             "is excluded")
    try:
        bounds, labels = _list_periods(period, period_start, period_end, start, end, tz)
    except (OverflowError, ValueError) as exc:  # a calendar beyond the year 9999
        if isinstance(exc, ParameterError):
            raise
        raise ParameterError(f"the periods of {period_start} to {period_end} by {period} run past the last date "
                             f"this calendar knows ({_LAST_DAY}); give bounds before it") from None
    return Periods(period, name, tuple(bounds), tuple(labels))


#: The last day a period may end on (Python's calendar ends in 9999).
_LAST_DAY = "9999-12-31"


def _list_periods(period, period_start, period_end, start, end, tz):
    bounds, labels = [start], []
    day = _period_of(_local(start, tz), period)
    while True:
        labels.append(_label(day, period))
        day = _next(day, period)
        nxt = _seconds(_dt.datetime(day.year, day.month, day.day, tzinfo=tz))
        if nxt >= end:
            bounds.append(end)
            break
        bounds.append(nxt)
        if len(labels) >= MAX_PERIODS:
            raise ParameterError(f"{period_start} to {period_end} by {period} is more than {MAX_PERIODS} periods; "
                                 "use a longer period or shorter bounds")
    return bounds, labels


def _check_kind_and_bounds(period, period_start, period_end) -> None:
    """A known period kind and both public bounds given (they are never taken from the data)."""
    if period not in PERIOD_KINDS:
        raise ParameterError(f"period must be one of {', '.join(PERIOD_KINDS)}, got {period!r}")
    if period_start is None or period_end is None:
        raise ParameterError("a series needs public bounds: period_start and period_end (--period-start, "
                             "--period-end), e.g. 2014-04-01 and 2014-10-01; they are never taken from the data")


def count_periods(period, period_start, period_end, timezone=None) -> int:
    """How many periods :func:`make_periods` would make, in O(1): no period is listed (a service checks a
    request's size with it before it accepts the request). Raises as :func:`make_periods` does for a bad kind,
    zone or bound, or an end not after the start; the bound on the count is the caller's.

    Examples
    --------
    >>> count_periods("day", "2017-01-01", "2019-09-28"), count_periods("month", "2017-01-15", "2017-03-01")
    (1000, 2)
    >>> count_periods("week", "2017-01-01", "2017-01-10", "America/Chicago")  # a Sunday, then two Mondays
    3
    """
    _check_kind_and_bounds(period, period_start, period_end)
    tz = check_timezone(timezone)
    start = parse_instant(period_start, tz, "period_start")
    end = parse_instant(period_end, tz, "period_end")
    if end <= start:
        raise ParameterError(f"period_end ({iso_utc(end)}) must be after period_start ({iso_utc(start)}); the end "
                             "is excluded")
    try:
        a, b = _period_of(_local(start, tz), period), _period_of(_local(end - 1, tz), period)
    except (OverflowError, ValueError):
        raise ParameterError(f"the periods of {period_start} to {period_end} by {period} run past the last date "
                             f"this calendar knows ({_LAST_DAY}); give bounds before it") from None
    if period in ("day", "week"):
        return (b - a).days // (1 if period == "day" else 7) + 1
    months = {"month": 1, "quarter": 3, "year": 12}[period]
    return ((b.year - a.year) * 12 + b.month - a.month) // months + 1


def periods_from_metadata(md: dict) -> Periods:
    """The periods a series' metadata describes (``period``, ``timezone``, ``period_start``, ``period_end``)."""
    return make_periods(md["period"], md["period_start"], md["period_end"], md.get("timezone"))

