"""A release written to a PostGIS table (dpgeo.io.postgis), against a real PostgreSQL server."""

import geopandas as gpd
import pytest

import dpgeo
from dpgeo.errors import OutputError
from dpgeo.io.postgis import read_postgis_metadata
from helpers import SAMPLE_AREA, SAMPLE_POINTS

pytestmark = pytest.mark.postgres


@pytest.fixture(scope="module")
def release():
    return dpgeo.dbscan_spans(str(SAMPLE_POINTS), epsilon=1.0, radius_m=200, min_points=100, domain=str(SAMPLE_AREA),
                              ledger=False)


@pytest.mark.filterwarnings("ignore:pandas only supports SQLAlchemy")
def test_the_table_holds_the_layer_and_its_metadata(postgres_db, release):
    server, db = postgres_db
    target = server.url(db, table="public.clusters")
    assert release.to_file(target) == "PostGIS table 'public.clusters'"
    with server.connect(db) as conn:
        got = gpd.read_postgis("SELECT * FROM clusters ORDER BY fid", conn, geom_col="geom")
    assert len(got) == len(release.layer) and got.crs == release.layer.crs
    assert list(got["cluster_id"]) == list(release.layer["cluster_id"])
    assert got.geometry.area.sum() == pytest.approx(release.layer.geometry.area.sum())
    assert read_postgis_metadata(target) == release.metadata


def test_an_existing_table_is_refused_unless_replaced(postgres_db, release):
    server, db = postgres_db
    target = server.url(db, table="clusters")
    release.to_file(target)
    with pytest.raises(OutputError, match="exists already.*--replace"):
        release.to_file(target)
    release.to_file(target, replace=True)
    with server.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM dpgeo_metadata").fetchone()[0] == 1


def test_a_failed_write_leaves_nothing(postgres_db, release):
    server, db = postgres_db
    bad = release.layer.assign(cluster_id=release.layer["cluster_id"].astype(object))
    bad.loc[bad.index[-1], "cluster_id"] = "x\x00y"  # PostgreSQL text cannot hold a NUL: the last row fails
    with pytest.raises(OutputError, match="nothing was written"):
        from dpgeo.io.postgis import write_postgis

        write_postgis(bad, server.url(db, table="half"), release.metadata)
    with server.connect(db) as conn:
        assert conn.execute("SELECT to_regclass('half')").fetchone()[0] is None


def test_messages_never_name_the_connection(postgres_server, release):
    url = f"postgresql://{postgres_server.user}@localhost:{postgres_server.port}/no_such_db?table=t"
    with pytest.raises(OutputError) as e:
        release.to_file(url)
    for s in (postgres_server.user, "localhost", str(postgres_server.port)):
        assert s not in str(e.value)
    with pytest.raises(OutputError, match="names its table"):
        release.to_file(postgres_server.url("postgres"))


def test_dpgeo_info_reads_a_release_table(postgres_db, release):
    import os
    import subprocess
    import sys

    from helpers import ROOT

    server, db = postgres_db
    target = server.url(db, table="clusters")
    release.to_file(target)
    r = subprocess.run([sys.executable, "-m", "dpgeo", "info", target, "--json"], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=120)
    assert r.returncode == 0, r.stderr
    import json

    assert json.loads(r.stdout)["release_id"] == release.metadata["release_id"]
    assert dpgeo.read_layer_metadata(target) == release.metadata
