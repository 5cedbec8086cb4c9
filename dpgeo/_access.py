"""Whether this user may read a path: one line saying what to do, decided before anything opens it.

Shared by every reader of a user's files (the point inputs, a study-area file, a release read back,
an output's folder); it depends on nothing but the error classes.
"""

from __future__ import annotations

import os

from .errors import InputError

__all__ = ["access_problem", "check_readable"]


def access_problem(path, what="input file") -> str | None:
    """Why this user may not read ``path`` (one line saying what to do), or None.

    None too when ``path`` does not exist (the caller says so in its own
    words). A file needs read permission; a folder read and search
    permission; every folder above it search permission — without that
    ``os.path.exists`` says False, which would read as a missing file.
    Decided with ``stat``/``access`` alone, before anything opens the path.

    Examples
    --------
    >>> access_problem(".") is None
    True
    >>> access_problem("no/such/file.gpkg") is None
    True
    """
    import stat

    p = os.fspath(path)
    try:
        mode = os.stat(p).st_mode
    except PermissionError:
        return (f"{what} {p!r} cannot be reached: a folder on its path may not be opened by this user "
                "(permission denied); give that folder search permission (chmod +x) or copy the file elsewhere")
    except (OSError, ValueError):
        return None
    if stat.S_ISDIR(mode):
        if not os.access(p, os.R_OK | os.X_OK):
            return (f"{what} {p!r} may not be listed by this user (permission denied); give the folder read and "
                    "search permission (chmod +rx) or run as a user who may read it")
        return None
    if not os.access(p, os.R_OK):
        return (f"{what} {p!r} is not readable by this user (permission denied); give it read permission "
                "(chmod +r) or run as a user who may read it")
    return None


def check_readable(path, what="input file", error=InputError):
    """Raise ``error`` (an :class:`~dpgeo.errors.InputError` by default) when :func:`access_problem` finds one."""
    msg = access_problem(path, what)
    if msg:
        raise error(msg)
