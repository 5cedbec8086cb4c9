"""The dataset name's widget in the algorithm dialog: a text box and, under it, the dataset's budget, live.

Used only by the Processing dialogs (the widget is named in the parameter's
``widget_wrapper`` metadata, so this module is imported only when a dialog
is built, never by ``qgis_process`` or ``processing.run``). The line under
the text box follows the dataset name, the input layer (whose path is the
default name), the ledger file and ε, and says what is spent and left and
whether this run would fit. It only reads the ledger; the run itself checks
again and refuses beyond the total.
"""

from __future__ import annotations

from qgis.core import QgsProcessingContext, QgsProject
from qgis.PyQt.QtWidgets import QLabel, QLineEdit, QVBoxLayout, QWidget

try:
    from processing.gui.wrappers import DIALOG_STANDARD, WidgetWrapper
except ImportError:  # a Python without QGIS's Processing plugin on its path builds no dialog
    DIALOG_STANDARD, WidgetWrapper = None, object

__all__ = ["DatasetWidgetWrapper"]


class DatasetWidgetWrapper(WidgetWrapper):
    """A line edit for the dataset name with the dataset's privacy budget shown under it."""

    #: Parameters whose values change what the budget line says.
    WATCHED = ("INPUT", "LEDGER", "EPSILON", "SEED", "METHOD")

    def createWidget(self, **kwargs):  # noqa: N802 (QGIS API)
        self.edit = QLineEdit()
        self.edit.setPlaceholderText(self.tr("the input file's path"))
        self.edit.textChanged.connect(lambda _: self.widgetValueHasChanged.emit(self))
        self.edit.textChanged.connect(lambda _: self.refresh_budget())
        self.budget_label = None
        if self.dialogType != DIALOG_STANDARD:
            return self.edit
        box = QWidget()
        layout = QVBoxLayout(box)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.edit)
        self.budget_label = QLabel()
        self.budget_label.setWordWrap(True)
        self.budget_label.setObjectName("dpgeo_budget_label")
        layout.addWidget(self.budget_label)
        return box

    def setValue(self, value):  # noqa: N802 (QGIS API)
        self.edit.setText("" if value is None else str(value))

    def value(self):
        text = self.edit.text().strip()
        return text or None

    def postInitialize(self, wrappers):  # noqa: N802 (QGIS API)
        self._others = {}
        for w in wrappers:
            name = w.parameterDefinition().name()
            if name in self.WATCHED:
                self._others[name] = w
                w.widgetValueHasChanged.connect(lambda *_: self.refresh_budget())
        self.refresh_budget()

    def _parameters(self):
        params = {"DATASET": self.value()}
        for name, w in getattr(self, "_others", {}).items():
            try:
                params[name] = w.parameterValue() if hasattr(w, "parameterValue") else w.value()
            except Exception:  # a half-typed value: leave it out
                continue
        return params

    def refresh_budget(self):
        """Recompute the line under the text box (never raises: the dialog must stay usable)."""
        if self.budget_label is None:
            return
        algorithm = getattr(self.dialog, "algorithm", lambda: None)()
        if algorithm is None or not hasattr(algorithm, "budget_status"):
            return
        context = QgsProcessingContext()
        context.setProject(QgsProject.instance())
        try:
            text = algorithm.budget_status(self._parameters(), context)
        except Exception as exc:  # e.g. no dpgeo: the algorithm says so when it runs
            text = self.tr("Privacy budget unknown: {}").format(exc)
        self.budget_label.setText(text)
