"""The checks every awkward-input case must pass (import as ``from corpus import ...``).

A case is a mistake a user can make (a file, a study area, a parameter, an output, an API call). Whatever
the mistake, dpgeo must answer the same way: exit status 2 (or a :class:`dpgeo.errors.DpgeoError` from the
API), **one** line on stderr that names the problem and the fix, no traceback, no output or temporary file
left anywhere in the folders involved, every input byte-identical, and no record value in any message.

:func:`refused` runs the command line (in this process, :func:`run_cli`) and asserts all of that;
:func:`api_refused` does the same for a Python call. Both return the message so that a case can also check its wording.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

__all__ = ["refused", "api_refused", "snapshot", "run_cli", "run_process", "Ran", "PRIVATE_MARKERS"]

#: Values that the corpus files put into records; none may appear in any message (a record value leaked).
PRIVATE_MARKERS = ("-93.2614159", "44.9726535", "OFFICER-7731", "Jane Doe")


def snapshot(*folders) -> dict:
    """{path: sha256} of every file (hidden ones included) under ``folders``."""
    out = {}
    for folder in folders:
        for root, _, files in os.walk(folder):
            for name in files:
                p = Path(root) / name
                out[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else None
    return out


def _check_message(message: str, must_mention=(), private=PRIVATE_MARKERS):
    for value in private:
        assert value not in message, f"a record value {value!r} is in the message: {message!r}"
    low = message.lower()
    for word in must_mention:
        # the command line names an option as typed (radius_m: --radius): either form names it
        from dpgeo.cli import command_line_words

        assert word.lower() in low or command_line_words(word).lower() in low, \
            f"{word!r} not in the message: {message!r}"


@dataclass
class Ran:
    """What a run of the command line gave: its exit status and what it wrote (like ``subprocess.run``'s)."""

    returncode: int
    stdout: str
    stderr: str


class _TimedOut(BaseException):  # not an Exception: the command line's own handlers let it through
    pass


def _alarm(signum, frame):
    raise _TimedOut()


def run_cli(args, *, cwd, env=None, timeout=120) -> Ran:
    """Run ``dpgeo ARGS`` in this process (``dpgeo.cli.main``), in ``cwd``, with ``env`` added to the environment,
    and capture its exit status, stdout and stderr: what ``python -m dpgeo ARGS`` would give, without starting
    Python and importing the stack again for every case. The cases that need a real process (a user's file
    permissions, a signal, a closed pipe) start one themselves."""
    from dpgeo.cli import main

    out, err = io.StringIO(), io.StringIO()
    old_cwd, old_env = os.getcwd(), dict(os.environ)
    os.chdir(cwd)
    os.environ.update({k: str(v) for k, v in (env or {}).items()})
    # a case that blocks (e.g. opening a named pipe nobody writes to) fails after ``timeout`` s, as a process would
    old_handler = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main([str(a) for a in args])
            except SystemExit as exc:  # argparse: a usage error (2) or --help (0)
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except _TimedOut:
        pytest.fail(f"dpgeo {' '.join(map(str, args))} ran more than {timeout} s (blocked?); stderr: "
                    f"{err.getvalue()!r}")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old_handler)
        os.chdir(old_cwd)
        os.environ.clear()
        os.environ.update(old_env)
    return Ran(code, out.getvalue(), err.getvalue())


def run_process(args, *, cwd, env=None, timeout=120) -> Ran:
    """Run ``python -m dpgeo ARGS`` in a real process (for the few cases that need one)."""
    p = subprocess.run([sys.executable, "-m", "dpgeo", *map(str, args)], cwd=cwd, capture_output=True, text=True,
                       env=dict(os.environ, **(env or {})), timeout=timeout)
    return Ran(p.returncode, p.stdout, p.stderr)


def refused(args, *, cwd, folders=(), must_mention=(), private=PRIVATE_MARKERS, env=None, timeout=120,
            process=False) -> str:
    """Run ``dpgeo ARGS`` in ``cwd`` and assert that it is refused cleanly; return the stderr line.

    ``folders`` are watched besides ``cwd``: nothing may be added, removed or changed in any of them. In this
    process (:func:`run_cli`) unless ``process`` (a real one, within ``timeout`` seconds).
    """
    watched = [cwd, *folders]
    before = snapshot(*watched)
    p = run_process(args, cwd=cwd, env=env, timeout=timeout) if process else run_cli(args, cwd=cwd, env=env,
                                                                                    timeout=timeout)
    err = p.stderr.strip()
    assert p.returncode == 2, f"exit {p.returncode}, stderr: {p.stderr!r}, stdout: {p.stdout!r}"
    assert "Traceback" not in p.stderr and "Traceback" not in p.stdout, p.stderr
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, f"expected one line on stderr, got {len(lines)}: {p.stderr!r}"
    assert lines[0].startswith("dpgeo"), lines[0]
    _check_message(err + p.stdout, must_mention, private)
    after = snapshot(*watched)
    assert after == before, {"added": sorted(set(after) - set(before)), "removed": sorted(set(before) - set(after)),
                             "changed": sorted(k for k in before if k in after and before[k] != after[k])}
    return lines[0]


def api_refused(call, *, folders=(), must_mention=(), private=PRIVATE_MARKERS, error=None) -> str:
    """Call ``call()`` and assert that it raises a dpgeo error cleanly; return the message."""
    from dpgeo.errors import DpgeoError

    before = snapshot(*folders)
    with pytest.raises(error or DpgeoError) as info:
        call()
    message = str(info.value)
    assert "\n" not in message.strip(), f"expected a one-line message: {message!r}"
    _check_message(message, must_mention, private)
    assert snapshot(*folders) == before
    return message
