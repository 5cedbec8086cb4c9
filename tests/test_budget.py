"""The privacy-budget ledger: caps and exact sums, the reservation lifecycle, concurrent processes,
kill -9 at random moments, bad ledger files, and the ``dpgeo budget`` commands.

Every test uses a real SQLite file in a temporary folder.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import pickle
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpgeo import budget
from dpgeo.budget import store as _ledger_sqlite
from dpgeo.budget import Ledger, dataset_key_for_path, exact_value, format_exact, ledger_path
from dpgeo.errors import BudgetExceededError, DpgeoError, LedgerError, ParameterError

from helpers import ROOT


@pytest.fixture
def ledger(tmp_path):
    return Ledger(tmp_path / "ledger.sqlite")


def _rows(path):
    con = sqlite3.connect(path)
    try:
        return con.execute("SELECT release_id, status, epsilon, delta FROM releases ORDER BY seq").fetchall()
    finally:
        con.close()


def _integrity(path):
    con = sqlite3.connect(path)
    try:
        return con.execute("PRAGMA integrity_check").fetchall()
    finally:
        con.close()


# -- exact arithmetic and caps ---------------------------------------------------------------------------------

def test_ten_times_a_tenth_fits_a_total_of_one_and_an_eleventh_does_not(ledger):
    ledger.set_total("stops", 1.0)
    for _ in range(10):
        ledger.reserve("stops", epsilon=0.1, mechanism="dp-dbscan-spans").complete(["a.gpkg"])
    b = ledger.budget("stops")
    assert b.spent_epsilon == 1 and b.left_epsilon == 0 and b.n_charged == 10
    with pytest.raises(BudgetExceededError) as e:
        ledger.reserve("stops", epsilon=0.1, mechanism="dp-dbscan-spans")
    err = e.value
    assert isinstance(err, DpgeoError)
    assert (err.dataset, err.total_epsilon, err.spent_epsilon, err.left_epsilon) == ("stops", 1, 1, 0)
    msg = str(err)
    assert "'stops'" in msg and "epsilon = 1;" in msg and "1 is spent and 0 is left" in msg
    assert ledger.budget("stops").n_charged == 10  # the refusal recorded nothing
    assert pickle.loads(pickle.dumps(err)).left_epsilon == 0  # survives a process pool or a job queue


def test_float_sums_that_overshoot_in_binary_fit_exactly(ledger):
    assert 0.1 + 0.2 > 0.3
    ledger.set_total("d", 0.3)
    ledger.reserve("d", epsilon=0.1, mechanism="m")
    ledger.reserve("d", epsilon=0.2, mechanism="m")
    assert ledger.budget("d").spent_epsilon == Fraction(3, 10)
    with pytest.raises(BudgetExceededError, match="0.3 is spent and 0 is left"):
        ledger.reserve("d", epsilon=1e-12, mechanism="m")


def test_refusal_names_what_is_left(ledger):
    ledger.set_total("d", "2")
    ledger.reserve("d", epsilon=1.5, mechanism="m")
    with pytest.raises(BudgetExceededError, match=r"total budget of epsilon = 2; 1.5 is spent and 0.5 is left.*"
                                                  r"epsilon = 0.75 is refused.*Use epsilon <= 0.5"):
        ledger.reserve("d", epsilon=0.75, mechanism="m")
    ledger.reserve("d", epsilon=0.5, mechanism="m")  # exactly what is left fits


@settings(max_examples=20, deadline=None)
@given(total=st.integers(1, 30), eps=st.lists(st.integers(1, 12), min_size=1, max_size=12))
def test_accepts_exactly_what_fits_in_decimal_arithmetic(total, eps):
    with tempfile.TemporaryDirectory() as d:
        led = Ledger(os.path.join(d, "l.sqlite"))
        led.set_total("d", total / 10)
        spent = Fraction(0)
        for e in eps:
            want = spent + Fraction(e, 100) * 7 <= Fraction(total, 10)
            try:
                led.reserve("d", epsilon=e * 7 / 100, mechanism="m")
                got = True
            except BudgetExceededError:
                got = False
            assert got == want
            spent += Fraction(e * 7, 100) if got else 0
        assert led.budget("d").spent_epsilon == spent <= Fraction(total, 10)


def test_exact_value_and_format():
    assert exact_value(0.1) == Fraction(1, 10)
    assert exact_value("1/3") == Fraction(1, 3) and format_exact(Fraction(1, 3)) == "1/3"
    assert format_exact(exact_value(1e-6)) == "0.000001" and format_exact(exact_value(2.5)) == "2.5"
    for bad in (float("nan"), float("inf"), "abc", True, None, [1]):
        with pytest.raises(ParameterError):
            exact_value(bad)


def test_delta_total_defaults_to_zero_with_an_epsilon_total(ledger):
    ledger.set_total("d", 1)
    with pytest.raises(BudgetExceededError, match="total delta of 0"):
        ledger.reserve("d", epsilon=0.1, delta=1e-6, mechanism="m")
    ledger.set_total("d", 1, total_delta=1e-6)
    ledger.reserve("d", epsilon=0.1, delta=5e-7, mechanism="m")
    ledger.reserve("d", epsilon=0.1, delta=5e-7, mechanism="m")
    with pytest.raises(BudgetExceededError, match="delta"):
        ledger.reserve("d", epsilon=0.1, delta=1e-9, mechanism="m")
    b = ledger.budget("d")
    assert b.spent_delta == Fraction(1, 10**6) and b.left_delta == 0 and b.left_epsilon == Fraction(8, 10)


def test_without_a_total_releases_are_recorded_never_refused(ledger):
    for _ in range(3):
        ledger.reserve("free", epsilon=5, delta=0.1, mechanism="m")
    b = ledger.budget("free")
    assert b.total_epsilon is None and b.left_epsilon is None and b.spent_epsilon == 15 and b.n_charged == 3


def test_bad_parameters_are_refused_before_the_ledger_is_touched(tmp_path):
    led = Ledger(tmp_path / "l.sqlite")
    for kw in ({"epsilon": 0}, {"epsilon": -1}, {"epsilon": 0.1, "delta": 1}, {"epsilon": 0.1, "delta": -0.1}):
        with pytest.raises(ParameterError):
            led.reserve("d", mechanism="m", **kw)
    with pytest.raises(ParameterError):
        led.reserve("", epsilon=1, mechanism="m")
    with pytest.raises(ParameterError):
        led.reserve("a\nb", epsilon=1, mechanism="m")
    with pytest.raises(ParameterError):
        led.set_total("d", -1)
    assert not (tmp_path / "l.sqlite").exists()


# -- the reservation lifecycle ---------------------------------------------------------------------------------

def test_reserve_cancel_complete_fail(ledger):
    ledger.set_total("d", 1)
    r = ledger.reserve("d", epsilon=0.5, mechanism="m", analyst="ana")
    assert r.new_dataset is False and r.spent_epsilon == Fraction(1, 2) and r.left_epsilon == Fraction(1, 2)
    assert ledger.budget("d").spent_epsilon == Fraction(1, 2)  # reserved counts as spent at once
    r.cancel()
    assert ledger.budget("d").spent_epsilon == 0 and r.status == "cancelled"
    with pytest.raises(LedgerError):
        r.complete()

    r = ledger.reserve("d", epsilon=0.5, mechanism="m")
    r.noise_started()
    with pytest.raises(LedgerError, match="noise may have been drawn"):
        r.cancel()
    r.complete(["out.gpkg"])
    with pytest.raises(LedgerError):
        r.cancel()
    ledger.add_outputs(r.release_id, ["out.geojson", "out.gpkg"])

    f = ledger.reserve("d", epsilon=0.25, mechanism="m")
    f.fail()
    b = ledger.budget("d")
    assert [(x.status, x.charged) for x in b.releases] == [("cancelled", False), ("completed", True),
                                                           ("failed", True)]
    assert b.releases[1].outputs == ("out.gpkg", "out.geojson") and b.releases[0].analyst == "ana"
    assert b.spent_epsilon == Fraction(3, 4)


def test_context_manager_cancels_only_before_noise(ledger):
    with pytest.raises(OSError):
        with ledger.reserve("d", epsilon=1, mechanism="m") as r:
            with r.before_noise():
                raise OSError("input unreadable")
    assert r.status == "cancelled" and ledger.budget("d").spent_epsilon == 0

    with pytest.raises(RuntimeError):
        with ledger.reserve("d", epsilon=1, mechanism="m") as r:
            with r.before_noise():
                pass
            assert not r.cancellable
            raise RuntimeError("mechanism failed")
    assert r.status == "failed" and ledger.budget("d").spent_epsilon == 1

    with pytest.raises(RuntimeError):  # no before_noise block: an error keeps the charge (conservative)
        with ledger.reserve("d", epsilon=1, mechanism="m") as r:
            raise RuntimeError("anything")
    assert r.status == "failed"

    with ledger.reserve("d", epsilon=1, mechanism="m") as r:
        pass  # leaving without complete(): completed, charged
    assert r.status == "completed" and ledger.budget("d").spent_epsilon == 3


def test_release_ids_are_random_and_dates_have_no_time(ledger):
    ids = {ledger.reserve("d", epsilon=1, mechanism="m").release_id for _ in range(20)}
    assert len(ids) == 20 and all(len(i) == 32 and int(i, 16) >= 0 for i in ids)
    rec = ledger.budget("d").releases[0]
    assert len(rec.date) == 10 and rec.date.count("-") == 2 and rec.analyst  # YYYY-MM-DD, an OS user


def test_new_dataset_flag_and_path_key(ledger, tmp_path):
    f = tmp_path / "stops.gpkg"
    f.write_text("x")
    (tmp_path / "link.gpkg").symlink_to(f)
    key = dataset_key_for_path(tmp_path / "sub" / ".." / "link.gpkg")
    assert key == str(f.resolve())
    assert ledger.reserve(key, epsilon=1, mechanism="m").new_dataset is True
    assert ledger.reserve(key, epsilon=1, mechanism="m").new_dataset is False


def test_ledger_location(tmp_path, monkeypatch):
    monkeypatch.delenv(budget.LEDGER_ENV, raising=False)
    default = ledger_path()
    assert default.endswith(os.path.join("dpgeo", "ledger.sqlite"))
    monkeypatch.setenv(budget.LEDGER_ENV, str(tmp_path / "env.sqlite"))
    assert Ledger().path == str(tmp_path / "env.sqlite")
    assert Ledger(tmp_path / "explicit.sqlite").path == str(tmp_path / "explicit.sqlite")
    with pytest.raises(LedgerError, match="does not exist"):
        Ledger(tmp_path / "missing" / "l.sqlite").reserve("d", epsilon=1, mechanism="m")


def test_reading_a_missing_ledger_creates_nothing(tmp_path):
    led = Ledger(tmp_path / "l.sqlite")
    assert led.history() == [] and led.datasets() == [] and led.budget("d").spent_epsilon == 0
    assert not (tmp_path / "l.sqlite").exists()


def test_recorded_charges_cannot_be_altered_in_sql(ledger):
    ledger.reserve("d", epsilon=1, mechanism="m").complete()
    con = sqlite3.connect(ledger.path)
    for sql in ("DELETE FROM releases", "UPDATE releases SET epsilon = '0'",
                "UPDATE releases SET status = 'cancelled'"):
        with pytest.raises(sqlite3.DatabaseError, match="dpgeo ledger"):
            con.execute(sql)
    con.close()


def test_amounts_edited_outside_dpgeo_are_refused(ledger):
    ledger.set_total("d", 1)
    ledger.reserve("d", epsilon=0.5, mechanism="m")
    con = sqlite3.connect(ledger.path)
    con.execute("DROP TRIGGER releases_charge_fixed")
    con.execute("UPDATE releases SET epsilon = '-0.5'")  # would give the budget back
    con.commit()
    con.close()
    with pytest.raises(LedgerError, match="unreadable amount '-0.5'"):
        ledger.reserve("d", epsilon=0.5, mechanism="m")


def test_threads_share_one_ledger(tmp_path):
    # a server answers requests from threads: one Ledger object, no shared connection
    from concurrent.futures import ThreadPoolExecutor

    led = Ledger(tmp_path / "l.sqlite", timeout=60)
    led.set_total("d", 1)

    def work(_):
        n = 0
        while True:
            try:
                led.reserve("d", epsilon=0.1, mechanism="m").complete()
                n += 1
            except BudgetExceededError:
                return n

    with ThreadPoolExecutor(6) as ex:
        assert sum(ex.map(work, range(6))) == 10
    assert led.budget("d").spent_epsilon == 1


# -- concurrency: processes racing for one cap -----------------------------------------------------------------

def _race_worker(path, barrier, results, eps):
    led = Ledger(path, timeout=60)
    barrier.wait()
    n = 0
    while True:
        try:
            led.reserve("stops", epsilon=eps, mechanism="m").complete()
            n += 1
        except BudgetExceededError:
            break
    results.put(n)


def _create_worker(path, barrier, results):
    barrier.wait()
    Ledger(path, timeout=60).reserve("fresh", epsilon=0.5, mechanism="m").complete()
    results.put(1)


def _run_processes(target, args, n=10):
    ctx = multiprocessing.get_context("fork")
    barrier, results = ctx.Barrier(n), ctx.Queue()
    procs = [ctx.Process(target=target, args=(*args[:1], barrier, results, *args[1:])) for _ in range(n)]
    for p in procs:
        p.start()
    out = [results.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    return out


needs_fork = pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="needs fork")


@needs_fork
def test_ten_processes_never_spend_more_than_the_cap(tmp_path):
    path = str(tmp_path / "l.sqlite")
    Ledger(path).set_total("stops", 1.0)
    counts = _run_processes(_race_worker, (path, 0.1))
    assert sum(counts) == 10  # exactly ten releases of 0.1 fit a total of 1
    b = Ledger(path).budget("stops")
    assert b.spent_epsilon == 1 and b.n_charged == 10
    assert _integrity(path) == [("ok",)]


@needs_fork
def test_ten_processes_racing_with_large_releases(tmp_path):
    path = str(tmp_path / "l.sqlite")
    Ledger(path).set_total("stops", 1)
    counts = _run_processes(_race_worker, (path, 0.3))
    assert sum(counts) == 3 and Ledger(path).budget("stops").spent_epsilon == Fraction(9, 10)


@needs_fork
def test_processes_creating_the_ledger_at_once(tmp_path):
    path = str(tmp_path / "l.sqlite")
    assert sum(_run_processes(_create_worker, (path,), n=6)) == 6
    assert Ledger(path).budget("fresh").n_charged == 6 and _integrity(path) == [("ok",)]


# -- kill -9 at random moments ---------------------------------------------------------------------------------

# The child imports dpgeo.budget without running dpgeo/__init__ (which loads the geospatial stack) so that it
# starts in a fraction of a second. It prints each step *after* the ledger call returned.
_CHILD = r"""
import os, random, sys, types
pkg = types.ModuleType("dpgeo"); pkg.__path__ = [os.path.join(sys.argv[1], "dpgeo")]; sys.modules["dpgeo"] = pkg
from dpgeo.budget import Ledger
from dpgeo.errors import BudgetExceededError
led = Ledger(sys.argv[2], timeout=60)
rng = random.Random(int(sys.argv[3]))
print("ready", flush=True)
while True:
    name = "capped" if rng.random() < 0.4 else "open"
    try:
        r = led.reserve(name, epsilon=rng.choice([0.1, 0.05, 0.2]), mechanism="m", analyst="loop")
    except BudgetExceededError:
        print("refused", flush=True)
        continue
    print("R", r.release_id, flush=True)
    k = rng.random()
    if k < 0.25:
        r.cancel(); print("X", r.release_id, flush=True)
    elif k < 0.4:
        r.noise_started(); r.fail(); print("F", r.release_id, flush=True)
    else:
        r.noise_started(); r.complete(["out.gpkg"]); print("C", r.release_id, flush=True)
"""


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs POSIX signals")
def test_kill_9_at_random_moments_leaves_a_consistent_ledger(tmp_path):
    # A child reserves, cancels, fails and completes releases in a loop (about 25 ms per ledger call here, so
    # the kills land in every phase: connecting, checking, inside transactions, committing, checkpointing) and
    # is killed after a random delay; 16 times, the first run creating the ledger file.
    path = str(tmp_path / "l.sqlite")
    rng = random.Random(20240613)
    cap = Fraction(1)
    said = {}  # release id -> the last step the child reported done
    refused = 0
    for kills in range(1, 17):
        if kills == 2:
            Ledger(path).set_total("capped", cap)
        out_path = tmp_path / f"out{kills}.txt"
        with open(out_path, "w") as out:
            p = subprocess.Popen([sys.executable, "-c", _CHILD, str(ROOT), path, str(kills)], stdout=out,
                                 stderr=subprocess.PIPE)
            t0 = time.monotonic()
            while "ready" not in out_path.read_text():
                assert p.poll() is None, p.stderr.read().decode()
                if time.monotonic() - t0 > 300:  # a hang guard, not a timing check: the child never got ready
                    pytest.fail("the ledger child process never became ready")
                time.sleep(0.01)
            time.sleep(rng.uniform(0.0, 0.5))
            p.send_signal(signal.SIGKILL)
            p.wait()
            p.stderr.close()
        for line in out_path.read_text().splitlines():
            parts = line.split()
            refused += parts == ["refused"]
            if len(parts) == 2:
                said[parts[1]] = parts[0]

        assert _integrity(path) == [("ok",)]
        con = sqlite3.connect(path)
        created = con.execute("SELECT count(*) FROM sqlite_master WHERE name = 'releases'").fetchone()[0]
        assert created or kills == 1  # only the first child can die before the schema is committed
        rows = {rid: (ds, status, Fraction(eps)) for rid, ds, status, eps in
                (con.execute("SELECT release_id, dataset, status, epsilon FROM releases") if created else ())}
        con.close()
        for rid, step in said.items():  # whatever the child was told is recorded
            status = rows[rid][1]
            assert {"R": status in ("reserved", "completed", "failed", "cancelled"), "X": status == "cancelled",
                    "F": status == "failed", "C": status == "completed"}[step], (rid, step, status)
        unreported = [rid for rid in rows if rid not in said]  # committed, killed before it could say so
        assert len(unreported) <= kills and all(rows[rid][1] == "reserved" for rid in unreported)
        incomplete = [rid for rid, (_, status, _) in rows.items() if status == "reserved"]
        assert len(incomplete) <= kills  # at most one interrupted charge per kill, and it stays counted
        for b in Ledger(path).history():  # opens and reads cleanly
            assert b.spent_epsilon == sum(e for ds, s, e in rows.values() if ds == b.dataset and s != "cancelled")
            assert b.dataset == "open" or b.spent_epsilon <= cap
    assert len(rows) >= 20 and refused > 0  # the kills landed in a busy loop that also hit the cap


# -- bad ledger files ------------------------------------------------------------------------------------------

def _refuses(path, match):
    led = Ledger(path, timeout=0.2)
    with pytest.raises(LedgerError, match=match):
        led.reserve("d", epsilon=1, mechanism="m")
    with pytest.raises(LedgerError, match=match):
        led.budget("d")


def test_a_file_that_is_not_sqlite(tmp_path):
    path = tmp_path / "l.sqlite"
    junk = os.urandom(8192)
    path.write_bytes(junk)
    _refuses(path, "corrupt or not a SQLite file")
    assert path.read_bytes() == junk  # untouched


def test_a_damaged_ledger(tmp_path):
    path = tmp_path / "l.sqlite"
    led = Ledger(path)
    for i in range(8):
        led.reserve(f"dataset-{i}", epsilon=0.001, mechanism="m" * 4000)
    size = path.stat().st_size
    assert size > 8 * 4096 and not (tmp_path / "l.sqlite-wal").exists()  # checkpointed when the last one closed
    with open(path, "r+b") as f:
        f.seek(size // 2 // 4096 * 4096)
        f.write(b"\x0d" + random.Random(1).randbytes(4095))  # a page that claims to be a leaf, filled with garbage
    _refuses(path, "corrupt")


def test_another_programs_sqlite_file(tmp_path):
    path = tmp_path / "other.sqlite"
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE t (x)")
    con.commit()
    con.close()
    _refuses(path, "not a dpgeo privacy-budget ledger")


def test_a_ledger_from_a_newer_dpgeo(tmp_path):
    path = tmp_path / "l.sqlite"
    Ledger(path).reserve("d", epsilon=1, mechanism="m")
    con = sqlite3.connect(path)
    con.execute(f"PRAGMA user_version = {budget.SCHEMA_VERSION + 1}")
    con.close()
    n = budget.SCHEMA_VERSION
    _refuses(path, rf"newer dpgeo \(ledger schema {n + 1}; this dpgeo .* knows up to {n}\): upgrade dpgeo")
    assert len(_rows(path)) == 1


def test_lock_held_too_long(tmp_path):
    path = tmp_path / "l.sqlite"
    Ledger(path).set_total("d", 5)
    reservation = Ledger(path, timeout=0.3).reserve("d", epsilon=1, mechanism="m")
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another process in the middle of a write
    try:
        with pytest.raises(LedgerError, match=r"locked by another process for more than 0.3 s.*"
                                              r"\(nothing was charged or released\)$"):
            Ledger(path, timeout=0.3).reserve("d", epsilon=1, mechanism="m")
        with pytest.raises(LedgerError, match=r"was not marked completed: it stays charged"):
            reservation.complete(["a.gpkg"])
        assert Ledger(path, timeout=0.3).budget("d").total_epsilon == 5  # reading is not blocked (WAL)
    finally:
        other.execute("ROLLBACK")
        other.close()
    Ledger(path, timeout=0.3).reserve("d", epsilon=1, mechanism="m")  # fine once released
    reservation.complete(["a.gpkg"])
    assert [r[1] for r in _rows(path)] == ["completed", "reserved"]


# Run as the unprivileged user "nobody" when the tests run as root (root ignores file permissions). The child
# uses the base interpreter and a copy of the ledger's modules, so that it needs no access to this checkout
# or its virtual environment, wherever they are.
_READ_ONLY_CHILD = r"""
import os, sys
sys.path.insert(0, sys.argv[1])
from dpgeo.budget import Ledger
from dpgeo.errors import LedgerError
assert os.getuid() != 0
with open(sys.argv[2], "rb") as f:  # the file can be read: only writing is impossible
    assert f.read(15) == b"SQLite format 3"
for path in sys.argv[2:]:
    try:
        Ledger(path).reserve("d", epsilon=1, mechanism="m")
        print("RESERVED")
    except LedgerError as e:
        print("REFUSED", e)
"""


def _interpreter_for_nobody():
    """A Python that the user "nobody" may run: this one, or the system's when this one lives in a private
    folder (an interpreter under /root, as pyenv installs it, cannot be executed by anyone else)."""
    seen = []
    for exe in (sys.executable, getattr(sys, "_base_executable", None), "/usr/bin/python3"):
        if not exe or os.path.realpath(exe) in seen:
            continue
        seen.append(os.path.realpath(exe))
        try:
            probe = subprocess.run([seen[-1], "-I", "-c", "import sqlite3"], user=65534, group=65534,
                                   extra_groups=[], capture_output=True, timeout=60, cwd="/")
        except OSError:
            continue
        if probe.returncode == 0:
            return seen[-1]
    pytest.skip(f"no Python interpreter that the user nobody may run (tried {seen})")


def test_read_only_file_and_folder():
    top = tempfile.mkdtemp(prefix="dpgeo-ro-")
    folder = os.path.join(top, "ledger")
    path = os.path.join(folder, "l.sqlite")
    new = os.path.join(folder, "new.sqlite")
    try:
        os.mkdir(folder)
        Ledger(path).reserve("d", epsilon=1, mechanism="m")
        os.chmod(path, 0o444)
        os.chmod(folder, 0o555)
        if getattr(os, "geteuid", lambda: 1)() == 0:
            pkg = os.path.join(top, "lib", "dpgeo")
            os.makedirs(pkg)
            open(os.path.join(pkg, "__init__.py"), "w").close()
            for name in ("_dates.py", "errors.py", "_version.py"):
                shutil.copy(ROOT / "dpgeo" / name, pkg)
            shutil.copytree(ROOT / "dpgeo" / "budget", os.path.join(pkg, "budget"),
                            ignore=shutil.ignore_patterns("__pycache__"))
            for d, _, _ in os.walk(top):
                os.chmod(d, 0o755 if d != folder else 0o555)
            out = subprocess.run([_interpreter_for_nobody(), "-I", "-c", _READ_ONLY_CHILD,
                                  os.path.join(top, "lib"), path, new], user=65534, group=65534, extra_groups=[],
                                 capture_output=True, text=True, timeout=60, cwd=top)
            assert out.returncode == 0, out.stderr
            lines = out.stdout.splitlines()
        else:
            lines = []
            for p in (path, new):
                try:
                    Ledger(p).reserve("d", epsilon=1, mechanism="m")
                    lines.append("RESERVED")
                except LedgerError as e:
                    lines.append(f"REFUSED {e}")
        assert len(lines) == 2 and all(line.startswith("REFUSED") and "cannot be opened or written" in line
                                       and "--ledger PATH" in line for line in lines), lines
        assert not os.path.exists(new) and len(_rows(path)) == 1
    finally:
        for d, _, _ in os.walk(top):
            os.chmod(d, 0o755)
        shutil.rmtree(top)


def test_migrations_run_in_order_and_are_recorded(tmp_path, monkeypatch):
    path = tmp_path / "l.sqlite"
    Ledger(path).reserve("d", epsilon=1, mechanism="m")
    assert sorted(_ledger_sqlite.MIGRATIONS) == list(range(1, budget.SCHEMA_VERSION + 1))

    def to_2(conn):
        conn.execute("ALTER TABLE releases ADD COLUMN note TEXT")

    n = budget.SCHEMA_VERSION + 1
    monkeypatch.setattr(_ledger_sqlite, "SCHEMA_VERSION", n)
    monkeypatch.setitem(_ledger_sqlite.MIGRATIONS, n, to_2)
    assert Ledger(path).budget("d").spent_epsilon == 1  # a read upgrades an older ledger first
    con = sqlite3.connect(path)
    assert con.execute("PRAGMA user_version").fetchone()[0] == n
    assert [r[0] for r in con.execute("SELECT version FROM migrations ORDER BY version")] == list(range(1, n + 1))
    assert "note" in [r[1] for r in con.execute("PRAGMA table_info(releases)")]
    con.close()


# -- the dpgeo budget commands ---------------------------------------------------------------------------------

def _cli(*args, env_ledger=None):
    """The real command in a subprocess: exit status, stdout, stderr."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop(budget.LEDGER_ENV, None)
    if env_ledger:
        env[budget.LEDGER_ENV] = str(env_ledger)
    return subprocess.run([sys.executable, "-m", "dpgeo", *map(str, args)], capture_output=True, text=True, env=env,
                          timeout=120)


@pytest.fixture
def cli(capsys, monkeypatch):
    """The same command in this process (it takes a second to start one): (exit status, stdout, stderr)."""
    from dpgeo.cli import main

    monkeypatch.delenv(budget.LEDGER_ENV, raising=False)

    def run(*args):
        try:
            rc = main([str(a) for a in args])
        except SystemExit as exc:  # argparse
            rc = exc.code
        out, err = capsys.readouterr()
        return rc, out, err

    return run


def test_cli_set_show_history(tmp_path, cli):
    path = tmp_path / "l.sqlite"
    p = _cli("budget", "set", "stops", "--total", "1", "--ledger", path)
    assert p.returncode == 0, p.stderr
    assert "dataset: stops" in p.stdout and "left:    epsilon 1, delta 0" in p.stdout
    assert f"(declared {budget._today()} by " in p.stdout
    led = Ledger(path)
    for _ in range(3):
        led.reserve("stops", epsilon=0.1, mechanism="dp-dbscan-spans", analyst="ana").complete(
            ["/srv/maps/spans.gpkg", "/srv/maps/spans.geojson"])
    led.reserve("stops", epsilon=0.2, mechanism="wavecluster-privthr", analyst="bo").cancel()
    led.reserve("other", epsilon=0.5, mechanism="m")  # an interrupted run

    p = _cli("budget", "show", "stops", "--json", env_ledger=path)  # DPGEO_LEDGER instead of --ledger
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert d["ledger"] == str(path) and d["dataset"]["spent_epsilon"] == pytest.approx(0.3)
    assert d["dataset"]["left_epsilon"] == pytest.approx(0.7) and len(d["dataset"]["releases"]) == 4
    assert d["dataset"]["releases"][3]["status"] == "cancelled" and not d["dataset"]["releases"][3]["charged"]

    rc, out, _ = cli("budget", "show", "stops", "--ledger", path)
    assert rc == 0
    assert "spent:   epsilon 0.3, delta 0 (3 releases)" in out and "left:    epsilon 0.7, delta 0" in out
    rel = led.budget("stops").releases[0]
    line = next(line for line in out.splitlines() if rel.release_id in line)
    for field in (rel.date, "dp-dbscan-spans", "0.1", "ana", "completed", "/srv/maps/spans.gpkg, /srv/maps/spans.geojson"):
        assert field in line
    assert "cancelled: stopped before any noise was drawn, not charged" in out

    rc, out, _ = cli("budget", "history", "--ledger", path, "--json")
    d = json.loads(out)
    assert [x["dataset"] for x in d["datasets"]] == ["other", "stops"]
    assert d["datasets"][0]["total_epsilon"] is None and d["datasets"][0]["releases"][0]["status"] == "reserved"

    rc, out, _ = cli("budget", "show", "--ledger", path)
    assert rc == 0 and "other" in out and "stops" in out
    rc, out, _ = cli("budget", "show", "--ledger", path, "--json")
    assert [x["n_releases"] for x in json.loads(out)["datasets"]] == [1, 3]
    rc, out, _ = cli("budget", "history", "--ledger", path)
    assert rc == 0 and "incomplete: charged, not finished" in out and "none declared" in out


def test_cli_errors_are_one_line_exit_2(tmp_path, cli):
    path = tmp_path / "l.sqlite"
    path.write_bytes(b"not a ledger" * 100)
    p = _cli("budget", "history", "--ledger", path)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "corrupt" in p.stderr and not p.stdout
    path.unlink()
    rc, _, err = cli("budget", "show", "nope", "--ledger", path)
    assert rc == 2 and err.count("\n") == 1 and "'nope' is not in the ledger" in err
    rc, _, err = cli("budget", "set", "d", "--total", "lots", "--ledger", path)
    assert rc == 2 and "must be a finite number" in err and not path.exists()
    rc, _, err = cli("budget", "set", "d", "--ledger", path)
    assert rc == 2 and "--total" in err and err.count("\n") == 1
    rc, _, err = cli("budget")
    assert rc == 2 and "set" in err and "history" in err


def test_a_supervisor_chooses_the_charge_id_records_phases_and_settles_a_killed_run(tmp_path):
    """What dpgeo serve needs to close the charge of a worker that was killed (dpgeo/server/manager.py)."""
    from dpgeo.budget import Reservation

    seen = []

    class Tracked(Reservation):
        def noise_started(self):
            seen.append(self.release_id)
            super().noise_started()

    class Supervised(Ledger):
        reservation_type = Tracked

    ledger = Supervised(tmp_path / "ledger.sqlite")
    ledger.set_total("d", 1)
    rid = "ab" * 16
    r = ledger.reserve("d", epsilon=0.5, mechanism="m", analyst="a", release_id=rid)
    assert isinstance(r, Tracked) and r.release_id == rid
    with r.before_noise():
        pass
    assert seen == [rid]
    with pytest.raises(LedgerError):  # an id is used once
        ledger.reserve("d", epsilon=0.1, mechanism="m", analyst="a", release_id=rid)
    with pytest.raises(ParameterError):
        ledger.reserve("d", epsilon=0.1, mechanism="m", analyst="a", release_id="not-an-id")
    other = ledger.reserve("d", epsilon=0.25, mechanism="m", analyst="a").release_id
    # the run's process is gone: its supervisor settles the charges
    assert ledger.settle(rid, "failed") == "failed" and ledger.settle(other, "cancelled") == "cancelled"
    assert ledger.settle(rid, "cancelled") == "failed"  # a settled charge never moves again
    assert ledger.settle("0" * 32, "failed") is None
    assert ledger.budget("d").spent_epsilon == Fraction(1, 2)
    with pytest.raises(ParameterError):
        ledger.settle(rid, "reserved")
