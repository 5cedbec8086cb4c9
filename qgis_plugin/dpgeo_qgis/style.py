"""Default style of a dpgeo cluster layer.

One colour per cluster (categorised on ``cluster_id``), a semi-transparent
fill so the base map stays readable, and the noisy count ``dp_count`` as
label. The colours, fill opacity and outline width are the library's
(:mod:`dpgeo.io.palette`), so a layer looks the same in QGIS as on the HTML
map and the PNG dpgeo writes.
"""

from __future__ import annotations

from qgis.core import (
    QgsCategorizedSymbolRenderer,
    QgsFillSymbol,
    QgsPalLayerSettings,
    QgsRendererCategory,
    QgsTextBufferSettings,
    QgsTextFormat,
    QgsVectorLayerSimpleLabeling,
)
from qgis.PyQt.QtGui import QColor, QFont

from .deps import import_dpgeo

__all__ = ["style_cluster_layer", "style_layer", "STYLES", "palette", "set_series_time"]


def palette():
    """The library's palette module, :mod:`dpgeo.io.palette`."""
    import_dpgeo()
    import importlib

    return importlib.import_module("dpgeo.io.palette")


def _symbol(pal, i: int) -> QgsFillSymbol:
    c = QColor(pal.CLUSTER_COLOURS[i])
    o = QColor(pal.OUTLINE_COLOURS[i])
    return QgsFillSymbol.createSimple({
        "color": f"{c.red()},{c.green()},{c.blue()},{pal.FILL_ALPHA}",
        "outline_color": f"{o.red()},{o.green()},{o.blue()},255",
        "outline_width": f"{pal.OUTLINE_WIDTH_MM:g}",
        "outline_width_unit": "MM",
    })


def style_cluster_layer(layer) -> bool:
    """Categorise ``layer`` by ``cluster_id`` and label it with ``dp_count``.

    Returns ``False`` (and leaves the layer alone) when it has no ``cluster_id`` field.
    """
    fields = layer.fields()
    idx = fields.indexOf("cluster_id")
    if idx < 0:
        return False
    pal = palette()
    values = sorted(v for v in layer.uniqueValues(idx) if v is not None)
    index = pal.colour_index(values).tolist() if values else []  # the same rule as the HTML map and the PNG
    categories = [QgsRendererCategory(v, _symbol(pal, i), f"cluster {v}") for v, i in zip(values, index)]
    renderer = QgsCategorizedSymbolRenderer("cluster_id", categories)
    renderer.setSourceSymbol(_symbol(pal, 0))
    layer.setRenderer(renderer)

    if fields.indexOf("dp_count") >= 0:
        settings = QgsPalLayerSettings()
        settings.fieldName = "dp_count"
        settings.isExpression = False
        settings.placement = QgsPalLayerSettings.OverPoint
        settings.centroidInside = True
        fmt = QgsTextFormat()
        font = QFont()
        font.setBold(True)
        fmt.setFont(font)
        fmt.setSize(9)
        fmt.setColor(QColor("#202020"))
        buf = QgsTextBufferSettings()
        buf.setEnabled(True)
        buf.setSize(1.0)
        buf.setColor(QColor(255, 255, 255, 220))
        fmt.setBuffer(buf)
        settings.setFormat(fmt)
        layer.setLabeling(QgsVectorLayerSimpleLabeling(settings))
        layer.setLabelsEnabled(True)
    layer.triggerRepaint()
    return True


#: The styles a mechanism's declaration may name (``Mechanism.style``), by name.
STYLES = {"clusters": style_cluster_layer}


def set_series_time(layer) -> bool:
    """A map series (fields ``period_start`` and ``period_end``): QGIS's temporal controller shows each feature in
    its period, the end excluded — the same settings the library stores in a series GeoPackage's style
    (:mod:`dpgeo.io.qgis_style`: start and end from expressions that QGIS evaluates itself, so that the end of
    one period, the start of the next, is compared as a time and not as GeoPackage text). Returns False (and
    changes nothing) for a layer that is not a series."""
    from qgis.core import QgsVectorLayerTemporalProperties

    fields = layer.fields()
    if fields.indexOf("period_start") < 0 or fields.indexOf("period_end") < 0:
        return False
    import_dpgeo()
    from dpgeo.io.qgis_style import END_EXPRESSION, START_EXPRESSION

    tp = layer.temporalProperties()
    tp.setMode(QgsVectorLayerTemporalProperties.ModeFeatureDateTimeStartAndEndFromExpressions)
    tp.setStartField("period_start")
    tp.setEndField("period_end")
    tp.setStartExpression(START_EXPRESSION)
    tp.setEndExpression(END_EXPRESSION)
    if hasattr(tp, "setLimitMode"):  # QGIS 3.22: the end of a period is the start of the next (excluded)
        from qgis.core import Qgis

        tp.setLimitMode(Qgis.VectorTemporalLimitMode.IncludeBeginExcludeEnd)
    tp.setIsActive(True)
    return True


def style_layer(layer, style: str = "clusters") -> bool:
    """Apply the named style (:data:`STYLES`; a mechanism's ``style``) to a layer dpgeo wrote; a map series also
    gets its temporal properties (:func:`set_series_time`)."""
    set_series_time(layer)
    return STYLES.get(style, style_cluster_layer)(layer)
