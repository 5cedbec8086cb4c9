"""One record changes only itself: the three cases of an audit of the readers, through the command line.

Each case is a dataset D and its neighbour D′ = D plus one record. The
released total (ε = 50: the noise on the whole total is below one record but
with probability about 10⁻¹⁶ per cell, see ``_total``) and the owner's
"used" count must differ by at most that one record, and the run must
succeed on both. Before the readers isolated records, case 1 (with pandas'
nanosecond time zones, pandas < 2) lost a whole batch of times, case 2 lost
every row after an unclosed quote, and case 3 failed the run.
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from dpgeo.cli import main

#: Public study area (lon/lat) and cell width: a few hundred cells.
DOMAIN = "-93.30,44.95,-93.20,45.00"
N = 3000


def _rows(n=N, seed=0, t0=1389000000):
    """CSV lines of ``n`` January 2014 points: lon, lat, epoch seconds, person, free text."""
    rng = np.random.default_rng(seed)
    lon = rng.uniform(-93.29, -93.21, n)
    lat = rng.uniform(44.96, 44.99, n)
    t = t0 + rng.integers(0, 20 * 86400, n)
    return [f"{a:.6f},{b:.6f},{c},p{i % 97},note {i}\n".encode() for i, (a, b, c) in enumerate(zip(lon, lat, t))]


def _write(path, rows, header=b"lon,lat,t,person,note\n"):
    path.write_bytes(header + b"".join(rows))
    return str(path)


def _run(capsys, monkeypatch, tmp_path, src, *extra, name="out"):
    """``dpgeo heat`` in this process: (exit code, stderr, released total, owner's used count)."""
    monkeypatch.setenv("DPGEO_LEDGER", str(tmp_path / "ledger.sqlite"))
    out = tmp_path / f"{name}.geojson"
    capsys.readouterr()
    code = main(["heat", src, "-o", str(out), "--epsilon", "50", "--cell", "500", f"--domain={DOMAIN}",
                 "--dataset", "isolation", *extra])
    err = capsys.readouterr().err
    used = re.search(r"([\d,]+) used", err)
    return code, err, _total(out) if out.exists() else None, int(used.group(1).replace(",", "")) if used else None


def _total(path):
    """The released total: the sum of the raw noisy counts. At ε = 50 a cell's discrete Laplace noise is nonzero
    with probability 2e^-50/(1+e^-50) < 4e-22, so over a few hundred cells the total is exact but for ~1e-19."""
    doc = json.loads(path.read_text())
    return sum(f["properties"]["dp_count_raw"] for f in doc["features"])


def test_an_unclosed_quote_drops_its_own_line_only(tmp_path, capsys, monkeypatch):
    rows = _rows()
    d = _write(tmp_path / "d.csv", rows)
    for at in (10, 2900):
        bad = rows[:at] + [b'-93.25,44.97,1389000000,p1,"stop\n'] + rows[at:]
        d2 = _write(tmp_path / f"d2_{at}.csv", bad)
        code, err, total, used = _run(capsys, monkeypatch, tmp_path, d, name="d")
        code2, err2, total2, used2 = _run(capsys, monkeypatch, tmp_path, d2, name=f"d2_{at}")
        assert code == code2 == 0, err2
        assert used == N and used2 == N and total == total2 == N
        assert "1 that do not parse as a row of the table" in err2  # malformed_row, in the owner's diagnostics


def test_quoted_line_breaks_are_read_when_the_owner_says_so(tmp_path, capsys, monkeypatch):
    rows = _rows()
    with_breaks = rows[:5] + [b'-93.25,44.97,1389000000,p1,"two\nlines"\n'] + rows[5:]
    src = _write(tmp_path / "q.csv", with_breaks)
    code, err, total, used = _run(capsys, monkeypatch, tmp_path, src, name="lines")
    assert code == 0 and used == N and "2 that do not parse" in err  # one record per line: its two halves dropped
    code, err, total, used = _run(capsys, monkeypatch, tmp_path, src, "--quoted-newlines", name="quoted")
    assert code == 0 and used == N + 1 and total == N + 1 and "do not parse" not in err


def test_a_byte_that_is_not_utf8_decides_nothing(tmp_path, capsys, monkeypatch):
    rows = _rows()
    d = _write(tmp_path / "d.csv", rows)
    code, err, total, used = _run(capsys, monkeypatch, tmp_path, d, name="d")
    assert code == 0 and used == total == N
    for at in (0, 10, 2900):
        for rec, kept in ((b"-93.25,44.97,1389000000,p1,caf\xe9\n", 1), (b"-93.25\xff,44.97,1389000000,p1,x\n", 0)):
            d2 = _write(tmp_path / f"u{at}_{kept}.csv", rows[:at] + [rec] + rows[at:])
            for mode in ((), ("--unattended",)):
                code2, err2, total2, used2 = _run(capsys, monkeypatch, tmp_path, d2, *mode, name=f"u{at}_{kept}")
                assert code2 == 0, err2
                assert total2 == N + kept
                if not mode:
                    assert used2 == N + kept


@pytest.mark.parametrize("fmt", ["%s", None])
def test_one_time_out_of_range_marks_its_own_record_only(tmp_path, capsys, monkeypatch, fmt):
    """Case 1: January points and one record at t = 10¹² s, read as wall-clock times of New York (text with
    ``%s``, or epoch numbers)."""
    rows = _rows(2000)
    d = _write(tmp_path / "t.csv", rows)
    d2 = _write(tmp_path / "t2.csv", rows[:1000] + [b"-93.25,44.97,1000000000000,p1,x\n"] + rows[1000:])
    series = ["--time", "t", "--period", "month", "--period-start", "2014-01-01", "--period-end", "2014-02-01",
              "--timezone", "America/New_York"] + (["--time-format", fmt] if fmt else [])
    code, err, total, used = _run(capsys, monkeypatch, tmp_path, d, *series, name="t")
    code2, err2, total2, used2 = _run(capsys, monkeypatch, tmp_path, d2, *series, name="t2")
    assert code == code2 == 0, err2
    assert used == used2 == 2000 and total == total2 == 2000
