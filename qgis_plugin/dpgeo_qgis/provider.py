"""The "dpgeo" Processing provider."""

from __future__ import annotations

from qgis.core import QgsProcessingProvider

from .algorithms import algorithms
from .resources import ICON_PATH, plugin_icon, plugin_version

__all__ = ["DpgeoProvider", "PROVIDER_ID"]

#: Provider id: algorithms are called ``dpgeo:<name>``.
PROVIDER_ID = "dpgeo"


class DpgeoProvider(QgsProcessingProvider):
    """Differentially private cluster maps (DP-DBSCAN spans, DP WaveCluster, DP k-means, noise preview)."""

    def id(self):
        return PROVIDER_ID

    def name(self):
        return "dpgeo"

    def longName(self):  # noqa: N802 (QGIS API)
        return f"dpgeo — differentially private cluster maps ({plugin_version()})"

    def icon(self):
        return plugin_icon()

    def svgIconPath(self):  # noqa: N802 (QGIS API)
        return ICON_PATH

    def loadAlgorithms(self):  # noqa: N802 (QGIS API)
        for alg in algorithms():  # one per mechanism the library declares (none without the library)
            self.addAlgorithm(alg)
