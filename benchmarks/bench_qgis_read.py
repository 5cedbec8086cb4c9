"""How fast the QGIS plugin reads a point layer: feature by feature vs the library's file reader.

The plugin reads the private point layer in one of two ways (see
``qgis_plugin/dpgeo_qgis/reading.py``): QGIS's feature iterator, one Python
call per point (the baseline, and the only way for selections, filters,
unsaved edits, memory or database layers), or, for a plain GeoPackage,
Shapefile, GeoJSON or FlatGeobuf file, ``dpgeo.read_points`` (pyogrio and
Arrow). Both must give the same arrays; this script checks that and times
both in the same run, in seconds per million points, on synthetic
GeoPackages written to a temporary folder:

* ``clean``: ``--n`` points, an integer person field, no NULLs;
* ``nulls``: the same with 0.1 % NULL geometries and 1 % NULL persons (the
  fast path then reads the geometry and person columns a second time, to
  count the NULLs as the feature reader does).

Needs QGIS's Python bindings (``python3-qgis``); runs headless.

Usage::

    python benchmarks/bench_qgis_read.py                  # 2 million points
    python benchmarks/bench_qgis_read.py --n 200000 --repeat 1
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
BBOX = (-93.34, 44.88, -93.19, 45.06)  # Minneapolis, lon/lat


def write_points(path, n, *, null_geometry=0.0, null_person=0.0, seed=0):
    """A GeoPackage layer ``points`` (EPSG:4326) of ``n`` points with an int64 field ``person``."""
    import pyarrow as pa
    import pyogrio
    import shapely

    rng = np.random.default_rng(seed)
    x = rng.uniform(BBOX[0], BBOX[2], n)
    y = rng.uniform(BBOX[1], BBOX[3], n)
    wkb = shapely.to_wkb(shapely.points(x, y))
    wkb[rng.random(n) < null_geometry] = None
    person = pa.array(rng.integers(0, max(n // 20, 1), n), mask=rng.random(n) < null_person)
    table = pa.table({"person": person, "geometry": pa.array(wkb, type=pa.binary())})
    pyogrio.write_arrow(table, path, layer="points", driver="GPKG", crs="EPSG:4326", geometry_type="Point",
                        geometry_name="geometry")
    return path


def timed(func, repeat):
    """(best seconds over ``repeat`` runs, last result)."""
    best, result = float("inf"), None
    for _ in range(repeat):
        result = None
        gc.collect()
        t0 = time.perf_counter()
        result = func()
        best = min(best, time.perf_counter() - t0)
    return best, result


def same(a, b):
    xa, ya, ca, na, pa_, npa = a
    xb, yb, cb, nb, pb, npb = b
    ok = np.array_equal(xa, xb) and np.array_equal(ya, yb) and (ca, na, npa) == (cb, nb, npb)
    if pa_ is not None or pb is not None:
        ok = ok and pa_ is not None and pb is not None and pa_.tolist() == pb.tolist()
    return ok


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2_000_000, help="points per file (default 2 million)")
    ap.add_argument("--repeat", type=int, default=2, help="runs per figure; the best is printed (default 2)")
    ap.add_argument("--workdir", help="folder for the GeoPackages (default: a temporary one, removed)")
    args = ap.parse_args(argv)

    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    sys.path.insert(0, str(ROOT / "qgis_plugin"))
    from qgis.core import (Qgis, QgsApplication, QgsProcessingContext, QgsProcessingFeatureSource,
                           QgsProcessingFeedback)

    app = QgsApplication([], False)
    app.initQgis()
    import dpgeo
    from dpgeo_qgis import reading

    with tempfile.TemporaryDirectory(prefix="dpgeo-qgis-read-") as tmp:
        folder = Path(args.workdir or tmp)
        folder.mkdir(parents=True, exist_ok=True)
        files = {
            "clean": write_points(str(folder / "clean.gpkg"), args.n),
            "nulls": write_points(str(folder / "nulls.gpkg"), args.n, null_geometry=0.001, null_person=0.01, seed=1),
        }
        print(f"{args.n:,} points per file; best of {args.repeat}; dpgeo {dpgeo.__version__}; QGIS {Qgis.version()}")
        print(f"{'file':6} {'person field':13} {'feature by feature':>19} {'fast file reader':>17} {'speed-up':>9}")
        from qgis.core import QgsVectorLayer

        for label, person in (("clean", None), ("clean", "person"), ("nulls", "person")):
            path = files[label]
            layer = QgsVectorLayer(f"{path}|layername=points", "points", "ogr")
            context = QgsProcessingContext()
            source = QgsProcessingFeatureSource(layer, context)
            feedback = QgsProcessingFeedback()

            def slow(source=source, person=person):
                return reading.read_points(source, feedback, person_field=person)

            def fast(source=source, person=person):
                target = reading.fast_read_target(layer, layer)
                return reading.read_points_fast(dpgeo, *target, source, feedback, person_field=person)

            t_slow, r_slow = timed(slow, args.repeat)
            t_fast, r_fast = timed(fast, args.repeat)
            if not same(r_slow, r_fast):
                raise SystemExit(f"{label}/{person}: the two readers disagree")
            per_m = 1e6 / args.n
            print(f"{label:6} {person or '-':13} {t_slow * per_m:15.2f} s/M {t_fast * per_m:13.2f} s/M "
                  f"{t_slow / t_fast:8.1f}x")
            del source, context
            layer = None
            gc.collect()
    app.exitQgis()


if __name__ == "__main__":
    main()
