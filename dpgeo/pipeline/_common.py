"""Steps every entry point shares: parameter checks, the contribution bound, metadata, progress."""

from __future__ import annotations

import math
import numbers
import os
import warnings
from dataclasses import dataclass

from .._dates import today
from .._version import __version__
from ..domain import _crs_label, as_study_area
from ..errors import NotPrivateWarning, ParameterError, WeakEpsilonWarning
from ..noise import sampler_description
from ..shared_params import epsilon_warning, shared_param

__all__ = []


# -- validation ------------------------------------------------------------------

def check_epsilon(epsilon):
    """ε checked against its declaration (:mod:`dpgeo.shared_params`: a finite number in (0, 100])."""
    return shared_param("epsilon").check(epsilon)


def check_positive(value, name, unit=""):
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) or value <= 0:
        raise ParameterError(f"{name} must be a number > 0{unit}, got {value!r}")
    return float(value)


def check_int(value, name, minimum=1):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ParameterError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def check_fraction(value, name, lo_open=True, hi_closed=False):
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise ParameterError(f"{name} must be a number, got {value!r}")
    ok = (0 < value if lo_open else 0 <= value) and (value <= 1 if hi_closed else value < 1)
    if not ok:
        rng = f"{'(' if lo_open else '['}0, 1{']' if hi_closed else ')'}"
        raise ParameterError(f"{name} must be in {rng}, got {value!r}")
    return float(value)


# -- contribution ----------------------------------------------------------------

#: The keyword arguments every release takes besides its mechanism's own parameters.
COMMON_KEYS = ("epsilon", "domain", "domain_crs", "crs", "sensitivity", "person", "max_points_per_person", "seed",
               "domain_from_data", "input_crs", "unattended", "dataset", "ledger", "analyst", "progress",
               "scheduler", "max_memory_bytes")


@dataclass(frozen=True)
class Contribution:
    """The neighbouring relation of a run: points per record (``sensitivity``), or per person (``cap``)."""

    sensitivity: int = 1
    cap: int | None = None
    person: str | None = None  # how the metadata names the person identifier


def contribution(person=None, max_points_per_person=None, sensitivity=1) -> Contribution:
    """The checked contribution bound of a run (see :func:`dpgeo.pipeline._common._contribution`)."""
    s, cap = _contribution(person, max_points_per_person, sensitivity)
    return Contribution(s, cap, _person_label(person))


def _epsilon(mech, p, epsilon):
    if epsilon is None and not mech.needs_epsilon(p):
        return None
    if epsilon is None:
        raise mech.missing_epsilon(p)
    return check_epsilon(epsilon)


def validated(mech, values: dict):
    """``(common, params, epsilon, contribution)`` of a run of ``mech``: the shared keyword arguments with their
    defaults, the mechanism's parameters checked against its declaration, ε and the contribution bound checked,
    the seed checked. Public inputs only."""
    from ..randomness import check_seed

    v = {k: values.get(k) for k in COMMON_KEYS}
    if values.get("max_points_per_record") is not None:  # the public name of the contribution bound
        v["sensitivity"] = values["max_points_per_record"]
    for key, default in (("sensitivity", 1), ("domain_from_data", False), ("unattended", False)):
        if v[key] is None:
            v[key] = default
    p = mech.validate(values)
    epsilon = _epsilon(mech, p, v["epsilon"])
    c = contribution(v["person"], v["max_points_per_person"], v["sensitivity"])
    mech.check_run(p, epsilon, c)
    check_seed(v["seed"])
    warn_if_weak(epsilon, stacklevel=4)
    return v, p, epsilon, c


def warn_if_weak(epsilon, stacklevel=3):
    """A :class:`~dpgeo.errors.WeakEpsilonWarning` for an ε above the declared weak threshold."""
    text = epsilon_warning(epsilon)
    if text:
        warnings.warn(text, WeakEpsilonWarning, stacklevel=stacklevel)


def _contribution(person, max_points_per_person, sensitivity):
    """Sensitivity and privacy unit from the person/cap/sensitivity parameters (checked)."""
    sensitivity = check_int(sensitivity, "max_points_per_record (points per record)")
    if person is None:
        if max_points_per_person is not None:
            raise ParameterError("max_points_per_person needs person (the column or ids that identify "
                                 "each point's person)")
        return sensitivity, None
    if sensitivity != 1:
        raise ParameterError("with person=..., bound the contribution with max_points_per_person, not "
                             "max_points_per_record")
    if max_points_per_person is None:
        raise ParameterError("person=... needs max_points_per_person: the most points one person may contribute "
                             "(the noise scales with it; extra points are dropped at random)")
    k = check_int(max_points_per_person, "max_points_per_person")
    return k, k


# -- metadata --------------------------------------------------------------------

def base_metadata(*, method, mechanism, epsilon, area, source, sensitivity, person=None, cap=None):
    reasons = []
    if not source.private:
        reasons.append(source.not_private_reason)
    if area.from_data:
        reasons.append("the study area was derived from the private data's own extent")
    return {
        "mechanism": mechanism,
        "method": method,
        "differentially_private": not reasons,
        "not_private_reasons": reasons,
        "neighbouring_relation": (
            f"add or remove one record; each record contributes at most {sensitivity:g} point(s)"
            if cap is None else
            f"add or remove one person (identified by {person}); at most {cap} point(s) per person are kept, "
            "chosen uniformly at random"
        ),
        "privacy_unit": "record" if cap is None else "person",
        "sensitivity_points_per_record": sensitivity,
        "epsilon": epsilon,
        "delta": 0.0,
        "sampler": sampler_description(source),
        "working_crs": _crs_label(area.crs),
        "domain": area.to_metadata(),
        "dpgeo_version": __version__,
        # the day only: a time of day to the second would tell how long the run took (the data's size)
        "created_utc": today(),
    }


def _person_label(person):
    if person is None:
        return None
    if isinstance(person, str):
        return f"column {person!r}"
    name = getattr(person, "name", None)  # a named pandas Series, e.g. df["driver_id"]
    return f"column {name!r}" if isinstance(name, str) and name else "the given person identifiers"


def _warn_if_not_private(md, stacklevel=3):
    if not md["differentially_private"]:
        warnings.warn("result is NOT differentially private: " + "; ".join(md["not_private_reasons"]),
                      NotPrivateWarning, stacklevel=stacklevel)


def _progress(cb, frac, msg):
    if cb is not None:
        cb(float(frac), msg)


def _reading(cb, span=0.4):
    """The progress callback of the counting step: records read, mapped onto [0, span) of the run."""
    if cb is None:
        return None
    return lambda frac, msg: cb(float(span * frac), msg)


def _reading_message(points, scheduler) -> str:
    return f"reading {_input_label(points)}" + (f" with Dask ({scheduler})" if scheduler is not None else "")


def _input_label(points) -> str:
    from ..counting.postgis import is_database_input

    if is_database_input(points):  # its table's name, never the connection (host, user)
        return getattr(points, "label", "a PostGIS input")
    if isinstance(points, (str, bytes)) or hasattr(points, "__fspath__"):
        return os.fsdecode(os.fspath(points))
    return "points"


def _study_area(domain, domain_crs, crs):
    """The public study area (raises the helpful message when none is given)."""
    return as_study_area(domain, domain_crs=domain_crs, working_crs=crs)


def _fixed_grid(area, grid_for):
    """The grid of ``area``, built once, and a ``grid_for`` that returns it for that area."""
    grid = grid_for(area)
    return grid, (lambda a: grid if a is area else grid_for(a))
