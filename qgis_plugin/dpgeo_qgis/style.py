"""Default style of a dpgeo cluster layer.

One colour per cluster (categorised on ``cluster_id``), a semi-transparent
fill so the base map stays readable, and the noisy count ``dp_count`` as
label.
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

__all__ = ["style_cluster_layer", "CLUSTER_COLOURS", "FILL_ALPHA"]

#: Qualitative palette (12 well separated hues), cycled over the clusters.
CLUSTER_COLOURS = [
    "#1f78b4", "#e31a1c", "#33a02c", "#ff7f00", "#6a3d9a", "#b15928",
    "#a6cee3", "#fb9a99", "#b2df8a", "#fdbf6f", "#cab2d6", "#ffff99",
]
#: Fill opacity (0–255): semi-transparent.
FILL_ALPHA = 110


def _symbol(hex_colour: str) -> QgsFillSymbol:
    c = QColor(hex_colour)
    fill = f"{c.red()},{c.green()},{c.blue()},{FILL_ALPHA}"
    outline = c.darker(130)
    return QgsFillSymbol.createSimple({
        "color": fill,
        "outline_color": f"{outline.red()},{outline.green()},{outline.blue()},255",
        "outline_width": "0.4",
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
    values = sorted(v for v in layer.uniqueValues(idx) if v is not None)
    categories = [
        QgsRendererCategory(v, _symbol(CLUSTER_COLOURS[i % len(CLUSTER_COLOURS)]), f"cluster {v}")
        for i, v in enumerate(values)
    ]
    renderer = QgsCategorizedSymbolRenderer("cluster_id", categories)
    renderer.setSourceSymbol(_symbol(CLUSTER_COLOURS[0]))
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
