"""Default styles of the layers dpgeo writes, by name (a mechanism's ``style``).

* ``clusters``: one colour per cluster (categorised on ``cluster_id``), a
  semi-transparent fill so the base map stays readable, and the noisy count
  ``dp_count`` as label.
* ``heat``: count layers graduated on ``dp_count`` in classes of about equal
  numbers of cells; density bands categorised on ``band`` (a sequential
  palette, low to high).
* ``hotspots``: the classic seven-class hot-spot palette on ``gi_bin`` (red hot
  spots, blue cold spots at 99/95/90%, a pale grey for not significant).
* ``levels`` (the tree of density levels of spans without a radius): graduated
  on ``level`` in the sequential palette, light to dark, the nested polygons
  drawn from the shallowest (``depth``) up.

The colours, classes, fill opacity and outline width are the library's
(:mod:`dpgeo.io.palette`), so a layer looks the same in QGIS as on the HTML
map and the PNG dpgeo writes.
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

__all__ = ["style_cluster_layer", "style_heat_layer", "style_hotspot_layer", "style_levels_layer", "style_layer",
           "STYLES", "palette", "set_series_time"]


def palette():
    """The library's palette module, :mod:`dpgeo.io.palette`."""
    import_dpgeo()
    import importlib

    return importlib.import_module("dpgeo.io.palette")


def _fill_symbol(fill, outline, alpha: int, width_mm: float) -> QgsFillSymbol:
    """A fill of colour ``fill`` at opacity ``alpha`` (0-255) with an opaque ``outline`` ``width_mm`` wide."""
    c, o = QColor(fill), QColor(outline)
    return QgsFillSymbol.createSimple({
        "color": f"{c.red()},{c.green()},{c.blue()},{alpha}",
        "outline_color": f"{o.red()},{o.green()},{o.blue()},255",
        "outline_width": f"{width_mm:g}",
        "outline_width_unit": "MM",
    })


def _symbol(pal, i: int) -> QgsFillSymbol:
    return _fill_symbol(pal.CLUSTER_COLOURS[i], pal.OUTLINE_COLOURS[i], pal.FILL_ALPHA, pal.OUTLINE_WIDTH_MM)


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


def _level_symbol(pal, i: int) -> QgsFillSymbol:
    return _fill_symbol(pal.LEVEL_COLOURS[i], pal.LEVEL_OUTLINE_COLOURS[i], pal.LEVEL_FILL_ALPHA,
                        pal.OUTLINE_WIDTH_MM * 0.75)


def _cell_symbol(pal, fill: str) -> QgsFillSymbol:
    # the outline as the library's (palette._darker)
    return _fill_symbol(fill, QColor(fill).darker(130), pal.CELL_FILL_ALPHA, pal.CELL_OUTLINE_WIDTH_MM)


def style_levels_layer(layer) -> bool:
    """Graduate ``layer`` (the tree of density levels) on ``level``, and draw the shallowest levels first.

    The classes are the library's (:func:`dpgeo.io.palette.level_classes`: at most five classes of equal
    numbers of distinct levels), as on the HTML map and the PNG. Returns ``False`` (and leaves the layer
    alone) when it has no ``level`` field.
    """
    fields = layer.fields()
    idx = fields.indexOf("level")
    if idx < 0:
        return False
    pal = palette()
    values = sorted(float(v) for v in layer.uniqueValues(idx) if v is not None)
    _, classes = pal.level_classes(values) if values else (None, [])
    ranges = [QgsRendererRange(lo, hi, _level_symbol(pal, c), f"{lo:g}" if lo == hi else f"{lo:g} – {hi:g}")
              for lo, hi, c in classes]
    renderer = QgsGraduatedSymbolRenderer("level", ranges)
    renderer.setSourceSymbol(_level_symbol(pal, 0))
    if fields.indexOf("depth") >= 0:  # nested polygons: the deeper (denser) drawn over the shallower
        renderer.setOrderBy(QgsFeatureRequest.OrderBy([QgsFeatureRequest.OrderByClause("depth", True)]))
        renderer.setOrderByEnabled(True)
    layer.setRenderer(renderer)
    layer.setLabelsEnabled(False)
    layer.triggerRepaint()
    return True


def _values(layer, field: str) -> list:
    """Every value of ``field`` (no geometry read)."""
    idx = layer.fields().indexOf(field)
    req = QgsFeatureRequest().setFlags(QgsFeatureRequest.NoGeometry).setSubsetOfAttributes([idx])
    return [f[idx] for f in layer.getFeatures(req) if f[idx] is not None and f[idx] == f[idx]]


def style_heat_layer(layer) -> bool:
    """Density bands: categorised on ``band``; cells: graduated on ``dp_count`` (the library's classes).

    Falls back to the hot-spot or cluster style for a layer that holds those.
    """
    fields = layer.fields()
    if fields.indexOf("gi_bin") >= 0:
        return style_hotspot_layer(layer)
    pal = palette()
    if fields.indexOf("band") >= 0:
        bands = sorted({int(v) for v in _values(layer, "band")})
        colour = pal.band_colour(bands, max(bands) if bands else 1).tolist()
        cats = [QgsRendererCategory(b, _cell_symbol(pal, pal.SEQUENTIAL_COLOURS[i]), f"band {b}")
                for b, i in zip(bands, colour)]
        renderer = QgsCategorizedSymbolRenderer("band", cats)
    elif fields.indexOf("dp_count") >= 0:
        lower, upper, _ = pal.count_classes(_values(layer, "dp_count"))
        # integer classes lower ≤ v ≤ upper; QGIS ranges include their upper end
        ranges = [QgsRendererRange(lo - 0.5, hi + 0.5, _cell_symbol(pal, pal.SEQUENTIAL_COLOURS[i]),
                                   f"{lo:,}" if lo == hi else f"{lo:,} – {hi:,}")
                  for i, (lo, hi) in enumerate(zip(lower.tolist(), upper.tolist()))]
        renderer = QgsGraduatedSymbolRenderer("dp_count", ranges)
        renderer.setSourceSymbol(_cell_symbol(pal, pal.SEQUENTIAL_COLOURS[0]))
    else:
        return style_cluster_layer(layer)
    layer.setRenderer(renderer)
    layer.setLabelsEnabled(False)
    layer.triggerRepaint()
    return True


def style_hotspot_layer(layer) -> bool:
    """The seven hot-spot classes on ``gi_bin`` (3 … -3), labelled as the layer's ``hotspot`` attribute."""
    if layer.fields().indexOf("gi_bin") < 0:
        return style_heat_layer(layer) if layer.fields().indexOf("dp_count") >= 0 else False
    pal = palette()
    cats = [QgsRendererCategory(k, _cell_symbol(pal, pal.HOTSPOT_COLOURS[k]), pal.HOTSPOT_LABELS[k])
            for k in range(3, -4, -1)]
    layer.setRenderer(QgsCategorizedSymbolRenderer("gi_bin", cats))
    layer.setLabelsEnabled(False)
    layer.triggerRepaint()
    return True


#: The styles a mechanism's declaration may name (``Mechanism.style``, ``Param.layer_style``), by name.
STYLES = {"clusters": style_cluster_layer, "heat": style_heat_layer, "hotspots": style_hotspot_layer,
          "levels": style_levels_layer}


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
