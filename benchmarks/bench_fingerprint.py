"""How long the ledger takes to recognise an input by its content (dpgeo.budget.fingerprint).

Writes a CSV of random points of about ``--mb`` megabytes, then times, in the same run:

* reading the file once with a large buffer (the floor: the disk and the page cache);
* SHA-256 of the file streamed with the same buffer (what recognises an exact copy);
* the whole fingerprint: SHA-256 plus the content-defined chunks and their sketch (near-copies);
* the same call through a ledger a second time, which finds it in the cache (no read).

Prints MB/s for each. Usage: .venv/bin/python benchmarks/bench_fingerprint.py [--mb 512] [--repeat 2]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import tempfile
import time

import numpy as np


def _csv(path, mb):
    rng = np.random.default_rng(0)
    with open(path, "w") as f:
        f.write("lon,lat\n")
        while f.tell() < mb * 1e6:
            lon, lat = rng.normal(-93.26, 0.05, 200_000), rng.normal(44.97, 0.05, 200_000)
            f.write("\n".join(f"{a:.6f},{b:.6f}" for a, b in zip(lon.tolist(), lat.tolist())) + "\n")


def _read(path):
    buf = bytearray(8 << 20)
    with open(path, "rb", buffering=0) as f:
        while f.readinto(buf):
            pass


def _sha(path):
    buf = bytearray(8 << 20)
    view, h = memoryview(buf), hashlib.sha256()
    with open(path, "rb", buffering=0) as f:
        while n := f.readinto(buf):
            h.update(view[:n])
    return h.hexdigest()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=512)
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    from dpgeo.budget import Ledger
    from dpgeo.budget.fingerprint import fingerprint_file

    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "points.csv")
        _csv(path, args.mb)
        size = os.path.getsize(path) / 1e6
        ledger = Ledger(os.path.join(d, "ledger.sqlite"))
        ledger.fingerprint(path)  # fills the cache (and the page cache)
        rows = []
        for name, fn in (("read once (8 MiB buffer)", _read), ("SHA-256 only", _sha),
                         ("fingerprint: SHA-256 + chunks + sketch", fingerprint_file),
                         ("fingerprint again through the ledger (cached)", ledger.fingerprint)):
            best = min(_time(fn, path) for _ in range(args.repeat))
            rows.append((name, best))
        print(f"file: {size:,.0f} MB of CSV (page cache warm)")
        for name, t in rows:
            print(f"  {name:48s} {t:8.3f} s  {size / t:10,.0f} MB/s")


def _time(fn, path):
    t = time.perf_counter()
    fn(path)
    return time.perf_counter() - t


if __name__ == "__main__":
    main()
