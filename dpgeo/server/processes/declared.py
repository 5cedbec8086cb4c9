"""A service process generated from a mechanism's declaration (:mod:`dpgeo.declare`).

The process description's inputs are the declared parameters offered on the
service (their JSON Schema, title and help), beside the dataset, ε and an
optional title; :meth:`DeclaredProcess.check` runs the same public plan as a
release would (grid, memory, noise bounds) on the dataset's public study area,
after the service's own bound on the number of cells; :meth:`DeclaredProcess.run`
is the one release pipeline in unattended mode, charged to the dataset.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from .base import Process, check_grid_size, dataset_input, epsilon_input, title_input

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
        if mech.reads is None:
            out = mech.preview(dataset.area, p, contribution(sensitivity=dataset.sensitivity))
        else:
            _, _, setup = public_plan(mech, values, dataset.area, epsilon=params["epsilon"],
                                      sensitivity=dataset.sensitivity)
            out = {}
        with _cache_lock:
            _cache[key] = out
            while len(_cache) > PREVIEW_CACHE_SIZE:
                _cache.popitem(last=False)
        return dict(out)

    def check(self, params, dataset, settings):
        self.plan(params, dataset, settings)  # every public check of the pipeline, without touching the data
        return params

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
        return run_release(self.mechanism, points, {
            **self._values(params, dataset), "epsilon": params["epsilon"], "domain": dataset["study_area"],
            "crs": dataset["crs"], "sensitivity": dataset["max_points_per_record"], "person": dataset["person"],
            "max_points_per_person": dataset["max_points_per_person"], "unattended": True,
            "dataset": DatasetChoice(dataset["name"], dataset["name"]), "ledger": ledger, "analyst": analyst,
            "progress": progress})

    def release_title(self, params, dataset_title):
        from ...declare import Values

        name = self.mechanism.short_title(Values(params))
        return params.get("title") or f"{name} of {dataset_title} (ε = {params['epsilon']:g})"
