"""What the ledger's record sketch costs a run (dpgeo.counting.sketch, filled while counting).

Writes a lon/lat CSV of ``--points`` random points and a copy in a projected CRS (UTM 15N), then times,
in the same run, the single-process counting of each on a 100 m grid without and with a record sketch
(best of ``--repeat``), and the sketch alone on arrays (SipHash-2-4 of the normalised records and the
bottom-k). Prints seconds and the relative cost. Compare figures of one run only (same machine, same load).

Usage: .venv/bin/python benchmarks/bench_record_sketch.py [--points 2000000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=2_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()

    from pyproj import Transformer

    from dpgeo.counting import count_points
    from dpgeo.counting.sketch import RecordSketch
    from dpgeo.grid import Grid

    rng = np.random.default_rng(0)
    lon, lat = rng.normal(-93.26, 0.05, a.points), rng.normal(44.97, 0.05, a.points)
    x, y = Transformer.from_crs(4326, 26915, always_xy=True).transform(lon, lat)
    folder = tempfile.mkdtemp()
    files = {"lon/lat": os.path.join(folder, "ll.csv"), "UTM": os.path.join(folder, "utm.csv")}
    np.savetxt(files["lon/lat"], np.c_[lon, lat], fmt="%.7f", delimiter=",", header="lon,lat", comments="")
    np.savetxt(files["UTM"], np.c_[x, y], fmt="%.2f", delimiter=",", header="x,y", comments="")
    key = bytes(range(16))
    kw = dict(grid_for=lambda ar: Grid(ar, 100.0), domain=(-93.6, 44.6, -92.9, 45.3), domain_crs="EPSG:4326")

    def best(f):
        times = []
        for _ in range(a.repeat):
            t = time.perf_counter()
            f()
            times.append(time.perf_counter() - t)
        return min(times)

    print(f"{a.points:,} points, best of {a.repeat}")
    for name, path in files.items():
        crs = None if name == "lon/lat" else "EPSG:26915"
        plain = best(lambda: count_points(path, input_crs=crs, **kw))
        sketched = best(lambda: count_points(path, input_crs=crs, sketch=RecordSketch(key), **kw))
        print(f"  counting {name:8} CSV: {plain:6.2f} s without, {sketched:6.2f} s with the sketch "
              f"(+{(sketched / plain - 1) * 100:.0f}%)")
    alone = best(lambda: RecordSketch(key).add_lonlat(lon, lat))
    print(f"  the sketch alone on arrays: {alone:.2f} s ({a.points / alone / 1e6:.1f} M records/s)")


if __name__ == "__main__":
    main()
