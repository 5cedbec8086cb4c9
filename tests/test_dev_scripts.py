"""The development scripts: one venv for ./dev/run-sample and ./dev/test, and apt's lock said in one line.

Run on copies of the scripts with stand-ins for Python, apt-get and fuser, so that nothing is installed.
"""

import os
import shutil
import subprocess
import textwrap

import pytest

from helpers import ROOT

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="the dev scripts are bash scripts")


def _script(path, body):
    path.write_text("#!/bin/sh\n" + textwrap.dedent(body))
    path.chmod(0o755)
    return path


@pytest.fixture
def checkout(tmp_path):
    """A copy of dev/setup in an otherwise empty checkout, and a stand-in for Debian's /usr/bin/python3."""
    (tmp_path / "dev").mkdir()
    shutil.copy(ROOT / "dev" / "setup", tmp_path / "dev" / "setup")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    return tmp_path, bin_dir


def _system_python(bin_dir, *, qgis):
    """A "Python" that imports qgis.core (or not) and can make venvs; nothing else."""
    return _script(bin_dir / "python3", f"""\
        case "$*" in *qgis*) exit {0 if qgis else 1};; esac
        exit 0
        """)


def _venv(root, mode, base):
    v = root / ".venv"
    (v / "bin").mkdir(parents=True)
    _script(v / "bin" / "python", "exit 0\n")
    (v / "pyvenv.cfg").write_text(f"home = {os.path.dirname(base)}\ninclude-system-site-packages = false\n"
                                  f"version = 3.11.2\nexecutable = {base}\n")
    (v / ".dpgeo-mode").write_text(mode + "\n")


def _plan(root, system_python):
    p = subprocess.run(["bash", str(root / "dev" / "setup"), "--plan"], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, DPGEO_SYSTEM_PYTHON=str(system_python), DPGEO_LATEST="0"))
    assert p.returncode == 0, p.stderr
    return p.stdout.strip()


def test_run_sample_then_test_upgrade_the_same_venv_in_place(checkout):
    """./dev/run-sample made a plain venv from the system Python; QGIS arrived with ./dev/test: no rebuild."""
    root, bin_dir = checkout
    py = _system_python(bin_dir, qgis=True)
    _venv(root, "plain", py)
    assert _plan(root, py).startswith("dev/setup: .venv: upgrade (plain -> qgis mode")


def test_without_qgis_the_plain_venv_is_made_from_the_system_python(checkout):
    root, bin_dir = checkout
    py = _system_python(bin_dir, qgis=False)
    assert _plan(root, py) == f"dev/setup: .venv: create (unknown -> plain mode, {py})"
    _venv(root, "plain", py)
    assert _plan(root, py).startswith("dev/setup: .venv: keep (plain -> plain mode")


def test_a_venv_of_another_python_is_made_anew(checkout):
    root, bin_dir = checkout
    py = _system_python(bin_dir, qgis=True)
    other = _script(bin_dir / "python3.12", "exit 0\n")
    _venv(root, "plain", other)
    assert _plan(root, py).startswith("dev/setup: .venv: recreate (plain -> qgis mode")
    shutil.rmtree(root / ".venv")
    _venv(root, "qgis", py)
    assert _plan(root, py).startswith("dev/setup: .venv: keep (qgis -> qgis mode")


def test_setup_runs_pip_only_when_pyproject_changed(checkout):
    """./dev/run-sample ran pip (15-60 s) on every run; with the stamp the second run installs nothing, and a
    changed pyproject.toml installs again."""
    root, bin_dir = checkout
    py = _system_python(bin_dir, qgis=False)
    calls = root / "pip-calls"
    v = root / ".venv"
    (v / "bin").mkdir(parents=True)
    _script(v / "bin" / "python", f'case "$*" in *pip*) echo "$*" >> {calls};; esac\nexit 0\n')
    (v / "pyvenv.cfg").write_text(f"home = {os.path.dirname(py)}\ninclude-system-site-packages = false\n"
                                  f"version = 3.11.2\nexecutable = {py}\n")
    (v / ".dpgeo-mode").write_text("plain\n")
    (root / "pyproject.toml").write_text('[project]\nname = "dpgeo"\ndependencies = ["numpy"]\n')

    def setup():
        p = subprocess.run(["bash", str(root / "dev" / "setup"), "test"], capture_output=True, text=True,
                           timeout=60, env=dict(os.environ, DPGEO_SYSTEM_PYTHON=str(py), DPGEO_LATEST="0"))
        assert p.returncode == 0, p.stderr
        n = len(calls.read_text().splitlines()) if calls.exists() else 0
        calls.unlink(missing_ok=True)
        return n, p.stderr

    n, _ = setup()
    assert n >= 1  # the first time: pip
    n, err = setup()
    assert n == 0 and "up to date" in err  # the second: nothing to install
    (root / "pyproject.toml").write_text('[project]\nname = "dpgeo"\ndependencies = ["numpy", "shapely"]\n')
    n, _ = setup()
    assert n >= 1  # a new dependency: pip again
    n, _ = setup()
    assert n == 0


# -- dev/apt-install --------------------------------------------------------------------------------------------

LOCK = "E: Could not get lock /var/lib/dpkg/lock-frontend. It is held by process 4242 (unattended-upgr)"


@pytest.fixture
def apt(tmp_path):
    """A fake apt-get that fails with a lock message the first ``LOCKED`` times, and a fuser that sees no lock."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    calls = tmp_path / "calls"
    _script(bin_dir / "apt-get", f"""\
        echo "$*" >> {calls}
        n=$(wc -l < {calls})
        if [ -n "$FAIL_WITH" ]; then echo "$FAIL_WITH" >&2; exit 100; fi
        if [ "$n" -le "${{LOCKED:-0}}" ]; then
            echo "Waiting for cache lock: Could not get lock /var/lib/dpkg/lock-frontend. It is held by process 4242"
            echo "{LOCK}" >&2
            exit 100
        fi
        echo "Reading package lists..."
        exit 0
        """)
    _script(bin_dir / "fuser", "exit 1\n")

    def run(*packages, **env):
        e = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", DPGEO_APT_RETRY_S="1",
                 **{k: str(v) for k, v in env.items()})
        p = subprocess.run(["bash", str(ROOT / "dev" / "apt-install"), *packages], capture_output=True, text=True,
                           env=e, timeout=120)
        return p, calls.read_text().splitlines() if calls.exists() else []

    return run


def test_apt_lock_is_one_waiting_line(apt):
    p, calls = apt("chromium", "firefox-esr", LOCKED=3)
    assert p.returncode == 0, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "waiting for it" in lines[0], p.stderr
    assert "Could not get lock" not in p.stderr + p.stdout and "Waiting for cache lock" not in p.stderr + p.stdout
    assert [c.split()[-1] for c in calls] == ["-qq"] * 4 + ["firefox-esr"]  # update retried, then the install
    assert "DPkg::Lock::Timeout=1" in calls[0]


def test_apt_without_a_lock_is_silent(apt):
    p, calls = apt("qgis")
    assert p.returncode == 0 and p.stderr == "" and p.stdout == ""
    assert len(calls) == 2


def test_apt_failing_for_another_reason_shows_its_output(apt):
    p, _ = apt("no-such-package", FAIL_WITH="E: Unable to locate package no-such-package")
    assert p.returncode != 0
    assert "Unable to locate package no-such-package" in p.stderr and "waiting" not in p.stderr


def test_apt_gives_up_after_the_wait(apt):
    p, calls = apt("qgis", LOCKED=100, DPGEO_APT_WAIT_S=2)
    assert p.returncode != 0
    lines = p.stderr.strip().splitlines()
    assert "waiting for it" in lines[0] and "still held after 2 s" in lines[1]
    assert len(calls) == 3
