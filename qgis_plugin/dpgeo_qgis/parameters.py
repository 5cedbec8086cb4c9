"""Parameters of the dpgeo algorithms: their definitions, and their values as library arguments.

Conversions from QGIS values to what the library takes (``tr``,
:func:`is_set`, :func:`crs_for_library`), the parameters every algorithm
shares (:class:`ParametersMixin`: input, ε, person field and cap, public
study area, CRSs, seed, output) and their readers, which check them together
and turn them into ``dpgeo`` keyword arguments.
"""

from __future__ import annotations

from qgis.core import (
    QgsCoordinateReferenceSystem,
    QgsCoordinateTransform,
    QgsFeatureRequest,
    QgsProcessing,
    QgsProcessingException,
    QgsProcessingOutputBoolean,
    QgsProcessingOutputNumber,
    QgsProcessingOutputString,
    QgsProcessingParameterBoolean,
    QgsProcessingParameterCrs,
    QgsProcessingParameterDateTime,
    QgsProcessingParameterDefinition,
    QgsProcessingParameterEnum,
    QgsProcessingParameterString,
    QgsProcessingParameterExtent,
    QgsProcessingParameterFeatureSink,
    QgsProcessingParameterFeatureSource,
    QgsRectangle,
)
from qgis.PyQt.QtCore import QCoreApplication, QVariant

__all__ = ["ParametersMixin", "tr", "is_set", "crs_for_library", "exact", "EXACT_LABEL"]

#: The label of every log line that states an exact fact about the private data (a count of points read,
#: dropped, outside the study area): the owner may see it, nobody else may.
EXACT_LABEL = "exact, not private — do not publish"


def tr(text: str) -> str:
    """``text`` translated in the plugin's context (``dpgeo``)."""
    return QCoreApplication.translate("dpgeo", text)


def exact(text: str) -> str:
    """A log line about the private data, labelled as exact and not for publication."""
    return f"{text} ({tr(EXACT_LABEL)})"


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


def advanced_param(p):
    """``p`` shown under Advanced."""
    p.setFlags(p.flags() | QgsProcessingParameterDefinition.FlagAdvanced)
    return p


def _wall_clock(qdt) -> str:
    """A dialog's date and time as ISO 8601 text without a zone: a wall-clock time of the series' time zone."""
    return qdt.toString("yyyy-MM-ddTHH:mm:ss")


def time_value(v):
    """A QGIS attribute value as a time the library reads: ISO text (with its zone when QGIS knows one), a
    number or text as it is; None for NULL."""
    from qgis.PyQt.QtCore import QDate, QDateTime, Qt

    if v is None or (isinstance(v, QVariant) and v.isNull()):
        return None
    if isinstance(v, QDateTime):
        if not v.isValid():
            return None
        if v.timeSpec() in (Qt.UTC, Qt.OffsetFromUTC):
            return v.toString(Qt.ISODate)
        return v.toString("yyyy-MM-ddTHH:mm:ss")
    if isinstance(v, QDate):
        return v.toString("yyyy-MM-dd") if v.isValid() else None
    if isinstance(v, (str, int, float)):
        return v
    return str(v.toString() if hasattr(v, "toString") else v)


#: The first option of the series' period: one map, no series.
NO_SERIES = "No series (one map)"
#: What QGIS adds to the declared series options' help (``dpgeo.series_params``), by QGIS parameter name.
_SERIES_NOTES = {"TIME_FIELD": " A date/time field works too; the series is one layer that QGIS's temporal "
                               "controller animates."}


def _series_params():
    """The series options offered in QGIS, as declared in the library (imported when an algorithm is built)."""
    from dpgeo.series_params import series_offered

    return series_offered("qgis")


def _series_param(qgis_name):
    return next(p for p in _series_params() if p.qgis == qgis_name)


def period_choices() -> tuple:
    """The PERIOD choices: no series (``None``), then the library's period kinds."""
    return (None, *_series_param(ParametersMixin.PERIOD).choices)


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


class ParametersMixin:
    """The parameters shared by the dpgeo algorithms: names, definitions and readers.

    Mixed into :class:`~.base.DpgeoAlgorithmBase` (a ``QgsProcessingAlgorithm``).
    """

    INPUT = "INPUT"
    EPSILON = "EPSILON"
    STUDY_AREA_EXTENT = "STUDY_AREA_EXTENT"
    STUDY_AREA_LAYER = "STUDY_AREA_LAYER"
    WORKING_CRS = "WORKING_CRS"
    OUTPUT_CRS = "OUTPUT_CRS"
    SEED = "SEED"
    PERSON_FIELD = "PERSON_FIELD"
    MAX_POINTS_PER_PERSON = "MAX_POINTS_PER_PERSON"
    MAX_POINTS_PER_RECORD = "MAX_POINTS_PER_RECORD"
    OUTPUT = "OUTPUT"
    TIME_FIELD = "TIME_FIELD"
    PERIOD = "PERIOD"
    PERIOD_START = "PERIOD_START"
    PERIOD_END = "PERIOD_END"
    TIMEZONE = "TIMEZONE"
    TIME_FORMAT = "TIME_FORMAT"
    PERSON_ACCOUNTING = "PERSON_ACCOUNTING"
    CUMULATIVE = "CUMULATIVE"
    # outputs
    DIFFERENTIALLY_PRIVATE = "DIFFERENTIALLY_PRIVATE"
    N_CLUSTERS = "N_CLUSTERS"
    METADATA_JSON = "METADATA_JSON"

    # -- parameter helpers -----------------------------------------------------
    def add_input(self):
        self.addParameter(
            QgsProcessingParameterFeatureSource(
                self.INPUT,
                self.tr("Private point layer"),
                [QgsProcessing.TypeVectorPoint],
            )
        )

    def add_generated(self, definition):
        """Add a parameter generated from a declaration (the one place the generated ones are added)."""
        self.addParameter(definition)

    def add_study_area(self, data_fallback=False):
        """The public study area: an extent or a polygon layer, one of them required when the run starts.

        ``data_fallback`` is kept for callers; it changes nothing: a run without a study area is refused, as on the
        command line (the private layer's own extent would be written into the output).
        """
        label = self.tr("Public study area — extent")
        help_text = self.tr("A public extent that contains the points, e.g. the city's bounding box. Never take "
                            "it from the private layer. Give an extent or a polygon layer: a run without a study "
                            "area is refused.")
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

    def add_output_crs(self):
        self.addParameter(
            QgsProcessingParameterCrs(
                self.OUTPUT_CRS,
                self.tr("Output CRS (default: the working CRS)"),
                optional=True,
            )
        )

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

    def add_series_params(self):
        """A map series: a time field, the period and the public bounds (one release per period), with the titles,
        help, choices, defaults and advanced flags declared in ``dpgeo.series_params``; only the widgets are QGIS's
        own (a field of the input for the time, date-time bounds, "No series" as the period's first option)."""
        from qgis.core import QgsProcessingParameterField

        for p in _series_params():
            title = self.tr(p.title)
            if p.qgis == self.TIME_FIELD:
                q = QgsProcessingParameterField(p.qgis, title, parentLayerParameterName=self.INPUT,
                                                optional=True)
            elif p.qgis == self.PERIOD:
                q = QgsProcessingParameterEnum(p.qgis, title,
                                               options=[self.tr(NO_SERIES)] + [self.tr(t) for t in p.labels],
                                               defaultValue=0)
            elif p.qgis in (self.PERIOD_START, self.PERIOD_END):
                q = QgsProcessingParameterDateTime(p.qgis, title, optional=True)
            elif p.kind == "choice":
                q = QgsProcessingParameterEnum(p.qgis, title, options=[self.tr(t) for t in p.labels],
                                               defaultValue=p.choices.index(p.default))
            elif p.kind == "flag":
                q = QgsProcessingParameterBoolean(p.qgis, title, defaultValue=p.default)
            else:  # the time zone shows its default, the calendar of times written without one
                q = QgsProcessingParameterString(p.qgis, title, optional=True,
                                                 defaultValue=p.none_means if p.qgis == self.TIMEZONE else None)
            q.setHelp(self.tr(p.help) + self.tr(_SERIES_NOTES.get(p.qgis, "")))
            self.add_generated(advanced_param(q) if p.advanced else q)

    def series_kwargs(self, parameters, context):
        """``(time field or None, library keyword arguments of the series)``, checked together."""
        field = None
        names = [d.name() for d in self.parameterDefinitions()]
        if self.TIME_FIELD not in names:
            return None, {}
        if is_set(parameters.get(self.TIME_FIELD)):
            fields = self.parameterAsFields(parameters, self.TIME_FIELD, context)
            field = fields[0] if fields else None
        period = period_choices()[self.parameterAsEnum(parameters, self.PERIOD, context)] \
            if is_set(parameters.get(self.PERIOD)) else None
        if field is None and period is None:
            return None, {}
        if field is None or period is None:
            raise QgsProcessingException(self.tr(
                "A map series needs both a time field and a period (and public start and end); set both, or "
                "neither for one map."))
        bounds = []
        for name in (self.PERIOD_START, self.PERIOD_END):
            if not is_set(parameters.get(name)):
                raise QgsProcessingException(self.tr(
                    "A map series needs its public start and end: the periods come from them, never from the data."))
            bounds.append(_wall_clock(self.parameterAsDateTime(parameters, name, context)))
        utc = _series_param(self.TIMEZONE).none_means
        tz = self.parameterAsString(parameters, self.TIMEZONE, context) if is_set(parameters.get(self.TIMEZONE)) \
            else utc
        out = {"period": period, "period_start": bounds[0], "period_end": bounds[1], "timezone": tz.strip() or utc}
        if is_set(parameters.get(self.TIME_FORMAT)):
            out["time_format"] = self.parameterAsString(parameters, self.TIME_FORMAT, context)
        if is_set(parameters.get(self.PERSON_ACCOUNTING)):
            acc = _series_param(self.PERSON_ACCOUNTING)
            chosen = acc.choices[self.parameterAsEnum(parameters, self.PERSON_ACCOUNTING, context)]
            if chosen != acc.default:
                out["person_accounting"] = chosen
        if self.parameterAsBool(parameters, self.CUMULATIVE, context):
            out["cumulative"] = True
        return field, out

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
                raise QgsProcessingException(self.tr(
                    "The study area extent is the private layer's own extent (e.g. 'Calculate from layer' on the "
                    "private layer): an extent computed from the private points is not protected by differential "
                    "privacy and would be written into the output. Give a public extent or polygon layer, e.g. the "
                    "city's official boundary."))
            feedback.pushInfo(self.tr("Study area: extent {} ({}).").format(
                ", ".join(f"{v:.6g}" for v in bounds), crs.authid() or crs.description()))
            return {"domain": bounds, "domain_crs": crs_for_library(crs), "domain_from_data": False}
        # Nothing given: refused, with the command line's message (no fallback to the data's own extent)
        from dpgeo.domain import as_study_area
        from dpgeo.errors import DpgeoError

        try:
            as_study_area(None)
        except DpgeoError as err:
            raise QgsProcessingException(str(err)) from err
        raise QgsProcessingException(self.tr("Give a public study area (an extent or a polygon layer)."))

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
