"""Writing cluster layers with their privacy metadata, and reading the metadata back.

Output: GeoPackage (metadata in the ``gpkg_metadata`` table and the layer
description), GeoJSON (RFC 7946: EPSG:4326 lon/lat, counter-clockwise
exteriors, the metadata in a top-level foreign member ``"dpgeo"``), a
self-contained HTML map (:mod:`dpgeo.io.html`) or a PNG picture
(:mod:`dpgeo.io.png`), chosen by the file's extension. Every write goes to a
temporary file in the target folder that is renamed into place, so a
failure never leaves a partial file.
"""

from __future__ import annotations

import json
import os

import numpy as np
from pyproj import CRS

from ..errors import InputError, OutputError
from .._dates import today
from ..formats import check_readable, output_driver, pick_engine, short_error, special_file_kind
from .atomic import _write_text, atomic_write
from .geojson import METADATA_MEMBER, geojson_collection

__all__ = ["write_layer", "check_output", "read_layer_metadata", "read_levels_layer", "geojson_collection",
           "atomic_write", "METADATA_MEMBER", "GPKG_VERSION"]

#: GeoPackage version of every GeoPackage dpgeo writes: 1.3, which QGIS 3.22 and GDAL before 3.7 read without
#: a warning (1.4 files have the same tables; only the header's version differs).
GPKG_VERSION = "1.3"


def write_layer(gdf, path, metadata: dict, *, driver=None, crs=None, layer=None, engine="auto",
                basemap="osm", attribution=None, title=None, levels=None, replace=False) -> str:
    """Write a cluster layer atomically, with its metadata.

    Parameters
    ----------
    gdf : geopandas.GeoDataFrame
        The cluster layer (any CRS).
    path : str or os.PathLike
    metadata : dict
        JSON-serialisable privacy metadata.
    driver : {"GPKG", "GeoJSON", "HTML", "PNG"}, optional
        Default from the extension (``.gpkg``, ``.geojson``/``.json``,
        ``.html``/``.htm``, ``.png``).
    crs : optional
        Output CRS for a GeoPackage (default: the layer's) or the CRS a PNG
        is drawn in (default: the layer's). GeoJSON and HTML are always
        EPSG:4326 (RFC 7946); asking for another CRS is an error.
    layer : str, optional
        GeoPackage layer name (default: the file's stem).
    engine : {"auto", "pyogrio", "fiona"}, default "auto"
        GDAL binding that writes a GeoPackage (``"auto"``: pyogrio if
        installed, else fiona); both write the same layer, options and
        metadata. The other formats are written without one.
    basemap : str or None
        HTML only: the tiles under the clusters. ``"osm"`` (default):
        OpenStreetMap's standard tiles with their attribution; ``"none"`` (or
        None): no basemap, and the page requests nothing from any host; or an
        XYZ tile URL template (``https://.../{z}/{x}/{y}.png``).
    attribution : str, optional
        HTML only: the attribution text of a URL template's tiles (shown escaped).
    title : str, optional
        HTML and PNG: the map's title and heading (default: the mechanism).
    levels : geopandas.GeoDataFrame, optional
        A second layer of the same release (the tree of density levels of
        spans without a radius): a GeoPackage gets it as the layer
        ``<layer>_levels`` in the same file; a GeoJSON file gets a sibling
        ``<stem>_levels.geojson`` (with the same metadata); an HTML map gets a
        switch between the map and its levels; a PNG draws the levels.
    replace : bool
        A PostGIS target (``postgresql://...?table=NAME``, :mod:`dpgeo.io.postgis`): replace a table that
        exists (default: refuse). Files are always replaced, atomically.

    Returns
    -------
    str
        The path written.

    Raises
    ------
    OutputError
        Bad driver or folder, the engine asked for is not installed, the
        write failed (then no file is left behind), or the metadata says
        ``publishable: false`` (the comparison systems that are not
        differentially private, e.g. EPP-KM and DiffHWT).
    ParameterError
        Unknown ``engine``.
    """
    if metadata.get("publishable") is False:
        raise OutputError(
            f"{metadata.get('mechanism') or 'this result'} is NOT differentially private ("
            + "; ".join(metadata.get("not_private_reasons") or ["see its metadata"])
            + "); it cannot be written as a publishable layer")
    path = os.fspath(path)
    drv, eng = check_output(path, driver=driver, crs=crs, engine=engine, basemap=basemap, attribution=attribution)
    if drv == "PostGIS":
        from .postgis import write_postgis

        return write_postgis(gdf, path, metadata, crs=crs, replace=replace, levels=levels)
    if drv == "GeoJSON":
        payload = json.dumps(geojson_collection(gdf, metadata), separators=(",", ":"), allow_nan=False)
        if levels is not None:
            side = os.path.splitext(path)[0] + "_levels.geojson"
            lv = json.dumps(geojson_collection(levels, {**metadata, "layer": "levels"}), separators=(",", ":"),
                            allow_nan=False)
            atomic_write(side, lambda tmp: _write_text(tmp, lv))
        atomic_write(path, lambda tmp: _write_text(tmp, payload))
    elif drv == "HTML":
        from .html import write_html

        write_html(gdf, path, metadata, basemap=basemap, attribution=attribution, title=title, levels=levels)
    elif drv == "PNG":
        from .png import write_png

        write_png(gdf, path, metadata, crs=crs, title=title, levels=levels)
    else:
        out = gdf if crs is None else gdf.to_crs(crs)
        if crs is not None and out.crs is not None and out.crs.is_geographic:  # no polygon across the world
            from .geojson import split_antimeridian

            out = out.set_geometry(split_antimeridian(np.asarray(out.geometry.values)), crs=out.crs)
        name = layer or os.path.splitext(os.path.basename(path))[0]
        meta_json = json.dumps(metadata, separators=(",", ":"))
        summary = (
            f"dpgeo {metadata.get('mechanism', '')} layer; differentially_private="
            f"{str(metadata.get('differentially_private')).lower()}; epsilon={metadata.get('epsilon')}"
        )

        # GDAL layer metadata (the gpkg_metadata table) and gpkg_contents description/identifier
        tags = {METADATA_MEMBER: meta_json,
                "DIFFERENTIALLY_PRIVATE": str(bool(metadata.get("differentially_private"))).upper()}
        options = {"DESCRIPTION": summary, "IDENTIFIER": name}
        dataset_options = {"VERSION": GPKG_VERSION}  # QGIS 3.22 (GDAL before 3.7) warns on 1.4 files

        # GDAL stamps gpkg_contents.last_change with the time to the millisecond, which would tell how long
        # the run took; OGR_CURRENT_DATE makes it the release's day (as in the metadata), at 00:00 UTC
        stamp = today() + "T00:00:00.000Z"

        def _w(tmp):
            if eng == "fiona":
                import warnings

                import fiona

                with warnings.catch_warnings(), fiona.Env(OGR_CURRENT_DATE=stamp):
                    # an empty layer (no cluster) is a valid result
                    warnings.filterwarnings("ignore", "You are attempting to write an empty DataFrame")
                    # fiona passes extra keywords on as creation options and sets the tags as layer metadata
                    out.to_file(tmp, driver="GPKG", engine="fiona", layer=name, metadata=tags, **options,
                                **dataset_options)
            else:
                import pyogrio

                pyogrio.set_gdal_config_options({"OGR_CURRENT_DATE": stamp})
                try:
                    pyogrio.write_dataframe(out, tmp, layer=name, driver="GPKG", layer_metadata=tags,
                                            layer_options=options, dataset_options=dataset_options)
                finally:
                    pyogrio.set_gdal_config_options({"OGR_CURRENT_DATE": None})
            from .qgis_style import add_default_style, is_series_layer, layer_qml

            # the layer's style, which QGIS applies as it is opened (a series: animated by the temporal controller)
            add_default_style(tmp, name, None, layer_qml(out, metadata), stamp=stamp,
                              description="dpgeo map series: one frame per period" if is_series_layer(out) else
                              "dpgeo: the colours and classes of the HTML map and the PNG")
            if levels is not None:
                lv = levels if crs is None else levels.to_crs(crs)
                _append_levels(tmp, lv, name, metadata, eng, stamp)
                add_default_style(tmp, f"{name}_levels", None, layer_qml(lv, metadata), stamp=stamp,
                                  description="dpgeo density levels")

        atomic_write(path, _w)
    return path


def _append_levels(tmp, levels, name, metadata, eng, stamp):
    """The levels layer ``<name>_levels`` added to the GeoPackage being written (the release's metadata stays
    with the main layer; this one names the release it belongs to)."""
    lname = f"{name}_levels"
    options = {"DESCRIPTION": f"dpgeo density levels of release {metadata.get('release_id')} (layer {name}): "
                              "nested clusters, parent_id points to the level below", "IDENTIFIER": lname}
    tags = {"DPGEO_LEVELS_OF": str(metadata.get("release_id"))}
    if eng == "fiona":
        import fiona

        with fiona.Env(OGR_CURRENT_DATE=stamp):
            levels.to_file(tmp, driver="GPKG", engine="fiona", layer=lname, mode="a", metadata=tags, **options)
    else:
        import pyogrio

        pyogrio.set_gdal_config_options({"OGR_CURRENT_DATE": stamp})
        try:
            pyogrio.write_dataframe(levels, tmp, layer=lname, driver="GPKG", append=True, layer_metadata=tags,
                                    layer_options=options)
        finally:
            pyogrio.set_gdal_config_options({"OGR_CURRENT_DATE": None})


def read_levels_layer(path, name=None, *, engine="auto"):
    """The levels layer stored with a release: ``<name>_levels`` in its GeoPackage, or ``<stem>_levels.geojson``
    beside its GeoJSON file; None when it is not there (the file was copied without it).

    ``name`` is the release's layer in a GeoPackage, None for a GeoJSON file.
    """
    import geopandas as gpd

    try:
        if name is not None:
            if pick_engine(engine, needed=True, write=False) == "fiona":
                import fiona

                names = set(fiona.listlayers(path))
            else:
                import pyogrio

                names = {n for n, _ in pyogrio.list_layers(path)}
            if f"{name}_levels" not in names:
                return None
            lv = gpd.read_file(path, layer=f"{name}_levels", engine=None if engine == "auto" else engine)
        else:
            side = os.path.splitext(path)[0] + "_levels.geojson"
            if not os.path.isfile(side):
                return None
            lv = gpd.read_file(side)
    except Exception:  # noqa: BLE001 - a missing or unreadable levels layer: the copy says it has none
        return None
    return lv.drop(columns="fid") if "fid" in lv.columns else lv


def check_output(path, *, driver=None, crs=None, engine="auto", basemap=None, attribution=None, title=None):
    """Check everything about an output that can be checked before any data is read.

    Takes the same arguments as :func:`write_layer` (less the layer) and
    raises what it would raise for them: an unknown format, a missing folder,
    an engine that is not installed, a CRS the format cannot hold, a basemap
    for a format that draws none or a malformed one, matplotlib missing for
    a PNG.

    Returns
    -------
    (str, str or None)
        The driver and the GDAL engine that will write the file (None when none is needed).

    Examples
    --------
    >>> check_output("map.html", basemap="https://tile.example.org/{z}/{x}/{y}.png")
    ('HTML', None)
    """
    path = os.fspath(path)
    drv = output_driver(path, driver)
    if drv == "PostGIS":  # a table in a database: checked without connecting (see check_postgis_output)
        return _check_postgis(path, crs, basemap, attribution), None
    eng = pick_engine(engine, needed=drv == "GPKG", write=True)
    if (_chosen_basemap(basemap) or attribution is not None) and drv != "HTML":
        raise OutputError(f"a basemap is drawn only on an HTML map; {os.path.basename(path)!r} is {drv}: "
                          "drop the basemap options or write a .html")
    if title is not None and not isinstance(title, str):
        raise OutputError(f"title must be text, got {type(title).__name__}")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        check_readable(folder, "output folder", OutputError)  # a folder above it this user may not open
        raise OutputError(f"output folder {folder!r} does not exist: create it or write elsewhere")
    if os.path.isdir(path):
        raise OutputError(f"output {path!r} is a folder: give a file name, e.g. "
                          f"{os.path.join(path, 'clusters' + os.path.splitext(path)[1] or 'clusters.gpkg')!r}")
    _check_writable(folder)
    if crs is not None:
        try:
            c = CRS.from_user_input(crs)
        except Exception as exc:
            raise OutputError(f"output CRS {crs!r} is not a CRS pyproj knows: {short_error(exc)}") from None
        if drv in ("GeoJSON", "HTML") and not c.equals(CRS.from_epsg(4326), ignore_axis_order=True):
            raise OutputError(f"{drv} output is always EPSG:4326 (RFC 7946); drop --out-crs or write a .gpkg")
    if drv == "HTML":
        from .basemap import basemap_config

        basemap_config(basemap, attribution)
    if drv == "PNG":
        from .png import require_matplotlib

        require_matplotlib()
    return drv, eng


def _check_postgis(path, crs, basemap, attribution):
    from .postgis import _target

    _target(path)
    if _chosen_basemap(basemap) or attribution is not None:
        raise OutputError("a basemap is drawn only on an HTML map, not in a PostGIS table: drop the basemap options")
    if crs is not None:
        try:
            c = CRS.from_user_input(crs)
        except Exception as exc:
            raise OutputError(f"output CRS {crs!r} is not a CRS pyproj knows: {short_error(exc)}") from None
        if not c.to_epsg():
            raise OutputError("a PostGIS table's CRS is an SRID: give --out-crs as EPSG:NNNN")
    return "PostGIS"


def _chosen_basemap(basemap) -> bool:
    """Whether ``basemap`` asks for tiles of its own (a URL template), beyond the default and "none"."""
    return isinstance(basemap, str) and basemap.strip().lower() not in ("osm", "none")


def _check_writable(folder):
    """Create and remove a temporary file in ``folder``: the write will be possible (permissions, read-only disk)."""
    from .atomic import temporary_name

    tmp = temporary_name(folder)
    try:
        fd = os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except OSError as exc:
        raise OutputError(f"cannot write in the output folder {folder!r} ({short_error(exc)}): choose a folder "
                          "you can write to") from None
    os.close(fd)
    os.unlink(tmp)


def read_layer_metadata(path, *, engine="auto") -> dict:
    """The dpgeo metadata stored in a GeoPackage or GeoJSON written by dpgeo.

    Parameters
    ----------
    path : str or os.PathLike
        A ``.gpkg``, ``.geojson``, ``.html`` or ``.png`` written by dpgeo, or a release table in PostGIS
        (``postgresql://USER@HOST/DATABASE?table=NAME``).
    engine : {"auto", "pyogrio", "fiona"}, default "auto"
        GDAL binding that reads a GeoPackage's layer metadata; the other
        formats are read without one.

    Raises
    ------
    InputError
        No such file, not a dpgeo output, or the engine asked for is not installed.
    """
    p = os.fspath(path)
    pick_engine(engine, needed=False, write=False)  # a bad or missing engine is reported first
    from ..postgres import is_postgres

    if is_postgres(p):
        from .postgis import read_postgis_metadata

        try:  # a release table in PostGIS: postgresql://...?table=NAME
            return read_postgis_metadata(p)
        except OutputError as exc:
            raise InputError(str(exc)) from None
    check_readable(p, "file")
    if not os.path.exists(p):
        raise InputError(f"{p!r} does not exist")
    kind = special_file_kind(p)
    if kind:
        raise InputError(f"{p!r} is {kind}, not a file written by dpgeo: give the .gpkg, .geojson, .html or .png "
                         "itself")
    try:
        drv = output_driver(p)
    except OutputError:
        raise InputError(f"{p!r} is not a .gpkg, .geojson, .html or .png written by dpgeo") from None
    eng = pick_engine(engine, needed=drv == "GPKG", write=False)
    if drv == "HTML":
        from .html import read_html_metadata

        md = read_html_metadata(p)
    elif drv == "PNG":
        from .png import read_png_metadata

        md = read_png_metadata(p)
    elif drv == "GeoJSON":
        with open(p, encoding="utf-8") as f:
            try:
                doc = json.load(f)
            except json.JSONDecodeError as exc:
                raise InputError(f"{p!r} is not valid JSON: {exc}") from None
        md = doc.get(METADATA_MEMBER) if isinstance(doc, dict) else None
    else:
        try:
            text = _metadata_item(p, eng)
            md = None if text is None else json.loads(text)
        except Exception as exc:
            raise InputError(f"cannot read the metadata of {p!r}: {short_error(exc)}") from None
    if md is None:
        raise InputError(f"{p!r} has no dpgeo metadata (was it written by dpgeo?)")
    return md


def _metadata_item(path, engine):
    """The ``METADATA_MEMBER`` item of the first layer that has one (GDAL layer metadata), or None."""
    return _metadata_layer(path, engine)[1]


def _metadata_layer(path, engine):
    """(layer name, ``METADATA_MEMBER`` item) of the first GeoPackage layer that has one, or (None, None).

    A GeoPackage the QGIS plugin wrote also holds its ``layer_styles`` table, which GDAL lists as a layer.
    """
    if engine == "fiona":
        import fiona

        with fiona.Env():
            for name in fiona.listlayers(path):
                with fiona.open(path, layer=name) as src:
                    tags = src.tags() or {}
                if METADATA_MEMBER in tags:
                    return name, tags[METADATA_MEMBER]
        return None, None
    import pyogrio

    for name, _ in pyogrio.list_layers(path):
        tags = pyogrio.read_info(path, layer=name).get("layer_metadata") or {}
        if METADATA_MEMBER in tags:
            return name, tags[METADATA_MEMBER]
    return None, None
