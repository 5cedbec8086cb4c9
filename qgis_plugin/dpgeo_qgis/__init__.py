"""dpgeo QGIS plugin: differentially private cluster map layers from sensitive point data.

A thin shell around the dpgeo Python library: a Processing provider "dpgeo"
with the algorithms ``dpgeo:dbscanspans``, ``dpgeo:wavecluster`` and
``dpgeo:noisepreview``, a toolbar button and a Vector-menu entry.
"""

from .resources import plugin_version

__all__ = ["classFactory", "plugin_version"]


def classFactory(iface):  # noqa: N802 (QGIS API)
    """Entry point called by QGIS."""
    from .plugin import DpgeoPlugin

    return DpgeoPlugin(iface)
