"""DP WaveCluster (Chen, Yu & Chirkova) as a service process: one ε-DP release of hot-cell clusters."""

from __future__ import annotations

from ...errors import ParameterError
from .base import Process, check_grid_size, dataset_input, epsilon_input, title_input
from .spans import RELEASE_OUTPUTS

__all__ = ["WaveClusterProcess"]

#: The private methods offered (the non-private reference and the synthetic-data baseline are not).
METHODS = ("privthr", "privthr-em", "privqt")


class WaveClusterProcess(Process):
    id = "dp-wavecluster"
    title = "DP WaveCluster"
    description = ("ε-differentially private WaveCluster (Chen, Yu & Chirkova): noisy grid counts, a wavelet "
                   "approximation, a private significance threshold and 8-connected clusters, as polygons with a "
                   "noisy count (dp_count). Give exactly one of cell_m and grid_size. Spends ε from the dataset's "
                   "budget; the result is published as an OGC API - Features collection.")
    keywords = ("differential privacy", "WaveCluster", "wavelets", "clusters")
    inputs = {
        "dataset": dataset_input(),
        "epsilon": epsilon_input(),
        "method": {"title": "Method",
                   "description": "privthr: noisy counts and a noisy count of non-positive coefficients (ε split "
                                  "0.9/0.1); privthr-em: the threshold by the exponential mechanism (0.7/0.3); "
                                  "privqt: noisy counts only.",
                   "schema": {"type": "string", "enum": list(METHODS), "default": "privthr"},
                   "minOccurs": 0, "maxOccurs": 1},
        "cell_m": {"title": "Cell width (metres)", "description": "Give this or grid_size.",
                   "schema": {"type": "number", "exclusiveMinimum": 0, "maximum": 1000000},
                   "minOccurs": 0, "maxOccurs": 1},
        "grid_size": {"title": "Cells along the longer side", "description": "Give this or cell_m.",
                      "schema": {"type": "integer", "minimum": 2, "maximum": 16384},
                      "minOccurs": 0, "maxOccurs": 1},
        "percentile": {"title": "Percentile p",
                       "description": "Share (in %) of the positive coefficients that are not significant.",
                       "schema": {"type": "number", "minimum": 0, "exclusiveMaximum": 100, "default": 60.0},
                       "minOccurs": 0, "maxOccurs": 1},
        "wavelet": {"title": "Wavelet",
                    "schema": {"type": "string", "enum": ["haar", "bior2.2", "bior1.3", "db2"], "default": "haar"},
                    "minOccurs": 0, "maxOccurs": 1},
        "count_split": {"title": "Share of ε for the counts",
                        "description": "Default 0.9 (privthr) or 0.7 (privthr-em).",
                        "schema": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
                        "minOccurs": 0, "maxOccurs": 1},
        "k_rule": {"title": "Estimate of the number of significant coefficients (privthr)",
                   "schema": {"type": "string", "enum": ["direct", "prune", "prune-half"], "default": "direct"},
                   "minOccurs": 0, "maxOccurs": 1},
        "title": title_input(),
    }
    outputs = RELEASE_OUTPUTS

    def check(self, params, dataset, settings):
        from ...pipeline import _wavecluster_grid

        if (params.get("cell_m") is None) == (params.get("grid_size") is None):
            raise ParameterError("give exactly one of the inputs cell_m (cell width in metres) and grid_size "
                                 "(cells along the longer side of the study area)")
        if params.get("grid_size") is not None:
            b = dataset.area.polygon.bounds
            cell_m = max(b[2] - b[0], b[3] - b[1]) / params["grid_size"]
        else:
            cell_m = params["cell_m"]
        check_grid_size(dataset.area, cell_m, settings.max_grid_cells, "cell_m or grid_size")
        _wavecluster_grid(dataset.area, params.get("cell_m"), params.get("grid_size"))
        return params

    def run(self, points, params, dataset, *, ledger, analyst, progress=None):
        from ...pipeline import wavecluster

        return wavecluster(
            points, method=params["method"], epsilon=params["epsilon"], cell_m=params.get("cell_m"),
            grid_size=params.get("grid_size"), percentile=params["percentile"], domain=dataset["study_area"],
            crs=dataset["crs"], wavelet=params["wavelet"], count_split=params.get("count_split"),
            k_rule=params["k_rule"], sensitivity=dataset["max_points_per_record"], person=dataset["person"],
            max_points_per_person=dataset["max_points_per_person"], unattended=True, dataset=dataset["name"],
            ledger=ledger, analyst=analyst, progress=progress)

    def release_title(self, params, dataset_title):
        return params.get("title") or (f"DP WaveCluster ({params['method']}) of {dataset_title} "
                                       f"(ε = {params['epsilon']:g})")
