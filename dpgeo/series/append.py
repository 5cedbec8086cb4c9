"""Appending later periods to a released series: the earlier series read back, checked, and continued.

``append=`` (``--append``) names an earlier series: its file (GeoPackage or
GeoJSON as dpgeo wrote it) or the :class:`~dpgeo.series.SeriesRelease`
itself. Everything used from it is DP output and public parameters. The new
periods must continue the same map — the same mechanism with the same
parameters on the same grid (study area, working CRS), the same period kind,
the same privacy unit — compute each record's period the same way (the same
time column, time format and time zone: :func:`time_basis_problems`), and
come after the series' last period; the ledger then decides what they cost
(:meth:`dpgeo.budget.Ledger.append_periods`). The result holds every period
of the series, the earlier ones as they were published, and cluster ids that
continue the earlier ones.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from ..errors import ParameterError

__all__ = ["Prior", "earlier_series", "time_basis_problems"]


@dataclass
class Prior:
    """An earlier series being continued."""

    metadata: dict
    layer: object  # every earlier period's features, in the working CRS

    @property
    def series_id(self) -> str:
        return self.metadata["series"]["series_id"]

    @property
    def n_periods(self) -> int:
        return len(self.metadata.get("periods", []))

    @property
    def tracks(self):
        """Each cluster id of the series with its geometry in the latest period it appears in (or None)."""
        if "cluster_id" not in self.layer.columns or not len(self.layer):
            return None
        return self.layer.sort_values("period_start", kind="stable").groupby("cluster_id", sort=True).tail(1)

    @property
    def next_id(self) -> int:
        if "cluster_id" not in self.layer.columns or not len(self.layer):
            return 1
        return int(self.layer["cluster_id"].max()) + 1

    def combined(self, new_layer):
        """The earlier periods' features followed by the new ones (one layer)."""
        import geopandas as gpd
        import pandas as pd

        if not len(self.layer):
            return new_layer
        old = self.layer[[c for c in new_layer.columns if c in self.layer.columns]]
        return gpd.GeoDataFrame(pd.concat([old, new_layer], ignore_index=True), geometry=new_layer.geometry.name,
                                crs=new_layer.crs)


def _normal(obj):
    return json.loads(json.dumps(obj, sort_keys=True, default=str))


def time_basis_problems(info, so) -> list:
    """How this run computes a record's period differently from the series ``info`` (its metadata's ``series``).

    An appended period is free only if every record's period is computed the same way in every run of the
    series (docs/privacy.md §6, "Series"): the same time column, time format and time zone. With another
    column (or another reading of it) a record's time can move into the new periods and the record be
    released twice. A series written before the time format was recorded is taken to have had none.
    """
    column = so.time.column if so.time.column else "given in memory"
    out = []
    if info.get("time_column") != column:
        out.append(f"its times were read from {info.get('time_column')!r}, this run's from {column!r}")
    if info.get("time_format") != so.time.time_format:
        out.append(f"its time format is {info.get('time_format')!r}, this run's {so.time.time_format!r}")
    if info.get("timezone") != so.periods.timezone:
        out.append(f"its time zone is {info.get('timezone')!r}, this run's {so.periods.timezone!r}")
    return out


def earlier_series(append, mech, p, area, so, unit, composition) -> Prior:
    """The earlier series ``append`` (a path or a SeriesRelease), checked against this run's public settings."""
    import pandas as pd

    from ..release import Release, read_release

    if isinstance(append, Release):
        md, layer = append.metadata, append.layer
    elif isinstance(append, (str, bytes)) or hasattr(append, "__fspath__"):
        path = os.fsdecode(os.fspath(append))
        if not os.path.exists(path):
            raise ParameterError(f"--append extends the series in {path!r}, which does not exist: write the series "
                                 "first (without --append)")
        r = read_release(path)
        md, layer = r.metadata, r.layer
    else:
        raise ParameterError(f"append must be an earlier series (its file, or the SeriesRelease), got "
                             f"{type(append).__name__}")
    info = md.get("series")
    if not isinstance(info, dict) or "series_id" not in info:
        raise ParameterError("append: the file is a single release, not a series; a period can only be appended to "
                             "a series (made with time= and period=)")
    if info.get("cumulative"):
        raise ParameterError("append: running totals (cumulative) are released over a fixed number of periods; start "
                             "a new series for later periods")
    want = {"method": mech.method_name(p), "working_crs": md.get("working_crs")}
    problems = []
    if md.get("method") != want["method"]:
        problems.append(f"it was made with {md.get('method')!r}, this run is {want['method']!r}")
    mine = _normal({k: v for k, v in p.items() if k != "epsilon"})
    if _normal(md.get("parameters", {})) != mine:
        diff = sorted(k for k in set(mine) | set(md.get("parameters", {}))
                      if mine.get(k) != _normal(md.get("parameters", {})).get(k))
        problems.append("its parameters differ (" + ", ".join(diff) + ")")
    if _normal(md.get("domain")) != _normal(area.to_metadata()):
        problems.append("its study area differs")
    from ..domain import _crs_label

    if md.get("working_crs") != _crs_label(area.crs):
        problems.append(f"its working CRS is {md.get('working_crs')}, this run's {_crs_label(area.crs)}")
    if info.get("period") != so.periods.kind:
        problems.append(f"its periods are by {info.get('period')}, this run's by {so.periods.kind}")
    problems += time_basis_problems(info, so)  # for privacy: each record's period computed as before
    if info.get("composition") != composition or info.get("unit") != unit:
        problems.append(f"its privacy unit differs ({info.get('unit')}, {info.get('composition')}; this run: {unit}, "
                        f"{composition})")
    if problems:
        raise ParameterError("append: the new periods must continue the same map, but " + "; ".join(problems))
    from ..periods import parse_instant

    end = parse_instant(md.get("period_end") or info["period_end"], _utc())
    if so.periods.start < end:
        raise ParameterError(f"append: the new periods start at {so.periods.interval(0)[0]}, before the series ends "
                             f"({md.get('period_end')}); append only later periods (--period-start at or after the "
                             "series' end)")
    layer = layer.to_crs(area.crs) if layer.crs is not None and not layer.crs.equals(area.crs) else layer
    for col in ("period_start", "period_end"):
        if col in layer.columns:
            layer[col] = pd.to_datetime(layer[col], utc=True)
    return Prior(md, layer)


def _utc():
    import datetime as dt

    return dt.timezone.utc
