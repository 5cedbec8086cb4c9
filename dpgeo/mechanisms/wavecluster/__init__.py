"""WaveCluster and its differentially private variants on count grids.

WaveCluster (Sheikholeslami, Chatterjee & Zhang, VLDB 1998) counts points on
a grid, takes the level-1 approximation of a 2-D wavelet transform of the
count grid, keeps the *significant* coefficients (the positive coefficients
above the p-th percentile of the positive ones) and returns the
8-connected components of the significant coefficients, mapped back to grid
cells. Chen, Yu & Chirkova (EDBT 2016) make it differentially private in
four ways, all implemented here on numpy count grids, one module each with
its privacy argument in its docstring:

``"privqt"`` (:mod:`.privqt`)
    discrete Laplace noise on every count (all of ε), then WaveCluster on
    the noisy counts.
``"privthr"`` (:mod:`.privthr`)
    noise on the counts with ``α·ε`` (α = 0.9), plus a noisy count ``|Z|′``
    of the non-positive coefficients with ``(1-α)·ε``. The number of
    significant coefficients is then estimated from ``|Z|′`` alone
    (``|L| = N_W - |Z|`` with ``N_W`` public; ``k_rule="direct"``), or by the
    paper's rule of discarding the smallest noisy positive coefficients
    (``k_rule="prune"`` discards ``π·|Z|′``, π being the probability that
    the integer noise lifts a zero coefficient above 0; ``"prune-half"``
    discards ``|Z|′/2`` as in the paper, which is right for continuous noise
    only).
``"privthr-em"`` (:mod:`.privthr_em`)
    noise on the counts with ``α·ε`` (α = 0.7); the threshold is drawn by
    the exponential mechanism with ``(1-α)·ε`` from a *public* list of
    candidate thresholds, scored by how far the number of true coefficients
    above the candidate is from the target ``k``.
``"baseline"`` (:mod:`.baseline`)
    DP synthetic points from adaptive grids (Qardaji, Yang & Li, ICDE 2013),
    then non-private WaveCluster on the synthetic counts
    (:func:`wavecluster_baseline`).

``"exact"`` (:mod:`.exact`) is the non-private reference.

The steps they share are in their own modules: :mod:`.transform` (the
exact integer wavelet approximation and its computed sensitivities),
:mod:`.thresholds` (the percentile rule: what ``|L|``, ``|Z|`` and ``k``
mean), :mod:`.components` (8-connected components, coefficients → cells)
and :mod:`.cells` (argument checks, the report, the result). This package
only dispatches on ``method``; the privacy argument for every mechanism is
in ``docs/privacy.md`` (section 5).
"""

from __future__ import annotations

from ...errors import ParameterError
from .baseline import SyntheticGrid, adaptive_grid_counts, wavecluster_baseline
from .cells import WaveClusterCells, _start, _start_private
from .components import coefficients_to_cells, label_coefficients
from .exact import _exact_cells
from .privqt import _privqt_cells
from .privthr import _privthr_cells
from .privthr_em import _privthr_em_cells, em_candidates
from .thresholds import significant_coefficients
from .transform import SAFE_MODES, WAVELETS, approximation, approximation_sensitivity

__all__ = [
    "WAVELETS",
    "SAFE_MODES",
    "METHODS",
    "WaveClusterCells",
    "SyntheticGrid",
    "approximation",
    "approximation_sensitivity",
    "significant_coefficients",
    "label_coefficients",
    "coefficients_to_cells",
    "em_candidates",
    "wavecluster_cells",
    "adaptive_grid_counts",
    "wavecluster_baseline",
]

METHODS = ("exact", "privqt", "privthr", "privthr-em", "baseline")


def wavecluster_cells(
    counts,
    *,
    method: str,
    epsilon: float | None = None,
    percentile: float = 60.0,
    wavelet: str = "haar",
    mode: str = "zero",
    count_split: float | None = None,
    count_cap: float | None = None,
    n_public: int | None = None,
    sensitivity: int = 1,
    universe=None,
    k_rule: str = "direct",
    rng=None,
) -> WaveClusterCells:
    """WaveCluster on a count grid, exact or with differential privacy.

    Parameters
    ----------
    counts : array_like of int, shape (ny, nx)
        True points per cell of a public grid (rows = y, columns = x).
    method : {"exact", "privqt", "privthr", "privthr-em"}
        ``"exact"`` is not private. For ``"baseline"`` use
        :func:`wavecluster_baseline` (it needs the points).
    epsilon : float
        Total privacy budget ε (not used by ``"exact"``).
    percentile : float
        ``p`` in [0, 100): share of the positive coefficients that are not
        significant (default 60).
    wavelet : {"haar", "bior2.2", "bior1.3", "db2"}
    mode : str
        Signal extension (default ``"zero"``: the grid is padded with empty
        cells); wrap-around modes are refused.
    count_split : float, optional
        Share α of ε for the noisy counts (``"privthr"`` 0.9,
        ``"privthr-em"`` 0.7); the rest goes to ``|Z|′`` or the threshold.
    count_cap : float, optional
        Public cap (points per cell) bounding the EM's candidate thresholds;
        default ``n_public`` or 10**7. It limits the candidates only.
    n_public : int, optional
        Public number of points, used only as the default ``count_cap``.
    sensitivity : int
        Points one record can contribute (default 1); every count
        sensitivity is multiplied by it.
    universe : array_like of bool, optional
        Cells that may hold points (public). Cells outside are ignored, get
        no noise and are reported as 0.
    k_rule : {"direct", "prune", "prune-half"}
        ``"privthr"`` only: how the number of significant coefficients is
        estimated from the noisy ``|Z|′``. ``"direct"`` (default):
        ``|L|′ = N_W - |Z|′`` and the ``k̂`` largest noisy coefficients are
        significant. ``"prune"``: the paper's rule, discarding the
        ``π·|Z|′`` smallest noisy positives, with π the probability that the
        integer noise lifts a zero coefficient above 0. ``"prune-half"``:
        the paper's π = 1/2 (biased low with integer noise).
    rng : dpgeo.noise.NoiseSource or numpy.random.Generator, optional
        Noise source; default a fresh private one (ChaCha20 keyed from the
        OS). A seeded NoiseSource or a numpy Generator marks the report as
        not private.

    Returns
    -------
    WaveClusterCells

    Examples
    --------
    >>> import numpy as np
    >>> c = np.zeros((8, 8), dtype=int); c[0:2, 0:2] = 9; c[5:8, 5:8] = 7
    >>> wavecluster_cells(c, method="exact", percentile=0).n_clusters
    2
    >>> from dpgeo.noise import NoiseSource
    >>> r = wavecluster_cells(c, method="privthr", epsilon=1.0, rng=NoiseSource(seed=1))
    >>> sorted(r.report["epsilon_split"])
    ['counts', 'nonpositive_count']
    """
    if method not in METHODS:
        raise ParameterError(f"method must be one of {', '.join(METHODS)}; got {method!r}")
    if method == "baseline":
        raise ParameterError("method 'baseline' needs the points: call wavecluster_baseline(x, y, bounds=..., "
                             "shape=..., epsilon=...)")
    c, uni, filt, p_micro, s, report = _start(
        counts, method=method, wavelet=wavelet, mode=mode, percentile=percentile, sensitivity=sensitivity,
        universe=universe, k_rule=k_rule, count_cap=count_cap, n_public=n_public)
    if method == "exact":
        return _exact_cells(c, filt=filt, mode=mode, p_micro=p_micro, report=report)
    eps, gen = _start_private(epsilon, rng, report)
    private = {"filt": filt, "mode": mode, "p_micro": p_micro, "s": s, "eps": eps, "gen": gen, "report": report}
    if method == "privqt":
        return _privqt_cells(c, uni, **private)
    if method == "privthr":
        return _privthr_cells(c, uni, percentile=percentile, count_split=count_split, k_rule=k_rule, **private)
    return _privthr_em_cells(c, uni, percentile=percentile, count_split=count_split, count_cap=count_cap,
                             n_public=n_public, **private)
