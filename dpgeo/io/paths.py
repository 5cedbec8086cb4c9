"""Which files an output may never replace: the private input, the study area, the ledger.

One check, :func:`check_not_input`, used by every front end (the command
line, :meth:`dpgeo.Release.to_file`, ``dpgeo export``, the QGIS plugin)
before anything is read. An output is refused when it *resolves* to a
protected file, whatever way it is spelt: the same path, a relative path,
``./sub/../in.gpkg``, a symbolic link either way, a hard link (same device
and inode), or another case of the name on a case-insensitive file system.
A protected input that is a folder (partitioned Parquet) or a glob
(``data/*.parquet``) protects everything inside the folder or matched by the
glob.

Examples
--------
>>> check_not_input("out.gpkg", [("the private input", "in.gpkg")])
>>> check_not_input("./sub/../in.gpkg", [("the private input", "in.gpkg")])
Traceback (most recent call last):
...
dpgeo.errors.OutputError: output './sub/../in.gpkg' is the private input 'in.gpkg': writing it would overwrite it; choose another output file
"""

from __future__ import annotations

import glob
import os

from ..errors import OutputError

__all__ = ["input_paths", "check_not_input", "same_file", "protected_files"]


def _is_glob(p: str) -> bool:
    return any(ch in p for ch in "*?[")


def input_paths(points) -> tuple:
    """The file, folder or glob names an input of the pipeline was given as (empty for in-memory data).

    Parameters
    ----------
    points : str, os.PathLike, PointFile, PointSource or anything else
        Whatever :func:`dpgeo.dbscan_spans` accepts as ``points``.

    Examples
    --------
    >>> input_paths("data/*.parquet"), input_paths((1.0, 2.0, "EPSG:4326"))
    (('data/*.parquet',), ())
    """
    from ..counting.postgis import is_database_input

    if is_database_input(points):  # a database table: no file to protect
        return ()
    if isinstance(points, (str, bytes)) or hasattr(points, "__fspath__"):
        return (os.fsdecode(os.fspath(points)),)
    files = getattr(points, "files", None)
    if isinstance(files, (list, tuple)) and all(isinstance(f, (str, os.PathLike)) for f in files):
        return tuple(os.fspath(f) for f in files)
    return ()


def _key(path: str) -> str:
    return os.path.normcase(os.path.realpath(path))


def same_file(a, b) -> bool:
    """Whether paths ``a`` and ``b`` name one file: same resolved path, or same device and inode."""
    a, b = os.fspath(a), os.fspath(b)
    try:
        if os.path.exists(a) and os.path.exists(b) and os.path.samefile(a, b):
            return True
    except OSError:
        pass
    return _key(a) == _key(b)


def _inside(path: str, folder: str) -> bool:
    p, f = _key(path), _key(folder)
    return p == f or p.startswith(f.rstrip(os.sep) + os.sep)


def _hits(output: str, spec: str) -> bool:
    """Whether writing ``output`` could replace the file(s) ``spec`` names."""
    if _is_glob(spec):
        import fnmatch

        if fnmatch.fnmatch(_key(output), _key(os.path.dirname(spec) or ".") + os.sep
                           + os.path.normcase(os.path.basename(spec))) or \
                fnmatch.fnmatch(os.path.normcase(os.path.abspath(output)), os.path.normcase(os.path.abspath(spec))):
            return True
        for match in glob.glob(spec, recursive=True):
            if _hits(output, match):
                return True
        return False
    if os.path.isdir(spec):
        return _inside(output, spec)
    return same_file(output, spec)


def check_not_input(output, protected) -> None:
    """Refuse an output that would replace a protected file (before anything is read or written).

    Parameters
    ----------
    output : str or os.PathLike
        The file about to be written.
    protected : iterable of (str, str or None)
        ``(what, path)`` pairs: what the file is, for the message (``"the
        private input"``, ``"the study area file"``, ``"the privacy-budget
        ledger"``), and its path, folder or glob; ``None`` paths are skipped.

    Raises
    ------
    OutputError
        One line naming the output, what it would overwrite, and the fix.
    """
    out = os.fspath(output)
    for what, spec in protected:
        if spec is None:
            continue
        spec = os.fsdecode(os.fspath(spec))
        if _hits(out, spec):
            where = "inside" if (not _is_glob(spec) and os.path.isdir(spec)) else "matched by" \
                if _is_glob(spec) else None
            if where:
                raise OutputError(f"output {out!r} is {where} {what} {spec!r}: writing it would change the input; "
                                  "choose an output file elsewhere")
            raise OutputError(f"output {out!r} is {what} {spec!r}: writing it would overwrite it; "
                              "choose another output file")


def protected_files(points=None, *, domain=None, ledger_file=None, release=None) -> tuple:
    """``(what, path)`` of every file a run's outputs must not replace, for :func:`check_not_input`.

    Parameters
    ----------
    points : optional
        The private input as given to the pipeline (a path, glob, folder or source).
    domain : optional
        The study area as given; only a file name counts (a bbox or a polygon is no file).
    ledger_file : str, optional
        The privacy-budget ledger's file (:func:`dpgeo.budget.ledger_path`).
    release : str, optional
        A release file being exported.

    Examples
    --------
    >>> protected_files("in.gpkg", ledger_file="/srv/ledger.sqlite")
    (('the private input', 'in.gpkg'), ('the privacy-budget ledger', '/srv/ledger.sqlite'))
    """
    out = [("the private input", p) for p in input_paths(points)] if points is not None else []
    if isinstance(domain, (str, bytes)) or hasattr(domain, "__fspath__"):
        d = os.fsdecode(os.fspath(domain))
        if os.path.exists(d):  # else it is a bbox string
            out.append(("the study area file", d))
    if ledger_file is not None:
        out.append(("the privacy-budget ledger", os.fspath(ledger_file)))
    if release is not None:
        out.append(("the release being exported", os.fspath(release)))
    return tuple(out)
