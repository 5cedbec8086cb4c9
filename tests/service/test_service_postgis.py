"""``dpgeo serve`` with a PostGIS dataset (a connection instead of a path), against a real PostgreSQL server.

The dataset's release is charged to its declared name, and no credential — the connection's user, its host,
its port or the password — appears in any response, any file the service wrote (releases, ledger, job records)
or the service log.
"""

from __future__ import annotations

import os

import pytest
from service_helpers import AREA_TEXT, SAMPLE_POINTS, Client, Server, write_config

from postgres import load_layer

pytestmark = pytest.mark.postgres
TOKEN = "pg-token-0123456789abcdefghijklmnopqrstuvwxy"


@pytest.fixture(scope="module")
def pg_svc(tmp_path_factory, postgres_server):
    import geopandas as gpd

    db = postgres_server.new_database("svc")
    load_layer(postgres_server, db, "stops", gpd.read_file(SAMPLE_POINTS))
    d = tmp_path_factory.mktemp("pg-service")
    config = write_config(
        d, server={"owner_log": "owner.log", "workers": 1},
        datasets={"pgstops": {"connection": postgres_server.url(db, host="localhost"), "table": "stops",
                              "study_area": AREA_TEXT, "total_epsilon": 1.0},
                  "gone": {"connection": postgres_server.url(db, host="localhost"), "table": "no_such_table",
                           "study_area": AREA_TEXT, "total_epsilon": 1.0}},
        analysts={"ana": (TOKEN, ["pgstops", "gone"])})
    server = Server(config, d)
    yield {"server": server, "dir": d, "pg": postgres_server}
    server.stop()


def test_a_postgis_dataset_is_released_and_charged_to_its_name(pg_svc):
    from dpgeo.budget import Ledger

    c = Client(pg_svc["server"].url, TOKEN)
    r = c.execute("dp-dbscan-spans", {"dataset": "pgstops", "epsilon": 0.5, "radius_m": 150, "min_points": 40})
    assert r.status_code in (200, 201), r.text
    b = Ledger(pg_svc["dir"] / "ledger.sqlite").budget("pgstops")
    assert float(b.spent_epsilon) == 0.5 and len(b.releases) == 1
    r = c.execute("dp-dbscan-spans", {"dataset": "gone", "epsilon": 0.5, "radius_m": 150, "min_points": 40})
    assert r.status_code >= 400
    assert float(Ledger(pg_svc["dir"] / "ledger.sqlite").budget("gone").spent_epsilon) == 0  # cancelled: not read


def test_no_credential_in_any_response_file_or_log(pg_svc):
    pg = pg_svc["pg"]
    secrets = [pg.password.encode(), pg.user.encode(), b"localhost", f":{pg.port}".encode(), b"postgresql://"]
    for method, path, status, ctype, body in Client.seen:
        for s in secrets:
            assert s not in body, (s, method, path)
    pg_svc["server"].stop()
    for root, _, files in os.walk(pg_svc["dir"]):
        for f in files:
            if f == "service.toml":  # the owner's own configuration holds the connection (no password)
                continue
            data = open(os.path.join(root, f), "rb").read()
            for s in secrets:
                assert s not in data, (s, f)
