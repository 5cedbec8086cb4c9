"""Helpers for the service tests: a real ``dpgeo serve`` in a subprocess on 127.0.0.1, private data with sentinels.

Every server here listens on the loopback interface only, on a free port, and
is stopped at the end of its module. The private inputs hold *sentinel*
values (an attribute string, person ids, one odd coordinate and an unusual
record count) that must never appear in any response or in the service log.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from helpers import CHROMIUM, CHROMIUM_ARGS, browser_missing  # noqa: F401 (the one Chromium set-up)

ROOT = Path(__file__).resolve().parents[2]
SAMPLE_POINTS = ROOT / "sample_layers" / "minneapolis_police_stops_2017.gpkg"
SAMPLE_AREA = ROOT / "sample_layers" / "minneapolis_study_area.geojson"

#: Public study area of the synthetic datasets (lon/lat).
AREA = (-93.33, 44.89, -93.19, 45.06)
AREA_TEXT = ",".join(f"{v:g}" for v in AREA)
#: Values that exist only in the private inputs.
SENTINEL_TEXT = "SENTINEL-c0ffee-7f3a"
SENTINEL_PERSON = "SENTINEL-PERSON-93f2"
SENTINEL_COORD = "-93.2577123456"
#: The exact number of records of the main private input (an unusual number, grepped for in logs and errors).
N_PRIVATE = 4817

pytest.importorskip("fastapi", reason="the service tests need the serve extra (from the checkout: pip install -e '.[serve]')")
pytest.importorskip("uvicorn", reason="the service tests need the serve extra (from the checkout: pip install -e '.[serve]')")


def make_points(path, *, n=N_PRIVATE, seed=0, outside=False):
    """A private point layer: three clusters and background, plus sentinel attributes and one sentinel point."""
    import geopandas as gpd

    rng = np.random.default_rng(seed)
    centres = [(-93.27, 44.98), (-93.23, 45.01), (-93.29, 44.93)]
    k = (n - 1) // 4
    xs, ys = [], []
    for cx, cy in centres:
        xs.append(rng.normal(cx, 0.002, k))
        ys.append(rng.normal(cy, 0.0015, k))
    m = n - 1 - 3 * k
    xs.append(rng.uniform(AREA[0], AREA[2], m))
    ys.append(rng.uniform(AREA[1], AREA[3], m))
    x = np.concatenate(xs + [[float(SENTINEL_COORD)]])
    y = np.concatenate(ys + [[44.9744654321]])
    if outside:  # every point far from the study area (in another country)
        x, y = x + 20.0, y - 10.0
    person = np.array([f"p{i % 900}" for i in range(n)], dtype=object)
    person[-1] = SENTINEL_PERSON
    note = np.full(n, SENTINEL_TEXT, dtype=object)
    gdf = gpd.GeoDataFrame({"officer": person, "note": note}, geometry=gpd.points_from_xy(x, y), crs="EPSG:4326")
    gdf.to_file(path, layer="points", driver="GPKG")
    return path


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def toml_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    return repr(v)


def write_config(folder, *, server=None, datasets, analysts):
    """A TOML configuration in ``folder``; ``analysts`` maps name -> (token, [datasets]). Returns its path."""
    from dpgeo.server.auth import hash_token

    lines = ["[server]", 'ledger = "ledger.sqlite"', 'releases = "releases/"']
    lines += [f"{k} = {toml_value(v)}" for k, v in (server or {}).items()]
    for name, d in datasets.items():
        lines += ["", f"[datasets.{name}]"] + [f"{k} = {toml_value(v)}" for k, v in d.items()]
    for name, (token, granted) in analysts.items():
        lines += ["", f"[analysts.{name}]", f'token_sha256 = "{hash_token(token)}"',
                  f"datasets = {toml_value(granted)}"]
    path = Path(folder) / "service.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


class Server:
    """``dpgeo serve CONFIG`` in a subprocess on 127.0.0.1 (its stderr, the service log, in a file)."""

    def __init__(self, config, folder, env=None):
        self.config = Path(config)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = Path(folder) / f"server-{self.port}.log"
        env_extra, env = env, dict(os.environ, PYTHONPATH=str(ROOT), PYTHONUNBUFFERED="1")
        env.pop("DPGEO_LEDGER", None)
        env.pop("DPGEO_ALLOW_TEST_SEED", None)  # only a test that means it turns on [server] test_seed
        env.update(env_extra or {})
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen([sys.executable, "-m", "dpgeo", "serve", str(self.config), "--host", "127.0.0.1",
                                      "--port", str(self.port)], stdout=self._log, stderr=subprocess.STDOUT, env=env,
                                     cwd=str(folder))
        self._wait()

    def _wait(self, timeout=90):
        import requests

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"dpgeo serve exited with {self.proc.returncode}:\n{self.log()}")
            try:
                if requests.get(self.url + "/conformance", timeout=2).status_code == 200:
                    return
            except requests.ConnectionError:
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"dpgeo serve did not answer within {timeout} s:\n{self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def kill(self):
        """SIGKILL the server (no shutdown of any kind), as the kernel's OOM killer or ``kill -9`` would."""
        self.proc.kill()
        self.proc.wait(10)
        self._log.close()

    def stop(self):
        if self._log.closed:
            return
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._log.close()


class Client:
    """``requests`` with an optional bearer token; keeps every response for the sentinel checks."""

    seen: list = []

    def __init__(self, base, token=None):
        import requests

        self.base = base
        self.session = requests.Session()
        if token is not None:
            self.session.headers["Authorization"] = f"Bearer {token}"

    def request(self, method, path, **kw):
        kw.setdefault("timeout", 60)
        r = self.session.request(method, path if path.startswith("http") else self.base + path, **kw)
        Client.seen.append((method, path, r.status_code, r.headers.get("content-type", ""), r.content))
        return r

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def post(self, path, **kw):
        return self.request("POST", path, **kw)

    def execute(self, process, inputs, *, asynchronous=False, **body):
        headers = {"Prefer": "respond-async"} if asynchronous else {}
        return self.post(f"/processes/{process}/execution", json={"inputs": inputs, **body}, headers=headers)


def wait_job(client, location, timeout=60):
    """Poll a job (plain HTTP: OWSLib has no job-status call) until it is finished; returns its status document."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        doc = client.get(location).json()
        if doc["status"] in ("successful", "failed", "dismissed"):
            return doc
        time.sleep(0.2)
    raise AssertionError(f"job {location} did not finish in {timeout} s")


def job_row(jobs_sqlite, job_id) -> dict:
    """A job's record as the server keeps it (phase and worker pid included), read from its SQLite file."""
    import sqlite3

    conn = sqlite3.connect(f"file:{jobs_sqlite}?mode=ro", uri=True, timeout=10)
    try:
        conn.row_factory = sqlite3.Row
        row = conn.execute("SELECT * FROM jobs WHERE job_id = ?", (job_id,)).fetchone()
        return dict(row) if row is not None else {}
    finally:
        conn.close()


def process_gone(pid) -> bool:
    """Whether process ``pid`` has ended (a zombie waiting to be reaped counts as ended)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except (FileNotFoundError, ProcessLookupError):
        return True


def wait_until(predicate, timeout, what, step=0.005):
    """Poll ``predicate`` until it returns something true; fail naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(step)
    raise AssertionError(f"{what} within {timeout} s")



def holds_write_lock(pid) -> bool:
    """Whether process ``pid`` holds a POSIX write lock (an SQLite writer), read from /proc/locks."""
    with open("/proc/locks", encoding="ascii") as f:
        return any(len(p) > 4 and p[3] == "WRITE" and p[4] == str(pid) for p in (line.split() for line in f))


def stop_without_locks(pid):
    """SIGSTOP ``pid`` at a moment it holds no SQLite write lock (so other jobs are not held up)."""
    import signal

    for _ in range(1000):
        os.kill(pid, signal.SIGSTOP)
        if not holds_write_lock(pid):
            return
        os.kill(pid, signal.SIGCONT)
        time.sleep(0.001)
    raise AssertionError(f"process {pid} always held a write lock")

def qgis_missing():
    """Why QGIS cannot be driven here, or None."""
    py = Path("/usr/bin/python3")
    if not py.exists():
        return "no /usr/bin/python3 with QGIS"
    r = subprocess.run([str(py), "-c", "import qgis.core"], check=False, capture_output=True,
                       env=dict(os.environ, QT_QPA_PLATFORM="offscreen"))
    if r.returncode != 0:
        return "QGIS's Python bindings are not installed (Debian: apt-get install python3-qgis)"
    return None


def skip_or_fail(why, env):
    if os.environ.get(env) == "1":
        pytest.fail(f"{env}=1 but {why}")
    pytest.skip(why)
