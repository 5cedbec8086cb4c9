"""A mechanism's parameters: :class:`Param`, declared once for every front end.

A :class:`Param` is one parameter of a mechanism (or one every release shares:
:mod:`dpgeo.shared_params`, :mod:`dpgeo.series_params`): its type, unit,
range, default, one help text, and its name on each front end. It checks a
value in its own words and describes itself: the JSON Schema of the service's
input, the help of the command-line option. :mod:`dpgeo.declare` holds the
declaration these parameters belong to.

Like :mod:`dpgeo.declare`, this module imports nothing of the data side.

Examples
--------
>>> radius = Param("radius_m", "number", "DBSCAN radius", "Cells are η′·radius/√2 wide.", unit="metres",
...                minimum=0, exclusive_minimum=True, flag="--radius", label="radius")
>>> radius.check(150)
150.0
>>> radius.check(0)
Traceback (most recent call last):
...
dpgeo.errors.ParameterError: radius must be a number > 0 (metres), got 0
>>> radius.schema()
{'type': 'number', 'exclusiveMinimum': 0}
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any

from .errors import ParameterError

__all__ = ["Param", "REQUIRED", "FRONTS", "named", "offered_on"]


class _Required:
    def __repr__(self):
        return "REQUIRED"


#: The default of a parameter that must be given.
REQUIRED = _Required()

#: Where a parameter (or a mechanism) can be offered.
FRONTS = frozenset({"api", "cli", "qgis", "service"})

_KINDS = ("number", "integer", "choice", "text", "flag")


@dataclass(frozen=True)
class Param:
    """One parameter of a mechanism, declared once for every front end.

    Parameters
    ----------
    name : str
        The Python keyword (``radius_m``); the service's input name.
    kind : {"number", "integer", "choice", "text", "flag"}
    title : str
        A short label: the QGIS dialog's, the process description's title.
    help : str
        One help text (plain sentences; the unit and default are added by each front end).
    unit : str
        ``"metres"`` (a distance: QGIS shows a distance widget), ``"cells"``, ``"%"``, ... or ``""``.
    default
        :data:`REQUIRED`, ``None`` (optional: the mechanism's rule decides) or a value.
    minimum, maximum : float, optional
        The range; ``exclusive_minimum`` / ``exclusive_maximum`` make an end open.
    choices : tuple
        The values of a ``choice``; ``labels`` the words shown for them in QGIS (same order).
    advanced : bool
        Shown under "Advanced" in QGIS (and after the main options elsewhere).
    flag : str, optional
        The command-line option (default ``--`` + the name with dashes).
    qgis_name : str, optional
        The QGIS parameter name (default the name in capitals).
    label : str, optional
        How error messages name it (default the name), e.g. ``"min_points (MinPts)"``.
    fronts : frozenset
        Where it is offered (:data:`FRONTS`); e.g. the person cap comes from a dataset's
        configuration on the service, not from the request.
    service_choices : tuple, optional
        The choices the service offers, where it offers fewer (no non-private method).
    suggested : optional
        A starting value that a form shows for a required parameter (the QGIS dialog's
        pre-filled value); never a default.
    layer_style : str, optional
        For a ``flag`` that asks for a second layer of the release (the
        :class:`~dpgeo.release.Release` attribute of the same name, e.g. ``levels``):
        the command line and the API write it into the same file, QGIS offers it as an
        optional output layer of the algorithm, styled with this QGIS style (``Mechanism.style``).
    none_means : str
        What the default ``None`` means, in the help of every front end (default
        ``"automatic"``: the mechanism's rule decides; e.g. ``"none"`` for an option
        that adds something only when given).
    """

    name: str
    kind: str
    title: str
    help: str
    unit: str = ""
    default: Any = REQUIRED
    minimum: float | None = None
    maximum: float | None = None
    exclusive_minimum: bool = False
    exclusive_maximum: bool = False
    choices: tuple = ()
    labels: tuple = ()
    advanced: bool = False
    flag: str | None = None
    qgis_name: str | None = None
    label: str | None = None
    fronts: frozenset = FRONTS
    service_choices: tuple | None = None
    suggested: Any = None
    layer_style: str | None = None
    none_means: str = "automatic"

    def __post_init__(self):
        if self.kind not in _KINDS:
            raise ValueError(f"{self.name}: kind must be one of {_KINDS}")
        if self.layer_style and self.kind != "flag":
            raise ValueError(f"{self.name}: only a flag asks for a second layer")
        if self.kind == "choice" and not self.choices:
            raise ValueError(f"{self.name}: a choice needs choices")
        if self.labels and len(self.labels) != len(self.choices):
            raise ValueError(f"{self.name}: one label per choice")

    # -- names on each front end ---------------------------------------------------------------------------
    @property
    def cli_flag(self) -> str:
        return self.flag or "--" + self.name.replace("_", "-")

    @property
    def cli_dest(self) -> str:
        return self.cli_flag.lstrip("-").replace("-", "_")

    @property
    def qgis(self) -> str:
        return self.qgis_name or self.name.upper()

    @property
    def required(self) -> bool:
        return self.default is REQUIRED

    @property
    def what(self) -> str:
        return self.label or self.name

    # -- checking ------------------------------------------------------------------------------------------
    def range_text(self) -> str:
        """The range in words, e.g. ``"> 0"``, ``"in (0, 1)"``, ``">= 1"`` (empty when unbounded)."""
        lo, hi = self.minimum, self.maximum
        if lo is not None and hi is not None:
            return (f"in {'(' if self.exclusive_minimum else '['}{_g(lo)}, {_g(hi)}"
                    f"{')' if self.exclusive_maximum else ']'}")
        if lo is not None:
            return f"{'>' if self.exclusive_minimum else '>='} {_g(lo)}"
        if hi is not None:
            return f"{'<' if self.exclusive_maximum else '<='} {_g(hi)}"
        return ""

    def check(self, value):
        """``value`` checked and normalised (float, int, str, bool); ``None`` for an unset optional one.

        The message states the constraint in the parameter's own words; each
        front end shows it as it is.
        """
        if value is None:
            if self.required:
                raise ParameterError(f"{self.what} is required: {self.help}")
            return None
        if self.kind == "flag":
            if not isinstance(value, bool):
                raise ParameterError(f"{self.what} must be true or false, got {value!r}")
            return value
        if self.kind in ("choice", "text"):
            if not isinstance(value, str):
                raise ParameterError(f"{self.what} must be a string, got {value!r}")
            if self.kind == "choice" and value not in self.choices:
                raise ParameterError(f"{self.what} must be one of {', '.join(map(repr, self.choices))}, "
                                     f"got {value!r}")
            return value
        unit = f" ({self.unit})" if self.unit and self.unit not in ("%", "points", "cells") else ""
        raw = value
        if self.kind == "integer":
            if isinstance(value, bool) or not isinstance(value, numbers.Integral):
                raise ParameterError(f"{self.what} must be an integer {self.range_text()}{unit}, got {value!r}".
                                     replace("  ", " "))
            value = int(value)
        else:
            if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
                raise ParameterError(f"{self.what} must be a finite number {self.range_text()}{unit}, got "
                                     f"{value!r}".replace("  ", " "))
            value = float(value)
        if not self.in_range(value):
            noun = "an integer" if self.kind == "integer" else "a number"
            raise ParameterError(f"{self.what} must be {noun} {self.range_text()}{unit}, got {raw!r}")
        return value

    def in_range(self, value) -> bool:
        lo, hi = self.minimum, self.maximum
        if lo is not None and (value <= lo if self.exclusive_minimum else value < lo):
            return False
        if hi is not None and (value >= hi if self.exclusive_maximum else value > hi):
            return False
        return True

    # -- descriptions --------------------------------------------------------------------------------------
    def schema(self, front: str = "api") -> dict:
        """The JSON Schema of the value (the service's input schema)."""
        if self.kind in ("number", "integer"):
            s = {"type": self.kind}
            if self.minimum is not None:
                s["exclusiveMinimum" if self.exclusive_minimum else "minimum"] = _num(self.minimum)
            if self.maximum is not None:
                s["exclusiveMaximum" if self.exclusive_maximum else "maximum"] = _num(self.maximum)
        elif self.kind == "flag":
            s = {"type": "boolean"}
        else:
            s = {"type": "string"}
            if self.kind == "choice":
                s["enum"] = list(self.service_choices if front == "service" and self.service_choices
                                 else self.choices)
        if not self.required and self.default is not None:
            s["default"] = self.default
        return s

    def default_text(self) -> str:
        if self.required:
            return "required"
        if self.default is None:
            return self.none_means
        return _g(self.default) if isinstance(self.default, (int, float)) and not isinstance(self.default, bool) \
            else str(self.default).lower() if isinstance(self.default, bool) else str(self.default)

    def cli_help(self) -> str:
        """The help of the command-line option: the help text, the unit, the range and the default."""
        extra = []
        if self.unit and self.unit != "%":
            extra.append(self.unit)
        if self.range_text() and self.kind in ("number", "integer"):
            extra.append(self.range_text())
        if not self.required and self.kind != "flag":
            extra.append(f"default {self.default_text()}")
        text = self.help + (f" ({'; '.join(extra)})" if extra else "")
        return text.replace("%", "%%")  # argparse formats help with %


def named(params, name) -> Param:
    """The parameter of ``params`` called ``name`` (KeyError if none)."""
    for p in params:
        if p.name == name:
            return p
    raise KeyError(name)


def offered_on(params, front) -> tuple:
    """The parameters of ``params`` offered on ``front`` (``"api"``, ``"cli"``, ``"qgis"``, ``"service"``)."""
    return tuple(p for p in params if front in p.fronts)


def _g(v) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def _num(v):
    return int(v) if isinstance(v, float) and v.is_integer() and abs(v) < 2**53 else v
