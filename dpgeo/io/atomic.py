"""Writing a file so that it appears only when complete: a temporary name beside it, then a rename.

Temporary files are named ``.dpgeo-tmp-<pid>-<random><suffix>`` (a
GeoPackage's SQLite side files add ``-journal``, ``-wal`` or ``-shm``), so
that a run killed before its rename (SIGKILL, a power cut) never leaves a
partial file under the target's name, and the next write in the same folder
removes the temporaries whose process is gone (:func:`remove_stale_temporaries`).
"""

from __future__ import annotations

import os
import re
import secrets

from ..errors import OutputError
from ..formats import short_error

__all__ = ["atomic_write", "temporary_name", "remove_stale_temporaries", "TMP_PREFIX"]

#: Every temporary file dpgeo writes starts with this, then ``<pid>-``.
TMP_PREFIX = ".dpgeo-tmp-"
_SIDE_FILES = ("-journal", "-wal", "-shm")
_TMP_RE = re.compile(re.escape(TMP_PREFIX) + r"(\d+)-")


def temporary_name(folder, suffix="") -> str:
    """A fresh temporary path in ``folder`` that this process owns (the file is not created)."""
    return os.path.join(folder, f"{TMP_PREFIX}{os.getpid()}-{secrets.token_hex(6)}{suffix}")


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True  # another user's process, or cannot tell: keep its files
    return True


def remove_stale_temporaries(folder) -> list:
    """Remove the temporary files of dpgeo writes in ``folder`` whose process no longer runs.

    A process that is still running (or whose state cannot be read) keeps
    its files. Returns the paths removed. Errors are ignored: this is
    housekeeping, never a reason to fail a write.
    """
    removed = []
    try:
        names = os.listdir(folder)
    except OSError:
        return removed
    for name in names:
        m = _TMP_RE.match(name)
        if m is None or _alive(int(m.group(1))):
            continue
        path = os.path.join(folder, name)
        try:
            if os.path.isfile(path) and not os.path.islink(path):
                os.unlink(path)
                removed.append(path)
        except OSError:
            pass
    return removed


def _remove_with_side_files(tmp):
    for p in (tmp, *(tmp + s for s in _SIDE_FILES)):
        try:
            os.unlink(p)
        except FileNotFoundError:
            pass
        except OSError:
            pass


def atomic_write(path, writer):
    """Call ``writer(tmp)`` on a fresh temporary name beside ``path``, then rename it into place.

    Stale temporaries of killed runs in the folder are removed first. On any
    failure the temporary file (and SQLite side files) are removed and an
    :class:`~dpgeo.errors.OutputError` is raised; ``path`` is untouched.
    """
    folder = os.path.dirname(os.path.abspath(path))
    suffix = os.path.splitext(os.fspath(path))[1]
    remove_stale_temporaries(folder)
    tmp = temporary_name(folder, suffix)
    try:
        writer(tmp)
        _hook()
        os.replace(tmp, path)
    except BaseException as exc:
        _remove_with_side_files(tmp)
        if isinstance(exc, (OutputError, KeyboardInterrupt)):
            raise
        raise OutputError(f"cannot write {path!r}: {short_error(exc)}") from exc
    for side in _SIDE_FILES:  # a driver that left its journal beside the renamed file
        if os.path.exists(tmp + side):
            os.unlink(tmp + side)


def _hook():
    """Tests only: ``DPGEO_TEST_PAUSE_BEFORE_RENAME=FILE`` creates FILE and waits (to be killed) before the rename."""
    flag = os.environ.get("DPGEO_TEST_PAUSE_BEFORE_RENAME")
    if flag:
        import time

        open(flag, "w").close()
        for _ in range(600):
            time.sleep(0.1)


def _write_text(path, text):
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
