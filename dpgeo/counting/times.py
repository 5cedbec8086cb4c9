"""The time of each record, read beside its coordinates, and the public period it falls in.

A series (:mod:`dpgeo.periods`) reads one more column of the private input:
the record's time. Each batch's time column is turned into whole seconds
since the epoch (UTC) and then into the index of the public period that holds
it (:meth:`dpgeo.periods.Periods.index`); a record without a usable time is
dropped and counted, never an error, by reason:

* ``missing_time`` — the time is null or empty;
* ``unparsed_time`` — it does not read as a time;
* ``time_outside_bounds`` — it lies before ``period_start`` or at/after ``period_end``.

What is read as a time:

* text in ISO 8601 order, year first: ``2014-04-01``, ``2014-04-01T00:11``,
  ``2014-04-01 00:11:00.5``, ``2014/4/1 00:11:00`` (``-`` or ``/`` between
  the parts), with a zone (``Z``, ``+02``, ``+0200``, ``-04:00``) or without;
  or a number (epoch seconds) written as text;
* with ``time_format`` (``strptime`` codes, e.g. ``"%m/%d/%Y %H:%M"``), text
  in that format instead (``%z`` reads a zone);
* numbers: seconds since 1970-01-01T00:00:00Z;
* Arrow/pandas timestamps (with a zone: that instant; without: wall-clock
  time) and dates (midnight).

A time without a zone is a wall-clock time of the series' ``timezone``
(default UTC). A wall-clock time that the change to daylight-saving time
skips is moved forward by the gap; one that the change back repeats is taken
at its first (daylight-saving) occurrence.
A wall-clock time of a zone other than UTC must lie in the years 1678–2261
(where pandas' time zones end); one outside is ``unparsed_time``, for that
record alone: each record's time is read on its own, and nothing about one
record changes how the others of its batch are read.

Nothing here shows a value of a record: messages name the column and counts.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import InputError, ParameterError
from ..periods import Periods

__all__ = ["TimeSpec", "TIME_DROPS", "periods_from_arrow", "seconds_from_arrow", "time_drops", "check_time_format"]

#: The reasons a record is dropped for its time (keys of :data:`dpgeo.counting.decode.DROP_REASONS`).
TIME_DROPS = ("missing_time", "unparsed_time", "time_outside_bounds")

_ISO = (r"^\s*(?P<Y>\d{4})[-/](?P<m>\d{1,2})[-/](?P<d>\d{1,2})"
        r"(?:[T ]\s*(?P<H>\d{1,2}):(?P<M>\d{2})(?::(?P<S>\d{2})(?:[.,](?P<f>\d+))?)?)?"
        r"\s*(?P<z>Z|z|UTC|[+-]\d{2}(?::?\d{2})?)?\s*$")
_NUMBER = r"^\s*[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\s*$"


@dataclass(frozen=True)
class TimeSpec:
    """How to read a record's time and which public periods to count it in.

    Attributes
    ----------
    column : str or None
        The time column of a file or frame (None for times given as an array beside ``(x, y, crs)``).
    periods : Periods
        The public periods.
    time_format : str or None
        ``strptime`` format of text times (default: ISO 8601, year first, or epoch seconds).
    """

    column: str | None
    periods: Periods
    time_format: str | None = None

    @property
    def timezone(self) -> str:
        return self.periods.timezone

    def period_of(self, col):
        """``(period, drops)`` of an Arrow column of times: the period of each record (-1: dropped) and the
        records dropped by reason (see :func:`periods_from_arrow`)."""
        return periods_from_arrow(col, self.periods, time_format=self.time_format, what=self.what)

    @property
    def what(self) -> str:
        return f"time column {self.column!r}" if self.column else "the times"


def check_time_format(fmt):
    """A ``strptime`` format, checked to hold at least a year (None passes)."""
    if fmt is None:
        return None
    if not isinstance(fmt, str) or "%" not in fmt or not any(c in fmt for c in ("%Y", "%y", "%s")):
        raise ParameterError(f"time_format must be a strptime format with a year, such as '%m/%d/%Y %H:%M:%S', got "
                             f"{fmt!r}")
    return fmt


def periods_from_arrow(col, periods: Periods, *, time_format=None, what="the time column"):
    """The public period of each record of an Arrow column of times, and the records dropped by reason.

    Returns
    -------
    period : numpy.ndarray
        int64 period index of each record; for a record dropped for its time a negative code:
        -1 missing, -2 unparsed, -3 outside the bounds (``TIME_DROPS[-code - 1]``).
    drops : dict
        ``{"missing_time": n, "unparsed_time": n, "time_outside_bounds": n}`` (reasons that occurred).

    Examples
    --------
    >>> import pyarrow as pa
    >>> from dpgeo.periods import make_periods
    >>> p = make_periods("month", "2014-04-01", "2014-06-01")
    >>> col = pa.array(["2014-04-30T23:59:59Z", "2014/5/1 00:00", "2014-05-31T23:00:00-02:00", "soon", None])
    >>> idx, drops = periods_from_arrow(col, p)
    >>> idx.tolist(), drops
    ([0, 1, -3, -2, -1], {'missing_time': 1, 'unparsed_time': 1, 'time_outside_bounds': 1})
    """
    seconds, missing, unparsed = seconds_from_arrow(col, periods.timezone, time_format=time_format, what=what)
    ok = ~(missing | unparsed)
    idx = np.full(seconds.size, -1, dtype=np.int64)
    idx[unparsed] = -2
    inside = periods.index(seconds[ok])
    inside[inside < 0] = -3
    idx[ok] = inside
    return idx, time_drops(idx)


def time_drops(period, rows=None) -> dict:
    """Records dropped for their time, by reason, from the codes of :func:`periods_from_arrow` (at ``rows``)."""
    p = np.asarray(period) if rows is None else np.asarray(period)[rows]
    counts = np.bincount(-p[p < 0] - 1, minlength=3) if p.size else np.zeros(3, dtype=np.int64)
    return {k: int(n) for k, n in zip(TIME_DROPS, counts) if n}


def seconds_from_arrow(col, timezone="UTC", *, time_format=None, what="the time column"):
    """Whole seconds since the epoch (UTC) of an Arrow column of times: ``(seconds, missing, unparsed)``.

    ``seconds`` is int64 (0 where ``missing`` or ``unparsed``). Never raises on a value (and so never
    shows one); raises :class:`~dpgeo.errors.InputError` for a column of a type that holds no times.
    """
    import pyarrow as pa

    from .values import plain_array

    col = plain_array(col)
    t = col.type
    n = len(col)
    none = np.zeros(n, dtype=bool)
    missing = np.asarray(col.is_null()) if col.null_count else none.copy()
    if pa.types.is_null(t):
        return np.zeros(n, dtype=np.int64), np.ones(n, dtype=bool), none
    if pa.types.is_timestamp(t):
        raw = _filled_int(col)
        secs = np.floor_divide(raw, _UNIT[t.unit])
        if t.tz is None:
            secs, bad = _localise(secs, timezone, ~missing)
            return secs, missing, bad
        return secs, missing, none
    if pa.types.is_date32(t):
        secs, bad = _localise(_filled_int(col) * 86400, timezone, ~missing)
        return secs, missing, bad
    if pa.types.is_date64(t):
        secs, bad = _localise(np.floor_divide(_filled_int(col), 1000), timezone, ~missing)
        return secs, missing, bad
    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t):
        v = _filled_float(col.cast(pa.float64(), safe=False))
        bad = ~missing & ~(np.isfinite(v) & (np.abs(v) < 1e13))  # NaN, inf, or beyond ±300,000 years
        v[~np.isfinite(v) | bad] = 0
        return np.floor(v).astype(np.int64), missing, bad
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return _from_text(col, timezone, time_format, missing)
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):  # text read as bytes (CSV): UTF-8 record by record
        from .csvlines import text_of_binary

        text, not_utf8, _ = text_of_binary(col)
        secs, missing, unparsed = seconds_from_arrow(text, timezone, time_format=time_format, what=what)
        if not_utf8 is not None:
            missing, unparsed = missing & ~not_utf8, unparsed | not_utf8
        return secs, missing, unparsed
    raise InputError(f"{what} has type {t}; it must hold times: ISO 8601 text (2014-04-01T00:11:00Z), epoch "
                     "seconds, or timestamps")


_UNIT = {"s": 1, "ms": 1000, "us": 1_000_000, "ns": 1_000_000_000}


def _filled_int(arr):
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_date32(arr.type):
        arr = arr.cast(pa.int32())
    v = arr.cast(pa.int64()) if not pa.types.is_int64(arr.type) else arr
    if v.null_count:
        v = pc.fill_null(v, 0)
    return v.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)


def _filled_float(arr):
    import pyarrow.compute as pc

    if arr.null_count:
        arr = pc.fill_null(arr, float("nan"))
    return arr.to_numpy(zero_copy_only=False).astype(np.float64, copy=True)


def _from_text(col, timezone, time_format, missing):
    import pyarrow as pa
    import pyarrow.compute as pc

    n = len(col)
    s = pc.utf8_trim_whitespace(col)
    empty = np.asarray(pc.fill_null(pc.equal(pc.utf8_length(s), 0), False))
    missing = missing | empty
    secs = np.zeros(n, dtype=np.int64)
    parsed = np.zeros(n, dtype=bool)
    if time_format is not None:
        try:
            ts = pc.strptime(s, format=time_format, unit="s", error_is_null=True)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise ParameterError(f"time_format {time_format!r} is not a format this reader understands "
                                 f"({type(exc).__name__})") from None
        got = np.asarray(ts.is_valid())
        v = _filled_int(ts)
        if ts.type.tz is None:
            v, bad = _localise(v, timezone, got)
            got &= ~bad
        secs[got], parsed[got] = v[got], True
    else:
        number = np.asarray(pc.fill_null(pc.match_substring_regex(s, _NUMBER), False))
        if number.any():
            v = pc.cast(pc.if_else(pa.array(number), s, pa.scalar(None, s.type)), pa.float64())
            f = _filled_float(v)
            good = number & np.isfinite(f) & (np.abs(f) < 1e13)
            secs[good] = np.floor(f[good]).astype(np.int64)
            parsed |= good
        rest = ~number & ~missing
        if rest.any():
            v, good = _iso_seconds(s, timezone, rest)
            secs[good] = v[good]
            parsed |= good
    unparsed = ~missing & ~parsed
    secs[~parsed] = 0
    return secs, missing, unparsed


def _iso_seconds(s, timezone, rows):
    """Seconds of ISO 8601 text (year first) at ``rows``: ``(seconds, parsed)``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    m = pc.extract_regex(s, _ISO)
    ok = np.asarray(pc.fill_null(m.is_valid(), False)) & rows
    n = len(s)
    if not ok.any():
        return np.zeros(n, dtype=np.int64), ok

    def part(name, default=0):
        f = pc.struct_field(m, name)
        txt = pc.if_else(pc.equal(pc.utf8_length(f), 0), pa.scalar(None, pa.string()), f)
        return pc.fill_null(pc.cast(txt, pa.int64(), safe=False), default).to_numpy(zero_copy_only=False)

    y, mo, d = part("Y"), part("m", 1), part("d", 1)
    hh, mi, ss = part("H"), part("M"), part("S")
    ok &= (mo >= 1) & (mo <= 12) & (d >= 1) & (hh <= 23) & (mi <= 59) & (ss <= 60)
    y0 = np.where(ok, y, 1970)
    mo0 = np.where(ok, mo, 1)
    months = (y0 - 1970) * 12 + (mo0 - 1)
    first = months.astype("datetime64[M]").astype("datetime64[D]").astype(np.int64)
    nxt = (months + 1).astype("datetime64[M]").astype("datetime64[D]").astype(np.int64)
    ok &= d <= (nxt - first)
    days = first + np.where(ok, d, 1) - 1
    wall = days * 86400 + hh * 3600 + mi * 60 + ss
    zone = pc.struct_field(m, "z")
    has_zone = np.asarray(pc.fill_null(pc.greater(pc.utf8_length(zone), 0), False)) & ok
    out = np.zeros(n, dtype=np.int64)
    naive = ok & ~has_zone
    if naive.any():
        v, bad = _localise(wall, timezone, naive)
        ok &= ~(naive & bad)
        out[naive] = v[naive]
    if has_zone.any():
        out[has_zone] = wall[has_zone] - _offsets(zone, has_zone)[has_zone]
    return out, ok


def _offsets(zone, rows):
    """Seconds east of UTC of zone designators (``Z``, ``UTC``, ``+02``, ``+0200``, ``-04:00``), vectorised."""
    import pyarrow as pa
    import pyarrow.compute as pc

    z = pc.replace_substring(pc.fill_null(zone, ""), ":", "")
    m = pc.extract_regex(z, r"^(?P<s>[+-])(?P<h>\d{2})(?P<m>\d{2})?$")
    numeric = np.asarray(pc.fill_null(m.is_valid(), False)) & rows
    out = np.zeros(len(zone), dtype=np.int64)
    if not numeric.any():
        return out

    def part(name):
        f = pc.struct_field(m, name)
        f = pc.if_else(pc.equal(pc.utf8_length(f), 0), pa.scalar("0"), f)
        return pc.fill_null(pc.cast(pc.fill_null(f, "0"), pa.int64(), safe=False), 0).to_numpy(zero_copy_only=False)

    sign = np.where(np.asarray(pc.fill_null(pc.equal(pc.struct_field(m, "s"), "-"), False)), -1, 1)
    secs = sign * (part("h") * 3600 + part("m") * 60)
    out[numeric] = secs[numeric]
    return out


#: Wall-clock seconds that a zone other than UTC places (pandas' nanosecond range, years 1678–2261, less a margin
#: for the zone's offset): a wall-clock time outside it is a time of that record alone that cannot be placed.
_WALL_LIMIT_S = 9_200_000_000


def _localise(wall, timezone, rows):
    """UTC seconds of wall-clock seconds in ``timezone``: ``(seconds, bad)``.

    Record by record: a wall-clock time that cannot be placed (beyond years
    1678–2261, where pandas' time zones end) is ``bad`` alone; the other
    records of the batch are converted all the same (vectorised; a failure
    of the conversion itself is narrowed down by halving, never spread).
    """
    wall = np.asarray(wall, dtype=np.int64)
    bad = np.zeros(wall.size, dtype=bool)
    if timezone in (None, "UTC", "Etc/UTC") or not rows.any():
        return wall, bad
    out = wall.copy()
    sel = np.flatnonzero(rows)
    far = np.abs(wall[sel]) >= _WALL_LIMIT_S
    bad[sel[far]] = True
    _localise_rows(wall, out, bad, sel[~far], timezone)
    return out, bad


def _localise_rows(wall, out, bad, sel, timezone):
    import pandas as pd

    if not sel.size:
        return
    try:
        idx = pd.DatetimeIndex(wall[sel].astype("datetime64[s]"))
        loc = idx.tz_localize(timezone, ambiguous=np.ones(sel.size, dtype=bool), nonexistent="shift_forward")
        utc = loc.tz_convert("UTC").tz_localize(None).values.astype("datetime64[s]").astype(np.int64)
    except Exception:  # not expected within the limits; whatever fails, it fails for its own records only
        if sel.size == 1:
            bad[sel] = True
            return
        half = sel.size // 2
        _localise_rows(wall, out, bad, sel[:half], timezone)
        _localise_rows(wall, out, bad, sel[half:], timezone)
        return
    out[sel] = utc
