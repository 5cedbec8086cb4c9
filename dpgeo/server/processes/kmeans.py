"""DP k-means (DPLloyd, Su et al.) as a service process: one ε-DP release of Voronoi cells with noisy counts."""

from __future__ import annotations

from ...mechanisms.kmeans import DEFAULT_ITERATIONS, DEFAULT_LAYER_SHARE, MAX_K
from .base import Process, dataset_input, epsilon_input, title_input
from .spans import RELEASE_OUTPUTS

__all__ = ["KMeansProcess"]


class KMeansProcess(Process):
    id = "dp-kmeans"
    title = "DP k-means"
    description = ("ε-differentially private k-means (DPLloyd: noisy Lloyd iterations over the public study area, "
                   "exact discrete Laplace noise): the Voronoi cells of the private centroids, clipped to the study "
                   "area, each with a noisy point count (dp_count) and its 95% interval. Spends ε from the "
                   "dataset's budget; the result is published as an OGC API - Features collection.")
    keywords = ("differential privacy", "k-means", "Voronoi", "clusters")
    inputs = {
        "dataset": dataset_input(),
        "epsilon": epsilon_input(),
        "k": {"title": "Number of clusters k",
              "description": "Cells whose centroids coincide are merged and cells outside the study area dropped, "
                             "so the layer may have fewer than k cells.",
              "schema": {"type": "integer", "minimum": 1, "maximum": MAX_K}, "minOccurs": 1, "maxOccurs": 1},
        "iterations": {"title": "Lloyd iterations",
                       "description": "Each iteration spends an equal share of the ε left after the layer's counts.",
                       "schema": {"type": "integer", "minimum": 1, "maximum": 50, "default": DEFAULT_ITERATIONS},
                       "minOccurs": 0, "maxOccurs": 1},
        "layer_share": {"title": "Share of ε for the published counts",
                        "schema": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1,
                                   "default": DEFAULT_LAYER_SHARE},
                        "minOccurs": 0, "maxOccurs": 1},
        "count_share": {"title": "Share of each iteration's ε for the cluster sizes",
                        "description": "Default: the rule that balances the noise of the sizes and the coordinate "
                                       "sums for the study area's shape (about 0.39 for a square).",
                        "schema": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
                        "minOccurs": 0, "maxOccurs": 1},
        "title": title_input(),
    }
    outputs = RELEASE_OUTPUTS

    def check(self, params, dataset, settings):
        from ...mechanisms.kmeans import kmeans_plan

        kmeans_plan(dataset.area.polygon.bounds, k=params["k"], epsilon=params["epsilon"],
                    iterations=params["iterations"], layer_share=params["layer_share"],
                    count_share=params.get("count_share"), sensitivity=dataset.sensitivity)
        return params

    def run(self, points, params, dataset, *, ledger, analyst, progress=None):
        from ...pipeline.kmeans import kmeans

        return kmeans(
            points, epsilon=params["epsilon"], k=params["k"], domain=dataset["study_area"], crs=dataset["crs"],
            iterations=params["iterations"], layer_share=params["layer_share"],
            count_share=params.get("count_share"), sensitivity=dataset["max_points_per_record"],
            person=dataset["person"], max_points_per_person=dataset["max_points_per_person"], unattended=True,
            dataset=dataset["name"], ledger=ledger, analyst=analyst, progress=progress)

    def release_title(self, params, dataset_title):
        return params.get("title") or f"DP k-means (k = {params['k']}) of {dataset_title} (ε = {params['epsilon']:g})"
