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
    QgsProcessingParameterCrs,
    QgsProcessingParameterDefinition,
    QgsProcessingParameterExtent,
    QgsProcessingParameterFeatureSink,
    QgsProcessingParameterFeatureSource,
    QgsProcessingParameterNumber,
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
    OUTPUT = "OUTPUT"
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
