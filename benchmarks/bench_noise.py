"""Speed of dpgeo's exact noise sampler next to numpy's floating-point one (prints figures; asserts nothing).

1. **Draws per second** of ``dpgeo.noise.sample_discrete_laplace`` (exact
   integer inverse-CDF sampler, ChaCha20 keystream) and, in the same run, of
   the previous sampler: the difference of two ``numpy.random.Generator.geometric``
   draws (floating point, PCG64), for several ε/Δ; plus the ChaCha20
   keystream alone (words per second). Target: at least 10 million exact
   draws per second on one core for ε/Δ between 0.05 and 10.
2. **DP-DBSCAN mechanism** on the San Francisco taxi setting of
   ``bench_spans.py`` (11 million synthetic points, 20 m radius, MinPts 500,
   ε = 1; 14.7 M cells, sparse histogram): grid assignment + DP histogram +
   core cells and spans, with the exact sampler and with the previous float
   sampler side by side. The previous sampler (numpy float geometric noise,
   ``Generator.binomial`` for the number of released empty cells, rejection
   sampling of which ones) is kept in this script only, for this comparison.
   Each run is a fresh process; runs alternate old/new so that load on the
   machine hits both alike. Target: the exact sampler within 1.3x of the old
   time.

Usage::

    python benchmarks/bench_noise.py                     # both parts, 11 M points
    python benchmarks/bench_noise.py --part draws --n 10000000
    python benchmarks/bench_noise.py --part dbscan --points 11000000 --runs 5 --workdir /tmp/dpgeo-bench
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
RATES = [0.002, 0.01, 0.05, 0.1, 0.5, 1.0, 3.0, 10.0, 0.0005]


def best_of(fn, repeat):
    best = math.inf
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def part_draws(n, repeat):
    from dpgeo.noise import NoiseSource, sample_discrete_laplace

    src = NoiseSource()
    gen = np.random.default_rng()
    t = best_of(lambda: src.words(n), repeat)
    print(f"ChaCha20 keystream alone: {n / t / 1e6:7.1f} M words/s ({8 * n / t / 1e6:.0f} MB/s)\n")
    print(f"{'ε/Δ':>7s} {'exact [M/s]':>12s} {'numpy float [M/s]':>18s} {'ratio':>6s}   note")
    for r in RATES:
        q = math.exp(-r)
        sample_discrete_laplace(src, 1000, epsilon=r)  # builds the threshold table (cached)
        t_new = best_of(lambda r=r: sample_discrete_laplace(src, n, epsilon=r), repeat)

        def old(q=q):
            g = gen.geometric(1.0 - q, n)
            g -= gen.geometric(1.0 - q, n)
            return g
        t_old = best_of(old, repeat)
        note = "digit decomposition (ε/Δ < 0.00085)" if r < 0.00085 else ""
        if 0.05 <= r <= 10:
            note = f"target >= 10 M/s: {'met' if n / t_new >= 1e7 else 'MISSED'}"
        print(f"{r:7.4f} {n / t_new / 1e6:12.1f} {n / t_old / 1e6:18.1f} {t_old / t_new:6.2f}   {note}")
    print()


MECHANISM = """
import sys, json, time, math
import numpy as np
sys.path.insert(0, {here!r})
from dpgeo.domain import StudyArea
from dpgeo.declarations.spans import _dbscan_setup
from dpgeo.mechanisms.dbscan import dbscan_cells
from dpgeo.histogram import exact_counts, noisy_histogram, NoisyHistogram
from dpgeo.noise import NoiseSource
from bench_spans import SETTINGS
variant = sys.argv[2]
s = SETTINGS["sf"]
d = np.load(sys.argv[1])
x, y = d["x"], d["y"]
area = StudyArea.from_bbox(s["bbox"])
grid, kind, q, theta, bound, extent_bound, params = _dbscan_setup(area, epsilon=1.0, radius_m=s["radius"],
    min_points=s["min_points"], beta=0.05, eta=1.0, histogram="auto", gamma="laplace", sensitivity=1,
    max_dense_cells=1 << 22, max_false_cells=1 << 18, extent="grown")


def old_sparse(grid, cell_id, eps, theta):
    # the previous implementation: float geometric noise, binomial count, rejection sampling of cells
    rng = np.random.Generator(np.random.PCG64DXSM())
    q = math.exp(-eps)
    ids, counts = exact_counts(grid, cell_id)
    p1 = 1.0 - q
    noisy = counts + (rng.geometric(p1, counts.size) - rng.geometric(p1, counts.size))
    keep = noisy >= theta
    kept_ids, kept_vals = ids[keep], noisy[keep]
    n_empty = grid.n_cells - ids.size
    m = int(rng.binomial(n_empty, q ** theta / (1.0 + q)))
    chosen = np.zeros(0, dtype=np.int64)
    while chosen.size < m:
        need = m - chosen.size
        k = int(need / max(n_empty / grid.n_cells, 1e-6) * 1.2) + 16
        cand = grid.universe_id_at(rng.integers(0, grid.n_cells, size=k))
        order = np.argsort(cand, kind="stable")
        pos = np.minimum(np.searchsorted(ids, cand[order]), ids.size - 1)
        hit = np.empty(cand.size, dtype=bool)
        hit[order] = ids[pos] == cand[order]
        seq = np.concatenate([chosen, cand[~hit]])
        _, first = np.unique(seq, return_index=True)
        chosen = seq[np.sort(first)]
    false_ids = chosen[:m]
    false_vals = theta - 1 + rng.geometric(p1, m)
    order = np.argsort(false_ids)
    false_ids, false_vals = false_ids[order], false_vals[order]
    at = np.searchsorted(kept_ids, false_ids)
    return NoisyHistogram(grid, "sparse", np.insert(kept_ids, at, false_ids), np.insert(kept_vals, at, false_vals),
                          eps, 1.0, q, theta, m)


# warm-up outside the timing: the exact sampler's threshold tables (computed once per ε; cached)
noisy_histogram(grid, np.zeros(1, dtype=np.int64), epsilon=1.0, rng=NoiseSource(), method=kind)
t0 = time.perf_counter()
a = grid.assign(x, y)
t1 = time.perf_counter()
if variant == "new":
    h = noisy_histogram(grid, a.cell_id, epsilon=1.0, rng=NoiseSource(), method=kind)
else:
    h = old_sparse(grid, a.cell_id, 1.0, theta)
t2 = time.perf_counter()
spans = dbscan_cells(h, min_points=s["min_points"], eta=1.0, bound=bound, extent_bound=extent_bound)
t3 = time.perf_counter()
print(json.dumps(dict(total=t3 - t0, assign=t1 - t0, histogram=t2 - t1, spans=t3 - t2, kind=kind, theta=theta,
                      cells=grid.n_cells, nonempty=int(np.unique(a.cell_id).size), released=int(h.cell_id.size),
                      false_cells=int(h.n_false_cells), clusters=spans.n_clusters)))
"""


def part_dbscan(points, runs, work):
    sys.path.insert(0, HERE)
    from bench_spans import SETTINGS, make_points

    npz = os.path.join(work, f"sf_{points}.npz")
    if not os.path.exists(npz):
        from pyproj import Transformer

        x, y = make_points(points, SETTINGS["sf"])
        tr = Transformer.from_crs(4326, SETTINGS["sf"]["epsg"], always_xy=True)
        px, py = tr.transform(x, y)
        np.savez(npz, x=px, y=py)
    code = MECHANISM.replace("{here!r}", repr(HERE))
    res = {"old": [], "new": []}
    for i in range(runs):
        for variant in (("old", "new") if i % 2 == 0 else ("new", "old")):
            p = subprocess.run([sys.executable, "-c", code, npz, variant], capture_output=True, text=True, check=False)
            if p.returncode:
                raise SystemExit(f"{variant} run failed:\n{p.stderr}")
            res[variant].append(json.loads(p.stdout.strip().splitlines()[-1]))
    one = res["new"][0]
    print(f"DP-DBSCAN mechanism, SF taxi setting: {points:,} points, {one['cells']:,} cells ({one['kind']}, "
          f"θ = {one['theta']}), {one['nonempty']:,} non-empty cells; {runs} fresh-process runs each, alternating")
    print(f"{'':34s} {'old float sampler':>22s} {'exact sampler':>22s} {'ratio':>7s}")
    for key in ("total", "histogram", "assign", "spans"):
        o = [r[key] for r in res["old"]]
        n = [r[key] for r in res["new"]]
        label = {"total": "mechanism (assign+histogram+spans)", "histogram": "  DP histogram",
                 "assign": "  grid assignment", "spans": "  core cells and spans"}[key]
        print(f"{label:34s} {min(o):8.3f} s (med {statistics.median(o):5.3f}) {min(n):8.3f} s "
              f"(med {statistics.median(n):5.3f}) {statistics.median(n) / statistics.median(o):7.2f}")
    ratio = statistics.median(r["total"] for r in res["new"]) / statistics.median(r["total"] for r in res["old"])
    print(f"\nmedian mechanism time, exact / old: {ratio:.2f} (target <= 1.3: {'met' if ratio <= 1.3 else 'MISSED'})")
    print(f"released cells: old {[r['released'] for r in res['old']]}, new {[r['released'] for r in res['new']]}; "
          f"clusters: old {[r['clusters'] for r in res['old']]}, new {[r['clusters'] for r in res['new']]}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--part", choices=("all", "draws", "dbscan"), default="all")
    ap.add_argument("--n", type=int, default=10_000_000, help="draws per timing (default 10 million)")
    ap.add_argument("--repeat", type=int, default=3, help="best of this many draw timings")
    ap.add_argument("--points", type=int, default=11_000_000, help="points of the DP-DBSCAN setting")
    ap.add_argument("--runs", type=int, default=5, help="fresh-process runs per sampler (DP-DBSCAN)")
    ap.add_argument("--workdir", default=None, help="keep the generated points here")
    args = ap.parse_args()
    print(f"numpy {np.__version__}, {os.cpu_count()} CPU(s) visible\n")
    if args.part in ("all", "draws"):
        part_draws(args.n, args.repeat)
    if args.part in ("all", "dbscan"):
        work = args.workdir or tempfile.mkdtemp(prefix="dpgeo-bench-")
        os.makedirs(work, exist_ok=True)
        part_dbscan(args.points, args.runs, work)


if __name__ == "__main__":
    main()
