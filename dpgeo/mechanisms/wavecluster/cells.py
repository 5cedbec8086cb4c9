"""What a WaveCluster run on a count grid returns, and the steps every run shares.

:func:`_start` checks the arguments common to all methods (before any data
is read) and begins the report with public parameters; :func:`_start_private`
fixes ε and the noise source of a private method; :func:`_finish` turns the
significant coefficients into labelled cells (post-processing) and the
result. The mechanism modules in between are the only ones that draw noise
or read statistics of the counts.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...errors import ParameterError
from ...noise import LAPLACE_SAMPLER, sampler_description
from ._checks import (
    _K_RULES,
    _as_counts,
    _as_noise_source,
    _check_epsilon,
    _check_n_public,
    _check_percentile,
    _check_sensitivity,
)
from .components import coefficients_to_cells, label_coefficients
from .transform import _check_mode, _filter

__all__ = ["WaveClusterCells"]


@dataclass
class WaveClusterCells:
    """Cell-level result of a WaveCluster run.

    Attributes
    ----------
    labels : numpy.ndarray of int32, shape (ny, nx)
        0 = no cluster, 1..n_clusters = cluster of the cell.
    noisy_counts : numpy.ndarray of int64 or None
        The released noisy counts (``None`` for ``"exact"``); for
        ``"baseline"`` the synthetic counts.
    q : float or None
        Decay ``exp(-ε_counts/s)`` of the discrete Laplace noise on each
        count (for confidence intervals of sums of cells); ``None`` when
        counts were not noised cell by cell.
    report : dict
        JSON-serialisable description of the run: only DP outputs and
        public parameters for the private methods.
    significant : numpy.ndarray of bool
        Significant coefficients (coefficient grid).
    coefficient_labels : numpy.ndarray of int32
        Components on the coefficient grid (before mapping to cells).
    """

    labels: np.ndarray
    noisy_counts: np.ndarray | None
    q: float | None
    report: dict
    significant: np.ndarray = field(repr=False)
    coefficient_labels: np.ndarray = field(repr=False)

    @property
    def n_clusters(self) -> int:
        return int(self.report["n_clusters"])


def _start(counts, *, method, wavelet, mode, percentile, sensitivity, universe, k_rule, count_cap, n_public):
    """Checked arguments and the report's public part: ``(counts, universe, filter, p_micro, s, report)``.

    Every argument of :func:`~dpgeo.mechanisms.wavecluster.wavecluster_cells`
    is checked here, whichever method uses it; cells outside ``universe``
    are set to 0.
    """
    filt = _filter(wavelet)
    _check_mode(mode)
    p_micro = _check_percentile(percentile)
    s = _check_sensitivity(sensitivity)
    c = _as_counts(counts)
    uni = None
    if universe is not None:
        uni = np.asarray(universe, dtype=bool)
        if uni.shape != c.shape:
            raise ParameterError(f"universe must have the shape of counts {c.shape}, got {uni.shape}")
        c = np.where(uni, c, 0)
    if k_rule not in _K_RULES:
        raise ParameterError(f"k_rule must be one of {', '.join(_K_RULES)}; got {k_rule!r}")
    if count_cap is not None:
        _check_epsilon(count_cap, "count_cap")
    if n_public is not None:
        _check_n_public(n_public)

    report: dict = {
        "mechanism": "wavecluster",
        "method": method,
        "wavelet": filt.name,
        "mode": mode,
        "percentile": float(percentile),
        "level": 1,
        "connectivity": 8,
        "sensitivity": s,
        "grid_shape": [int(c.shape[0]), int(c.shape[1])],
        "threshold_units": "normalised coefficient (points per 2x2 cells at uniform density)",
    }
    return c, uni, filt, p_micro, s, report


def _start_private(epsilon, rng, report):
    """ε and the noise generator of a private method; the report says whether the noise was seeded."""
    eps = _check_epsilon(epsilon)
    src = _as_noise_source(rng)
    report["epsilon"] = eps
    report["delta"] = 0.0
    report["sampler"] = sampler_description(src, LAPLACE_SAMPLER)
    report["differentially_private"] = src.private
    report["not_private_reasons"] = [] if src.private else [src.not_private_reason]
    return eps, src


def _finish(sig, shape, filt, report, noisy, q) -> WaveClusterCells:
    clab, _ = label_coefficients(sig)
    labels = coefficients_to_cells(clab, shape, wavelet=filt.name)
    report["n_significant"] = int(sig.sum())
    report["k_prime"] = report["n_significant"]  # the paper's k′
    report["n_clusters"] = int(labels.max(initial=0))
    report["n_coefficients"] = int(sig.size)
    report["cell_offset"] = filt.offset
    return WaveClusterCells(labels=labels, noisy_counts=noisy, q=q, report=report,
                            significant=sig, coefficient_labels=clab)
