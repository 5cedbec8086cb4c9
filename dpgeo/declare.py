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

This module holds the declaration itself (:class:`Mechanism`, the checked
:class:`Values` it runs with, the :class:`Outcome` its run returns); a
parameter (:class:`Param`) is :mod:`dpgeo.declare_params`, a layer's
attribute (:class:`Field`) and a metadata field (:class:`Meta`) are
:mod:`dpgeo.declare_outputs`. Every name of the three is imported from here.

The three only describe and check parameters; they import nothing of the
data side.

Examples
--------
>>> p = Values(radius_m=150.0, min_points=None)
>>> p.radius_m, p["min_points"]
(150.0, None)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from .costs import Cost
from .declare_outputs import SECTIONS, Field, Meta
from .declare_params import FRONTS, REQUIRED, Param, named, offered_on
from .errors import ParameterError

__all__ = ["Param", "Field", "Meta", "SECTIONS", "Mechanism", "REQUIRED", "Values", "FRONTS", "Cost",
           "declared_outputs", "named", "offered_on", "Outcome"]


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
