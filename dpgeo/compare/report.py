"""The comparison report: what ``dpgeo compare`` prints and returns (owner only, NOT private)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..release import Release

__all__ = ["CompareReport", "NOT_PRIVATE_NOTICE", "ALGORITHMS", "NOT_DP_ALGORITHMS"]

#: The notice printed with every comparison (and raised as a :class:`NotPrivateWarning`).
NOT_PRIVATE_NOTICE = (
    "NOT PRIVATE: this comparison is computed from the exact private data. It is for the data owner only; "
    "do not publish or share these numbers or the map. Publish only a layer from a separate private run."
)

ALGORITHMS = ("spans", "wavecluster", "kmeans", "eppkm", "diffhwt")
#: Comparison methods whose results are not differentially private (marked so wherever they appear).
NOT_DP_ALGORITHMS = ("eppkm", "diffhwt")


@dataclass
class CompareReport:
    """Result of :func:`compare`. **Not private**: never publish any part of it.

    Attributes
    ----------
    algorithm : str
        One of :data:`ALGORITHMS`.
    measures : dict
        Utility measures (floats and ints), see :func:`compare`.
    private : Release
        The private run that was compared (one draw; not written anywhere).
    reference : dict
        Description of the non-private reference (``name``, parameters).
    reference_labels, private_labels : numpy.ndarray
        Cluster id (0 = noise) of every point inside the study area, by the
        reference and by the private layer.
    png : str or None
        Path of the side-by-side map, if one was written.
    notice : str
        :data:`NOT_PRIVATE_NOTICE`.
    """

    algorithm: str
    measures: dict
    private: Release
    reference: dict
    reference_labels: np.ndarray = field(repr=False)
    private_labels: np.ndarray = field(repr=False)
    png: str | None = None
    notice: str = NOT_PRIVATE_NOTICE

    def text(self) -> str:
        """The report as text, under the not-private notice (once, at the top)."""
        m = self.measures
        md = self.private.metadata
        bar = "!" * 78
        lines = [bar, _wrap(self.notice), bar, ""]
        if self.algorithm in NOT_DP_ALGORITHMS:
            lines += [_wrap(f"{md['mechanism']} is NOT DIFFERENTIALLY PRIVATE:")]
            lines += [_wrap(r, initial="  - ", subsequent="    ") for r in md["not_private_reasons"]]
            lines.append("")
        if self.algorithm == "kmeans":
            sp = md["epsilon_split"]
            lines.append(f"private : DP k-means, epsilon={md['epsilon']:g} (centroids {sp['centroids_total']:g} over "
                         f"{md['iterations']} iterations, cell counts {sp['layer_counts']:g}), k={md['k']}")
        elif self.algorithm == "eppkm":
            lines.append(f"compared: EPP-KM (NOT differentially private), K={md['K']}, B={md['B']} bags")
        elif self.algorithm == "diffhwt":
            lines.append(f"compared: DiffHWT (NOT differentially private), epsilon={md['epsilon']:g} as in the paper "
                         f"(calibration {md['sensitivity']!r}), s={md['s']}, k-means with k={md['k']} on the "
                         "published rows")
        elif self.algorithm == "spans":
            lines.append(f"private : DP-DBSCAN spans, epsilon={md['epsilon']:g}, radius={md['radius_m']:g} m, "
                         f"MinPts={md['min_points']} (core threshold MinPts+Γ = {md['core_threshold']:.1f}), "
                         f"beta={md['beta']:g}, gamma={md['gamma_method']}")
        else:
            lines.append(f"private : DP WaveCluster {md['method']}, epsilon={md['epsilon']:g}, "
                         f"cell={md['cell_width_m']:.1f} m, percentile={md['percentile']:g}, "
                         f"wavelet={md['wavelet']}")
        lines.append(f"reference (NOT private): {self.reference['name']}")
        lines.append(f"points inside the study area: {m['n_points']:,}")
        lines.append("")
        rows = [
            ("clusters (reference / private)", f"{m['n_clusters_reference']} / {m['n_clusters_private']}"),
            ("share of points in a cluster (reference / private)",
             f"{m['clustered_share_reference']:.1%} / {m['clustered_share_private']:.1%}"),
            ("reference-clustered points inside a private cluster (recall)", _pct(m["recall"])),
            ("private-clustered points that the reference clusters (precision)", _pct(m["precision"])),
            ("adjusted Rand index (1 = same partition, 0 = chance)", f"{m['ari']:.3f}"),
            ("adjusted mutual information", f"{m['ami']:.3f}"),
            ("F-measure (reference as ground truth)", f"{m['f_measure']:.3f}"),
        ]
        if self.algorithm in ("spans", "kmeans"):
            what = "span" if self.algorithm == "spans" else "cell"
            rows += [
                (f"dp_count error: mean |dp_count - true count| per {what}", _num(m["count_mae"], "{:.1f}")),
                (f"dp_count error: median relative error per {what}", _pct(m["count_median_rel_error"])),
                (f"{what}s whose 95% interval holds the true count", _pct(m["count_interval_coverage"])),
            ]
        if self.algorithm in ("kmeans", "eppkm"):
            rows.append(("centroid shift: mean distance to the matched reference centroid (m)",
                         _num(m["centroid_shift_m"], "{:.1f}")))
        if self.algorithm == "wavecluster":
            rows += [
                ("k' relative error |k' - k| / k (significant coefficients)", _pct(m["kprime_error"])),
                ("DSG_C (0 = same cells and clusters)", f"{m['dsg_c']:.3f}"),
                ("OCM (classifier dissimilarity, 0 = same)", _num(m["ocm"], "{:.3f}")),
                ("2CE (pairwise classifier dissimilarity, 0 = same)", _num(m["two_ce"], "{:.4f}")),
            ]
        width = max(len(r[0]) for r in rows)
        lines += [f"{k.ljust(width)} : {v}" for k, v in rows]
        if self.png:
            lines += ["", f"side-by-side map (NOT private): {self.png}"]
        if self.algorithm in NOT_DP_ALGORITHMS:
            lines += ["", _wrap(f"{md['mechanism']}: NOT DIFFERENTIALLY PRIVATE (see above); never publish "
                                "its output.")]
        return "\n".join(lines)

    def to_dict(self) -> dict:
        """JSON-serialisable summary (NaN as ``None``), with the notice. Not private."""
        def clean(v):
            if isinstance(v, float) and math.isnan(v):
                return None
            return v

        md = self.private.metadata
        return {"notice": self.notice, "algorithm": self.algorithm, "reference": self.reference,
                "method_differentially_private": bool(md.get("differentially_private"))
                and self.algorithm not in NOT_DP_ALGORITHMS,
                "method_not_private_reasons": list(md.get("not_private_reasons") or []),
                "measures": {k: clean(v) for k, v in self.measures.items()}, "png": self.png}

    def __str__(self) -> str:
        return self.text()


def _wrap(text, width=78, initial="", subsequent=""):
    import textwrap

    return "\n".join(textwrap.wrap(text, width, initial_indent=initial, subsequent_indent=subsequent))


def _pct(v):
    return "n/a" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.1%}"


def _num(v, f):
    return "n/a" if v is None or (isinstance(v, float) and math.isnan(v)) else f.format(v)
