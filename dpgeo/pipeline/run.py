"""The one release runner: validate → plan → charge → count → step → assemble.

Every release of every mechanism declared with :class:`dpgeo.declare.Mechanism`
— a single release, a map series, running totals — runs through
:func:`run_release`, in this order:

1. **validate** — the mechanism's parameters against their declaration, the
   contribution bound (record or person), the seed, and the *step*
   (:func:`dpgeo.pipeline.steps.release_step`): each period (a single release
   is a series of one period) or running totals, with the series' options;
2. **plan** — the public study area, the grid and the memory of the run
   (``mechanism.grid``), every public quantity (``mechanism.setup``: noise
   bounds, thresholds, ε shares) and the step's own checks (an earlier series
   to append to, the running totals' tree), before anything is read or charged;
3. **charge** — the release is reserved in the privacy-budget ledger
   (:func:`dpgeo.release.start_charge`), with the periods of a series,
   refused beyond the dataset's total;
4. **count** — the private points are read **once**, projected and added up
   per cell of the public grid (and per period of a series:
   :func:`dpgeo.counting.count_points`), and a keyed sketch of the records
   taken in the same pass tells the ledger which declared dataset they are
   (:mod:`dpgeo.budget.sketches`); an error or a refusal here cancels the
   charge (no noise has been drawn);
5. **step** — ``mechanism.run`` on each period's counts, or the binary tree
   of running totals: the only step that draws noise;
6. **assemble** — the metadata every release shares joined to the step's
   layers; the release is marked completed only once the layer exists (an
   error after the noise leaves the charge spent, marked failed).
"""

from __future__ import annotations

import os
import sys

from ..counting import count_points
from ..noise import NoiseSource
from ..release import Release, run_protected_files, start_charge
from .steps import release_step
from ._common import (  # noqa: F401 (COMMON_KEYS, Contribution, contribution: exported from here)
    COMMON_KEYS,
    Contribution,
    _contribution,
    _epsilon,
    _fixed_grid,
    _person_label,
    _progress,
    _reading,
    _reading_message,
    _study_area,
    _warn_if_not_private,
    base_metadata,
    check_epsilon,
    contribution,
    validated,
    warn_if_weak,
)

__all__ = ["run_release", "run_preview", "is_private_run", "Contribution", "contribution", "public_plan", "COMMON_KEYS"]


def public_plan(mech, values: dict, area, *, epsilon=None, sensitivity=1, person=None, max_points_per_person=None,
                max_memory_bytes=None):
    """Everything a run of ``mech`` would check before reading data, for a public study area (``None``:
    the parameters alone). Returns ``(params, grid, setup)``; the front ends call it before opening the input.
    """
    p = mech.validate(values)
    c = contribution(person, max_points_per_person, sensitivity)
    p["epsilon"] = _epsilon(mech, p, epsilon)
    mech.check_run(p, p["epsilon"], c)
    if area is None:
        return p, None, None
    grid = mech.grid(area, p, c, max_memory_bytes)
    return p, grid, mech.setup(grid, p, c)


def run_preview(mech, values: dict) -> dict:
    """What a run of ``mech`` would look like on the public study area ``values["domain"]``: no data, no budget.

    ``values`` holds the mechanism's parameters and ``epsilon``, ``domain``,
    ``domain_crs``, ``crs``, ``sensitivity``, ``max_memory_bytes``.
    """
    from ..domain import as_study_area

    sensitivity = values.get("max_points_per_record", values.get("sensitivity"))  # the public name, or the old one
    sensitivity = 1 if sensitivity is None else sensitivity
    p, _, _ = public_plan(mech, values, None, epsilon=values.get("epsilon"), sensitivity=sensitivity)
    p["max_memory_bytes"] = values.get("max_memory_bytes")
    warn_if_weak(p["epsilon"], stacklevel=3)
    area = as_study_area(values.get("domain"), domain_crs=values.get("domain_crs"), working_crs=values.get("crs"))
    return mech.preview(area, p, contribution(sensitivity=sensitivity))


def _frames_to_caller() -> int:
    """How many frames above :func:`run_release` the first one outside dpgeo is (the user's call)."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    frame, n = sys._getframe(2), 0  # 2: run_release
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(package + os.sep):
        frame, n = frame.f_back, n + 1
    return n + 1


def is_private_run(mech, values: dict) -> bool:
    """Whether a run of ``mech`` with the keyword arguments ``values`` would be differentially private, and so
    charged to the dataset's ledger: no test seed, a public study area, and a step that adds noise (WaveCluster's
    exact reference does not, but its running totals do). Public inputs only; raises what the run would raise
    for bad parameters. The front ends that show the budget before a run ask this."""
    v, p, epsilon, c = validated(mech, values)
    return _is_private(NoiseSource(v["seed"]), v, release_step(mech, values, v, p, epsilon, c))


def _is_private(source, v, step) -> bool:
    """The one rule: private noise (no test seed), a public study area, a step that adds noise."""
    return source.private and not v["domain_from_data"] and step.private


def run_release(mech, points, values: dict, *, stacklevel=None) -> Release:
    """Run ``mech`` on ``points`` with ``values`` (its parameters and the common keyword arguments).

    ``values`` is usually the entry point's ``locals()``; keys that are neither
    the mechanism's parameters nor :data:`COMMON_KEYS` are ignored, except the
    series keywords (:data:`dpgeo.series.options.SERIES_KEYS`: ``time``,
    ``period``, ...), which make the run a series: a
    :class:`~dpgeo.series.SeriesRelease` (:mod:`dpgeo.pipeline.steps`). Warnings
    (not private, an unnamed dataset) point ``stacklevel`` frames above this
    function: by default at the first caller outside dpgeo.
    """
    if stacklevel is None:
        stacklevel = _frames_to_caller()
    # -- validate (public inputs only): the parameters, the contribution bound, the step and its options --
    v, p, epsilon, c = validated(mech, values)
    step = release_step(mech, values, v, p, epsilon, c)
    scheduler = step.scheduler(v["scheduler"])
    protected = run_protected_files(points, v["domain"], v["ledger"])
    p["epsilon"] = epsilon

    def grid_for(area):  # the run's size is checked before the grid is built (and before any data is read)
        return mech.grid(area, p, c, v["max_memory_bytes"])

    domain = v["domain"]
    # -- plan: the grid and every public quantity, before any data is read or charged --
    if not v["domain_from_data"]:  # (a series always has a public study area: release_step refused it)
        domain = _study_area(domain, v["domain_crs"], v["crs"])
        grid, grid_for = _fixed_grid(domain, grid_for)
        mech.setup(grid, p, c)
        step.plan(domain, grid)
    source = NoiseSource(v["seed"])
    # -- charge: refused beyond the dataset's total --
    charge = start_charge(ledger=v["ledger"], dataset=v["dataset"], points=points, epsilon=epsilon,
                          mechanism=step.ledger_name, analyst=v["analyst"],
                          private=_is_private(source, v, step),
                          unattended=v["unattended"], stacklevel=stacklevel + 2, series=step.ledger_entry())
    progress = v["progress"]
    with charge:
        # -- count (private, read once; an error here cancels the charge: no noise yet) --
        with charge.before_noise():
            _progress(progress, 0.0, _reading_message(points, scheduler))
            counts = count_points(points, grid_for=grid_for, domain=domain, domain_crs=v["domain_crs"], crs=v["crs"],
                                  domain_from_data=v["domain_from_data"], input_crs=v["input_crs"],
                                  person=v["person"], cap=c.cap, rng=source, unattended=v["unattended"],
                                  scheduler=scheduler, progress=_reading(progress, mech.read_share),
                                  sketch=charge.record_sketch(), **step.count_options(), **mech.count_options(p))
            charge.records_read()  # which dataset the records are: checked before any noise
            grid = counts.grid
            setup = mech.setup(grid, p, c)
            parts = step.split(counts)
        diagnostics = counts.diagnostics
        del counts
        # -- step: the only one that draws noise --
        outs = step.run(parts, grid, setup, source, progress)
        # -- assemble (post-processing) --
        method, title = step.method()
        md = base_metadata(method=method, mechanism=title, epsilon=epsilon, area=grid.area, source=source,
                           sensitivity=c.sensitivity, person=c.person, cap=c.cap)
        release = step.assemble(md, outs, charge, diagnostics=diagnostics, protected=protected, grid=grid)
        charge.complete()
    _warn_if_not_private(release.metadata, stacklevel=stacklevel + 2)
    _progress(progress, 1.0, "done")
    return release
