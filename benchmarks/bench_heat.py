"""Heat layers: counting speed on H3 vs square cells, and hot-spot agreement with Gi* on the exact counts.

Part 1 (speed): N points (default 11 M, lon/lat, NYC-like: uniform plus
clusters) counted on H3 res 9 and on 100 m squares over the same study area,
in the same run; time and peak memory (tracemalloc: numpy's allocations) of
each, and the ratio H3 / squares (target: at most 2).

Part 3 (layers): the hexagons of every H3 cell of NYC at resolution 11 (about
half a million), drawn by dpgeo's numpy corners and by h3ronpy's WKB polygons
(the previous way) in the same run, µs per cell; and density bands (5) of
releases of about 10^5 and 10^6 cells, square and H3: time of the whole
``dpgeo.heat`` call and of the bands alone, validity and overlap of the bands.

Part 2 (hot spots): the Uber NYC pickups sample at ε = 0.5, 1, 2: Gi* classes
of dpgeo.hotspots against Gi* on the exact counts (percent agreement and
Cohen's κ over cells), H3 res 8 (k = 1) and 250 m squares (3 × 3); and the
false-hotspot rate (share of cells called hot at 95%) on uniform points of the
same number over the same area. Owner-side: the exact counts are private.

Part 4 (cells chosen from ε, ``--auto``): hot spots and heat with no cell
size. First the rule's validation on generated city-like sets only (Gaussian
blocks of heavy-tailed sizes over a uniform background, 5,000 to 200,000
points in a 24 × 28 km box): κ of hot spots against exact Gi* on the same
cells, for ρ (evenly spread points per cell, in noise standard deviations) of
10, 25, 50, 100 — the rule's ρ = 50 was chosen here; then the held-out Uber
sample with no cell size at ε = 0.5, 1, 2.

Usage: nice python benchmarks/bench_heat.py [--points 11000000] [--reps 3] [--skip-speed] [--skip-hotspots]
       [--skip-layers] [--auto] [--only-auto]
"""

from __future__ import annotations

import argparse
import gzip
import os
import time
import tracemalloc
import warnings

import numpy as np

import dpgeo
from dpgeo.counting import count_points
from dpgeo.grid import Grid
from dpgeo.h3cells import H3Cells
from dpgeo.mechanisms.heat import neighbour_sums
from dpgeo.mechanisms.hotspots import getis_ord

NYC = (-74.05, 40.55, -73.75, 40.90)
UBER = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data", "geo",
                    "uber_nyc_pickups_2014_sample.csv.gz")


def _points(n, seed=0):
    rng = np.random.default_rng(seed)
    k = n // 2
    lon = np.r_[rng.uniform(NYC[0], NYC[2], n - k), rng.normal(-73.98, 0.03, k)]
    lat = np.r_[rng.uniform(NYC[1], NYC[3], n - k), rng.normal(40.75, 0.03, k)]
    return lon, lat


def _timed(fn):
    tracemalloc.start()
    t = time.perf_counter()
    out = fn()
    el = time.perf_counter() - t
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return out, el, peak


def speed(n, reps):
    lon, lat = _points(n)
    print(f"# counting {n:,} points (lon/lat) over {NYC}")
    res = {}
    for name, grid_for in (("squares 100 m", lambda a: Grid(a, 100.0)), ("H3 res 9", lambda a: H3Cells(a, 9))):
        best = None
        for _ in range(reps):
            c, el, peak = _timed(lambda gf=grid_for: count_points((lon, lat, "EPSG:4326"), grid_for=gf, domain=NYC))
            best = (el, peak) if best is None or el < best[0] else best
        res[name] = best
        print(f"{name:14s}: {best[0]:6.2f} s  peak {best[1] / 2**20:7.0f} MiB  cells {c.grid.n_cells:,}  "
              f"counted {c.n_points:,}")
    ratio = res["H3 res 9"][0] / res["squares 100 m"][0]
    print(f"H3 / squares time: {ratio:.2f} (target <= 2)")


def _kappa(a, b):
    cats = np.union1d(a, b)
    po = np.mean(a == b)
    pe = sum(np.mean(a == c) * np.mean(b == c) for c in cats)
    return (po - pe) / (1 - pe) if pe < 1 else 1.0


def _uber():
    with gzip.open(UBER, "rt") as f:
        next(f)
        rows = [line.split(",") for line in f]
    lat = np.array([float(r[1]) for r in rows])
    lon = np.array([float(r[2]) for r in rows])
    return lon, lat


def hotspots(reps):
    lon, lat = _uber()
    print(f"\n# hot spots: Uber NYC sample, {lon.size:,} pickups, study area {NYC}")
    rng = np.random.default_rng(1)
    ulon, ulat = rng.uniform(NYC[0], NYC[2], lon.size), rng.uniform(NYC[1], NYC[3], lon.size)
    for label, kw, nb in (("H3 res 8, 1-ring", dict(h3_resolution=8), dict(k=1)),
                          ("250 m squares, 3x3", dict(cell_m=250.0), dict(radius_m=375.0))):
        grid_for = (lambda a: H3Cells(a, 8)) if "h3_resolution" in kw else (lambda a: Grid(a, 250.0))
        exact = count_points((lon, lat, "EPSG:4326"), grid_for=grid_for, domain=NYC)
        g = exact.grid
        x = np.zeros(g.n_cells)
        x[g.universe_rank(exact.cell_id)] = exact.count
        s, w = neighbour_sums(g, x, **nb)
        ref = getis_ord(x, s, w).gi_bin
        print(f"{label}: {g.n_cells:,} cells; exact Gi*: {int((ref > 0).sum())} hot, {int((ref < 0).sum())} cold")
        for eps in (0.5, 1.0, 2.0):
            agree, kap, fhot = [], [], []
            for r in range(reps):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    rel = dpgeo.hotspots((lon, lat, "EPSG:4326"), epsilon=eps, domain=NYC, seed=100 + r, ledger=False,
                                         **kw, **nb)
                    uni = dpgeo.hotspots((ulon, ulat, "EPSG:4326"), epsilon=eps, domain=NYC, seed=200 + r,
                                         ledger=False, **kw, **nb)
                got = rel.layer["gi_bin"].to_numpy()
                agree.append(np.mean(got == ref))
                kap.append(_kappa(got, ref))
                fhot.append(np.mean(uni.layer["gi_bin"].to_numpy() >= 2))
            print(f"  eps {eps:>3}: class agreement {100 * np.mean(agree):5.1f}%  Cohen's kappa {np.mean(kap):.3f}  "
                  f"false hot (95%) on uniform points {100 * np.mean(fhot):.2f}%  ({reps} runs)")


def layers(reps):
    import pyproj
    import shapely

    from dpgeo.domain import StudyArea
    from dpgeo.mechanisms.heat import density_bands

    cells = H3Cells(StudyArea.from_bbox(NYC), 11)
    ids = np.arange(cells.n_cells)
    tr = pyproj.Transformer.from_crs(4326, cells.area.crs, always_xy=True)
    print(f"\n# H3 hexagons: {cells.n_cells:,} cells of resolution 11 over {NYC}, working CRS {cells.area.crs}")
    best = {"numpy corners": np.inf, "h3ronpy WKB": np.inf}
    for _ in range(reps):  # interleaved, best of reps (the machine is shared)
        t = time.perf_counter()
        mine = cells.polygons(ids)
        best["numpy corners"] = min(best["numpy corners"], time.perf_counter() - t)
        t = time.perf_counter()
        ref = cells._polygons_h3ronpy(ids, tr)
        best["h3ronpy WKB"] = min(best["h3ronpy WKB"], time.perf_counter() - t)
    _, _, ok = cells._corners(ids)
    for k, v in best.items():
        print(f"{k:14s}: {v:6.2f} s  {v / ids.size * 1e6:5.2f} µs per cell  ({v / ids.size * 1e6:4.1f} s per million)")
    diff = np.abs(shapely.get_coordinates(shapely.normalize(mine)) - shapely.get_coordinates(shapely.normalize(ref)))
    print(f"numpy / h3ronpy: {best['numpy corners'] / best['h3ronpy WKB']:.2f}; numpy drew "
          f"{100 * ok.mean():.2f}% of the cells; largest vertex difference {diff.max():.1e} m")

    print("\n# density bands (5), eps = 1: the whole dpgeo.heat call and the bands alone")
    box_small = (-74.02, 40.6, -73.82, 40.8)
    for label, box, kw, n in (("H3 res 11", box_small, dict(h3_resolution=11), 300_000),
                              ("50 m squares", box_small, dict(cell_m=50.0), 300_000),
                              ("H3 res 11", NYC, dict(h3_resolution=11), 1_000_000),
                              ("30 m squares", NYC, dict(cell_m=30.0), 1_000_000)):
        rng = np.random.default_rng(3)
        k = n // 3
        lon = np.r_[rng.uniform(box[0], box[2], n - 2 * k), rng.normal(-73.95, 0.01, k), rng.normal(-73.88, 0.02, k)]
        lat = np.r_[rng.uniform(box[1], box[3], n - 2 * k), rng.normal(40.72, 0.01, k), rng.normal(40.68, 0.015, k)]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t = time.perf_counter()
            r = dpgeo.heat((lon, lat, "EPSG:4326"), epsilon=1.0, domain=box, bands=5, seed=1, ledger=False, **kw)
            whole = time.perf_counter() - t
            t = time.perf_counter()
            layer, _ = density_bands(r.cells, n_bands=5, bandwidth_m=r.metadata["bands_bandwidth_m"])
            alone = time.perf_counter() - t
        g = layer.geometry.values
        overlap = shapely.area(g).sum() / shapely.union_all(g).area - 1
        print(f"{label:13s} {r.metadata['n_cells']:>9,} cells: heat(bands=5) {whole:6.2f} s, bands alone "
              f"{alone:5.2f} s; {len(layer)} bands, valid {bool(shapely.is_valid(g).all())}, overlap {overlap:.1e}")


BOX = (-93.40, 44.85, -93.10, 45.10)  # generated cities: about 24 km x 28 km


def _city(n, seed):
    """A generated city: 8-30 Gaussian blocks of heavy-tailed sizes over a uniform background (lon/lat)."""
    rng = np.random.default_rng(seed)
    k = int(rng.integers(8, 30))
    w = rng.pareto(1.2, k) + 1
    w /= w.sum()
    nb = int(n * rng.uniform(0.1, 0.4))
    nc = n - nb
    cx, cy = rng.uniform(BOX[0] + 0.03, BOX[2] - 0.03, k), rng.uniform(BOX[1] + 0.03, BOX[3] - 0.03, k)
    sd = rng.uniform(0.003, 0.02, k)
    lab = rng.choice(k, nc, p=w)
    lon = np.r_[cx[lab] + rng.normal(0, 1, nc) * sd[lab], rng.uniform(BOX[0], BOX[2], nb)]
    lat = np.r_[cy[lab] + rng.normal(0, 1, nc) * sd[lab] * 0.7, rng.uniform(BOX[1], BOX[3], nb)]
    return lon, lat


def _coastal(n, seed):
    """A generated coastal city: a downtown holding about half the points, twelve satellites, and a fringe that
    thins out with distance on land only (the east half of the box is water)."""
    rng = np.random.default_rng(seed)
    nc, ns = int(n * rng.uniform(0.45, 0.7)), int(n * rng.uniform(0.15, 0.3))
    nb = n - nc - ns
    cx, cy = rng.uniform(-93.30, -93.26), rng.uniform(44.95, 45.0)
    k = 12
    sx, sy = rng.uniform(BOX[0], -93.25, k), rng.uniform(BOX[1], BOX[3], k)
    lab = rng.integers(0, k, ns)
    d, a = rng.exponential(0.05, nb), rng.uniform(0, 2 * np.pi, nb)
    fx, fy = cx + d * np.cos(a), cy + d * np.sin(a) * 0.7
    fx = np.where(fx > -93.25, 2 * (-93.25) - fx, fx)
    lon = np.r_[cx + rng.normal(0, 0.012, nc), sx[lab] + rng.normal(0, 0.006, ns), fx]
    lat = np.r_[cy + rng.normal(0, 0.02, nc), sy[lab] + rng.normal(0, 0.004, ns), fy]
    return lon, lat


def _exact_gi(lon, lat, box, cell_m):
    exact = count_points((lon, lat, "EPSG:4326"), grid_for=lambda a: Grid(a, cell_m), domain=box)
    g = exact.grid
    x = np.zeros(g.n_cells)
    x[g.universe_rank(exact.cell_id)] = exact.count
    s, w = neighbour_sums(g, x, radius_m=1.5 * cell_m)
    return getis_ord(x, s, w).gi_bin


def _auto_kappa(lon, lat, box, eps, seed):
    """κ of hot spots with no cell size against exact Gi* on the cells the run chose, and their width."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rel = dpgeo.hotspots((lon, lat, "EPSG:4326"), epsilon=eps, domain=box, seed=seed, ledger=False)
    width = rel.metadata["cell_width_m"]
    return _kappa(rel.layer["gi_bin"].to_numpy(), _exact_gi(lon, lat, box, width)), width


def heat_error(reps, fine_m=60.0):
    """The heat rule's ρ: squared error of the mapped density (noisy count of a cell spread over its area, clamped at
    0) against the exact counts of 60 m reference cells, relative to their sum of squares; blocks family, ε = 1."""
    import math

    from dpgeo.mechanisms.heat_cells import HEAT_POINTS_PER_NOISE_SD
    from dpgeo.noise import NoiseSource, discrete_laplace_q, discrete_laplace_variance, sample_discrete_laplace

    w, h = 24e3, 28e3
    nx, ny = int(w // fine_m), int(h // fine_m)
    sd = math.sqrt(discrete_laplace_variance(discrete_laplace_q(0.95, 1)))
    src = NoiseSource(seed=7)
    print(f"\n# heat: relative squared error of the density against {fine_m:g} m cells (blocks, eps 1, {reps} sets)")
    for n in (5_000, 30_000, 200_000):
        row = []
        for rho in (1, 2, 5, 10, 20):
            errs = []
            for seed in range(reps):
                lon, lat = _city(n, seed + 10)
                x = (lon - BOX[0]) / (BOX[2] - BOX[0]) * w
                y = (lat - BOX[1]) / (BOX[3] - BOX[1]) * h
                ref = np.histogram2d(x, y, bins=[nx, ny], range=[[0, nx * fine_m], [0, ny * fine_m]])[0]
                k = max(1, round(math.sqrt(w * h / (n / (rho * sd))) / fine_m))
                kx, ky = nx // k * k, ny // k * k
                r = ref[:kx, :ky]
                c = r.reshape(kx // k, k, ky // k, k).sum(axis=(1, 3))
                noisy = c + sample_discrete_laplace(src, c.size, epsilon=0.95).reshape(c.shape)
                est = np.repeat(np.repeat(np.maximum(noisy, 0) / (k * k), k, 0), k, 1)
                errs.append(((est - r) ** 2).sum() / (r ** 2).sum())
            row.append(f"rho {rho:>2}: {np.mean(errs):.3f}")
        print(f"  n {n:>7,}  " + "  ".join(row))
    print(f"  (the rule's rho: {HEAT_POINTS_PER_NOISE_SD:g})")


def auto_cells(reps):
    import math

    from dpgeo.mechanisms.heat_cells import HOTSPOT_POINTS_PER_NOISE_SD
    from dpgeo.noise import discrete_laplace_q, discrete_laplace_variance

    print(f"\n# cells chosen from epsilon: the rule's rho on generated cities (eps 1, {reps} sets each)")
    sd = math.sqrt(discrete_laplace_variance(discrete_laplace_q(0.95, 1)))
    area = 24e3 * 28e3
    for kind, make in (("blocks", _city), ("coastal", _coastal)):
        for n, rho in ((n, rho) for n in (5_000, 30_000, 200_000) for rho in (25, 50, 100, 200)):
            ks = []
            for seed in range(reps):
                lon, lat = make(n, seed)
                cell = math.sqrt(area / (n / (rho * sd)))
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    rel = dpgeo.hotspots((lon, lat, "EPSG:4326"), epsilon=1.0, domain=BOX, seed=100 + seed,
                                         ledger=False, cell_m=cell, radius_m=1.5 * cell)
                ks.append(_kappa(rel.layer["gi_bin"].to_numpy(), _exact_gi(lon, lat, BOX, cell)))
            print(f"  {kind:7s} n {n:>7,}  rho {rho:>3}  cell {cell:6.0f} m  kappa {np.mean(ks):.3f} "
                  f"(min {np.min(ks):.3f})")
    print(f"  (the rule's rho: {HOTSPOT_POINTS_PER_NOISE_SD:g})")
    heat_error(reps)
    lon, lat = _uber()
    print(f"\n# hot spots with no cell size, held out: Uber NYC sample, {lon.size:,} pickups")
    for eps in (0.5, 1.0, 2.0):
        ks, widths = zip(*(_auto_kappa(lon, lat, NYC, eps, 300 + r) for r in range(reps)))
        print(f"  eps {eps:>3}: cells of {np.mean(widths):5.0f} m, Cohen's kappa {np.mean(ks):.3f} "
              f"(min {np.min(ks):.3f}, {reps} runs)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=11_000_000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--skip-speed", action="store_true")
    ap.add_argument("--skip-hotspots", action="store_true")
    ap.add_argument("--skip-layers", action="store_true")
    ap.add_argument("--auto", action="store_true", help="also part 4: cells chosen from epsilon")
    ap.add_argument("--only-auto", action="store_true", help="part 4 alone")
    a = ap.parse_args()
    if a.only_auto:
        auto_cells(a.reps)
        return
    if not a.skip_speed:
        speed(a.points, a.reps)
    if not a.skip_layers:
        layers(a.reps)
    if not a.skip_hotspots:
        hotspots(a.reps)
    if a.auto:
        auto_cells(a.reps)


if __name__ == "__main__":
    main()
