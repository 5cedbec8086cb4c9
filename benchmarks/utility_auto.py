"""Utility of spans without a radius (``auto``) against an oracle, non-private DBSCAN and HDBSCAN.

On every labelled set in ``../shared/data/benchmarks`` (and, with ``--synthetic``,
a fixed battery of generated sets), at ε = 0.5, 1 and 2, mean ARI over seeds 0–4:

* ``auto``: :func:`dpgeo.dbscan_spans` without ``radius_m``/``min_points``
  (the mechanism is called on the counts of its finest grid, as the pipeline
  does: :func:`dpgeo.mechanisms.auto.auto_spans_cells`);
* ``oracle``: DP-DBSCAN spans (dpgeo's defaults: grown spans, Γ ``laplace``,
  β 0.05) at the best of 25 (radius, MinPts) — MinPts ∈ {3, 5, 10, 20, 40},
  radius ∈ {1, 1.5, 2, 3, 4} × the median distance to the MinPts-th
  neighbour — the best *by the mean ARI over the seeds, read off the true
  labels*, which no user can do;
* ``DBSCAN``: non-private scikit-learn DBSCAN, best of MinPts ∈ {3, 5, 10,
  20, 40} × radius ∈ {0.5, 0.75, 1, 1.5, 2} × that median distance (also an
  oracle: the target the issue measures against);
* ``HDBSCAN``: non-private ``sklearn.cluster.HDBSCAN`` with its defaults
  (``min_cluster_size=5``), the no-tuning density baseline.

A point is labelled by the cell of the released map it falls in (0: in no
cluster), as in ``reproduce_dbscan.py``; DBSCAN's and HDBSCAN's noise is 0
too; ARI against the true labels (0 = noise).

**Study area.** A public box per set: the set's coordinate range rounded
outward to a multiple of ``u = 10**(floor(log10(L)) - 1)``, ``L`` the longer
side of the range (for a1: x 0–65535 → 0–66000 with u = 1000). A benchmark
convenience — the rounding hides the exact extreme points but is still read
off the data; a real run's study area never is.

Which sets are which: the rules of auto are chosen on **generated** sets only
(``--synthetic``: a fixed battery of 25; ``--categories N``: N sets of each
failure class of :func:`generated_categories`, in a 10 km box); the report marks
them ``v`` and ``--validation-only`` runs only them. The labelled sets are
reported as held out, first (the oldest defaults — ρ, the FDR, excess of mass,
the growth, √n̂, the 5% share — were chosen on 15 of them in an earlier version;
the six of ``REPRODUCTION`` chose nothing).

Usage::

    python benchmarks/utility_auto.py                      # all sets, ε 0.5/1/2, 5 seeds (~5 min on 2 cores)
    python benchmarks/utility_auto.py --eps 1 --sets sipu_r15,sipu_d31 --seeds 2
    python benchmarks/utility_auto.py --synthetic --no-oracle --eps 1
    python benchmarks/utility_auto.py --synthetic --no-oracle --eps 1 --auto rho=0.7 --auto selection=leaf
    python benchmarks/utility_auto.py --synthetic --categories 6 --validation-only --no-oracle --seeds 3
    python benchmarks/utility_auto.py --no-oracle --eps 0.5 1 2 --seeds 3 --square-box 10000   # held-out sets in a 10 km box
    python benchmarks/utility_auto.py --synthetic --categories 6 --no-oracle --seeds 3 --ref-cache refs.json \
        --auto large_share=0 --auto max_refinement=4 --auto max_area_share=0.1 --auto sparse_share=None

``--auto NAME=VALUE`` changes one setting of the mechanism
(:func:`dpgeo.mechanisms.auto.auto_spans_cells`: ``rho``, ``fdr``,
``selection``, ``extent``, ``min_mass_share``, ``total_share``,
``concentration_share``, ``large_share``, ``max_refinement``, ``large_refinement``,
``max_area_share``, ``sparse_share``, ``occupied_mass_share``, ``prominence_sd``,
``dip_ratio``, ``dip_z``, ``merge_ratio``, ``ridge_elongation`` — ``None`` for no ridge rule —,
``ridge_alignment``, ``ridge_dip_ratio``, ``ridge_dip_z``, ``ridge_min_length_cells``,
``ridge_blob_elongation``, ``ridge_thinness``, ``ridge_path_share``, ``ridge_end_share``, ``fallback_refinement``, ``few_cells_scale``; ``VALUE``
``None`` is Python's None): how its rules were compared on the generated sets
(``docs/results.md``; the last example is the resolution rule before the occupancy step ran for
every n).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
BENCH_DIR = ROOT.parent / "shared" / "data" / "benchmarks"
BENCH_CRS = "EPSG:32631"
#: The reproduction tables of docs/results.md (DP-DBSCAN) and the WaveCluster analogues: not used to choose.
REPRODUCTION = {"cluto_t4_8k", "cluto_t5_8k", "cluto_t7_10k", "sipu_r15", "sipu_spiral", "sipu_aggregation"}
ORACLE_MINPTS = (3, 5, 10, 20, 40)
ORACLE_RADIUS = (1.0, 1.5, 2.0, 3.0, 4.0)
DBSCAN_RADIUS = (0.5, 0.75, 1.0, 1.5, 2.0)


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def public_box(x, y):
    """The set's range rounded outward to a multiple of 10**(floor(log10(longer side)) - 1)."""
    span = max(np.ptp(x), np.ptp(y))
    u = 10.0 ** (math.floor(math.log10(span)) - 1)
    return (math.floor(x.min() / u) * u, math.floor(y.min() / u) * u,
            math.ceil(x.max() / u) * u, math.ceil(y.max() / u) * u)


def load_sets(names=None, synthetic=False, categories=0):
    import pandas as pd

    out = {}
    files = sorted(BENCH_DIR.glob("*.csv.gz"))
    if not files and not synthetic:
        raise SystemExit(f"utility_auto: no benchmark files in {BENCH_DIR}")
    for f in files:
        name = f.name[:-len(".csv.gz")]
        if names and name not in names:
            continue
        d = pd.read_csv(f)
        out[name] = (d["x"].to_numpy(float), d["y"].to_numpy(float), d["label"].to_numpy(np.int64))
    if synthetic:
        for name, v in synthetic_battery().items():
            if not names or name in names:
                out[name] = v
    if categories:
        for name, v in generated_categories(categories).items():
            if not names or name in names or name.rsplit("_", 1)[0] in names:
                out[name] = v
    return out


# -- the generated categories of the failure classes (10 km box, fixed seed) ----------------------------

#: The study area of every generated category: a 10 km box, metres.
CATEGORY_BOX = (0.0, 0.0, 10_000.0, 10_000.0)
CATEGORIES = ("small", "trails", "gradient", "city", "touching", "bridged", "groups", "corridors", "clumps")


def generated_categories(per_category=4, seed=20261128):
    """``per_category`` sets of each failure class, points in metres in :data:`CATEGORY_BOX`.

    * ``small``: 2-5 compact groups of 30-150 points (s.d. 40-250 m; centres at least 3 (s.d. + s.d.) apart)
      in a square of 1.5-9 km somewhere in the box; <= 300 points.
    * ``trails``: 2-5 random-walk trails (steps of 25 m, smooth turns), 500-3,000 points each, 15 m across.
    * ``gradient``: 3-5 separated bands whose density falls tenfold from one end to the other.
    * ``city``: 4-12 dense blocks (150-400 m, 150-600 points) and 2-4 sparse suburbs (1.5-3 km, 300-1,500
      points) apart from them, each a cluster.
    * ``touching``: 2-4 compact shapes (uniform discs of 250-1,200 m radius) whose densities differ 2-6 times
      (densest over sparsest), each touching another or nearly (a gap of 0-1 s.d. of the smaller shape's
      coordinates), 200-3,000 points in all, at least 30 a shape; each shape a cluster.
    * ``bridged``: two blobs (uniform discs of 400-1,000 m, 300-1,500 points each) joined by a straight bridge
      of 300-1,200 m, 100-250 m across, whose density is 25-50% of the sparser blob's; the blobs are the two
      clusters, the bridge's points are background (label 0).
    * ``groups``: 10-40 compact Gaussian groups of 30-150 points each (s.d. 40-200 m; centres at least
      3 (s.d. + s.d.) apart) spread over the whole box (added after the labelled sets R15 and D31 had shown
      that many small groups filling the study area got cells too coarse).
    * ``corridors``: 1-4 roads or ridges (50-300 m wide, 2-8 km long, gently curved, parallel and 2 km or
      more apart, 300-1,500 points a km) whose density dips by 20-50% along them over 0.5-1.5 km, once or
      twice, or falls by that much for the rest of the way; each corridor is one cluster; 2% more points
      spread over the box are background (label 0).
    * ``clumps``: 8-20 compact Gaussian groups of 25-60 points each (s.d. 100-300 m; centres at least
      2.5 (s.d. + s.d.) apart) spread over the whole box: few points, many small groups (added after the
      labelled set R15, 600 points in 15 groups of 40, had been seen to fail at ε = 1).

    The generators run in the order of :data:`CATEGORIES` from one seeded generator, so a class added at
    the end leaves the sets of the earlier ones unchanged.

    Every set is returned as ``(x, y, label, box)`` (label 0: background).
    """
    rng = np.random.default_rng(seed)
    X0, Y0, X1, Y1 = CATEGORY_BOX

    def centres(k, gap, margin):
        c = []
        while len(c) < k:
            p = rng.uniform(margin, X1 - margin, 2)
            if all(np.hypot(*(p - d)) > gap for d in c):
                c.append(p)
        return np.array(c)

    def small():
        while True:
            k = int(rng.integers(2, 6))
            sizes = rng.integers(30, 151, k)
            if sizes.sum() <= 300:
                break
        sd = rng.uniform(40, 250, k)
        side = rng.uniform(1500, 9000)  # the groups lie in a square of this side somewhere in the box
        o = rng.uniform(500, X1 - 500 - side, 2)
        c = []
        while len(c) < k:
            p = o + rng.uniform(0, side, 2)
            if all(np.hypot(*(p - d)) > 3 * (sd[len(c)] + sd[i]) for i, d in enumerate(c)):
                c.append(p)
        c = np.array(c)
        lab = np.repeat(np.arange(k), sizes)
        xy = c[lab] + rng.normal(0, 1, (lab.size, 2)) * sd[lab, None]
        return xy[:, 0], xy[:, 1], lab + 1

    def trails():
        k = int(rng.integers(2, 6))
        xs, ys, ls = [], [], []
        for j in range(k):
            n = int(rng.integers(500, 3001))
            steps = 240
            ang = np.cumsum(rng.normal(0, 0.25, steps)) + rng.uniform(0, 2 * np.pi)
            p = rng.uniform(2500, 7500, 2)
            path = p + np.cumsum(np.c_[np.cos(ang), np.sin(ang)] * 25.0, axis=0)
            path = np.clip(path, 200, X1 - 200)
            t = rng.uniform(0, steps - 1, n)
            i = t.astype(int)
            f = (t - i)[:, None]
            pts = path[i] * (1 - f) + path[np.minimum(i + 1, steps - 1)] * f + rng.normal(0, 15, (n, 2))
            xs.append(pts[:, 0]); ys.append(pts[:, 1]); ls.append(np.full(n, j + 1))
        return np.concatenate(xs), np.concatenate(ys), np.concatenate(ls)

    def gradient():
        k = int(rng.integers(3, 6))
        ys = np.linspace(1500, 8500, k)
        xs, yy, ls = [], [], []
        for j in range(k):
            n = int(rng.integers(800, 4000))
            u = rng.uniform(0, 1, n)
            x = 1000 + 8000 * (10.0 ** u - 1) / 9  # density ∝ 1/(1 + 9t), t in [0, 1]: tenfold along the band
            if j % 2:
                x = X1 - x
            y = ys[j] + rng.uniform(-350, 350, n)
            xs.append(x); yy.append(y); ls.append(np.full(n, j + 1))
        return np.concatenate(xs), np.concatenate(yy), np.concatenate(ls)

    def city():
        kb, ks = int(rng.integers(4, 13)), int(rng.integers(2, 5))
        c = centres(kb + ks, 1000, 700)
        xs, ys, ls = [], [], []
        for j in range(kb + ks):
            if j < kb:
                n, half = int(rng.integers(150, 601)), rng.uniform(75, 200)
                pts = c[j] + rng.uniform(-half, half, (n, 2))
            else:
                n, sd = int(rng.integers(300, 1501)), rng.uniform(400, 800)
                pts = c[j] + rng.normal(0, sd, (n, 2))
            xs.append(pts[:, 0]); ys.append(pts[:, 1]); ls.append(np.full(n, j + 1))
        x, y, lab = np.concatenate(xs), np.concatenate(ys), np.concatenate(ls)
        # a point belongs to the group it was drawn from; clip to the box
        return np.clip(x, 1, X1 - 1), np.clip(y, 1, Y1 - 1), lab

    def disc(c, r, n):
        a = rng.uniform(0, 2 * np.pi, n)
        d = r * np.sqrt(rng.uniform(0, 1, n))
        return c + np.c_[np.cos(a), np.sin(a)] * d[:, None]

    def touching():
        while True:
            k = int(rng.integers(2, 5))
            r = rng.uniform(250, 1200, k)
            ratio = rng.uniform(2, 6)  # densest over sparsest
            f = np.exp(rng.uniform(0, np.log(ratio), k))
            f[rng.permutation(k)[:2]] = [1.0, ratio]
            sizes = f * r ** 2
            sizes = np.round(sizes / sizes.sum() * rng.uniform(200, 3000)).astype(int)
            if sizes.min() < 30:
                continue
            c = [rng.uniform(2500, 7500, 2)]
            for j in range(1, k):
                for _ in range(200):
                    i = int(rng.integers(0, j))
                    gap = rng.uniform(0, 1) * min(r[i], r[j]) / 2  # 0-1 s.d. of the smaller disc's coordinates
                    a = rng.uniform(0, 2 * np.pi)
                    p = c[i] + (r[i] + r[j] + gap) * np.array([np.cos(a), np.sin(a)])
                    if (np.all(p - r[j] > 200) and np.all(p + r[j] < X1 - 200)
                            and all(np.hypot(*(p - c[m])) >= r[m] + r[j] for m in range(j))):
                        c.append(p)
                        break
                else:
                    break
            if len(c) == k:
                break
        pts = np.concatenate([disc(c[j], r[j], sizes[j]) for j in range(k)])
        lab = np.repeat(np.arange(1, k + 1), sizes)
        return pts[:, 0], pts[:, 1], lab

    def bridged():
        r = rng.uniform(400, 1000, 2)
        n = rng.integers(300, 1501, 2)
        length, width = rng.uniform(300, 1200), rng.uniform(100, 250)
        a = rng.uniform(0, 2 * np.pi)
        u = np.array([np.cos(a), np.sin(a)])
        span = r[0] + length + r[1]
        c0 = np.array([X1 / 2, Y1 / 2]) - u * span / 2 + rng.uniform(-1000, 1000, 2)
        c1 = c0 + u * span
        dens = min(n[0] / (np.pi * r[0] ** 2), n[1] / (np.pi * r[1] ** 2)) * rng.uniform(0.25, 0.5)
        nb = max(int(round(dens * length * width)), 5)
        t = rng.uniform(r[0], r[0] + length, nb)
        bridge = c0 + t[:, None] * u + rng.uniform(-width / 2, width / 2, nb)[:, None] * np.array([-u[1], u[0]])
        pts = np.concatenate([disc(c0, r[0], n[0]), disc(c1, r[1], n[1]), bridge])
        lab = np.concatenate([np.full(n[0], 1), np.full(n[1], 2), np.zeros(nb, int)])
        return pts[:, 0], pts[:, 1], lab

    def groups():
        while True:
            k = int(rng.integers(10, 41))
            sd = rng.uniform(40, 200, k)
            c = []
            for _ in range(20_000):
                p = rng.uniform(500, X1 - 500, 2)
                j = len(c)
                if all(np.hypot(*(p - d)) > 3 * (sd[j] + sd[i]) for i, d in enumerate(c)):
                    c.append(p)
                    if len(c) == k:
                        break
            if len(c) == k:
                break
        sizes = rng.integers(30, 151, k)
        lab = np.repeat(np.arange(k), sizes)
        xy = np.array(c)[lab] + rng.normal(0, 1, (lab.size, 2)) * sd[lab, None]
        return xy[:, 0], xy[:, 1], lab + 1

    def corridors():
        k = int(rng.integers(1, 5))
        ang = rng.uniform(0, np.pi)
        u, v = np.array([np.cos(ang), np.sin(ang)]), np.array([-np.sin(ang), np.cos(ang)])
        mid = np.array([X1 / 2, Y1 / 2])
        offsets = (np.arange(k) - (k - 1) / 2) * 2000.0 + rng.uniform(-200, 200, k)
        xs, ys, ls = [], [], []
        for j in range(k):
            length, width = rng.uniform(2000, 8000), rng.uniform(50, 300)
            amp, waves = rng.uniform(0, 300), rng.uniform(0.3, 1.5)
            shift = rng.uniform(-1, 1)
            while True:  # shorten until the corridor lies 300 m or more inside the box
                s = np.linspace(-length / 2, length / 2, 50)
                p = mid + (shift * (8000 - length) / 2 + s)[:, None] * u + (offsets[j] + amp * np.sin(
                    2 * np.pi * waves * s / length))[:, None] * v
                if (p.min() > 300 + 150) and (p.max() < X1 - 300 - 150):
                    break
                length *= 0.9
            dips = [(rng.uniform(0.2, 0.5), rng.uniform(500, 1500), rng.uniform(0.25, 0.75) * length,
                     int(rng.integers(0, 3))) for _ in range(int(rng.integers(1, 3)))]

            def keep(t):  # the share of the corridor's full density at t metres along it
                f = np.ones_like(t)
                for depth, span, at, shape in dips:
                    d = np.abs(t - at)
                    if shape == 0:  # a flat dip
                        f -= depth * (d < span / 2)
                    elif shape == 1:  # a smooth dip
                        f -= depth * 0.5 * (1 + np.cos(np.pi * np.minimum(d / (span / 2), 1.0)))
                    else:  # the rest of the way lower
                        f -= depth * (t > at)
                return np.clip(f, 0.5, 1.0)  # never more than half lower

            n = int(rng.uniform(300, 1500) * length / 1000)
            t = rng.uniform(0, length, 4 * n)
            t = t[rng.uniform(0, 1, t.size) < keep(t)][:n]
            s = t - length / 2
            across = rng.uniform(-width / 2, width / 2, t.size)
            pts = mid + (shift * (8000 - length) / 2 + s)[:, None] * u + (offsets[j] + amp * np.sin(
                2 * np.pi * waves * s / length) + across)[:, None] * v
            xs.append(pts[:, 0]); ys.append(pts[:, 1]); ls.append(np.full(t.size, j + 1))
        nb = int(0.02 * sum(v.size for v in xs))  # a sparse background over the box (label 0)
        xs.append(rng.uniform(X0, X1, nb)); ys.append(rng.uniform(Y0, Y1, nb)); ls.append(np.zeros(nb, int))
        return np.concatenate(xs), np.concatenate(ys), np.concatenate(ls)

    def clumps():
        k = int(rng.integers(8, 21))
        sd = rng.uniform(100, 300, k)
        c = []
        while len(c) < k:
            p = rng.uniform(500, X1 - 500, 2)
            j = len(c)
            if all(np.hypot(*(p - d)) > 2.5 * (sd[j] + sd[i]) for i, d in enumerate(c)):
                c.append(p)
        sizes = rng.integers(25, 61, k)
        lab = np.repeat(np.arange(k), sizes)
        xy = np.array(c)[lab] + rng.normal(0, 1, (lab.size, 2)) * sd[lab, None]
        return xy[:, 0], xy[:, 1], lab + 1

    makers = {"small": small, "trails": trails, "gradient": gradient, "city": city, "touching": touching,
              "bridged": bridged, "groups": groups, "corridors": corridors, "clumps": clumps}
    out = {}
    for cat in CATEGORIES:
        for i in range(per_category):
            x, y, lab = makers[cat]()
            ok = (x > X0) & (x < X1) & (y > Y0) & (y < Y1)
            out[f"gen_{cat}_{i}"] = (x[ok], y[ok], lab[ok], CATEGORY_BOX)
    return out


# -- the synthetic validation battery (fixed seed) -------------------------------------------------------

def synthetic_battery(seed=20260501):
    """25 generated sets: blobs (with and without background), rings, wavy lines, spirals, bars, moons, circles."""
    rng = np.random.default_rng(seed)

    def n_(lo, hi):
        return int(math.exp(rng.uniform(math.log(lo), math.log(hi))))

    def noise(n):
        return rng.uniform(0, 100, n), rng.uniform(0, 100, n)

    def blobs(n, k, bg=0.0, aniso=False):
        c = []
        while len(c) < k:
            p = rng.uniform(10, 90, 2)
            if all(np.hypot(*(p - d)) > 12 for d in c):
                c.append(p)
        c = np.array(c)
        sds = rng.uniform(0.3, 1.0, k) * 3.0
        w = rng.dirichlet(np.ones(k) * 3)
        nb = int(n * bg)
        lab = rng.choice(k, n - nb, p=w)
        scale = rng.uniform(0.4, 1.6, (k, 2))[lab] if aniso else 1.0
        xy = c[lab] + rng.normal(0, 1, (n - nb, 2)) * sds[lab, None] * scale
        bx, by = noise(nb)
        return np.r_[xy[:, 0], bx], np.r_[xy[:, 1], by], np.r_[lab + 1, np.zeros(nb, int)]

    def rings(n, k, bg=0.0):
        r = np.sort(rng.uniform(10, 45, k))
        while k > 1 and np.diff(r).min() < 8:
            r = np.sort(rng.uniform(10, 45, k))
        nb = int(n * bg)
        lab = rng.choice(k, n - nb, p=r / r.sum())
        t = rng.uniform(0, 2 * np.pi, n - nb)
        rr = r[lab] + rng.normal(0, 1.0, n - nb)
        bx, by = noise(nb)
        return np.r_[50 + rr * np.cos(t), bx], np.r_[50 + rr * np.sin(t), by], np.r_[lab + 1, np.zeros(nb, int)]

    def lines(n, k, bg=0.0):
        ys = np.linspace(20, 80, k) + rng.uniform(-3, 3, k)
        nb = int(n * bg)
        lab = rng.integers(0, k, n - nb)
        x = rng.uniform(10, 90, n - nb)
        amp, fr = rng.uniform(0, 6, k), rng.uniform(0.03, 0.1, k)
        y = ys[lab] + amp[lab] * np.sin(fr[lab] * x) + rng.normal(0, 0.8, n - nb)
        bx, by = noise(nb)
        return np.r_[x, bx], np.r_[y, by], np.r_[lab + 1, np.zeros(nb, int)]

    def spirals(n, k):
        lab = rng.integers(0, k, n)
        t = np.sqrt(rng.uniform(0.02, 1, n)) * 3 * np.pi
        r = 5 + 12 * t / np.pi
        ph = lab * 2 * np.pi / k
        return (50 + r * np.cos(t + ph) + rng.normal(0, 0.8, n), 50 + r * np.sin(t + ph) + rng.normal(0, 0.8, n),
                lab + 1)

    def bars(n, k, bg):
        rects = []
        while len(rects) < k:
            w, h = rng.uniform(5, 30), rng.uniform(5, 30)
            x0, y0 = rng.uniform(5, 95 - w), rng.uniform(5, 95 - h)
            r = (x0 - 3, y0 - 3, x0 + w + 3, y0 + h + 3)
            if all(r[2] < s[0] or s[2] < r[0] or r[3] < s[1] or s[3] < r[1] for s in rects):
                rects.append((x0, y0, x0 + w, y0 + h))
        R = np.array(rects)
        areas = (R[:, 2] - R[:, 0]) * (R[:, 3] - R[:, 1])
        nb = int(n * bg)
        lab = rng.choice(k, n - nb, p=areas / areas.sum())
        bx, by = noise(nb)
        return (np.r_[rng.uniform(R[lab, 0], R[lab, 2]), bx], np.r_[rng.uniform(R[lab, 1], R[lab, 3]), by],
                np.r_[lab + 1, np.zeros(nb, int)])

    def sk(kind, n, noise_sd):
        from sklearn.datasets import make_circles, make_moons

        rs = int(rng.integers(1 << 30))
        if kind == "moons":
            p, lab = make_moons(n, noise=noise_sd, random_state=rs)
            return p[:, 0] * 30 + 35, p[:, 1] * 30 + 40, lab + 1
        p, lab = make_circles(n, noise=noise_sd, factor=0.5, random_state=rs)
        return p[:, 0] * 40 + 50, p[:, 1] * 40 + 50, lab + 1

    out = {}
    for i in range(6):
        out[f"syn_blobs{i}"] = blobs(n_(150, 8000), int(rng.integers(3, 16)), aniso=bool(i % 2))
    for i in range(4):
        out[f"syn_blobsbg{i}"] = blobs(n_(300, 8000), int(rng.integers(3, 10)), bg=rng.uniform(0.05, 0.2))
    for i in range(3):
        out[f"syn_rings{i}"] = rings(n_(300, 5000), int(rng.integers(2, 4)), bg=[0, 0, 0.1][i])
    for i in range(3):
        out[f"syn_lines{i}"] = lines(n_(300, 5000), int(rng.integers(2, 5)), bg=[0, 0.05, 0][i])
    for i in range(2):
        out[f"syn_spirals{i}"] = spirals(n_(300, 3000), int(rng.integers(2, 4)))
    for i in range(3):
        out[f"syn_bars{i}"] = bars(n_(500, 8000), int(rng.integers(3, 7)), rng.uniform(0, 0.15))
    for i in range(2):
        out[f"syn_moons{i}"] = sk("moons", n_(200, 4000), 0.08)
    for i in range(2):
        out[f"syn_circles{i}"] = sk("circles", n_(200, 4000), 0.04)
    return out


# -- the methods -----------------------------------------------------------------------------------------

def square_box(x, y, side_m):
    """``(x, y, box)``: a set scaled, its aspect kept, so that the longer side of its range spans 98% of a
    square box ``side_m`` metres wide, centred in it — a labelled set tried as a new user would, in a study
    area of a city's size (the references are the same: ARI, DBSCAN's relative radii and HDBSCAN do not
    change with the scale).

    Examples
    --------
    >>> x, y, box = square_box(np.array([0.0, 2.0]), np.array([0.0, 1.0]), 10_000)
    >>> box, x.tolist(), y.tolist()
    ((0.0, 0.0, 10000.0, 10000.0), [100.0, 9900.0], [2550.0, 7450.0])
    """
    x0, x1, y0, y1 = float(x.min()), float(x.max()), float(y.min()), float(y.max())
    k = 0.98 * side_m / max(x1 - x0, y1 - y0, 1e-12)
    cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
    return (x - cx) * k + side_m / 2, (y - cy) * k + side_m / 2, (0.0, 0.0, float(side_m), float(side_m))


def _area(box):
    from dpgeo.domain import StudyArea

    return StudyArea.from_bbox(box, BENCH_CRS, working_crs=BENCH_CRS)


def auto_labels(x, y, box, epsilon, seed, **kw):
    """Point labels of one seeded auto run (the pipeline's mechanism on its finest grid's counts)."""
    from dpgeo.mechanisms.auto import auto_spans_cells
    from dpgeo.mechanisms.resolution import fine_grid
    from dpgeo.noise import NoiseSource

    f = fine_grid(_area(box))
    ids, counts = np.unique(f.assign(x, y).cell_id, return_counts=True)
    r = auto_spans_cells(f, ids, counts, epsilon=epsilon, rng=NoiseSource(seed=seed), **kw)
    return _cell_labels(r.grid, r.clusters.cell_id, r.clusters.label, x, y)


def _cell_labels(grid, cell_id, label, x, y):
    cid, ok = grid.cell_index(x, y)
    out = np.zeros(x.size, dtype=np.int64)
    if cell_id.size:
        pos = np.minimum(np.searchsorted(cell_id, cid), cell_id.size - 1)
        hit = ok & (cell_id[pos] == cid)
        out[hit] = label[pos[hit]]
    return out


def knn_median(pts, k):
    from sklearn.neighbors import NearestNeighbors

    return float(np.median(NearestNeighbors(n_neighbors=k).fit(pts).kneighbors(pts)[0][:, -1]))


def dbscan_best(x, y, lab):
    from sklearn.cluster import DBSCAN

    from dpgeo.evaluation import adjusted_rand_index

    pts = np.column_stack([x, y])
    best = (-1.0, None, None)
    for mp in ORACLE_MINPTS:
        med = knn_median(pts, mp)
        for f in DBSCAN_RADIUS:
            pred = DBSCAN(eps=f * med, min_samples=mp).fit(pts).labels_
            v = adjusted_rand_index(lab, np.where(pred < 0, 0, pred + 1))
            if v > best[0]:
                best = (v, f * med, mp)
    return best


def hdbscan_default(x, y, lab):
    from sklearn.cluster import HDBSCAN

    from dpgeo.evaluation import adjusted_rand_index

    pred = HDBSCAN(copy=True).fit(np.column_stack([x, y])).labels_
    return adjusted_rand_index(lab, np.where(pred < 0, 0, pred + 1))


def oracle_grid(x, y):
    pts = np.column_stack([x, y])
    return [(f * knn_median(pts, mp), mp) for mp in ORACLE_MINPTS for f in ORACLE_RADIUS]


def dbscan_labels(x, y, box, epsilon, seed, radius, min_points, assign_cache):
    """Point labels of one seeded DP-DBSCAN run (dpgeo's defaults) at (radius, MinPts)."""
    from dpgeo.grid import Grid, cell_width_for_radius
    from dpgeo.histogram import noisy_histogram
    from dpgeo.mechanisms.dbscan import dbscan_cells
    from dpgeo.noise import NoiseSource
    from dpgeo.declarations.spans import _dbscan_setup

    key = round(radius, 12)
    if key not in assign_cache:
        g = Grid(_area(box), cell_width_for_radius(radius))
        assign_cache[key] = (g, g.assign(x, y).cell_id)
    g, cell_id = assign_cache[key]
    kind, _, _, bound, extent_bound, _ = _dbscan_setup(
        g, epsilon=epsilon, radius_m=radius, min_points=min_points, beta=0.05, eta=1.0, histogram="auto",
        gamma="laplace", sensitivity=1, max_dense_cells=1 << 22, max_false_cells=1 << 18, extent="grown")
    h = noisy_histogram(g, cell_id, epsilon=epsilon, rng=NoiseSource(seed=seed), method=kind)
    spans = dbscan_cells(h, min_points=min_points, eta=1.0, bound=bound, extent_bound=extent_bound)
    return spans.label_points(x, y)


# -- the experiment ----------------------------------------------------------------------------------------

def run(args):
    from dpgeo.evaluation import adjusted_rand_index

    names = set(args.sets.split(",")) if args.sets else None
    data = load_sets(names, args.synthetic, args.categories)
    if args.validation_only:  # the sets the rules are chosen on (the rules' tables of docs/results.md)
        data = {k: v for k, v in data.items() if k.startswith(("syn_", "gen_"))}
    seeds = list(range(args.seeds))
    refs = json.loads(Path(args.ref_cache).read_text()) if args.ref_cache and Path(args.ref_cache).exists() else {}
    box_rule = public_box.__doc__ if not args.square_box else f"labelled sets: square_box(side {args.square_box:g} m)"
    out = {"settings": {"epsilons": args.eps, "seeds": seeds, "box_rule": box_rule, "auto": args.auto},
           "sets": {}}
    t0 = time.perf_counter()
    for name, v in data.items():
        x, y, lab = v[:3]
        box = v[3] if len(v) > 3 else public_box(x, y)
        if args.square_box and len(v) <= 3:  # a labelled set placed in a square box of that side, metres
            x, y, box = square_box(x, y, args.square_box)
        rec = out["sets"][name] = {"n": int(x.size), "k": int(np.unique(lab[lab > 0]).size), "box": box,
                                   "validation": name.startswith(("syn_", "gen_")), "eps": {}}
        if name in refs:  # the non-private references depend on the data alone
            ref, alpha, mp, hdb = refs[name]
        else:
            ref, alpha, mp = dbscan_best(x, y, lab)
            hdb = hdbscan_default(x, y, lab)
            refs[name] = (ref, alpha, mp, hdb)
        rec["dbscan"], rec["dbscan_params"], rec["hdbscan"] = ref, (alpha, mp), hdb
        grid = [] if args.no_oracle else oracle_grid(x, y)
        cache = {}
        for eps in args.eps:
            e = rec["eps"][str(eps)] = {}
            e["auto_seeds"] = [float(adjusted_rand_index(lab, auto_labels(x, y, box, eps, s, **args.auto)))
                               for s in seeds]
            e["auto"] = float(np.mean(e["auto_seeds"]))
            if grid:
                scores = [float(np.mean([adjusted_rand_index(lab, dbscan_labels(x, y, box, eps, s, r, m, cache))
                                         for s in seeds])) for r, m in grid]
                i = int(np.argmax(scores))
                e["oracle"], e["oracle_params"] = scores[i], grid[i]
            log(f"[{time.perf_counter() - t0:7.1f} s] {name}: eps {eps:g} auto {e['auto']:.3f}"
                + (f" oracle {e['oracle']:.3f}" if grid else "") + f" DBSCAN {ref:.3f} HDBSCAN {rec['hdbscan']:.3f}")
        cache.clear()
    out["elapsed_s"] = time.perf_counter() - t0
    if args.ref_cache:
        Path(args.ref_cache).write_text(json.dumps(refs))
    return out


def report(out):
    lines = []
    epss = out["settings"]["epsilons"]
    sets = out["sets"]
    has_oracle = any("oracle" in r["eps"][str(epss[0])] for r in sets.values())
    head = ["set", "n", "k", "DBSCAN best (ε=∞)", "HDBSCAN (ε=∞)"]
    for e in epss:
        head += [f"auto ε={e:g}"] + ([f"oracle ε={e:g}"] if has_oracle else [])
    lines.append(f"Mean ARI over {len(out['settings']['seeds'])} seeds (v: a generated set, where rules are chosen; "
                 "bold: auto at least 0.8× DBSCAN best)\n")
    lines.append("| " + " | ".join(head) + " |")
    lines.append("|" + "---|" * len(head))
    for name, r in sets.items():
        row = [name + (" (v)" if r["validation"] else ""), str(r["n"]), str(r["k"]), f"{r['dbscan']:.3f}",
               f"{r['hdbscan']:.3f}"]
        for e in epss:
            c = r["eps"][str(e)]
            a = f"{c['auto']:.3f}"
            row.append(f"**{a}**" if c["auto"] >= 0.8 * r["dbscan"] else a)
            if has_oracle:
                row.append(f"{c['oracle']:.3f}")
        lines.append("| " + " | ".join(row) + " |")
    lines.append("\nSummary (mean ARI; share of sets where the method reaches 0.8× DBSCAN best; "
                 "mean of the ratio to DBSCAN best)\n")
    lines.append("| sets | ε | auto | auto ≥ 0.8× | auto / DBSCAN | oracle | oracle ≥ 0.8× | HDBSCAN | DBSCAN |")
    lines.append("|---|---|---|---|---|---|---|---|---|")
    labelled = [n for n, r in sets.items() if not r["validation"]]
    gen = [n for n, r in sets.items() if r["validation"]]
    groups = {"held-out: labelled": labelled,
              "held-out: labelled, reproduction": [n for n in labelled if n in REPRODUCTION]}
    for cat in CATEGORIES:
        groups[f"generated: {cat}"] = [n for n in gen if n.startswith(f"gen_{cat}_")]
    groups["generated: battery"] = [n for n in gen if n.startswith("syn_")]
    groups["generated: all"] = gen
    groups["small data (<= 300 points)"] = [n for n, r in sets.items() if r["n"] <= 300]
    groups["all"] = list(sets)
    for gname, members in groups.items():
        if not members:
            continue
        ref = np.array([sets[n]["dbscan"] for n in members])
        hdb = np.mean([sets[n]["hdbscan"] for n in members])
        for e in epss:
            a = np.array([sets[n]["eps"][str(e)]["auto"] for n in members])
            o = np.array([sets[n]["eps"][str(e)].get("oracle", np.nan) for n in members])
            ratio = np.mean(a / np.maximum(ref, 1e-9))
            lines.append(f"| {gname} ({len(members)}) | {e:g} | {a.mean():.3f} | {np.mean(a >= 0.8 * ref):.0%} | "
                         f"{ratio:.2f} | " + (f"{np.nanmean(o):.3f} | {np.mean(o >= 0.8 * ref):.0%}" if has_oracle
                                              else "– | –") + f" | {hdb:.3f} | {ref.mean():.3f} |")
    if len(epss) > 1:
        lines.append("\nMore budget, by generated category (mean ARI over the category's sets; ± the standard "
                     "deviation over seeds of that mean, each seed's mean taken over the sets)\n")
        lines.append("| category | " + " | ".join(f"ε={e:g}" for e in epss) + " | non-decreasing within the spread |")
        lines.append("|---|" + "---|" * (len(epss) + 1))
        for cat in (*CATEGORIES, "battery"):
            members = [n for n in gen if n.startswith(f"gen_{cat}_" if cat != "battery" else "syn_")]
            if not members:
                continue
            per_seed = [np.mean([sets[n]["eps"][str(e)]["auto_seeds"] for n in members], axis=0) for e in epss]
            m = [float(v.mean()) for v in per_seed]
            sd = [float(v.std(ddof=1)) if v.size > 1 else 0.0 for v in per_seed]
            ok = all(m[i + 1] >= m[i] - (sd[i] + sd[i + 1]) for i in range(len(m) - 1))
            lines.append(f"| {cat} ({len(members)}) | " + " | ".join(f"{a:.3f} ± {b:.3f}" for a, b in zip(m, sd))
                         + f" | {'yes' if ok else 'no'} |")
    return "\n".join(lines)


def _setting(text):
    name, _, value = text.partition("=")
    if value.lower() == "none":  # e.g. ridge_elongation=none: no ridge rule
        return name, None
    try:
        return name, (int(value) if value.isdigit() else float(value))
    except ValueError:
        return name, value


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--eps", type=float, nargs="+", default=[0.5, 1.0, 2.0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--sets", default=None, help="comma-separated set names (default: all)")
    ap.add_argument("--synthetic", action="store_true", help="add the synthetic validation battery")
    ap.add_argument("--validation-only", action="store_true",
                    help="only the generated sets, where rules are chosen (leave out the labelled, held-out ones)")
    ap.add_argument("--categories", type=int, default=0, metavar="N",
                    help="add N generated sets of each failure class (" + ", ".join(CATEGORIES) + ")")
    ap.add_argument("--no-oracle", action="store_true", help="skip the best-of-grid DP-DBSCAN (the slow part)")
    ap.add_argument("--square-box", type=float, default=None, metavar="METRES",
                    help="place each labelled set in a square box this wide, its aspect kept (e.g. 10000: "
                         "as a new user would try it in a city's study area); default: its own rounded range")
    ap.add_argument("--auto", action="append", default=[], metavar="NAME=VALUE",
                    help="a setting of the auto mechanism to change (repeatable)")
    ap.add_argument("--json", default=None, help="also write all numbers to this file")
    ap.add_argument("--ref-cache", default=None, help="keep the non-private references (DBSCAN, HDBSCAN) in this "
                                                      "JSON file between runs")
    args = ap.parse_args(argv)
    args.auto = dict(_setting(a) for a in args.auto)
    import dpgeo

    warnings.simplefilter("ignore", dpgeo.NotPrivateWarning)  # seeded runs: benchmarks only
    warnings.simplefilter("ignore", FutureWarning)
    out = run(args)
    print(report(out))
    print(f"\nelapsed: {out['elapsed_s']:.0f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
