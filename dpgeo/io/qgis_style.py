"""The QGIS style every GeoPackage layer dpgeo writes carries (the QGIS plugin applies the same).

QGIS keeps a layer's default style in the GeoPackage's ``layer_styles`` table
(QML text, ``useAsDefault`` = 1) and applies it when the layer is added to a
project. :func:`layer_qml` builds it from the layer itself, by what it holds:

* clusters (``cluster_id``): categorised, one colour per cluster, neighbours
  in different colours (:func:`dpgeo.io.palette.colour_index`), labelled
  with ``dp_count``;
* count cells (``dp_count`` only): graduated on ``dp_count`` in the classes of
  :func:`dpgeo.io.palette.count_classes`;
* density bands (``band``): categorised, light to dark;
* hot spots (``gi_bin``): the seven hot-spot classes;
* density levels (``level``): graduated, drawn shallowest first (``depth``);

the same colours, classes and legends as the HTML map and the PNG. A map
series (:mod:`dpgeo.series`) also gets

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
* its style as above; a cluster keeps its colour through the periods.

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

import numpy as np

from . import palette

__all__ = ["layer_qml", "layer_kind", "series_qml", "add_default_style", "is_series_layer", "STYLE_NAME",
           "START_EXPRESSION", "END_EXPRESSION"]

#: The name of the style dpgeo stores (QGIS lists it in the layer's style manager).
STYLE_NAME = "dpgeo"
#: The start and end of a feature's period for QGIS's temporal controller (evaluated by QGIS, not compiled to SQL).
START_EXPRESSION = 'to_datetime("period_start")'
END_EXPRESSION = 'to_datetime("period_end")'


def is_series_layer(gdf) -> bool:
    """Whether a layer is a map series (it has ``period_start`` and ``period_end``)."""
    return "period_start" in gdf.columns and "period_end" in gdf.columns


def _rgba(hex_colour, alpha):
    r, g, b = palette.hex_to_rgb(hex_colour)
    return f"{r},{g},{b},{alpha}"


def _fill_symbol(name, fill, outline, alpha, width_mm):
    props = {
        "color": _rgba(fill, alpha),
        "outline_color": _rgba(outline, 255),
        "outline_width": f"{width_mm:g}",
        "outline_width_unit": "MM",
        "outline_style": "solid",
        "style": "solid",
        "joinstyle": "bevel",
    }
    body = "".join(f"<prop k={quoteattr(k)} v={quoteattr(v)}/>" for k, v in props.items())
    return (f'<symbol type="fill" name={quoteattr(str(name))} alpha="1" clip_to_extent="1" force_rhr="0">'
            f'<layer class="SimpleFill" enabled="1" pass="0" locked="0">{body}</layer></symbol>')


def _cluster_symbol(name, i):
    return _fill_symbol(name, palette.CLUSTER_COLOURS[i], palette.OUTLINE_COLOURS[i], palette.FILL_ALPHA,
                        palette.OUTLINE_WIDTH_MM)


def _cell_symbol(name, fill):
    return _fill_symbol(name, fill, palette._darker(fill), palette.CELL_FILL_ALPHA, palette.CELL_OUTLINE_WIDTH_MM)


def _level_symbol(name, c):
    return _fill_symbol(name, palette.LEVEL_COLOURS[c], palette.LEVEL_OUTLINE_COLOURS[c], palette.LEVEL_FILL_ALPHA,
                        palette.OUTLINE_WIDTH_MM * 0.75)


def _categorised(attr, cats, source, order_by=None):
    """A categorised renderer: ``cats`` is a list of ``(value, label, symbol xml)``."""
    c = "".join(f'<category render="true" symbol="{n}" value={quoteattr(str(v))} label={quoteattr(lab)}/>'
                for n, (v, lab, _) in enumerate(cats))
    sym = "".join(x for _, _, x in cats)
    return (f'<renderer-v2 type="categorizedSymbol" attr={quoteattr(attr)} symbollevels="0" '
            f'{_order(order_by)} forceraster="0"><categories>{c}</categories><symbols>{sym}</symbols>'
            f'<source-symbol>{source}</source-symbol>{_order_clause(order_by)}</renderer-v2>')


def _graduated(attr, ranges, source, order_by=None):
    """A graduated renderer: ``ranges`` is a list of ``(lower, upper, label, symbol xml)``."""
    r = "".join(f'<range render="true" symbol="{n}" lower="{lo!r}" upper="{hi!r}" label={quoteattr(lab)}/>'
                for n, (lo, hi, lab, _) in enumerate(ranges))
    sym = "".join(x for *_, x in ranges)
    return (f'<renderer-v2 type="graduatedSymbol" attr={quoteattr(attr)} graduatedMethod="GraduatedColor" '
            f'symbollevels="0" {_order(order_by)} forceraster="0"><ranges>{r}</ranges><symbols>{sym}</symbols>'
            f'<source-symbol>{source}</source-symbol><mode name="manual"/>{_order_clause(order_by)}</renderer-v2>')


def _order(order_by):
    return f'enableorderby="{1 if order_by else 0}"'


def _order_clause(order_by):
    if not order_by:
        return ""
    return f'<orderby><orderByClause asc="1" nullsFirst="0">"{order_by}"</orderByClause></orderby>'


_LABELS = ('<labeling type="simple"><settings calloutType="simple"><text-style fieldName="dp_count" isExpression="0" '
           'fontSize="9" fontSizeUnit="Point" fontWeight="75" fontItalic="0" textColor="32,32,32,255" '
           'textOpacity="1" multilineHeight="1" blendMode="0" previewBkgrdColor="255,255,255,255">'
           '<text-buffer bufferDraw="1" bufferSize="1" bufferSizeUnits="MM" bufferColor="255,255,255,220" '
           'bufferOpacity="1" bufferNoFill="1" bufferJoinStyle="128" bufferBlendMode="0"/></text-style>'
           '<text-format wrapChar="" multilineAlign="3" formatNumbers="0" decimals="3" plussign="0"/>'
           '<placement placement="1" centroidInside="1" centroidWhole="0" priority="5" dist="0" '
           'placementFlags="10" overrunDistance="0" overrunDistanceUnit="MM"/>'
           '<rendering obstacle="1" obstacleType="1" displayAll="0" upsidedownLabels="0" labelPerPart="0" '
           'mergeLines="0" drawLabels="1" scaleVisibility="0" fontLimitPixelSize="0" limitNumLabels="0" '
           'zIndex="0"/></settings></labeling>')


def layer_kind(gdf) -> str:
    """What a layer holds (:func:`dpgeo.io.palette.layer_kind`)."""
    return palette.layer_kind(gdf)


def _renderer(gdf, metadata):
    """(renderer xml, labels xml) of a layer (:func:`layer_kind`), with the library's colours and classes."""
    kind = layer_kind(gdf)
    n = len(gdf)
    if kind == "hotspots":
        cats = [(k, palette.HOTSPOT_LABELS[k], _cell_symbol(j, palette.HOTSPOT_COLOURS[k]))
                for j, k in enumerate(range(3, -4, -1))]
        return _categorised("gi_bin", cats, _cell_symbol(0, palette.HOTSPOT_COLOURS[0])), ""
    if kind == "levels":
        _, classes = palette.level_classes(gdf["level"].to_numpy(dtype=float)) if n else (None, [])
        ranges = [(lo, hi, f"{lo:g}" if lo == hi else f"{lo:g} – {hi:g}", _level_symbol(j, c))
                  for j, (lo, hi, c) in enumerate(classes)]
        order = "depth" if "depth" in gdf.columns else None  # the deeper (denser) drawn over the shallower
        return _graduated("level", ranges, _level_symbol(0, 0), order), ""
    if kind == "clusters":
        if "cluster_id" not in gdf.columns:
            return "", ""
        fills, _, idx, *_ = palette.layer_style(gdf, metadata) if n else (None, None, [])
        colour = {}  # an empty release keeps the style: categorised, labelled, no category yet
        for v, i in zip(gdf["cluster_id"].tolist() if n else [], np.asarray(idx).tolist()):
            if v is not None and v == v:
                colour.setdefault(int(v), int(i))
        cats = [(v, f"cluster {v}", _cluster_symbol(j, colour[v])) for j, v in enumerate(sorted(colour))]
        return _categorised("cluster_id", cats, _cluster_symbol(0, 0)), (_LABELS if "dp_count" in gdf.columns else "")
    fills, _, idx, legend, title, note = palette.layer_style(gdf, metadata)
    if kind == "bands":
        bands = sorted({int(b) for b in gdf["band"]})
        colour = palette.band_colour(bands, max(bands) if bands else 1).tolist()
        labels = {int(b): lab for b, (_, lab) in zip(gdf["band"], legend[::-1])}
        cats = [(b, labels.get(b, f"band {b}"), _cell_symbol(j, fills[c])) for j, (b, c) in enumerate(zip(bands,
                                                                                                     colour))]
        return _categorised("band", cats, _cell_symbol(0, fills[0])), ""
    c = palette.count_classes(gdf["dp_count"].to_numpy() if n else [],
                              noise_halfwidth=palette.count_noise_halfwidth(gdf))
    colour = palette.band_colour(np.arange(1, len(c.lower) + 1), len(c.lower)).tolist() if len(c.lower) else []
    # integer classes lower ≤ v ≤ upper; QGIS ranges include their upper end
    ranges = [(lo - 0.5, hi + 0.5, f"{lo:,}" if lo == hi else f"{lo:,} – {hi:,}", _cell_symbol(j, fills[k]))
              for j, (lo, hi, k) in enumerate(zip(c.lower.tolist(), c.upper.tolist(), colour))]
    return _graduated("dp_count", ranges, _cell_symbol(0, fills[0])), ""


_TEMPORAL = ('<temporal enabled="1" mode="4" startField="period_start" endField="period_end" '
             f'startExpression={quoteattr(START_EXPRESSION)} endExpression={quoteattr(END_EXPRESSION)} '
             'durationField="" durationUnit="min" fixedDuration="0" accumulate="0" limitMode="0">'
             '<fixedRange><start></start><end></end></fixedRange></temporal>')


def layer_qml(gdf, metadata=None) -> str:
    """The QML of a layer's default style: its renderer (:func:`layer_kind`), labels, and for a series the
    temporal properties.

    Examples
    --------
    >>> import geopandas as gpd, shapely
    >>> g = gpd.GeoDataFrame({"gi_bin": [3, -2]}, geometry=[shapely.box(0, 0, 1, 1)] * 2)
    >>> qml = layer_qml(g)
    >>> 'type="categorizedSymbol" attr="gi_bin"' in qml, 'label="cold spot 95%"' in qml
    (True, True)
    """
    renderer, labels = _renderer(gdf, metadata)
    series = is_series_layer(gdf)
    categories = "|".join(c for c, on in (("Symbology", renderer), ("Labeling", labels), ("Temporal", series)) if on)
    return ("<!DOCTYPE qgis PUBLIC 'http://mrcc.com/qgis.dtd' 'SYSTEM'>\n"
            f'<qgis version="3.22.0" styleCategories="{categories or "Symbology"}" '
            f'labelsEnabled="{1 if labels else 0}">{renderer}{labels}{_TEMPORAL if series else ""}</qgis>\n')


def series_qml(gdf) -> str:
    """The QML of a series layer's default style (:func:`layer_qml`): temporal properties on, coloured as
    everywhere else."""
    return layer_qml(gdf)


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
