"""One declaration per mechanism: its parameters, its public setup, its run and its layer.

Every mechanism of dpgeo is declared once, as a :class:`Mechanism`: a name and
title, its parameters (:class:`Param`: type, unit, range, default, one help
text, whether advanced), and the steps the one pipeline
(:func:`dpgeo.pipeline.run.run_release`) calls in order — ``check`` (the
parameters together), ``grid`` and ``setup`` (what can be computed from the
public study area before any data is read: the grid, the memory plan, noise
bounds, ε shares), ``run`` (the mechanism on the released counts, or on the
points) — and its layer's fields. The front ends are generated from it: the
``dpgeo`` subcommand's options, the QGIS Processing parameters and help, the
service process's inputs (their JSON Schema) and the parameter tables of
``docs/parameters.md``. A new mechanism is one module and one line in
:mod:`dpgeo.declarations.registry`; see ``docs/adding-a-mechanism.md``.

This module only describes and checks parameters; it imports nothing of the
data side.

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
from dataclasses import dataclass, field
from typing import Any, ClassVar

from .costs import Cost
from .errors import ParameterError

__all__ = ["Param", "Field", "Meta", "SECTIONS", "Mechanism", "REQUIRED", "Values", "FRONTS", "Cost",
           "declared_outputs", "named", "offered_on"]


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

class Values(dict):
    """Checked parameter values by name, also as attributes (``p.radius_m``)."""

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


class Mechanism:
    """The declaration of one mechanism; subclasses set the attributes and implement the steps.

    Attributes
    ----------
    name : str
        The mechanism's id: the service process id and the ledger's mechanism name.
    command : str
        The ``dpgeo`` subcommand (``None``: not on the command line).
    qgis_id : str
        The QGIS algorithm name (``dpgeo:<qgis_id>``; ``None``: not in QGIS).
    title, summary, description : str
        A title; one line; a paragraph or two (plain text; the front ends format them).
    params : tuple of Param
        The mechanism's own parameters (the privacy, study-area, input and output
        parameters every release shares are the pipeline's).
    exactly_one : tuple of tuple of str
        Groups of parameters of which exactly one must be given (``("cell_m", "grid_size")``).
    at_most_one : tuple of tuple of str
        Groups of parameters of which at most one may be given; with none, the
        mechanism's own rule decides (heat cells: the cell size chosen from ε).
    reads : {"counts", "points", None}
        What the run reads of the private data: cell counts (the counts boundary),
        the points (k-means), or nothing (a preview).
    epsilon_required : bool
        Whether ε must be given (a non-private reference method may run without it).
    fields : tuple of Field
        The layer's attributes besides the geometry.
    outputs : tuple of dpgeo.metadata_fields.Meta
        The metadata fields the mechanism publishes besides the common ones
        (:data:`dpgeo.metadata_fields.COMMON_FIELDS`): key, label, section, unit and meaning; ``dpgeo info``,
        the QGIS preview, the map's privacy panel and the PNG footer read them.
    fronts : frozenset
        Where the mechanism is offered.
    examples : str
        Command-line examples (the subcommand's epilog).
    """

    name: ClassVar[str] = ""
    command: ClassVar[str | None] = None
    qgis_id: ClassVar[str | None] = None
    title: ClassVar[str] = ""
    summary: ClassVar[str] = ""
    description: ClassVar[str] = ""
    params: ClassVar[tuple] = ()
    exactly_one: ClassVar[tuple] = ()
    at_most_one: ClassVar[tuple] = ()
    reads: ClassVar[str | None] = "counts"
    epsilon_required: ClassVar[bool] = True
    fields: ClassVar[tuple] = ()
    outputs: ClassVar[tuple] = ()
    fronts: ClassVar[frozenset] = FRONTS
    examples: ClassVar[str] = ""
    keywords: ClassVar[tuple] = ()
    #: The name of its Python entry point in ``dpgeo`` (``None``: run it with
    #: :func:`dpgeo.pipeline.run.run_release`); front ends that call the library call this.
    entry_point: ClassVar[str | None] = None
    #: The title of a layer it makes (QGIS names the output layer after it).
    layer_name: ClassVar[str] = "dpgeo layer"
    #: The QGIS style of its layer: ``"clusters"`` (one colour per cluster, dp_count as label).
    style: ClassVar[str] = "clusters"
    #: Share of the progress bar taken by reading the data.
    read_share: ClassVar[float] = 0.4

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        _DECLARED.append(cls)  # what a release's metadata may hold is known to whoever shows it

    # -- parameters ----------------------------------------------------------------------------------------
    def param(self, name) -> Param:
        return named(self.params, name)

    def offered(self, front) -> tuple:
        """The parameters offered on ``front``."""
        return offered_on(self.params, front)

    def validate(self, values: dict) -> Values:
        """Every parameter checked against its declaration, defaults filled in, then :meth:`check`.

        ``values`` may hold other keys (the pipeline's common parameters); they are left out.
        """
        out = Values()
        for p in self.params:
            v = values.get(p.name, None if p.required else p.default)
            out[p.name] = p.check(v)
        for group in self.exactly_one:
            given = [n for n in group if out.get(n) is not None]
            if len(given) != 1:
                raise ParameterError(self.exactly_one_message(group))
        for group in self.at_most_one:
            if sum(out.get(n) is not None for n in group) > 1:
                raise ParameterError(self.at_most_one_message(group))
        self.check(out)
        return out

    def exactly_one_message(self, group) -> str:
        names = [f"the {self.param(n).title.lower()} ({n}, {self.param(n).cli_flag})" for n in group]
        return f"give exactly one of {' or '.join(names)}"

    def at_most_one_message(self, group) -> str:
        names = [f"the {self.param(n).title.lower()} ({n}, {self.param(n).cli_flag})" for n in group]
        return f"give at most one of {' or '.join(names)} (neither: chosen from epsilon)"

    def exclusive_groups(self) -> tuple:
        """``(group, required)`` for every group of parameters given together at most once."""
        return tuple((g, True) for g in self.exactly_one) + tuple((g, False) for g in self.at_most_one)

    def chooses_grid(self, p: Values) -> bool:
        """Whether this run picks its grid at run time from a DP release (a noisy total), not before the data is
        read; running totals, which need one grid for every period fixed in advance, refuse such a run."""
        return False

    def check(self, p: Values) -> None:
        """Checks of the parameters together (public, no study area); raise ParameterError."""

    def check_run(self, p: Values, epsilon, c) -> None:
        """Checks that also need ε and the contribution bound ``c`` (public, no study area)."""

    def needs_epsilon(self, p: Values) -> bool:
        """Whether this run needs ε (a non-private reference method may run without it)."""
        return self.epsilon_required

    def missing_epsilon(self, p: Values) -> ParameterError:
        return ParameterError("epsilon (the privacy budget) is required")

    def method_name(self, p: Values) -> str:
        """The ``method`` of the metadata."""
        return self.name

    def mechanism_title(self, p: Values) -> str:
        """The ``mechanism`` of the metadata."""
        return self.title

    def short_title(self, p: Values) -> str:
        """A title for a release with these parameters (e.g. a published layer's default title)."""
        return self.title

    #: The parameters that set the cell width, as a refusal of too many cells names them.
    cell_option: ClassVar[str] = "the cell width"

    def cell_width(self, area, p: Values):
        """The cell width (metres) a run would use on ``area``, before any grid is built (``None``: no grid
        to bound)."""
        return None

    def cost(self, area, p: Values, c) -> Cost:
        """What one period of a run on the public study area ``area`` costs, in O(1): no cell is listed.

        The default: the square grid of :meth:`cell_width` over the study area's bounding box, every cell
        possibly a feature (:func:`dpgeo.costs.grid_cost`). A mechanism whose layer or work is not that
        declares its own (``docs/adding-a-mechanism.md``).
        """
        from .costs import grid_cost

        return grid_cost(area, self.cell_width(area, p))

    # -- the steps the pipeline calls (public side) --------------------------------------------------------
    def ledger_name(self, p: Values) -> str:
        """The mechanism's name in the ledger and the metadata."""
        return self.name

    def is_private(self, p: Values) -> bool:
        """Whether the run adds noise at all (a non-private reference method does not)."""
        return True

    def grid(self, area, p: Values, c, max_memory_bytes=None):
        """The run's grid over the public ``area``; checks its size and memory first (no data involved)."""
        raise NotImplementedError

    def setup(self, grid, p: Values, c) -> dict:
        """Every public quantity of a run on ``grid`` (noise bounds, thresholds, ε shares), checked.

        Called before the charge (so a run that cannot be made is refused before
        it reads or spends anything) and again on the grid the counting used.
        """
        return {}

    def linear_in_contribution(self, grid, p: Values, c) -> bool:
        """Whether a run with contribution bound ``s`` (``c.sensitivity``: K per person, or c per record) is
        ``ε/s``-DP for adding or removing **one point**: every noisy quantity it releases is calibrated to a
        sensitivity that is exactly ``s`` times that of one point.

        A series that caps each person's points over all its periods in one
        pass (``person_accounting="series"``) costs ε once only for such a
        mechanism: a person's ``K`` points, however they fall into the periods,
        then cost ``ε`` together (docs/privacy.md §6, "Series"). The default is
        False (conservative): such a series is refused, and per-period caps
        (``person_accounting="period"``) remain.
        """
        return False

    def count_options(self, p: Values) -> dict:
        """Extra arguments of :func:`dpgeo.counting.count_points` (``recountable``, ``keep_points``)."""
        return {}

    # -- the private side ----------------------------------------------------------------------------------
    def run(self, counts, p: Values, c, setup: dict, rng, progress):
        """The mechanism on the counts (or points): returns an :class:`Outcome`. The only step that draws noise."""
        raise NotImplementedError

    def preview(self, area, p: Values, c) -> dict:
        """What a run would look like, from public inputs alone (no data, no budget)."""
        raise NotImplementedError

    def table_rows(self, preview: dict) -> list:
        """The rows of a preview that holds one line per case (e.g. per number of points), each a dict of
        declared fields (:attr:`outputs`); ``[]``: the preview is one line."""
        return []

    def __repr__(self):
        return f"<Mechanism {self.name}>"


#: Every declared mechanism class, in the order they were defined (``import dpgeo`` defines them all).
_DECLARED: list = []


def declared_outputs() -> tuple:
    """The metadata fields (:class:`Meta`) every declared mechanism publishes, in declaration order (without the
    fields every release shares: :data:`dpgeo.metadata_fields.COMMON_FIELDS`)."""
    seen, out = set(), []
    for cls in _DECLARED:
        for f in cls.outputs:
            if (cls, f.key) not in seen:
                seen.add((cls, f.key))
                out.append((cls, f))
    return tuple(out)


@dataclass
class Outcome:
    """What a mechanism's run returns: the layer, its metadata and the released cells.

    ``levels``: a second layer of the same release (DP-DBSCAN spans without a
    radius: the tree of density levels), or a function that builds it on first
    use; it becomes :attr:`dpgeo.release.Release.levels`.
    """

    layer: Any
    metadata: dict = field(default_factory=dict)
    cells: Any = None
    not_private_reasons: list = field(default_factory=list)
    levels: Any = None


__all__.append("Outcome")


def _g(v) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def _num(v):
    return int(v) if isinstance(v, float) and v.is_integer() and abs(v) < 2**53 else v
