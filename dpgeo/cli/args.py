"""Argument groups shared by the commands (input, study area, privacy, engine) and the parser itself."""

from __future__ import annotations

import argparse
import contextlib
import re

from ..series_params import series_offered, states_default

class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2
        self.exit(2, f"{self.prog}: error: {message}\n")


def _add_domain_args(p, with_data_flag=True):
    g = p.add_argument_group("public study area")
    g.add_argument("--domain", metavar="BBOX|FILE",
                   help="public study area: minx,miny,maxx,maxy (in --domain-crs; a negative minx is fine: "
                        "--domain -93.3,44.9,-93.2,45.0) or a polygon file")
    g.add_argument("--domain-crs", default=None, metavar="CRS",
                   help="CRS of a bbox --domain (default EPSG:4326, lon/lat)")
    g.add_argument("--crs", default=None, metavar="CRS",
                   help="working CRS, projected in metres (default: UTM zone of the study area's centre)")
    if with_data_flag:
        g.add_argument("--domain-from-data", action="store_true",
                       help="use the data's own extent as study area: exploration only, the output is "
                            "marked NOT differentially private")


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
    g.add_argument("--input-crs", default=None, metavar="CRS", help="CRS of an input that declares none")
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
    g.add_argument("--scheduler", default=None, metavar="local[:N]|ADDRESS",
                   help="count the points with Dask: 'local' starts a cluster of one worker per core on this "
                        "machine ('local:N': N workers), an address such as tcp://host:8786 uses a running Dask "
                        "cluster (needs pip install dask distributed; see docs/scale.md). The workers only count; "
                        "the noise is drawn here. Implies --engine dask. Default: count here, in one process")
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


def _add_privacy_args(p, epsilon_required=True, with_person=False,
                      epsilon_help="privacy budget ε (> 0); not used by exact"):
    g = p.add_argument_group("privacy")
    if epsilon_required:
        g.add_argument("--epsilon", type=float, required=True, help="privacy budget ε (> 0)")
    else:
        g.add_argument("--epsilon", type=float, default=None, help=epsilon_help)
    g.add_argument("--max-points-per-record", type=int, default=1, metavar="N",
                   help="points one record may contribute; scales the noise (default 1)")
    if with_person:
        g.add_argument("--person", default=None, metavar="COLUMN",
                       help="column naming each point's person: the guarantee becomes per person "
                            "(needs --max-points-per-person)")
        g.add_argument("--max-points-per-person", type=int, default=None, metavar="K",
                       help="keep at most K random points per person; the noise scales with K")
    g.add_argument("--seed", type=int, default=None,
                   help="fixed random seed, FOR TESTS ONLY: the output is marked not private")
    g.add_argument("--max-memory", default=None, metavar="SIZE",
                   help="refuse, before reading anything, a run estimated to need more memory than this (e.g. 8G; "
                        "default $DPGEO_MAX_MEMORY, else half of this machine's memory)")
    if with_person:  # the run commands
        g.add_argument("--dataset", default=None, metavar="NAME",
                       help="the population this release protects, as named in the privacy-budget ledger "
                            "(default: the dataset declared for the input file's content: dpgeo budget declare); "
                            "several files of the same people share one name")
        g.add_argument("--ledger", default=None, metavar="PATH",
                       help="privacy-budget ledger file (default: $DPGEO_LEDGER, else your user data directory)")
        g.add_argument("--unattended", action="store_true",
                       help="conditions of the data (no point in the study area, no usable record) are warnings "
                            "for you, not errors: a valid, possibly empty, layer is always written, so whoever "
                            "sees only the output learns nothing beyond the DP result")


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
