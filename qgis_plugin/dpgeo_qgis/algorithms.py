"""The dpgeo Processing algorithms: DP-DBSCAN cluster spans, DP WaveCluster, DP k-means, noise preview.

Each algorithm only converts parameters and layers and calls the dpgeo
library (``dpgeo.dbscan_spans``, ``dpgeo.wavecluster``, ``dpgeo.kmeans``,
``dpgeo.noise_preview``).
"""

from __future__ import annotations

import html
import json

from qgis.core import (
    QgsProcessingException,
    QgsProcessingOutputNumber,
    QgsProcessingOutputString,
    QgsProcessingParameterDefinition,
    QgsProcessingParameterDistance,
    QgsProcessingParameterEnum,
    QgsProcessingParameterFileDestination,
    QgsProcessingParameterNumber,
    QgsProcessingParameterString,
    QgsUnitTypes,
)

from .base import DpgeoAlgorithmBase
from .parameters import is_set

__all__ = ["DbscanSpansAlgorithm", "WaveClusterAlgorithm", "KMeansAlgorithm", "NoisePreviewAlgorithm",
           "ALGORITHMS"]

_STUDY_AREA_NOTE = (
    "<p><b>Public study area</b>: an extent or a polygon layer (e.g. the city boundary) known without looking "
    "at the data; the grid is laid over it. A run without one is refused, as on the command line: the private "
    "layer's own extent is not protected and would be written into the output.</p>"
)

_PRIVACY_NOTE = (
    "<p><b>Privacy.</b> The output is ε-differentially private with respect to one record (by default one point) of "
    "the input layer — provided the study area is public (not taken from the data), no test seed is set, "
    "and each record has at most one point (or at most 'Maximum points per record'). Otherwise the result "
    "is marked <b>not private</b> in its metadata and in the log, and must not be published. Everything runs "
    "on this computer.</p>"
    "<p><b>One person, many points</b> (trips of one driver, visits of one patient): set the <b>person field</b> "
    "and <b>Maximum points per person</b> K. Each person then keeps at most K of their points, chosen at random, "
    "the noise is scaled to K, and the guarantee covers adding or removing a whole person.</p>"
    "<p><b>Privacy budget.</b> Every private run is charged to its <b>dataset</b> (the people the data is about: "
    "give it a name, else the input file's path is used) in the dpgeo ledger shared with the <i>dpgeo</i> "
    "command. The log shows the ε spent and left before the run; a run that would exceed the total declared "
    "for the dataset (<i>dpgeo budget set NAME --total EPSILON</i>) is refused before any point is read. "
    "Runs that are not private (test seed, study area from the data, exact) are not charged.</p>"
)

_HISTOGRAMS = ["auto", "dense", "sparse"]
#: Core threshold bound Γ: the paper's Laplace bound (conservative) or the exact one.
_GAMMAS = ["laplace", "exact"]
#: How far a span reaches: (label shown, value passed to the library's ``extent``).
_EXTENTS = [
    ("Grown: core spans grown into certified cells (recommended)", "grown"),
    ("Core cells only (paper's Algorithm 1)", "core"),
]

_EXTENT_HELP = (
    "<b>Span extent</b>: <i>Grown</i> (default) keeps the clusters the core cells find, and keeps them apart, "
    "but extends each one into neighbouring cells that are still certified dense (noisy count at least "
    "MinPts + Γ<sub>exact</sub>), so a cluster's edge is not eaten away; two clusters are never joined and no "
    "extra privacy budget is spent. <i>Core cells only</i> returns just the core cells (the paper's "
    "Algorithm 1): thinner polygons."
)


def _extent_parameter(name, tr):
    return _advanced(QgsProcessingParameterEnum(
        name, tr("Span extent"), options=[tr(label) for label, _ in _EXTENTS], defaultValue=0))


def _metres_parameter(name, description, default, minimum=0.0, optional=False):
    """A distance in metres whatever the layer's units (the library projects internally)."""
    p = QgsProcessingParameterDistance(name, description, defaultValue=default, optional=optional,
                                       minValue=minimum)
    p.setDefaultUnit(QgsUnitTypes.DistanceMeters)
    return p


def _advanced(p):
    p.setFlags(p.flags() | QgsProcessingParameterDefinition.FlagAdvanced)
    return p


class DbscanSpansAlgorithm(DpgeoAlgorithmBase):
    """DP-DBSCAN cluster spans (Qiu & Yi's approximate DBSCAN under differential privacy)."""

    RADIUS = "RADIUS"
    MIN_POINTS = "MIN_POINTS"
    BETA = "BETA"
    ETA = "ETA"
    HISTOGRAM = "HISTOGRAM"
    GAMMA_BOUND = "GAMMA_BOUND"
    SPAN_EXTENT = "SPAN_EXTENT"
    MAX_POINTS_PER_RECORD = "MAX_POINTS_PER_RECORD"

    result_title = "DP-DBSCAN cluster spans"

    def name(self):
        return "dbscanspans"

    def displayName(self):  # noqa: N802 (QGIS API)
        return self.tr("DP-DBSCAN cluster spans")

    def shortDescription(self):  # noqa: N802 (QGIS API)
        return self.tr("Differentially private DBSCAN clusters of a point layer, as polygons with noisy counts.")

    def shortHelpString(self):  # noqa: N802 (QGIS API)
        return self.tr(
            "<p>Finds dense clusters of the points (DBSCAN with radius r and MinPts) under differential privacy "
            "and returns one (multi)polygon per cluster: the grid cells that span it, with a noisy point count "
            "<i>dp_count</i> and its 95% interval.</p>"
            "<p><b>Radius</b> is in metres for any layer CRS, including longitude/latitude. "
            "<b>β</b> is the failure probability of the noise bound Γ; <b>η′</b> sets the cell width "
            "(cells are η′·r/√2 wide, η′ ≤ 1): larger cells mean fewer neighbours and less noise, but coarser "
            "shapes. <b>Noise bound Γ</b>: <i>laplace</i> (default, conservative) or <i>exact</i> (smallest Γ "
            "with the guarantee: finds smaller clusters).</p>"
            "<p>" + _EXTENT_HELP + "</p>"
            "<p>Run <i>Noise preview</i> first to see Γ, MinPts′ and the count error for your ε — it costs no "
            "privacy budget.</p>" + _STUDY_AREA_NOTE + _PRIVACY_NOTE
        )

    def initAlgorithm(self, config=None):  # noqa: N802 (QGIS API)
        self.add_input()
        self.add_epsilon()
        self.add_budget_params()
        self.add_person_params()
        self.addParameter(_metres_parameter(self.RADIUS, self.tr("DBSCAN radius r (metres)"), 100.0, 1e-6))
        self.addParameter(QgsProcessingParameterNumber(
            self.MIN_POINTS, self.tr("MinPts (points within r that make a core point)"),
            QgsProcessingParameterNumber.Integer, defaultValue=50, minValue=1))
        self.add_study_area()
        self.add_crs_params()
        self.addParameter(_advanced(QgsProcessingParameterNumber(
            self.BETA, self.tr("β: failure probability of the noise bound Γ"),
            QgsProcessingParameterNumber.Double, defaultValue=0.05, minValue=1e-12, maxValue=0.999999)))
        self.addParameter(_advanced(QgsProcessingParameterNumber(
            self.ETA, self.tr("η′: cell width factor in (0, 1] (larger = bigger cells, less noise)"),
            QgsProcessingParameterNumber.Double, defaultValue=1.0, minValue=1e-6, maxValue=1.0)))
        self.addParameter(_advanced(QgsProcessingParameterEnum(
            self.HISTOGRAM, self.tr("Noisy histogram"), options=_HISTOGRAMS, defaultValue=0)))
        self.addParameter(_advanced(QgsProcessingParameterEnum(
            self.GAMMA_BOUND, self.tr("Noise bound Γ"), options=_GAMMAS, defaultValue=0)))
        self.addParameter(_extent_parameter(self.SPAN_EXTENT, self.tr))
        self.addParameter(_advanced(QgsProcessingParameterNumber(
            self.MAX_POINTS_PER_RECORD, self.tr("Maximum points per record (sensitivity)"),
            QgsProcessingParameterNumber.Integer, defaultValue=1, minValue=1)))
        self.add_seed()
        self.add_output()

    def processAlgorithm(self, parameters, context, feedback):  # noqa: N802 (QGIS API)
        dpgeo = self.load_dpgeo(feedback)
        kwargs = {
            "epsilon": self.parameterAsDouble(parameters, self.EPSILON, context),
            "radius_m": self.parameterAsDouble(parameters, self.RADIUS, context),
            "min_points": self.parameterAsInt(parameters, self.MIN_POINTS, context),
            "beta": self.parameterAsDouble(parameters, self.BETA, context),
            "eta": self.parameterAsDouble(parameters, self.ETA, context),
            "histogram": _HISTOGRAMS[self.parameterAsEnum(parameters, self.HISTOGRAM, context)],
            "gamma": _GAMMAS[self.parameterAsEnum(parameters, self.GAMMA_BOUND, context)],
            "extent": _EXTENTS[self.parameterAsEnum(parameters, self.SPAN_EXTENT, context)][1],
        }
        sensitivity = self.optional_int(parameters, self.MAX_POINTS_PER_RECORD, context)
        if sensitivity is not None and sensitivity != 1:
            kwargs["sensitivity"] = sensitivity
        return self.run_points_algorithm(parameters, context, feedback, dpgeo.dbscan_spans, kwargs)


class WaveClusterAlgorithm(DpgeoAlgorithmBase):
    """DP WaveCluster (Chen, Yu & Chirkova): wavelet clustering of a noisy grid."""

    METHOD = "METHOD"
    CELL_SIZE = "CELL_SIZE"
    GRID_SIZE = "GRID_SIZE"
    PERCENTILE = "PERCENTILE"

    #: (label shown, value passed to dpgeo.wavecluster)
    METHODS = [
        ("PrivTHR (noisy grid, threshold)", "privthr"),
        ("PrivTHR_EM (threshold chosen with the exponential mechanism)", "privthr-em"),
        ("PrivQT (noise on the grid counts only)", "privqt"),
        ("Baseline (WaveCluster on DP synthetic points from adaptive grids)", "baseline"),
        ("exact (no noise — NOT private, for comparison only)", "exact"),
    ]

    result_title = "DP WaveCluster clusters"

    def name(self):
        return "wavecluster"

    def displayName(self):  # noqa: N802 (QGIS API)
        return self.tr("DP WaveCluster")

    def shortDescription(self):  # noqa: N802 (QGIS API)
        return self.tr("Differentially private WaveCluster of a point layer, as polygons with noisy counts.")

    def shortHelpString(self):  # noqa: N802 (QGIS API)
        return self.tr(
            "<p>Grid-based wavelet clustering (WaveCluster) under differential privacy. Choose the method: "
            "<b>PrivTHR</b>, <b>PrivTHR_EM</b>, <b>PrivQT</b>, <b>Baseline</b>, or <b>exact</b> (no privacy; "
            "for comparison only, never publish it).</p>"
            "<p>The grid is set by exactly one of the <b>cell size</b> in metres or the <b>grid size</b> (cells "
            "along the longer side of the study area). <b>Percentile</b> p ∈ [0, 100): the share of the positive "
            "wavelet coefficients that are not significant (the density threshold).</p>"
            + _STUDY_AREA_NOTE + _PRIVACY_NOTE
        )

    def initAlgorithm(self, config=None):  # noqa: N802 (QGIS API)
        self.add_input()
        self.addParameter(QgsProcessingParameterEnum(
            self.METHOD, self.tr("Method"), options=[label for label, _ in self.METHODS], defaultValue=0))
        self.add_epsilon()
        self.add_budget_params()
        self.add_person_params()
        self.addParameter(_metres_parameter(self.CELL_SIZE, self.tr("Cell size (metres) — or give the grid size"),
                                            None, 1e-6, optional=True))
        self.addParameter(QgsProcessingParameterNumber(
            self.GRID_SIZE, self.tr("Grid size (cells along the longer side) — or give the cell size"),
            QgsProcessingParameterNumber.Integer, optional=True, minValue=2))
        self.addParameter(QgsProcessingParameterNumber(
            self.PERCENTILE, self.tr("Percentile of non-significant coefficients (threshold)"),
            QgsProcessingParameterNumber.Double, defaultValue=60.0, minValue=0.0, maxValue=99.999))
        self.add_study_area()
        self.add_crs_params()
        self.add_seed()
        self.add_output()

    def processAlgorithm(self, parameters, context, feedback):  # noqa: N802 (QGIS API)
        dpgeo = self.load_dpgeo(feedback)
        if not hasattr(dpgeo, "wavecluster"):
            raise QgsProcessingException(self.tr("This version of dpgeo ({}) has no wavecluster(); "
                                                 "update dpgeo.").format(dpgeo.__version__))
        method = self.METHODS[self.parameterAsEnum(parameters, self.METHOD, context)][1]
        cell_m = self.optional_double(parameters, self.CELL_SIZE, context)
        grid = self.optional_int(parameters, self.GRID_SIZE, context)
        if (cell_m is None) == (grid is None):
            raise QgsProcessingException(self.tr("Give exactly one of the cell size (metres) and the grid size "
                                                 "(cells along the longer side of the study area)."))
        kwargs = {
            "method": method,
            # 'exact' adds no noise and spends no budget: no ε in its metadata
            "epsilon": None if method == "exact" else self.parameterAsDouble(parameters, self.EPSILON, context),
            "percentile": self.parameterAsDouble(parameters, self.PERCENTILE, context),
        }
        if cell_m is not None:
            kwargs["cell_m"] = cell_m
        if grid is not None:
            kwargs["grid_size"] = grid
        if method == "exact":
            feedback.reportError(self.tr("Method 'exact' adds no noise: the result is NOT private."), False)
        return self.run_points_algorithm(parameters, context, feedback, dpgeo.wavecluster, kwargs)


class KMeansAlgorithm(DpgeoAlgorithmBase):
    """DP k-means (DPLloyd with exact noise): the Voronoi cells of the private centroids."""

    K = "K"
    ITERATIONS = "ITERATIONS"
    LAYER_SHARE = "LAYER_SHARE"
    MAX_POINTS_PER_RECORD = "MAX_POINTS_PER_RECORD"

    result_title = "DP k-means Voronoi cells"

    def name(self):
        return "kmeans"

    def displayName(self):  # noqa: N802 (QGIS API)
        return self.tr("DP k-means (Voronoi cells)")

    def shortDescription(self):  # noqa: N802 (QGIS API)
        return self.tr("Differentially private k-means of a point layer: the Voronoi cells of the private "
                       "centroids, with noisy counts.")

    def shortHelpString(self):  # noqa: N802 (QGIS API)
        return self.tr(
            "<p>k-means under differential privacy (DPLloyd: Lloyd's algorithm in which every iteration sees "
            "the points only through noisy counts and coordinate sums). The result is one polygon per cluster: "
            "the <b>Voronoi cell</b> of its private centroid, clipped to the study area, with a noisy point "
            "count <i>dp_count</i>, its 95% interval and the centroid (<i>centroid_x</i>, <i>centroid_y</i>, "
            "in the working CRS).</p>"
            "<p><b>k</b> is the number of clusters. Advanced: the number of noisy <b>iterations</b> (default 5) "
            "and the <b>share of ε for the cells' counts</b> (default 0.1); the rest of ε is spread evenly over "
            "the iterations. The metadata states the split.</p>"
            "<p><b>Public study area</b>: an extent or a polygon layer known without looking at the data; the "
            "starting centroids and the bounds of the coordinates come from it. A run without one is refused.</p>"
            + _PRIVACY_NOTE
        )

    def initAlgorithm(self, config=None):  # noqa: N802 (QGIS API)
        self.add_input()
        self.add_epsilon()
        self.add_budget_params()
        self.add_person_params()
        self.addParameter(QgsProcessingParameterNumber(
            self.K, self.tr("Number of clusters k"), QgsProcessingParameterNumber.Integer, defaultValue=5,
            minValue=1, maxValue=1000))
        self.add_study_area()
        self.add_crs_params()
        self.addParameter(_advanced(QgsProcessingParameterNumber(
            self.ITERATIONS, self.tr("Noisy Lloyd iterations"), QgsProcessingParameterNumber.Integer,
            defaultValue=5, minValue=1, maxValue=1000)))
        self.addParameter(_advanced(QgsProcessingParameterNumber(
            self.LAYER_SHARE, self.tr("Share of ε for the cells' counts"), QgsProcessingParameterNumber.Double,
            defaultValue=0.1, minValue=1e-6, maxValue=0.999999)))
        self.addParameter(_advanced(QgsProcessingParameterNumber(
            self.MAX_POINTS_PER_RECORD, self.tr("Maximum points per record (sensitivity)"),
            QgsProcessingParameterNumber.Integer, defaultValue=1, minValue=1)))
        self.add_seed()
        self.add_output()

    def processAlgorithm(self, parameters, context, feedback):  # noqa: N802 (QGIS API)
        dpgeo = self.load_dpgeo(feedback)
        if not hasattr(dpgeo, "kmeans"):
            raise QgsProcessingException(self.tr("This version of dpgeo ({}) has no kmeans(); "
                                                 "update dpgeo.").format(dpgeo.__version__))
        kwargs = {
            "epsilon": self.parameterAsDouble(parameters, self.EPSILON, context),
            "k": self.parameterAsInt(parameters, self.K, context),
            "iterations": self.parameterAsInt(parameters, self.ITERATIONS, context),
            "layer_share": self.parameterAsDouble(parameters, self.LAYER_SHARE, context),
        }
        sensitivity = self.optional_int(parameters, self.MAX_POINTS_PER_RECORD, context)
        if sensitivity is not None and sensitivity != 1:
            kwargs["sensitivity"] = sensitivity
        return self.run_points_algorithm(parameters, context, feedback, dpgeo.kmeans, kwargs)


class NoisePreviewAlgorithm(DpgeoAlgorithmBase):
    """Budget-free preview of the DP-DBSCAN noise from the parameters alone."""

    RADIUS = "RADIUS"
    MIN_POINTS = "MIN_POINTS"
    BETA = "BETA"
    ETA = "ETA"
    HISTOGRAM = "HISTOGRAM"
    GAMMA_BOUND = "GAMMA_BOUND"
    SPAN_EXTENT = "SPAN_EXTENT"
    COMPARE = "COMPARE_EPSILONS"
    OUTPUT_HTML = "OUTPUT_HTML"
    # outputs
    GAMMA = "GAMMA"
    MIN_POINTS_PRIME = "MIN_POINTS_PRIME"
    CORE_THRESHOLD = "CORE_THRESHOLD"
    EXTENT_THRESHOLD = "EXTENT_THRESHOLD"
    COUNT_ERROR_95 = "COUNT_ERROR_95"
    N_CELLS = "N_CELLS"
    KAPPA = "KAPPA"
    CELL_WIDTH_M = "CELL_WIDTH_M"
    PREVIEW_JSON = "PREVIEW_JSON"

    #: (output name, key in the dict from dpgeo.noise_preview, description)
    NUMBERS = [
        ("GAMMA", "gamma", "Γ: bound on the noise in a neighbourhood sum"),
        ("MIN_POINTS_PRIME", "min_points_prime", "MinPts′: true neighbourhood count sure to be found"),
        ("CORE_THRESHOLD", "core_threshold", "Core threshold MinPts + Γ (noisy neighbourhood count)"),
        ("EXTENT_THRESHOLD", "extent_threshold", "Extent threshold: noisy count a grown span reaches into"),
        ("COUNT_ERROR_95", "count_error_95", "Expected count error (95%)"),
        ("N_CELLS", "n_cells", "Grid cells in the study area"),
        ("KAPPA", "kappa", "κ: cells in a neighbourhood"),
        ("CELL_WIDTH_M", "cell_width_m", "Cell width (metres)"),
    ]

    def name(self):
        return "noisepreview"

    def displayName(self):  # noqa: N802 (QGIS API)
        return self.tr("Noise preview (DP-DBSCAN, spends no budget)")

    def shortDescription(self):  # noqa: N802 (QGIS API)
        return self.tr("Shows Γ, MinPts′ and the expected count error for given ε, radius and MinPts, "
                       "without reading any data.")

    def shortHelpString(self):  # noqa: N802 (QGIS API)
        return self.tr(
            "<p>Computes, from the parameters and the public study area alone, how much noise DP-DBSCAN "
            "cluster spans would add: the noise bound <b>Γ</b>, the <b>core threshold</b> MinPts + Γ that a cell's "
            "noisy neighbourhood count must reach to make a core cell, the <b>extent threshold</b> a grown span "
            "reaches into (MinPts + Γ<sub>exact</sub>; equal to the core threshold for <i>Core cells only</i>), "
            "<b>MinPts′</b> (a cell with at least this many true neighbours is found with probability 1−β), "
            "and the <b>expected error of a cluster count</b>. No point layer is read, so this spends no privacy "
            "budget: try several ε before choosing one.</p>"
            "<p>Add ε values to <i>Compare ε values</i> to get a table for all of them.</p>"
        )

    def initAlgorithm(self, config=None):  # noqa: N802 (QGIS API)
        self.add_epsilon()
        self.addParameter(_metres_parameter(self.RADIUS, self.tr("DBSCAN radius r (metres)"), 100.0, 1e-6))
        self.addParameter(QgsProcessingParameterNumber(
            self.MIN_POINTS, self.tr("MinPts"), QgsProcessingParameterNumber.Integer, defaultValue=50, minValue=1))
        self.add_study_area(data_fallback=False)
        self.addParameter(QgsProcessingParameterString(
            self.COMPARE, self.tr("Compare ε values (comma-separated, optional)"),
            defaultValue="0.1, 0.5, 1, 2", optional=True))
        self.addParameter(_advanced(QgsProcessingParameterNumber(
            self.BETA, self.tr("β: failure probability of the noise bound Γ"),
            QgsProcessingParameterNumber.Double, defaultValue=0.05, minValue=1e-12, maxValue=0.999999)))
        self.addParameter(_advanced(QgsProcessingParameterNumber(
            self.ETA, self.tr("η′: cell width factor in (0, 1]"),
            QgsProcessingParameterNumber.Double, defaultValue=1.0, minValue=1e-6, maxValue=1.0)))
        self.addParameter(_advanced(QgsProcessingParameterEnum(
            self.HISTOGRAM, self.tr("Noisy histogram"), options=_HISTOGRAMS, defaultValue=0)))
        self.addParameter(_advanced(QgsProcessingParameterEnum(
            self.GAMMA_BOUND, self.tr("Noise bound Γ"), options=_GAMMAS, defaultValue=0)))
        self.addParameter(_extent_parameter(self.SPAN_EXTENT, self.tr))
        from qgis.core import QgsProcessingParameterCrs

        self.addParameter(_advanced(QgsProcessingParameterCrs(
            self.WORKING_CRS, self.tr("Working CRS in metres (default: UTM zone of the study area)"),
            optional=True)))
        self.addParameter(QgsProcessingParameterFileDestination(
            self.OUTPUT_HTML, self.tr("Preview report"), self.tr("HTML files (*.html)"), optional=True,
            createByDefault=True))
        for out, _, desc in self.NUMBERS:
            self.addOutput(QgsProcessingOutputNumber(out, self.tr(desc)))
        self.addOutput(QgsProcessingOutputString(self.PREVIEW_JSON, self.tr("Preview (JSON)")))

    def _compare_values(self, parameters, context, epsilon):
        values = [epsilon]
        if is_set(parameters.get(self.COMPARE)):
            text = self.parameterAsString(parameters, self.COMPARE, context)
            for part in text.replace(";", ",").split(","):
                part = part.strip()
                if not part:
                    continue
                try:
                    v = float(part)
                except ValueError:
                    raise QgsProcessingException(self.tr("'Compare ε values' must be numbers separated by "
                                                         "commas, e.g. 0.1, 0.5, 1; got {!r}.").format(part)) from None
                if v not in values:
                    values.append(v)
        return values

    def processAlgorithm(self, parameters, context, feedback):  # noqa: N802 (QGIS API)
        dpgeo = self.load_dpgeo(feedback)
        epsilon = self.parameterAsDouble(parameters, self.EPSILON, context)
        base = {
            "radius_m": self.parameterAsDouble(parameters, self.RADIUS, context),
            "min_points": self.parameterAsInt(parameters, self.MIN_POINTS, context),
            "beta": self.parameterAsDouble(parameters, self.BETA, context),
            "eta": self.parameterAsDouble(parameters, self.ETA, context),
            "histogram": _HISTOGRAMS[self.parameterAsEnum(parameters, self.HISTOGRAM, context)],
            "gamma": _GAMMAS[self.parameterAsEnum(parameters, self.GAMMA_BOUND, context)],
            "extent": _EXTENTS[self.parameterAsEnum(parameters, self.SPAN_EXTENT, context)][1],
        }
        area = self.study_area(parameters, context, feedback, source=None)
        base["domain"] = area["domain"]
        base["domain_crs"] = area["domain_crs"]
        working = self.working_crs(parameters, context)
        if working:
            base["crs"] = working
        values = self._compare_values(parameters, context, epsilon)
        rows = []
        for i, eps in enumerate(values):
            if feedback.isCanceled():
                raise QgsProcessingException(self.tr("Cancelled by the user."))
            rows.append((eps, self.call_library(dpgeo.noise_preview, feedback, epsilon=eps, **base)))
            feedback.setProgress(100.0 * (i + 1) / len(values))
        main = rows[0][1]
        self._log_table(rows, feedback)

        results = {}
        for out, key, _ in self.NUMBERS:
            value = main.get(key)
            results[out] = float(value) if isinstance(value, (int, float)) else None
        results[self.PREVIEW_JSON] = json.dumps(main, sort_keys=True, default=str)
        if is_set(parameters.get(self.OUTPUT_HTML)):
            path = self.parameterAsFileOutput(parameters, self.OUTPUT_HTML, context)
            if path:
                with open(path, "w", encoding="utf-8") as fh:
                    fh.write(self._html(rows, base))
                results[self.OUTPUT_HTML] = path
        return results

    def _log_table(self, rows, feedback):
        feedback.pushInfo(self.tr("Noise preview (no data read, no budget spent):"))
        header = (f"{'ε':>8} {'Γ':>10} {'core thr.':>10} {'extent thr.':>11} {'MinPts′':>9} "
                  f"{'count error (95%)':>18} {'cells':>10} {'cell width m':>13}")
        feedback.pushInfo(header)
        for eps, d in rows:
            feedback.pushInfo(
                f"{eps:>8g} {_fmt(d.get('gamma')):>10} {_fmt(d.get('core_threshold')):>10} "
                f"{_fmt(d.get('extent_threshold')):>11} {_fmt(d.get('min_points_prime')):>9} "
                f"{_fmt(d.get('count_error_95')):>18} {_fmt(d.get('n_cells')):>10} {_fmt(d.get('cell_width_m')):>13}"
            )
        feedback.pushInfo(self.tr("Full preview for ε = {}: {}").format(
            rows[0][0], json.dumps(rows[0][1], sort_keys=True, default=str)))

    def _html(self, rows, base):
        cols = [("ε", None), ("Γ", "gamma"), ("core threshold", "core_threshold"),
                ("extent threshold", "extent_threshold"), ("MinPts′", "min_points_prime"),
                ("count error (95%)", "count_error_95"), ("grid cells", "n_cells"), ("κ", "kappa"),
                ("cell width (m)", "cell_width_m"), ("histogram", "histogram")]
        head = "".join(f"<th>{html.escape(c)}</th>" for c, _ in cols)
        body = ""
        for eps, d in rows:
            cells = [f"{eps:g}"] + [_fmt(d.get(k)) for _, k in cols[1:]]
            body += "<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in cells) + "</tr>"
        return (
            "<html><head><meta charset='utf-8'><title>dpgeo noise preview</title></head><body>"
            "<h2>DP-DBSCAN noise preview</h2>"
            f"<p>radius {base['radius_m']:g} m, MinPts {base['min_points']}, β {base['beta']:g}, "
            f"η′ {base['eta']:g}, Γ {html.escape(base['gamma'])}, span extent {html.escape(base['extent'])}. "
            "No data was read and no privacy budget was spent.</p>"
            f"<table border='1' cellpadding='4' cellspacing='0'><tr>{head}</tr>{body}</table>"
            "<p>Γ bounds the noise in a neighbourhood sum with probability 1−β; a cell is core when its noisy "
            "neighbourhood count reaches the core threshold MinPts + Γ. With the <i>grown</i> span extent, each "
            "cluster also takes in neighbouring cells whose noisy count reaches the extent threshold, without "
            "joining two clusters. A cell with at least MinPts′ true neighbours is found with probability 1−β. "
            "If MinPts′ or the count error is large compared with the cluster sizes you expect, choose a larger "
            "ε or a larger radius.</p></body></html>"
        )


def _fmt(v):
    if v is None:
        return "—"
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return f"{v:.4g}" if abs(v) < 1e6 else f"{v:.3e}"
    return str(v)


ALGORITHMS = [DbscanSpansAlgorithm, WaveClusterAlgorithm, KMeansAlgorithm, NoisePreviewAlgorithm]
