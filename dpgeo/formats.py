"""File formats and the GDAL engine that reads or writes them.

Shared by the point readers (:mod:`dpgeo.counting.readers`) and the release
writers (:mod:`dpgeo.io`). GDAL is reached through one of two bindings, the
*engine*: ``"pyogrio"`` (a dependency of dpgeo, and the fast path) or
``"fiona"`` (``pip install fiona``). ``engine="auto"`` (the default
everywhere) takes pyogrio when it imports and fiona otherwise; asking for an
engine that is not installed is an error that names the package to install.
CSV and GeoParquet input and GeoJSON output need no engine.
"""

from __future__ import annotations

import importlib
import os
import re

from ._access import access_problem, check_readable  # noqa: F401 (part of this module's API)
from .errors import InputError, OutputError, ParameterError

__all__ = ["ENGINES", "OUTPUT_EXTENSIONS", "check_engine", "pick_engine", "output_driver", "is_csv", "is_parquet",
           "short_error", "input_error_text", "access_problem", "check_readable"]

#: Accepted values of every ``engine=`` argument.
ENGINES = ("auto", "pyogrio", "fiona")

_INSTALL = {"pyogrio": "pip install pyogrio", "fiona": "pip install fiona"}


def _importable(name) -> bool:
    try:
        importlib.import_module(name)
    except (ImportError, OSError):  # missing, or its GDAL library does not load
        return False
    return True


def pick_engine(engine, *, needed, write):
    """The binding to use, or None when the file needs none and none was asked for.

    An explicitly requested engine must be importable even when the file at
    hand does not need it, so that a wrong setup shows up at once.
    """
    if not isinstance(engine, str) or engine not in ENGINES:
        raise ParameterError(f"engine must be one of {', '.join(map(repr, ENGINES))}, got {engine!r}")
    err = OutputError if write else InputError
    what = "write a GeoPackage" if write else "read this vector format"
    if engine != "auto":
        if not _importable(engine):
            raise err(f"engine={engine!r} needs the {engine} package, which is not installed: "
                      f"{_INSTALL[engine]} (or use engine='auto')")
        return engine
    if not needed:
        return None
    for name in ("pyogrio", "fiona"):
        if _importable(name):
            return name
    raise err(f"to {what} dpgeo needs pyogrio or fiona, and neither imports: "
              f"{_INSTALL['pyogrio']} (or {_INSTALL['fiona']})")


def _needs_gdal_to_read(path) -> bool:
    return not (is_csv(path) or is_parquet(path))


def special_file_kind(path) -> str | None:
    """What ``path`` is when it exists but is not a regular file or a folder ("a named pipe", ...), else None.

    Checked with ``stat`` before anything opens the path: opening a named
    pipe blocks until someone writes to it, and dpgeo reads an input more
    than once (to check it, then to count), which a pipe cannot do.

    Examples
    --------
    >>> special_file_kind("/dev/null")
    'a device'
    >>> special_file_kind(".") is None
    True
    """
    import stat

    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    if stat.S_ISFIFO(mode):
        return "a named pipe"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a device"


def is_csv(path) -> bool:
    return re.search(r"\.(csv|tsv|txt)(\.gz|\.bz2|\.zip|\.xz)?$", os.fspath(path).lower()) is not None


def is_parquet(path) -> bool:
    return os.fspath(path).lower().endswith((".parquet", ".geoparquet", ".pq"))


def check_engine(engine="auto", *, read=None, write=None, driver=None):
    """Check an ``engine`` choice before any data is read.

    Parameters
    ----------
    engine : {"auto", "pyogrio", "fiona"}
        ``"auto"`` takes pyogrio when it imports, else fiona.
    read : str or os.PathLike, optional
        An input file that is going to be read.
    write : str or os.PathLike, optional
        An output file that is going to be written.
    driver : {"GPKG", "GeoJSON", "HTML", "PNG"}, optional
        Output format of ``write`` (default from its extension).

    Returns
    -------
    str or None
        The engine that reading ``read`` or writing ``write`` will use;
        ``None`` when neither needs GDAL (CSV or GeoParquet in, GeoJSON out)
        and no engine was asked for by name.

    Raises
    ------
    ParameterError
        ``engine`` is not one of :data:`ENGINES`.
    InputError, OutputError
        The engine asked for (or, with ``"auto"``, both) is not installed;
        the message says what to install.

    Examples
    --------
    >>> check_engine("auto", read="points.csv", write="spans.geojson") is None
    True
    """
    used = None
    if read is not None:
        used = pick_engine(engine, needed=_needs_gdal_to_read(read), write=False)
    if write is not None:
        used = pick_engine(engine, needed=output_driver(write, driver) == "GPKG", write=True) or used
    if read is None and write is None:
        used = pick_engine(engine, needed=False, write=False)
    return used


#: Release file formats by extension (:func:`output_driver`).
OUTPUT_EXTENSIONS = {".gpkg": "GPKG", ".geojson": "GeoJSON", ".json": "GeoJSON", ".html": "HTML", ".htm": "HTML",
                     ".png": "PNG"}


def output_driver(path, driver=None) -> str:
    """``"GPKG"``, ``"GeoJSON"``, ``"HTML"`` or ``"PNG"`` from ``driver`` or the file extension; ``"PostGIS"`` for a
    ``postgresql://...?table=NAME`` target.

    Examples
    --------
    >>> output_driver("spans.geojson"), output_driver("map.HTML"), output_driver("x", "png")
    ('GeoJSON', 'HTML', 'PNG')
    >>> output_driver("postgresql://analyst@db/city?table=stops_clusters")
    'PostGIS'
    """
    from .postgres import is_postgres

    if is_postgres(path):  # a PostGIS table (dpgeo.io.postgis)
        return "PostGIS"
    if driver:
        d = {"gpkg": "GPKG", "geopackage": "GPKG", "geojson": "GeoJSON", "json": "GeoJSON", "html": "HTML",
             "png": "PNG"}.get(driver.lower())
        if d is None:
            raise OutputError(f"output driver must be GPKG, GeoJSON, HTML or PNG, got {driver!r}")
        return d
    ext = os.path.splitext(os.fspath(path).lower())[1]
    if ext in OUTPUT_EXTENSIONS:
        return OUTPUT_EXTENSIONS[ext]
    raise OutputError(f"cannot tell the output format of {os.fspath(path)!r}: "
                      "use a .gpkg, .geojson, .html or .png name")


def short_error(exc) -> str:
    s = str(exc).strip().splitlines()
    return s[0] if s else type(exc).__name__


_QUOTED = re.compile(r"""'[^']*'|"[^"]*"|`[^`]*`""")
_FLOAT = re.compile(r"[-+]?(\d+\.\d*|\.\d+)([eE][-+]?\d+)?|[-+]?\d+[eE][-+]?\d+")
_ONE_CHAR = re.compile(r"\((.)\)")


def input_error_text(exc, *paths) -> str:
    """The first line of a reading library's error about a *private* input, with no record value left in it.

    pyarrow and GDAL quote what they could not parse: a field, a token, a
    character. Quoted text (except the input's own path or file name),
    decimal numbers and a character in parentheses are replaced by ``…``;
    words, integers (sizes, line and column positions) and the message's
    structure stay.

    Examples
    --------
    >>> input_error_text(ValueError("At line 1, character 19: Unexpected character (J)"))
    'At line 1, character 19: Unexpected character (…)'
    >>> input_error_text(ValueError("'/d/a.csv': cannot parse 'Jane Doe' near -93.2614159"), "/d/a.csv")
    "'/d/a.csv': cannot parse '…' near …"
    """
    text = short_error(exc)
    keep = set()
    for p in paths:
        p = os.fspath(p)
        keep |= {p, os.path.basename(p), os.path.abspath(p)}
    keep = sorted((k for k in keep if k), key=len, reverse=True)
    token = re.compile("|".join([re.escape(k) for k in keep] + [_QUOTED.pattern]))
    out, pos = [], 0
    for m in token.finditer(text):
        out.append(_scrub(text[pos:m.start()]))
        tok = m.group(0)
        out.append(tok if tok in keep or tok[1:-1] in keep else tok[0] + "…" + tok[-1])
        pos = m.end()
    out.append(_scrub(text[pos:]))
    return "".join(out)


def _scrub(text):
    return _ONE_CHAR.sub("(…)", _FLOAT.sub("…", text))
