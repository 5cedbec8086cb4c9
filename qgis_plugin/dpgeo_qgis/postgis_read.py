"""PostGIS layers read by the library (binary COPY) instead of feature by feature through QGIS's provider.

:func:`postgis_read_target` accepts an unfiltered, unedited PostGIS table layer
of single points whose password libpq finds itself (``~/.pgpass``,
``PGPASSWORD`` or a service file: the layer's source holds neither a password
nor an authentication configuration) and returns the library's input for it;
anything else raises :class:`NotFromLibrary` (the reading module turns it into
its ``NoFastRead``) and the plugin reads the layer feature by feature, as
before. The plugin never sees or passes on a password.
"""

from __future__ import annotations

from qgis.core import QgsDataSourceUri, QgsVectorLayer, QgsWkbTypes

from .parameters import exact, tr

__all__ = ["NotFromLibrary", "postgis_read_target", "check_postgis_read"]


class NotFromLibrary(Exception):
    """The library does not read this PostGIS layer; the message says why."""


def postgis_read_target(dpgeo, layer):
    """``dpgeo.postgis(...)`` for ``layer``, or :class:`NotFromLibrary` saying why not."""
    if not isinstance(layer, QgsVectorLayer) or not layer.isValid() or layer.providerType() != "postgres":
        raise NotFromLibrary(tr("the layer is not a PostGIS table"))
    uri = QgsDataSourceUri(layer.source())
    if uri.password() or uri.authConfigId():
        raise NotFromLibrary(tr("QGIS keeps the layer's password (the library reads with ~/.pgpass, PGPASSWORD or a "
                            "service file)"))
    if uri.sql().strip() or layer.subsetString().strip():
        raise NotFromLibrary(tr("the layer has a filter"))
    table = uri.table()
    if not table or table.lstrip().startswith("("):
        raise NotFromLibrary(tr("the layer is a query, not a table"))
    if layer.isEditable() or layer.isModified():
        raise NotFromLibrary(tr("the layer is in edit mode"))
    if QgsWkbTypes.flatType(layer.wkbType()) != QgsWkbTypes.Point:
        raise NotFromLibrary(tr("the layer type is {}, not Point").format(QgsWkbTypes.displayString(layer.wkbType())))
    if not layer.crs().isValid() or layer.crs() != layer.dataProvider().crs():
        raise NotFromLibrary(tr("the layer's CRS in QGIS is not the one its table declares"))
    parts = []
    for key, value in (("service", uri.service()), ("host", uri.host()), ("port", uri.port()),
                       ("dbname", uri.database()), ("user", uri.username())):
        if value:
            parts.append(f"{key}='" + str(value).replace("\\", "\\\\").replace("'", "\\'") + "'")
    if not parts:
        raise NotFromLibrary(tr("the layer's connection names no database"))
    ssl = QgsDataSourceUri.encodeSslMode(uri.sslMode())
    if ssl and ssl != "prefer":  # the layer's own TLS requirement (libpq's default is prefer)
        parts.append(f"sslmode={ssl}")
    schema = uri.schema()
    name = ('"' + schema.replace('"', '""') + '".' if schema else "") + '"' + table.replace('"', '""') + '"'
    return dpgeo.postgis(" ".join(parts), table=name, geometry=uri.geometryColumn() or None)


def check_postgis_read(table, source, same_crs):
    """``(x, y, n_null)`` of what the library read (``dpgeo.read_points``), or :class:`NotFromLibrary` when the
    result could differ from QGIS's feature reader (records it would pass on as points and the library drops)."""
    import numpy as np

    n_read = int(table.n_read)
    drops = dict(table.drops or {})
    n_null = int(drops.pop("null_geometry", 0))
    if any(drops.values()):  # empty points or non-finite coordinates: QGIS passes those on as points
        raise NotFromLibrary(exact(tr("{} features have an empty point or non-finite coordinates").format(
            sum(drops.values()))))
    if n_read != source.featureCount():
        raise NotFromLibrary(exact(tr("the library found {} features, QGIS {}").format(n_read,
                                                                                      source.featureCount())))
    if not same_crs(table.crs, source.sourceCrs()):
        raise NotFromLibrary(tr("the library sees another CRS than QGIS"))
    return np.ascontiguousarray(table.x, dtype=float), np.ascontiguousarray(table.y, dtype=float), n_null
