"""Default styles of the layers dpgeo writes: the library's own (:func:`dpgeo.io.qgis_style.layer_qml`).

The QML a GeoPackage written by the library or the command line carries as its
default style is built from the layer by :mod:`dpgeo.io.qgis_style`; the plugin
applies the very same QML to the layers it writes, so a layer looks the same
whichever front end made it, and the same as on the HTML map and the PNG:

* ``clusters``: one colour per cluster (categorised on ``cluster_id``),
  touching clusters in different colours, a semi-transparent fill, the noisy
  count ``dp_count`` as label;
* ``heat``: count cells graduated on ``dp_count`` in the classes chosen on the
  release (clear of the noise, the top class holding the peak); density bands
  categorised on ``band`` low to high;
* ``hotspots``: the seven hot-spot classes on ``gi_bin``;
* ``levels``: graduated on ``level``, the nested polygons drawn shallowest first.

Which one applies is read from the layer's fields (a hot-spot layer asked to
look like ``heat`` gets the hot-spot classes); the names are kept for the
mechanisms' declarations (``Mechanism.style``, ``Param.layer_style``).
"""

from __future__ import annotations

import json

from qgis.core import QgsFeatureRequest
from qgis.PyQt.QtXml import QDomDocument

from .deps import import_dpgeo

__all__ = ["style_cluster_layer", "style_heat_layer", "style_hotspot_layer", "style_levels_layer", "style_layer",
           "STYLES", "palette", "set_series_time", "layer_frame"]


def palette():
    """The library's palette module, :mod:`dpgeo.io.palette`."""
    import_dpgeo()
    import importlib

    return importlib.import_module("dpgeo.io.palette")


def layer_frame(layer, geometry: bool = True):
    """The features of a QGIS layer as a GeoDataFrame (its fields and, if asked, geometries; one row per
    feature)."""
    import_dpgeo()
    import geopandas as gpd
    import numpy as np
    import shapely

    names = [f.name() for f in layer.fields()]
    rows, wkbs = [], []
    request = QgsFeatureRequest()
    if not geometry:
        request.setFlags(QgsFeatureRequest.NoGeometry)
    for f in layer.getFeatures(request):  # one step per output feature (clusters, cells), never per point
        rows.append([None if v is None or (hasattr(v, "isNull") and v.isNull()) else v for v in f.attributes()])
        g = f.geometry() if geometry else None
        wkbs.append(bytes(g.asWkb()) if g is not None and not g.isNull() else None)
    data = {n: [r[i] for r in rows] for i, n in enumerate(names)}
    geoms = shapely.from_wkb(np.array(wkbs, dtype=object)) if wkbs else []
    frame = gpd.GeoDataFrame(data, geometry=gpd.GeoSeries(geoms))
    for n in names:  # QGIS values to numbers where they are numbers
        if frame[n].map(lambda v: isinstance(v, (int, float))).all() and len(frame):
            frame[n] = frame[n].astype(float if frame[n].map(lambda v: isinstance(v, float)).any() else "int64")
    return frame


def _apply_library_style(layer) -> bool:
    import_dpgeo()
    from dpgeo.io.qgis_style import layer_qml

    fields = layer.fields()
    wanted = ("cluster_id", "dp_count", "band", "gi_bin", "level")
    if not any(fields.indexOf(f) >= 0 for f in wanted):
        return False
    try:
        metadata = json.loads(layer.customProperty("dpgeo/metadata") or "{}")
    except ValueError:
        metadata = {}
    frame = layer_frame(layer, geometry=fields.indexOf("cluster_id") >= 0)  # geometry: neighbours' colours
    doc = QDomDocument()
    doc.setContent(layer_qml(frame, metadata))
    layer.importNamedStyle(doc)
    layer.triggerRepaint()
    return True


def style_cluster_layer(layer) -> bool:
    """The library's style of ``layer`` (clusters: categorised on ``cluster_id``, labelled with ``dp_count``).

    Returns ``False`` (and leaves the layer alone) when it holds none of dpgeo's fields.
    """
    return _apply_library_style(layer)


style_levels_layer = style_heat_layer = style_hotspot_layer = style_cluster_layer

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
