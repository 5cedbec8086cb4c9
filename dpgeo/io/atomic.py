"""Writing a file so that it appears only when complete: a temporary name beside it, then a rename."""

from __future__ import annotations

import os
import tempfile

from ..errors import OutputError
from ..formats import short_error

__all__ = ["atomic_write"]


def atomic_write(path, writer):
    """Call ``writer(tmp)`` on a fresh temporary name beside ``path``, then rename it into place.

    On any failure the temporary file (and SQLite side files) are removed and
    an :class:`~dpgeo.errors.OutputError` is raised; ``path`` is untouched.
    """
    folder = os.path.dirname(os.path.abspath(path))
    suffix = os.path.splitext(os.fspath(path))[1]
    try:
        fd, tmp = tempfile.mkstemp(prefix=".dpgeo-", suffix=suffix, dir=folder)
    except OSError as exc:
        raise OutputError(f"cannot write {path!r}: {short_error(exc)}") from None
    os.close(fd)
    os.unlink(tmp)  # let the driver create it
    try:
        writer(tmp)
        os.replace(tmp, path)
    except BaseException as exc:
        for p in (tmp, tmp + "-wal", tmp + "-shm", tmp + "-journal"):
            if os.path.exists(p):
                os.unlink(p)
        if isinstance(exc, (OutputError, KeyboardInterrupt)):
            raise
        raise OutputError(f"cannot write {path!r}: {short_error(exc)}") from exc


def _write_text(path, text):
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
