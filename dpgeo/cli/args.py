"""Argument groups shared by the commands (input, study area, privacy, engine) and the parser itself."""

from __future__ import annotations

import argparse
import contextlib
import re

from ..series_params import series_offered, states_default
from ..shared_params import shared_param

class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2
        self.exit(2, f"{self.prog}: error: {message}\n")


def _add_domain_args(p, with_data_flag=True):
    g = p.add_argument_group("public study area")
    for name in ("domain", "domain_crs", "crs") + (("domain_from_data",) if with_data_flag else ()):
        _add_shared(g, name)


#: dpgeo.io.ENGINES, repeated so that building the parser does not import the I/O stack (a test keeps them equal).
_ENGINES = ("auto", "pyogrio", "fiona")


def _add_engine_arg(g, counting=False):
    if counting:
        g.add_argument("--engine", choices=(*_ENGINES, "dask"), default="auto",
                       help="GDAL binding that reads and writes vector files (default auto: pyogrio if installed, "
                            "else fiona); 'dask' counts the points with Dask instead (on --scheduler, else on a "
                            "local cluster started here) and uses the auto binding for files")
        return
    g.add_argument("--engine", choices=_ENGINES, default="auto",
                   help="GDAL binding that reads and writes vector files (default auto: pyogrio if installed, "
                        "else fiona)")


@contextlib.contextmanager
def _domain_engine(engine):
    """Read a --domain polygon file with the --engine asked for (geopandas' choice under auto)."""
    import geopandas

    switch = engine != "auto" and hasattr(geopandas.options, "io_engine")
    if switch:
        old, geopandas.options.io_engine = geopandas.options.io_engine, engine
    try:
        yield
    finally:
        if switch:
            geopandas.options.io_engine = old


_INPUT_HELP = ("point layer: GeoPackage, GeoJSON, Shapefile (anything GDAL reads), GeoParquet, Parquet or CSV "
               "(also .csv.gz) with coordinate columns, a glob of files ('data/*.parquet', quoted) or a folder of "
               "Parquet files (hive partitions included), or a PostGIS database: postgresql://USER@HOST/DATABASE "
               "with --table or --sql (the password from ~/.pgpass, PGPASSWORD or a service file, never in the "
               "URL); read in batches, never whole")

QUOTED_NEWLINES_HELP = ("CSV: the export has line breaks inside quoted fields (by default a record is one line, and "
                        "a line that leaves a quote open is dropped alone; with this, one unclosed quote swallows the "
                        "lines after it, up to 48 MiB)")


def _add_input_args(p):
    p.add_argument("input", help=_INPUT_HELP)
    p.add_argument("-o", "--output", required=True, action="append", metavar="OUTPUT",
                   help="output .gpkg, .geojson, .html (self-contained web map) or .png (static map), written "
                        "atomically, or a PostGIS table: 'postgresql://USER@HOST/DATABASE?table=NAME' (its metadata "
                        "in the table's comment and the dpgeo_metadata table); give -o several times to write the "
                        "same release (one charge) to several files")
    p.add_argument("--replace", action="store_true",
                   help="replace a PostGIS output table that exists (default: refuse; files are always replaced)")
    g = p.add_argument_group("input")
    g.add_argument("--layer", default=None, help="layer name in a multi-layer input")
    g.add_argument("--x", default=None, metavar="COLUMN", help="x/longitude column of a table (CSV, Parquet)")
    g.add_argument("--y", default=None, metavar="COLUMN", help="y/latitude column of a table (CSV, Parquet)")
    _add_shared(g, "input_crs")
    g.add_argument("--quoted-newlines", action="store_true", help=QUOTED_NEWLINES_HELP)
    g.add_argument("--table", default=None, metavar="[SCHEMA.]TABLE",
                   help="the table or view of a PostGIS input (postgresql://...); its geometry column, SRID and "
                        "columns are found in the catalogue")
    g.add_argument("--sql", default=None, metavar="QUERY",
                   help="instead of --table: a SELECT query of a PostGIS input, e.g. \"SELECT geom, reported_at "
                        "FROM stops WHERE kind = 'traffic'\" (it must not fail on any record: no casts that can)")
    g.add_argument("--geometry", default=None, metavar="COLUMN",
                   help="the geometry column of a PostGIS table or query with several")
    g.add_argument("--out-crs", default=None, metavar="CRS",
                   help="CRS of a GeoPackage output or of a PNG's drawing (default: the working CRS); "
                        "GeoJSON and HTML are always EPSG:4326")
    _add_engine_arg(g, counting=True)
    _add_shared(g, "scheduler", note=" Implies --engine dask; needs pip install dask distributed (docs/scale.md).")
    _add_map_args(p)


def _add_map_args(p):
    """--basemap, --basemap-attribution (an .html map) and --title (.html and .png)."""
    g = p.add_argument_group("maps (.html, .png)")
    g.add_argument("--basemap", default=None, metavar="osm|none|URL",
                   help="tiles under an .html map: osm (default) = OpenStreetMap's standard tiles, credited "
                        "'© OpenStreetMap contributors' (their tile usage policy applies: "
                        "https://operations.osmfoundation.org/policies/tiles/); none = no basemap, and the map "
                        "requests nothing from any host; or an XYZ tile URL template such as "
                        "https://tile.example.org/{z}/{x}/{y}.png. Tile servers see who views the map")
    g.add_argument("--basemap-attribution", default=None, metavar="TEXT",
                   help="credit shown for the tiles of a --basemap URL (plain text)")
    g.add_argument("--title", default=None, metavar="TEXT",
                   help="title of an .html map (its page title and heading) and heading of a .png "
                        "(default: the mechanism)")


#: What the command line adds to the declared shared parameters (dpgeo.shared_params): the value's name in the
#: help, and notes on the command line's own forms of a value.
_SHARED_METAVARS = {"max_points_per_record": "N", "person": "COLUMN", "max_points_per_person": "K",
                    "max_memory_bytes": "SIZE", "dataset": "NAME", "ledger": "PATH", "domain": "BBOX|FILE",
                    "domain_crs": "CRS", "crs": "CRS", "input_crs": "CRS", "scheduler": "local[:N]|ADDRESS"}
_SHARED_NOTES = {"domain": " A negative minx is fine: --domain -93.3,44.9,-93.2,45.0."}
_ARG_TYPES = {"number": float, "integer": int, "text": str}


def _add_shared(g, name, *, required=None, note=""):
    """The option of the declared shared parameter ``name`` (dpgeo.shared_params): flag, type, default and help
    from its declaration; ``required=False`` makes a required one optional (a method that takes no ε)."""
    s = shared_param(name)
    text = (s.cli_help() if states_default(s) else s.help.replace("%", "%%")) \
        + (_SHARED_NOTES.get(name, "") + note).replace("%", "%%")
    if s.kind == "flag":
        g.add_argument(s.cli_flag, action="store_true", help=text)
        return
    kw = {"type": _ARG_TYPES[s.kind], "metavar": _SHARED_METAVARS.get(name)}
    if s.required and required is not False:
        kw["required"] = True
    else:
        kw["default"] = None if s.required else s.default
    g.add_argument(s.cli_flag, help=text, **{k: v for k, v in kw.items() if v is not None or k == "default"})


def _add_privacy_args(p, epsilon_required=True, with_person=False,
                      epsilon_note=" Not used by a method that adds no noise."):
    g = p.add_argument_group("privacy")
    _add_shared(g, "epsilon", required=epsilon_required, note="" if epsilon_required else epsilon_note)
    _add_shared(g, "max_points_per_record")
    if with_person:
        _add_shared(g, "person")
        _add_shared(g, "max_points_per_person")
    _add_shared(g, "seed")
    _add_shared(g, "max_memory_bytes")
    if with_person:  # the run commands
        for name in ("dataset", "ledger", "unattended"):
            _add_shared(g, name)


#: What the command line adds to the declared series options (dpgeo.series_params): the value's name in the help,
#: and what --append (a switch here) continues.
_SERIES_METAVARS = {"time": "COLUMN", "period_start": "DATE", "period_end": "DATE", "timezone": "TZ",
                    "time_format": "FORMAT"}
_SERIES_NOTES = {"append": " The series is the first -o file, rewritten with every period."}


def _add_series_args(p):
    """--time, --period and the public bounds: one release per period (a map series), as declared in
    dpgeo.series_params."""
    g = p.add_argument_group("map series (one release per period; the input is read once)")
    for s in series_offered("cli"):
        text = (s.cli_help() if states_default(s) else s.help.replace("%", "%%")) \
            + _SERIES_NOTES.get(s.name, "").replace("%", "%%")
        if s.kind == "flag" or s.name == "append":  # --append: continue the series in the first -o file
            g.add_argument(s.cli_flag, action="store_true", help=text)
            continue
        kw = {"choices": s.choices} if s.kind == "choice" else {"metavar": _SERIES_METAVARS[s.name]}
        g.add_argument(s.cli_flag, default=s.default, help=text, **kw)


_NEGATIVE_LIST = re.compile(r"^-\.?\d[\d.eE+-]*(,\s*[-+]?[\d.eE+-]+)+$")


def _join_negative_values(argv):
    """``--domain -93.3,44.9,...`` as ``--domain=-93.3,44.9,...`` (argparse takes the value for an option)."""
    out = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if (a.startswith("--") and "=" not in a and len(a) > 2 and i + 1 < len(argv)
                and _NEGATIVE_LIST.match(argv[i + 1])):
            out.append(f"{a}={argv[i + 1]}")
            i += 2
            continue
        out.append(a)
        i += 1
    return out
