"""Running the dpgeo library from an algorithm: progress, cancelling, errors and warnings in QGIS terms."""

from __future__ import annotations

import os
import warnings

from qgis.core import QgsProcessingException

from .deps import DpgeoImportError, import_dpgeo

__all__ = ["Cancelled", "RunningMixin"]

#: Fraction of the progress bar used by each stage of a run.
_READ, _LIBRARY, _WRITE = 0.15, 0.80, 0.05


class Cancelled(Exception):
    """Raised from the progress callback when the user cancels."""


class RunningMixin:
    """Calling the library with feedback: mixed into :class:`~.base.DpgeoAlgorithmBase`."""

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
