"""What a mechanism publishes: its layer's attributes (:class:`Field`) and its metadata fields (:class:`Meta`).

A :class:`Meta` declares one field of a release's metadata once for every front
end that shows it, in one of the :data:`SECTIONS`; :mod:`dpgeo.metadata_fields`
declares the fields every release shares and writes their values, each
mechanism's declaration (:attr:`dpgeo.declare.Mechanism.outputs`) its own.

Like :mod:`dpgeo.declare`, this module imports nothing of the data side.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Field", "Meta", "SECTIONS"]


@dataclass(frozen=True)
class Field:
    """One attribute of a mechanism's layer: name, type (``int``, ``float``, ``str``) and meaning."""

    name: str
    type: str
    help: str


#: The sections of a release's metadata (:class:`Meta`), in the order they are shown.
SECTIONS = ("Privacy", "Release", "Series", "Study area and grid", "Parameters", "Thresholds", "Result",
            "Auto: its choices")

_UNITS = ("", "metres", "points", "cells", "%", "share", "neighbours", "yes/no")
_RENDERS = ("", "status", "reasons", "domain", "grid", "by_points", "shape", "share", "beta", "delta", "list")


@dataclass(frozen=True)
class Meta:
    """One field of a release's metadata, declared once for every front end that shows it (the outputs of a
    mechanism, as :class:`Param` declares its inputs; :mod:`dpgeo.metadata_fields` writes their values).

    Parameters
    ----------
    key : str
        The key in the metadata.
    label : str
        How people see it named (``dpgeo info``, the map's panel, QGIS).
    section : str
        One of :data:`SECTIONS`.
    help : str
        What it means, one line (shown under the value; empty: the label says it).
    unit : str
        ``"metres"``, ``"points"``, ``"cells"``, ``"%"``, ``"share"`` (a dict of shares), ``"neighbours"``,
        ``"yes/no"`` or ``""``.
    template : str
        How the value's text is written, ``{}`` standing for it, e.g. ``"{} (MinPts + Γ)"``.
    none : str
        What ``None`` means (``"none"``, ``"none declared"``, ...).
    render : str
        A value that needs more than a unit: ``"status"``, ``"reasons"``, ``"domain"``, ``"grid"``,
        ``"by_points"``, ``"shape"`` (rows × columns), ``"share"``, ``"beta"``, ``"delta"``, ``"list"``.
    panel : bool
        Shown on the published map's privacy panel (HTML) and in QGIS's summary of the layer.
    column : str
        A short heading for a table of previews (the QGIS noise preview's table and its outputs).
    note : bool
        Its meaning is worth a line under its value wherever it is listed (``dpgeo info``); the others' meaning
        is shown on demand (``dpgeo info --explain``) and in the generated tables of ``docs/parameters.md``.
    """

    key: str
    label: str
    section: str
    help: str = ""
    unit: str = ""
    template: str = "{}"
    none: str = "none"
    render: str = ""
    panel: bool = False
    column: str = ""
    note: bool = False

    def __post_init__(self):
        if not self.help:
            raise ValueError(f"{self.key}: a metadata field needs its meaning (help)")
        if self.section not in SECTIONS:
            raise ValueError(f"{self.key}: section must be one of {SECTIONS}")
        if self.unit not in _UNITS:
            raise ValueError(f"{self.key}: unit must be one of {_UNITS}")
        if self.render not in _RENDERS:
            raise ValueError(f"{self.key}: render must be one of {_RENDERS}")
