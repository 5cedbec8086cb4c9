"""Reading a whole private point layer into coordinate arrays (the in-memory path).

:func:`read_points` reads any input :func:`~dpgeo.counting.open_points`
accepts — GeoPackage, GeoJSON, Shapefile and anything else GDAL reads,
GeoParquet or plain Parquet (one file, a glob or a partitioned folder), CSV
with coordinate columns (also gzipped) — and returns every usable point at
once, as a :class:`PointTable`. The runs themselves never need this: they
count the points batch by batch (:func:`dpgeo.counting.count_points`). It is
for callers that want the points themselves (the owner's comparison report,
the QGIS plugin), and it holds them all in memory.

Counts about the private input (records read, dropped and why) are
*diagnostics* for the data owner; they travel beside the coordinates and
never into a release.
"""

from __future__ import annotations


import numpy as np

from ..errors import DataError
from .checks import InputTally, for_owner
from .decode import finish_batch
from .inputs import PointFile, frame_source, open_points
from .sources import DEFAULT_BATCH_ROWS, PointSource, PointTable, _columns, input_label

__all__ = ["PointTable", "PointFile", "read_points", "points_from_frame", "frame_source", "input_label"]


def read_points(path, *, layer=None, x=None, y=None, input_crs=None, person=None, engine="auto",
                batch_rows=DEFAULT_BATCH_ROWS, quoted_newlines=False) -> PointTable:
    """Read a whole point layer into coordinate arrays.

    Parameters
    ----------
    path : str or os.PathLike
        GeoPackage, GeoJSON, Shapefile (anything GDAL reads), GeoParquet or
        plain Parquet (``.parquet``, ``.geoparquet``), CSV (``.csv``,
        ``.csv.gz``, ``.tsv``, ``.txt``), a glob of such files
        (``"data/*.parquet"``) or a folder of Parquet files (hive partitions
        included).
    layer : str, optional
        Layer name; required for a file with several layers.
    x, y : str, optional
        Coordinate columns of a table (CSV or Parquet). By default common
        names are detected: ``lon/lng/longitude`` and ``lat/latitude`` (then
        EPSG:4326 is assumed) or ``x/easting`` and ``y/northing`` (then
        ``input_crs`` is required).
    input_crs : anything pyproj accepts, optional
        CRS of a layer or table that does not declare one.
    person : str, optional
        Name of a column identifying the person each point belongs to
        (read into :attr:`PointTable.person`; rows without one are dropped).
    engine : {"auto", "pyogrio", "fiona"}, default "auto"
        GDAL binding for GeoPackage, GeoJSON, Shapefile, ... input
        (``"auto"``: pyogrio if installed, else fiona). CSV and Parquet are
        read without one.
    batch_rows : int
        Records decoded at a time.
    quoted_newlines : bool
        CSV with line breaks inside quoted fields (see :func:`~dpgeo.counting.open_points`).

    Raises
    ------
    InputError
        Unreadable file, missing CRS, a layer not declared as points,
        missing or duplicate columns, several layers and no ``layer``, or
        the engine asked for is not installed.
    DataError
        The input as a whole is unusable: no records, no usable point, most
        coordinates out of the lon/lat range, most geometries not points.
    ParameterError
        Unknown ``engine``.

    Examples
    --------
    >>> import dpgeo
    >>> t = dpgeo.read_points("sample_layers/minneapolis_police_stops_2017.gpkg")
    >>> t.n_read, t.x.size, t.crs.to_epsg()
    (51920, 51920, 4326)
    """
    src = open_points(path, layer=layer, x=x, y=y, input_crs=input_crs, person=person, engine=engine,
                      batch_rows=batch_rows, quoted_newlines=quoted_newlines)
    return table_from_source(src)


def table_from_source(src: PointSource) -> PointTable:
    """All batches of ``src`` in one :class:`PointTable` (owner's mode: whole-input problems raise)."""
    tally = InputTally(label=input_label(src), columns=_columns(src))
    xs, ys, ps = [], [], []
    for b in src.batches():
        tally.add(b)
        xs.append(b.x)
        ys.append(b.y)
        if b.person is not None:
            ps.append(b.person)
    problems = tally.problems()
    if problems:
        raise DataError(for_owner(problems[0]))
    person = None
    if src.has_person:
        person = np.concatenate(ps) if ps else np.zeros(0, dtype=object)
    return PointTable(np.concatenate(xs) if xs else np.zeros(0), np.concatenate(ys) if ys else np.zeros(0),
                      src.crs, tally.n_read, tally.n_dropped, str(src.label), person, dict(tally.drops))


def points_from_frame(gdf, *, input_crs=None, person=None) -> PointTable:
    """Coordinates from a GeoDataFrame/GeoSeries of points (``person``: a column name)."""
    return table_from_source(frame_source(gdf, input_crs=input_crs, person=person))


def _finish_table(xs, ys, crs, n_read, source, person=None) -> PointTable:
    """Drop rows without finite coordinates (or without a person id) and count them."""
    b = finish_batch(np.asarray(xs, float), np.asarray(ys, float), n_read, crs, person=person)
    n_drop = int(sum(b.drops.values())) + int(n_read - np.asarray(xs).size)
    return PointTable(b.x, b.y, crs, int(n_read), n_drop, source, b.person, b.drops)
