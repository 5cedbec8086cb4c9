"""A map series through the one pipeline: one DP release per public period, the data read once, charged once.

Every declared mechanism runs as a series when a release is given ``time``
(the time column, or the times of points in memory) and ``period``
(``day``, ``week``, ``month``, ``quarter``, ``year``) between the public
bounds ``period_start`` and ``period_end`` (:mod:`dpgeo.periods`):

1. **validate** — the mechanism's parameters as for one release, the periods
   from the public bounds alone, the accounting of the privacy unit;
2. **plan** — one grid over the public study area for every period;
3. **charge** — the series is one entry in the ledger with its periods
   (:meth:`dpgeo.budget.Ledger.reserve`), or its new periods are appended to an
   earlier series (:meth:`~dpgeo.budget.Ledger.append_periods`);
4. **count** — the input is read **once**: every point is counted in its
   (period, cell) (:func:`dpgeo.counting.count_points` with a
   :class:`~dpgeo.counting.times.TimeSpec`); memory grows with the periods ×
   non-empty cells, not with the records (k-means keeps the points, per
   period);
5. **mechanism** — ``mechanism.run`` once per period, on that period's counts,
   with fresh noise each time; an empty period gets its release like any
   other;
6. **layer** — the periods' layers as one time-enabled layer with persistent
   cluster ids (:mod:`dpgeo.series`), and each period's own release.

What a series costs (docs/privacy.md §6, "Series"): one record lies in one
period, so under the record relation the periods compose in parallel and the
series costs its ε once (a record of ``c > 1`` points, whose points may lie in
several periods, only with a mechanism linear in the contribution); a later period appended at the same or a smaller ε
costs nothing more. Under the person relation the cap ``K`` counts either
over the whole series (``person_accounting="series"``, the default: the cap is
drawn in the one pass over all periods, the series costs ε once, and no period
can be appended) or in each period (``"period"``: every period costs ε, up to
the dataset's total). Running totals (``cumulative=True``) are released with
the binary-tree mechanism instead (:mod:`dpgeo.pipeline.cumulative`).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..counting import count_points
from ..counting.times import TimeSpec, check_time_format
from ..errors import ParameterError
from ..noise import NoiseSource
from ..periods import make_periods
from ..release import Release, run_protected_files, start_charge
from ..series_params import PERSON_ACCOUNTING, series_offered
from ..series.info import ACCOUNTING_TEXT, series_info  # noqa: F401 (ACCOUNTING_TEXT: exported from here)
from ._common import (
    _fixed_grid,
    _progress,
    _reading,
    _reading_message,
    _study_area,
    _warn_if_not_private,
    base_metadata,
)

__all__ = ["SERIES_KEYS", "SERIES_DEFAULTS", "PERSON_ACCOUNTING", "SeriesOptions", "series_options", "run_series",
           "is_series"]

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


def _composition(c, acc):
    if c.cap is None:
        return "parallel", f"record:{c.sensitivity}"
    return ("one-pass" if acc == "series" else "sequential"), f"person:{c.cap}"


def run_series(mech, points, values: dict, *, stacklevel=2):
    """Run ``mech`` as a series on ``points`` (see the module notes); returns a :class:`dpgeo.series.SeriesRelease`.

    ``values`` holds the mechanism's parameters, the common keyword arguments
    (:data:`dpgeo.pipeline.run.COMMON_KEYS`) and the series' (:data:`SERIES_KEYS`).
    """
    from ..series import SeriesRelease, series_layer
    from ._common import validated
    from ..series.append import earlier_series

    if mech.reads is None:
        raise ParameterError(f"{mech.title} reads no data: it has no series")
    # -- validate (public inputs only) --
    v, p, epsilon, c = validated(mech, values)
    so = series_options(values)
    if v["domain_from_data"]:
        raise ParameterError("a series draws every period on one grid over the public study area: give --domain "
                             "(domain=), not --domain-from-data")
    if v["scheduler"] is not None and mech.reads != "counts":
        v["scheduler"] = None
    composition, unit = _composition(c, so.person_accounting)
    if so.cumulative:
        from .cumulative import run_cumulative

        return run_cumulative(mech, points, values, p=p, epsilon=epsilon, c=c, so=so, v=v, composition=composition,
                              unit=unit, stacklevel=stacklevel + 1)
    protected = run_protected_files(points, v["domain"], v["ledger"])
    p["epsilon"] = epsilon
    # -- plan: one grid for every period, every public quantity, before any data is read or charged --
    area = _study_area(v["domain"], v["domain_crs"], v["crs"])
    grid, grid_for = _fixed_grid(area, lambda a: mech.grid(a, p, c, v["max_memory_bytes"]))
    mech.setup(grid, p, c)
    if composition == "one-pass" and not mech.linear_in_contribution(grid, p, c):
        raise ParameterError(f"{mech.short_title(p)} with these parameters is not {epsilon:g}/K-DP for one point, so "
                             "a cap of K points per person over the whole series would not cost epsilon once "
                             "(docs/privacy.md §6, Series); use per-period caps: person_accounting='period' "
                             "(--person-accounting period), each period costing epsilon")
    if composition == "parallel" and c.sensitivity > 1 and not mech.linear_in_contribution(grid, p, c):
        raise ParameterError(f"{mech.short_title(p)} with these parameters is not {epsilon:g}/c-DP for one point, so "
                             f"a record's {c.sensitivity} points, each in its own period, could cost more than epsilon "
                             "once (docs/privacy.md §6, Series); release each period on its own (each charged "
                             "epsilon), or use parameters that are linear in the contribution")
    periods = so.periods
    prior = earlier_series(so.append, mech, p, area, so, unit, composition) if so.append is not None else None
    source = NoiseSource(v["seed"])
    private = source.private and mech.is_private(p)
    # -- charge: the series with its periods, or its new periods appended --
    charge = start_charge(ledger=v["ledger"], dataset=v["dataset"], points=points, epsilon=epsilon,
                          mechanism=mech.ledger_name(p), analyst=v["analyst"], private=private,
                          unattended=v["unattended"], stacklevel=stacklevel + 2,
                          series={"periods": [(a, b, lab) for (a, b), lab in zip(periods.pairs(), periods.labels)],
                                  "composition": composition, "unit": unit,
                                  "append": None if prior is None else prior.series_id})
    progress = v["progress"]
    n = len(periods)
    with charge:
        # -- count: the input read once, every point in its (period, cell) --
        with charge.before_noise():
            _progress(progress, 0.0, _reading_message(points, v["scheduler"]))
            counts = count_points(points, grid_for=grid_for, domain=area, crs=v["crs"], input_crs=v["input_crs"],
                                  person=v["person"], cap=c.cap, rng=source, unattended=v["unattended"],
                                  scheduler=v["scheduler"], progress=_reading(progress, mech.read_share),
                                  time=so.time, times=so.times, cap_per_period=so.person_accounting == "period",
                                  **mech.count_options(p))
            grid = counts.grid
            setup = mech.setup(grid, p, c)
            per_period = counts.by_period()
        diagnostics = counts.diagnostics
        del counts
        # -- mechanism: once per period, fresh noise each time (an empty period is released like any other) --
        outs = []
        for i, counts_i in enumerate(per_period):
            share = mech.read_share + (1 - mech.read_share) * i / n
            _progress(progress, share, f"period {periods.labels[i]} ({i + 1} of {n})")
            outs.append(mech.run(counts_i, p, c, setup, source, _within(progress, share, (1 - mech.read_share) / n)))
            per_period[i] = None
        # -- layer (post-processing) --
        md = base_metadata(method=mech.method_name(p), mechanism=mech.mechanism_title(p), epsilon=epsilon,
                           area=grid.area, source=source, sensitivity=c.sensitivity, person=c.person, cap=c.cap)
        reasons = list(md["not_private_reasons"])
        for out in outs:
            reasons += [r for r in out.not_private_reasons if r not in reasons]
        md["not_private_reasons"] = reasons
        md["differentially_private"] = not reasons
        charge_md = charge.metadata()
        series_id = charge_md.get("series_id") or (prior.series_id if prior is not None else charge.release_id)
        info = series_info(periods, so, composition, c, series_id, prior)
        layers = [out.layer for out in outs]
        layer, period_layers = series_layer(layers, periods, previous=None if prior is None else prior.tracks,
                                            next_id=1 if prior is None else prior.next_id)
        releases = []
        for i, (out, pl) in enumerate(zip(outs, period_layers)):
            mdi = dict(md)
            mdi.update(out.metadata)
            mdi.update(charge_md)
            start, end = periods.interval(i)
            mdi.update(series_id=series_id, period=periods.labels[i], period_index=(0 if prior is None else
                                                                                     prior.n_periods) + i,
                       period_start=start, period_end=end, series=info)
            mdi["not_private_reasons"] = reasons
            mdi["differentially_private"] = not reasons
            releases.append(Release(layer=pl, metadata=mdi, diagnostics=diagnostics, cells=out.cells,
                                    _protected=protected, _charge=charge, _levels=out.levels))
        smd = series_metadata(md, [r.metadata for r in releases], [out.metadata for out in outs], charge_md, info, p,
                              prior)
        if prior is not None:
            layer = prior.combined(layer)
        charge.complete()
    _warn_if_not_private(smd, stacklevel=stacklevel + 2)
    _progress(progress, 1.0, "done")
    return SeriesRelease(layer=layer, metadata=smd, diagnostics=diagnostics, cells=None, _protected=protected,
                         _charge=charge, releases=releases)


def _within(progress, start, span):
    if progress is None:
        return None
    return lambda frac, msg: progress(start + span * float(frac), msg)


#: Keys of a period's metadata that are the period's own (not the series').
_PERIOD_KEYS = ("period", "period_index", "period_start", "period_end", "series", "release_id")


def series_metadata(md, period_mds, outcome_mds, charge_md, info, p, prior=None) -> dict:
    """The series' metadata: what all periods share, plus one entry per period with what differs."""
    out = dict(md)
    shared = {}
    differ = set()
    for om in outcome_mds:
        for k, val in om.items():
            if k in shared and shared[k] != val:
                differ.add(k)
            shared.setdefault(k, val)
    earlier = [] if prior is None else [dict(e) for e in prior.metadata.get("periods", [])]
    if prior is not None:  # continued: what differed before still differs, and so does what changes now
        differ |= {k for e in earlier for k in e if k in shared}
        differ |= {k for k, val in shared.items() if k in prior.metadata and prior.metadata[k] != val}
        for e in earlier:  # the earlier periods' value of a key that was the same in all of them
            e.update({k: prior.metadata[k] for k in differ if k not in e and k in prior.metadata})
    out.update({k: val for k, val in shared.items() if k not in differ})
    for k in differ:
        out.pop(k, None)
    out.update(charge_md)
    out["release_id"] = charge_md.get("release_id", info["series_id"])  # this run (an append has its own)
    out["series_id"] = info["series_id"]
    out["series"] = info
    out["parameters"] = {k: val for k, val in p.items() if k != "epsilon"}
    entries = earlier
    if prior is not None:  # what the series costs stays the series' epsilon; each period says its own
        out["epsilon"] = prior.metadata.get("epsilon")
    for pm in period_mds:
        e = {"label": pm["period"], "period_start": pm["period_start"], "period_end": pm["period_end"],
             "release_id": pm["release_id"], "epsilon": pm["epsilon"]}
        e.update({k: pm[k] for k in sorted(differ) if k in pm})
        entries.append(e)
    out["periods"] = entries
    out["period_start"] = info["period_start"]
    out["period_end"] = entries[-1]["period_end"]
    return out
