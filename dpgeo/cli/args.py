"""Argument groups shared by the commands (input, study area, privacy, engine) and the parser itself."""

from __future__ import annotations

import argparse
import contextlib
import re


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
               "Parquet files (hive partitions included); read in batches, never whole")


def _add_input_args(p):
    p.add_argument("input", help=_INPUT_HELP)
    p.add_argument("-o", "--output", required=True, action="append", metavar="OUTPUT",
                   help="output .gpkg, .geojson, .html (self-contained web map) or .png (static map), written "
                        "atomically; give -o several times to write the same release (one charge) to several files")
    g = p.add_argument_group("input")
    g.add_argument("--layer", default=None, help="layer name in a multi-layer input")
    g.add_argument("--x", default=None, metavar="COLUMN", help="x/longitude column of a table (CSV, Parquet)")
    g.add_argument("--y", default=None, metavar="COLUMN", help="y/latitude column of a table (CSV, Parquet)")
    g.add_argument("--input-crs", default=None, metavar="CRS", help="CRS of an input that declares none")
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


#: The period kinds of a series (dpgeo.periods.PERIOD_KINDS, repeated so that building the parser imports nothing).
_PERIODS = ("day", "week", "month", "quarter", "year")


def _add_series_args(p):
    """--time, --period and the public bounds: one release per period (a map series)."""
    g = p.add_argument_group("map series (one release per period; the input is read once)")
    g.add_argument("--time", default=None, metavar="COLUMN",
                   help="the column holding each record's time: makes the run a series, one release per period. "
                        "ISO 8601 text (year first, with or without a zone, e.g. 2014-04-01T00:11:00Z or "
                        "2014/4/1 00:11), epoch seconds or timestamps; records without a usable time, or outside the "
                        "bounds, are dropped and counted for you")
    g.add_argument("--period", choices=_PERIODS, default=None,
                   help="length of a period (weeks start on Monday); needs --time")
    g.add_argument("--period-start", default=None, metavar="DATE",
                   help="public start of the series, included (e.g. 2014-04-01); periods come from the bounds, never "
                        "from the data, and a period without data is released like any other")
    g.add_argument("--period-end", default=None, metavar="DATE",
                   help="public end of the series, excluded (e.g. 2014-10-01)")
    g.add_argument("--timezone", default=None, metavar="TZ",
                   help="IANA time zone of the calendar and of times written without a zone (default UTC), e.g. "
                        "America/New_York")
    g.add_argument("--time-format", default=None, metavar="FORMAT",
                   help="strptime format of times that are not ISO 8601, e.g. '%%m/%%d/%%Y %%H:%%M:%%S' (%%z reads a "
                        "zone)")
    g.add_argument("--person-accounting", choices=("series", "period"), default="series",
                   help="with --person: 'series' (default) keeps at most K points per person over the whole series "
                        "and the series costs epsilon once; 'period' keeps K per period and every period costs "
                        "epsilon")
    g.add_argument("--append", action="store_true",
                   help="continue the series in the first -o file with later periods (same mechanism, parameters, "
                        "study area and privacy unit); per record, periods after the series' end at its epsilon or "
                        "less cost nothing more. The file is rewritten with every period")
    g.add_argument("--per-period-files", action="store_true",
                   help="also write one file per period beside each -o (series_2014-04.gpkg, ...)")
    g.add_argument("--cumulative", action="store_true",
                   help="release running totals of the cell counts over the periods (binary-tree mechanism) "
                        "instead of the mechanism's layer per period")


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
