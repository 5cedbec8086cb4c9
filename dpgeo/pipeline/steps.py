"""The steps the one runner takes between the count and the release: each period, or running totals.

:func:`dpgeo.pipeline.run.run_release` plans, charges and counts once; what
it releases from the counts is a *step*, chosen from the public keyword
arguments by :func:`release_step`:

- :class:`EachPeriod` — the mechanism once per period, on that period's
  counts, with fresh noise each time (an empty period is released like any
  other). **A single release is a series of one period**: all the counts,
  without period keys, returned as a :class:`~dpgeo.release.Release`; a series
  (``time=``, ``period=``, ...) returns a :class:`~dpgeo.series.SeriesRelease`
  with one time-enabled layer and each period's release, possibly appended to
  an earlier series (:mod:`dpgeo.series.append`).
- :class:`RunningTotals` — ``cumulative=True``: the binary-tree mechanism
  (:func:`dpgeo.mechanisms.tree.tree_running_totals`) on the (period, cell)
  counts of the mechanism's public grid; the error of a running total grows
  with ``log T`` instead of with the number of periods summed. One ε-DP
  mechanism over all periods, charged once (docs/privacy.md §6, "Running
  totals"); it takes no appended period.

Each step says, from public inputs alone, what the ledger records
(:meth:`ledger_entry`), whether the release is private, what the counting
adds (:meth:`count_options`), and assembles the release from the metadata
every release shares (:func:`dpgeo.pipeline._common.base_metadata`).
"""

from __future__ import annotations

import numpy as np

from ..errors import ParameterError
from ..release import Release
from ._common import _progress

__all__ = ["EachPeriod", "RunningTotals", "release_step"]


def release_step(mech, values: dict, v: dict, p, epsilon, c):
    """The step of a run of ``mech`` with keyword arguments ``values`` (``v``, ``p``, ``epsilon``, ``c``: as
    :func:`dpgeo.pipeline._common.validated` checked them); the series options checked (public inputs only)."""
    from ..series.options import is_series, series_options

    if not is_series(values):
        return EachPeriod(mech, p, epsilon, c)
    if mech.reads is None:
        raise ParameterError(f"{mech.title} reads no data: it has no series")
    so = series_options(values)
    if v["domain_from_data"]:
        raise ParameterError("a series draws every period on one grid over the public study area: give --domain "
                             "(domain=), not --domain-from-data")
    if so.cumulative:
        return RunningTotals(mech, p, epsilon, c, so)
    return EachPeriod(mech, p, epsilon, c, so)


class _Step:
    """What every step knows: the mechanism, its checked parameters, ε, the contribution bound, the series."""

    def __init__(self, mech, p, epsilon, c, so=None):
        from ..series.options import composition

        self.mech, self.p, self.epsilon, self.c, self.so = mech, p, epsilon, c, so
        self.prior = None
        self.composition, self.unit = composition(c, so.person_accounting) if so is not None else (None, None)

    @property
    def series(self) -> bool:
        return self.so is not None

    def scheduler(self, scheduler):
        """The Dask scheduler the count may use: a mechanism that keeps the points counts in one process."""
        return scheduler if self.mech.reads == "counts" else None

    def ledger_entry(self):
        """What the ledger records of a series (its periods, composition, unit; the series appended to)."""
        if not self.series:
            return None
        periods = self.so.periods
        return {"periods": [(a, b, lab) for (a, b), lab in zip(periods.pairs(), periods.labels)],
                "composition": self.composition, "unit": self.unit,
                "append": None if self.prior is None else self.prior.series_id}

    def count_options(self) -> dict:
        """What counting adds for this step: each record's period."""
        if not self.series:
            return {}
        return {"time": self.so.time, "times": self.so.times,
                "cap_per_period": self.so.person_accounting == "period"}

    def split(self, counts) -> list:
        """The counts of each period (one period: all of them)."""
        return counts.by_period() if self.series else [counts]

    def _series_info(self, charge_md):
        from ..series.info import series_info

        prior = self.prior
        series_id = charge_md.get("series_id") or (prior.series_id if prior is not None else charge_md["release_id"])
        return series_info(self.so.periods, self.so, self.composition, self.c, series_id, prior)


class EachPeriod(_Step):
    """The mechanism on each period's counts; a single release is the one period of all the data."""

    @property
    def ledger_name(self) -> str:
        return self.mech.ledger_name(self.p)

    @property
    def private(self) -> bool:
        return self.mech.is_private(self.p)

    def method(self) -> tuple:
        """``(method, mechanism)`` of the metadata."""
        return self.mech.method_name(self.p), self.mech.mechanism_title(self.p)

    def plan(self, area, grid):
        """Public checks on the run's grid before the charge; an earlier series read back for an append."""
        if not self.series:
            return
        mech, p, c, epsilon = self.mech, self.p, self.c, self.epsilon
        if self.composition == "one-pass" and not mech.linear_in_contribution(grid, p, c):
            raise ParameterError(f"{mech.short_title(p)} with these parameters is not {epsilon:g}/K-DP for one point, "
                                 "so a cap of K points per person over the whole series would not cost epsilon once "
                                 "(docs/privacy.md §6, Series); use per-period caps: person_accounting='period' "
                                 "(--person-accounting period), each period costing epsilon")
        if self.composition == "parallel" and c.sensitivity > 1 and not mech.linear_in_contribution(grid, p, c):
            raise ParameterError(f"{mech.short_title(p)} with these parameters is not {epsilon:g}/c-DP for one point, "
                                 f"so a record's {c.sensitivity} points, each in its own period, could cost more than "
                                 "epsilon once (docs/privacy.md §6, Series); release each period on its own (each "
                                 "charged epsilon), or use parameters that are linear in the contribution")
        if self.so.append is not None:
            from ..series.append import earlier_series

            self.prior = earlier_series(self.so.append, mech, p, area, self.so, self.unit, self.composition)

    def run(self, parts, grid, setup, source, progress) -> list:
        """The mechanism once per period (the only step that draws noise): its :class:`~dpgeo.declare.Outcome` s."""
        mech, n = self.mech, len(parts)
        if not self.series:
            return [mech.run(parts[0], self.p, self.c, setup, source, progress)]
        labels = self.so.periods.labels
        outs = []
        for i in range(n):
            share = mech.read_share + (1 - mech.read_share) * i / n
            _progress(progress, share, f"period {labels[i]} ({i + 1} of {n})")
            outs.append(mech.run(parts[i], self.p, self.c, setup, source,
                                 _within(progress, share, (1 - mech.read_share) / n)))
            parts[i] = None
        return outs

    def assemble(self, md, outs, charge, *, diagnostics, protected, grid):
        """The release: each period's metadata is the shared ``md``, the mechanism's and the charge's."""
        reasons = list(md["not_private_reasons"])
        for out in outs:
            reasons += [r for r in out.not_private_reasons if r not in reasons]
        md["not_private_reasons"] = reasons
        md["differentially_private"] = not reasons
        charge_md = charge.metadata()

        def release(out, layer, **period):
            mdi = dict(md)
            mdi.update(out.metadata)
            mdi.update(charge_md)
            mdi.update(period)
            mdi["not_private_reasons"] = reasons
            mdi["differentially_private"] = not reasons
            return Release(layer=layer, metadata=mdi, diagnostics=diagnostics, cells=out.cells, _protected=protected,
                           _charge=charge, _levels=out.levels)

        if not self.series:
            return release(outs[0], outs[0].layer)
        from ..series import SeriesRelease, series_layer
        from ..series.info import series_metadata

        prior, periods = self.prior, self.so.periods
        info = self._series_info(charge_md)
        layer, period_layers = series_layer([out.layer for out in outs], periods,
                                            previous=None if prior is None else prior.tracks,
                                            next_id=1 if prior is None else prior.next_id)
        first = 0 if prior is None else prior.n_periods
        releases = []
        for i, (out, pl) in enumerate(zip(outs, period_layers)):
            start, end = periods.interval(i)
            releases.append(release(out, pl, series_id=info["series_id"], period=periods.labels[i],
                                    period_index=first + i, period_start=start, period_end=end, series=info))
        smd = series_metadata(md, [r.metadata for r in releases], [out.metadata for out in outs], charge_md, info,
                              self.p, prior)
        if prior is not None:
            layer = prior.combined(layer)
        return SeriesRelease(layer=layer, metadata=smd, diagnostics=diagnostics, cells=None, _protected=protected,
                             _charge=charge, releases=releases)


class RunningTotals(_Step):
    """Running totals of the mechanism's grid over the series' periods (the binary-tree mechanism)."""

    def __init__(self, mech, p, epsilon, c, so):
        super().__init__(mech, p, epsilon, c, so)
        if so.append is not None:
            raise ParameterError("running totals (cumulative) cover the series' periods from its start: they take "
                                 "no appended period; release the longer series anew")
        if self.composition == "sequential":
            raise ParameterError("running totals count each person's cap over the whole series: they need "
                                 "person_accounting='series'")
        if epsilon is None:
            raise ParameterError("running totals add noise: they need epsilon")
        if mech.chooses_grid(p):  # a grid picked at run time from a noisy total
            raise ParameterError("running totals add up one grid over every period, fixed before the data is read: "
                                 f"give {mech.cell_option}")
        self.levels = len(so.periods).bit_length()

    @property
    def ledger_name(self) -> str:
        return f"{self.mech.ledger_name(self.p)}-running-totals"

    @property
    def private(self) -> bool:
        # the tree's noisy totals are the release, whatever the mechanism's own method (a non-private reference
        # such as WaveCluster's 'exact' only picks the grid here)
        return True

    def method(self) -> tuple:
        return (f"{self.mech.method_name(self.p)}+running_totals",
                "running totals of cell counts (binary-tree mechanism, Chan, Shi & Song 2011)")

    def plan(self, area, grid):
        """The exact sampler's range and the number of noisy values, before anything is read."""
        from ..mechanisms.tree import tree_node_count
        from ..noise import noise_rate
        from ..series.running_totals import MAX_TREE_VALUES

        n = len(self.so.periods)
        noise_rate(self.epsilon, self.c.sensitivity * self.levels)
        draws = grid.n_cells * tree_node_count(n)
        if draws > MAX_TREE_VALUES:
            raise ParameterError(f"running totals over {n} periods on {grid.n_cells:,} cells draw {draws:,} noisy "
                                 f"values (at most {MAX_TREE_VALUES:,}): use larger cells ({self.mech.cell_option}) "
                                 "or fewer periods")

    def split(self, counts) -> list:
        """The (period, cell) counts as one dense array over the grid's cells."""
        universe = counts.grid.universe_ids()
        dense = np.zeros((len(self.so.periods), universe.size), dtype=np.int64)
        for i, part in enumerate(counts.by_period()):
            dense[i, np.searchsorted(universe, part.cell_id)] = part.count
        return [dense, universe]

    def run(self, parts, grid, setup, source, progress):
        from ..mechanisms.tree import tree_running_totals

        dense, universe = parts
        _progress(progress, self.mech.read_share,
                  f"running totals: a binary tree of {self.levels} levels over {len(self.so.periods)} periods")
        tree = tree_running_totals(dense, epsilon=self.epsilon, sensitivity=self.c.sensitivity, rng=source)
        parts.clear()
        return tree, universe

    def assemble(self, md, outs, charge, *, diagnostics, protected, grid):
        from ..series import SeriesRelease, series_layer
        from ..series.running_totals import totals_layer

        tree, universe = outs
        periods, epsilon, n = self.so.periods, self.epsilon, len(self.so.periods)
        half = tree.halfwidth()
        layers = [totals_layer(grid, universe, tree.totals[i], int(half[i]), int(tree.nodes_used[i]))
                  for i in range(n)]
        md.update(grid=grid.to_metadata(), cell_width_m=getattr(grid, "cell_m", None), n_cells=grid.n_cells,
                  tree_levels=self.levels,
                  noise="discrete Laplace (two-sided geometric) on every tree node",
                  noise_q=tree.q, node_sensitivity=self.c.sensitivity * self.levels,
                  shown_cells="cells whose running total's 95% interval lies above 0",
                  grid_of=self.mech.title)
        charge_md = charge.metadata()
        info = self._series_info(charge_md)
        series_id = info["series_id"]
        layer, period_layers = series_layer(layers, periods)
        releases = []
        for i, pl in enumerate(period_layers):
            start, end = periods.interval(i)
            mdi = dict(md, **charge_md)
            mdi.update(series_id=series_id, period=periods.labels[i], period_index=i, period_start=start,
                       period_end=end, series=info, halfwidth_95=int(half[i]), n_tree_nodes=int(tree.nodes_used[i]))
            releases.append(Release(layer=pl, metadata=mdi, diagnostics=diagnostics, _protected=protected,
                                    _charge=charge))
        smd = dict(md, **charge_md)
        smd.update(release_id=series_id, series=info, parameters={k: x for k, x in self.p.items() if k != "epsilon"},
                   period_start=info["period_start"], period_end=info["period_end"],
                   periods=[{"label": r.metadata["period"], "period_start": r.metadata["period_start"],
                             "period_end": r.metadata["period_end"], "release_id": r.metadata["release_id"],
                             "epsilon": epsilon, "halfwidth_95": r.metadata["halfwidth_95"],
                             "n_tree_nodes": r.metadata["n_tree_nodes"]} for r in releases])
        return SeriesRelease(layer=layer, metadata=smd, diagnostics=diagnostics, _protected=protected, _charge=charge,
                             releases=releases)


def _within(progress, start, span):
    if progress is None:
        return None
    return lambda frac, msg: progress(start + span * float(frac), msg)
