"""DP WaveCluster (PrivTHR, PrivTHR_EM, PrivQT, the baseline): validate -> count -> mechanism -> layer."""

from __future__ import annotations

import numpy as np

from ..counting import CellCounts, count_points
from ..errors import ParameterError
from ..grid import Grid
from ..noise import RATE_MAX, NoiseSource
from ..polygons import cluster_polygons
from ..randomness import check_seed
from ..release import Release, run_protected_files, start_charge
from ..resources import check_plan, grid_shape, plan_run
from ._common import (
    _contribution,
    _fixed_grid,
    _person_label,
    _progress,
    _reading,
    _reading_message,
    _study_area,
    _warn_if_not_private,
    base_metadata,
    check_epsilon,
    check_int,
    check_positive,
)

__all__ = ["wavecluster"]


# -- DP WaveCluster ----------------------------------------------------------------

WAVECLUSTER_METHODS = ("privthr", "privthr-em", "privqt", "baseline", "exact")
#: Largest grid (cells) WaveCluster works on; the wavelet transform is dense.
MAX_WAVECLUSTER_CELLS = 1 << 26


def check_wavecluster_params(*, method, percentile, wavelet, mode, count_split, count_cap, n_public, k_rule):
    """Every WaveCluster parameter that the mechanism checks, checked before any data is read."""
    from ..mechanisms.wavecluster._checks import (
        _K_RULES,
        _check_epsilon,
        _check_n_public,
        _check_percentile,
        _check_split,
    )
    from ..mechanisms.wavecluster.transform import _check_mode, _filter

    _filter(wavelet)
    _check_mode(mode)
    _check_percentile(percentile)
    if k_rule not in _K_RULES:
        raise ParameterError(f"k_rule must be one of {', '.join(_K_RULES)}; got {k_rule!r}")
    if count_cap is not None:
        _check_epsilon(count_cap, "count_cap")
    if n_public is not None:
        _check_n_public(n_public)
    if method in ("privthr", "privthr-em"):
        _check_split(count_split, method)


def _wavecluster_grid(area, cell_m, grid_size, epsilon=None, sensitivity=1, max_memory_bytes=None):
    cell_m = wavecluster_cell_width(area, cell_m, grid_size, epsilon, sensitivity, max_memory_bytes)
    grid = Grid(area, cell_m)
    if grid.nx * grid.ny > MAX_WAVECLUSTER_CELLS:
        raise ParameterError(
            f"a {grid.nx} x {grid.ny} grid is too large for WaveCluster (at most {MAX_WAVECLUSTER_CELLS:,} "
            "cells); use a larger cell or a smaller study area"
        )
    return grid


def wavecluster_cell_width(area, cell_m, grid_size, epsilon=None, sensitivity=1, max_memory_bytes=None) -> float:
    """The checked cell width of a WaveCluster run (metres), its grid size and memory planned; builds no grid."""
    if (cell_m is None) == (grid_size is None):
        raise ParameterError("give exactly one of cell_m (cell width in metres, --cell) or grid_size "
                             "(cells per side of the study area, --grid)")
    if grid_size is not None:
        grid_size = check_int(grid_size, "grid_size (cells per side)", minimum=2)
        b = area.polygon.bounds
        cell_m = max(b[2] - b[0], b[3] - b[1]) / grid_size
    cell_m = check_positive(cell_m, "cell_m (cell width)", " (metres)")
    nx, ny = grid_shape(area.polygon.bounds, cell_m)
    if nx * ny > MAX_WAVECLUSTER_CELLS:
        raise ParameterError(
            f"a {nx:,} x {ny:,} grid is too large for WaveCluster (at most {MAX_WAVECLUSTER_CELLS:,} "
            "cells); use a larger cell or a smaller study area"
        )
    check_plan(plan_run(area, cell_m, mechanism="wavecluster", epsilon=epsilon, sensitivity=sensitivity),
               max_memory_bytes, cell_option="cell (--cell) or fewer cells (--grid)")
    return cell_m


def wavecluster_count_epsilon(method, epsilon, count_split):
    """The ε of WaveCluster's noisy counts (None for the exact method), for the run's plan."""
    if method == "exact" or epsilon is None:
        return None
    return epsilon * (count_split if count_split is not None else {"privthr": 0.9, "privthr-em": 0.7}.get(method, 1.0))


def wavecluster(
    points,
    *,
    method: str = "privthr",
    epsilon: float | None = None,
    cell_m: float | None = None,
    grid_size: int | None = None,
    percentile: float = 60.0,
    domain=None,
    domain_crs=None,
    crs=None,
    wavelet: str = "haar",
    mode: str = "zero",
    count_split: float | None = None,
    count_cap: float | None = None,
    n_public: int | None = None,
    k_rule: str = "direct",
    sensitivity: int = 1,
    person=None,
    max_points_per_person: int | None = None,
    seed: int | None = None,
    domain_from_data: bool = False,
    input_crs=None,
    unattended: bool = False,
    dataset: str | None = None,
    ledger=None,
    analyst: str | None = None,
    progress=None,
    scheduler=None,
    max_memory_bytes=None,
) -> Release:
    """DP WaveCluster (Chen, Yu & Chirkova) as a polygon layer.

    Counts on a grid over the public study area → (noisy) counts → level-1
    wavelet approximation → significant coefficients (private threshold)
    → 8-connected components → cells → polygons.

    Parameters
    ----------
    points : GeoDataFrame, GeoSeries, str or tuple
        The private points (see :func:`dbscan_spans`).
    method : {"privthr", "privthr-em", "privqt", "baseline", "exact"}
        ``privthr`` (default): noisy counts plus a noisy count of the
        non-positive coefficients, ε split 0.9/0.1. ``privthr-em``: the
        threshold by the exponential mechanism, split 0.7/0.3. ``privqt``:
        noisy counts only. ``baseline``: DP synthetic points from adaptive
        grids. ``exact``: non-private reference (marked not private).
    epsilon : float
        Privacy budget ε (> 0); not used by ``exact``.
    cell_m, grid_size : float, int
        Exactly one: the cell width in metres, or the number of cells along
        the longer side of the study area.
    percentile : float
        ``p`` in [0, 100): share of the positive coefficients that are not
        significant (default 60).
    domain, domain_crs, crs
        The public study area and working CRS, as for :func:`dbscan_spans`.
    wavelet : {"haar", "bior2.2", "bior1.3", "db2"}
    mode : str
        Signal extension (default ``"zero"``); modes that wrap around are refused.
    count_split : float, optional
        Share of ε for the counts (PrivTHR 0.9, PrivTHR_EM 0.7 by default).
    count_cap, n_public : optional
        Public cap on points per cell / public number of points (EM
        candidates; baseline's N — otherwise N is released with 5% of ε).
    k_rule : {"direct", "prune", "prune-half"}
        PrivTHR's estimate of the number of significant coefficients.
    sensitivity : int
        Maximum points per record (default 1).
    person, max_points_per_person : optional
        Per-person guarantee with a cap on points per person, as for
        :func:`dbscan_spans`.
    seed : int, optional
        Fixed seed for tests; the output is marked not private.
    domain_from_data : bool
        Exploration only; the output is marked not private.
    unattended : bool
        Conditions of the private data are warnings for the owner, not
        errors; a valid, possibly empty, layer is released (see
        :func:`dbscan_spans`).
    dataset, ledger, analyst
        The privacy-budget ledger's record of the release (see :func:`dbscan_spans`).
    progress : callable, optional
        ``progress(fraction, message)`` between stages and during long reads.
    scheduler : optional
        Count with Dask (see :func:`dbscan_spans`). ``baseline`` counts the
        same points on three more binnings; each is another counting pass
        (the input is read again, never held in memory; with a per-person
        cap the reservoir of kept points is recounted).
    max_memory_bytes : int or str, optional
        Refuse, before any data is read, a run whose grid and noise laws are
        estimated (:mod:`dpgeo.resources`) to need more memory than this
        (bytes, or e.g. ``"8G"``); default ``$DPGEO_MAX_MEMORY``, else half
        the machine's memory.

    Returns
    -------
    Release

    Examples
    --------
    >>> import numpy as np, dpgeo
    >>> rng = np.random.default_rng(0)
    >>> x = np.r_[rng.normal(300, 40, 4000), rng.normal(1400, 60, 4000)]
    >>> y = np.r_[rng.normal(300, 40, 4000), rng.normal(1200, 60, 4000)]
    >>> res = dpgeo.wavecluster((x, y, "EPSG:32615"), method="privthr", epsilon=1.0, cell_m=50,
    ...                         domain=(0, 0, 2000, 2000), domain_crs="EPSG:32615", crs="EPSG:32615", seed=1)
    >>> len(res.layer), res.metadata["method"]
    (2, 'privthr')
    """
    # -- validate (public inputs only) --
    if method not in WAVECLUSTER_METHODS:
        raise ParameterError(f"method must be one of {', '.join(WAVECLUSTER_METHODS)}; got {method!r}")
    if method != "exact":
        if epsilon is None:
            raise ParameterError(f"method {method!r} needs epsilon (the privacy budget)")
        epsilon = check_epsilon(epsilon)
    sensitivity, cap = _contribution(person, max_points_per_person, sensitivity)
    check_wavecluster_params(method=method, percentile=percentile, wavelet=wavelet, mode=mode,
                             count_split=count_split, count_cap=count_cap, n_public=n_public, k_rule=k_rule)
    check_seed(seed)
    protected = run_protected_files(points, domain, ledger)

    count_eps = wavecluster_count_epsilon(method, epsilon, count_split)

    def grid_for(area):
        return _wavecluster_grid(area, cell_m, grid_size, count_eps, sensitivity, max_memory_bytes)

    if not domain_from_data:
        domain = _study_area(domain, domain_crs, crs)
        grid, grid_for = _fixed_grid(domain, grid_for)
        rehearse_wavecluster(grid, method=method, epsilon=epsilon, percentile=percentile, wavelet=wavelet,
                             mode=mode, count_split=count_split, count_cap=count_cap, n_public=n_public,
                             k_rule=k_rule, sensitivity=sensitivity)
    noise_src = NoiseSource(seed)
    # -- charge: before any private data is read; refused beyond the dataset's total --
    charge = start_charge(ledger=ledger, dataset=dataset, points=points, epsilon=epsilon,
                          mechanism=f"dp-wavecluster-{method}", analyst=analyst,
                          private=noise_src.private and not domain_from_data and method != "exact",
                          unattended=unattended)
    with charge:
        # -- count (private; an error here cancels the charge: no noise yet) --
        with charge.before_noise():
            _progress(progress, 0.0, _reading_message(points, scheduler))
            counts = count_points(points, grid_for=grid_for, domain=domain, domain_crs=domain_crs, crs=crs,
                                  domain_from_data=domain_from_data, input_crs=input_crs, person=person, cap=cap,
                                  rng=noise_src, unattended=unattended, recountable=(method == "baseline"),
                                  scheduler=scheduler, progress=_reading(progress, 0.5))
            grid = counts.grid
        # -- mechanism (the only step that draws noise) --
        _progress(progress, 0.5, f"{method} on a {grid.nx} x {grid.ny} grid: wavelet approximation and threshold")
        res = _wavecluster_mechanism(counts, method=method, epsilon=epsilon, percentile=percentile,
                                     wavelet=wavelet, mode=mode, count_split=count_split, count_cap=count_cap,
                                     n_public=n_public, k_rule=k_rule, sensitivity=sensitivity, source=noise_src)
        diagnostics = counts.diagnostics
        del counts
        # -- layer (post-processing; inside the charge: a release whose layer fails is 'failed', not 'completed') --
        _progress(progress, 0.8, f"polygons for {res.n_clusters} clusters")
        flat = res.labels.ravel()
        cell_id = np.flatnonzero(flat)
        label = flat[cell_id].astype(np.int64)
        count = res.noisy_counts.ravel()[cell_id].astype(np.int64)
        layer = cluster_polygons(grid, cell_id, label, count, q=None if method == "exact" else res.q)
        md = base_metadata(method=method, mechanism=f"DP WaveCluster ({_WC_NAMES[method]})", epsilon=epsilon,
                           area=grid.area, source=noise_src, sensitivity=sensitivity,
                           person=_person_label(person), cap=cap)
        rep = dict(res.report)
        reasons = md["not_private_reasons"] + [r for r in rep.pop("not_private_reasons", [])
                                               if r not in md["not_private_reasons"]]
        rep.pop("differentially_private", None)
        rep.pop("epsilon", None)
        rep.pop("mechanism", None)
        md.update(rep)
        md["not_private_reasons"] = reasons
        md["differentially_private"] = not reasons
        md["percentile"] = float(percentile)
        md["cell_width_m"] = grid.cell_m
        md["n_cells"] = grid.n_cells
        md["grid"] = grid.to_metadata()
        md["n_clusters"] = res.n_clusters
        md.update(charge.metadata())
        md["dp_count_interval"] = (
            "none: exact counts (not private)" if method == "exact" else
            "none: baseline counts are synthetic" if res.q is None else
            "95%: sum of released cell counts ± noise quantile, clipped at 0")
        _warn_if_not_private(md)
        _progress(progress, 1.0, "done")
        from ..mechanisms.dbscan import SpanCells

        cells = SpanCells(grid, cell_id, label, count, res.n_clusters)
        charge.complete()
    return Release(layer=layer, metadata=md, diagnostics=diagnostics, cells=cells, _protected=protected,
                   _charge=charge)


def _near_the_samplers_limit(epsilon, sensitivity, count_split) -> bool:
    """Whether some part of ε, over its sensitivity, may fall outside the exact sampler's range (public inputs).

    The parts and their sensitivities (wavelet ones included) are worked out
    inside each method; far from the range's ends no part can leave it.
    """
    share = 0.1 if count_split is None else min(count_split, 1.0 - count_split, 0.1)
    rate = epsilon * share / sensitivity
    return rate < 1e-6 or epsilon / sensitivity > float(RATE_MAX) / 2  # no part's rate exceeds ε/Δ


def rehearse_wavecluster(grid, *, method, epsilon, count_split, sensitivity, **kw):
    """Run the method once on an empty grid, before any data is read and before the charge, near the
    exact sampler's limits (tiny ε or an extreme split; elsewhere it returns at once).

    Everything a method checks about its noise (each part of ε against the
    exact sampler's range, with the sensitivities it derives from the grid's
    shape) depends on public inputs only; an empty grid brings those checks
    forward, so a run that cannot be made is refused before it reads the
    data or spends budget. The throwaway source is seeded: nothing here is
    published.
    """
    if method == "exact" or not _near_the_samplers_limit(epsilon, sensitivity, count_split):
        return
    if not isinstance(grid, Grid):  # a study area: the run's grid on it
        grid = _wavecluster_grid(grid, kw.pop("cell_m", None), kw.pop("grid_size", None))
    empty = CellCounts(grid=grid, cell_id=np.zeros(0, np.int64), count=np.zeros(0, np.int64),
                       recount=lambda binning, n_bins: np.zeros(n_bins, np.int64))
    _wavecluster_mechanism(empty, source=NoiseSource(0), method=method, epsilon=epsilon, count_split=count_split,
                           sensitivity=sensitivity, **kw)


def _wavecluster_mechanism(counts: CellCounts, *, method, epsilon, percentile, wavelet, mode, count_split,
                           count_cap, n_public, k_rule, sensitivity, source):
    """Run one WaveCluster method on the counts (the baseline recounts the same points on its own grids)."""
    from ..mechanisms.wavecluster import wavecluster_baseline, wavecluster_cells

    grid = counts.grid
    if method == "baseline":
        return wavecluster_baseline(None, None, bounds=grid.bounds, shape=(grid.ny, grid.nx), epsilon=epsilon,
                                    percentile=percentile, wavelet=wavelet, mode=mode, n_public=n_public,
                                    sensitivity=sensitivity, rng=source, count_on=counts.recount)
    dense = counts.dense()
    res = wavecluster_cells(dense, method=method, epsilon=epsilon, percentile=percentile, wavelet=wavelet,
                            mode=mode, count_split=count_split, count_cap=count_cap, n_public=n_public,
                            sensitivity=sensitivity, universe=grid.universe_mask(), k_rule=k_rule, rng=source)
    if method == "exact":
        res.noisy_counts = dense  # the true counts: the output is not private anyway
    return res


_WC_NAMES = {"privthr": "PrivTHR", "privthr-em": "PrivTHR_EM", "privqt": "PrivQT",
             "baseline": "Baseline: DP synthetic points from adaptive grids", "exact": "exact, not private"}
