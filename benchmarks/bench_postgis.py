"""PostGIS read throughput into the counts, against the Parquet reader in the same run (prints; asserts nothing).

The same N points (the San Francisco setting of ``bench_spans.py``: lon/lat in a public bbox, Gaussian hot
spots plus uniform background) are written once as GeoParquet (WKB points) and once as a PostGIS table
``geometry(Point, 4326)``; each is then counted on the same 20 m grid by ``dpgeo.counting.count_points``
(read → project → count, batch by batch), best of ``--repeat`` runs each, alternating. The table is read
through :func:`dpgeo.postgis` (binary COPY in block ranges); ``--query`` also times the row-by-row path of a
``--sql`` input.

The server: ``--conninfo postgresql://USER@HOST/DB`` (an existing PostGIS database; the password from
~/.pgpass or PGPASSWORD), or by default a throw-away local server started like the tests do
(``tests/postgres.py``: Debian's postgresql and postgis, as root through the ``postgres`` user).

Usage::

    python benchmarks/bench_postgis.py                # 2 M points
    python benchmarks/bench_postgis.py --points 10M --repeat 3
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BBOX = (-122.7, 37.4, -122.1, 37.9)
HOT = (-122.52, 37.55, -122.20, 37.85)


def parse_size(s):
    s = s.strip().upper()
    mult = {"K": 10**3, "M": 10**6}.get(s[-1:], 1)
    return int(float(s[:-1] if s[-1:] in "KM" else s) * mult)


def make_points(n, seed=0):
    rng = np.random.default_rng(seed)
    k = int(n * 0.7)
    centres = np.column_stack([rng.uniform(HOT[0], HOT[2], 400), rng.uniform(HOT[1], HOT[3], 400)])
    which = rng.integers(0, 400, k)
    x = np.concatenate([centres[which, 0] + rng.normal(0, 0.002, k), rng.uniform(BBOX[0], BBOX[2], n - k)])
    y = np.concatenate([centres[which, 1] + rng.normal(0, 0.0015, k), rng.uniform(BBOX[1], BBOX[3], n - k)])
    return x, y


def write_parquet(x, y, path):
    import geopandas as gpd

    gpd.GeoDataFrame(geometry=gpd.points_from_xy(x, y), crs="EPSG:4326").to_parquet(path, row_group_size=1 << 20)


def load_postgis(conninfo, x, y, table="bench_points"):
    import psycopg

    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(f"DROP TABLE IF EXISTS {table}")
        conn.execute(f"CREATE TABLE {table} (id bigserial PRIMARY KEY, geom geometry(Point, 4326))")
        step = 1 << 18
        for a in range(0, x.size, step):
            conn.execute(f"INSERT INTO {table} (geom) SELECT ST_SetSRID(ST_MakePoint(u.a, u.b), 4326) FROM "
                         "unnest(%s::float8[], %s::float8[]) AS u(a, b)", (x[a:a + step].tolist(),
                                                                           y[a:a + step].tolist()))
        conn.execute(f"VACUUM ANALYZE {table}")
    return table


def count(source):
    from dpgeo.counting import count_points
    from dpgeo.grid import Grid

    t = time.perf_counter()
    c = count_points(source, grid_for=lambda a: Grid(a, 20.0), domain=BBOX)
    return time.perf_counter() - t, c


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--points", default="2M")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--conninfo", default=None)
    ap.add_argument("--query", action="store_true", help="also time a --sql input (row by row)")
    args = ap.parse_args(argv)
    sys.path.insert(0, ROOT)
    import dpgeo
    from dpgeo.counting import open_points

    n = parse_size(args.points)
    server = None
    conninfo = args.conninfo
    if conninfo is None:
        sys.path.insert(0, os.path.join(ROOT, "tests"))
        from postgres import start_server

        server = start_server()
        conninfo = server.url(server.new_database("bench"))
    try:
        x, y = make_points(n)
        folder = tempfile.mkdtemp(prefix="dpgeo-bench-pg-")
        pq_path = os.path.join(folder, "points.parquet")
        t = time.perf_counter()
        write_parquet(x, y, pq_path)
        table = load_postgis(conninfo, x, y)
        print(f"{n:,} points written to GeoParquet and PostGIS in {time.perf_counter() - t:.1f} s", flush=True)
        cases = {"parquet": lambda: open_points(pq_path),
                 "postgis table": lambda: open_points(dpgeo.postgis(conninfo, table=table))}
        if args.query:
            cases["postgis query"] = lambda: open_points(dpgeo.postgis(conninfo, sql=f"SELECT geom FROM {table}"))
        best = {k: float("inf") for k in cases}
        used = {}
        for _ in range(args.repeat):
            for name, make in cases.items():
                dt, c = count(make())
                best[name] = min(best[name], dt)
                used[name] = int(c.diagnostics["n_read"])
        assert len(set(used.values())) == 1, used
        print(f"{'reader':<15} {'best s':>8} {'M points/s':>11}")
        for name in cases:
            print(f"{name:<15} {best[name]:8.2f} {n / best[name] / 1e6:11.2f}")
        print(f"PostGIS table / Parquet throughput: {best['parquet'] / best['postgis table']:.2f} "
              f"(cores: {os.cpu_count()}; load average {os.getloadavg()[0]:.1f})")
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()
