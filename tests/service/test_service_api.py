"""``dpgeo serve`` over real HTTP on 127.0.0.1: OGC API - Processes and Features, and the security model.

One server for the module (its datasets, analysts and limits below). The
last test greps every response of the module and the service log for the
private inputs' sentinel values and exact record count.
"""

from __future__ import annotations

import concurrent.futures
import json
import re
import time
from fractions import Fraction

import pytest
from service_helpers import (
    AREA_TEXT,
    N_PRIVATE,
    SENTINEL_COORD,
    SENTINEL_PERSON,
    SENTINEL_TEXT,
    Client,
    Server,
    make_points,
    wait_job,
    write_config,
)

TOKENS = {"alice": "alice-token-0123456789abcdefghijklmnopqrstu", "bob": "bob-token-0123456789abcdefghijklmnopqrstuvw",
          "carol": "carol-token-0123456789abcdefghijklmnopqrstu", "rl": "rl-token-0123456789abcdefghijklmnopqrstuvwx",
          "eve": "eve-token-0123456789abcdefghijklmnopqrstuvw", "dan": "dan-token-0123456789abcdefghijklmnopqrstuvw",
          "kim": "kim-token-0123456789abcdefghijklmnopqrstuvw", "ann": "ann-token-0123456789abcdefghijklmnopqrstuvw",
          "hana": "hana-token-0123456789abcdefghijklmnopqrstuv"}
SPANS = {"epsilon": 0.5, "radius_m": 300, "min_points": 40}


@pytest.fixture(scope="module")
def svc(tmp_path_factory):
    d = tmp_path_factory.mktemp("service")
    make_points(d / "stops.gpkg")
    make_points(d / "elsewhere.gpkg", seed=1, outside=True)
    _with_a_line(make_points(d / "odd.gpkg", seed=2))
    make_points(d / "gone.gpkg", seed=3)
    common = {"study_area": AREA_TEXT, "layer": "points"}
    config = write_config(
        d,
        server={"executions_per_minute": 60, "requests_per_minute": 2000, "max_body_bytes": 8192,
                "owner_log": "owner.log", "workers": 1},
        datasets={
            "stops": {"path": "stops.gpkg", "total_epsilon": 6.0, "person": "officer", "max_points_per_person": 3,
                      **common},
            "small": {"path": "stops.gpkg", "total_epsilon": 1.0, **common},
            "empty": {"path": "elsewhere.gpkg", "total_epsilon": 2.0, **common},
            "secret": {"path": "stops.gpkg", "total_epsilon": 2.0, "private_releases": True, **common},
            "odd": {"path": "odd.gpkg", "total_epsilon": 2.0, "person": "officer", "max_points_per_person": 3,
                    **common},
            "gone": {"path": "gone.gpkg", "total_epsilon": 2.0, **common},
            "shared": {"path": "stops.gpkg", "total_epsilon": 1.5, **common},
            "km": {"path": "stops.gpkg", "total_epsilon": 1.0, **common},
            "hx": {"path": "stops.gpkg", "total_epsilon": 1.0, **common},
            "auto": {"path": "stops.gpkg", "total_epsilon": 1.0, **common},
        },
        analysts={"alice": (TOKENS["alice"], ["stops", "small", "empty", "odd", "gone", "shared"]),
                  "bob": (TOKENS["bob"], ["secret", "small"]), "carol": (TOKENS["carol"], ["small"]),
                  "rl": (TOKENS["rl"], ["stops"]), "eve": (TOKENS["eve"], []),
                  "kim": (TOKENS["kim"], ["km"]), "ann": (TOKENS["ann"], ["auto"]),
                  "hana": (TOKENS["hana"], ["hx"])},
    )
    holder = {"server": Server(config, d), "dir": d, "config": config}
    yield holder
    holder["server"].stop()


def _with_a_line(path):
    """Append one record that is not a point (a line) to a private point layer."""
    import geopandas as gpd
    import pandas as pd
    from shapely.geometry import LineString

    gdf = gpd.read_file(path, layer="points")
    line = gpd.GeoDataFrame({"officer": ["p1"], "note": [SENTINEL_TEXT]},
                            geometry=[LineString([(-93.27, 44.98), (-93.26, 44.99)])], crs=gdf.crs)
    gpd.GeoDataFrame(pd.concat([gdf, line], ignore_index=True), crs=gdf.crs).to_file(path, layer="points",
                                                                                      driver="GPKG")
    return path


def client(svc, who=None):
    return Client(svc["server"].url, TOKENS[who] if who else None)


def ledger(svc):
    from dpgeo.budget import Ledger

    return Ledger(svc["dir"] / "ledger.sqlite")


def is_problem(r, status):
    assert r.status_code == status, (r.status_code, r.text)
    assert r.headers["content-type"].startswith("application/json")
    doc = r.json()
    assert doc["status"] == status and doc["type"] and doc["title"]
    return doc


# -- the standards' core --------------------------------------------------------------------------------------------

def test_landing_page_conformance_and_api_definition(svc):
    c = client(svc)
    doc = c.get("/").json()
    rels = {link["rel"] for link in doc["links"]}
    assert {"self", "service-desc", "conformance", "data", "http://www.opengis.net/def/rel/ogc/1.0/processes",
            "http://www.opengis.net/def/rel/ogc/1.0/job-list"} <= rels
    conf = c.get("/conformance").json()["conformsTo"]
    for cls in ("ogcapi-processes-1/1.0/conf/core", "ogcapi-processes-1/1.0/conf/ogc-process-description",
                "ogcapi-processes-1/1.0/conf/json", "ogcapi-processes-1/1.0/conf/job-list",
                "ogcapi-features-1/1.0/conf/core", "ogcapi-features-1/1.0/conf/geojson"):
        assert any(u.endswith(cls) for u in conf), cls
    api = c.get("/api")
    assert api.status_code == 200 and "openapi" in api.json()
    assert is_problem(c.get("/no/such/path"), 404)["type"].endswith("not-found")


def test_processes_describe_their_inputs_with_json_schema(svc):
    anon = client(svc).get("/processes").json()
    assert {p["id"] for p in anon["processes"]} == {"dp-dbscan-spans", "dp-wavecluster", "dp-kmeans", "dp-heat",
                                                      "dp-hotspots", "noise-preview", "cells-preview"}
    d = client(svc).get("/processes/dp-dbscan-spans").json()
    assert d["inputs"]["epsilon"]["schema"] == {"type": "number", "exclusiveMinimum": 0, "maximum": 100}
    assert d["inputs"]["min_points"]["schema"]["type"] == "integer"
    assert d["inputs"]["beta"]["schema"]["default"] == 0.05
    assert d["inputs"]["gamma"]["schema"]["enum"] == ["laplace", "exact"]
    assert "enum" not in d["inputs"]["dataset"]["schema"]  # no dataset name for a caller without a token
    assert set(d["outputs"]) == {"release", "layer"}
    assert "seed" not in d["inputs"] and "domain_from_data" not in d["inputs"]  # nothing that is not private
    wc = client(svc).get("/processes/dp-wavecluster").json()
    assert wc["inputs"]["method"]["schema"]["enum"] == ["privthr", "privthr-em", "privqt"]  # no 'exact'
    mine = client(svc, "alice").get("/processes/dp-dbscan-spans").json()
    assert mine["inputs"]["dataset"]["schema"]["enum"] == ["empty", "gone", "odd", "shared", "small", "stops"]
    assert client(svc, "carol").get("/processes/dp-dbscan-spans").json()["inputs"]["dataset"]["schema"]["default"] \
        == "small"
    assert is_problem(client(svc).get("/processes/nope"), 404)["type"].endswith("no-such-process")


# -- who may do what ------------------------------------------------------------------------------------------------

def test_execution_needs_a_valid_bearer_token(svc):
    body = {"inputs": dict(SPANS, dataset="stops")}
    url = "/processes/dp-dbscan-spans/execution"
    r = client(svc).post(url, json=body)
    assert is_problem(r, 401) and r.headers["www-authenticate"].startswith("Bearer")
    for header in (f"Bearer {TOKENS['alice']}x", f"Basic {TOKENS['alice']}", f"bearer{TOKENS['alice']}", "Bearer ",
                   "Bearer " + "a" * 600):
        assert is_problem(client(svc).post(url, json=body, headers={"Authorization": header}), 401)
    assert is_problem(client(svc).post(url + f"?access_token={TOKENS['alice']}", json=body), 401)
    assert is_problem(client(svc).get("/jobs"), 401)
    # a wrong token is refused everywhere, even where no token is needed
    assert is_problem(client(svc).get("/collections", headers={"Authorization": "Bearer nope"}), 401)
    assert ledger(svc).budget("stops").n_charged == 0


def test_unknown_and_ungranted_datasets_get_the_same_answer(svc):
    answers = set()
    for who, name in (("alice", "secret"), ("alice", "nope"), ("eve", "stops"), ("eve", "secret"),
                      ("alice", "../stops"), ("alice", "stops.gpkg"), ("alice", "/etc/passwd")):
        r = client(svc, who).execute("noise-preview", dict(SPANS, dataset=name))
        doc = is_problem(r, 400)
        answers.add(doc["detail"].replace(repr(name[:64]), "NAME"))
    assert answers == {"input 'dataset': no dataset NAME is available to you"}


def test_inputs_are_checked_against_their_bounds_before_any_work(svc):
    c = client(svc, "alice")
    bad = [
        ({"dataset": "stops", "epsilon": 0, "radius_m": 300, "min_points": 40}, "must be > 0"),
        ({"dataset": "stops", "epsilon": 7, "radius_m": 300, "min_points": 40}, "must be <= 6"),  # > the total
        ({"dataset": "stops", "epsilon": "1", "radius_m": 300, "min_points": 40}, "must be a number"),
        ({"dataset": "stops", "epsilon": True, "radius_m": 300, "min_points": 40}, "must be a number"),
        ({"dataset": "stops", "epsilon": 1, "radius_m": 300, "min_points": 1.5}, "must be an integer"),
        ({"dataset": "stops", "epsilon": 1, "radius_m": 300}, "both radius_m and min_points, or neither"),
        ({"dataset": "stops", "epsilon": 1, "radius_m": 0.01, "min_points": 40}, "[limits] max_cells"),  # 413
        ({"dataset": "stops", "epsilon": 1, "radius_m": 300, "min_points": 40, "seed": 1}, "unknown input 'seed'"),
        ({"dataset": "stops", "epsilon": 1, "radius_m": 300, "min_points": 40, "gamma": "float"}, "one of"),
        ({"dataset": "stops", "epsilon": {"href": "file:///etc/passwd"}, "radius_m": 300, "min_points": 40},
         "by reference"),
    ]
    for inputs, message in bad:  # a request over the server's cost limits is a 413 that names the limit
        doc = is_problem(c.execute("dp-dbscan-spans", inputs), 413 if "[limits]" in message else 400)
        assert message in doc["detail"], (inputs, doc)
    wc = is_problem(c.execute("dp-wavecluster", {"dataset": "stops", "epsilon": 1}), 400)
    assert "exactly one of" in wc["detail"]
    wc = is_problem(c.execute("dp-wavecluster", {"dataset": "stops", "epsilon": 1, "cell_m": 0.5}), 413)
    assert "cells" in wc["detail"]
    assert is_problem(c.execute("dp-wavecluster", {"dataset": "stops", "epsilon": 1, "grid_size": 64,
                                                   "method": "exact"}), 400)
    for raw in (b"not json", b"[1, 2]", b'{"inputs": [1]}', b'{"input": {}}'):
        assert is_problem(c.post("/processes/dp-dbscan-spans/execution", data=raw), 400)
    assert ledger(svc).budget("stops").n_charged == 0 and c.get("/jobs").json()["jobs"] == []


def test_body_size_is_limited(svc):
    c = client(svc, "alice")
    big = json.dumps({"inputs": dict(SPANS, dataset="stops", title="x" * 10000)})
    assert is_problem(c.post("/processes/dp-dbscan-spans/execution", data=big,
                             headers={"Content-Type": "application/json"}), 413)

    def chunks():  # no Content-Length: counted as it arrives (small enough to be sent before the answer)
        for _ in range(4):
            yield b" " * 3000
    assert is_problem(c.post("/processes/dp-dbscan-spans/execution", data=chunks()), 413)


def test_per_analyst_rate_limit(svc):
    c = client(svc, "rl")
    statuses = [c.execute("noise-preview", {"dataset": "stops", "epsilon": -1, "radius_m": 300,
                                            "min_points": 40}).status_code for _ in range(62)]
    assert statuses[:60] == [400] * 60 and statuses[-1] == 429
    r = c.execute("noise-preview", dict(SPANS, dataset="stops"))
    assert is_problem(r, 429) and int(r.headers["retry-after"]) >= 1
    assert client(svc, "alice").execute("noise-preview", dict(SPANS, dataset="stops")).status_code == 200


def test_path_traversal_finds_nothing(svc):
    c = client(svc, "alice")
    for path in ("/collections/..%2F..%2Fledger.sqlite", "/collections/%2e%2e%2fservice.toml/items",
                 "/collections/..%2Fstops.gpkg/files/gpkg", "/jobs/..%2Fjobs.sqlite", "/jobs/%2e%2e",
                 "/collections/" + "0" * 32 + "/files/..%2F..%2Fservice.toml",
                 "/collections/" + "0" * 32 + "/files/gpkg", "/collections/stops", "/collections/stops/items",
                 "/processes/..%2F..%2Fetc%2Fpasswd", "/collections/%00/items", "/collections/" + "A" * 32):
        r = c.get(path)
        assert r.status_code == 404, (path, r.status_code)
        assert b"SQLite format" not in r.content and b"[server]" not in r.content and b"GPKG" not in r.content


# -- releases and jobs ------------------------------------------------------------------------------------------------

def test_preview_spends_nothing_and_shows_the_budget_left(svc):
    doc = client(svc, "alice").execute("noise-preview", dict(SPANS, dataset="stops")).json()["preview"]
    assert doc["spends_budget"] is False and doc["kappa"] == 21 and doc["dataset_left_epsilon"] == 6.0
    assert ledger(svc).budget("stops").n_charged == 0


def test_sync_release_is_published_as_a_features_collection(svc):
    c = client(svc, "alice")
    before = {x["id"] for x in client(svc).get("/collections").json()["collections"]}
    r = c.execute("dp-dbscan-spans", dict(SPANS, dataset="stops", title="Stops <b>2017</b>"))
    assert r.status_code == 200, r.text
    res = r.json()
    rel, layer = res["release"], res["layer"]
    rid = rel["id"]
    md = rel["metadata"]
    assert md["differentially_private"] is True and md["epsilon"] == 0.5 and md["dataset"] == "stops"
    assert md["release_id"] == rid and md["dataset_spent_epsilon"] == 0.5 and md["dataset_total_epsilon"] == 6.0
    assert md["privacy_unit"] == "person"
    assert layer["type"] == "FeatureCollection" and len(layer["features"]) == rel["n_features"] >= 1
    assert r.headers["link"].startswith("<") and 'rel="monitor"' in r.headers["link"]
    # a new collection, without a restart, readable by anyone (the dataset's releases are public)
    anon = client(svc)
    cols = {x["id"]: x for x in anon.get("/collections").json()["collections"]}
    assert set(cols) - before == {rid}
    col = anon.get(f"/collections/{rid}").json()
    assert col["title"] == "Stops <b>2017</b>" and col["itemType"] == "feature"
    assert col["crs"] == ["http://www.opengis.net/def/crs/OGC/1.3/CRS84"]
    assert "ε = 0.5" in col["description"] and "dp_count" in col["description"] and col["dpgeo"]["epsilon"] == 0.5
    items = anon.get(f"/collections/{rid}/items")
    assert items.headers["content-type"] == "application/geo+json"
    assert items.headers["access-control-allow-origin"] == "*" and items.headers["x-content-type-options"] == "nosniff"
    fc = items.json()
    assert fc["numberMatched"] == fc["numberReturned"] == rel["n_features"]
    assert [f["id"] for f in fc["features"]] == [f["properties"]["cluster_id"] for f in layer["features"]]
    # paging
    page = anon.get(f"/collections/{rid}/items?limit=1").json()
    assert page["numberReturned"] == 1
    if rel["n_features"] > 1:
        nxt = next(link["href"] for link in page["links"] if link["rel"] == "next")
        assert anon.get(nxt).json()["features"][0]["id"] == fc["features"][1]["id"]
    # bbox: everything, then nothing
    assert anon.get(f"/collections/{rid}/items?bbox={AREA_TEXT}").json()["numberMatched"] == rel["n_features"]
    assert anon.get(f"/collections/{rid}/items?bbox=10,10,11,11").json()["numberMatched"] == 0
    assert is_problem(anon.get(f"/collections/{rid}/items?bbox=1,2,3"), 400)
    assert is_problem(anon.get(f"/collections/{rid}/items?limit=0"), 400)
    assert is_problem(anon.get(f"/collections/{rid}/items?filter=x"), 400)
    one = anon.get(f"/collections/{rid}/items/{fc['features'][0]['id']}")
    assert one.headers["content-type"] == "application/geo+json" and one.json()["id"] == fc["features"][0]["id"]
    assert is_problem(anon.get(f"/collections/{rid}/items/99999"), 404)
    # the web map and the files
    page = anon.get(f"/collections/{rid}/map")
    assert page.headers["content-type"].startswith("text/html") and "dp-cluster" in page.text
    assert "<b>2017</b>" not in page.text  # the title is escaped
    assert anon.get(f"/collections/{rid}/files/gpkg").content[:15] == b"SQLite format 3"
    assert anon.get(f"/collections/{rid}/files/geojson").json()["dpgeo"]["release_id"] == rid
    # the ledger: one completed release by alice, with its files
    b = ledger(svc).budget("stops")
    assert b.spent_epsilon == Fraction(1, 2) and [(x.release_id, x.analyst, x.status) for x in b.releases] == \
        [(rid, "alice", "completed")]
    assert sorted(p.rsplit(".", 1)[1] for p in b.releases[0].outputs) == ["geojson", "gpkg", "html"]
    svc["release"] = rid
    svc["release_doc"] = res


def test_release_files_carry_the_release_day_not_the_write_time(svc):
    """A release file's Last-Modified is its release day at 00:00 UTC and its ETag comes from the release id: the
    moment the worker wrote it, less the job's ``started``, would be the unpadded (data-dependent) run time."""
    import datetime as dt
    import os
    from email.utils import parsedate_to_datetime

    anon, rid = client(svc), svc["release"]
    day = svc["release_doc"]["release"]["date"]
    midnight = dt.datetime.fromisoformat(day).replace(tzinfo=dt.timezone.utc)
    folder = svc["dir"] / "releases"
    for kind, path in (("gpkg", "files/gpkg"), ("geojson", "files/geojson"), ("html", "map")):
        on_disk = folder / f"{rid}.{kind}"
        assert os.stat(on_disk).st_mtime == midnight.timestamp(), kind  # the files themselves, at the root
        first = anon.get(f"/collections/{rid}/{path}")
        assert first.status_code == 200, (kind, first.status_code)
        assert parsedate_to_datetime(first.headers["last-modified"]) == midnight, (kind, first.headers)
        etag = first.headers["etag"]
        assert rid in etag, (kind, etag)
        os.utime(on_disk)  # a file touched later (a copy, a restore): the answer does not change with it
        again = anon.request("HEAD", f"/collections/{rid}/{path}")
        assert again.headers["etag"] == etag and again.headers["last-modified"] == first.headers["last-modified"]
        stamp = midnight.timestamp()
        os.utime(on_disk, (stamp, stamp))


def test_async_job_belongs_to_its_analyst(svc):
    alice, bob = client(svc, "alice"), client(svc, "bob")
    r = alice.execute("dp-wavecluster", {"dataset": "stops", "epsilon": 0.25, "grid_size": 64}, asynchronous=True)
    assert r.status_code == 201, r.text
    loc = r.headers["location"]
    assert r.headers["preference-applied"] == "respond-async" and r.json()["status"] in ("accepted", "running")
    job = wait_job(alice, loc)
    assert job["status"] == "successful" and job["processID"] == "dp-wavecluster"
    res = alice.get(loc + "/results").json()
    assert res["release"]["metadata"]["method"] == "privthr" and res["release"]["dataset"] == "stops"
    only = alice.post("/processes/dp-wavecluster/execution", json={
        "inputs": {"dataset": "stops", "epsilon": 0.25, "grid_size": 64}, "outputs": {"layer": {}},
        "response": "raw"})
    assert only.status_code == 200 and only.headers["content-type"] == "application/geo+json"
    assert only.json()["type"] == "FeatureCollection"
    # another analyst: the job does not exist for them, exactly like a made-up id
    jid = loc.rsplit("/", 1)[1]
    other = bob.get(f"/jobs/{jid}")
    made_up = bob.get("/jobs/" + "0" * 32)
    assert other.status_code == made_up.status_code == 404 and other.json() == made_up.json()
    assert is_problem(bob.get(f"/jobs/{jid}/results"), 404)
    assert jid not in {j["jobID"] for j in bob.get("/jobs").json()["jobs"]}
    mine = {j["jobID"]: j for j in alice.get("/jobs").json()["jobs"]}
    assert jid in mine and mine[jid]["status"] == "successful"
    svc["job"] = jid


def test_a_release_whose_geojson_is_gone_is_a_404_not_a_500(svc):
    """A published release whose feature files have gone (its GeoJSON and the items file paged from it, removed by
    hand, a partial restore): its items, one item and its job's results are answered 404 with an exception
    document, as a missing release. With its GeoJSON back, the items file is made again from it."""
    alice, anon = client(svc, "alice"), client(svc)
    rid = alice.get(f"/jobs/{svc['job']}/results").json()["release"]["id"]
    geojson = svc["dir"] / "releases" / f"{rid}.geojson"
    aside = geojson.with_name(geojson.name + ".aside")
    geojson.rename(aside)
    (svc["dir"] / "releases" / f"{rid}.items.sqlite").unlink()
    try:
        for path in (f"/collections/{rid}/items", f"/collections/{rid}/items/1"):
            assert is_problem(anon.get(path), 404)["type"].endswith("not-found"), path
        assert "no-such-job" in is_problem(alice.get(f"/jobs/{svc['job']}/results"), 404)["type"]
    finally:
        aside.rename(geojson)
    assert anon.get(f"/collections/{rid}/items").status_code == 200
    assert (svc["dir"] / "releases" / f"{rid}.items.sqlite").exists()


def test_dp_kmeans_release(svc):
    kim = client(svc, "kim")
    d = kim.get("/processes/dp-kmeans").json()
    assert d["inputs"]["k"]["schema"] == {"type": "integer", "minimum": 1, "maximum": 1000}
    assert d["inputs"]["dataset"]["schema"]["default"] == "km" and "seed" not in d["inputs"]
    for bad, word in (({"k": 0}, ">= 1"), ({"k": 1001}, "<= 1000"), ({}, "'k' is required"),
                      ({"k": 3, "iterations": 0}, ">= 1"), ({"k": 3, "layer_share": 1}, "< 1")):
        doc = is_problem(kim.execute("dp-kmeans", {"dataset": "km", "epsilon": 0.5, **bad}), 400)
        assert word in doc["detail"], doc
    r = kim.execute("dp-kmeans", {"dataset": "km", "epsilon": 0.5, "k": 3})
    assert r.status_code == 200, r.text
    rel = r.json()["release"]
    md = rel["metadata"]
    assert md["method"] == "kmeans" and md["differentially_private"] is True and md["epsilon"] == 0.5
    layer = r.json()["layer"]
    assert 1 <= len(layer["features"]) <= 3
    assert all({"dp_count", "dp_count_low", "dp_count_high", "centroid_x", "centroid_y"} <= set(f["properties"])
               for f in layer["features"])
    assert rel["id"] in {x["id"] for x in client(svc).get("/collections").json()["collections"]}
    b = ledger(svc).budget("km")
    assert b.spent_epsilon == Fraction(1, 2) and [(x.mechanism, x.analyst) for x in b.releases] == \
        [("dp-kmeans", "kim")]
    # the rest of the budget is 0.5: a release at 0.6 is refused, naming what is left
    assert "0.5" in is_problem(kim.execute("dp-kmeans", {"dataset": "km", "epsilon": 0.6, "k": 3}), 409)["detail"]


def test_heat_and_hotspot_releases(svc):
    """dp-heat (H3 cells) and dp-hotspots (square cells) as processes: inputs checked, one charge each, layers with
    their attributes in EPSG:4326."""
    hana = client(svc, "hana")
    d = hana.get("/processes/dp-heat").json()
    assert d["inputs"]["h3_resolution"]["schema"] == {"type": "integer", "minimum": 0, "maximum": 15}
    assert d["inputs"]["h3_resolution"]["minOccurs"] == 0 and d["inputs"]["cell_m"]["minOccurs"] == 0
    assert "max_dense_cells" not in d["inputs"] and "seed" not in d["inputs"]
    base = {"dataset": "hx", "epsilon": 0.25}
    for bad, word in (({"cell_m": 200, "h3_resolution": 8}, "at most one"),
                      ({"h3_resolution": 16}, "<= 15"),
                      ({"cell_m": 200, "bands": 0}, ">= 1"), ({"cell_m": 200, "bands": 3, "histogram": "sparse"},
                                                              "dense release")):
        doc = is_problem(hana.execute("dp-heat", {**base, **bad}), 400)
        assert word in doc["detail"], (bad, doc)
    assert "this server allows at most" in is_problem(hana.execute("dp-heat", {**base, "h3_resolution": 15}),
                                                      413)["detail"]
    r = hana.execute("dp-heat", {**base, "h3_resolution": 8})
    assert r.status_code == 200, r.text
    md = r.json()["release"]["metadata"]
    assert md["method"] == "dp_heat" and md["cells"] == "H3" and md["differentially_private"] is True
    auto = hana.execute("dp-heat", base)  # no cell size: square cells chosen from epsilon
    assert auto.status_code == 200, auto.text
    amd = auto.json()["release"]["metadata"]
    assert amd["cells_chosen"] is True and amd["cells"] == "square" and amd["cell_width_m"] > 0
    feats = r.json()["layer"]["features"]
    assert len(feats) == md["n_cells"] and all(len(f["properties"]["h3"]) == 15 for f in feats)
    import shapely

    b = shapely.bounds(shapely.from_geojson([json.dumps(f["geometry"]) for f in feats]))
    assert (b[:, 0] > -93.4).all() and (b[:, 2] < -93.1).all() and (b[:, 1] > 44.8).all()  # lon/lat (RFC 7946)
    r = hana.execute("dp-hotspots", {**base, "cell_m": 500, "radius_m": 800, "fdr": True})
    assert r.status_code == 200, r.text
    md = r.json()["release"]["metadata"]
    assert md["method"] == "dp_hotspots" and md["hotspot_fdr"] is True
    props = [f["properties"] for f in r.json()["layer"]["features"]]
    assert {"gi_z", "gi_p", "gi_bin", "hotspot"} <= set(props[0]) and max(p["gi_bin"] for p in props) >= 1
    b = ledger(svc).budget("hx")
    assert b.spent_epsilon == Fraction(3, 4)
    assert [(x.mechanism, x.analyst) for x in b.releases] == [("dp-heat", "hana"), ("dp-heat", "hana"),
                                                               ("dp-hotspots", "hana")]


def test_spans_without_a_radius(svc):
    """Spans with neither radius nor MinPts (auto): one release, its choices in the metadata; the preview too."""
    ann = client(svc, "ann")
    d = ann.get("/processes/dp-dbscan-spans").json()
    assert d["inputs"]["radius_m"]["minOccurs"] == 0 and d["inputs"]["min_points"]["minOccurs"] == 0
    assert "fdr" in d["inputs"]
    pv = ann.execute("noise-preview", {"dataset": "auto", "epsilon": 0.5, "n_points": 2000}).json()["preview"]
    assert pv["auto"] is True and pv["by_points"][0]["n_points"] == 2000 and pv["spends_budget"] is False
    r = ann.execute("dp-dbscan-spans", {"dataset": "auto", "epsilon": 0.5})
    assert r.status_code == 200, r.text
    md = r.json()["release"]["metadata"]
    assert md["auto"] is True and md["differentially_private"] is True and md["epsilon"] == 0.5
    assert md["noisy_total"] > 0 and md["cell_width_m"] > 0 and md["floor_fdr"] == 0.1
    assert all("level" in f["properties"] for f in r.json()["layer"]["features"])
    b = ledger(svc).budget("auto")
    assert b.spent_epsilon == Fraction(1, 2) and [x.mechanism for x in b.releases] == ["dp-dbscan-spans-auto"]


def test_concurrent_requests_never_overspend(svc):
    # 'small' has a total of 1; eight concurrent releases at 0.25 from three analysts: exactly four fit
    who = ["alice", "bob", "carol", "alice", "bob", "carol", "alice", "bob"]
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        rs = list(pool.map(lambda w: client(svc, w).execute(
            "dp-dbscan-spans", dict(SPANS, dataset="small", epsilon=0.25)), who))
    codes = sorted(r.status_code for r in rs)
    assert codes == [200] * 4 + [409] * 4, [(r.status_code, r.text[:200]) for r in rs]
    for r in rs:
        if r.status_code == 409:
            doc = r.json()
            assert doc["left_epsilon"] in (0.0, 0.25, 0.5, 0.75) and "is left" in doc["detail"]
    b = ledger(svc).budget("small")
    assert b.spent_epsilon == 1 and b.n_charged == 4 and all(x.status == "completed" for x in b.releases)
    # nothing is left: the answer names it
    doc = is_problem(client(svc, "carol").execute("dp-dbscan-spans", dict(SPANS, dataset="small", epsilon=0.25)), 409)
    assert doc["left_epsilon"] == 0.0 and doc["dataset"] == "small" and "0 is left" in doc["detail"]


def test_the_command_line_and_the_service_share_one_budget_under_concurrency(svc):
    # 'shared' has a total of 1.5: six releases at 0.25 fit; four command-line runs on the same ledger race
    # with four HTTP releases, so exactly six of the eight succeed
    import os
    import subprocess
    import sys

    d = svc["dir"]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env.pop("DPGEO_LEDGER", None)
    cli = [[sys.executable, "-m", "dpgeo", "spans", str(d / "stops.gpkg"), "--layer", "points", "--epsilon", "0.25",
            "--radius", "300", "--min-points", "40", f"--domain={AREA_TEXT}", "--dataset", "shared",
            "--ledger", str(d / "ledger.sqlite"), "-o", str(d / f"cli-{i}.geojson")] for i in range(4)]
    procs = [subprocess.Popen(c, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=str(d))
             for c in cli]
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        rs = list(pool.map(lambda _: client(svc, "alice").execute(
            "dp-dbscan-spans", dict(SPANS, dataset="shared", epsilon=0.25)), range(4)))
    outs = [(p.wait(timeout=300), p.stderr.read()) for p in procs]
    for p in procs:
        p.stdout.close()
        p.stderr.close()
    http_ok = sum(r.status_code == 200 for r in rs)
    cli_ok = sum(code == 0 for code, _ in outs)
    assert all(r.status_code in (200, 409) for r in rs), [(r.status_code, r.text[:300]) for r in rs]
    assert all(code == 0 or "budget" in err.lower() for code, err in outs), outs
    assert http_ok + cli_ok == 6, (http_ok, cli_ok, outs)
    b = ledger(svc).budget("shared")
    assert b.spent_epsilon == Fraction(3, 2) and b.n_charged == 6


def test_concurrent_executions_never_queue_more_jobs_than_an_analyst_may_have(tmp_path):
    # max_jobs_per_analyst is 4 (the default): of ten simultaneous asynchronous releases by one analyst, exactly
    # four are queued and six refused with 429. A job holds its place until it is answered, and min_job_seconds
    # keeps every job unanswered for 8 s, far longer than ten requests take, so no place frees up while they
    # arrive (without it a job can finish between two requests, and a fifth would rightly be let in).
    make_points(tmp_path / "stops.gpkg")
    config = write_config(tmp_path, server={"workers": 1, "min_job_seconds": 8, "executions_per_minute": 60},
                          datasets={"queue": {"path": "stops.gpkg", "total_epsilon": 10.0, "study_area": AREA_TEXT,
                                              "layer": "points"}},
                          analysts={"dan": (TOKENS["dan"], ["queue"])})
    server = Server(config, tmp_path)
    try:
        def dan():
            return Client(server.url, TOKENS["dan"])

        with concurrent.futures.ThreadPoolExecutor(10) as pool:
            rs = list(pool.map(lambda _: dan().execute(
                "dp-dbscan-spans", dict(SPANS, dataset="queue", epsilon=0.1), asynchronous=True), range(10)))
        accepted = [r for r in rs if r.status_code == 201]
        refused = [is_problem(r, 429) for r in rs if r.status_code != 201]
        assert len(accepted) == 4 and len(refused) == 6, [(r.status_code, r.text[:200]) for r in rs]
        assert all(doc["detail"].startswith("you have 4 jobs") for doc in refused), [d["detail"] for d in refused]
        for r in accepted:
            assert wait_job(dan(), r.headers["location"])["status"] == "successful"
        # once they are answered, the places are free again
        assert dan().execute("dp-dbscan-spans", dict(SPANS, dataset="queue", epsilon=0.1),
                           asynchronous=True).status_code == 201
    finally:
        server.stop()


def test_private_releases_are_seen_only_by_analysts_granted_the_dataset(svc):
    r = client(svc, "bob").execute("dp-dbscan-spans", dict(SPANS, dataset="secret"))
    assert r.status_code == 200, r.text
    rid = r.json()["release"]["id"]
    assert rid in {x["id"] for x in client(svc, "bob").get("/collections").json()["collections"]}
    for c in (client(svc), client(svc, "alice")):
        assert rid not in {x["id"] for x in c.get("/collections").json()["collections"]}
        for suffix in ("", "/items", "/items/1", "/map", "/files/gpkg"):
            r = c.get(f"/collections/{rid}{suffix}")
            made_up = c.get(f"/collections/{'f' * 32}{suffix}")
            assert r.status_code == made_up.status_code == 404 and r.json() == made_up.json(), suffix
    assert client(svc, "bob").get(f"/collections/{rid}/items").status_code == 200


def test_no_point_in_the_study_area_is_a_normal_release(svc):
    c = client(svc, "alice")
    r = c.execute("dp-dbscan-spans", dict(SPANS, dataset="empty"))
    assert r.status_code == 200, r.text
    empty = r.json()
    full = svc["release_doc"]  # the same process on a dataset with points: the same shape of answer
    assert set(empty) == set(full) and set(empty["release"]) == set(full["release"])
    assert set(empty["release"]["metadata"]) == set(full["release"]["metadata"])
    col = client(svc).get(f"/collections/{empty['release']['id']}").json()
    assert col["extent"]["spatial"]["bbox"][0] == pytest.approx([-93.33, 44.89, -93.19, 45.06])
    # the owner hears about it in the owner's log; the service log says nothing about the data
    owner = (svc["dir"] / "owner.log").read_text()
    assert "inside the study area" in owner and "exact, not private" in owner
    assert "study area" not in svc["server"].log()


def test_one_record_that_is_not_a_point_does_not_decide_the_answer(svc):
    # the record is dropped and counted by reason (in every mode, as for the CLI); the analyst sees no trace of it
    r = client(svc, "alice").execute("dp-dbscan-spans", dict(SPANS, dataset="odd"))
    assert r.status_code == 200, r.text
    odd, full = r.json(), svc["release_doc"]
    assert set(odd) == set(full) and set(odd["release"]["metadata"]) == set(full["release"]["metadata"])
    assert odd["release"]["metadata"]["differentially_private"] is True
    assert "LineString" not in svc["server"].log()


def test_an_input_that_cannot_be_read_is_a_generic_failure_and_charges_nothing(svc):
    (svc["dir"] / "gone.gpkg").unlink()  # the owner moved the file while the server runs
    doc = is_problem(client(svc, "alice").execute("dp-dbscan-spans", dict(SPANS, dataset="gone")), 500)
    assert doc["type"].endswith("release-failed") and "gone" not in doc["detail"] and "/" not in doc["detail"]
    assert ledger(svc).budget("gone").spent_epsilon == 0  # the charge made before the read was cancelled
    # the owner's log (not the analyst) gets the cause
    assert "gone.gpkg" in (svc["dir"] / "owner.log").read_text()
    make_points(svc["dir"] / "gone.gpkg", seed=3)  # back, for the restart below


def test_a_wrong_token_is_refused_on_every_path(svc):
    """A wrong token gets 401 wherever it is sent: the API definition, paths that do not exist, HEAD and OPTIONS."""
    bad = {"Authorization": "Bearer nope"}
    rid = svc["release"]
    for method, path in (("GET", "/api"), ("GET", "/openapi.json"), ("GET", "/docs"), ("GET", "/redoc"),
                         ("GET", "/no/such/path"), ("GET", "/"), ("GET", "/conformance"), ("GET", "/processes"),
                         ("GET", f"/collections/{rid}/items"), ("HEAD", "/api"), ("OPTIONS", "/collections"),
                         ("DELETE", "/jobs"), ("POST", "/processes/noise-preview/execution")):
        r = client(svc).request(method, path, headers=bad)
        assert r.status_code == 401, (method, path, r.status_code)
        if method != "HEAD":
            assert is_problem(r, 401)["type"].endswith("unauthorized")
    for auth in ("Basic " + "x" * 40, "Digest nope", "Bearer"):
        assert is_problem(client(svc).get("/api", headers={"Authorization": auth}), 401)
    assert client(svc).get("/api").status_code == 200 and client(svc, "alice").get("/api").status_code == 200
    assert is_problem(client(svc).get("/openapi.json"), 404) and is_problem(client(svc).get("/docs"), 404)


def test_http_basic_with_the_token_as_the_password(svc):
    """For clients that only know HTTP Basic (QGIS 3.22): any user name, the token as the password."""
    secret = next(x["id"] for x in client(svc, "bob").get("/collections").json()["collections"]
                  if x["dpgeo"]["dataset"] == "secret")
    anon = client(svc)
    for user in ("bob", "anything", ""):
        r = anon.get(f"/collections/{secret}/items", auth=(user, TOKENS["bob"]))
        assert r.status_code == 200 and r.json()["type"] == "FeatureCollection", user
    assert anon.get(f"/collections/{secret}/items").status_code == 404  # no token: as if it did not exist
    assert is_problem(anon.get(f"/collections/{secret}/items", auth=("bob", TOKENS["bob"] + "x")), 401)
    assert is_problem(anon.get(f"/collections/{secret}/items", auth=("bob", "")), 401)
    r = anon.get("/jobs")
    assert "Basic" in r.headers["www-authenticate"] and r.headers["www-authenticate"].startswith("Bearer")
    assert anon.get("/jobs", auth=("x", TOKENS["bob"])).status_code == 200


def test_query_parameters_are_refused_with_an_exception_document_that_echoes_nothing(svc):
    c = client(svc, "alice")
    for query in ("limit=abc", "limit=1e3", "offset=%3Cscript%3E", "limit=0", "offset=-1", "limit=99999999999999999999"):
        r = c.get(f"/jobs?{query}")
        doc = is_problem(r, 400)
        assert doc["type"].endswith("invalid-parameter") and "detail" in doc, query
        for echo in ("abc", "1e3", "script", "99999999999999999999"):
            assert echo not in r.text, (query, r.text)
    assert c.get("/jobs?limit=2&offset=0").status_code == 200
    r = client(svc).get(f"/collections/{svc['release']}/items?limit=abc")
    assert is_problem(r, 400) and "abc" not in r.text


def test_a_refused_jobs_paging_parameter_is_named_with_its_own_bounds(svc):
    alice = client(svc, "alice")
    limit = is_problem(alice.get("/jobs?limit=5000"), 400)["detail"]
    assert "limit" in limit and "1000" in limit and "offset" not in limit, limit
    offset = is_problem(alice.get("/jobs?offset=-1"), 400)["detail"]
    assert "offset" in offset and "at least 0" in offset and "limit" not in offset, offset
    assert "-1" not in offset.replace("at least 0", "")  # the value is not echoed
    assert alice.get("/jobs?limit=1&offset=0").status_code == 200


def test_refusals_by_content_length_are_in_the_access_log(svc):
    def logged():
        return len(re.findall(r"POST /processes/dp-dbscan-spans/execution 413 ", svc["server"].log()))

    before = logged()
    r = client(svc, "alice").post("/processes/dp-dbscan-spans/execution", data=b" " * 9000,
                                  headers={"Content-Type": "application/json"})
    assert is_problem(r, 413)
    r = client(svc, "alice").post("/processes/dp-dbscan-spans/execution", data=b" " * 1_000_000,
                                  headers={"Content-Type": "application/json"})  # refused unread
    assert r.status_code == 413
    deadline = time.monotonic() + 10
    while logged() < before + 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert logged() == before + 2


def test_a_method_not_allowed_says_which_are(svc):
    """A 405 carries its Allow header (RFC 9110), the same methods OPTIONS lists, as well as the exception
    document."""
    anon = client(svc)
    for method, path in (("POST", "/processes"), ("DELETE", "/collections"),
                         ("GET", "/processes/dp-dbscan-spans/execution")):
        r = anon.request(method, path)
        assert is_problem(r, 405)
        assert r.headers.get("allow") == anon.request("OPTIONS", path).headers["allow"], (method, path, r.headers)


def test_head_and_options_on_the_read_routes(svc):
    anon, rid = client(svc), svc["release"]
    for path in ("/", "/conformance", "/api", "/processes", "/processes/dp-dbscan-spans", "/collections",
                 f"/collections/{rid}", f"/collections/{rid}/items", f"/collections/{rid}/items/1",
                 f"/collections/{rid}/map", f"/collections/{rid}/files/gpkg"):
        get, head = anon.get(path), anon.request("HEAD", path)
        assert head.status_code == get.status_code == 200, (path, head.status_code)
        assert head.content == b"" and head.headers["content-type"] == get.headers["content-type"], path
        assert head.headers.get("content-length") == get.headers.get("content-length"), path
        opt = anon.request("OPTIONS", path)
        assert opt.status_code == 204 and opt.content == b"", (path, opt.status_code)
        assert set(opt.headers["allow"].split(", ")) == {"GET", "HEAD", "OPTIONS"}, path
    assert set(anon.request("OPTIONS", "/processes/dp-dbscan-spans/execution").headers["allow"].split(", ")) == \
        {"OPTIONS", "POST"}
    assert anon.request("HEAD", "/jobs").status_code == 401 and anon.request("HEAD", "/jobs").content == b""
    assert client(svc, "alice").request("HEAD", "/jobs").status_code == 200
    assert is_problem(anon.request("OPTIONS", "/no/such/path"), 404)
    assert is_problem(anon.post("/processes"), 405)  # not a read route: still refused


def test_jobs_and_releases_survive_a_restart(svc):
    old = svc["server"]
    old.stop()
    svc["old_log"] = old.log()
    svc["server"] = Server(svc["config"], svc["dir"])
    c = client(svc, "alice")
    job = c.get(f"/jobs/{svc['job']}").json()
    assert job["status"] == "successful"
    assert c.get(f"/jobs/{svc['job']}/results").status_code == 200
    assert client(svc).get(f"/collections/{svc['release']}/items").status_code == 200


def test_no_response_and_no_log_line_holds_a_data_value(svc):
    """Sentinels planted in the private inputs never come back, and the exact record count is nowhere."""
    assert len(Client.seen) > 100
    secrets = [SENTINEL_TEXT, SENTINEL_PERSON, SENTINEL_COORD, "44.9744654321"] + list(TOKENS.values())
    for method, path, status, ctype, body in Client.seen:
        text = body.decode("utf-8", "replace")
        for s in secrets:
            assert s not in text, (method, path, s)
        if status >= 400:  # an error answer never carries a number from the data
            assert str(N_PRIVATE) not in text and f"{N_PRIVATE:,}" not in text, (method, path, text)
    log = svc.get("old_log", "") + svc["server"].log()
    # drop what the log itself adds (timestamps, client ports, durations, random job and release ids), which may
    # contain any digits
    log = re.sub(r"(?m)^\S+ \S+ |127\.0\.0\.1:\d+|\d+ ms$|\[\d+\]|\b[0-9a-f]{32}\b", "", log)
    for s in secrets + [str(N_PRIVATE), f"{N_PRIVATE:,}"]:
        assert s not in log, s
    own = "\n".join(line for line in log.splitlines() if "dpgeo.server.access" not in line)
    assert "stops.gpkg" not in own and "elsewhere.gpkg" not in own  # (the access log shows the paths asked for)
    # the log says who spent what
    assert "release: analyst=alice dataset=stops process=dp-dbscan-spans epsilon=0.5 release_id=" in log
    assert "refused (budget): analyst=" in log and "dataset=small" in log
    # and the owner's log does get the exact facts (it exists for them)
    assert "exact, not private" in (svc["dir"] / "owner.log").read_text()
