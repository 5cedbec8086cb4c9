"""Fixtures shared by the tests; plain helpers live in helpers.py (a PostgreSQL server: postgres.py)."""

import pytest

from helpers import SAMPLE_AREA, SAMPLE_POINTS
from postgres import REQUIRE_POSTGRES, PgUnavailable, start_server


@pytest.fixture
def sample_points():
    return SAMPLE_POINTS


@pytest.fixture
def sample_area():
    return SAMPLE_AREA


_PG = {}


@pytest.fixture(scope="session")
def postgres_server():
    """A throw-away PostgreSQL server with PostGIS for the whole session (tests/postgres.py), stopped at the end.

    Tests that use it are marked ``postgres``; without a server they are skipped with the reason, unless
    ``DPGEO_REQUIRE_POSTGRES=1`` (CI), which makes them fail.
    """
    if "error" in _PG:
        _skip_or_fail(_PG["error"])
    try:
        server = start_server()
    except PgUnavailable as exc:
        _PG["error"] = str(exc)
        _skip_or_fail(str(exc))
    yield server
    server.stop()


@pytest.fixture
def postgres_db(postgres_server):
    """``(server, database name)``: a fresh database with PostGIS on the session's server."""
    return postgres_server, postgres_server.new_database()


def _skip_or_fail(reason):
    if REQUIRE_POSTGRES:
        pytest.fail(f"DPGEO_REQUIRE_POSTGRES=1 but no PostgreSQL server can be started: {reason}", pytrace=False)
    pytest.skip(f"no PostgreSQL server: {reason} (set DPGEO_REQUIRE_POSTGRES=1 to make this fail)")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """With DPGEO_REQUIRE_POSTGRES=1 a skipped ``postgres`` test is a failure: in CI they must run."""
    outcome = yield
    report = outcome.get_result()
    if REQUIRE_POSTGRES and report.skipped and item.get_closest_marker("postgres") is not None:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"DPGEO_REQUIRE_POSTGRES=1 but this PostgreSQL test was skipped: {reason}"
