"""Time to open a large HTML map in headless Chromium, next to an empty map measured in the same run.

A synthetic cluster layer with thousands of polygons (default 10,000 clusters
of ~40 cells of 50 m, about 10 MB of GeoJSON) over a 40 km study area is
written with :func:`dpgeo.io.write_html`; Debian's Chromium (driven by
playwright) opens it from a ``file://`` URL in a fresh page, and the time is
measured until every polygon is drawn (the page sets ``data-dpgeo-drawn``
two animation frames after Leaflet has added the layer). The baseline is the
same page with no cluster: Leaflet, the panel and the study area alone. The
target is under 2 s for the large map.

Run::

    python benchmarks/bench_webmap.py [--clusters 5000] [--cells 40] [--repeat 3] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from helpers import browser_missing, launch_chromium  # noqa: E402

from dpgeo.domain import StudyArea  # noqa: E402
from dpgeo.grid import Grid  # noqa: E402
from dpgeo.io import geojson_collection, write_html  # noqa: E402
from dpgeo.polygons import cluster_polygons  # noqa: E402

TARGET_S = 2.0


def synthetic_layer(n_clusters, cells_per_cluster, seed=0):
    """A cluster layer of random-walk blobs of 50 m cells (public synthetic data) and its metadata."""
    area = StudyArea.from_bbox((440_000, 4_960_000, 480_000, 5_000_000), "EPSG:32615", working_crs="EPSG:32615")
    grid = Grid(area, 50.0)
    rng = np.random.default_rng(seed)
    steps = np.array([(1, 0), (-1, 0), (0, 1), (0, -1)])
    start = np.c_[rng.integers(5, grid.nx - 5, n_clusters), rng.integers(5, grid.ny - 5, n_clusters)]
    walk = steps[rng.integers(0, 4, (n_clusters, cells_per_cluster))].cumsum(axis=1) + start[:, None, :]
    ix = np.clip(walk[..., 0], 0, grid.nx - 1).ravel()
    iy = np.clip(walk[..., 1], 0, grid.ny - 1).ravel()
    label = np.repeat(np.arange(1, n_clusters + 1), cells_per_cluster)
    cell_id, first = np.unique(iy.astype(np.int64) * grid.nx + ix, return_index=True)
    label = label[first]
    present, label = np.unique(label, return_inverse=True)  # ids 1..k with no gap
    label = label + 1
    count = rng.integers(5, 60, cell_id.size)
    layer = cluster_polygons(grid, cell_id, label, count, q=0.37)
    md = {
        "mechanism": "synthetic benchmark layer", "method": "benchmark", "differentially_private": False,
        "not_private_reasons": ["synthetic layer for a speed benchmark"], "epsilon": None, "delta": 0.0,
        "neighbouring_relation": "none", "domain": area.to_metadata(), "cell_width_m": grid.cell_m,
        "dp_count_interval": "95%: synthetic",
    }
    return layer, md


def open_time(browser, url, expect):
    """Open ``url`` in a fresh page: wall s to drawn, in-page ms at drawn, paths, renderer CPU s and main-thread s.

    The renderer's CPU time (Chromium's ``ProcessTime`` metric) is what the page cost whatever else the
    machine was doing; the main thread's task time (``TaskDuration``) is the part that had to run in turn.
    """
    ctx = browser.new_context(viewport={"width": 1280, "height": 800})
    page = ctx.new_page()
    cdp = ctx.new_cdp_session(page)
    cdp.send("Performance.enable")
    before = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
    t0 = time.perf_counter()
    page.goto(url, wait_until="commit")
    page.wait_for_selector("html[data-dpgeo-drawn]", state="attached", timeout=120_000)
    wall = time.perf_counter() - t0
    after = {m["name"]: m["value"] for m in cdp.send("Performance.getMetrics")["metrics"]}
    in_page = page.evaluate("window.dpgeoDrawnAt")
    n = page.locator("path.dp-cluster").count()
    ctx.close()
    if n != expect:
        raise SystemExit(f"drew {n} paths, expected {expect}")
    cpu = after.get("ProcessTime", 0) - before.get("ProcessTime", 0)
    task = after.get("TaskDuration", 0) - before.get("TaskDuration", 0)
    return wall, in_page, n, cpu, task


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clusters", type=int, default=10000)
    ap.add_argument("--cells", type=int, default=40, help="random-walk steps per cluster")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--keep", default=None, metavar="DIR", help="write the HTML files here and keep them")
    args = ap.parse_args(argv)
    why = browser_missing()
    if why:
        raise SystemExit(f"bench_webmap: {why}")
    from playwright.sync_api import sync_playwright

    t0 = time.perf_counter()
    layer, md = synthetic_layer(args.clusters, args.cells)
    t_build = time.perf_counter() - t0
    import json

    geojson_mb = len(json.dumps(geojson_collection(layer, md), separators=(",", ":")).encode()) / 1e6
    folder = args.keep or tempfile.mkdtemp(prefix="bench-webmap-")
    os.makedirs(folder, exist_ok=True)
    big, empty = os.path.join(folder, "large.html"), os.path.join(folder, "empty.html")
    t0 = time.perf_counter()
    write_html(layer, big, md)
    t_write = time.perf_counter() - t0
    write_html(layer.iloc[:0], empty, md)
    print(f"layer: {len(layer):,} clusters, {geojson_mb:.1f} MB GeoJSON, HTML {os.path.getsize(big) / 1e6:.1f} MB "
          f"(built in {t_build:.1f} s, HTML written in {t_write:.2f} s)")

    with sync_playwright() as p:
        browser = launch_chromium(p)
        print(f"browser: Chromium {browser.version}, headless, fresh page per open, best of/median over "
              f"{args.repeat}")
        open_time(browser, Path(empty).as_uri(), 0)  # warm-up: browser process, fonts, disk cache of Leaflet
        rows = {}
        for name, path, n in (("baseline: empty map", empty, 0), ("large map", big, len(layer))):
            runs = [open_time(browser, Path(path).as_uri(), n) for _ in range(args.repeat)]
            rows[name] = runs
            walls = [r[0] for r in runs]
            pages = [r[1] for r in runs]
            print(f"{name:22s} drawn after {statistics.median(walls):6.3f} s (best {min(walls):.3f} s; in page "
                  f"{statistics.median(pages) / 1000:.3f} s after navigation start), {runs[0][2]:,} paths; "
                  f"renderer CPU {statistics.median(r[3] for r in runs):.3f} s, main-thread tasks "
                  f"{statistics.median(r[4] for r in runs):.3f} s")
        browser.close()
    big_s = statistics.median(r[0] for r in rows["large map"])
    base_s = statistics.median(r[0] for r in rows["baseline: empty map"])
    print(f"large map minus baseline: {big_s - base_s:.3f} s; target < {TARGET_S:g} s for the large map: "
          f"{'met' if big_s < TARGET_S else 'NOT met'} (median wall time; "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)")
    if not args.keep:
        for f in (big, empty):
            os.unlink(f)
        os.rmdir(folder)


if __name__ == "__main__":
    main()
