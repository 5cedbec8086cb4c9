"""The algorithms ``dpgeo compare`` runs, declared once: dpgeo's mechanisms and two comparison systems.

The comparison systems from the literature, EPP-KM and DiffHWT, are **not
differentially private** under dpgeo's neighbouring relation; they are
declared here only for their parameters (``dpgeo compare`` builds its
options from these declarations and the mechanisms'), and their results can
never be written as layers.
"""

from __future__ import annotations

from ..declare import Mechanism, Param
from ..errors import ParameterError
from ..declarations.spans import SPANS
from ..declarations.kmeans import KMEANS, KMEANS_PARAMS
from ..declarations.wavecluster import WAVECLUSTER

__all__ = ["EPPKM", "DIFFHWT", "COMPARED", "REFERENCE_NEEDS", "required"]

#: The number of clusters, shared with DP k-means (one option ``--k``).
K_PARAM = KMEANS_PARAMS[0]


class EppkmSystem(Mechanism):
    """EPP-KM (bootstrap bags; adds no noise): NOT differentially private."""

    name = "eppkm"
    title = "EPP-KM (NOT differentially private)"
    reads = "points"
    epsilon_required = False
    fronts = frozenset({"compare"})
    params = (
        K_PARAM,
        Param("bags", "integer", "Bootstrap bags B", "eppkm: EPP-KM's number of bootstrap bags B.", default=1,
              minimum=1, label="bags (EPP-KM's number of bootstrap bags B)"),
    )


class DiffhwtSystem(Mechanism):
    """DiffHWT (noisy Haar wavelet coefficients): NOT differentially private under dpgeo's relation."""

    name = "diffhwt"
    title = "DiffHWT (NOT differentially private)"
    reads = "points"
    fronts = frozenset({"compare"})
    params = (
        K_PARAM,
        Param("level", "integer", "Decomposition level s", "diffhwt: the paper's level s (only 0 for 2-D points).",
              default=0, minimum=0, fronts=frozenset({"api"})),
        Param("calibration", "choice", "Noise calibration",
              "diffhwt: noise for one attribute (the paper) or one whole record.", default="attribute",
              choices=("attribute", "record")),
    )

    def check(self, p):
        if p.level != 0:
            raise ParameterError("DiffHWT on 2-D points has only level s = 0 (the paper decomposes at least once "
                                 f"and n̄ = 2); got level={p.level!r}")


EPPKM = EppkmSystem()
DIFFHWT = DiffhwtSystem()

#: What ``compare(algorithm=...)`` runs, by algorithm name.
COMPARED = {"spans": SPANS, "wavecluster": WAVECLUSTER, "kmeans": KMEANS, "eppkm": EPPKM, "diffhwt": DIFFHWT}

#: Parameters a comparison needs although the mechanism alone does not: the non-private reference runs
#: with them (scikit-learn's DBSCAN needs a radius and MinPts; spans without them choose their own).
REFERENCE_NEEDS = {"spans": ("radius_m", "min_points")}


def required(algorithm) -> list:
    """The declared parameters a comparison of ``algorithm`` must be given."""
    mech = COMPARED[algorithm]
    return [p for p in mech.params if p.required or p.name in REFERENCE_NEEDS.get(algorithm, ())]
