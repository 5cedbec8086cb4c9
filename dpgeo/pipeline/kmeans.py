"""DP k-means as a release: the Voronoi cells of private centroids, with noisy counts.

The same four steps as every entry point of :mod:`dpgeo.pipeline`:

1. **validate** — ε, ``k``, the iterations and the budget split, the person
   cap and the public study area; the whole plan of the run (lattice, noise
   scales, ``min_count``; :func:`~dpgeo.mechanisms.kmeans.kmeans_plan`) is
   computed from them before any private data is read, and the release is
   charged to the dataset's privacy budget;
2. **count** — the private points are read, projected and kept when they lie
   inside the study area; with ``person=`` each person keeps at most
   ``max_points_per_person`` = ``K`` points, chosen at random, and every
   sensitivity of the mechanism is multiplied by ``K``;
3. **mechanism** — DPLloyd with exact discrete Laplace noise
   (:func:`~dpgeo.mechanisms.kmeans.kmeans_layer`), the only step that draws
   noise;
4. **layer** — the Voronoi cells of the released centroids clipped to the
   study area, each with ``dp_count`` and its 95% interval and the centroid as
   ``centroid_x``, ``centroid_y`` (working CRS, metres).
"""

from __future__ import annotations

from ..counting import count_points
from ..grid import Grid
from ..mechanisms.kmeans import (
    DEFAULT_ITERATIONS,
    DEFAULT_LAYER_SHARE,
    kmeans_layer,
    kmeans_plan,
)
from ..noise import NoiseSource
from ..randomness import check_seed
from ..release import Release, run_protected_files, start_charge
from ..resources import check_plan, plan_run
from ._common import (
    _contribution,
    _fixed_grid,
    _input_label,
    _person_label,
    _progress,
    _study_area,
    _warn_if_not_private,
    base_metadata,
    check_epsilon,
)

__all__ = ["kmeans", "KMEANS_MECHANISM"]

#: The mechanism's name in the ledger.
KMEANS_MECHANISM = "dp-kmeans"
#: Cells along the longer side of the (public) grid used only to test which points lie in the study area.
_MEMBERSHIP_CELLS = 256
#: Keys of the mechanism's own metadata that the pipeline states itself (for the person cap, the seed, ...).
_OWN_KEYS = ("mechanism", "method", "differentially_private", "not_private_reasons", "neighbouring_relation",
             "delta", "epsilon")


def check_kmeans_plan(area, *, epsilon, layer_share=None, sensitivity=1, max_memory_bytes=None):
    """Refuse a k-means run too large for memory (its count intervals grow as 1/ε), before any data is read."""
    b = area.polygon.bounds
    check_plan(plan_run(area, max(b[2] - b[0], b[3] - b[1]) / _MEMBERSHIP_CELLS, mechanism="kmeans",
                        epsilon=epsilon * (layer_share or DEFAULT_LAYER_SHARE), sensitivity=sensitivity),
               max_memory_bytes, cell_option="study area")


def kmeans(
    points,
    *,
    epsilon: float,
    k: int,
    domain=None,
    domain_crs=None,
    crs=None,
    iterations: int = DEFAULT_ITERATIONS,
    layer_share: float = DEFAULT_LAYER_SHARE,
    count_share: float | None = None,
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
    max_memory_bytes=None,
) -> Release:
    """ε-differentially private k-means as a map layer: Voronoi cells of the private centroids.

    DPLloyd (Su et al.) over the public study area, with exact discrete
    Laplace noise; see :mod:`dpgeo.mechanisms.kmeans` for the mechanism and
    its privacy argument. ε is split into ``layer_share·ε`` for the published
    counts of the cells and ``(1 − layer_share)·ε / iterations`` per Lloyd
    iteration (counts and coordinate sums); the split is in the metadata
    (``epsilon_split``).

    Parameters
    ----------
    points : GeoDataFrame, GeoSeries, str or tuple
        The private points (see :func:`dpgeo.dbscan_spans`).
    epsilon : float
        Privacy budget ε (> 0). The whole run is ε-DP (δ = 0).
    k : int
        Number of clusters (1 to 1000). Cells whose centroids coincide are
        merged, and cells outside the study area dropped, so the layer may have
        fewer than ``k`` rows.
    domain, domain_crs, crs
        The **public** study area and working CRS, as for
        :func:`dpgeo.dbscan_spans`. The lattice of the coordinate sums and
        the starting centroids come from it.
    iterations : int
        Lloyd iterations ``T`` (default 5).
    layer_share : float
        Share of ε for the published counts of the cells, in (0, 1) (default 0.1).
    count_share : float, optional
        Share of each iteration's ε for the per-cluster counts (default: the
        rule of :func:`~dpgeo.mechanisms.kmeans.kmeans_plan`, ≈ 0.39 for a
        square study area).
    sensitivity : int
        Maximum points per record (default 1).
    person, max_points_per_person : optional
        Make the guarantee per person with at most ``K`` points each, chosen
        at random; every noise scale grows with ``K`` (see :func:`dpgeo.dbscan_spans`).
    seed : int, optional
        Fixed seed for tests. The output is then marked **not private** and
        not charged.
    domain_from_data : bool
        Use the data's own extent as the study area. Exploration only; the
        output is marked **not private** and not charged.
    input_crs : optional
        CRS for inputs that declare none.
    unattended : bool
        Conditions of the private data (no point inside the study area, no
        usable record) are warnings for the owner, not errors: a valid layer
        is released either way (see :func:`dpgeo.dbscan_spans`).
    dataset, ledger, analyst
        The privacy-budget ledger's record of the release; the charge is made
        before any private data is read (see :func:`dpgeo.dbscan_spans`).
    progress : callable, optional
        ``progress(fraction, message)`` between stages; raise from it to cancel.
    max_memory_bytes : int or str, optional
        Refuse, before any data is read, a run estimated to need more memory
        (:mod:`dpgeo.resources`); default ``$DPGEO_MAX_MEMORY``, else half the machine's memory.

    Returns
    -------
    Release
        ``layer``: ``cluster_id``, ``dp_count``, ``dp_count_low``,
        ``dp_count_high``, ``area_m2``, ``centroid_x``, ``centroid_y``
        (working CRS, metres) and the cell's (multi)polygon.

    Examples
    --------
    >>> import numpy as np, dpgeo
    >>> rng = np.random.default_rng(0)
    >>> x = np.r_[rng.normal(500, 60, 4000), rng.normal(1500, 60, 4000)]
    >>> y = np.r_[rng.normal(500, 60, 4000), rng.normal(1400, 60, 4000)]
    >>> res = dpgeo.kmeans((x, y, "EPSG:32615"), epsilon=1.0, k=2, domain=(0, 0, 2000, 2000),
    ...                    domain_crs="EPSG:32615", crs="EPSG:32615", seed=1)
    >>> len(res.layer), res.metadata["method"], res.metadata["differentially_private"]
    (2, 'kmeans', False)
    >>> sorted(np.round(res.layer["centroid_x"].to_numpy(), -2).tolist())
    [500.0, 1500.0]
    """
    # -- validate (public inputs only) --
    epsilon = check_epsilon(epsilon)
    sensitivity, cap = _contribution(person, max_points_per_person, sensitivity)
    plan_kw = dict(k=k, epsilon=epsilon, iterations=iterations, layer_share=layer_share, count_share=count_share,
                   sensitivity=sensitivity)
    kmeans_plan((0.0, 0.0, 1.0, 1.0), **plan_kw)  # the parameters, whatever the study area
    check_seed(seed)

    def grid_for(a):  # public: only which points lie inside the study area
        b = a.polygon.bounds
        return Grid(a, max(b[2] - b[0], b[3] - b[1]) / _MEMBERSHIP_CELLS)

    area = None
    if not domain_from_data:  # the plan of the run, before any data is read
        area = _study_area(domain, domain_crs, crs)
        kmeans_plan(area.polygon.bounds, **plan_kw)
        check_kmeans_plan(area, epsilon=epsilon, layer_share=layer_share, sensitivity=sensitivity,
                          max_memory_bytes=max_memory_bytes)
        _, grid_for = _fixed_grid(area, grid_for)
    noise_src = NoiseSource(seed)
    # -- charge: before any private data is read; refused beyond the dataset's total --
    charge = start_charge(ledger=ledger, dataset=dataset, points=points, epsilon=epsilon,
                          mechanism=KMEANS_MECHANISM, analyst=analyst,
                          private=noise_src.private and not domain_from_data, unattended=unattended)
    with charge:
        # -- count (private; an error here cancels the charge: no noise yet) --
        with charge.before_noise():
            _progress(progress, 0.0, f"reading {_input_label(points)}")
            counts = count_points(points, grid_for=grid_for, domain=area, domain_crs=domain_crs, crs=crs,
                                  domain_from_data=domain_from_data, input_crs=input_crs, person=person, cap=cap,
                                  rng=noise_src, unattended=unattended, keep_points=True)
            area = counts.grid.area
            x, y = counts.points.x[counts.kept], counts.points.y[counts.kept]
            diagnostics = counts.diagnostics
            del counts
        # -- mechanism (the only step that draws noise) --
        _progress(progress, 0.3, f"DP k-means: k = {k}, noisy Lloyd iterations")
        res = kmeans_layer(x, y, area=area, rng=noise_src, **plan_kw)
        del x, y
        # -- layer (post-processing) --
        _progress(progress, 0.9, f"{res.n_clusters} Voronoi cells")
        md = base_metadata(method="kmeans", mechanism=res.metadata["mechanism"], epsilon=epsilon, area=area,
                           source=noise_src, sensitivity=sensitivity, person=_person_label(person), cap=cap)
        md.update({key: v for key, v in res.metadata.items() if key not in _OWN_KEYS})
        md.update(charge.metadata())
        charge.complete()
    _warn_if_not_private(md)
    _progress(progress, 1.0, "done")
    return Release(layer=res.layer, metadata=md, diagnostics=diagnostics, cells=res,
                   _protected=run_protected_files(points, domain, ledger), _charge=charge)
