"""The service's limits: what one request may cost, checked from the request alone before it is accepted.

Every process declares an estimate of one period's cells, features, memory
and work (:meth:`dpgeo.declare.Mechanism.cost`, O(1): no cell is listed);
:func:`request_cost` multiplies it by the series' periods and
:func:`check_cost` compares it with the ``[limits]`` table of the
configuration, before the analyst's job limit, before the budget is looked
at and before anything is charged. A refusal is a 413 that names the limit,
its value and the request's estimate. What cannot be estimated up front (the
points a k-means run keeps) runs in the worker under the worker's own
limits: a wall-clock time per job and a cap on the memory a worker may add
(``RLIMIT_AS``). The defaults suit a 2-core, 4 GB host running one worker
(``docs/service.md``, "Limits").
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

__all__ = ["Limits", "LIMIT_KEYS", "check_cost", "parse_limits", "request_cost"]


@dataclass(frozen=True)
class Limits:
    """The ``[limits]`` table (defaults for a 2-core, 4 GB host with one worker)."""

    #: Cells of one period's public cell set (squares over the study area's bounding box, or H3 cells).
    max_cells: int = 4_000_000
    #: Periods of one series.
    max_periods: int = 1000
    #: Cells times periods: the counts a series holds.
    max_cell_periods: int = 20_000_000
    #: Features one release may publish, every period together (each costs memory in the worker, and disk).
    max_features: int = 150_000
    #: Estimated memory of one job (bytes); at most ``worker_memory_bytes``.
    max_job_bytes: int = 1536 * 2**20
    #: Elementary cell operations of one job (cells, neighbour pairs, smoothing pixels, k-means centre steps).
    max_work: int = 1_000_000_000
    #: Wall-clock seconds a job may run in its worker; then it is stopped (its charge settled by its phase).
    job_seconds: float = 600.0
    #: Memory a worker may add to what it holds when it starts (bytes, ``RLIMIT_AS``; 0: no cap).
    worker_memory_bytes: int = 2 * 2**30
    #: Bytes of released features the server keeps in memory to answer ``/items`` (the rest is read from files).
    release_cache_bytes: int = 64 * 2**20


#: The keys of ``[limits]``, with their bounds.
LIMIT_KEYS = {
    "max_cells": (1, 1 << 34), "max_periods": (1, 1000), "max_cell_periods": (1, 1 << 40),
    "max_features": (1, 1 << 34), "max_job_bytes": (1 << 20, 1 << 44), "max_work": (1, 1 << 50),
    "job_seconds": (1, 7 * 86400), "worker_memory_bytes": (0, 1 << 44), "release_cache_bytes": (0, 1 << 40),
}


def parse_limits(t, error) -> Limits:
    """The ``[limits]`` table checked (``error``: the exception class of a bad configuration)."""
    from ..resources import parse_bytes

    if t is None:
        return Limits()
    if not isinstance(t, dict):
        raise error("[limits] must be a table")
    unknown = sorted(set(t) - set(LIMIT_KEYS))
    if unknown:
        raise error(f"[limits] has no key {unknown[0]!r}; the keys are {', '.join(LIMIT_KEYS)}")
    kw = {}
    for key, (lo, hi) in LIMIT_KEYS.items():
        if key not in t:
            continue
        v = t[key]
        if key.endswith("_bytes") and isinstance(v, str):
            try:
                v = parse_bytes(v)
            except ValueError:
                raise error(f"[limits] {key} must be a number of bytes, or with K, M, G or T (e.g. \"2G\"), "
                            f"got {v!r}") from None
        if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(v) or not lo <= v <= hi:
            raise error(f"[limits] {key} must be a number in [{lo:g}, {hi:g}], got {v!r}")
        kw[key] = float(v) if key == "job_seconds" else int(v)
    limits = Limits(**kw)
    if limits.worker_memory_bytes and limits.max_job_bytes > limits.worker_memory_bytes:
        raise error(f"[limits] max_job_bytes ({limits.max_job_bytes}) must be at most worker_memory_bytes "
                    f"({limits.worker_memory_bytes}): a job the estimate accepts must fit in its worker")
    return limits


def request_cost(process, params, dataset) -> dict | None:
    """The estimate of a request: cells per period, periods, cell-periods, features, bytes, work (None: the
    process has no declared cost)."""
    from ..costs import RUN_FIXED_BYTES
    from ..pipeline.run import contribution, public_plan

    mech = getattr(process, "mechanism", None)
    if mech is None:
        return None
    values = {k: v for k, v in params.items() if k in {p.name for p in mech.offered("service")}}
    p, _, _ = public_plan(mech, values, None, epsilon=params["epsilon"], sensitivity=dataset.sensitivity)
    c = mech.cost(dataset.area, p, contribution(sensitivity=dataset.sensitivity))
    periods = _periods(process, params, dataset)
    return {"cells": int(c.cells), "periods": periods, "cell_periods": int(c.cells) * periods,
            "features": int(c.features) * periods, "bytes": RUN_FIXED_BYTES + int(c.bytes) * periods,
            "work": float(c.work) * periods}


def _periods(process, params, dataset) -> int:
    """How many periods a request releases (1 for a single release), from its public bounds alone."""
    series = getattr(process, "series_values", None)
    values = series(params, dataset) if series is not None else {}
    if not values:
        return 1
    from ..periods import count_periods

    if values.get("period") is None or values.get("period_start") is None or values.get("period_end") is None:
        return 1  # refused by the series' own checks, with their message
    return count_periods(values["period"], values["period_start"], values["period_end"], values.get("timezone"))


_WHAT = {  # limit key -> (estimate key, what it is, unit)
    "max_cells": ("cells", "cells in one period", "cells"),
    "max_periods": ("periods", "periods", "periods"),
    "max_cell_periods": ("cell_periods", "cells times periods", "cell-periods"),
    "max_features": ("features", "features", "features"),
    "max_job_bytes": ("bytes", "memory", "bytes"),
    "max_work": ("work", "work", "cell operations"),
}
_FIX = {
    "max_cells": "use larger cells (a larger cell size or radius, a coarser H3 resolution)",
    "max_periods": "use a longer period or shorter bounds",
    "max_cell_periods": "use larger cells, a longer period or shorter bounds",
    "max_features": "use larger cells, fewer clusters, a longer period or shorter bounds",
    "max_job_bytes": "use larger cells, a smaller smoothing bandwidth or neighbourhood, or fewer periods",
    "max_work": "use larger cells, a smaller smoothing bandwidth or neighbourhood, fewer clusters or fewer periods",
}


def check_cost(cost, limits: Limits):
    """None, or ``(limit key, message)`` for the first limit the estimate ``cost`` exceeds."""
    if cost is None:
        return None
    for key, (est, what, unit) in _WHAT.items():
        limit = getattr(limits, key)
        if cost[est] > limit:
            shown = _amount(cost[est], unit)
            return key, (f"this request's estimated {what} is {shown}; this server allows at most "
                         f"{_amount(limit, unit)} ([limits] {key}): {_FIX[key]}")
    return None


def _amount(v, unit) -> str:
    if unit == "bytes":
        from ..resources import format_bytes

        return format_bytes(v)
    return f"{v:,.0f} {unit}" if v < 1e15 else f"{v:.3g} {unit}"
