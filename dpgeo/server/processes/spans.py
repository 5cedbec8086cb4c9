"""DP-DBSCAN spans (Qiu & Yi) as a service process: one ε-DP release of cluster spans."""

from __future__ import annotations

import threading
from collections import OrderedDict

from ...mechanisms.dbscan import DEFAULT_BETA
from .base import Process, check_grid_size, dataset_input, epsilon_input, title_input

__all__ = ["SpansProcess", "dbscan_inputs", "public_preview"]

_PREVIEW_KEYS = ("epsilon", "radius_m", "min_points", "beta", "eta", "histogram", "gamma", "extent")
_cache = OrderedDict()
_cache_lock = threading.Lock()
#: Noise previews kept (each a small dict; a function of public parameters only).
PREVIEW_CACHE_SIZE = 256


def public_preview(dataset, params, settings) -> dict:
    """:func:`dpgeo.pipeline.noise_preview` for a dataset's public study area, after the service's grid bound.

    Validates every public parameter the way a release would, without reading
    data. The answer depends on public inputs only, so recent ones are cached.
    """
    from ...grid import cell_width_for_radius
    from ...pipeline import noise_preview

    key = (dataset.name, id(dataset.area), dataset.crs, dataset.sensitivity) + tuple(params[k] for k in _PREVIEW_KEYS)
    with _cache_lock:
        hit = _cache.get(key)
        if hit is not None:
            _cache.move_to_end(key)
            return dict(hit)
    cell_m = cell_width_for_radius(params["radius_m"], params["eta"])
    check_grid_size(dataset.area, cell_m, settings.max_grid_cells, "radius_m (with eta)")
    out = noise_preview(epsilon=params["epsilon"], radius_m=params["radius_m"], min_points=params["min_points"],
                        domain=dataset.area, crs=dataset.crs, beta=params["beta"], eta=params["eta"],
                        histogram=params["histogram"], gamma=params["gamma"], extent=params["extent"],
                        sensitivity=dataset.sensitivity)
    with _cache_lock:
        _cache[key] = out
        while len(_cache) > PREVIEW_CACHE_SIZE:
            _cache.popitem(last=False)
    return dict(out)


def dbscan_inputs():
    """The DP-DBSCAN parameters (shared with the noise preview)."""
    return {
        "dataset": dataset_input(),
        "epsilon": epsilon_input(),
        "radius_m": {"title": "Radius α (metres)",
                     "description": "DBSCAN radius in metres: a cell is a core cell when its α-neighbourhood holds at "
                                    "least MinPts points (certainly, with the noise bound Γ added).",
                     "schema": {"type": "number", "exclusiveMinimum": 0, "maximum": 100000},
                     "minOccurs": 1, "maxOccurs": 1},
        "min_points": {"title": "MinPts",
                       "description": "DBSCAN MinPts: the fewest points in a core cell's neighbourhood.",
                       "schema": {"type": "integer", "minimum": 1, "maximum": 1000000000},
                       "minOccurs": 1, "maxOccurs": 1},
        "beta": {"title": "β (failure probability of the noise bound)",
                 "description": "With probability at least 1 − β every reported core cell is a true candidate.",
                 "schema": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1,
                            "default": DEFAULT_BETA},
                 "minOccurs": 0, "maxOccurs": 1},
        "eta": {"title": "η′ (cell width factor)", "description": "Cells are η′·α/√2 metres wide.",
                "schema": {"type": "number", "exclusiveMinimum": 0, "maximum": 1, "default": 1.0},
                "minOccurs": 0, "maxOccurs": 1},
        "histogram": {"title": "DP histogram",
                      "description": "auto picks dense or sparse from the number of cells (public).",
                      "schema": {"type": "string", "enum": ["auto", "dense", "sparse"], "default": "auto"},
                      "minOccurs": 0, "maxOccurs": 1},
        "gamma": {"title": "Core threshold bound",
                  "description": "laplace: the paper's Γ_Lap (conservative, thinner spans); exact: the smallest bound "
                                 "with the same guarantee (finds smaller clusters).",
                  "schema": {"type": "string", "enum": ["laplace", "exact"], "default": "laplace"},
                  "minOccurs": 0, "maxOccurs": 1},
        "extent": {"title": "Span extent",
                   "description": "grown: core spans grown, never merged, into neighbouring certified cells; core: "
                                  "only the core cells.",
                   "schema": {"type": "string", "enum": ["grown", "core"], "default": "grown"},
                   "minOccurs": 0, "maxOccurs": 1},
    }


RELEASE_OUTPUTS = {
    "release": {"title": "The release",
                "description": "The published layer's id, links (OGC API - Features collection, items, web map, "
                               "files) and privacy metadata.",
                "schema": {"type": "object", "contentMediaType": "application/json"}},
    "layer": {"title": "The cluster layer",
              "description": "The released polygons with dp_count and its 95% interval, EPSG:4326 (RFC 7946).",
              "schema": {"type": "object", "contentMediaType": "application/geo+json"}},
}


class SpansProcess(Process):
    id = "dp-dbscan-spans"
    title = "DP-DBSCAN spans"
    description = ("ε-differentially private DBSCAN cluster spans (Qiu & Yi): polygons where clusters of points "
                   "certainly are, each with a noisy point count (dp_count) and its 95% interval. Spends ε from the "
                   "dataset's budget; the result is published as an OGC API - Features collection.")
    keywords = ("differential privacy", "DBSCAN", "clusters", "hot spots")
    inputs = {**dbscan_inputs(), "title": title_input()}
    outputs = RELEASE_OUTPUTS

    def check(self, params, dataset, settings):
        public_preview(dataset, params, settings)  # every public check of the pipeline, without touching the data
        return params

    def run(self, points, params, dataset, *, ledger, analyst, progress=None):
        from ...pipeline import dbscan_spans

        return dbscan_spans(
            points, epsilon=params["epsilon"], radius_m=params["radius_m"], min_points=params["min_points"],
            domain=dataset["study_area"], crs=dataset["crs"], beta=params["beta"], eta=params["eta"],
            histogram=params["histogram"], gamma=params["gamma"], extent=params["extent"],
            sensitivity=dataset["max_points_per_record"], person=dataset["person"],
            max_points_per_person=dataset["max_points_per_person"], unattended=True, dataset=dataset["name"],
            ledger=ledger, analyst=analyst, progress=progress)
