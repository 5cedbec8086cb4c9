"""Real clients against ``dpgeo serve`` on 127.0.0.1: OWSLib (Processes and Features), QGIS's OAPIF provider,
headless Chromium on the web map page. The dataset is the sample layer (Minneapolis police stops).

QGIS and Chromium are skipped with the reason when missing, unless ``DPGEO_REQUIRE_QGIS=1`` /
``DPGEO_REQUIRE_BROWSER=1`` (CI) make that a failure. ``DPGEO_UPDATE_SCREENSHOTS=1`` rewrites
``docs/img/service_map.png``.
"""

from __future__ import annotations

import json
import os
import subprocess
import textwrap

import pytest
from service_helpers import (
    CHROMIUM,
    CHROMIUM_ARGS,
    ROOT,
    SAMPLE_AREA,
    SAMPLE_POINTS,
    Client,
    Server,
    browser_missing,
    qgis_missing,
    skip_or_fail,
    wait_job,
    write_config,
)

TOKEN = "owslib-analyst-token-0123456789abcdefghijklmn"
PRIVATE_TOKEN = "private-analyst-token-0123456789abcdefghijk"
SPANS = {"dataset": "stops", "epsilon": 0.5, "radius_m": 150, "min_points": 40}


@pytest.fixture(scope="module")
def svc(tmp_path_factory):
    d = tmp_path_factory.mktemp("clients")
    config = write_config(
        d, server={"workers": 1},
        datasets={"stops": {"path": str(SAMPLE_POINTS), "study_area": str(SAMPLE_AREA), "total_epsilon": 3.0,
                            "title": "Minneapolis police stops 2017"},
                  "hidden": {"path": str(SAMPLE_POINTS), "study_area": str(SAMPLE_AREA), "total_epsilon": 1.0,
                             "private_releases": True}},
        analysts={"ana": (TOKEN, ["stops"]), "pia": (PRIVATE_TOKEN, ["hidden"])})
    server = Server(config, d)
    yield {"server": server, "dir": d}
    server.stop()


@pytest.fixture
def owslib_headers():
    """OWSLib 0.35 keeps request headers in one module-level dict; restore it so a token never outlives a test."""
    from owslib import ogcapi

    saved = dict(ogcapi.REQUEST_HEADERS)
    yield
    ogcapi.REQUEST_HEADERS.clear()
    ogcapi.REQUEST_HEADERS.update(saved)


@pytest.fixture(scope="module")
def release(svc):
    """One DP-DBSCAN release of the sample layer, made through OWSLib's Processes client."""
    from owslib import ogcapi
    from owslib.ogcapi.processes import Processes

    saved = dict(ogcapi.REQUEST_HEADERS)
    try:
        p = Processes(svc["server"].url, headers={"Authorization": f"Bearer {TOKEN}"})
        res = p.execute("dp-dbscan-spans", inputs=SPANS)
    finally:
        ogcapi.REQUEST_HEADERS.clear()
        ogcapi.REQUEST_HEADERS.update(saved)
    return res


def test_owslib_processes_lists_describes_and_executes(svc, release, owslib_headers):
    from owslib.ogcapi.processes import Processes

    p = Processes(svc["server"].url, headers={"Authorization": f"Bearer {TOKEN}"})
    assert {x["id"] for x in p.processes()} == {"dp-dbscan-spans", "dp-wavecluster", "dp-kmeans", "dp-heat",
                                                "dp-hotspots", "noise-preview", "cells-preview"}
    desc = p.process("dp-dbscan-spans")
    assert desc["inputs"]["dataset"]["schema"]["enum"] == ["stops"]
    assert desc["inputs"]["radius_m"]["schema"]["exclusiveMinimum"] == 0
    preview = p.execute("noise-preview", inputs=SPANS)["preview"]
    assert preview["spends_budget"] is False and preview["dataset_left_epsilon"] == 2.5  # after the release
    md = release["release"]["metadata"]
    assert md["differentially_private"] and md["dataset"] == "stops" and md["epsilon"] == 0.5
    assert len(release["layer"]["features"]) == release["release"]["n_features"] >= 3
    # asynchronous: OWSLib starts the job; its status is plain HTTP (OWSLib has no job-status call)
    p.execute("dp-wavecluster", inputs={"dataset": "stops", "epsilon": 0.25, "grid_size": 128}, async_=True)
    location = p.response_headers["Location"]
    job = wait_job(Client(svc["server"].url, TOKEN), location)
    assert job["status"] == "successful"
    # over budget: OWSLib raises with the server's exception document
    with pytest.raises(RuntimeError, match="is left"):
        p.execute("dp-dbscan-spans", inputs=dict(SPANS, epsilon=3))


def test_owslib_features_reads_the_release(svc, release, owslib_headers):
    from owslib.ogcapi.features import Features

    rid = release["release"]["id"]
    f = Features(svc["server"].url)
    assert "http://www.opengis.net/spec/ogcapi-features-1/1.0/conf/core" in f.conformance()["conformsTo"]
    assert rid in f.feature_collections()
    col = f.collection(rid)
    assert col["dpgeo"]["release_id"] == rid and "differentially private, ε = 0.5" in col["description"]
    items = f.collection_items(rid, limit=1000)
    assert items["numberMatched"] == release["release"]["n_features"]
    assert [x["properties"] for x in items["features"]] == [x["properties"] for x in release["layer"]["features"]]
    bbox = col["extent"]["spatial"]["bbox"][0]
    west = [bbox[0], bbox[1], (bbox[0] + bbox[2]) / 2, bbox[3]]
    some = f.collection_items(rid, bbox=west, limit=1000)
    assert 0 < some["numberMatched"] <= items["numberMatched"]
    one = f.collection_item(rid, items["features"][0]["id"])
    assert one["properties"] == items["features"][0]["properties"]


QGIS_SCRIPT = textwrap.dedent("""
    import json, os, sys
    from qgis.core import QgsApplication, QgsVectorLayer
    app = QgsApplication([], False)
    app.initQgis()
    layer = QgsVectorLayer(f"url='{sys.argv[1]}' typename='{sys.argv[2]}'", "release", "OAPIF")
    out = {"valid": layer.isValid()}   # never call error() on an invalid OAPIF layer: it crashes QGIS 3.22
    if layer.isValid():
        out["crs"] = layer.crs().authid()
        out["fields"] = [f.name() for f in layer.fields()]
        out["features"] = [{"attrs": {n: f[n] for n in ("cluster_id", "dp_count", "dp_count_low", "dp_count_high")},
                            "wkt": f.geometry().asWkt(7)} for f in layer.getFeatures()]
    print(json.dumps(out), flush=True)
    os._exit(0)  # QGIS 3.22 may crash while tearing down a network provider; the answer is out
""")


@pytest.mark.qgis
def test_qgis_loads_the_collection_with_the_features_of_the_release_file(svc, release, tmp_path):
    why = qgis_missing()
    if why:
        skip_or_fail(why, "DPGEO_REQUIRE_QGIS")
    import pyogrio
    import shapely

    script = tmp_path / "load.py"
    script.write_text(QGIS_SCRIPT)
    rid = release["release"]["id"]
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", PYTHONPATH="", QGIS_CUSTOM_CONFIG_PATH=str(tmp_path),
               XDG_RUNTIME_DIR=str(tmp_path))
    r = subprocess.run(["/usr/bin/python3", str(script), svc["server"].url, rid], check=False, capture_output=True,
                       text=True, env=env, timeout=180, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert got["valid"] and got["crs"] == "EPSG:4326"
    assert {"cluster_id", "dp_count", "dp_count_low", "dp_count_high", "n_cells", "area_m2"} <= set(got["fields"])
    # the same features as the release's GeoPackage (attributes) and GeoJSON (the geometry in EPSG:4326)
    gpkg = pyogrio.read_dataframe(svc["dir"] / "releases" / f"{rid}.gpkg").to_crs(4326)
    want = {int(row.cluster_id): row for row in gpkg.itertuples()}
    assert sorted(f["attrs"]["cluster_id"] for f in got["features"]) == sorted(want)
    for f in got["features"]:
        row = want[f["attrs"]["cluster_id"]]
        assert (f["attrs"]["dp_count"], f["attrs"]["dp_count_low"], f["attrs"]["dp_count_high"]) == \
            (row.dp_count, row.dp_count_low, row.dp_count_high)
        g = shapely.from_wkt(f["wkt"])  # the GeoJSON is rounded to 1e-7 degrees (about 1 cm)
        assert g.symmetric_difference(row.geometry).area <= 1e-7 * row.geometry.length


QGIS_BASIC_SCRIPT = textwrap.dedent("""
    import json, os, sys
    from qgis.core import QgsApplication, QgsAuthMethodConfig, QgsVectorLayer
    app = QgsApplication([], False)
    app.initQgis()
    url, typename, user, password = sys.argv[1:5]
    am = QgsApplication.authManager()
    assert am.setMasterPassword("master-password-of-this-test", True)
    out = {"methods": sorted(am.authMethodsKeys())}
    uri = f"url='{url}' typename='{typename}'"
    if password:
        cfg = QgsAuthMethodConfig("Basic")
        cfg.setName("dpgeo")
        cfg.setConfig("username", user)
        cfg.setConfig("password", password)
        stored = am.storeAuthenticationConfig(cfg)  # QGIS 3.22's binding: (ok, the config with its new id)
        if isinstance(stored, tuple):
            stored, cfg = stored
        out["stored"] = bool(stored)
        uri += f" authcfg='{cfg.id()}'"
    layer = QgsVectorLayer(uri, "release", "OAPIF")
    out["valid"] = layer.isValid()   # never call error() on an invalid OAPIF layer: it crashes QGIS 3.22
    if layer.isValid():
        out["features"] = [{"cluster_id": f["cluster_id"], "dp_count": f["dp_count"]} for f in layer.getFeatures()]
    print(json.dumps(out), flush=True)
    os._exit(0)  # QGIS 3.22 may crash while tearing down a network provider; the answer is out
""")


def test_what_an_analyst_fetches_is_never_kept_by_a_cache(svc):
    """Every answer to a request with credentials says no cache may keep it; public answers may be cached."""
    for token in (TOKEN, PRIVATE_TOKEN):
        for path in ("/", "/collections", "/processes"):
            r = Client(svc["server"].url, token).get(path)
            assert r.status_code == 200 and r.headers["cache-control"] == "private, no-store", (path, r.headers)
    assert "no-store" not in Client(svc["server"].url).get("/collections").headers.get("cache-control", "")


@pytest.mark.qgis
def test_qgis_opens_a_private_release_with_basic_authentication(svc, tmp_path):
    """QGIS 3.22 has no API-header method: its Basic method, with the token as the password, opens a private
    release; without it, or with a wrong token, the layer is invalid."""
    why = qgis_missing()
    if why:
        skip_or_fail(why, "DPGEO_REQUIRE_QGIS")
    c = Client(svc["server"].url, PRIVATE_TOKEN)
    r = c.execute("dp-dbscan-spans", dict(SPANS, dataset="hidden"))
    assert r.status_code == 200, r.text
    rid = r.json()["release"]["id"]
    want = sorted((f["properties"]["cluster_id"], f["properties"]["dp_count"]) for f in r.json()["layer"]["features"])
    assert want and Client(svc["server"].url).get(f"/collections/{rid}").status_code == 404
    script = tmp_path / "basic.py"
    script.write_text(QGIS_BASIC_SCRIPT)

    def load(user, password, name):
        profile = tmp_path / name
        profile.mkdir()
        env = dict(os.environ, QT_QPA_PLATFORM="offscreen", PYTHONPATH="", QGIS_CUSTOM_CONFIG_PATH=str(profile),
                   QGIS_AUTH_DB_DIR_PATH=str(profile), XDG_RUNTIME_DIR=str(tmp_path))
        p = subprocess.run(["/usr/bin/python3", str(script), svc["server"].url, rid, user, password], check=False,
                           capture_output=True, text=True, env=env, timeout=180, cwd=tmp_path)
        assert p.returncode == 0, p.stderr[-2000:]
        return json.loads(p.stdout.strip().splitlines()[-1])

    got = load("pia", PRIVATE_TOKEN, "basic")
    assert "Basic" in got["methods"]
    assert got["stored"] and got["valid"], got
    assert sorted((f["cluster_id"], f["dp_count"]) for f in got["features"]) == want
    assert load("anyone", PRIVATE_TOKEN, "other-user")["valid"]
    assert not load("pia", PRIVATE_TOKEN + "x", "wrong")["valid"]
    assert not load("", "", "none")["valid"]


def test_the_map_page_draws_every_cluster_in_chromium(svc, release, tmp_path):
    why = browser_missing()
    if why:
        skip_or_fail(why, "DPGEO_REQUIRE_BROWSER")
    from playwright.sync_api import sync_playwright

    rid = release["release"]["id"]
    url = f"{svc['server'].url}/collections/{rid}/map"
    elsewhere = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1000, "height": 800})
            page.on("request", lambda req: None if req.url.startswith(svc["server"].url) or req.url.startswith(
                "data:") else elsewhere.append(req.url))
            errors = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(url, wait_until="load")
            drawn = page.locator("path.dp-cluster")
            drawn.first.wait_for(state="attached", timeout=10_000)
            assert drawn.count() == release["release"]["n_features"]
            box = drawn.first.bounding_box()
            assert box is not None and box["width"] > 0 and box["height"] > 0
            assert errors == [] and elsewhere == []  # the page needs no other host
            shot = (ROOT / "docs" / "img" / "service_map.png" if os.environ.get("DPGEO_UPDATE_SCREENSHOTS") == "1"
                    else tmp_path / "service_map.png")
            page.screenshot(path=str(shot))
            assert shot.stat().st_size > 10_000
        finally:
            browser.close()
