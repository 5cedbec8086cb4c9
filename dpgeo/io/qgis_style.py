"""The QGIS style a GeoPackage carries: a map series that QGIS's temporal controller animates.

QGIS keeps a layer's default style in the GeoPackage's ``layer_styles`` table
(QML text, ``useAsDefault`` = 1) and applies it when the layer is added to a
project. For a series (:mod:`dpgeo.series`) dpgeo writes one there with

* the temporal properties (QGIS 3.22 stores them in the QML's ``<temporal>``
  element): *active*, start and end from the expressions
  ``to_datetime("period_start")`` and ``to_datetime("period_end")``
  (``mode="4"``), the end excluded (``limitMode="0"``), so the temporal
  controller shows each period's features in its own frame. Not the plain
  field mode (``mode="2"``): QGIS compiles a comparison of a field with a
  time into SQL on the GeoPackage's ISO 8601 text, which orders
  ``2017-04-01T05:00:00.000Z`` after ``2017-04-01 05:00:00``, and the end of
  one period is the start of the next, so each frame would also show the
  period before. An expression is evaluated by QGIS itself, on times;
* the cluster style of the QGIS plugin and the web map: categorised on
  ``cluster_id`` with the library's palette (:mod:`dpgeo.io.palette`), so a
  cluster keeps its colour through the periods.

This is text written with the standard library; QGIS itself is not needed.
The table is the one QGIS creates (same columns), registered in
``gpkg_contents`` as attributes, as GDAL and QGIS do.

Examples
--------
>>> import geopandas as gpd, shapely
>>> g = gpd.GeoDataFrame({"cluster_id": [1, 2], "period_start": [0, 0], "period_end": [1, 1]},
...                      geometry=[shapely.box(0, 0, 1, 1)] * 2)
>>> qml = series_qml(g)
>>> '<temporal enabled="1" mode="4" startField="period_start" endField="period_end"' in qml
True
>>> 'to_datetime("period_start")' in qml  # expressions: the fields compared as text misfire
True
"""

from __future__ import annotations

import contextlib
import sqlite3
from xml.sax.saxutils import quoteattr

from . import palette

__all__ = ["series_qml", "add_default_style", "is_series_layer", "STYLE_NAME", "START_EXPRESSION", "END_EXPRESSION"]

#: The name of the style dpgeo stores (QGIS lists it in the layer's style manager).
STYLE_NAME = "dpgeo series"
#: The start and end of a feature's period for QGIS's temporal controller (evaluated by QGIS, not compiled to SQL).
START_EXPRESSION = 'to_datetime("period_start")'
END_EXPRESSION = 'to_datetime("period_end")'


def is_series_layer(gdf) -> bool:
    """Whether a layer is a map series (it has ``period_start`` and ``period_end``)."""
    return "period_start" in gdf.columns and "period_end" in gdf.columns


def _rgba(hex_colour, alpha):
    r, g, b = palette.hex_to_rgb(hex_colour)
    return f"{r},{g},{b},{alpha}"


def _fill_symbol(name, i):
    props = {
        "color": _rgba(palette.CLUSTER_COLOURS[i], palette.FILL_ALPHA),
        "outline_color": _rgba(palette.OUTLINE_COLOURS[i], 255),
        "outline_width": f"{palette.OUTLINE_WIDTH_MM:g}",
        "outline_width_unit": "MM",
        "outline_style": "solid",
        "style": "solid",
        "joinstyle": "bevel",
    }
    body = "".join(f"<prop k={quoteattr(k)} v={quoteattr(v)}/>" for k, v in props.items())
    return (f'<symbol type="fill" name={quoteattr(str(name))} alpha="1" clip_to_extent="1" force_rhr="0">'
            f'<layer class="SimpleFill" enabled="1" pass="0" locked="0">{body}</layer></symbol>')


def series_qml(gdf) -> str:
    """The QML of a series layer's default style: temporal properties on, clusters coloured as everywhere else."""
    temporal = ('<temporal enabled="1" mode="4" startField="period_start" endField="period_end" '
                f'startExpression={quoteattr(START_EXPRESSION)} endExpression={quoteattr(END_EXPRESSION)} '
                'durationField="" durationUnit="min" fixedDuration="0" accumulate="0" limitMode="0">'
                '<fixedRange><start></start><end></end></fixedRange></temporal>')
    renderer = ""
    categories = "Temporal"
    if "cluster_id" in gdf.columns and len(gdf):
        ids = sorted({int(v) for v in gdf["cluster_id"].dropna()})
        idx = palette.colour_index(ids).tolist() if ids else []
        cats = "".join(f'<category render="true" symbol="{n}" value="{v}" label="cluster {v}"/>'
                       for n, v in enumerate(ids))
        symbols = "".join(_fill_symbol(n, i) for n, i in enumerate(idx))
        renderer = (f'<renderer-v2 type="categorizedSymbol" attr="cluster_id" symbollevels="0" enableorderby="0" '
                    f'forceraster="0"><categories>{cats}</categories><symbols>{symbols}</symbols>'
                    f'<source-symbol>{_fill_symbol(0, 0)}</source-symbol></renderer-v2>')
        categories = "Symbology|Temporal"
    return ("<!DOCTYPE qgis PUBLIC 'http://mrcc.com/qgis.dtd' 'SYSTEM'>\n"
            f'<qgis version="3.22.0" styleCategories="{categories}">{renderer}{temporal}</qgis>\n')


_LAYER_STYLES = """CREATE TABLE IF NOT EXISTS layer_styles (
    id INTEGER PRIMARY KEY AUTOINCREMENT, f_table_catalog TEXT(256), f_table_schema TEXT(256),
    f_table_name TEXT(256), f_geometry_column TEXT(256), styleName TEXT(30), styleQML TEXT, styleSLD TEXT,
    useAsDefault BOOLEAN, description TEXT, owner TEXT(30), ui TEXT(30), update_time DATETIME)"""


def add_default_style(path, layer, geometry_column, qml, *, stamp, description="") -> None:
    """Store ``qml`` as the default style of ``layer`` in the GeoPackage ``path`` (``layer_styles``).

    ``stamp`` is the time written as the style's ``update_time`` (the release's day, never a time of day).
    """
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        if geometry_column is None:
            row = conn.execute("SELECT column_name FROM gpkg_geometry_columns WHERE table_name = ?",
                               (layer,)).fetchone()
            geometry_column = row[0] if row else "geom"
        conn.execute(_LAYER_STYLES)
        registered = conn.execute("SELECT 1 FROM gpkg_contents WHERE table_name = 'layer_styles'").fetchone()
        if not registered:
            conn.execute("INSERT INTO gpkg_contents (table_name, data_type, identifier, description, last_change) "
                         "VALUES ('layer_styles', 'attributes', 'layer_styles', '', ?)", (stamp,))
        conn.execute("UPDATE layer_styles SET useAsDefault = 0 WHERE f_table_name = ?", (layer,))
        conn.execute("INSERT INTO layer_styles (f_table_catalog, f_table_schema, f_table_name, f_geometry_column, "
                     "styleName, styleQML, styleSLD, useAsDefault, description, owner, ui, update_time) "
                     "VALUES ('', '', ?, ?, ?, ?, '', 1, ?, '', '', ?)",
                     (layer, geometry_column, STYLE_NAME, qml, description, stamp))
