"""The one release pipeline: validate → plan → charge → count → mechanism → layer → Release.

Every mechanism declared with :class:`dpgeo.declare.Mechanism` runs through
:func:`run_release`, in this order:

1. **validate** — the mechanism's parameters against their declaration, the
   contribution bound (record or person), the seed;
2. **plan** — the public study area, the grid and the memory of the run
   (``mechanism.grid``) and every public quantity (``mechanism.setup``: noise
   bounds, thresholds, ε shares), before anything is read or charged;
3. **charge** — the release is reserved in the privacy-budget ledger
   (:func:`dpgeo.release.start_charge`), refused beyond the dataset's total;
4. **count** — the private points are read, projected and added up per cell of
   the public grid (:func:`dpgeo.counting.count_points`); an error here cancels
   the charge (no noise has been drawn);
5. **mechanism** — ``mechanism.run``, the only step that draws noise;
6. **layer** — the metadata joined to the layer; the release is marked
   completed only once the layer exists (an error after the noise leaves the
   charge spent, marked failed).
"""

from __future__ import annotations

import os
import sys

from ..counting import count_points
from ..noise import NoiseSource
from ..release import Release, run_protected_files, start_charge
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

__all__ = ["run_release", "run_preview", "Contribution", "contribution", "public_plan", "COMMON_KEYS"]

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


def run_release(mech, points, values: dict, *, stacklevel=None) -> Release:
    """Run ``mech`` on ``points`` with ``values`` (its parameters and the common keyword arguments).

    ``values`` is usually the entry point's ``locals()``; keys that are neither
    the mechanism's parameters nor :data:`COMMON_KEYS` are ignored, except the
    series keywords (:data:`dpgeo.pipeline.series.SERIES_KEYS`: ``time``,
    ``period``, ...), which make the run a series
    (:func:`dpgeo.pipeline.series.run_series`). Warnings
    (not private, an unnamed dataset) point ``stacklevel`` frames above this
    function: by default at the first caller outside dpgeo.
    """
    if stacklevel is None:
        stacklevel = _frames_to_caller()
    from .series import is_series, run_series

    if is_series(values):  # time=, period=, ...: one release per public period (pipeline/series.py)
        return run_series(mech, points, values, stacklevel=stacklevel + 1)
    # -- validate (public inputs only) --
    v, p, epsilon, c = validated(mech, values)
    protected = run_protected_files(points, v["domain"], v["ledger"])
    p["epsilon"] = epsilon

    def grid_for(area):  # the run's size is checked before the grid is built (and before any data is read)
        return mech.grid(area, p, c, v["max_memory_bytes"])

    domain = v["domain"]
    # -- plan: the grid and every public quantity, before any data is read or charged --
    if not v["domain_from_data"]:
        domain = _study_area(domain, v["domain_crs"], v["crs"])
        grid, grid_for = _fixed_grid(domain, grid_for)
        mech.setup(grid, p, c)
    source = NoiseSource(v["seed"])
    # -- charge: refused beyond the dataset's total --
    charge = start_charge(ledger=v["ledger"], dataset=v["dataset"], points=points, epsilon=epsilon,
                          mechanism=mech.ledger_name(p), analyst=v["analyst"],
                          private=source.private and not v["domain_from_data"] and mech.is_private(p),
                          unattended=v["unattended"], stacklevel=stacklevel + 2)
    progress = v["progress"]
    with charge:
        # -- count (private; an error here cancels the charge: no noise yet) --
        with charge.before_noise():
            _progress(progress, 0.0, _reading_message(points, v["scheduler"]))
            counts = count_points(points, grid_for=grid_for, domain=domain, domain_crs=v["domain_crs"], crs=v["crs"],
                                  domain_from_data=v["domain_from_data"], input_crs=v["input_crs"],
                                  person=v["person"], cap=c.cap, rng=source, unattended=v["unattended"],
                                  scheduler=v["scheduler"], progress=_reading(progress, mech.read_share),
                                  **mech.count_options(p))
            grid = counts.grid
            setup = mech.setup(grid, p, c)
        diagnostics = counts.diagnostics
        # -- mechanism (the only step that draws noise) and layer (post-processing) --
        out = mech.run(counts, p, c, setup, source, progress)
        del counts
        md = base_metadata(method=mech.method_name(p), mechanism=mech.mechanism_title(p), epsilon=epsilon,
                           area=grid.area, source=source, sensitivity=c.sensitivity, person=c.person, cap=c.cap)
        reasons = md["not_private_reasons"] + [r for r in out.not_private_reasons
                                               if r not in md["not_private_reasons"]]
        md.update(out.metadata)
        md["not_private_reasons"] = reasons
        md["differentially_private"] = not reasons
        md.update(charge.metadata())
        charge.complete()
    _warn_if_not_private(md, stacklevel=stacklevel + 2)
    _progress(progress, 1.0, "done")
    return Release(layer=out.layer, metadata=md, diagnostics=diagnostics, cells=out.cells, _protected=protected,
                   _charge=charge, _levels=out.levels)
