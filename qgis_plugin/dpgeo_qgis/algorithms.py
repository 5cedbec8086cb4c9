"""The dpgeo Processing algorithms, generated from the library's mechanism declarations.

Every mechanism the library declares (:mod:`dpgeo.pipeline.registry`: DP-DBSCAN
spans, DP WaveCluster, DP k-means, the noise preview, ...) becomes one
algorithm: :class:`DeclaredAlgorithm` takes its name, title, help and
parameters from the declaration (:mod:`.declared`) and runs it through the
library's one release pipeline; :class:`PreviewAlgorithm` does the same for a
mechanism that reads no data (the budget-free noise preview). The plugin adds
only what belongs to QGIS: the layers, the study area's widgets, the ledger
fields and the output.
"""

from __future__ import annotations

import html
import json
import os

from qgis.core import (
    QgsProcessingException,
    QgsProcessingOutputNumber,
    QgsProcessingOutputString,
    QgsProcessingParameterCrs,
    QgsProcessingParameterDefinition,
    QgsProcessingParameterFileDestination,
    QgsProcessingParameterNumber,
    QgsProcessingParameterString,
)

from .base import DpgeoAlgorithmBase
from .declared import help_html, param_values, qgis_parameter
from .deps import DpgeoImportError, import_dpgeo
from .parameters import is_set, tr

__all__ = ["DeclaredAlgorithm", "PreviewAlgorithm", "algorithms"]

_STUDY_AREA_NOTE = (
    "<p><b>Public study area</b>: an extent or a polygon layer (e.g. the city boundary) known without looking "
    "at the data; the grid is laid over it. If none is given, the private layer's own extent is used: that "
    "reads the data without protection, so the result is marked <b>not private</b> and the log says why.</p>"
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

_PREVIEW_TIP = ("<p>Run <i>{}</i> first to see the noise bounds and the count error for your ε — it costs no "
                "privacy budget.</p>")


def _advanced(p):
    p.setFlags(p.flags() | QgsProcessingParameterDefinition.FlagAdvanced)
    return p


class DeclaredAlgorithm(DpgeoAlgorithmBase):
    """The algorithm of one declared mechanism that reads a private point layer."""

    MAX_POINTS_PER_RECORD = "MAX_POINTS_PER_RECORD"

    def __init__(self, mechanism, preview_title=None):
        super().__init__()
        self.mechanism = mechanism
        self.result_title = mechanism.layer_name
        self._preview_title = preview_title

    def createInstance(self):  # noqa: N802 (QGIS API)
        return type(self)(self.mechanism, self._preview_title)

    def name(self):
        return self.mechanism.qgis_id

    def displayName(self):  # noqa: N802 (QGIS API)
        return tr(self.mechanism.title)

    def shortDescription(self):  # noqa: N802 (QGIS API)
        return tr(self.mechanism.summary)

    def shortHelpString(self):  # noqa: N802 (QGIS API)
        tip = _PREVIEW_TIP.format(html.escape(tr(self._preview_title))) if self._preview_title else ""
        return tr(help_html(self.mechanism, tip + _STUDY_AREA_NOTE + _PRIVACY_NOTE))

    def initAlgorithm(self, config=None):  # noqa: N802 (QGIS API)
        params = self.mechanism.offered("qgis")
        self.add_input()
        self.add_epsilon()
        self.add_budget_params()
        self.add_person_params()
        for p in params:
            if not p.advanced:
                self.addParameter(qgis_parameter(p))
        self.add_study_area()
        self.add_crs_params()
        for p in params:
            if p.advanced:
                self.addParameter(qgis_parameter(p))
        self.addParameter(_advanced(QgsProcessingParameterNumber(
            self.MAX_POINTS_PER_RECORD, self.tr("Maximum points per record (sensitivity)"),
            QgsProcessingParameterNumber.Integer, defaultValue=1, minValue=1)))
        self.add_seed()
        self.add_output()

    def processAlgorithm(self, parameters, context, feedback):  # noqa: N802 (QGIS API)
        dpgeo = self.load_dpgeo(feedback)
        from dpgeo.declare import Values

        mech = self.mechanism
        kwargs = param_values(self, mech, parameters, context)
        p = Values(kwargs)
        # a method that adds no noise takes no ε (and is not charged)
        kwargs["epsilon"] = self.parameterAsDouble(parameters, self.EPSILON, context) if mech.needs_epsilon(p) \
            else None
        sensitivity = self.optional_int(parameters, self.MAX_POINTS_PER_RECORD, context)
        if sensitivity is not None and sensitivity != 1:
            kwargs["sensitivity"] = sensitivity
        if not mech.is_private(p):
            feedback.reportError(self.tr("{} adds no noise: the result is NOT private.").format(
                mech.short_title(p)), False)
        return self.run_points_algorithm(parameters, context, feedback, _library_call(dpgeo, mech), kwargs)


def _library_call(dpgeo, mech):
    """The library function that runs ``mech``: its entry point in ``dpgeo`` if it has one, else the pipeline."""
    if mech.entry_point and hasattr(dpgeo, mech.entry_point):
        return getattr(dpgeo, mech.entry_point)
    from dpgeo.pipeline.run import run_preview, run_release

    if mech.reads is None:
        return lambda **kw: run_preview(mech, kw)
    return lambda points, **kw: run_release(mech, points, kw)


class PreviewAlgorithm(DpgeoAlgorithmBase):
    """The algorithm of a declared mechanism that reads no data: what a release would look like, for free."""

    COMPARE = "COMPARE_EPSILONS"
    OUTPUT_HTML = "OUTPUT_HTML"
    PREVIEW_JSON = "PREVIEW_JSON"
    #: (output name, key in the preview, description, column heading)
    NUMBERS = [
        ("GAMMA", "gamma", "Γ: bound on the noise in a neighbourhood sum", "Γ"),
        ("CORE_THRESHOLD", "core_threshold", "Core threshold MinPts + Γ (noisy neighbourhood count)",
         "core threshold"),
        ("EXTENT_THRESHOLD", "extent_threshold", "Extent threshold: noisy count a grown span reaches into",
         "extent threshold"),
        ("MIN_POINTS_PRIME", "min_points_prime", "MinPts′: true neighbourhood count sure to be found", "MinPts′"),
        ("COUNT_ERROR_95", "count_error_95", "Expected count error (95%)", "count error (95%)"),
        ("N_CELLS", "n_cells", "Grid cells in the study area", "grid cells"),
        ("KAPPA", "kappa", "κ: cells in a neighbourhood", "κ"),
        ("CELL_WIDTH_M", "cell_width_m", "Cell width (metres)", "cell width (m)"),
    ]

    def __init__(self, mechanism):
        super().__init__()
        self.mechanism = mechanism

    def createInstance(self):  # noqa: N802 (QGIS API)
        return type(self)(self.mechanism)

    def name(self):
        return self.mechanism.qgis_id

    def displayName(self):  # noqa: N802 (QGIS API)
        return tr(self.mechanism.title)

    def shortDescription(self):  # noqa: N802 (QGIS API)
        return tr(self.mechanism.summary)

    def shortHelpString(self):  # noqa: N802 (QGIS API)
        return tr(help_html(self.mechanism, "<p>No point layer is read, so this spends no privacy budget: try "
                                            "several ε before choosing one. Add ε values to <i>Compare ε values</i> "
                                            "to get a table for all of them.</p>"))

    def initAlgorithm(self, config=None):  # noqa: N802 (QGIS API)
        params = self.mechanism.offered("qgis")
        self.add_epsilon()
        for p in params:
            if not p.advanced:
                self.addParameter(qgis_parameter(p))
        self.add_study_area(data_fallback=False)
        self.addParameter(QgsProcessingParameterString(
            self.COMPARE, self.tr("Compare ε values (comma-separated, optional)"),
            defaultValue="0.1, 0.5, 1, 2", optional=True))
        for p in params:
            if p.advanced:
                self.addParameter(qgis_parameter(p))
        self.addParameter(_advanced(QgsProcessingParameterCrs(
            self.WORKING_CRS, self.tr("Working CRS in metres (default: UTM zone of the study area)"),
            optional=True)))
        self.addParameter(QgsProcessingParameterFileDestination(
            self.OUTPUT_HTML, self.tr("Preview report"), self.tr("HTML files (*.html)"), optional=True,
            createByDefault=True))
        for out, _, desc, _ in self.NUMBERS:
            self.addOutput(QgsProcessingOutputNumber(out, self.tr(desc)))
        self.addOutput(QgsProcessingOutputString(self.PREVIEW_JSON, self.tr("Preview (JSON)")))

    def _compare_values(self, parameters, context, epsilon):
        values = [epsilon]
        # not given at all (qgis_process, processing.run): the default list; given empty: none
        given = self.COMPARE in parameters
        text = self.parameterAsString(parameters, self.COMPARE, context) \
            if not given or is_set(parameters.get(self.COMPARE)) else ""
        if text:
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
        preview = _library_call(self.load_dpgeo(feedback), self.mechanism)
        epsilon = self.parameterAsDouble(parameters, self.EPSILON, context)
        base = param_values(self, self.mechanism, parameters, context)
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
            rows.append((eps, self.call_library(preview, feedback, **base, epsilon=eps)))
            feedback.setProgress(100.0 * (i + 1) / len(values))
        main = rows[0][1]
        self._log_table(rows, feedback)

        results = {}
        for out, key, _, _ in self.NUMBERS:
            value = main.get(key)
            results[out] = float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
        results[self.PREVIEW_JSON] = json.dumps(main, sort_keys=True, default=str)
        if is_set(parameters.get(self.OUTPUT_HTML)):
            path = self.parameterAsFileOutput(parameters, self.OUTPUT_HTML, context)
            if path:
                with open(path, "w", encoding="utf-8") as fh:
                    fh.write(self._html(rows, base))
                results[self.OUTPUT_HTML] = path
        return results

    def _columns(self, rows):
        """The preview's numbers that every row has, as (heading, key)."""
        return [(head, key) for _, key, _, head in self.NUMBERS if any(key in d for _, d in rows)]

    def _log_table(self, rows, feedback):
        feedback.pushInfo(self.tr("Noise preview (no data read, no budget spent):"))
        cols = self._columns(rows)
        heads = [head.replace("threshold", "thr.") for head, _ in cols]
        widths = [max(len(h), 10) for h in heads]
        feedback.pushInfo(f"{'ε':>8} " + " ".join(f"{h:>{w}}" for h, w in zip(heads, widths)))
        for eps, d in rows:
            feedback.pushInfo(f"{eps:>8g} " + " ".join(f"{_fmt(d.get(key)):>{w}}" for (_, key), w in zip(cols, widths)))
        feedback.pushInfo(self.tr("Full preview for ε = {}: {}").format(
            rows[0][0], json.dumps(rows[0][1], sort_keys=True, default=str)))

    def _html(self, rows, base):
        cols = [("ε", None)] + self._columns(rows)
        head = "".join(f"<th>{html.escape(c)}</th>" for c, _ in cols)
        body = ""
        for eps, d in rows:
            cells = [f"{eps:g}"] + [_fmt(d.get(k)) for _, k in cols[1:]]
            body += "<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in cells) + "</tr>"
        given = ", ".join(f"{html.escape(p.title)} {html.escape(_fmt(base.get(p.name)))}"
                          for p in self.mechanism.offered("qgis") if base.get(p.name) is not None)
        return (
            "<html><head><meta charset='utf-8'><title>dpgeo noise preview</title></head><body>"
            f"<h2>{html.escape(self.mechanism.title)}</h2>"
            f"<p>{given}. No data was read and no privacy budget was spent.</p>"
            f"<table border='1' cellpadding='4' cellspacing='0'><tr>{head}</tr>{body}</table>"
            f"<p>{html.escape(self.mechanism.description)}</p></body></html>"
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


class UnavailableAlgorithm(DpgeoAlgorithmBase):
    """An algorithm of the library that cannot be imported: listed, and refusing to run with the fix."""

    def __init__(self, name, title):
        super().__init__()
        self._name, self._title = name, title

    def createInstance(self):  # noqa: N802 (QGIS API)
        return type(self)(self._name, self._title)

    def name(self):
        return self._name

    def displayName(self):  # noqa: N802 (QGIS API)
        return tr(self._title)

    def initAlgorithm(self, config=None):  # noqa: N802 (QGIS API)
        pass

    def processAlgorithm(self, parameters, context, feedback):  # noqa: N802 (QGIS API)
        self.load_dpgeo(feedback)  # raises the message that says how to install the library
        raise QgsProcessingException(self.tr("The dpgeo library was installed after QGIS started; restart QGIS."))


def _offered():
    """The algorithms of the library as last generated (``offered.json``, see ``dev/update-generated``)."""
    path = os.path.join(os.path.dirname(__file__), "offered.json")
    with open(path, encoding="utf-8") as fh:
        return [(a["name"], a["title"]) for a in json.load(fh)]


def algorithms():
    """One algorithm per mechanism the library declares for QGIS; without the library, placeholders that say how
    to install it."""
    try:
        import_dpgeo()
    except DpgeoImportError:
        return [UnavailableAlgorithm(name, title) for name, title in _offered()]
    from dpgeo.pipeline.registry import MECHANISMS

    offered = [m for m in MECHANISMS if m.qgis_id and "qgis" in m.fronts]
    preview = next((m.title for m in offered if m.reads is None), None)
    return [PreviewAlgorithm(m) if m.reads is None else DeclaredAlgorithm(m, preview) for m in offered]
