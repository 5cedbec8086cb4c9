"""Every mechanism dpgeo offers, declared once, and its Python entry point.

One module per mechanism family, each a :class:`dpgeo.declare.Mechanism`
(parameters, public setup, run, layer fields) and the entry point that runs
it through the one runner (:func:`dpgeo.pipeline.run.run_release`)::

    spans         DP-DBSCAN spans (dbscan_spans) and the free noise preview (noise_preview)
    spans_auto    the steps of DP-DBSCAN spans without a radius (density levels)
    wavecluster   DP WaveCluster (wavecluster)
    kmeans        DP k-means (kmeans)
    heat          heat layers and Getis-Ord hot spots (heat, hotspots)
    registry      MECHANISMS: the list the front ends and docs/parameters.md are generated from

A new mechanism is one module here and one line in :mod:`.registry`
(``docs/adding-a-mechanism.md``). The entry points are imported from their
modules (``dpgeo`` exports them); the package exports the registry alone, so
that ``dpgeo.declarations.heat`` stays the module.
"""

from __future__ import annotations

from .registry import MECHANISMS, mechanism

__all__ = ["MECHANISMS", "mechanism"]
