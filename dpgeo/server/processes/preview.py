"""The free noise preview: what a DP-DBSCAN release would look like, from public parameters alone."""

from __future__ import annotations

from .base import Process
from .spans import dbscan_inputs, public_preview

__all__ = ["PreviewProcess"]


class PreviewProcess(Process):
    id = "noise-preview"
    title = "Noise preview for DP-DBSCAN spans"
    description = ("Γ, MinPts′ and the count error a DP-DBSCAN release with these parameters would have on the "
                   "dataset's public study area, and the dataset's budget left. Reads no data and spends no budget.")
    keywords = ("differential privacy", "DBSCAN", "noise", "preview")
    inputs = dbscan_inputs()
    outputs = {"preview": {"title": "Preview",
                           "description": "Noise bound Γ, MinPts′, thresholds, grid size, count error (95%), and "
                                          "the dataset's budget left.",
                           "schema": {"type": "object", "contentMediaType": "application/json"}}}
    job_control = ("sync-execute",)
    spends_budget = False

    def check(self, params, dataset, settings):
        public_preview(dataset, params, settings)
        return params

    def inline(self, params, dataset, settings):
        p = public_preview(dataset, params, settings)
        p["dataset"] = dataset.name
        return p
