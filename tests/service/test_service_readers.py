"""One record changes only itself, through ``dpgeo serve``: the audit's three cases as releases of a real service.

Each dataset is a CSV D or its neighbour D′ = D plus one record; the released
total (ε = 50: exact but with probability ~1e-19, see
``tests/test_reader_isolation.py``) must differ by at most that record, and
every job must succeed and be charged the same way.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from service_helpers import Client, Server, write_config

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from test_reader_isolation import DOMAIN, N, _rows  # noqa: E402

TOKEN = "rita-token-readers-0123456789abcdefghijklmnop"
QUOTE = b'-93.25,44.97,1389000000,p1,"stop\n'
LATIN1 = b"-93.25,44.97,1389000000,p1,caf\xe9\n"
LATE = b"-93.25,44.97,1000000000000,p1,x\n"


@pytest.fixture(scope="module")
def svc(tmp_path_factory):
    d = tmp_path_factory.mktemp("readers")
    rows = _rows()
    files = {"d": rows, "quote10": rows[:10] + [QUOTE] + rows[10:], "quote2900": rows[:2900] + [QUOTE] + rows[2900:],
             "latin0": [LATIN1] + rows, "latin10": rows[:10] + [LATIN1] + rows[10:],
             "t": rows[:2000], "t2": rows[:1000] + [LATE] + rows[1000:2000]}
    for name, r in files.items():
        (d / f"{name}.csv").write_bytes(b"lon,lat,t,person,note\n" + b"".join(r))
    common = {"study_area": DOMAIN, "total_epsilon": 1000.0, "time_columns": ["t"], "timezone": "America/New_York",
              "time_format": "%s"}
    cfg = write_config(d, server={"executions_per_minute": 600},
                       datasets={name: {"path": f"{name}.csv", **common} for name in files},
                       analysts={"rita": (TOKEN, list(files))})
    server = Server(cfg, d)
    yield Client(server.url, TOKEN)
    server.stop()


def _total(client, dataset, **series):
    r = client.execute("dp-heat", {"dataset": dataset, "epsilon": 50, "cell_m": 500, **series})
    assert r.status_code == 200, r.text
    return sum(f["properties"]["dp_count_raw"] for f in r.json()["layer"]["features"])


def test_an_unclosed_quote_costs_its_own_line_only(svc):
    assert _total(svc, "d") == N
    assert _total(svc, "quote10") == N
    assert _total(svc, "quote2900") == N


def test_a_byte_that_is_not_utf8_neither_fails_the_job_nor_costs_others(svc):
    assert _total(svc, "latin0") == N + 1
    assert _total(svc, "latin10") == N + 1


def test_one_time_out_of_range_marks_its_own_record_only(svc):
    series = {"time": "t", "period": "month", "period_start": "2014-01-01", "period_end": "2014-02-01"}
    assert _total(svc, "t", **series) == 2000
    assert _total(svc, "t2", **series) == 2000
