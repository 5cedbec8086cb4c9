"""Every mechanism dpgeo offers, one line each: the front ends (command line, QGIS, service, docs) list them.

To add a mechanism, write its module (a :class:`dpgeo.declare.Mechanism` and,
if it should have one, a Python entry point) and add one line here; see
``docs/adding-a-mechanism.md``.
"""

from __future__ import annotations

from .heat import CELLS_PREVIEW, HEAT, HOTSPOTS
from .spans import PREVIEW, SPANS
from .kmeans import KMEANS
from .wavecluster import WAVECLUSTER

__all__ = ["MECHANISMS", "mechanism"]

#: The mechanisms, in the order the front ends show them.
MECHANISMS = (
    SPANS,
    WAVECLUSTER,
    KMEANS,
    HEAT,
    HOTSPOTS,
    PREVIEW,
    CELLS_PREVIEW,
)


def mechanism(name: str):
    """The declared mechanism called ``name`` (its id, command or QGIS name)."""
    for m in MECHANISMS:
        if name in (m.name, m.command, m.qgis_id):
            return m
    raise KeyError(name)
