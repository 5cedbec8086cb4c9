"""The checks every awkward-input case must pass (import as ``from corpus import ...``).

A case is a mistake a user can make (a file, a study area, a parameter, an output, an API call). Whatever
the mistake, dpgeo must answer the same way: exit status 2 (or a :class:`dpgeo.errors.DpgeoError` from the
API), **one** line on stderr that names the problem and the fix, no traceback, no output or temporary file
left anywhere in the folders involved, every input byte-identical, and no record value in any message.

:func:`refused` runs the command line in a subprocess and asserts all of that; :func:`api_refused` does the
same for a Python call. Both return the message so that a case can also check its wording.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

__all__ = ["refused", "api_refused", "snapshot", "PRIVATE_MARKERS"]

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
        assert word.lower() in low, f"{word!r} not in the message: {message!r}"


def refused(args, *, cwd, folders=(), must_mention=(), private=PRIVATE_MARKERS, env=None, timeout=120) -> str:
    """Run ``dpgeo ARGS`` in ``cwd`` and assert that it is refused cleanly; return the stderr line.

    ``folders`` are watched besides ``cwd``: nothing may be added, removed or changed in any of them.
    """
    watched = [cwd, *folders]
    before = snapshot(*watched)
    full_env = dict(os.environ, **(env or {}))
    p = subprocess.run([sys.executable, "-m", "dpgeo", *map(str, args)], cwd=cwd, capture_output=True, text=True,
                       env=full_env, timeout=timeout)
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
