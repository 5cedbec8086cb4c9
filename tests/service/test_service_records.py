"""The service and the ledger that knows records: its datasets are declared (with their records) at start-up, its
releases run under the strict policy (unattended), and a copy of a served dataset's records is charged to it from
any front end, or refused before it is read when it names no declared dataset.
"""

from __future__ import annotations

import os
import subprocess
import sys
from fractions import Fraction

import pytest
from service_helpers import AREA_TEXT, Client, Server, make_points, write_config

TOKEN = "rec-token-0123456789abcdefghijklmnopqrstuvw"
SPANS = {"epsilon": 0.5, "radius_m": 300, "min_points": 40}


@pytest.fixture(scope="module")
def svc(tmp_path_factory):
    d = tmp_path_factory.mktemp("service-records")
    make_points(d / "stops.gpkg", n=1201)
    config = write_config(d, server={"workers": 1, "owner_log": "owner.log"},
                          datasets={"stops": {"path": "stops.gpkg", "total_epsilon": 1.0, "layer": "points",
                                              "study_area": AREA_TEXT}},
                          analysts={"alice": (TOKEN, ["stops"])})
    server = Server(config, d)
    yield {"server": server, "dir": d}
    server.stop()


def _cli(d, *args):
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env.pop("DPGEO_LEDGER", None)
    return subprocess.run([sys.executable, "-m", "dpgeo", *map(str, args), "--ledger", str(d / "ledger.sqlite")],
                          capture_output=True, text=True, env=env, cwd=str(d), timeout=300)


def test_the_service_declares_its_records_and_the_policy_holds_for_every_front_end(svc):
    import geopandas as gpd

    from dpgeo.budget import Ledger

    d = svc["dir"]
    ledger = Ledger(d / "ledger.sqlite")
    assert ledger.policy() is None  # the default: strict for the service and every unattended run
    r = Client(svc["server"].url, TOKEN).execute("dp-dbscan-spans", dict(SPANS, dataset="stops"))
    assert r.status_code == 200, r.text
    assert r.json()["release"]["metadata"]["dataset"] == "stops"
    import sqlite3

    con = sqlite3.connect(ledger.path)
    assert con.execute("SELECT count(*) FROM record_sketches WHERE dataset = 'stops'").fetchone()[0] >= 1
    con.close()
    # a CSV export of the served file, shuffled: an unattended run naming no dataset is refused before reading
    g = gpd.read_file(d / "stops.gpkg", layer="points").sample(frac=1.0, random_state=1)
    g.assign(lon=g.geometry.x.map(repr), lat=g.geometry.y.map(repr)).drop(columns="geometry").to_csv(
        d / "copy.csv", index=False)
    run = ["spans", d / "copy.csv", "--epsilon", "0.25", "--radius", "300", "--min-points", "40",
           f"--domain={AREA_TEXT}"]
    p = _cli(d, *run, "-o", d / "a.geojson", "--unattended")
    assert p.returncode == 2 and "refused before any record was read" in p.stderr, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and not (d / "a.geojson").exists()
    # an attended run of the copy is charged to the served dataset, recognised from its records
    p = _cli(d, *run, "-o", d / "b.geojson")
    assert p.returncode == 0 and "charged to the declared dataset 'stops'" in p.stderr, p.stderr
    assert ledger.budget("stops").spent_epsilon == Fraction(3, 4)
    # and the service sees what the copy spent: 0.25 is left, a release at 0.5 is refused with a 4xx
    r = Client(svc["server"].url, TOKEN).execute("dp-dbscan-spans", dict(SPANS, dataset="stops"))
    assert r.status_code == 409, r.text
    key = open(str(ledger.path) + ".key", "rb").read()
    for f in os.listdir(d / "releases"):  # the key is never in a release
        content = (d / "releases" / f).read_bytes()
        assert key not in content and key.hex().encode() not in content
    assert key.hex() not in svc["server"].log()
