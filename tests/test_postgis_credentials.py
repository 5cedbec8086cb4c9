"""No credential in any output: a run from PostGIS, charged to a ledger on PostgreSQL and written to files and to a
PostGIS table, through Python and the command line, scanned for the connection's password, user, host and port.

Scanned: the release's metadata and repr, the warnings and log records of the run, every file written, the
command line's output (``spans``, ``budget show``, ``budget history``, ``info``), and a dump of both databases
as the owner would back them up (``pg_dump``: the ledger's tables, the output table and its comment, the
``dpgeo_metadata`` side table). The service's responses, files and logs are scanned by
``tests/service/test_service_postgis.py`` and ``tests/service/test_service_replicas.py``; QGIS's log by
``tests/qgis/test_postgis_qgis.py``.
"""

import json
import logging
import os
import subprocess
import sys
import warnings

import geopandas as gpd
import pytest

import dpgeo
from helpers import ROOT, SAMPLE_AREA, SAMPLE_POINTS
from postgres import load_layer

pytestmark = pytest.mark.postgres


def _secrets(server):
    """What names the connection: the password, the user, the host as written in the URLs, the port."""
    return [server.password, server.user, "localhost", f":{server.port}", f"port={server.port}", "postgresql://"]


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "dpgeo", *args], capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))


def test_no_credential_in_any_output_of_python_and_the_command_line(postgres_server, tmp_path, caplog):
    server = postgres_server
    data, ledger_db = server.new_database("creds"), server.new_database("credledger")
    load_layer(server, data, "stops", gpd.read_file(SAMPLE_POINTS))
    src_url = server.url(data, host="localhost")
    ledger_url = server.url(ledger_db, host="localhost")
    texts = []
    # -- Python: a named and an unnamed dataset, written to files and to a PostGIS table --
    caplog.set_level(logging.DEBUG, logger="dpgeo")
    kw = dict(epsilon=0.5, radius_m=150, min_points=40, domain=str(SAMPLE_AREA), ledger=ledger_url)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        named = dpgeo.dbscan_spans(dpgeo.postgis(src_url, table="stops"), dataset="stops-db", **kw)
        unnamed = dpgeo.dbscan_spans(dpgeo.postgis(src_url, sql="SELECT geom FROM stops WHERE id % 3 = 0"), **kw)
    for res in (named, unnamed):
        texts += [json.dumps(res.metadata, default=str), repr(res)]
        for ext in ("gpkg", "geojson", "html", "png"):
            res.to_file(str(tmp_path / f"api-{res.metadata['release_id']}.{ext}"))
    assert named.to_file(server.url(data, host="localhost", table="api_clusters")) == "PostGIS table 'api_clusters'"
    texts += [str(w.message) for w in caught] + [r.getMessage() for r in caplog.records]
    # -- the command line: a PostGIS input, a PostGIS output and a file, the ledger on PostgreSQL --
    out_url = server.url(data, host="localhost", table="cli_clusters")
    runs = [_cli("spans", src_url, "--table", "stops", "-o", out_url, "-o", str(tmp_path / "cli.gpkg"),
                 "--epsilon", "0.5", "--radius", "150", "--min-points", "40", "--domain", str(SAMPLE_AREA),
                 "--dataset", "stops-db", "--ledger", ledger_url),
            _cli("budget", "show", "stops-db", "--ledger", ledger_url),
            _cli("budget", "history", "--json", "--ledger", ledger_url),
            _cli("info", out_url, "--json"),
            _cli("spans", src_url, "--table", "no_such_table", "-o", str(tmp_path / "bad.gpkg"), "--epsilon", "0.5",
                 "--radius", "150", "--min-points", "40", "--domain", str(SAMPLE_AREA), "--ledger", ledger_url)]
    for r in runs[:4]:
        assert r.returncode == 0, r.stderr
    assert runs[4].returncode == 2 and "does not exist" in runs[4].stderr
    assert "cli_clusters" in runs[1].stdout  # the ledger names the output table, and nothing of the connection
    texts += [r.stdout + r.stderr for r in runs]
    texts += [server.dump(ledger_db), server.dump(data)]
    assert "dpgeo_metadata" in texts[-1] and "api_clusters" in texts[-1] and "cli_clusters" in texts[-1]
    assert "stops-db" in texts[-2]  # the ledger's tables are in the dump
    for s in _secrets(server):
        for i, text in enumerate(texts):
            assert s not in text, (s, i, text[max(0, text.find(s) - 200):text.find(s) + 200])
    files = sorted(os.listdir(tmp_path))
    assert len(files) >= 9
    for name in files:
        blob = (tmp_path / name).read_bytes()
        for s in _secrets(server):
            assert s.encode() not in blob, (s, name)
