"""The privacy-budget ledger in the dialog: dataset name, ledger file, the budget left, refusal before reading.

The plugin never charges anything itself: the library charges each private
run once, in its own ledger transaction (``dataset=``, ``ledger=`` of
``dpgeo.dbscan_spans`` / ``dpgeo.wavecluster``). What the plugin adds is
what a dialog needs: the dataset (the name the owner gives, checked against
the input file's content; else the declared dataset the file holds, found by
the library from its content; said in the log), the budget spent and left,
logged before the run, and a refusal before any point is read when the run
would take the dataset past its declared total. The library checks the
total again when it charges (under the ledger's lock), so two runs started
at once can never overspend.
"""

from __future__ import annotations

import os

from qgis.core import (
    QgsProcessingException,
    QgsProviderRegistry,
)

from .deps import import_dpgeo
from .parameters import is_set, tr

__all__ = ["LedgerMixin", "budget_after_line"]


def _fmt(value) -> str:
    from dpgeo.budget import format_exact

    return format_exact(value)


def budget_after_line(md: dict, record: dict | None = None) -> str | None:
    """One log line on the dataset's budget after a release (None when nothing was charged).

    ``record`` is the release's owner-side ledger record (``Release.ledger_record``): it names the dataset
    even when the release publishes no name.
    """
    if md.get("dataset_spent_epsilon") is None:
        return None
    name = (record or {}).get("dataset") or md.get("dataset")
    spent = md.get("dataset_spent_epsilon_exact", f"{md['dataset_spent_epsilon']:g}")
    total = md.get("dataset_total_epsilon")
    if total is None:
        return tr("Privacy budget of dataset {!r} after this release: ε {} spent so far, no total declared: nothing "
                  "limits its spending.").format(name, spent)
    left = max(total - md["dataset_spent_epsilon"], 0.0)
    return tr("Privacy budget of dataset {!r} after this release: ε {} of {:g} spent, {:.6g} left.").format(
        name, spent, total, left)


class LedgerMixin:
    """Dataset and ledger parameters and the pre-run budget check: mixed into the algorithm base."""

    DATASET = "DATASET"
    LEDGER = "LEDGER"

    def _has_parameter(self, name) -> bool:
        return self.parameterDefinition(name) is not None

    def ledger_file(self, parameters, context):
        """The ledger path the owner chose, or None for the default ledger."""
        if not self._has_parameter(self.LEDGER) or not is_set(parameters.get(self.LEDGER)):
            return None
        path = self.parameterAsFile(parameters, self.LEDGER, context)
        return os.path.abspath(os.path.expanduser(path)) if path else None

    def input_file(self, parameters, context):
        """The file behind the input layer (resolved), or None for a layer that is not a file."""
        layer = self._input_layer(parameters, context)
        if layer is None:
            return None
        try:
            parts = QgsProviderRegistry.instance().decodeUri(layer.providerType(), layer.source())
        except Exception:
            return None
        path = parts.get("path") or ""
        return os.path.realpath(path) if path and os.path.isfile(path) else None

    def dataset_choice(self, parameters, context, record=True):
        """``(choice, notes)``: the dataset this run is charged to (a ``dpgeo.release.DatasetChoice``) and what
        to tell the owner about it.

        The library decides, as for the command line: a named dataset is checked against the input file's
        content; without a name, a file whose content is a declared dataset is charged to that dataset, any
        other file to a key of its content (shared by its copies), and a layer that is not a file to the shared
        in-memory key. ``record=False`` (the dialog's live line) records nothing in the ledger.
        """
        from dpgeo.release import choose_dataset

        name = None
        if self._has_parameter(self.DATASET) and is_set(parameters.get(self.DATASET)):
            name = self.parameterAsString(parameters, self.DATASET, context).strip() or None
        choice = choose_dataset(self.input_file(parameters, context), name,
                                ledger=self.ledger_file(parameters, context), record=record)
        return choice, list(choice.notes)

    def check_budget(self, parameters, context, feedback, *, epsilon, private):
        """Log the dataset's budget and refuse a run beyond its total, before any data is read.

        Returns the library keyword arguments ``dataset`` and ``ledger``.
        Runs that are not private (a test seed, a study area from the data,
        the exact reference) are not charged and never refused.
        """
        import_dpgeo()
        from dpgeo.budget import Ledger, exact_value
        from dpgeo.errors import DpgeoError

        try:
            choice, notes = self.dataset_choice(parameters, context)
            ledger = Ledger(self.ledger_file(parameters, context))
            budget = ledger.budget(choice.key)
        except DpgeoError as err:  # LedgerError: corrupt, locked, newer dpgeo; ParameterError: a bad or wrong name
            raise QgsProcessingException(str(err)) from err
        for note in notes:
            feedback.pushInfo(note)
        key = choice.key
        self._ledger_path = ledger.path
        spent, total, left = budget.spent_epsilon, budget.total_epsilon, budget.left_epsilon
        where = self.tr("privacy budget of dataset {!r} (ledger {})").format(key, ledger.path)
        state = self._state(budget)
        if not private or epsilon is None:
            feedback.pushInfo(self.tr("This run is NOT differentially private, so it is not charged to the {}: "
                                      "{}.").format(where, state))
            return {"dataset": choice, "ledger": ledger.path}
        eps = exact_value(epsilon)
        if total is not None and spent + eps > total:
            raise QgsProcessingException(self.tr(
                "Refused: the {} has a total of ε = {}; ε {} is spent and {} is left, so this run (ε = {}) would "
                "exceed it. Nothing was read or written. Use ε ≤ {}, or the data owner raises the total "
                "(dpgeo budget set NAME --total EPSILON).").format(
                where, _fmt(total), _fmt(spent), _fmt(left), _fmt(eps), _fmt(left)))
        feedback.pushInfo(self.tr("Before this run, the {}: {}. This run spends ε {}.").format(
            where, state, _fmt(eps)))
        return {"dataset": choice, "ledger": ledger.path}

    def _state(self, budget) -> str:
        """What a dataset has spent and has left, in words."""
        if budget.total_epsilon is None:
            return self.tr("ε {} spent in {} release(s), no total declared: nothing limits its spending (declare "
                           "the dataset once: dpgeo budget declare NAME --file FILE --total EPSILON)").format(
                _fmt(budget.spent_epsilon), budget.n_charged)
        return self.tr("ε {} of {} spent, {} left").format(_fmt(budget.spent_epsilon), _fmt(budget.total_epsilon),
                                                          _fmt(budget.left_epsilon))

    def _exact_method(self, method) -> bool:
        """Whether a METHOD value picks a method that adds no noise (WaveCluster's 'exact')."""
        methods = getattr(self, "METHODS", None)
        try:
            return bool(methods) and methods[int(method)][1] == "exact"
        except (TypeError, ValueError, IndexError):
            return False

    def budget_status(self, parameters, context) -> str:
        """One line for the dialog: the dataset's budget and whether a run with these parameters fits.

        Reads the ledger only; raises what the ledger raises (the caller shows it).
        """
        import_dpgeo()
        from dpgeo.budget import Ledger, exact_value

        choice, _ = self.dataset_choice(parameters, context, record=False)
        key = choice.key
        ledger = Ledger(self.ledger_file(parameters, context))
        budget = ledger.budget(key)
        line = self.tr("Dataset {!r}: {}.").format(key, self._state(budget))
        not_private = is_set(parameters.get(self.SEED)) or self._exact_method(parameters.get("METHOD"))
        epsilon = parameters.get(self.EPSILON)
        if not_private:
            return line + " " + self.tr("This run is not private: it is not charged.")
        try:
            eps = exact_value(float(epsilon))
        except Exception:  # not a number yet (the dialog is being filled in)
            return line
        if budget.total_epsilon is not None and budget.spent_epsilon + eps > budget.total_epsilon:
            return line + " " + self.tr("A run with ε = {} would exceed the total: it will be refused.").format(
                _fmt(eps))
        return line + " " + self.tr("This run spends ε {}.").format(_fmt(eps))

    def record_outputs(self, metadata, paths, feedback):
        """Add the files written to the release's ledger record (spends nothing)."""
        if metadata.get("dataset_spent_epsilon") is None or not paths or not getattr(self, "_ledger_path", None):
            return
        from dpgeo.budget import Ledger
        from dpgeo.errors import DpgeoError

        try:
            Ledger(self._ledger_path).add_outputs(metadata["release_id"], [os.path.abspath(p) for p in paths])
        except DpgeoError as err:
            feedback.pushWarning(str(err))
