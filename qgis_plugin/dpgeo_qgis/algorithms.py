"""The dpgeo Processing algorithms, generated from the library's mechanism declarations.

Every mechanism the library declares (:mod:`dpgeo.declarations.registry`: DP-DBSCAN
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


from qgis.core import QgsProcessingException

from .base import DeclaredBase, DpgeoAlgorithmBase
from .declared import help_html, library_call, param_values
from .deps import DpgeoImportError, import_dpgeo
from .parameters import tr

__all__ = ["DeclaredAlgorithm", "UnavailableAlgorithm", "algorithms"]

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

_PREVIEW_TIP = ("<p>Run <i>{}</i> first to see the noise bounds and the count error for your ε — it costs no "
                "privacy budget.</p>")


class DeclaredAlgorithm(DeclaredBase):
    """The algorithm of one declared mechanism that reads a private point layer."""

    def __init__(self, mechanism, preview_title=None):
        super().__init__(mechanism, preview_title)
        self.result_title = mechanism.layer_name
        self._preview_title = preview_title

    def shortHelpString(self):  # noqa: N802 (QGIS API)
        tip = _PREVIEW_TIP.format(html.escape(tr(self._preview_title))) if self._preview_title else ""
        return tr(help_html(self.mechanism, tip + _STUDY_AREA_NOTE + _PRIVACY_NOTE))

    def initAlgorithm(self, config=None):  # noqa: N802 (QGIS API)
        self.add_input()
        self.add_shared(advanced=False)
        self.add_declared(advanced=False)
        self.add_series_params()
        self.add_study_area()
        self.add_output_crs()
        self.add_shared(advanced=True)
        self.add_declared(advanced=True)
        self.add_output()
        self.add_declared_outputs()

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
            kwargs["max_points_per_record"] = sensitivity
        if not mech.is_private(p):
            feedback.reportError(self.tr("{} adds no noise: the result is NOT private.").format(
                mech.short_title(p)), False)
        return self.run_points_algorithm(parameters, context, feedback, library_call(dpgeo, mech), kwargs)


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
    from dpgeo.declarations.registry import MECHANISMS

    offered = [m for m in MECHANISMS if m.qgis_id and "qgis" in m.fronts]
    from .preview import PreviewAlgorithm

    preview = next((m.title for m in offered if m.reads is None), None)
    return [PreviewAlgorithm(m) if m.reads is None else DeclaredAlgorithm(m, preview) for m in offered]
