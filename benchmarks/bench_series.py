"""A map series against separate runs, and running totals against summed per-period releases (prints figures).

Data: the Uber NYC pickups sample (``../shared/data/geo/uber_nyc_pickups_2014_sample.csv.gz``, 393,210
pickups from April to September 2014, times in New York's local time), DP-DBSCAN spans (radius 300 m,
MinPts 40, ε = 1) over the public bbox of New York City.

Part ``series``: for months (6 periods, 2014-04-01 to 2014-10-01) and for weeks (26 periods,
2014-03-31 to 2014-09-29), each measured in a fresh subprocess (wall time, peak RSS from
``getrusage``), in the same run:

* **series**: one run with ``time=``, ``period=``: the file read once, every period released;
* **separate**: the same number of separate runs, one per period (each a series of one period:
  it reads the whole file and keeps that period's records), one after the other in one process.

Part ``totals``: the error of running totals per cell (the counts are the sample's, on the spans'
grid of 212 m cells) with the binary-tree mechanism (``cumulative=True``, ε = 1 for the whole series)
against summing the per-period releases (a dense ε = 1 histogram per period, which the series'
parallel composition allows: also ε = 1 in all), for weeks (26 periods) and days (183 periods),
measured: root mean square error over the cells of each period's total against the exact running
total, averaged over ``--repeat`` draws.

Part ``horizon``: the same two errors for 26 to 16,384 periods on 2,000 cells of zero counts (both
noises are added to the counts, so the error does not depend on them): where the tree starts to win.

Usage::

    python benchmarks/bench_series.py                      # both parts
    python benchmarks/bench_series.py --part series --kinds month
    python benchmarks/bench_series.py --part totals --repeat 3
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
UBER = os.path.normpath(os.path.join(HERE, "..", "..", "shared", "data", "geo", "uber_nyc_pickups_2014_sample.csv.gz"))
NYC = (-74.26, 40.49, -73.69, 40.92)
SPANS = dict(epsilon=1.0, radius_m=300.0, min_points=40)
KINDS = {"month": ("2014-04-01", "2014-10-01"), "week": ("2014-03-31", "2014-09-29"), "day": ("2014-04-01",
                                                                                            "2014-10-01")}
TZ = "America/New_York"

_CHILD = r"""
import json, resource, sys, time, warnings
warnings.simplefilter("ignore")
import dpgeo
from dpgeo.periods import iso_utc, make_periods
args = json.loads(sys.argv[1])
kw = dict(args["spans"], domain=tuple(args["domain"]), time="datetime", period=args["kind"], timezone=args["tz"],
          ledger=False)
t0 = time.perf_counter()
if args["mode"] == "series":
    res = dpgeo.dbscan_spans(args["path"], period_start=args["start"], period_end=args["end"], **kw)
    n = len(res.releases)
else:
    p = make_periods(args["kind"], args["start"], args["end"], args["tz"])
    n = 0
    for a, b in p.pairs():
        res = dpgeo.dbscan_spans(args["path"], period_start=iso_utc(a), period_end=iso_utc(b), **kw)
        n += len(res.releases)
wall = time.perf_counter() - t0
print(json.dumps({"seconds": wall, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "releases": n}))
"""


def run_child(mode, kind):
    start, end = KINDS[kind]
    args = {"mode": mode, "kind": kind, "start": start, "end": end, "tz": TZ, "path": UBER, "spans": SPANS,
            "domain": NYC}
    p = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(args)], capture_output=True, text=True,
                       check=False, env=dict(os.environ, PYTHONPATH=os.path.dirname(HERE)))
    if p.returncode:
        raise SystemExit(p.stderr)
    return json.loads(p.stdout.strip().splitlines()[-1])


def part_series(kinds):
    print("## A series against separate runs (Uber NYC sample, 393,210 pickups; DP-DBSCAN spans, eps = 1)\n")
    print("| periods | mode | releases | wall time (s) | peak RSS (MB) |")
    print("|---|---|---|---|---|")
    out = {}
    for kind in kinds:
        for mode in ("series", "separate"):
            r = run_child(mode, kind)
            out[(kind, mode)] = r
            print(f"| {kind} | {mode} | {r['releases']} | {r['seconds']:.2f} | {r['peak_rss_mb']:.0f} |", flush=True)
        s, m = out[(kind, "series")], out[(kind, "separate")]
        print(f"| {kind} | separate / series | | {m['seconds'] / s['seconds']:.1f}x | "
              f"{m['peak_rss_mb'] / s['peak_rss_mb']:.2f}x |", flush=True)
    return out


def part_totals(kinds, repeat):
    import warnings

    warnings.simplefilter("ignore")
    from dpgeo.counting import count_points
    from dpgeo.counting.times import TimeSpec
    from dpgeo.grid import Grid, cell_width_for_radius
    from dpgeo.mechanisms.tree import tree_running_totals
    from dpgeo.noise import NoiseSource, sample_discrete_laplace

    print("\n## Running totals: binary tree against summed per-period releases (eps = 1 in all, per record)\n")
    print("| periods | T | tree levels | RMSE per cell, tree: first / middle / last period | "
          "RMSE per cell, summed releases: first / middle / last | mean over periods: tree, summed |")
    print("|---|---|---|---|---|---|")
    from dpgeo.periods import make_periods

    cell = cell_width_for_radius(SPANS["radius_m"], 1.0)
    for kind in kinds:
        start, end = KINDS[kind]
        p = make_periods(kind, start, end, TZ)
        counts = count_points(UBER, grid_for=lambda a: Grid(a, cell), domain=NYC, time=TimeSpec("datetime", p))
        grid = counts.grid
        universe = grid.universe_ids()
        dense = np.zeros((len(p), universe.size), dtype=np.int64)
        for i, part in enumerate(counts.by_period()):
            dense[i, np.searchsorted(universe, part.cell_id)] = part.count
        exact = np.cumsum(dense, axis=0)
        tree_err = np.zeros(len(p))
        sum_err = np.zeros(len(p))
        levels = 0
        for r in range(repeat):
            src = NoiseSource(1000 + r)  # a seed: these are error measurements, nothing is released
            t = tree_running_totals(dense, epsilon=SPANS["epsilon"], sensitivity=1, rng=src)
            levels = t.levels
            tree_err += np.sqrt(((t.totals - exact) ** 2).mean(axis=1))
            noise = sample_discrete_laplace(src, dense.size, epsilon=SPANS["epsilon"]).reshape(dense.shape)
            summed = np.cumsum(dense + noise, axis=0)
            sum_err += np.sqrt(((summed - exact) ** 2).mean(axis=1))
        tree_err /= repeat
        sum_err /= repeat
        mid = len(p) // 2
        print(f"| {kind} | {len(p)} | {levels} | {tree_err[0]:.2f} / {tree_err[mid]:.2f} / {tree_err[-1]:.2f} | "
              f"{sum_err[0]:.2f} / {sum_err[mid]:.2f} / {sum_err[-1]:.2f} | {tree_err.mean():.2f}, "
              f"{sum_err.mean():.2f} |", flush=True)


def part_horizon(horizons, repeat, cells=2000):
    """The same errors at longer horizons (the noise of both is added to the counts, so counts of zero measure it)."""
    from dpgeo.mechanisms.tree import tree_running_totals
    from dpgeo.noise import NoiseSource, sample_discrete_laplace

    print("\n## Running totals at longer horizons (noise only: the error does not depend on the counts; "
          f"{cells} cells, eps = 1)\n")
    print("| T | tree levels | RMSE of the last total: tree, summed | mean over periods: tree, summed |")
    print("|---|---|---|---|")
    for t_n in horizons:
        zero = np.zeros((t_n, cells), dtype=np.int64)
        tree_err = np.zeros(t_n)
        sum_err = np.zeros(t_n)
        levels = 0
        for r in range(repeat):
            src = NoiseSource(2000 + r)
            t = tree_running_totals(zero, epsilon=1.0, sensitivity=1, rng=src)
            levels = t.levels
            tree_err += np.sqrt((t.totals.astype(float) ** 2).mean(axis=1))
            noise = sample_discrete_laplace(src, zero.size, epsilon=1.0).reshape(zero.shape)
            sum_err += np.sqrt((np.cumsum(noise, axis=0).astype(float) ** 2).mean(axis=1))
        tree_err /= repeat
        sum_err /= repeat
        print(f"| {t_n} | {levels} | {tree_err[-1]:.1f}, {sum_err[-1]:.1f} | {tree_err.mean():.1f}, "
              f"{sum_err.mean():.1f} |", flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--part", choices=("series", "totals", "horizon", "all"), default="all")
    ap.add_argument("--kinds", default=None, help="periods to measure (default: month,week for the series; "
                                                  "week,day for the totals)")
    ap.add_argument("--repeat", type=int, default=5, help="noise draws averaged for the running totals")
    a = ap.parse_args(argv)
    if not os.path.exists(UBER):
        raise SystemExit(f"the Uber sample is not at {UBER}")
    print(f"dpgeo series benchmark, {time.strftime('%Y-%m-%d')}, {os.cpu_count()} CPU(s)\n")
    if a.part in ("series", "all"):
        part_series((a.kinds or "month,week").split(","))
    if a.part in ("totals", "all"):
        part_totals((a.kinds or "week,day").split(","), a.repeat)
    if a.part in ("horizon", "all"):
        part_horizon((26, 183, 1024, 4096, 16384), max(1, a.repeat // 2))


if __name__ == "__main__":
    main()
