"""The base class of the dpgeo Processing algorithms.

Everything here is conversion between QGIS and the dpgeo library: QGIS
layers to coordinate arrays, QGIS parameters to library keyword arguments,
the library's cluster layer to QGIS features, and the library's privacy
metadata to QGIS layer metadata. There is no privacy mechanism in the plugin.
The parts live in their own modules and are mixed in here: parameters
(:mod:`.parameters`), the privacy-budget ledger (:mod:`.ledger`), reading the
point layer (:mod:`.reading`), running the library (:mod:`.running`) and
writing the output (:mod:`.writing`).
"""

from __future__ import annotations

from qgis.core import QgsProcessingAlgorithm, QgsProcessingException

from .declared import is_layer_output, qgis_parameter, shared_params, shared_widget
from .deps import DpgeoImportError, import_dpgeo
from .ledger import LedgerMixin
from .parameters import ParametersMixin, exact, tr
from .reading import ReadingMixin
from .resources import plugin_icon
from .running import Cancelled, RunningMixin
from .writing import WritingMixin

__all__ = ["DpgeoAlgorithmBase", "DeclaredBase"]


class DpgeoAlgorithmBase(ParametersMixin, LedgerMixin, ReadingMixin, RunningMixin, WritingMixin,
                         QgsProcessingAlgorithm):
    """Base of the dpgeo algorithms: parameters shared by all of them and the run plumbing."""

    #: Title used for the result layer (subclasses override).
    result_title = "dpgeo clusters"

    def __init__(self):
        super().__init__()
        self._dest_id = None
        self._results = {}
        self._metadata = None
        self._summary = ""
        self._ledger_path = None

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
        return plugin_icon()

    def helpUrl(self):  # noqa: N802 (QGIS API)
        return "https://github.com/dpgeo/dpgeo/blob/main/docs/qgis.md"

    def canExecute(self):  # noqa: N802 (QGIS API)
        try:
            import_dpgeo()
        except DpgeoImportError as err:
            return False, str(err)
        return True, ""

    # -- a run -------------------------------------------------------------------
    def is_private_run(self, kwargs, area, seed, person_field, cap, time_field, series):
        """Whether the library will call this run private (and charge it): its rule, asked before any data is
        read (:func:`dpgeo.pipeline.run.is_private_run`)."""
        from dpgeo.errors import DpgeoError
        from dpgeo.pipeline.run import is_private_run

        values = {**kwargs, **area, "seed": seed}
        if person_field:
            values.update(person=person_field, max_points_per_person=cap)
        if time_field:
            values.update(series, time=time_field)
        try:
            return is_private_run(self.mechanism, values)
        except DpgeoError as err:
            raise QgsProcessingException(str(err)) from err

    def run_points_algorithm(self, parameters, context, feedback, func, kwargs):
        """Check, read the points, run ``func(points, **kwargs)`` and write the sink.

        Everything that can be checked without the private points is checked
        first (parameters, output path, study area, the dataset's privacy
        budget): a refused run reads nothing. The library then charges the
        release once, in its own ledger transaction.
        """
        source = self.parameterAsSource(parameters, self.INPUT, context)
        if source is None:
            raise QgsProcessingException(self.invalidSourceError(parameters, self.INPUT))
        person_field, cap = self.person_kwargs(parameters, context)
        time_field, series = self.series_kwargs(parameters, context)
        if person_field and kwargs.get("max_points_per_record", 1) != 1:
            raise QgsProcessingException(self.tr(
                "With a person field, bound each person's points with 'Maximum points per person' and leave "
                "'Maximum points per record' at 1."))
        self.check_output_not_input(parameters, context)
        area = self.study_area(parameters, context, feedback, source)
        if area["domain_from_data"]:  # the library derives the extent from the points themselves
            area = {"domain": None, "domain_from_data": True}
        seed = self.optional_int(parameters, self.SEED, context)
        private = self.is_private_run(kwargs, area, seed, person_field, cap, time_field, series)
        kwargs.update(self.check_budget(parameters, context, feedback, epsilon=kwargs.get("epsilon"),
                                        private=private))
        try:
            x, y, crs, n_null, person, n_no_person, *times = self.read_input(parameters, context, feedback,
                                                                             source, person_field, time_field)
        except Cancelled:
            raise QgsProcessingException(self.tr("Cancelled by the user; nothing was written.")) from None
        if n_null:
            feedback.pushInfo(exact(self.tr("{} features without a point geometry were skipped.").format(n_null)))
        if n_no_person:
            feedback.pushInfo(exact(self.tr("{} features without a person (NULL in {!r}) were skipped.").format(
                n_no_person, person_field)))
        if person_field:
            import pandas as pd

            # named, so the published metadata says which field identifies a person
            kwargs["person"] = pd.Series(person, name=person_field, dtype=object)
            kwargs["max_points_per_person"] = cap
        if x.size == 0:
            raise QgsProcessingException(self.tr("The point layer has no points (after skipping empty geometries)."))
        if time_field:  # a map series: the library reads the times, the periods come from the public bounds
            kwargs.update(series, time=times[0])
            feedback.pushInfo(self.tr("Map series: one release per {} from {} to {} ({}).").format(
                series["period"], series["period_start"], series["period_end"], series["timezone"]))
        kwargs.update(area)
        working = self.working_crs(parameters, context)
        if working:
            kwargs["crs"] = working
        if seed is not None:
            kwargs["seed"] = seed
            feedback.reportError(self.tr("A test seed was given: the noise is reproducible, so this result is "
                                         "NOT differentially private."), False)
        kwargs["progress"] = self.progress_callback(feedback)
        result = self.call_library(func, feedback, (x, y, crs), **kwargs)
        if feedback.isCanceled():
            raise QgsProcessingException(self.tr("Cancelled by the user; nothing was written."))
        return self.write_result(result, parameters, context, feedback)


class DeclaredBase(DpgeoAlgorithmBase):
    """What every algorithm of a declared mechanism takes from its declaration: name, title, description and
    the declared parameters."""

    def __init__(self, mechanism, *extra):
        super().__init__()
        self.mechanism = mechanism
        self._extra = extra

    def createInstance(self):  # noqa: N802 (QGIS API)
        return type(self)(self.mechanism, *self._extra)

    def name(self):
        return self.mechanism.qgis_id

    def displayName(self):  # noqa: N802 (QGIS API)
        return tr(self.mechanism.title)

    def shortDescription(self):  # noqa: N802 (QGIS API)
        return tr(self.mechanism.summary)

    def add_shared(self, advanced: bool, names=None):
        """The shared parameters every release takes (ε, the person field and cap, points per record, the working
        CRS, the seed, the dataset and ledger), as declared in ``dpgeo.shared_params``: title, help, range, default
        and advanced flag from the declaration; only the widgets are QGIS's own (:func:`shared_widget`).
        ``names`` limits them (a preview takes fewer)."""
        for p in shared_params():
            if p.advanced == advanced and (names is None or p.name in names):
                self.add_generated(shared_widget(p))

    def add_declared(self, advanced: bool):
        """The declared parameters offered in QGIS, the main ones or the advanced ones (not the output layers)."""
        for p in self.mechanism.offered("qgis"):
            if p.advanced == advanced and not is_layer_output(p):
                self.add_generated(qgis_parameter(p))

    def add_declared_outputs(self):
        """The second layers of a release the user may ask for (declared flags with a ``layer_style``), as
        optional output layers."""
        for p in self.mechanism.offered("qgis"):
            if is_layer_output(p):
                self.add_generated(qgis_parameter(p))
