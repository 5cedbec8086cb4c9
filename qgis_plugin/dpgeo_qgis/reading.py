"""Reading a QGIS point layer into coordinate arrays (and person identifiers) for the library.

Two readers that give the same arrays, value for value and in the same
order: :func:`read_points` iterates the features through QGIS (any layer),
and :func:`read_points_fast` lets the library read the file itself with its
Arrow reader when :func:`fast_read_target` shows that this gives exactly the
features QGIS would iterate (an unfiltered GeoPackage, Shapefile, GeoJSON or
FlatGeobuf of points). :class:`ReadingMixin` picks one and logs which.
"""

from __future__ import annotations

import math
import os
import warnings

from qgis.core import (
    QgsFeatureRequest,
    QgsFields,
    QgsPoint,
    QgsProcessingException,
    QgsProcessingFeatureSource,
    QgsProcessingFeatureSourceDefinition,
    QgsProcessingUtils,
    QgsProperty,
    QgsProviderRegistry,
    QgsSettings,
    QgsVectorLayer,
    QgsWkbTypes,
)
from qgis.PyQt.QtCore import QVariant

from .deps import import_dpgeo
from .parameters import EXACT_LABEL, crs_for_library, exact, is_set, time_value, tr
from .running import _READ, Cancelled

__all__ = [
    "FAST_READ_SETTING",
    "NoFastRead",
    "ReadingMixin",
    "fast_read_target",
    "read_points",
    "read_points_fast",
    "read_postgis_fast",
    "read_points_timed",
]


def read_points(source, feedback, *, start=0.0, span=_READ, person_field=None):
    """Coordinates of a point source: see :func:`read_points_timed` (without the times)."""
    return read_points_timed(source, feedback, start=start, span=span, person_field=person_field)[:6]


def read_points_timed(source, feedback, *, start=0.0, span=_READ, person_field=None, time_field=None):
    """Coordinates of a point source as ``(x, y, crs_string, n_null, person, n_no_person)``.

    Only geometries are read (plus the ``person_field`` attribute if one is
    named; no validity checks). Plain points are read directly; anything else
    (multipoints, curves in a point layer) is decoded in bulk with shapely.
    Single-part multipoints are accepted; a feature with several points, or
    of another geometry type, is skipped alone (one record never decides how
    the others are read, nor whether the run succeeds). Such features and
    those without geometry are counted in ``n_null``; with a ``person_field``, features
    whose person is NULL are skipped and counted in ``n_no_person``, and
    ``person`` is an object array aligned with ``x`` and ``y`` (else None).
    A seventh item: with a ``time_field``, the time of each point as the
    library reads it (:func:`~.parameters.time_value`), else None.
    """
    import numpy as np

    crs = source.sourceCrs()
    if not crs.isValid():
        raise QgsProcessingException(
            tr("The point layer has no coordinate reference system. Set its CRS "
               "(Layer Properties ▸ Source) and run again.")
        )
    request = QgsFeatureRequest()
    pidx = _person_index(source, person_field)
    tidx = -1
    if time_field:
        tidx = source.fields().lookupField(time_field)
        if tidx < 0:
            raise QgsProcessingException(tr("The time field {!r} is not a field of the point layer.").format(
                time_field))
    wanted = [i for i in (pidx, tidx) if i >= 0]
    if wanted:
        request.setSubsetOfAttributes(wanted)
    else:
        request.setNoAttributes()
    total = max(int(source.featureCount()), 0)
    features = source.getFeatures(request, QgsProcessingFeatureSource.FlagSkipGeometryValidityChecks)
    step = max(total // 50, 5000)
    xs, ys, others = [], [], []
    pers, other_pers = [], []
    times, other_times = [], []
    n_null = n_no_person = 0
    for i, feature in enumerate(features):
        if i % step == 0:
            if feedback.isCanceled():
                raise Cancelled()
            if total:
                feedback.setProgress(100.0 * (start + span * min(i / total, 1.0)))
        geom = feature.geometry()
        if geom.isNull():
            n_null += 1
            continue
        if pidx >= 0:
            who = _person_value(feature.attribute(pidx))
            if who is None:
                n_no_person += 1
                continue
        p = geom.constGet()
        if type(p) is QgsPoint:
            xs.append(p.x())
            ys.append(p.y())
            if pidx >= 0:
                pers.append(who)
            if tidx >= 0:
                times.append(time_value(feature.attribute(tidx)))
        else:
            others.append(bytes(geom.asWkb()))
            if pidx >= 0:
                other_pers.append(who)
            if tidx >= 0:
                other_times.append(time_value(feature.attribute(tidx)))
    x = np.asarray(xs, dtype=float)
    y = np.asarray(ys, dtype=float)
    if others:
        import shapely

        geoms = shapely.from_wkb(np.asarray(others, dtype=object))
        # one record is read alone: a feature that is not one point (another geometry type, a multipoint of
        # several points) is skipped and counted, never a reason to refuse the others (one record in, at most
        # one record out; docs/privacy.md, "The reader's part")
        parts = np.where(shapely.get_type_id(geoms) == 4, shapely.get_num_geometries(geoms), 0)
        nonempty = parts == 1
        n_null += int((~nonempty).sum())  # NULL, empty, not a point, or several points
        coords = shapely.get_coordinates(geoms[nonempty])
        x = np.concatenate([x, coords[:, 0]])
        y = np.concatenate([y, coords[:, 1]])
        if pidx >= 0:
            pers.extend(v for v, keep in zip(other_pers, nonempty.tolist()) if keep)
        if tidx >= 0:
            times.extend(v for v, keep in zip(other_times, nonempty.tolist()) if keep)
    person = None
    if pidx >= 0:
        person = np.empty(len(pers), dtype=object)
        person[:] = pers
    when = None
    if tidx >= 0:
        when = np.empty(len(times), dtype=object)
        when[:] = times
    feedback.setProgress(100.0 * (start + span))
    return x, y, crs_for_library(crs), n_null, person, n_no_person, when


def _person_value(v):
    """A QGIS attribute value as a hashable person identifier, or None if it is NULL."""
    if v is None or (isinstance(v, QVariant) and v.isNull()):
        return None
    if isinstance(v, (str, int, float)):
        return None if isinstance(v, float) and math.isnan(v) else v
    return str(v.toString() if hasattr(v, "toString") else v)


def _person_index(source, person_field) -> int:
    """Index of ``person_field`` among the source's fields (-1 without one); raises if it is missing."""
    if not person_field:
        return -1
    pidx = source.fields().lookupField(person_field)
    if pidx < 0:
        raise QgsProcessingException(
            tr("The person field {!r} is not a field of the point layer.").format(person_field))
    return pidx


# -- the fast path: the library reads the file itself ------------------------------------------------------

#: OGR drivers (a layer's storage type in QGIS) whose files the library's reader opens directly, with the
#: file name endings accepted for each.
_FAST_FORMATS = {
    "GPKG": (".gpkg",),
    "ESRI Shapefile": (".shp",),
    "GeoJSON": (".geojson", ".json"),
    "FlatGeobuf": (".fgb",),
}

#: Field types of a person field whose values the file reader gives exactly as QGIS does (str, int, float).
_FAST_PERSON_TYPES = {QVariant.String: "str", QVariant.Int: "int", QVariant.LongLong: "int",
                      QVariant.Double: "float"}

#: QGIS setting (QgsSettings key) that turns the fast file reader off when set to false.
FAST_READ_SETTING = "dpgeo/fast_read"

#: Parts of an OGR layer URI that the file reader cannot honour.
_URI_KEYS_OK = {"path", "layerName", "layerId"}


class NoFastRead(Exception):
    """The fast file reader is not used for this input; the message says why (it goes to the log)."""


def fast_read_target(value, layer):
    """``(path, layer_name)`` for the library's file reader, or :class:`NoFastRead` saying why not.

    For a PostGIS table layer ``path`` is the library's ``dpgeo.postgis`` input instead (and ``layer_name``
    None): see :func:`.postgis_read.postgis_read_target`.

    The library reads a file itself only when that gives exactly the features
    QGIS would iterate: ``value`` (the raw input parameter) must not ask for
    selected features, a feature limit or a geometry check, and ``layer``
    must be an unfiltered, unedited GeoPackage, Shapefile, GeoJSON or
    FlatGeobuf layer of single points whose CRS is the one the file declares.
    ``layer_name`` is None for a file of one layer. Setting
    :data:`FAST_READ_SETTING` to false turns the fast reader off.
    """
    if str(QgsSettings().value(FAST_READ_SETTING, True)).strip().lower() in ("false", "0", "no", "off"):
        raise NoFastRead(tr("the fast file reader is turned off (setting {})").format(FAST_READ_SETTING))
    if isinstance(value, QgsProperty):
        raise NoFastRead(tr("the input is data-defined"))
    if isinstance(value, QgsProcessingFeatureSourceDefinition):
        if value.selectedFeaturesOnly:
            raise NoFastRead(tr("selected features only"))
        if value.featureLimit is not None and int(value.featureLimit) >= 0:
            raise NoFastRead(tr("a feature limit is set"))
        if int(value.flags):
            raise NoFastRead(tr("the input has its own geometry check setting"))
        if str(getattr(value, "filterExpression", "") or "").strip():  # QGIS 3.32+
            raise NoFastRead(tr("the input has a feature filter"))
    if not isinstance(layer, QgsVectorLayer) or not layer.isValid():
        raise NoFastRead(tr("the input is not a vector layer"))
    if layer.providerType() == "postgres":  # a PostGIS table: the library reads it by binary COPY
        from .postgis_read import NotFromLibrary, postgis_read_target

        try:
            return postgis_read_target(import_dpgeo(), layer), None
        except NotFromLibrary as why:
            raise NoFastRead(str(why)) from None
    if layer.providerType() != "ogr":
        raise NoFastRead(tr("the layer is not a file (provider {!r})").format(layer.providerType()))
    provider = layer.dataProvider()
    storage = provider.storageType() if provider is not None else ""
    if storage not in _FAST_FORMATS:
        raise NoFastRead(tr("{} is not a GeoPackage, Shapefile, GeoJSON or FlatGeobuf file").format(
            storage or tr("the layer")))
    if layer.subsetString().strip() or (provider.subsetString() or "").strip():
        raise NoFastRead(tr("the layer has a filter"))
    parts = QgsProviderRegistry.instance().decodeUri("ogr", layer.source())
    extra = sorted(k for k, v in parts.items() if k not in _URI_KEYS_OK and is_set(v) and v not in ([], {}))
    if extra:
        raise NoFastRead(tr("the layer source has {}").format(", ".join(extra)))
    path = parts.get("path") or ""
    if not os.path.isfile(path) or not path.lower().endswith(_FAST_FORMATS[storage]):
        raise NoFastRead(tr("the layer source is not a {} file on disk").format(storage))
    if layer.isEditable() or layer.isModified():
        raise NoFastRead(tr("the layer is in edit mode"))
    if QgsWkbTypes.flatType(layer.wkbType()) != QgsWkbTypes.Point:
        raise NoFastRead(tr("the layer type is {}, not Point").format(QgsWkbTypes.displayString(layer.wkbType())))
    if not layer.crs().isValid() or layer.crs() != provider.crs():
        raise NoFastRead(tr("the layer's CRS in QGIS is not the one its file declares"))
    name = parts.get("layerName") if is_set(parts.get("layerName")) else None
    layer_id = parts.get("layerId") if is_set(parts.get("layerId")) else None
    try:
        import pyogrio  # the library's reader needs it to be fast
    except Exception:
        raise NoFastRead(tr("pyogrio cannot be imported")) from None
    if name is None:
        if layer_id not in (None, 0, "0"):
            raise NoFastRead(tr("the layer is chosen by its number in the file"))
        if storage == "GPKG":  # QGIS then opens the first layer: take it only if it is the only one
            try:
                names = [str(row[0]) for row in pyogrio.list_layers(path)]
            except Exception as exc:
                raise NoFastRead(tr("the file reader failed: {}").format(_first_line(exc))) from None
            if len(names) != 1:
                raise NoFastRead(tr("the GeoPackage has several layers and the source names none"))
            name = names[0]
    return path, name


def read_points_fast(dpgeo, path, layer_name, source, feedback, *, start=0.0, span=_READ, person_field=None):
    """What :func:`read_points` returns, read by the library's file reader (``dpgeo.read_points``).

    ``path`` and ``layer_name`` come from :func:`fast_read_target` for the
    layer behind ``source``. The result must be the feature reader's, value
    for value and in the same order (the per-person cap draws one random key
    per point in order): the coordinates, the CRS string (QGIS's, as
    :func:`read_points` gives it), the count of features without geometry,
    the person identifiers as the same Python values (str, int or float) and
    the count of features without a person. Whenever that cannot be ensured
    (empty points or non-finite coordinates, which QGIS passes on as points;
    counts or CRS that disagree with QGIS; a warning or an error from the
    reader) :class:`NoFastRead` says why and the caller reads feature by
    feature instead. A file without NULLs is read once; with NULL
    geometries or persons, their columns are read a second time (without
    decoding) to count them.
    """
    import numpy as np

    crs = source.sourceCrs()
    pidx = _person_index(source, person_field)  # a missing field is the same error on both paths
    kind = None
    if pidx >= 0:
        fields = source.fields()
        if fields.fieldOrigin(pidx) != QgsFields.OriginProvider:
            raise NoFastRead(tr("the person field is not stored in the file"))
        field = fields.at(pidx)
        kind = _FAST_PERSON_TYPES.get(field.type())
        if kind is None:
            raise NoFastRead(tr("the person field has type {}").format(field.typeName()))
        person_field = field.name()
    if feedback.isCanceled():
        raise Cancelled()
    feedback.setProgress(100.0 * start)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            person_column = person_field if pidx >= 0 else None
            table = dpgeo.read_points(path, layer=layer_name, person=person_column)
            n_read, n_bad = int(table.n_read), int(table.n_dropped)
            n_null = n_no_person = n_either = 0
            if n_bad:  # records dropped: which lack a geometry and which only a person?
                n_null, n_no_person, n_either = _count_nulls(path, layer_name, person_column, n_read)
        except NoFastRead:
            raise
        except Exception as exc:
            raise NoFastRead(tr("the file reader failed: {}").format(_first_line(exc))) from exc
    caught = [w for w in caught if not issubclass(w.category, (DeprecationWarning, PendingDeprecationWarning))]
    if caught:
        raise NoFastRead(tr("the file reader warned: {}").format(_first_line(caught[0].message)))
    if feedback.isCanceled():
        raise Cancelled()
    if n_read != source.featureCount():
        raise NoFastRead(exact(tr("the file reader found {} features, QGIS {}").format(n_read, source.featureCount())))
    if n_bad != n_either:  # the others have empty points or non-finite coordinates: QGIS passes those on
        raise NoFastRead(exact(tr("{} features have an empty point or non-finite coordinates").format(
            n_bad - n_either)))
    if not _same_crs(table.crs, crs):
        raise NoFastRead(tr("the file reader sees another CRS than QGIS"))
    x = np.ascontiguousarray(table.x, dtype=float)
    y = np.ascontiguousarray(table.y, dtype=float)
    if x.shape != y.shape or x.size != n_read - n_bad:
        raise NoFastRead(tr("the file reader returned inconsistent counts"))
    person = None
    if pidx >= 0:
        person = _person_objects(table.person, kind, x.size, shapefile=path.lower().endswith(".shp"))
    feedback.setProgress(100.0 * (start + span))
    return x, y, crs_for_library(crs), n_null, person, n_no_person


def read_postgis_fast(dpgeo, target, source, feedback, *, start=0.0, span=_READ):
    """What :func:`read_points` returns for a PostGIS table layer, read by the library (``target`` from
    :func:`fast_read_target`); :class:`NoFastRead` when that could differ from the feature reader."""
    from .postgis_read import NotFromLibrary, check_postgis_read

    feedback.setProgress(100.0 * start)
    try:
        table = dpgeo.read_points(target)
    except Exception as exc:
        raise NoFastRead(tr("the library's PostGIS reader failed: {}").format(_first_line(exc))) from exc
    if feedback.isCanceled():
        raise Cancelled()
    try:
        x, y, n_null = check_postgis_read(table, source, _same_crs)
    except NotFromLibrary as why:
        raise NoFastRead(str(why)) from None
    feedback.setProgress(100.0 * (start + span))
    return x, y, crs_for_library(source.sourceCrs()), n_null, None, 0


def _count_nulls(path, layer_name, person, n_read):
    """``(n_null, n_no_person, n_either)`` of a file, as the feature reader counts them.

    ``n_null``: records whose geometry is NULL (not empty); ``n_no_person``:
    records with a geometry but a NULL (or NaN) ``person``; ``n_either``:
    records with either. Read with pyogrio, without decoding geometries.
    """
    import numpy as np
    import pyarrow.compute as pc
    import pyogrio

    meta, table = pyogrio.read_arrow(path, layer=layer_name, columns=[person] if person else [],
                                     return_fids=False)
    if len(table) != n_read:
        raise NoFastRead(tr("the file changed while it was read"))
    no_geometry = np.asarray(table.column(meta.get("geometry_name") or "wkb_geometry").is_null())
    if person is None:
        n = int(no_geometry.sum())
        return n, 0, n
    no_person = np.asarray(pc.is_null(table.column(person), nan_is_null=True))
    n_null = int(no_geometry.sum())
    n_no_person = int((no_person & ~no_geometry).sum())
    return n_null, n_no_person, n_null + n_no_person


def _same_crs(pyproj_crs, qgis_crs) -> bool:
    """Whether the CRS the library read from the file is the layer's CRS in QGIS."""
    from pyproj import CRS

    try:
        return CRS.from_user_input(pyproj_crs).equals(CRS.from_user_input(crs_for_library(qgis_crs)),
                                                      ignore_axis_order=True)
    except Exception:
        return False


def _person_objects(values, kind, n, *, shapefile=False):
    """The file reader's person identifiers as the Python values the feature reader gives (object array)."""
    import numpy as np

    v = np.asarray(values)
    if v.shape != (n,):
        raise NoFastRead(tr("the file reader returned no person for every point"))
    if kind == "str":
        import pandas as pd

        if n and (v.dtype.kind != "O" or pd.api.types.infer_dtype(v, skipna=False) != "string"):
            raise NoFastRead(tr("the person field is not read as text"))
        if shapefile and n:
            import pyarrow as pa
            import pyarrow.compute as pc

            # a shapefile's text encoding may be decoded differently by QGIS and by the reader
            if not pc.all(pc.string_is_ascii(pa.array(v, type=pa.string()))).as_py():
                raise NoFastRead(tr("the shapefile's person field has non-ASCII text"))
        return v.astype(object, copy=True)
    if kind == "int":
        if v.dtype.kind == "f":  # integers with NULLs come back as floats
            if not (np.all(np.abs(v) < 2.0 ** 53) and np.all(v == np.floor(v))):
                raise NoFastRead(tr("the person field is not read as integers"))
            v = v.astype(np.int64)
        elif v.dtype.kind not in "iu":
            raise NoFastRead(tr("the person field is not read as integers"))
    elif v.dtype.kind != "f":
        raise NoFastRead(tr("the person field is not read as decimal numbers"))
    out = np.empty(n, dtype=object)
    out[:] = v.tolist()
    return out


def _first_line(value) -> str:
    lines = str(value).strip().splitlines()
    return lines[0] if lines else type(value).__name__


class ReadingMixin:
    """Reading the input parameter's points: mixed into :class:`~.base.DpgeoAlgorithmBase`."""

    def _input_layer(self, parameters, context):
        """The vector layer behind the input parameter, or None."""
        value = parameters.get(self.INPUT)
        if isinstance(value, QgsProcessingFeatureSourceDefinition):
            prop = value.source
            if prop.propertyType() != QgsProperty.StaticProperty:
                return None
            value = prop.staticValue()
            if isinstance(value, QgsVectorLayer):
                return value
            return QgsProcessingUtils.mapLayerFromString(str(value), context)
        return self.parameterAsVectorLayer(parameters, self.INPUT, context)

    def read_input(self, parameters, context, feedback, source, person_field, time_field=None):
        """The input points as :func:`read_points` gives them: by the library's file reader when that is
        exactly the same (see :func:`fast_read_target`), else feature by feature. With a ``time_field`` (a map
        series) the points are read feature by feature with their times, as a seventh item."""
        if time_field:
            read = read_points_timed(source, feedback, person_field=person_field, time_field=time_field)
            feedback.pushInfo(exact(self.tr("Read {} points with their times, feature by feature.").format(
                read[0].size)))
            return read
        read = None
        reader = self.tr("the fast file reader")
        try:
            path, layer_name = fast_read_target(parameters.get(self.INPUT), self._input_layer(parameters, context))
            if not isinstance(path, str):  # a PostGIS table (postgis_read.py)
                if person_field:
                    raise NoFastRead(self.tr("a person field of a PostGIS layer is read feature by feature"))
                reader = self.tr("the library's PostGIS reader")
                read = read_postgis_fast(import_dpgeo(), path, source, feedback)
            else:
                read = read_points_fast(import_dpgeo(), path, layer_name, source, feedback,
                                        person_field=person_field)
        except NoFastRead as why:
            feedback.pushInfo(self.tr("Reading the point layer feature by feature: {}.").format(why))
        except (Cancelled, QgsProcessingException):
            raise
        except Exception as exc:  # a bug or an unforeseen input: the feature reader is always right
            feedback.pushInfo(self.tr("Reading the point layer feature by feature: the fast file reader failed "
                                      "({}: {}).").format(type(exc).__name__, _first_line(exc)))
        if read is not None:
            feedback.pushInfo(exact(self.tr("Read {} points with {}.").format(read[0].size, reader)))
            return read
        read = read_points(source, feedback, person_field=person_field)
        feedback.pushInfo(exact(self.tr("Read {} points feature by feature.").format(read[0].size)))
        return read
