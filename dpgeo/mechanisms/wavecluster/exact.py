"""Exact WaveCluster on the true counts — NOT differentially private.

The non-private reference (Sheikholeslami, Chatterjee & Zhang, VLDB 1998):
the level-1 approximation of the true count grid, the positive coefficients
not below the p-th percentile of the positive ones, their 8-connected
components mapped back to cells.

Privacy: none. It reads the true counts and reports true statistics
(``n_positive``, ``n_nonpositive``, ``k``); the report says
``differentially_private: false`` with the reason. Use it to compare, never
to publish. The Baseline (:mod:`.baseline`) runs it on DP synthetic counts,
where it is post-processing.
"""

from __future__ import annotations

from .cells import WaveClusterCells, _finish, _start
from .thresholds import _json_float, _n_nonsignificant, _threshold_from_positives
from .transform import _exact_approximation

__all__ = ["exact_wavecluster"]


def _exact_cells(c, *, filt, mode, p_micro, report) -> WaveClusterCells:
    """Exact WaveCluster on checked counts ``c`` (see :func:`.cells._start`)."""
    coefs = _exact_approximation(c, filt, mode)
    pos = coefs.positive()
    w = coefs.normalised()
    m = int(pos.sum())
    n0 = _n_nonsignificant(m, p_micro)
    t = _threshold_from_positives(w[pos], n0)
    sig = pos & (w >= t)
    report.update({
        "epsilon": None,
        "differentially_private": False,
        "not_private_reasons": ["method 'exact' reads the true counts"],
        "n_positive": m,
        "n_nonpositive": int(pos.size - m),
        "k": m - n0,
        "threshold": _json_float(t),
        "threshold_rule": ">=",
    })
    return _finish(sig, c.shape, filt, report, None, None)


def exact_wavecluster(counts, *, percentile: float = 60.0, wavelet: str = "haar",
                      mode: str = "zero") -> WaveClusterCells:
    """Exact (non-private) WaveCluster of a count grid.

    The same as ``wavecluster_cells(counts, method="exact", ...)``.

    Examples
    --------
    >>> import numpy as np
    >>> c = np.zeros((8, 8), dtype=int); c[0:2, 0:2] = 9; c[5:8, 5:8] = 7
    >>> r = exact_wavecluster(c, percentile=0)
    >>> r.n_clusters, r.report["differentially_private"]
    (2, False)
    """
    c, _, filt, p_micro, _, report = _start(counts, method="exact", wavelet=wavelet, mode=mode,
                                            percentile=percentile, sensitivity=1, universe=None,
                                            k_rule="direct", count_cap=None, n_public=None)
    return _exact_cells(c, filt=filt, mode=mode, p_micro=p_micro, report=report)
