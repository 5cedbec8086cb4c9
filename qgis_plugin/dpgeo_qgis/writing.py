"""Writing a library result as the algorithm's output layer, with its privacy metadata and style.

The cluster polygons go to the Processing sink; after the run the privacy
metadata (abstract, keywords, custom properties) and the cluster style are
put on the layer QGIS loads and, for a file, stored in the file itself.
"""

from __future__ import annotations

import collections
import contextlib
import json
import math
import os
import re

from qgis.core import (
    QgsCoordinateReferenceSystem,
    QgsCoordinateTransform,
    QgsDataProvider,
    QgsFeature,
    QgsFeatureSink,
    QgsField,
    QgsFields,
    QgsGeometry,
    QgsLayerMetadata,
    QgsProcessingException,
    QgsProcessingLayerPostProcessorInterface,
    QgsProcessingUtils,
    QgsProviderRegistry,
    QgsWkbTypes,
)
from qgis.PyQt import sip
from qgis.PyQt.QtCore import QVariant

from .ledger import budget_after_line
from .parameters import exact, is_set, tr
from .style import style_layer

__all__ = ["WritingMixin", "apply_metadata", "qgis_crs_from_pyproj", "destination_file", "write_file_metadata"]

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


class _MetadataPostProcessor(QgsProcessingLayerPostProcessorInterface):
    """Applies privacy metadata and the cluster style to the layer QGIS loads."""

    def __init__(self, metadata: dict, summary: str, title: str, style: str = "clusters"):
        super().__init__()
        self.metadata = metadata
        self.summary = summary
        self.title = title
        self.style = style

    def postProcessLayer(self, layer, context, feedback):  # noqa: N802 (QGIS API)
        apply_metadata(layer, self.metadata, self.summary, self.title)
        style_layer(layer, self.style)


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


def destination_file(destination: str):
    """The file a Processing destination string writes to (resolved), or None (memory, database, ...).

    ``/path/out.gpkg``, ``out.gpkg|layername=x`` and ``ogr:dbname='/path/out.gpkg' table="x"`` name files.
    """
    if not destination:
        return None
    text = str(destination)
    if text.startswith("ogr:"):
        m = re.search(r"dbname='((?:[^']|'')*)'", text) or re.search(r'dbname="((?:[^"]|"")*)"', text)
        if not m:
            return None
        text = m.group(1).replace("''", "'").replace('""', '"')
    elif re.match(r"^[A-Za-z][A-Za-z0-9_]+:", text) and not re.match(r"^[A-Za-z]:[\\/]", text):
        return None  # memory:, postgres:, spatialite: ... (but not a Windows drive letter)
    path = text.split("|", 1)[0]
    if not path or path == "TEMPORARY_OUTPUT":
        return None
    return os.path.realpath(os.path.expanduser(path))


def _stamp_the_day(path: str) -> None:
    """Every time GDAL and QGIS wrote into a GeoPackage (contents, metadata, style) becomes the release's day.

    A time of day to the millisecond would measure the run (docs/privacy.md, "Output timestamps"); the
    library writes 00:00 UTC of the day, and so does the plugin.
    """
    import sqlite3

    from dpgeo._dates import today

    stamp = today() + "T00:00:00.000Z"
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        for table, column in (("gpkg_contents", "last_change"), ("gpkg_metadata_reference", "timestamp"),
                              ("layer_styles", "update_time")):
            if table in tables:
                conn.execute(f"UPDATE {table} SET {column} = ?", (stamp,))


def write_file_metadata(layer, metadata: dict) -> str | None:
    """Store the dpgeo metadata in a GeoPackage or GeoJSON output as the library does (``dpgeo info`` reads it).

    GeoPackage: the layer's GDAL metadata items ``dpgeo`` (JSON) and
    ``DIFFERENTIALLY_PRIVATE``; GeoJSON: the top-level member ``"dpgeo"``.
    Returns the file written, or None for other outputs.
    """
    if layer.providerType() != "ogr":
        return None
    parts = QgsProviderRegistry.instance().decodeUri("ogr", _file_layer_uri(layer))
    path = parts.get("path") or ""
    if not os.path.isfile(path):
        return None
    from dpgeo.io import METADATA_MEMBER

    ext = os.path.splitext(path)[1].lower()
    text = json.dumps(metadata, separators=(",", ":"), default=str)
    if ext == ".gpkg":
        from osgeo import gdal

        ds = gdal.OpenEx(path, gdal.OF_VECTOR | gdal.OF_UPDATE)
        if ds is None:
            raise OSError(gdal.GetLastErrorMsg() or f"cannot open {path} for update")
        try:
            name = parts.get("layerName")
            lyr = ds.GetLayerByName(name) if name else ds.GetLayer(0)
            if lyr is None:
                raise OSError(f"no layer {name!r} in {path}")
            lyr.SetMetadataItem(METADATA_MEMBER, text)
            lyr.SetMetadataItem("DIFFERENTIALLY_PRIVATE", str(bool(metadata.get("differentially_private"))).upper())
        finally:
            ds = None  # noqa: F841 (closing the dataset writes the metadata)
        _stamp_the_day(path)
        return path
    if ext in (".geojson", ".json"):
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
        doc[METADATA_MEMBER] = metadata
        from dpgeo.io.atomic import temporary_name

        tmp = temporary_name(os.path.dirname(os.path.abspath(path)), ".geojson")
        try:
            with open(tmp, "w", encoding="utf-8") as fh:
                json.dump(doc, fh, default=str)
            os.replace(tmp, path)  # never a half-written file
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        return path
    return None


class WritingMixin:
    """The output layer of a run: mixed into :class:`~.base.DpgeoAlgorithmBase`."""

    def check_output_not_input(self, parameters, context):
        """Refuse, before anything is read, an output file that is an input: the point layer's file, the study
        area's, or the privacy-budget ledger (the library's one check, :func:`dpgeo.io.paths.check_not_input`)."""
        from dpgeo.errors import OutputError
        from dpgeo.io.paths import check_not_input

        out = destination_file(self.parameterAsOutputLayer(parameters, self.OUTPUT, context))
        if out is None:
            return
        protected = [(self.tr("the private point layer"), self.input_file(parameters, context))]
        if is_set(parameters.get(self.STUDY_AREA_LAYER)):
            area = self.parameterAsVectorLayer(parameters, self.STUDY_AREA_LAYER, context)
            if area is not None:
                parts = QgsProviderRegistry.instance().decodeUri(area.providerType(), area.source())
                protected.append((self.tr("the study area layer"), parts.get("path") or None))
        if hasattr(self, "ledger_file"):
            from dpgeo.budget import ledger_path

            protected.append((self.tr("the privacy-budget ledger"), ledger_path(self.ledger_file(parameters, context))))
        try:
            check_not_input(out, protected)
        except OutputError as exc:
            raise QgsProcessingException(self.tr("{}; nothing was read or written.").format(exc)) from None

    def write_result(self, result, parameters, context, feedback):
        """Turn ``result.layer`` (and the second layers asked for) into sink features, log the summary, prepare
        the metadata."""
        gdf = result.layer
        metadata = dict(result.metadata)
        src_crs = qgis_crs_from_pyproj(gdf.crs)
        out_crs = src_crs
        if is_set(parameters.get(self.OUTPUT_CRS)):
            requested = self.parameterAsCrs(parameters, self.OUTPUT_CRS, context)
            if requested.isValid():
                out_crs = requested
        if out_crs != src_crs:  # as the library records it for a GeoPackage in another CRS
            metadata["output_crs"] = out_crs.authid() or out_crs.description()
        summary = _summary(result, metadata)

        transform = None
        if out_crs != src_crs:
            transform = QgsCoordinateTransform(src_crs, out_crs, context.transformContext())
        dest_id = self._write_sink(gdf, self.OUTPUT, parameters, context, out_crs, transform,
                                   self.tr("Could not write the cluster polygons: {}"))
        # the second layers the user asked for (e.g. the tree of density levels): optional outputs of their own
        self._extra_layers = []
        for p in self._layer_outputs(parameters):
            layer = getattr(result, p.name, None)
            if layer is None:
                continue
            if qgis_crs_from_pyproj(layer.crs) != src_crs:  # pragma: no cover (the library writes both alike)
                layer = layer.to_crs(gdf.crs)
            extra_id = self._write_sink(layer, p.qgis, _same_file_as_a_layer(parameters, self.OUTPUT, p, context,
                                                                             self), context, out_crs, transform,
                                        self.tr("Could not write the layer {}: {{}}").format(p.title))
            self._extra_layers.append((p, extra_id, len(layer)))
        feedback.setProgress(100.0)

        private = bool(metadata.get("differentially_private"))
        diagnostics = getattr(result, "diagnostics", None) or {}
        if diagnostics:
            feedback.pushInfo(exact(self.tr("About the private input, for you only: {}").format(
                ", ".join(f"{k}={v}" for k, v in diagnostics.items()))))
        feedback.pushInfo("")
        feedback.pushInfo(self.tr("The release (only differentially private values; this is what the output "
                                  "layer's metadata holds):"))
        feedback.pushInfo(summary)
        line = budget_after_line(metadata, getattr(result, "ledger_record", None))
        if line:
            feedback.pushInfo(line)
        if not private:
            reasons = metadata.get("not_private_reasons") or []
            feedback.reportError(
                self.tr("This result is NOT differentially private: {}").format("; ".join(map(str, reasons))
                                                                               or self.tr("see the metadata")),
                False,
            )

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
        for p, extra_id, n in self._extra_layers:
            self._results[p.qgis] = extra_id
            feedback.pushInfo(self.tr("{}: {} features (the same release: no further privacy cost).").format(
                p.title, n))
        return dict(self._results)

    def _layer_outputs(self, parameters):
        """The declared second layers of this algorithm's mechanism whose outputs were asked for."""
        from .declared import is_layer_output

        mech = getattr(self, "mechanism", None)
        if mech is None:
            return []
        return [p for p in mech.offered("qgis") if is_layer_output(p) and is_set(parameters.get(p.qgis))]

    def _write_sink(self, gdf, name, parameters, context, out_crs, transform, error):
        """``gdf`` (the library's layer) into the Processing sink ``name``; returns its destination id."""
        import numpy as np
        import shapely

        columns = [c for c in gdf.columns if c != gdf.geometry.name]
        fields = QgsFields()
        for c in columns:
            fields.append(QgsField(c, _field_type(gdf[c])))

        sink, dest_id = self.parameterAsSink(parameters, name, context, fields, QgsWkbTypes.MultiPolygon, out_crs)
        if sink is None:
            raise QgsProcessingException(self.invalidSinkError(parameters, name))
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
            raise QgsProcessingException(error.format(sink.lastError() if hasattr(sink, "lastError") else ""))
        return dest_id

    def layer_style(self) -> str:
        """The style of the output layer: the mechanism's declared one."""
        mech = getattr(self, "mechanism", None)
        return getattr(mech, "style", "clusters")

    def layer_title(self, name=None):
        from dpgeo.shared_params import epsilon_status

        status = epsilon_status(self._metadata or {})  # a weak ε (above the declared threshold) says so
        eps = (self._metadata or {}).get("epsilon")
        tail = {"private": "differentially private", "weak": "differentially private, WEAK ε"}.get(status,
                                                                                                  "NOT private")
        name = name or self.result_title
        return f"{name} (ε={eps}, {tail})" if eps is not None else f"{name} ({tail})"

    def postProcessAlgorithm(self, context, feedback):  # noqa: N802 (QGIS API)
        if not self._dest_id or self._metadata is None:
            return dict(self._results)
        layers = [(self._dest_id, self._metadata, self.layer_title(), self.layer_style())]
        for p, extra_id, _ in getattr(self, "_extra_layers", []):
            # a second layer of the same release: its metadata, marked with the layer it is
            layers.append((extra_id, dict(self._metadata, layer=p.name), self.layer_title(tr(p.title)),
                           p.layer_style))
        written_files = []
        for dest_id, metadata, title, style in layers:
            layer = QgsProcessingUtils.mapLayerFromString(dest_id, context)
            if layer is not None:
                apply_metadata(layer, metadata, self._summary, title)
                style_layer(layer, style)
                _persist(layer, feedback)
                try:
                    written = write_file_metadata(layer, metadata)
                except Exception as exc:  # e.g. a read-only file
                    written = None
                    feedback.pushWarning(self.tr("Could not store the dpgeo metadata for 'dpgeo info' in the "
                                                 "output file ({}); it is in the layer metadata and the log.")
                                         .format(exc))
                out = written or destination_file(dest_id)  # any file output is recorded with the release
                if out and os.path.isfile(out) and out not in written_files:
                    written_files.append(out)
            if context.willLoadLayerOnCompletion(dest_id):
                pp = _MetadataPostProcessor(metadata, self._summary, title, style)
                # The processing context deletes its post-processors: hand ownership to C++ (so that Python
                # never deletes it a second time) and keep the Python object alive until then.
                sip.transferto(pp, None)
                _POST_PROCESSORS.append(pp)
                details = context.layerToLoadOnCompletionDetails(dest_id)
                details.setPostProcessor(pp)
                details.name = title  # e.g. "DP-DBSCAN cluster spans (ε=1.0, differentially private)"
        if layers and QgsProcessingUtils.mapLayerFromString(self._dest_id, context) is not None:
            self.record_outputs(self._metadata, written_files, feedback)
        return dict(self._results)


def _same_file_as_a_layer(parameters, main, p, context, alg):
    """``parameters`` with the output ``p`` turned into a second layer of the main output's GeoPackage when both
    name the same file (``OUTPUT=x.gpkg OUTPUT_LEVELS=x.gpkg``): the layer ``<layer>_<name>`` added to the file
    the main output just wrote. Two sinks opening one file each as new would overwrite each other's file (and
    QGIS waited on the lost one for ever)."""
    first = destination_file(alg.parameterAsOutputLayer(parameters, main, context))
    second = destination_file(alg.parameterAsOutputLayer(parameters, p.qgis, context))
    if first is None or first != second or not first.lower().endswith(".gpkg"):
        return parameters
    text = str(alg.parameterAsOutputLayer(parameters, main, context))
    m = re.search(r'table="((?:[^"]|"")*)"', text) or re.search(r"\|layername=([^|]+)", text)
    base = m.group(1) if m else os.path.splitext(os.path.basename(first))[0]
    table = f"{base}_{p.name}".replace('"', '""')
    path = first.replace("'", "''")
    return dict(parameters, **{p.qgis: f"ogr:dbname='{path}' table=\"{table}\" (geom)"})


def _summary(result, metadata):
    """The release's summary (the library's: every field labelled, as ``dpgeo info`` prints it), with what the
    plugin added to its ``metadata`` (the output CRS)."""
    if metadata == dict(result.metadata):
        return result.summary()
    try:
        from dpgeo.metadata_fields import release_text
    except ImportError:  # pragma: no cover (an older dpgeo)
        return result.summary()
    return release_text(dict(metadata))


def _field_type(column):
    """The QGIS type of a column of the library's layer (nullable integers stay integers)."""
    import numpy as np
    import pandas as pd

    known = _KNOWN_FIELDS.get(column.name)
    if known is not None:
        return known
    if str(column.dtype).startswith("datetime64"):  # a series' period_start, period_end
        return QVariant.DateTime
    if pd.api.types.is_bool_dtype(column.dtype):
        return QVariant.Bool
    if pd.api.types.is_integer_dtype(column.dtype):  # also pandas' Int64 with missing values (parent_id)
        return QVariant.LongLong
    if pd.api.types.is_float_dtype(column.dtype):
        return QVariant.Double
    kind = np.asarray(column).dtype.kind
    return {"i": QVariant.LongLong, "u": QVariant.LongLong, "f": QVariant.Double, "b": QVariant.Bool}.get(
        kind, QVariant.String)


def _plain(v):
    """numpy scalars, timestamps and NaN to plain Python values QGIS accepts."""
    import datetime

    if v is None:
        return None
    if isinstance(v, datetime.datetime):  # pandas Timestamps too: a UTC QDateTime
        from qgis.PyQt.QtCore import QDate, QDateTime, Qt, QTime

        if v.tzinfo is not None:
            v = v.astimezone(datetime.timezone.utc)
        return QDateTime(QDate(v.year, v.month, v.day), QTime(v.hour, v.minute, v.second), Qt.UTC)
    if hasattr(v, "item"):
        v = v.item()
    if isinstance(v, float) and math.isnan(v):
        return None
    return v
