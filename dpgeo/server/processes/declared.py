"""A service process generated from a mechanism's declaration (:mod:`dpgeo.declare`).

The process description's inputs are the declared parameters offered on the
service (their JSON Schema, title and help), beside the dataset, ε and an
optional title; :meth:`DeclaredProcess.check` checks the parameters and the
series in the request, in O(1) of the study area (the request's cost is
checked before, :mod:`dpgeo.server.limits`); the grid and the rest of the
public plan are made in the worker, before the charge; :meth:`DeclaredProcess.run`
is the one release pipeline in unattended mode, charged to the dataset.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from ...series_params import series_offered
from .base import (
    DATE_PATTERN,
    RELEASE_ID_PATTERN,
    Process,
    check_grid_size,
    dataset_input,
    epsilon_input,
    title_input,
)

__all__ = ["DeclaredProcess", "RELEASE_OUTPUTS", "input_description", "PREVIEW_CACHE_SIZE"]

RELEASE_OUTPUTS = {
    "release": {"title": "The release",
                "description": "The published layer's id, links (OGC API - Features collection, items, web map, "
                               "files) and privacy metadata.",
                "schema": {"type": "object", "contentMediaType": "application/json"}},
    "layer": {"title": "The layer",
              "description": "The released polygons with dp_count and its 95% interval, EPSG:4326 (RFC 7946).",
              "schema": {"type": "object", "contentMediaType": "application/geo+json"}},
}

#: Previews kept (each a small dict; a function of public parameters only).
PREVIEW_CACHE_SIZE = 256
_cache = OrderedDict()
_cache_lock = threading.Lock()


#: What the service adds to the declared series options (dpgeo.series_params): what its value is here, and the
#: bounds of its schema that the declaration's generic schema lacks.
_SERIES_NOTES = {
    "time": " One of the dataset's time columns (the data owner lists them); the series is published as one "
            "collection whose features carry period_start and period_end.",
    "append": " The value is the id of a series published by this process for this dataset.",
}
_SERIES_SCHEMA = {
    "time": {"minLength": 1, "maxLength": 64},
    "period_start": {"maxLength": 40, "pattern": DATE_PATTERN},
    "period_end": {"maxLength": 40, "pattern": DATE_PATTERN},
    "append": {"pattern": RELEASE_ID_PATTERN},
}


def _series_inputs() -> dict:
    return {p.name: {"title": p.title, "description": p.help + _SERIES_NOTES.get(p.name, ""),
                     "schema": {**p.schema("service"), **_SERIES_SCHEMA.get(p.name, {})},
                     "minOccurs": 0, "maxOccurs": 1}
            for p in series_offered("service")}


#: The inputs of a map series (every process that releases), besides the mechanism's own.
SERIES_INPUTS = _series_inputs()


def input_description(p) -> dict:
    """The OGC API - Processes input description of a declared parameter."""
    title = p.title + (f" ({p.unit})" if p.unit and p.unit not in ("%",) else "")
    return {"title": title, "description": p.help, "schema": p.schema("service"),
            "minOccurs": 1 if p.required else 0, "maxOccurs": 1}


class DeclaredProcess(Process):
    """The process of one declared mechanism: a release (reads data, spends ε) or a free preview."""

    def __init__(self, mech):
        self.mechanism = mech
        self.id = mech.name
        self.title = mech.title
        self.keywords = tuple(mech.keywords)
        self.spends_budget = mech.reads is not None
        inputs = {"dataset": dataset_input(), "epsilon": epsilon_input()}
        inputs.update({p.name: input_description(p) for p in mech.offered("service")})
        if self.spends_budget:
            inputs["title"] = title_input()
            inputs.update(SERIES_INPUTS)
            self.outputs = RELEASE_OUTPUTS
            self.description = (mech.description + " Spends ε from the dataset's budget; the result is published "
                                "as an OGC API - Features collection.")
        else:
            self.job_control = ("sync-execute",)
            self.outputs = {"preview": {
                "title": "Preview", "description": "What a release with these parameters would look like (noise "
                "bounds, thresholds, grid size, count error), and the dataset's budget left.",
                "schema": {"type": "object", "contentMediaType": "application/json"}}}
            self.description = mech.description
        self.inputs = inputs

    # -- checks (in the request, before any job is queued) ----------------------------------------------------------
    def _values(self, params, dataset) -> dict:
        names = {p.name for p in self.mechanism.offered("service")}
        return {k: v for k, v in params.items() if k in names}

    def plan(self, params, dataset, settings):
        """The public plan of a run on the dataset's study area (cached: public inputs only)."""
        from ...pipeline.run import contribution, public_plan

        mech = self.mechanism
        values = self._values(params, dataset)
        key = (mech.name, dataset.name, id(dataset.area), dataset.crs, dataset.sensitivity, params["epsilon"]) \
            + tuple(sorted(values.items()))
        with _cache_lock:
            hit = _cache.get(key)
            if hit is not None:
                _cache.move_to_end(key)
                return dict(hit)
        p, _, _ = public_plan(mech, values, None, epsilon=params["epsilon"], sensitivity=dataset.sensitivity)
        cell_m = mech.cell_width(dataset.area, p)
        if cell_m is not None:
            check_grid_size(dataset.area, cell_m, settings.max_grid_cells, mech.cell_option)
        if mech.reads is None:  # a preview: its grid is within the cost limits, checked before
            out = mech.preview(dataset.area, p, contribution(sensitivity=dataset.sensitivity))
        else:  # a release's cell set is built in its worker only, and planned there before the charge (whose
            out = {}  # refusals are answered 400 like these): never listed in the server's process
        with _cache_lock:
            _cache[key] = out
            while len(_cache) > PREVIEW_CACHE_SIZE:
                _cache.popitem(last=False)
        return dict(out)

    def check(self, params, dataset, settings):
        self.plan(params, dataset, settings)  # every public check of the pipeline, without touching the data
        if self.spends_budget:
            self.check_series(params, dataset, settings)
        return params

    def series_values(self, params, dataset) -> dict:
        """The library's series keywords of a request (empty for a single release)."""
        if params.get("time") is None and params.get("period") is None and not params.get("cumulative") \
                and params.get("append") is None:
            return {}
        read = dataset["read"] if isinstance(dataset, dict) else dataset.read_options()
        get = dataset.get if isinstance(dataset, dict) else (lambda k: getattr(dataset, k))
        return {"time": params.get("time"), "period": params.get("period"), "period_start": params.get("period_start"),
                "period_end": params.get("period_end"), "timezone": get("timezone"), "time_format": get("time_format"),
                "person_accounting": params.get("person_accounting") or "series",
                "cumulative": bool(params.get("cumulative")), "person": read.get("person")}

    def check_series(self, params, dataset, settings):
        """A series' public checks, in the request: an offered time column, periods from the bounds, the series to
        continue (published by this process for this dataset)."""
        from ...errors import ParameterError
        from ...series.options import series_options

        values = self.series_values(params, dataset)
        if not values:
            return
        if values["time"] not in dataset.time_columns:
            offered = ", ".join(dataset.time_columns) or "none"
            raise ParameterError(f"input 'time' must be one of the time columns of dataset {dataset.name!r} "
                                 f"({offered})")
        so = series_options({**values, "max_points_per_person": dataset.max_points_per_person})
        if params.get("append") is not None:
            from ...periods import iso_utc, parse_instant
            from ..releases import ReleaseStore

            rec = ReleaseStore(settings.releases).get(params["append"])
            if rec is None or rec.get("dataset") != dataset.name or rec.get("process") != self.id \
                    or not isinstance(rec.get("metadata", {}).get("series"), dict):
                raise ParameterError("input 'append' must be the id of a series this process published for this "
                                     "dataset")
            end = parse_instant(rec["metadata"]["period_end"], None) if rec["metadata"].get("period_end") else None
            if end is not None and so.periods.start < end:
                raise ParameterError(f"input 'period_start' must be at or after the end of the series it continues "
                                     f"({iso_utc(end)}): only later periods are appended")
            from ...series.append import time_basis_problems

            differ = time_basis_problems(rec["metadata"]["series"], so)
            if differ:  # a record's time read otherwise could fall in the new periods: released twice
                raise ParameterError("input 'time' must be read as in the series it continues (" + "; ".join(differ)
                                     + "): append with the same time column, or release a new series")

    def inline(self, params, dataset, settings):
        out = self.plan(params, dataset, settings)
        out["dataset"] = dataset.name
        return out

    # -- the release (in a worker) -----------------------------------------------------------------------------------
    def run(self, points, params, dataset, *, ledger, analyst, progress=None):
        from ...pipeline.run import run_release
        from ...release import DatasetChoice

        # the server declared each dataset's file at start: the configured name is the dataset, as resolved
        # (no file is fingerprinted again in every job)
        series = self.series_values(params, dataset)
        series.pop("person", None)
        if params.get("append") is not None:
            series["append"] = dataset.get("append_path")
        return run_release(self.mechanism, points, {
            **self._values(params, dataset), **series, "epsilon": params["epsilon"], "domain": dataset["study_area"],
            "crs": dataset["crs"], "sensitivity": dataset["max_points_per_record"], "person": dataset["person"],
            "max_points_per_person": dataset["max_points_per_person"], "unattended": True,
            "dataset": DatasetChoice(dataset["name"], dataset["name"]), "ledger": ledger, "analyst": analyst,
            "progress": progress, "max_memory_bytes": dataset.get("max_memory_bytes"),
            "seed": dataset.get("test_seed")})  # [server] test_seed (tests only): the release says it is not private

    def release_title(self, params, dataset_title):
        from ...declare import Values

        name = self.mechanism.short_title(Values(params))
        return params.get("title") or f"{name} of {dataset_title} (ε = {params['epsilon']:g})"
