"""Opening any accepted point input as a :class:`~dpgeo.counting.sources.PointSource`.

:func:`open_points` looks at an input's structure only (files, layers,
columns, CRS) and returns the source that the counting step reads batch by
batch; :class:`PointFile` describes a file to open later (front ends pass it
so that the privacy-budget charge comes before anything is opened).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from ..errors import DataError, InputError
from .decode import resolve_crs
from .sources import DEFAULT_BATCH_ROWS, MemorySource, PointSource, PointTable, expand_paths

__all__ = ["PointFile", "open_points", "frame_source"]


@dataclass(frozen=True)
class PointFile:
    """A point file and how to read it — opened only when a run gets to its counting step.

    Front ends describe their input this way instead of opening it first, so
    that every public check and the privacy-budget charge come before any
    private record is read (and a refused run reads nothing).
    ``os.fspath`` gives the file's path; :func:`open_points` opens it.

    Attributes
    ----------
    path : str
    layer, x, y, input_crs, person, engine, quoted_newlines
        As for :func:`open_points`.
    """

    path: str
    layer: str | None = None
    x: str | None = None
    y: str | None = None
    input_crs: object = None
    person: str | None = None
    engine: str = "auto"
    quoted_newlines: bool = False

    def __fspath__(self) -> str:
        return os.fspath(self.path)

    def open(self, *, input_crs=None, person=None, batch_rows=DEFAULT_BATCH_ROWS, time=None) -> PointSource:
        """The :class:`PointSource` (reads the file's structure, no record)."""
        return open_points(self.path, layer=self.layer, x=self.x, y=self.y,
                           input_crs=self.input_crs if input_crs is None else input_crs,
                           person=self.person if person is None else person, engine=self.engine,
                           batch_rows=batch_rows, time=time, quoted_newlines=self.quoted_newlines)


def open_points(points, *, layer=None, x=None, y=None, input_crs=None, person=None, engine="auto",
                batch_rows=DEFAULT_BATCH_ROWS, time=None, times=None, quoted_newlines=False) -> PointSource:
    """The :class:`PointSource` of any accepted point input, checked from its structure alone.

    Parameters
    ----------
    points : str, os.PathLike, PostgisInput, GeoDataFrame, GeoSeries, (x, y, crs) tuple, PointTable, PointSource or Dask DataFrame
        A file (GeoPackage, GeoJSON, Shapefile, FlatGeobuf, ... through GDAL;
        GeoParquet or plain Parquet; CSV, also ``.csv.gz``), a glob of files
        (``"data/*.parquet"``), a folder of Parquet files (hive partitions
        such as ``year=2024/`` included), points in memory, or a
        ``dask.dataframe.DataFrame`` with coordinate columns /
        ``dask_geopandas.GeoDataFrame`` (counted partition by partition), or a PostGIS table or query
        (:func:`dpgeo.postgis`, or a ``postgresql://...?table=NAME`` URL).
    layer : str, optional
        Layer of a multi-layer file (required when it has several).
    x, y : str, optional
        Coordinate columns of a table (CSV, Parquet). By default
        ``lon/lng/longitude`` and ``lat/latitude`` (EPSG:4326) or
        ``x/easting`` and ``y/northing`` (give ``input_crs``) are found by name.
    input_crs : optional
        CRS of an input that declares none.
    person : str or array_like, optional
        Person column (files, frames) or identifiers aligned with a tuple's
        coordinates.
    engine : {"auto", "pyogrio", "fiona"}
        GDAL binding for GDAL formats.
    batch_rows : int
        Records per batch.
    time : TimeSpec, optional
        For a series: the time column (of a file or frame) and the public periods
        (:class:`~dpgeo.counting.times.TimeSpec`); every batch then carries the
        period of each point.
    times : array_like, optional
        With ``time`` and points in memory (``(x, y, crs)`` arrays, a PointTable): the time of each point.
    quoted_newlines : bool
        CSV only: the file has line breaks inside quoted fields, so a record
        follows its quotes across lines. By default a record is one physical
        line, and a line that leaves a quote open is dropped alone (counted
        as ``malformed_row``); with this option one field that opens a quote
        and never closes it swallows the lines after it, up to the end of
        its block of 48 MiB. Give it only for an export that needs it.

    Raises
    ------
    InputError
        The file does not exist or has the wrong structure (missing or
        duplicate columns, no geometry column, a declared geometry type that
        is not points, a missing or contradictory CRS, several layers and no
        ``layer``).
    """
    from ..formats import is_csv, is_parquet, pick_engine

    if isinstance(points, PointFile):
        return points.open(input_crs=input_crs, person=person, batch_rows=batch_rows, time=time)
    from .postgis import PostgisInput

    if isinstance(points, PostgisInput):  # a PostGIS table or query (dpgeo.postgis)
        return points.open(input_crs=input_crs, person=person, batch_rows=batch_rows, time=time)
    from ..postgres import is_postgres

    if isinstance(points, str) and is_postgres(points):
        from .postgis import postgis

        return postgis(points, input_crs=input_crs).open(person=person, batch_rows=batch_rows, time=time)
    if isinstance(points, PointSource):
        if isinstance(person, str) and points.person != person:
            raise InputError(f"the point source was opened without the person column {person!r}; "
                             "open it with person=...")
        if time is not None and points.time != time:
            raise InputError("the point source was opened without the series' time column and periods; open it "
                             "with time=... or pass the file itself")
        return points
    if isinstance(points, PointTable):
        if person is not None and points.person is None:
            raise InputError("the PointTable was read without a person column; read it with person=...")
        return MemorySource(points.x, points.y, points.crs, person=points.person if person is not None else None,
                            n_read=points.n_read, drops=points.drops or ({"non_finite": points.n_dropped}
                                                                         if points.n_dropped else {}),
                            label="the PointTable", batch_rows=batch_rows,
                            person_name=person if isinstance(person, str) else None, time=time, times=times)
    if isinstance(points, (str, bytes)) or hasattr(points, "__fspath__"):
        if isinstance(points, bytes):
            points = os.fsdecode(points)
        if person is not None and not isinstance(person, str):
            raise InputError("for a file, person must be the name of its person column")
        files, label = expand_paths(points)
        if all(is_parquet(f) for f in files) or (len(files) > 1 and not any(is_csv(f) for f in files)
                                                  and os.path.isdir(os.fspath(points))):
            pick_engine(engine, needed=False, write=False)
            from .tables import ParquetSource

            return ParquetSource(files, label=label, x=x, y=y, input_crs=input_crs, person=person,
                                 batch_rows=batch_rows, time=time)
        if all(is_csv(f) for f in files):
            pick_engine(engine, needed=False, write=False)
            from .tables import CsvSource

            return CsvSource(files, label=label, x=x, y=y, input_crs=input_crs, person=person,
                             batch_rows=batch_rows, time=time, quoted_newlines=quoted_newlines)
        if any(is_csv(f) or is_parquet(f) for f in files):
            raise InputError(f"{label!r} mixes table files (CSV/Parquet) with other files; give one kind")
        if x is not None or y is not None:
            raise InputError(f"--x/--y name the coordinate columns of a CSV or Parquet table, and "
                             f"{os.path.basename(files[0])} is neither: its points are read from its geometry "
                             "column (drop --x/--y, or save the table as CSV or Parquet)")
        eng = pick_engine(engine, needed=True, write=False)
        from .layers import FionaSource, GdalSource

        cls = FionaSource if eng == "fiona" else GdalSource
        return cls(files, label=label, layer=layer, input_crs=input_crs, person=person, batch_rows=batch_rows,
                   time=time)
    from .dask import DaskFrameSource, is_dask_collection

    if is_dask_collection(points):
        return DaskFrameSource(points, x=x, y=y, input_crs=input_crs, person=person, batch_rows=batch_rows,
                               time=time)
    if hasattr(points, "crs") and (hasattr(points, "geometry") or type(points).__name__ == "GeoSeries"):
        from .inputs import frame_source

        return frame_source(points, input_crs=input_crs, person=person, batch_rows=batch_rows, time=time,
                            times=times)
    if isinstance(points, tuple) and len(points) == 3:
        px, py, crs = points
        crs = resolve_crs(crs, input_crs, "the coordinate arrays")
        from .decode import numbers_of

        px, xbad = numbers_of(px)
        py, ybad = numbers_of(py)
        if px.shape != py.shape:
            raise InputError(f"x and y must have the same length, got {px.size} and {py.size}")
        if px.size == 0:
            raise DataError("the point arrays are empty")
        if isinstance(person, str):
            raise InputError("for (x, y, crs) arrays, person must be an array of identifiers, not a column name")
        bad = None if xbad is None and ybad is None else \
            (np.zeros(px.size, bool) if xbad is None else xbad) | (np.zeros(py.size, bool) if ybad is None else ybad)
        return MemorySource(px, py, crs, person=person, label="the point arrays", batch_rows=batch_rows, time=time,
                            times=times, valid=None if bad is None else ~bad,
                            drops={"unparsed": int(bad.sum())} if bad is not None and bad.any() else None)
    raise InputError(
        "points must be a GeoDataFrame/GeoSeries of points, a file path, or a tuple (x, y, crs); "
        f"got {type(points).__name__}"
    )


def frame_source(gdf, *, input_crs=None, person=None, batch_rows=DEFAULT_BATCH_ROWS, time=None,
                 times=None) -> MemorySource:
    """A GeoDataFrame/GeoSeries of points as a :class:`MemorySource` (its geometries decoded once).

    For a series, ``time.column`` names the frame's time column (or ``times`` gives the times).
    """
    import shapely

    from .decode import decode_wkb

    geoms = np.asarray(gdf.geometry.values if hasattr(gdf, "geometry") else gdf.values)
    crs = resolve_crs(gdf.crs, input_crs, "the GeoDataFrame")
    n = len(geoms)
    if n == 0:
        raise DataError("the point layer has no records")
    pers = None
    if person is not None:
        if not isinstance(person, str):
            raise InputError("for a GeoDataFrame, person must be the name of its person column")
        if not hasattr(gdf, "columns") or person not in gdf.columns:
            raise InputError(f"person column {person!r} is not in the layer")
        from .decode import person_from_arrow
        from .values import arrow_of

        pers, pers_null = person_from_arrow(arrow_of(gdf[person]))  # an unhashable value: that record's, as text
    import pyarrow as pa

    wkb = pa.array(shapely.to_wkb(geoms), type=pa.binary())
    x, y, valid, drops, kinds = decode_wkb(wkb)
    if time is not None and time.column is not None:
        if not hasattr(gdf, "columns") or time.column not in gdf.columns:
            raise InputError(f"time column {time.column!r} is not in the layer")
        times = gdf[time.column]
    return MemorySource(x, y, crs, person=pers, person_null=None if pers is None else pers_null, drops=drops,
                        valid=valid, kinds=kinds, label="the point layer",
                        batch_rows=batch_rows, person_name=person, time=time, times=times)
