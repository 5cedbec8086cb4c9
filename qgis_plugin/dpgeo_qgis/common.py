"""Shared plumbing of the dpgeo Processing algorithms.

Everything here is conversion between QGIS and the dpgeo library: QGIS
layers to coordinate arrays, QGIS parameters to library keyword arguments,
the library's cluster layer to QGIS features, and the library's privacy
metadata to QGIS layer metadata. There is no privacy mechanism in the plugin.
"""

from __future__ import annotations

import collections
import json
import math
import os
import warnings

from qgis.core import (
    QgsCoordinateReferenceSystem,
    QgsCoordinateTransform,
    QgsDataProvider,
    QgsFeature,
    QgsFeatureRequest,
    QgsFeatureSink,
    QgsField,
    QgsFields,
    QgsGeometry,
    QgsLayerMetadata,
    QgsPoint,
    QgsProcessing,
    QgsProcessingAlgorithm,
    QgsProcessingException,
    QgsProcessingFeatureSource,
    QgsProcessingFeatureSourceDefinition,
    QgsProcessingLayerPostProcessorInterface,
    QgsProcessingOutputBoolean,
    QgsProcessingOutputNumber,
    QgsProcessingOutputString,
    QgsProcessingParameterCrs,
    QgsProcessingParameterDefinition,
    QgsProcessingParameterExtent,
    QgsProcessingParameterFeatureSink,
    QgsProcessingParameterFeatureSource,
    QgsProcessingParameterNumber,
    QgsProcessingUtils,
    QgsProperty,
    QgsProviderRegistry,
    QgsRectangle,
    QgsSettings,
    QgsVectorLayer,
    QgsWkbTypes,
)
from qgis.PyQt import sip
from qgis.PyQt.QtCore import QCoreApplication, QVariant

from .deps import DpgeoImportError, import_dpgeo
from .style import style_cluster_layer

__all__ = [
    "DpgeoAlgorithmBase",
    "Cancelled",
    "apply_metadata",
    "FAST_READ_SETTING",
    "NoFastRead",
    "fast_read_target",
    "read_points",
    "read_points_fast",
]

#: Fraction of the progress bar used by each stage of a run.
_READ, _LIBRARY, _WRITE = 0.15, 0.80, 0.05

#: Known attribute columns of the library's cluster layer and their QGIS types.
_KNOWN_FIELDS = {
    "cluster_id": QVariant.Int,
    "n_cells": QVariant.Int,
    "area_m2": QVariant.Double,
    "dp_count": QVariant.LongLong,
    "dp_count_low": QVariant.LongLong,
    "dp_count_high": QVariant.LongLong,
}

#: Post-processors handed to QGIS (C++-owned) keep their Python side alive until QGIS calls them.
_POST_PROCESSORS = collections.deque(maxlen=32)


def tr(text: str) -> str:
    return QCoreApplication.translate("dpgeo", text)


class Cancelled(Exception):
    """Raised from the progress callback when the user cancels."""


def is_set(value) -> bool:
    """Whether a raw Processing parameter value was given."""
    if value is None:
        return False
    if isinstance(value, QVariant):
        return not value.isNull()
    if isinstance(value, str):
        return value.strip() != ""
    return True


def crs_for_library(crs: QgsCoordinateReferenceSystem) -> str:
    """A CRS string pyproj understands: the authority id when there is one, else WKT2."""
    authid = crs.authid()
    if authid and authid.upper().startswith(("EPSG:", "ESRI:", "IAU")):
        return authid
    return crs.toWkt(QgsCoordinateReferenceSystem.WKT_PREFERRED)


def qgis_crs_from_pyproj(crs) -> QgsCoordinateReferenceSystem:
    """QGIS CRS from a pyproj CRS (EPSG code when it has one)."""
    epsg = None
    try:
        epsg = crs.to_epsg()
    except Exception:  # pragma: no cover
        pass
    if epsg:
        q = QgsCoordinateReferenceSystem(f"EPSG:{epsg}")
        if q.isValid():
            return q
    return QgsCoordinateReferenceSystem.fromWkt(crs.to_wkt())


def read_points(source, feedback, *, start=0.0, span=_READ, person_field=None):
    """Coordinates of a point source as ``(x, y, crs_string, n_null, person, n_no_person)``.

    Only geometries are read (plus the ``person_field`` attribute if one is
    named; no validity checks). Plain points are read directly; anything else
    (multipoints, curves in a point layer) is decoded in bulk with shapely.
    Single-part multipoints are accepted; a feature with several points
    raises, because each feature must be one record. Features without
    geometry are counted in ``n_null``; with a ``person_field``, features
    whose person is NULL are skipped and counted in ``n_no_person``, and
    ``person`` is an object array aligned with ``x`` and ``y`` (else None).
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
    if pidx >= 0:
        request.setSubsetOfAttributes([pidx])
    else:
        request.setNoAttributes()
    total = max(int(source.featureCount()), 0)
    features = source.getFeatures(request, QgsProcessingFeatureSource.FlagSkipGeometryValidityChecks)
    step = max(total // 50, 5000)
    xs, ys, others = [], [], []
    pers, other_pers = [], []
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
        else:
            others.append(bytes(geom.asWkb()))
            if pidx >= 0:
                other_pers.append(who)
    x = np.asarray(xs, dtype=float)
    y = np.asarray(ys, dtype=float)
    if others:
        import shapely

        geoms = shapely.from_wkb(np.asarray(others, dtype=object))
        if not np.all(shapely.get_type_id(geoms) == 4):  # 4 = MultiPoint
            raise QgsProcessingException(tr("The input layer must contain points only."))
        parts = shapely.get_num_geometries(geoms)
        if parts.max() > 1:
            raise QgsProcessingException(
                tr("{} features of the input layer are multipoints with more than one point. Each "
                   "feature must be one point (one record). Run 'Multipart to singleparts' first, and if one "
                   "record can have several points set 'Maximum points per record'.").format(int((parts > 1).sum()))
            )
        nonempty = parts == 1
        n_null += int((~nonempty).sum())
        coords = shapely.get_coordinates(geoms[nonempty])
        x = np.concatenate([x, coords[:, 0]])
        y = np.concatenate([y, coords[:, 1]])
        if pidx >= 0:
            pers.extend(v for v, keep in zip(other_pers, nonempty.tolist()) if keep)
    person = None
    if pidx >= 0:
        person = np.empty(len(pers), dtype=object)
        person[:] = pers
    feedback.setProgress(100.0 * (start + span))
    return x, y, crs_for_library(crs), n_null, person, n_no_person


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
        raise NoFastRead(tr("the file reader found {} features, QGIS {}").format(n_read, source.featureCount()))
    if n_bad != n_either:  # the others have empty points or non-finite coordinates: QGIS passes those on
        raise NoFastRead(tr("{} features have an empty point or non-finite coordinates").format(n_bad - n_either))
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


def _union_polygons(source):
    """Union of the polygons of a (public) polygon source, as a shapely geometry."""
    import numpy as np
    import shapely

    wkbs = [bytes(f.geometry().asWkb()) for f in source.getFeatures(QgsFeatureRequest().setNoAttributes())
            if f.hasGeometry()]
    if not wkbs:
        raise QgsProcessingException(tr("The study area layer has no polygons."))
    geoms = shapely.from_wkb(np.asarray(wkbs, dtype=object))
    return shapely.union_all(geoms)


class _MetadataPostProcessor(QgsProcessingLayerPostProcessorInterface):
    """Applies privacy metadata and the cluster style to the layer QGIS loads."""

    def __init__(self, metadata: dict, summary: str, title: str):
        super().__init__()
        self.metadata = metadata
        self.summary = summary
        self.title = title

    def postProcessLayer(self, layer, context, feedback):  # noqa: N802 (QGIS API)
        apply_metadata(layer, self.metadata, self.summary, self.title)
        style_cluster_layer(layer)


def apply_metadata(layer, metadata: dict, summary: str, title: str) -> None:
    """Put the library's privacy metadata on a QGIS layer (abstract, keywords, custom property)."""
    private = bool(metadata.get("differentially_private"))
    md = QgsLayerMetadata(layer.metadata())
    md.setTitle(title)
    md.setAbstract(
        summary.rstrip()
        + "\n\n"
        + ("" if private else "NOT DIFFERENTIALLY PRIVATE: do not publish this layer.\n\n")
        + "dpgeo metadata (JSON):\n"
        + json.dumps(metadata, indent=2, sort_keys=True, default=str)
    )
    keywords = ["differential privacy", str(metadata.get("mechanism", "dpgeo"))]
    keywords.append("differentially private" if private else "NOT differentially private")
    if "epsilon" in metadata:
        keywords.append(f"epsilon={metadata['epsilon']}")
    md.setKeywords({"dpgeo": keywords})
    version = metadata.get("dpgeo_version", "?")
    md.setHistory(list(md.history()) + [f"Created by the dpgeo QGIS plugin (dpgeo {version})"])
    layer.setMetadata(md)
    layer.setCustomProperty("dpgeo/metadata", json.dumps(metadata, sort_keys=True, default=str))
    layer.setCustomProperty("dpgeo/differentially_private", private)


def _file_layer_uri(layer) -> str:
    """The OGR uri of ``layer`` with its layer name spelt out (needed to store metadata in a GeoPackage)."""
    registry = QgsProviderRegistry.instance()
    parts = registry.decodeUri("ogr", layer.source())
    if not parts.get("layerName"):
        subs = layer.dataProvider().subLayers()
        if subs:
            fields = subs[0].split(QgsDataProvider.sublayerSeparator())
            if len(fields) > 1 and fields[1]:
                parts["layerName"] = fields[1]
                parts.pop("layerId", None)
    return registry.encodeUri("ogr", parts)


def _persist(layer, feedback) -> None:
    """Store metadata and style in the output file itself when it is a file (GeoPackage etc.)."""
    if layer.providerType() != "ogr":
        return
    uri = _file_layer_uri(layer)
    try:
        ok, err = QgsProviderRegistry.instance().saveLayerMetadata("ogr", uri, layer.metadata())
    except Exception as exc:  # e.g. a format without metadata support
        ok, err = False, str(exc)
    if not ok:
        err, ok = layer.saveDefaultMetadata()  # falls back to a .qmd file next to the data
    if not ok:
        feedback.pushWarning(tr("Could not store the privacy metadata in the output file ({}); "
                                "it is in the log above.").format(err))
    if ".gpkg" in uri.lower():
        err = layer.saveStyleToDatabase("dpgeo", "dpgeo cluster style", True, "")
        if err:
            feedback.pushInfo(tr("Style not stored in the GeoPackage: {}").format(err))
    else:
        layer.saveDefaultStyle()


class DpgeoAlgorithmBase(QgsProcessingAlgorithm):
    """Base of the dpgeo algorithms: parameters shared by all of them and the run plumbing."""

    INPUT = "INPUT"
    EPSILON = "EPSILON"
    STUDY_AREA_EXTENT = "STUDY_AREA_EXTENT"
    STUDY_AREA_LAYER = "STUDY_AREA_LAYER"
    WORKING_CRS = "WORKING_CRS"
    OUTPUT_CRS = "OUTPUT_CRS"
    SEED = "SEED"
    PERSON_FIELD = "PERSON_FIELD"
    MAX_POINTS_PER_PERSON = "MAX_POINTS_PER_PERSON"
    OUTPUT = "OUTPUT"
    # outputs
    DIFFERENTIALLY_PRIVATE = "DIFFERENTIALLY_PRIVATE"
    N_CLUSTERS = "N_CLUSTERS"
    METADATA_JSON = "METADATA_JSON"

    #: Title used for the result layer (subclasses override).
    result_title = "dpgeo clusters"

    def __init__(self):
        super().__init__()
        self._dest_id = None
        self._results = {}
        self._metadata = None
        self._summary = ""

    # -- QGIS boilerplate ------------------------------------------------------
    def tr(self, text):
        return tr(text)

    def createInstance(self):  # noqa: N802 (QGIS API)
        return type(self)()

    def group(self):
        return ""

    def groupId(self):  # noqa: N802 (QGIS API)
        return ""

    def icon(self):
        from .plugin import plugin_icon

        return plugin_icon()

    def helpUrl(self):  # noqa: N802 (QGIS API)
        return "https://github.com/dpgeo/dpgeo/blob/main/docs/qgis.md"

    def canExecute(self):  # noqa: N802 (QGIS API)
        try:
            import_dpgeo()
        except DpgeoImportError as err:
            return False, str(err)
        return True, ""

    # -- parameter helpers -----------------------------------------------------
    def add_input(self):
        self.addParameter(
            QgsProcessingParameterFeatureSource(
                self.INPUT,
                self.tr("Private point layer"),
                [QgsProcessing.TypeVectorPoint],
            )
        )

    def add_epsilon(self, default=1.0):
        p = QgsProcessingParameterNumber(
            self.EPSILON,
            self.tr("Privacy budget ε (smaller = more private, noisier)"),
            QgsProcessingParameterNumber.Double,
            defaultValue=default,
            minValue=1e-6,
        )
        p.setHelp(self.tr("Total privacy budget spent on this run."))
        self.addParameter(p)

    def add_study_area(self, data_fallback=True):
        label = self.tr("Public study area — extent")
        help_text = self.tr("A public extent that contains the points, e.g. the city's bounding box. Never take "
                            "it from the private layer.")
        if data_fallback:
            label = self.tr("Public study area — extent (give none: result NOT private)")
            help_text += self.tr(" If neither an extent nor a polygon layer is given, the private layer's own "
                                 "extent is used and the result is marked not differentially private.")
        p = QgsProcessingParameterExtent(self.STUDY_AREA_EXTENT, label, optional=True)
        p.setHelp(help_text)
        self.addParameter(p)
        q = QgsProcessingParameterFeatureSource(
            self.STUDY_AREA_LAYER,
            self.tr("Public study area — polygon layer (e.g. the city boundary)"),
            [QgsProcessing.TypeVectorPolygon],
            optional=True,
        )
        q.setHelp(self.tr("Polygons of a public study area; their union is used."))
        self.addParameter(q)

    def add_crs_params(self):
        w = QgsProcessingParameterCrs(
            self.WORKING_CRS,
            self.tr("Working CRS in metres (default: UTM zone of the study area)"),
            optional=True,
        )
        w.setFlags(w.flags() | QgsProcessingParameterDefinition.FlagAdvanced)
        self.addParameter(w)
        self.addParameter(
            QgsProcessingParameterCrs(
                self.OUTPUT_CRS,
                self.tr("Output CRS (default: the working CRS)"),
                optional=True,
            )
        )

    def add_person_params(self):
        """The per-person guarantee: a field naming each point's person and the cap K on their points."""
        from qgis.core import QgsProcessingParameterField

        f = QgsProcessingParameterField(
            self.PERSON_FIELD,
            self.tr("Person field (protect whole persons, not single points)"),
            parentLayerParameterName=self.INPUT,
            optional=True,
        )
        f.setHelp(self.tr("A field that identifies the person each point belongs to (a patient, driver, "
                          "account). With it the guarantee covers everything one person contributes; also set "
                          "'Maximum points per person'. Features whose person is NULL are skipped."))
        self.addParameter(f)
        k = QgsProcessingParameterNumber(
            self.MAX_POINTS_PER_PERSON,
            self.tr("Maximum points per person K (needed with a person field)"),
            QgsProcessingParameterNumber.Integer,
            optional=True,
            minValue=1,
        )
        k.setHelp(self.tr("Each person keeps at most K of their points, chosen at random; the noise grows "
                          "in proportion to K."))
        self.addParameter(k)

    def person_kwargs(self, parameters, context):
        """``(field name or None, K or None)`` from the person parameters, checked together."""
        field = None
        if self.PERSON_FIELD in [d.name() for d in self.parameterDefinitions()] and is_set(
                parameters.get(self.PERSON_FIELD)):
            fields = self.parameterAsFields(parameters, self.PERSON_FIELD, context)
            field = fields[0] if fields else None
        cap = self.optional_int(parameters, self.MAX_POINTS_PER_PERSON, context)
        if field and cap is None:
            raise QgsProcessingException(self.tr(
                "A person field is set: also set 'Maximum points per person' (K ≥ 1), the most points one "
                "person may contribute. The noise grows with K."))
        if cap is not None and not field:
            raise QgsProcessingException(self.tr(
                "'Maximum points per person' needs a person field that says whose each point is; set one, or "
                "clear the maximum to protect single points."))
        return field, cap

    def add_seed(self):
        p = QgsProcessingParameterNumber(
            self.SEED,
            self.tr("Test seed (for tests only: makes the result NOT private)"),
            QgsProcessingParameterNumber.Integer,
            optional=True,
            minValue=0,
        )
        p.setFlags(p.flags() | QgsProcessingParameterDefinition.FlagAdvanced)
        self.addParameter(p)

    def add_output(self):
        self.addParameter(
            QgsProcessingParameterFeatureSink(
                self.OUTPUT,
                self.tr("DP cluster polygons"),
                QgsProcessing.TypeVectorPolygon,
            )
        )
        self.addOutput(QgsProcessingOutputBoolean(self.DIFFERENTIALLY_PRIVATE,
                                                  self.tr("Result is differentially private")))
        self.addOutput(QgsProcessingOutputNumber(self.N_CLUSTERS, self.tr("Number of clusters")))
        self.addOutput(QgsProcessingOutputString(self.METADATA_JSON, self.tr("Privacy metadata (JSON)")))

    # -- parameter readers -----------------------------------------------------
    def optional_int(self, parameters, name, context):
        if not is_set(parameters.get(name)):
            return None
        return self.parameterAsInt(parameters, name, context)

    def optional_double(self, parameters, name, context):
        if not is_set(parameters.get(name)):
            return None
        return self.parameterAsDouble(parameters, name, context)

    def working_crs(self, parameters, context):
        if not is_set(parameters.get(self.WORKING_CRS)):
            return None
        crs = self.parameterAsCrs(parameters, self.WORKING_CRS, context)
        return crs_for_library(crs) if crs.isValid() else None

    def study_area(self, parameters, context, feedback, source=None):
        """Library keyword arguments for the study area: ``domain``, ``domain_crs``, ``domain_from_data``."""
        has_extent = is_set(parameters.get(self.STUDY_AREA_EXTENT))
        has_layer = is_set(parameters.get(self.STUDY_AREA_LAYER))
        if has_extent and has_layer:
            raise QgsProcessingException(
                self.tr("Give the public study area either as an extent or as a polygon layer, not both.")
            )
        if has_layer:
            area = self.parameterAsSource(parameters, self.STUDY_AREA_LAYER, context)
            if area is None:
                raise QgsProcessingException(self.tr("The study area layer cannot be read."))
            if not area.sourceCrs().isValid():
                raise QgsProcessingException(self.tr("The study area layer has no coordinate reference system."))
            feedback.pushInfo(self.tr("Study area: the polygons of the study area layer (public)."))
            return {"domain": _union_polygons(area), "domain_crs": crs_for_library(area.sourceCrs()),
                    "domain_from_data": False}
        if has_extent:
            rect = self.parameterAsExtent(parameters, self.STUDY_AREA_EXTENT, context)
            crs = self.parameterAsExtentCrs(parameters, self.STUDY_AREA_EXTENT, context)
            if not crs.isValid():
                crs = QgsCoordinateReferenceSystem("EPSG:4326")
                feedback.pushInfo(self.tr("The study area extent has no CRS; taking it as EPSG:4326 "
                                          "longitude/latitude."))
            bounds = (rect.xMinimum(), rect.yMinimum(), rect.xMaximum(), rect.yMaximum())
            if source is not None and self._same_as_layer_extent(rect, crs, source, context):
                # e.g. picked with "Calculate from layer" on the private layer itself
                feedback.reportError(
                    self.tr("The study area extent is the private layer's own extent. An extent computed from "
                            "the private points is not protected by differential privacy, so the library derives "
                            "the grid from the data and this result is marked NOT differentially private. Use a "
                            "public extent (e.g. the city's official boundary) instead."),
                    False,
                )
                return {"domain": None, "domain_crs": None, "domain_from_data": True}
            feedback.pushInfo(self.tr("Study area: extent {} ({}).").format(
                ", ".join(f"{v:.6g}" for v in bounds), crs.authid() or crs.description()))
            return {"domain": bounds, "domain_crs": crs_for_library(crs), "domain_from_data": False}
        # Nothing given: fall back to the private layer's own extent, which is not private.
        if source is None:
            raise QgsProcessingException(self.tr("Give a public study area (an extent or a polygon layer)."))
        feedback.reportError(
            self.tr("No study area was given, so the private layer's own extent is used. That extent is computed "
                    "from the private points without any privacy protection, so this result is NOT "
                    "differentially private and must not be published. To get a private result, give a public "
                    "study area (an extent or a polygon layer such as the city boundary)."),
            False,
        )
        return {"domain": None, "domain_crs": None, "domain_from_data": True}

    @staticmethod
    def _same_as_layer_extent(rect, crs, source, context) -> bool:
        """Whether an extent equals the private layer's extent (e.g. picked with 'Calculate from layer')."""
        layer_rect = QgsRectangle(source.sourceExtent())
        if layer_rect.isNull():
            return False
        if crs != source.sourceCrs():
            try:
                ct = QgsCoordinateTransform(source.sourceCrs(), crs, context.transformContext())
                layer_rect = ct.transformBoundingBox(layer_rect)
            except Exception:
                return False
        tol_x = 1e-6 * max(layer_rect.width(), 1e-9)
        tol_y = 1e-6 * max(layer_rect.height(), 1e-9)
        return (abs(rect.xMinimum() - layer_rect.xMinimum()) <= tol_x
                and abs(rect.xMaximum() - layer_rect.xMaximum()) <= tol_x
                and abs(rect.yMinimum() - layer_rect.yMinimum()) <= tol_y
                and abs(rect.yMaximum() - layer_rect.yMaximum()) <= tol_y)

    # -- running the library ---------------------------------------------------
    def progress_callback(self, feedback, start=_READ, span=_LIBRARY):
        def progress(fraction, message=""):
            if feedback.isCanceled():
                raise Cancelled()
            try:
                f = min(max(float(fraction), 0.0), 1.0)
            except (TypeError, ValueError):
                f = 0.0
            feedback.setProgress(100.0 * (start + span * f))
            if message:
                feedback.setProgressText(str(message))

        return progress

    def call_library(self, func, feedback, *args, **kwargs):
        """Call a dpgeo function, turning its errors, warnings and cancellation into QGIS terms."""
        dpgeo = import_dpgeo()
        from dpgeo.errors import DpgeoError

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                result = func(*args, **kwargs)
            except Cancelled:
                raise QgsProcessingException(self.tr("Cancelled by the user; nothing was written.")) from None
            except DpgeoError as err:
                raise QgsProcessingException(str(err)) from err
        for w in caught:
            if issubclass(w.category, dpgeo.errors.NotPrivateWarning):
                feedback.reportError(self.tr("NOT PRIVATE: {}").format(w.message), False)
            elif not issubclass(w.category, (DeprecationWarning, PendingDeprecationWarning)):
                feedback.pushWarning(str(w.message))
        return result

    def load_dpgeo(self, feedback):
        """The dpgeo module, or a QgsProcessingException that says how to install it."""
        try:
            dpgeo = import_dpgeo()
        except DpgeoImportError as err:
            raise QgsProcessingException(str(err)) from err
        feedback.pushInfo(self.tr("Using dpgeo {} from {}").format(
            getattr(dpgeo, "__version__", "?"), os.path.dirname(getattr(dpgeo, "__file__", "") or "")))
        return dpgeo

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

    def read_input(self, parameters, context, feedback, source, person_field):
        """The input points as :func:`read_points` gives them: by the library's file reader when that is
        exactly the same (see :func:`fast_read_target`), else feature by feature."""
        read = None
        try:
            path, layer_name = fast_read_target(parameters.get(self.INPUT), self._input_layer(parameters, context))
            read = read_points_fast(import_dpgeo(), path, layer_name, source, feedback, person_field=person_field)
        except NoFastRead as why:
            feedback.pushInfo(self.tr("Reading the point layer feature by feature: {}.").format(why))
        except (Cancelled, QgsProcessingException):
            raise
        except Exception as exc:  # a bug or an unforeseen input: the feature reader is always right
            feedback.pushInfo(self.tr("Reading the point layer feature by feature: the fast file reader failed "
                                      "({}: {}).").format(type(exc).__name__, _first_line(exc)))
        if read is not None:
            feedback.pushInfo(self.tr("Read {} points with the fast file reader.").format(read[0].size))
            return read
        read = read_points(source, feedback, person_field=person_field)
        feedback.pushInfo(self.tr("Read {} points feature by feature.").format(read[0].size))
        return read

    def run_points_algorithm(self, parameters, context, feedback, func, kwargs):
        """Read the points, run ``func(points, **kwargs)`` and write the sink."""
        source = self.parameterAsSource(parameters, self.INPUT, context)
        if source is None:
            raise QgsProcessingException(self.invalidSourceError(parameters, self.INPUT))
        person_field, cap = self.person_kwargs(parameters, context)
        if person_field and kwargs.get("sensitivity", 1) != 1:
            raise QgsProcessingException(self.tr(
                "With a person field, bound each person's points with 'Maximum points per person' and leave "
                "'Maximum points per record' at 1."))
        try:
            x, y, crs, n_null, person, n_no_person = self.read_input(parameters, context, feedback, source,
                                                                     person_field)
        except Cancelled:
            raise QgsProcessingException(self.tr("Cancelled by the user; nothing was written.")) from None
        if n_null:
            feedback.pushInfo(self.tr("{} features without a point geometry were skipped.").format(n_null))
        if n_no_person:
            feedback.pushInfo(self.tr("{} features without a person (NULL in {!r}) were skipped.").format(
                n_no_person, person_field))
        if person_field:
            import pandas as pd

            # named, so the published metadata says which field identifies a person
            kwargs["person"] = pd.Series(person, name=person_field, dtype=object)
            kwargs["max_points_per_person"] = cap
        if x.size == 0:
            raise QgsProcessingException(self.tr("The point layer has no points (after skipping empty geometries)."))
        area = self.study_area(parameters, context, feedback, source)
        if area["domain_from_data"]:  # the library derives the extent from the points themselves
            area = {"domain": None, "domain_from_data": True}
        kwargs.update(area)
        working = self.working_crs(parameters, context)
        if working:
            kwargs["crs"] = working
        seed = self.optional_int(parameters, self.SEED, context)
        if seed is not None:
            kwargs["seed"] = seed
            feedback.reportError(self.tr("A test seed was given: the noise is reproducible, so this result is "
                                         "NOT differentially private."), False)
        kwargs["progress"] = self.progress_callback(feedback)
        result = self.call_library(func, feedback, (x, y, crs), **kwargs)
        if feedback.isCanceled():
            raise QgsProcessingException(self.tr("Cancelled by the user; nothing was written."))
        return self.write_result(result, parameters, context, feedback)

    def write_result(self, result, parameters, context, feedback):
        """Turn ``result.layer`` into sink features, log the summary, prepare the metadata."""
        import numpy as np
        import shapely

        gdf = result.layer
        metadata = dict(result.metadata)
        summary = result.summary()
        src_crs = qgis_crs_from_pyproj(gdf.crs)
        out_crs = src_crs
        if is_set(parameters.get(self.OUTPUT_CRS)):
            requested = self.parameterAsCrs(parameters, self.OUTPUT_CRS, context)
            if requested.isValid():
                out_crs = requested

        columns = [c for c in gdf.columns if c != gdf.geometry.name]
        fields = QgsFields()
        for c in columns:
            ftype = _KNOWN_FIELDS.get(c)
            if ftype is None:
                kind = np.asarray(gdf[c]).dtype.kind
                ftype = {"i": QVariant.LongLong, "u": QVariant.LongLong, "f": QVariant.Double,
                         "b": QVariant.Bool}.get(kind, QVariant.String)
            fields.append(QgsField(c, ftype))

        sink, dest_id = self.parameterAsSink(parameters, self.OUTPUT, context, fields,
                                             QgsWkbTypes.MultiPolygon, out_crs)
        if sink is None:
            raise QgsProcessingException(self.invalidSinkError(parameters, self.OUTPUT))

        transform = None
        if out_crs != src_crs:
            transform = QgsCoordinateTransform(src_crs, out_crs, context.transformContext())
        wkbs = shapely.to_wkb(np.asarray(gdf.geometry.values, dtype=object)) if len(gdf) else []
        rows = gdf[columns].astype(object).where(gdf[columns].notna(), None).values.tolist() if len(gdf) else []
        features = []
        for wkb, row in zip(wkbs, rows):  # noqa: B905 (same length; Python 3.9 in some QGIS 3.22)
            geom = QgsGeometry()
            geom.fromWkb(bytes(wkb))
            if transform is not None:
                geom.transform(transform)
            geom.convertToMultiType()
            f = QgsFeature(fields)
            f.setGeometry(geom)
            f.setAttributes([_plain(v) for v in row])
            features.append(f)
        if not sink.addFeatures(features, QgsFeatureSink.FastInsert):
            raise QgsProcessingException(self.tr("Could not write the cluster polygons: {}").format(
                sink.lastError() if hasattr(sink, "lastError") else ""))
        feedback.setProgress(100.0)

        private = bool(metadata.get("differentially_private"))
        feedback.pushInfo("")
        feedback.pushInfo(summary)
        if not private:
            reasons = metadata.get("not_private_reasons") or []
            feedback.reportError(
                self.tr("This result is NOT differentially private: {}").format("; ".join(map(str, reasons))
                                                                               or self.tr("see the metadata")),
                False,
            )
        diagnostics = getattr(result, "diagnostics", None) or {}
        if diagnostics:
            feedback.pushInfo(self.tr("Local diagnostics about the private input (never published): {}").format(
                ", ".join(f"{k}={v}" for k, v in diagnostics.items())))

        self._dest_id = dest_id
        self._metadata = metadata
        self._summary = summary
        metadata_json = json.dumps(metadata, sort_keys=True, default=str)
        self._results = {
            self.OUTPUT: dest_id,
            self.DIFFERENTIALLY_PRIVATE: private,
            self.N_CLUSTERS: len(gdf),
            self.METADATA_JSON: metadata_json,
        }
        return dict(self._results)

    def layer_title(self):
        private = bool((self._metadata or {}).get("differentially_private"))
        eps = (self._metadata or {}).get("epsilon")
        tail = "differentially private" if private else "NOT private"
        return f"{self.result_title} (ε={eps}, {tail})" if eps is not None else f"{self.result_title} ({tail})"

    def postProcessAlgorithm(self, context, feedback):  # noqa: N802 (QGIS API)
        if not self._dest_id or self._metadata is None:
            return dict(self._results)
        title = self.layer_title()
        layer = QgsProcessingUtils.mapLayerFromString(self._dest_id, context)
        if layer is not None:
            apply_metadata(layer, self._metadata, self._summary, title)
            style_cluster_layer(layer)
            _persist(layer, feedback)
        if context.willLoadLayerOnCompletion(self._dest_id):
            pp = _MetadataPostProcessor(self._metadata, self._summary, title)
            # The processing context deletes its post-processors: hand ownership to C++ (so that Python
            # never deletes it a second time) and keep the Python object alive until then.
            sip.transferto(pp, None)
            _POST_PROCESSORS.append(pp)
            details = context.layerToLoadOnCompletionDetails(self._dest_id)
            details.setPostProcessor(pp)
            details.name = title  # e.g. "DP-DBSCAN cluster spans (ε=1.0, differentially private)"
        return dict(self._results)


def _plain(v):
    """numpy scalars and NaN to plain Python values QGIS accepts."""
    if v is None:
        return None
    if hasattr(v, "item"):
        v = v.item()
    if isinstance(v, float) and math.isnan(v):
        return None
    return v
