"""The neighbour fuzzer, a long run: D and D′ = D plus one drawn record, for every input path, N cases each.

The same checks as ``tests/test_neighbour_fuzzer.py`` (``tests/neighbours.py``):
the records a reader uses from D′ are D's plus at most the new one, and
``dpgeo heat --unattended`` on D and D′ gives the same exit code, standard
error and files. Prints, per path, the cases drawn and the violations found
(with the first one's description), and the totals; the exit status is 1 when
any violation was found.

    python benchmarks/fuzz_readers.py                        # 200 reader cases and 10 command-line cases per path
    python benchmarks/fuzz_readers.py --cases 2000 --cli-cases 50
    python benchmarks/fuzz_readers.py --paths csv gpkg --cases 100
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests")]


def run(path, cases, check, folder):
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    found = []
    drawn = [0]

    @settings(max_examples=cases, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(st.data())
    def one(data):
        drawn[0] += 1
        v = check(path, data.draw, folder)
        if v is not None:
            found.append(v)

    one()
    return drawn[0], found


def main(argv=None):
    import neighbours as nb

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=200, help="drawn neighbours per path for the reader's check")
    ap.add_argument("--cli-cases", type=int, default=10, help="drawn neighbours per file path through the command line")
    ap.add_argument("--paths", nargs="*", default=list(nb.PATHS), choices=list(nb.PATHS))
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    rows, total_cases, total_bad = [], 0, 0
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        for path in args.paths:
            for kind, n, check in (("reader", args.cases, nb.check_reader), ("cli", args.cli_cases, nb.check_cli)):
                if n <= 0 or (kind == "cli" and path not in nb.FILE_PATHS):
                    continue
                t = time.perf_counter()
                try:
                    drawn, found = run(path, n, check, folder)
                except Exception as exc:  # noqa: BLE001 - a fault of the fuzzer itself (writing D′), not of a reader
                    print(f"{path:15s} {kind:6s} the fuzzer failed to write a case: {type(exc).__name__}: {exc}")
                    total_bad += 1
                    continue
                total_cases += drawn
                total_bad += len(found)
                rows.append((path, kind, drawn, len(found), time.perf_counter() - t))
                print(f"{path:15s} {kind:6s} cases {drawn:6d}  violations {len(found):3d}  {rows[-1][4]:7.1f} s"
                      + (f"  first: {str(found[0])[:300]}" if found else ""), flush=True)
    print(f"\n{len(set(r[0] for r in rows))} paths, {total_cases} cases, {total_bad} violations, "
          f"{time.perf_counter() - t0:.0f} s")
    return 1 if total_bad else 0


if __name__ == "__main__":
    sys.exit(main())
