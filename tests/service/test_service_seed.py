"""``[server] test_seed``: a service whose releases are reproducible, for tests only, and marked not private.

* The key is refused unless the service's environment also says ``DPGEO_ALLOW_TEST_SEED=1`` (a configuration
  copied from a test cannot turn it on), and a service that has it says so loudly in its log.
* The sample's stops served from the GeoPackage and from PostGIS (the same records loaded into a real
  PostgreSQL server) give the same release with the same seed: the same features, byte for byte, in the
  GeoJSON and in the GeoPackage; and the same release as ``dpgeo spans --seed`` on the command line.
* Every served output of a seeded release says "not differentially private" as the command line's does (the
  same metadata: ``differentially_private: false`` and the same reason), and nothing is charged.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys

import pytest
from service_helpers import ROOT, SAMPLE_AREA, SAMPLE_POINTS, Client, Server, write_config

from dpgeo.randomness import NoiseSource
from dpgeo.server.config import ALLOW_TEST_SEED_ENV, ConfigError, load_config

TOKEN = "seed-token-0123456789abcdefghijklmnopqrstuvw"
SEED = 7
SPANS = {"epsilon": 0.5, "radius_m": 150, "min_points": 40}
#: The reason every output made with a fixed seed gives, on every front end (dpgeo.randomness.NoiseSource).
SEED_REASON = NoiseSource(seed=SEED).not_private_reason
#: Metadata members that may differ between the two datasets' releases: the release's own random id and the
#: dataset's configured name. Nothing names the source (no path, no table, no connection).
DIFFERS = {"release_id", "dataset"}


def _seeded_config(folder, datasets):
    return write_config(folder, server={"test_seed": SEED, "job_quantum_seconds": 0, "workers": 1},
                        datasets=datasets, analysts={"ana": (TOKEN, list(datasets))})


def test_test_seed_is_refused_without_the_environment_variable(tmp_path, monkeypatch):
    config = _seeded_config(tmp_path, {"stops": {"path": str(SAMPLE_POINTS), "study_area": str(SAMPLE_AREA),
                                                  "total_epsilon": 1.0}})
    monkeypatch.delenv(ALLOW_TEST_SEED_ENV, raising=False)
    with pytest.raises(ConfigError, match=r"test_seed .*NOT differentially private.*DPGEO_ALLOW_TEST_SEED=1"):
        load_config(config)
    for wrong in ("0", "yes", "true", ""):  # only exactly 1 turns it on
        monkeypatch.setenv(ALLOW_TEST_SEED_ENV, wrong)
        with pytest.raises(ConfigError):
            load_config(config)
    monkeypatch.setenv(ALLOW_TEST_SEED_ENV, "1")
    assert load_config(config).server.test_seed == SEED
    for bad in ("-1", "1.5", '"7"', "true"):
        config.write_text(config.read_text().replace(f"test_seed = {SEED}", f"test_seed = {bad}"))
        with pytest.raises(ConfigError, match="test_seed must be a non-negative integer"):
            load_config(config)
        config.write_text(config.read_text().replace(f"test_seed = {bad}", f"test_seed = {SEED}"))
    # the command line: one line, exit 2, before anything starts; --check warns when it is allowed
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    r = subprocess.run([sys.executable, "-m", "dpgeo", "serve", str(config), "--check"], capture_output=True,
                       text=True, env=env, timeout=120)
    assert r.returncode == 2 and ALLOW_TEST_SEED_ENV in r.stderr, r.stderr
    r = subprocess.run([sys.executable, "-m", "dpgeo", "serve", str(config), "--check"], capture_output=True,
                       text=True, env=dict(env, **{ALLOW_TEST_SEED_ENV: "1"}), timeout=120)
    assert r.returncode == 0 and "NOT DIFFERENTIALLY PRIVATE" in r.stderr, r.stderr


def test_an_analyst_cannot_ask_for_a_seed(tmp_path):
    from dpgeo.errors import ParameterError
    from dpgeo.server.processes import PROCESSES

    with pytest.raises(ParameterError):
        PROCESSES["dp-dbscan-spans"].validate(dict(SPANS, dataset="stops", seed=SEED))


@pytest.fixture(scope="module")
def seeded(tmp_path_factory, postgres_server):
    import geopandas as gpd

    from postgres import load_layer

    db = postgres_server.new_database("seeded")
    load_layer(postgres_server, db, "stops", gpd.read_file(SAMPLE_POINTS))
    d = tmp_path_factory.mktemp("seeded-service")
    area = {"study_area": str(SAMPLE_AREA), "total_epsilon": 1.0}
    config = _seeded_config(d, {"gpkg": {"path": str(SAMPLE_POINTS), **area},
                                "pg": {"connection": postgres_server.url(db, host="localhost"), "table": "stops",
                                       **area}})
    server = Server(config, d, env={ALLOW_TEST_SEED_ENV: "1"})
    c = Client(server.url, TOKEN)
    out = {"server": server, "client": c, "dir": d, "pg": postgres_server}
    for name in ("gpkg", "pg"):
        r = c.execute("dp-dbscan-spans", dict(SPANS, dataset=name))
        assert r.status_code == 200, r.text
        out[name] = r.json()
    yield out
    server.stop()


def _download(c, rid, kind, folder):
    r = c.get(f"/collections/{rid}/files/{kind}")
    assert r.status_code == 200, r.text
    path = folder / f"{rid}.{kind}"
    path.write_bytes(r.content)
    return path


@pytest.mark.postgres
def test_the_postgis_dataset_gives_the_geopackage_release(seeded, tmp_path):
    import geopandas as gpd
    import shapely

    c = seeded["client"]
    a, b = seeded["gpkg"], seeded["pg"]
    assert len(a["layer"]["features"]) > 0
    # the features of the answer, byte for byte in their JSON text
    dumps = lambda fc: json.dumps(fc["features"], sort_keys=True, ensure_ascii=False)  # noqa: E731
    assert dumps(a["layer"]) == dumps(b["layer"])
    ra, rb = a["release"]["id"], b["release"]["id"]
    assert ra != rb
    # the published GeoJSON files: the same features; the metadata differs only in the release id and dataset
    fa = json.loads(_download(c, ra, "geojson", tmp_path).read_bytes())
    fb = json.loads(_download(c, rb, "geojson", tmp_path).read_bytes())
    assert dumps(fa) == dumps(fb)
    ma, mb = fa["dpgeo"], fb["dpgeo"]
    assert set(ma) == set(mb)
    assert {k for k in ma if ma[k] != mb[k]} == DIFFERS, {k: (ma[k], mb[k]) for k in ma if ma[k] != mb[k]}
    assert ma["dataset"] == "gpkg" and mb["dataset"] == "pg"
    # the published GeoPackages: the same geometries (WKB) and attributes
    ga, gb = (gpd.read_file(_download(c, rid, "gpkg", tmp_path)) for rid in (ra, rb))
    assert list(ga.columns) == list(gb.columns)
    assert (shapely.to_wkb(ga.geometry.values) == shapely.to_wkb(gb.geometry.values)).all()
    attrs = [col for col in ga.columns if col != ga.geometry.name]
    assert ga[attrs].equals(gb[attrs])
    # the items the Features API serves: the same features
    ia = c.get(f"/collections/{ra}/items?limit=10000").json()
    ib = c.get(f"/collections/{rb}/items?limit=10000").json()
    assert dumps(ia) == dumps(ib) and len(ia["features"]) == len(fa["features"])


@pytest.mark.postgres
def test_the_service_gives_the_command_lines_seeded_release(seeded, tmp_path):
    import geopandas as gpd
    import shapely

    import dpgeo

    out = tmp_path / "cli.gpkg"
    r = subprocess.run([sys.executable, "-m", "dpgeo", "spans", str(SAMPLE_POINTS), "-o", str(out), "--epsilon",
                        "0.5", "--radius", "150", "--min-points", "40", "--domain", str(SAMPLE_AREA), "--seed",
                        str(SEED), "--ledger", str(tmp_path / "ledger.sqlite")],
                       capture_output=True, text=True, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
                       timeout=300)
    assert r.returncode == 0, r.stderr
    assert "NOT differentially private" in r.stderr
    cli = gpd.read_file(out)
    served = gpd.read_file(_download(seeded["client"], seeded["pg"]["release"]["id"], "gpkg", tmp_path))
    assert (shapely.to_wkb(cli.geometry.values) == shapely.to_wkb(served.geometry.values)).all()
    attrs = [col for col in cli.columns if col != cli.geometry.name]
    assert cli[attrs].equals(served[attrs])
    # the same privacy marking, word for word
    mc, ms = dpgeo.read_layer_metadata(out), seeded["pg"]["release"]["metadata"]
    for key in ("differentially_private", "not_private_reasons", "sampler"):
        assert mc[key] == ms[key], key


@pytest.mark.postgres
def test_every_served_output_of_a_seeded_release_says_it_is_not_private(seeded, tmp_path):
    import dpgeo
    from dpgeo.budget import Ledger

    c, d = seeded["client"], seeded["dir"]
    for name in ("gpkg", "pg"):
        res = seeded[name]
        rid = res["release"]["id"]
        md = res["release"]["metadata"]
        assert md["differentially_private"] is False and md["not_private_reasons"] == [SEED_REASON]
        assert "fixed test seed" in md["sampler"]
        doc = c.get(f"/collections/{rid}").json()
        assert "NOT differentially private" in doc["description"]
        assert doc["dpgeo"]["differentially_private"] is False and doc["dpgeo"]["not_private_reasons"] == [SEED_REASON]
        raw = c.execute("dp-dbscan-spans", dict(SPANS, dataset=name), response="raw",  # the layer alone
                        outputs={"layer": {}})
        assert raw.status_code == 200 and raw.json()["dpgeo"]["not_private_reasons"] == [SEED_REASON]
        listed = [col for col in c.get("/collections").json()["collections"] if col["id"] == rid]
        assert listed and "NOT differentially private" in listed[0]["description"]
        page = c.get(f"/collections/{rid}/map")
        assert page.status_code == 200 and "NOT differentially private" in page.text
        assert SEED_REASON in page.text
        for kind in ("gpkg", "geojson"):
            path = _download(c, rid, kind, tmp_path)
            got = dpgeo.read_layer_metadata(path)
            assert got["differentially_private"] is False and got["not_private_reasons"] == [SEED_REASON], kind
        conn = sqlite3.connect(tmp_path / f"{rid}.gpkg")
        try:  # the tag GDAL and QGIS show, and the layer's description
            text = " ".join(str(v) for row in conn.execute("SELECT metadata FROM gpkg_metadata") for v in row)
            desc = conn.execute("SELECT description FROM gpkg_contents").fetchone()[0]
        finally:
            conn.close()
        assert '<MDI key="DIFFERENTIALLY_PRIVATE">FALSE</MDI>' in text
        assert "differentially_private=false" in desc
    # nothing was charged: every job says so, and the ledger has no release of them
    done = [j for j in c.get("/jobs").json()["jobs"] if j["status"] == "successful"]
    assert len(done) >= 4 and all(j["charge"] == "none" for j in done), done
    ledger = Ledger(d / "ledger.sqlite")
    for name in ("gpkg", "pg"):
        assert ledger.budget(name).spent_epsilon == 0 and not ledger.budget(name).releases
    assert c.get("/").json()["description"].startswith("TEST SERVICE: every release is made with a fixed seed and is "
                                                         "NOT differentially private")
    log = seeded["server"].log()
    assert "test_seed = 7: EVERY RELEASE OF THIS SERVICE IS NOT DIFFERENTIALLY PRIVATE" in log
    assert "NOT-PRIVATE(test_seed)" in log
