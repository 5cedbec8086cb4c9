"""Load on ``dpgeo serve`` over loopback: latency, and the budget holding under concurrent releases.

Starts ``dpgeo serve`` on 127.0.0.1 with the sample layer (51,920 Minneapolis police stops) as dataset
``stops`` with a total budget that allows exactly ``--fit`` releases, then, from ``--clients``
concurrent clients (threads, one analyst each, plain HTTP):

1. ``--requests`` noise previews (no data read, no budget): p50/p95 latency;
2. ``--requests`` DP-DBSCAN span releases at ε = total / fit: exactly ``fit`` must succeed (200) and
   every other one be refused (409), and the ledger must sum to the total; p50/p95 latency of the
   successes (which queue for the worker) and of the refusals.

Baselines measured in the same run: ``GET /conformance`` (the framework's floor), one release over
HTTP with no other load, and the same release in-process (``dpgeo.dbscan_spans``, no service).

Prints figures; exits 1 only if the budget was overspent or the count of successes is wrong.

``--timing N`` measures the timing channel instead: N synchronous span releases, one at a time, alternating
between the sample layer and the same layer moved out of the study area (no point inside), with the
server's ``job_quantum_seconds`` at 0 (the raw run times, which the default quantum must exceed) and at
``--quantum`` (default: the server's default); prints both distributions and their gap.

``--abuse N`` measures what an abusive analyst costs the others instead: the p50/p95 of anonymous reads
(``/conformance``, a page of items) and of another analyst's small releases, N of each, first with the
server idle, then while one analyst sends the requests of the red team's report (an H3 resolution 13 heat
layer, 20 m cells, daily series over 1,000 days, a 4096² WaveCluster grid, density bands with a 1,000 km
kernel, each with another ε) in a loop from ``--abusers`` threads, under the rate limits an owner would set
(600 requests and 120 executions a minute per analyst; the abuser waits out each 429 as told, up to 1 s,
unless ``--flood``); prints both and their ratio, what the abusive
requests were answered (413 by the cost model, 429 by the rate limit) and the server's largest RSS. Exits 1
if a p95 under abuse is more than twice the idle one (plus 5 ms, the resolution on a busy machine) or an
abusive request was accepted.

Usage::

    python benchmarks/bench_service.py                        # 200 requests, 20 clients, 10 releases fit
    python benchmarks/bench_service.py --requests 60 --clients 10 --fit 4 --workers 2
    python benchmarks/bench_service.py --timing 20            # full vs empty dataset, raw and quantised
    python benchmarks/bench_service.py --abuse 40             # reads and small releases, idle vs abused
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import socket
import subprocess
import sys
import tempfile
import time
from fractions import Fraction
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
POINTS = ROOT / "sample_layers" / "minneapolis_police_stops_2017.gpkg"
AREA = ROOT / "sample_layers" / "minneapolis_study_area.geojson"
SPANS = {"dataset": "stops", "radius_m": 150, "min_points": 40}


def pct(values, q):
    if not values:
        return float("nan")
    v = sorted(values)
    return v[min(len(v) - 1, round(q / 100 * (len(v) - 1)))]


def fmt(values):
    return (f"p50 {1000 * pct(values, 50):8.1f} ms   p95 {1000 * pct(values, 95):8.1f} ms   "
            f"(n = {len(values)})")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(folder, args, server=(), datasets=None):
    from dpgeo.server.auth import hash_token

    datasets = datasets or {"stops": POINTS}
    tokens = {f"a{i:02d}": f"bench-token-{i:02d}-" + "x" * 32 for i in range(args.clients)}
    given = {line.split("=")[0].strip() for line in server}
    lines = ["[server]", 'ledger = "ledger.sqlite"', 'releases = "releases/"', f"workers = {args.workers}",
             *[f"{k} = 100000" for k in ("requests_per_minute", "executions_per_minute") if k not in given],
             f"max_queued_jobs = {max(32, args.clients)}", *server]
    for name, path in datasets.items():
        lines += ["", f"[datasets.{name}]", f'path = "{path}"', f'study_area = "{AREA}"',
                  f'total_epsilon = "{args.total}"', 'time_columns = ["date"]']
    granted = "[" + ", ".join(f'"{n}"' for n in datasets) + "]"
    for name, tok in tokens.items():
        lines += ["", f"[analysts.{name}]", f'token_sha256 = "{hash_token(tok)}"', f"datasets = {granted}"]
    cfg = Path(folder) / "service.toml"
    cfg.write_text("\n".join(lines) + "\n")
    port = free_port()
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    log = open(Path(folder) / "server.log", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "dpgeo", "serve", str(cfg), "--port", str(port)],
                            stdout=log, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    import requests

    for _ in range(600):
        try:
            if requests.get(url + "/conformance", timeout=1).ok:
                break
        except requests.ConnectionError:
            time.sleep(0.1)
    else:
        proc.terminate()
        raise SystemExit("the server did not start; see " + str(Path(folder) / "server.log"))
    return proc, url, tokens


def run_many(url, tokens, n, clients, make_request):
    """``n`` requests from ``clients`` threads (one analyst and one HTTP session each); [(status, seconds)].

    A session belongs to one thread: it sends its next request as soon as the
    last one is answered, so its keep-alive connection is never left idle
    long enough for the server to close it under the client's feet.
    """
    import itertools
    import threading

    import requests

    names = itertools.cycle(list(tokens)[:clients])
    local = threading.local()
    lock = threading.Lock()

    def one(i):
        if not hasattr(local, "session"):
            with lock:
                name = next(names)
            local.session = requests.Session()
            local.session.headers["Authorization"] = f"Bearer {tokens[name]}"
        t0 = time.perf_counter()
        r = make_request(local.session, url, i)
        return r.status_code, time.perf_counter() - t0

    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
        return list(pool.map(one, range(n)))


def timing(args):
    """Release times on the sample layer and on the same points moved out of the study area, raw and quantised."""
    import geopandas as gpd
    import requests

    from dpgeo.server.config import DEFAULT_JOB_QUANTUM_S

    quantum = DEFAULT_JOB_QUANTUM_S if args.quantum is None else args.quantum
    args.total = "1000"
    with tempfile.TemporaryDirectory(prefix="dpgeo-bench-timing-") as folder:
        moved = gpd.read_file(POINTS)
        moved["geometry"] = moved.geometry.translate(20.0, -10.0)  # in another country: none in the study area
        nowhere = Path(folder) / "nowhere.gpkg"
        moved.to_file(nowhere, driver="GPKG")
        print(f"{args.timing} releases each, one at a time: 'stops' = the sample layer ({len(moved):,} points), "
              "'nowhere' = the same points moved out of the study area\n")
        for q in (0.0, quantum):
            sub = Path(folder) / f"q{q:g}"
            sub.mkdir()
            proc, url, tokens = start(sub, args, server=[f"job_quantum_seconds = {q}"],
                                      datasets={"stops": POINTS, "nowhere": nowhere})
            try:
                s = requests.Session()
                s.headers["Authorization"] = f"Bearer {tokens['a00']}"
                times = {"stops": [], "nowhere": []}
                for i in range(2 * args.timing + 2):
                    name = ("stops", "nowhere")[i % 2]
                    t0 = time.perf_counter()
                    r = s.post(url + "/processes/dp-dbscan-spans/execution",
                               json={"inputs": dict(SPANS, dataset=name, epsilon=0.1)})
                    assert r.status_code == 200, r.text
                    if i >= 2:  # the first of each warms up
                        times[name].append(time.perf_counter() - t0)
                print(f"job_quantum_seconds = {q:g}:")
                for name, ts in times.items():
                    print(f"  {name:8s} {fmt(ts)}   max {1000 * max(ts):8.1f} ms")
                gap = pct(times["stops"], 50) - pct(times["nowhere"], 50)
                print(f"  gap of the medians: {1000 * gap:+.1f} ms\n")
            finally:
                proc.terminate()
                proc.wait(30)
    return 0


#: The red team's requests (issue "a service no analyst can tie up"), each beyond the default [limits].
ABUSIVE = [
    ("dp-heat", {"epsilon": 0.002, "h3_resolution": 13}),
    ("dp-heat", {"epsilon": 0.05, "cell_m": 20}),
    ("dp-heat", {"epsilon": 0.05, "cell_m": 100, "time": "date", "period": "day", "period_start": "2017-01-01",
                 "period_end": "2019-09-28"}),
    ("dp-dbscan-spans", {"epsilon": 0.05, "radius_m": 20, "min_points": 10, "time": "date", "period": "day",
                         "period_start": "2017-01-01", "period_end": "2019-09-28"}),
    ("dp-kmeans", {"epsilon": 0.05, "k": 1000, "time": "date", "period": "day", "period_start": "2017-01-01",
                   "period_end": "2019-09-28"}),
    ("dp-wavecluster", {"epsilon": 0.05, "grid_size": 4096}),
    ("dp-heat", {"epsilon": 0.05, "cell_m": 250, "bands": 5, "bandwidth_m": 1e6}),
]


def _rss(pid) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS:"))


def abuse(args):
    """Reads and small releases of one analyst, idle and while another sends the report's requests in a loop."""
    import threading

    import requests

    args.total = "1000"
    args.clients = 2
    with tempfile.TemporaryDirectory(prefix="dpgeo-bench-abuse-") as folder:
        # the rate limits an owner of a public service would set (each analyst: 10 requests and 2 executions a
        # second at most); the abusive analyst sends as fast as the server answers
        proc, url, tokens = start(folder, args, server=["job_quantum_seconds = 0", "max_jobs_per_analyst = 64",
                                                        "requests_per_minute = 600", "executions_per_minute = 120"])
        try:
            reader, anon = requests.Session(), requests.Session()
            reader.headers["Authorization"] = f"Bearer {tokens['a00']}"
            r = reader.post(url + "/processes/dp-heat/execution",
                            json={"inputs": {"dataset": "stops", "epsilon": 0.01, "cell_m": 1000}})
            assert r.status_code == 200, r.text
            rid = r.json()["release"]["id"]

            def measure(n):
                t = {"GET /conformance": [], "GET /items?limit=10": [], "small release": []}
                for i in range(n):
                    for key, call in (("GET /conformance", lambda: anon.get(url + "/conformance")),
                                      ("GET /items?limit=10",
                                       lambda: anon.get(f"{url}/collections/{rid}/items?limit=10")),
                                      ("small release", lambda: reader.post(
                                          url + "/processes/dp-heat/execution",
                                          json={"inputs": {"dataset": "stops", "epsilon": 0.01 + i / 1e4,
                                                           "cell_m": 2000}, "outputs": {"release": {}}}))):
                        t0 = time.perf_counter()
                        res = call()
                        t[key].append(time.perf_counter() - t0)
                        assert res.status_code == 200, res.text
                return t

            idle = measure(args.abuse)
            stop, answers, peak = threading.Event(), [], [0]

            def abuser(k):
                s = requests.Session()
                s.headers["Authorization"] = f"Bearer {tokens['a01']}"
                i = 0
                while not stop.is_set():
                    process, inputs = ABUSIVE[i % len(ABUSIVE)]
                    t0 = time.perf_counter()
                    r = s.post(f"{url}/processes/{process}/execution", headers={"Prefer": "respond-async"},
                               json={"inputs": dict(inputs, dataset="stops",
                                                    epsilon=inputs["epsilon"] * (1 + (k * 10**4 + i) / 1e6))})
                    answers.append((r.status_code, time.perf_counter() - t0))
                    peak[0] = max(peak[0], _rss(proc.pid))
                    i += 1
                    if r.status_code == 429 and not args.flood:  # an analyst who wants answers waits as told
                        stop.wait(min(1.0, float(r.headers.get("Retry-After", 1))))

            threads = [threading.Thread(target=abuser, args=(k,)) for k in range(args.abusers)]
            for t in threads:
                t.start()
            try:
                abused = measure(args.abuse)
            finally:
                stop.set()
                for t in threads:
                    t.join(60)
            print(f"dpgeo serve on {url}, one worker, job_quantum_seconds = 0; {args.abuse} of each request, idle "
                  f"then beside {args.abusers} thread(s) of an abusive analyst ({len(answers)} requests)\n")
            worst = 0.0
            for key in idle:
                ratio = pct(abused[key], 95) / pct(idle[key], 95)
                worst = max(worst, (pct(abused[key], 95) - 0.005) / pct(idle[key], 95))
                print(f"{key:22s} idle:   {fmt(idle[key])}")
                print(f"{'':22s} abused: {fmt(abused[key])}   p95 ratio {ratio:.2f}")
            codes = sorted({c for c, _ in answers})
            print(f"\nabusive requests answered {codes}: {fmt([t for _, t in answers])}")
            print(f"server RSS: largest {peak[0] / 2**20:.0f} MiB while abused")
            good = worst <= 2.0 and set(codes) <= {413, 429}
            print("OK" if good else "NOT OK: a p95 more than doubled, or an abusive request was accepted")
            return 0 if good else 1
        finally:
            proc.terminate()
            proc.wait(30)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--clients", type=int, default=20)
    ap.add_argument("--fit", type=int, default=10, help="releases the total budget allows")
    ap.add_argument("--workers", type=int, default=1, help="worker processes of the server")
    ap.add_argument("--timing", type=int, default=0, metavar="N",
                    help="measure the timing channel instead: N releases on a full and on an empty dataset")
    ap.add_argument("--quantum", type=float, default=None, help="job_quantum_seconds for --timing")
    ap.add_argument("--abuse", type=int, default=0, metavar="N",
                    help="measure reads and small releases, N of each, idle and beside an abusive analyst")
    ap.add_argument("--abusers", type=int, default=2, help="threads of the abusive analyst for --abuse")
    ap.add_argument("--flood", action="store_true",
                    help="--abuse: the abusive analyst ignores 429 and sends as fast as it is answered (a flood: "
                         "what the reverse proxy's limits are for)")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    if args.abuse:
        return abuse(args)
    if args.timing:
        args.clients = 1
        return timing(args)
    eps = Fraction(1, 10)
    args.total = str(eps * args.fit)
    import requests

    import dpgeo
    from dpgeo.budget import Ledger

    with tempfile.TemporaryDirectory(prefix="dpgeo-bench-service-") as folder:
        proc, url, tokens = start(folder, args)
        try:
            print(f"dpgeo serve on {url}: {args.workers} worker(s); dataset 'stops' (sample layer), total epsilon "
                  f"{args.total} = {args.fit} releases at epsilon {float(eps):g}; {args.clients} clients\n")
            s = requests.Session()
            base = []
            for _ in range(50):
                t0 = time.perf_counter()
                s.get(url + "/conformance")
                base.append(time.perf_counter() - t0)
            print(f"baseline GET /conformance, one client:        {fmt(base)}")

            def preview(sess, u, i):  # every request a different MinPts: no answer comes from the cache
                return sess.post(u + "/processes/noise-preview/execution",
                                 json={"inputs": dict(SPANS, epsilon=float(eps), min_points=1000 + i)})

            one = [t for _, t in run_many(url, tokens, 20, 1, lambda se, u, i: preview(se, u, 10**6 + i))]
            print(f"noise preview, one client:                   {fmt(one)}")
            res = run_many(url, tokens, args.requests, args.clients, preview)
            ok = [t for c, t in res if c == 200]
            print(f"noise preview, {args.clients} concurrent clients:     {fmt(ok)}"
                  + ("" if len(ok) == len(res) else f"  ({len(res) - len(ok)} not 200!)"))

            # one release with no other load, then the same in-process
            t0 = time.perf_counter()
            r = s.post(url + "/processes/dp-dbscan-spans/execution", json={"inputs": dict(SPANS, epsilon=float(eps))},
                       headers={"Authorization": f"Bearer {tokens['a00']}"})
            single = time.perf_counter() - t0
            assert r.status_code == 200, r.text
            t0 = time.perf_counter()
            dpgeo.dbscan_spans(str(POINTS), epsilon=float(eps), radius_m=150, min_points=40, domain=str(AREA),
                               unattended=True, dataset="stops-in-process",
                               ledger=str(Path(folder) / "in-process-ledger.sqlite"))  # not the user's ledger
            inproc = time.perf_counter() - t0
            print(f"one spans release over HTTP, no other load:  {1000 * single:8.1f} ms "
                  f"(in-process dpgeo.dbscan_spans, no files: {1000 * inproc:.1f} ms)")

            def release(sess, u, i):
                return sess.post(u + "/processes/dp-dbscan-spans/execution",
                                 json={"inputs": dict(SPANS, epsilon=float(eps))})

            t0 = time.perf_counter()
            res = run_many(url, tokens, args.requests, args.clients, release)
            wall = time.perf_counter() - t0
            codes = [c for c, _ in res]
            wins = [t for c, t in res if c == 200]
            refused = [t for c, t in res if c == 409]
            print(f"spans releases, {args.clients} concurrent clients, {args.requests} requests in {wall:.1f} s:")
            print(f"  succeeded (200):                            {fmt(wins)}")
            print(f"  refused, budget (409):                      {fmt(refused)}")
            other = sorted({c for c in codes if c not in (200, 409)})
            ledger = Ledger(Path(folder) / "ledger.sqlite").budget("stops")
            fit = args.fit - 1  # one release was made above
            good = (codes.count(200) == fit and codes.count(409) == len(codes) - fit
                    and ledger.spent_epsilon == ledger.total_epsilon and ledger.n_charged == args.fit)
            print(f"\n{codes.count(200)} succeeded (expected {fit}), {codes.count(409)} refused, "
                  f"other: {other or 'none'}; "
                  f"ledger: {ledger.n_charged} releases, spent {float(ledger.spent_epsilon):g} of "
                  f"{float(ledger.total_epsilon):g} -> {'OK' if good else 'BUDGET VIOLATION'}")
            return 0 if good else 1
        finally:
            proc.terminate()
            proc.wait(30)


if __name__ == "__main__":
    sys.exit(main())
