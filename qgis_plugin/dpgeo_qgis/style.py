"""Default styles of the dpgeo layers.

``clusters``: one colour per cluster (categorised on ``cluster_id``), a
semi-transparent fill so the base map stays readable, and the noisy count
``dp_count`` as label. ``levels`` (the tree of density levels of spans without
a radius): graduated on ``level``, light to dark, the nested polygons drawn
from the shallowest (``depth``) up. The colours, fill opacity and outline
width are the library's (:mod:`dpgeo.io.palette`), so a layer looks the same
in QGIS as on the HTML map and the PNG dpgeo writes.
"""

from __future__ import annotations

from qgis.core import (
    QgsCategorizedSymbolRenderer,
    QgsFeatureRequest,
    QgsFillSymbol,
    QgsGraduatedSymbolRenderer,
    QgsPalLayerSettings,
    QgsRendererCategory,
    QgsRendererRange,
    QgsTextBufferSettings,
    QgsTextFormat,
    QgsVectorLayerSimpleLabeling,
)
from qgis.PyQt.QtGui import QColor, QFont

from .deps import import_dpgeo

__all__ = ["style_cluster_layer", "style_levels_layer", "style_layer", "STYLES", "palette"]


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


def _level_symbol(pal, i: int, alpha: int) -> QgsFillSymbol:
    c = QColor(pal.LEVEL_COLOURS[i])
    o = QColor(pal.LEVEL_OUTLINE_COLOURS[i])
    return QgsFillSymbol.createSimple({
        "color": f"{c.red()},{c.green()},{c.blue()},{alpha}",
        "outline_color": f"{o.red()},{o.green()},{o.blue()},255",
        "outline_width": f"{pal.OUTLINE_WIDTH_MM * 0.75:g}",
        "outline_width_unit": "MM",
    })


def style_levels_layer(layer) -> bool:
    """Graduate ``layer`` (the tree of density levels) on ``level``, and draw the shallowest levels first.

    The classes are the library's (:func:`dpgeo.io.palette.level_classes`: at most seven classes of equal
    numbers of distinct levels), as on the HTML map and the PNG. Returns ``False`` (and leaves the layer
    alone) when it has no ``level`` field.
    """
    fields = layer.fields()
    idx = fields.indexOf("level")
    if idx < 0:
        return False
    pal = palette()
    import importlib

    alpha = round(importlib.import_module("dpgeo.io.html_levels").LEVEL_FILL_OPACITY * 255)
    values = sorted(float(v) for v in layer.uniqueValues(idx) if v is not None)
    _, classes = pal.level_classes(values) if values else (None, [])
    ranges = [QgsRendererRange(lo, hi, _level_symbol(pal, c, alpha), f"{lo:g}" if lo == hi else f"{lo:g} – {hi:g}")
              for lo, hi, c in classes]
    renderer = QgsGraduatedSymbolRenderer("level", ranges)
    renderer.setSourceSymbol(_level_symbol(pal, 0, alpha))
    if fields.indexOf("depth") >= 0:  # nested polygons: the deeper (denser) drawn over the shallower
        renderer.setOrderBy(QgsFeatureRequest.OrderBy([QgsFeatureRequest.OrderByClause("depth", True)]))
        renderer.setOrderByEnabled(True)
    layer.setRenderer(renderer)
    layer.setLabelsEnabled(False)
    layer.triggerRepaint()
    return True


#: The styles a mechanism's declaration may name (``Mechanism.style``, ``Param.layer_style``), by name.
STYLES = {"clusters": style_cluster_layer, "levels": style_levels_layer}


def style_layer(layer, style: str = "clusters") -> bool:
    """Apply the named style (:data:`STYLES`; a mechanism's ``style``) to a layer dpgeo wrote."""
    return STYLES.get(style, style_cluster_layer)(layer)
