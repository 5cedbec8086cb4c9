"""Empirical privacy audit: a Clopper–Pearson lower bound on ε from many runs of each mechanism.

For each mechanism the neighbouring data sets ``D``, ``D′`` of the test suite's
scenarios (``tests/privacy_audit.py``) are run ``--runs`` times each, through the
mechanism's usual entry point and its default noise source (fresh OS entropy
for every run unless ``--seed`` is given). The first ``--select`` share of the
runs picks the output event ``S`` and the direction that maximise the lower
bound; the remaining runs estimate it:

    ε_lb = ln( lower(Pr[S | D′]) / upper(Pr[S | D]) ),

with one-sided Clopper–Pearson bounds at level ``(1 − confidence)/2`` each, so
that ``ε_lb`` is below the true privacy loss at ``S`` with probability at least
``confidence`` (the standard black-box audit: Jagielski et al. 2020, Nasr et al.
2021). Candidate events are ``{s ≥ t}``, ``{s ≤ t}`` and ``{s = t}`` for a scalar
output ``s`` and the four quadrants ``{s₁ ≷ t₁, s₂ ≷ t₂}`` for a pair, in both
directions (``D′`` over ``D`` and ``D`` over ``D′``). A correct mechanism gives
``ε_lb ≤ ε`` (close to it: the scenarios contain an event where the loss is
``ε``); with ``--break`` the same audit is run on a mechanism with a deliberate
2× error and its ``ε_lb`` exceeds the claim.

Runs are independent calls of the mechanism, spread over ``--jobs`` processes;
the event search is vectorised (cumulative counts over sorted thresholds).

    python benchmarks/audit_privacy.py                    # 10^5 runs per data set, 95% confidence
    python benchmarks/audit_privacy.py --break            # also the broken mechanisms
    python benchmarks/audit_privacy.py --runs 20000 --mechanisms dense sparse
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import platform
import sys
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import privacy_audit as pa  # noqa: E402 (after the path)
import privacy_audit_scenarios as scenarios  # noqa: E402

#: Mechanism key -> (label, the 2x break shown with --break).
MECHANISMS = {
    "dense": ("DP-DBSCAN histogram, dense", "dense noise scale x1/2"),
    "sparse": ("DP-DBSCAN histogram, sparse (θ = 1)", "false cells released at q·Pr[Z >= θ]"),
    "dbscan-dense": ("DP-DBSCAN spans, dense", "dense noise scale x1/2"),
    "dbscan-sparse": ("DP-DBSCAN spans, sparse", "sparse noise scale x1/2"),
    "cap": ("person cap K = 3 + histogram", "histogram noise not scaled by K"),
    "privthr": ("PrivTHR (counts + |Z|′)", "count noise scale x1/2"),
    "privthr-z": ("PrivTHR |Z|′ alone (ε₂)", "|Z|′ noise scale x1/2"),
    "privthr-em": ("PrivTHR_EM threshold (ε₂)", "EM quality sensitivity 1 (record size ignored)"),
    "e2e-heat": ("dpgeo.heat, H3 cells, person cap K = 4", "pipeline sensitivity not scaled by K"),
    "e2e-hotspots": ("dpgeo.hotspots, square cells (the counts)", "release noise scale x1/2"),
    "auto": ("spans without a radius (auto): total + histogram", "auto histogram noise scale x1/2"),
}

_SCENARIOS: dict = {}


def _scenario(key):
    if key not in _SCENARIOS:
        _SCENARIOS[key] = scenarios.all_scenarios()[key]()
    return _SCENARIOS[key]


def _as_array(values) -> np.ndarray:
    """Outputs as an int64 array of shape (runs, dims); 'no span' (None) becomes -1."""
    rows = [(-1,) if v is None else (tuple(int(round(x)) for x in v) if isinstance(v, tuple) else (int(round(v)),))
            for v in values]
    return np.asarray(rows, dtype=np.int64)


def _work(args):
    key, brk, which, n, seed = args
    warnings.simplefilter("ignore")
    sc = _scenario(key)
    ctx = scenarios.breaks()[brk]() if brk else contextlib.nullcontext()
    with ctx:
        if key.startswith("e2e") and seed is not None:  # the entry point's own seed= (its noise is then seeded)
            src = sc.make_source(seed)
        else:  # a noise source; an end-to-end run then uses the entry point's default CSPRNG
            src = pa.noise_rng(seed) if seed is not None else pa.noise_rng(None)
        return _as_array(pa.collect(sc, which, n, src))


def collect(key, brk, runs, jobs, seed):
    """Outputs of ``runs`` runs on D and on D′ (arrays of shape (runs, dims))."""
    chunks = max(1, 4 * jobs)
    sizes = [runs // chunks + (i < runs % chunks) for i in range(chunks)]
    tasks = []
    for which in ("D", "D'"):
        for i, m in enumerate(sizes):
            s = None if seed is None else seed * 1000 + (0 if which == "D" else 500) + i
            tasks.append((key, brk, which, m, s))
    if jobs > 1:
        with ProcessPoolExecutor(jobs) as ex:
            parts = list(ex.map(_work, tasks))
    else:
        parts = [_work(t) for t in tasks]
    half = len(sizes)
    return np.concatenate(parts[:half]), np.concatenate(parts[half:])


# ---------------------------------------------------------------------------
# events
# ---------------------------------------------------------------------------


def _event_counts(a: np.ndarray, b: np.ndarray):
    """Counts of every candidate event in samples ``a`` and ``b`` (vectorised).

    Returns ``(names, ca, cb)``: a list of event descriptions and two int
    arrays of how many rows of ``a`` / ``b`` fall in each.
    """
    names, ca, cb = [], [], []
    if a.shape[1] == 1:
        x, y = a[:, 0], b[:, 0]
        vals = np.unique(np.r_[x, y])
        xs, ys = np.sort(x), np.sort(y)
        ge_a = x.size - np.searchsorted(xs, vals, "left")
        ge_b = y.size - np.searchsorted(ys, vals, "left")
        le_a = np.searchsorted(xs, vals, "right")
        le_b = np.searchsorted(ys, vals, "right")
        eq_a = le_a - (x.size - ge_a)
        eq_b = le_b - (y.size - ge_b)
        for op, xa, xb in (("s >= {}", ge_a, ge_b), ("s <= {}", le_a, le_b), ("s == {}", eq_a, eq_b)):
            names += [op.format(v) for v in vals]
            ca.append(xa)
            cb.append(xb)
        return names, np.concatenate(ca), np.concatenate(cb)
    # pairs: quadrants over the values seen (clipped to the central 99.9% to keep the table small)
    lo = np.percentile(np.r_[a, b], 0.05, axis=0).astype(int)
    hi = np.percentile(np.r_[a, b], 99.95, axis=0).astype(int)
    v1 = np.arange(lo[0], hi[0] + 1)
    v2 = np.arange(lo[1], hi[1] + 1)

    def grid(s):
        i = np.clip(s[:, 0], lo[0] - 1, hi[0] + 1) - (lo[0] - 1)
        j = np.clip(s[:, 1], lo[1] - 1, hi[1] + 1) - (lo[1] - 1)
        h = np.zeros((v1.size + 2, v2.size + 2), dtype=np.int64)
        np.add.at(h, (i, j), 1)
        return h

    ha, hb = grid(a), grid(b)
    for f1, f2, r1, r2 in (("s1 >= {}", "s2 >= {}", True, True), ("s1 >= {}", "s2 <= {}", True, False),
                           ("s1 <= {}", "s2 >= {}", False, True), ("s1 <= {}", "s2 <= {}", False, False)):
        def cum(h, r1=r1, r2=r2):
            g = h[::-1] if r1 else h
            g = g[:, ::-1] if r2 else g
            c = g.cumsum(0).cumsum(1)
            c = c[::-1] if r1 else c
            c = c[:, ::-1] if r2 else c
            return c[1:-1, 1:-1]
        qa, qb = cum(ha), cum(hb)
        names += [f"{f1.format(t1)} and {f2.format(t2)}" for t1 in v1 for t2 in v2]
        ca.append(qa.ravel())
        cb.append(qb.ravel())
    return names, np.concatenate(ca), np.concatenate(cb)


def _lower_bounds(x, y, n, m, level):
    """Vectorised ln(CP lower(x/n) / CP upper(y/m)); -inf where x = 0."""
    lo = pa.cp_lower(x, n, level)
    hi = pa.cp_upper(y, m, level)
    with np.errstate(divide="ignore"):
        return np.where(lo > 0, np.log(np.maximum(lo, 1e-300) / hi), -np.inf)


def audit(d: np.ndarray, d1: np.ndarray, confidence: float, select: float):
    """Choose the event on the first ``select`` share of runs, bound ε on the rest."""
    level = (1.0 - confidence) / 2.0
    k = int(round(select * min(len(d), len(d1))))
    sel_d, est_d = d[:k], d[k:]
    sel_d1, est_d1 = d1[:k], d1[k:]
    names, c1, c0 = _event_counts(sel_d1, sel_d)
    up = _lower_bounds(c1, c0, k, k, level)       # D′ favoured
    down = _lower_bounds(c0, c1, k, k, level)     # D favoured
    if up.max() >= down.max():
        i, fav, other, direction = int(np.argmax(up)), est_d1, est_d, "D′ over D"
    else:
        i, fav, other, direction = int(np.argmax(down)), est_d, est_d1, "D over D′"
    name = names[i]
    # evaluate the chosen event on the held-out runs
    x = int(_in_event(name, fav).sum())
    y = int(_in_event(name, other).sum())
    lb = float(_lower_bounds(np.array([x]), np.array([y]), len(fav), len(other), level)[0])
    return {"event": name, "direction": direction, "x": x, "y": y, "n_fav": len(fav), "n_other": len(other),
            "epsilon_lb": lb}


def _in_event(name: str, s: np.ndarray) -> np.ndarray:
    mask = np.ones(len(s), dtype=bool)
    for col, part in enumerate(name.split(" and ")):
        _, op, t = part.split()
        v, t = s[:, col], int(t)
        mask &= (v >= t) if op == ">=" else (v <= t) if op == "<=" else (v == t)
    return mask


# ---------------------------------------------------------------------------


def _cell(text: str) -> str:
    """A markdown table cell (a ``|Z|`` in a name would split it)."""
    return text.replace("|", "\\|")


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=100_000, help="runs per data set (default 100000)")
    ap.add_argument("--confidence", type=float, default=0.95, help="confidence of the lower bound (default 0.95)")
    ap.add_argument("--select", type=float, default=0.2, help="share of the runs used to choose the event (0.2)")
    ap.add_argument("--break", dest="broken", action="store_true",
                    help="also audit each mechanism with its 2x break injected")
    ap.add_argument("--all-breaks", action="store_true",
                    help="with --break: every break the test suite injects, not only the 2x one shown by default")
    ap.add_argument("--mechanisms", nargs="+", choices=list(MECHANISMS), default=list(MECHANISMS))
    ap.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1), help="processes (default 2)")
    ap.add_argument("--seed", type=int, default=None, help="seed the noise (default: fresh OS entropy)")
    ap.add_argument("--json", type=Path, help="write every figure to this file")
    a = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    import scipy

    import dpgeo

    print(f"# dpgeo {dpgeo.__version__} privacy audit, {datetime.date.today().isoformat()}, "
          f"{_cpu()}, {os.cpu_count()} CPUs, "
          f"Python {platform.python_version()}, numpy {np.__version__}, scipy {scipy.__version__}; "
          f"{a.runs} runs per data set ({a.select:.0%} to choose the event), {a.jobs} processes")
    print()
    print("| mechanism | injected break | claimed ε | ε lower bound | event S, direction: held-out counts | "
          "runs per data set | confidence | seconds |")
    print("|---|---|---|---|---|---|---|---|")
    rows = []
    for key in a.mechanisms:
        label, brk = MECHANISMS[key]
        sc = _scenario(key)
        extra = ([b for b in sc.laws if b != "correct"] if a.all_breaks else [brk]) if a.broken else []
        for b in [None] + extra:
            t0 = time.perf_counter()
            d, d1 = collect(key, b, a.runs, a.jobs, a.seed)
            res = audit(d, d1, a.confidence, a.select)
            secs = time.perf_counter() - t0
            row = dict(mechanism=label, key=key, broken=b, epsilon=sc.epsilon, runs=a.runs,
                       confidence=a.confidence, seconds=secs, **res)
            rows.append(row)
            flag = " **exceeds**" if res["epsilon_lb"] > sc.epsilon else ""
            print(f"| {_cell(label)} | {_cell(b or '–')} | {sc.epsilon:g} | {res['epsilon_lb']:.3f}{flag} | "
                  f"{res['event']} ({res['direction']}: {res['x']}/{res['n_fav']} vs {res['y']}/{res['n_other']}) | "
                  f"{a.runs:,} | {a.confidence:.0%} | {secs:.0f} |", flush=True)
    if a.json:
        a.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
