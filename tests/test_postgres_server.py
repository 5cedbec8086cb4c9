"""The throw-away PostgreSQL server the database tests share (tests/postgres.py) works as they assume."""

import os

import pytest

pytestmark = pytest.mark.postgres


def test_server_has_postgis_and_listens_on_loopback_only(postgres_db):
    server, db = postgres_db
    with server.connect(db) as conn:
        assert conn.execute("SELECT postgis_lib_version()").fetchone()[0].startswith("3")
        assert conn.execute("SHOW listen_addresses").fetchone()[0] == "127.0.0.1"


def test_the_password_comes_from_the_password_file_only(postgres_server):
    url = postgres_server.url()
    assert postgres_server.password not in url
    assert os.environ["PGPASSFILE"] == postgres_server.passfile
    import psycopg

    with pytest.raises(psycopg.OperationalError):  # no password file: refused (scram over TCP)
        psycopg.connect(url, passfile=os.devnull).close()
