"""DP k-means (DPLloyd with exact integer noise) and its Voronoi map layer.

The mechanism is Lloyd's algorithm in which every iteration sees the data
only through noisy per-cluster counts and coordinate sums — the "DPLloyd"
analysed by Su, Cao, Li, Bertino & Jin (CODASPY 2016; VLDB Journal 2017),
which is also what diffprivlib's ``KMeans`` implements — rebuilt here so that
its privacy argument holds for *this* code, with the noise exact:

1. **Public frame.** The bounding box of the public study area (metres, working
   CRS) fixes a lattice of step ``g`` (``lattice_m``; default: ``2**15``
   steps from the box's centre to its longer side). A point's *lattice
   coordinates* are ``a = round((x - cx)/g)``, ``b = round((y - cy)/g)``,
   clipped to ``|a| <= M_x``, ``|b| <= M_y`` (``M = ceil(half side / g)``),
   measured from the box **centre**, so that one point moves a coordinate
   sum by at most the half side, not the whole side. Points outside the
   study area are dropped (a rule applied to each point alone).
2. **Data-independent start.** ``k`` initial centroids are chosen from random
   candidate positions inside the study area (drawn from the mechanism's
   CSPRNG-seeded generator) by greedy max-min spreading, a sphere packing in
   the spirit of Su et al.'s initialisation: each new centroid maximises
   ``min(distance to the chosen ones, 2 × distance to the area's edge)``.
   No data is read.
3. **T iterations** (``iterations``, default 5 as in Su et al.). Each point is
   assigned to its nearest current centroid; for every cluster ``j`` the
   count ``n_j`` and the integer sums ``Σa``, ``Σb`` are released with
   discrete Laplace noise: counts with ``ε_count``, both sums with
   ``ε_sum`` at ``q = exp(-ε_sum / (s·(M_x + M_y)))``. The new centroid is
   ``(Σa + Z, Σb + Z')·g / (n_j + Z'')`` from the centre, clipped to the box;
   a cluster whose noisy count is below ``min_count`` (the count at which
   the sum noise alone would move the centroid by a half side; public) keeps
   its centroid.
4. **Map layer.** The Voronoi cells of the final centroids, clipped to the
   study area (``shapely.voronoi_polygons``), each with a fresh noisy count
   of the points it holds (``ε_layer``) and a 95% interval, and the
   centroid as ``centroid_x``, ``centroid_y``.

Budget: ``ε_layer = layer_share·ε`` (default 0.1·ε) for the layer's counts and
``(1 − layer_share)·ε / T`` per iteration, split ``ε_count = c·ε_it``,
``ε_sum = (1 − c)·ε_it``, in exact rationals rounded down (:func:`split_kmeans_epsilon`). The default ``c`` minimises the worst-case error of
one noisy centroid: with ``x̂ = (S + Z_S)/(n + Z_n)`` the squared error is about
``(Var Z_Sx + Var Z_Sy + |μ|²·Var Z_n)/n²`` with ``Var Z ≈ 2Δ²/ε²``; minimising
``4Δ_S²/ε_sum² + 2R²/ε_count²`` with ``Δ_S = M_x + M_y``, ``R² = M_x² + M_y²``
(a centroid at the box's corner) gives
``ε_sum/ε_count = (2Δ_S²/R²)^(1/3)`` — for a square ``4^(1/3) ≈ 1.59``, i.e.
``c ≈ 0.39`` (Su et al. derive the same cube-root rule for their setting).

Privacy
-------
Neighbouring data sets differ by one record of at most ``s`` points
(``sensitivity``; with a per-person cap ``K`` the caller passes ``s = K``).
The assignment of a point depends only on that point and the public
centroids, so adding a record changes the count vector by at most ``s`` in
L1 and the two sum vectors together by at most ``s·(M_x + M_y)`` lattice
units (each point moves one cluster's sums by ``|a| + |b|``). Each release is
therefore ε_count-, resp. ε_sum-DP (discrete Laplace on an integer vector);
the centroids of the next iteration are a function of released values and
public parameters (post-processing), so by adaptive sequential composition
the ``T`` iterations cost ``T·(ε_count + ε_sum) = (1 − layer_share)·ε``; the
layer's counts (one count vector over the Voronoi cells, sensitivity ``s``)
cost ``ε_layer``. Total ``ε``, ``δ = 0``: every noisy value is an integer
with an exactly known law (no floating-point Laplace sampler). The initial
centroids are drawn without data; clipping, the ``min_count`` rule, the
Voronoi cells, ``dp_count = max(count, 0)`` and the intervals are
post-processing. A caller-seeded generator makes the output reproducible and
the metadata then says ``differentially_private: false``. Proof in
``docs/privacy.md`` §7.1; the tests check the noise law of one iteration's
counts and sums against the split stated here.

Why this and not diffprivlib's ``KMeans``
-----------------------------------------
diffprivlib (0.6.5) implements the same DPLloyd, and the benchmarks run it
as a cross-check, but as a published mechanism it falls short of dpgeo's
rules: (i) the number of iterations is computed from the exact number of
points (``_calc_iters``), so ``n`` is used without noise; (ii) a cluster
that received no point is skipped without noise, so an iteration releases
exactly whether a cluster is empty (its centroid stays exactly where it
was) and the composition proof does not go through; (iii) the sensitivity
of a coordinate sum is taken as ``upper − lower``, which bounds the change
from *adding* a point only when the bounds contain 0 — projected
coordinates in metres never do (e.g. UTM eastings 500,000–530,000 would
need 530,000, not 30,000); (iv) the noise is floating-point Laplace. Measuring from the box centre also halves the sum
sensitivity relative to ``upper − lower`` in the favourable case. Su et
al. report that their non-interactive EUGkM (k-means on a DP grid
histogram) beats DPLloyd in two dimensions; it needs the number of points
to size its grid, so it is left for later (dpgeo's DP histograms would
make it a post-processing step).

Examples
--------
>>> import numpy as np
>>> from dpgeo import StudyArea
>>> from dpgeo.noise import NoiseSource
>>> area = StudyArea.from_bbox((0, 0, 2000, 2000), crs="EPSG:32615", working_crs="EPSG:32615")
>>> rng = np.random.default_rng(0)
>>> x = np.r_[rng.normal(500, 60, 4000), rng.normal(1500, 60, 4000)]
>>> y = np.r_[rng.normal(500, 60, 4000), rng.normal(1400, 60, 4000)]
>>> res = kmeans_layer(x, y, area=area, k=2, epsilon=1.0, rng=NoiseSource(seed=1))
>>> len(res.layer), res.metadata["differentially_private"]
(2, False)
>>> sorted(np.round(res.layer["centroid_x"].to_numpy(), -2).tolist())
[500.0, 1500.0]
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np
import shapely

from ..errors import ParameterError
from ..grid import area_m2
from ..noise import (
    RATE_MAX,
    RATE_MIN,
    discrete_laplace_q,
    float_at_most,
    noise_epsilon,
    rate_error,
    sample_discrete_laplace,
    sum_interval_halfwidth,
)
from ..randomness import NoiseSource, as_source
from ._lloyd import nearest_2d
from .voronoi import initial_centroids, voronoi_cells
from .voronoi import _multipolygon
from .voronoi import inside as _inside

__all__ = [
    "KMeansPlan",
    "KMeansLayer",
    "kmeans_plan",
    "initial_centroids",
    "dp_lloyd",
    "cell_counts",
    "voronoi_cells",
    "kmeans_layer",
    "KMEANS_LAYER_COLUMNS",
    "DEFAULT_ITERATIONS",
    "DEFAULT_LAYER_SHARE",
    "LATTICE_HALF_STEPS",
    "MAX_K",
]

#: Lloyd iterations (Su et al. recommend a small fixed number; 5 is theirs).
DEFAULT_ITERATIONS = 5
#: Share of ε for the counts of the published Voronoi cells.
DEFAULT_LAYER_SHARE = 0.1
#: Default lattice: this many steps from the box centre to its longer side.
LATTICE_HALF_STEPS = 1 << 15
#: Largest number of clusters accepted.
MAX_K = 1000
#: Attribute columns of the k-means layer, in order.
KMEANS_LAYER_COLUMNS = ["cluster_id", "dp_count", "dp_count_low", "dp_count_high", "area_m2",
                        "centroid_x", "centroid_y"]


def _discrete_laplace(rng: NoiseSource, *, epsilon: float, sensitivity: float, size) -> np.ndarray:
    """Integer noise for an integer statistic of L1 sensitivity ``sensitivity`` released with ``epsilon``.

    The only place this module draws noise (so that a change of the
    sampler's signature touches one line).
    """
    return sample_discrete_laplace(rng, size, epsilon=epsilon, sensitivity=sensitivity)


# ---------------------------------------------------------------------------
# the public plan: lattice, budget split, sensitivities (no data)


@dataclass(frozen=True)
class KMeansPlan:
    """Every public quantity of a DP k-means run (a function of the study area and the parameters).

    Attributes
    ----------
    bounds : tuple
        Bounding box of the study area (metres, working CRS).
    centre : tuple
        Its centre, the origin of the lattice coordinates.
    lattice_m : float
        Lattice step ``g`` in metres.
    half_steps : tuple of int
        ``(M_x, M_y)``: the largest ``|a|``, ``|b|`` a point can have.
    k, iterations : int
    epsilon : float
        Total budget ε.
    epsilon_count, epsilon_sum : float
        Per iteration: ε of the noisy counts and of the noisy sums.
    epsilon_layer : float
        ε of the layer's counts.
    sensitivity : int
        Points per record ``s`` (or the per-person cap).
    sensitivity_sum : int
        L1 sensitivity of the two sum vectors, ``s·(M_x + M_y)`` lattice steps.
    q_count, q_sum, q_layer : float
        Noise decays ``exp(-ε/Δ)``.
    min_count : int
        A cluster whose noisy count is below this keeps its centroid.
    """

    bounds: tuple
    centre: tuple
    lattice_m: float
    half_steps: tuple
    k: int
    iterations: int
    epsilon: float
    count_share: float
    layer_share: float
    epsilon_count: float
    epsilon_sum: float
    epsilon_layer: float
    sensitivity: int
    sensitivity_sum: int
    q_count: float
    q_sum: float
    q_layer: float
    min_count: int

    @property
    def count_error_95(self) -> int:
        """Half-width of the 95% interval of one published ``dp_count``."""
        return sum_interval_halfwidth(1, self.q_layer, 0.95)

    def to_metadata(self) -> dict:
        """The plan as JSON-serialisable metadata (public values only)."""
        return {
            "k": self.k,
            "iterations": self.iterations,
            "epsilon": self.epsilon,
            "epsilon_split": {
                "centroids_total": self.epsilon - self.epsilon_layer,
                "per_iteration_counts": self.epsilon_count,
                "per_iteration_sums": self.epsilon_sum,
                "layer_counts": self.epsilon_layer,
            },
            "count_share": self.count_share,
            "layer_share": self.layer_share,
            "lattice_m": self.lattice_m,
            "lattice_origin": list(self.centre),
            "lattice_half_steps": list(self.half_steps),
            "sensitivity_count": self.sensitivity,
            "sensitivity_sum_lattice": self.sensitivity_sum,
            "sensitivity_sum_m": self.sensitivity_sum * self.lattice_m,
            "noise": "discrete Laplace (two-sided geometric)",
            "noise_q_count": self.q_count,
            "noise_q_sum": self.q_sum,
            "noise_q_layer": self.q_layer,
            "min_count": self.min_count,
            "count_error_95": self.count_error_95,
        }


def _check_real(v, name, lo=None, hi=None, lo_open=True, hi_open=True):
    if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(v):
        raise ParameterError(f"{name} must be a finite number, got {v!r}")
    v = float(v)
    if lo is not None and (v <= lo if lo_open else v < lo):
        raise ParameterError(f"{name} must be {'>' if lo_open else '>='} {lo:g}, got {v!r}")
    if hi is not None and (v >= hi if hi_open else v > hi):
        raise ParameterError(f"{name} must be {'<' if hi_open else '<='} {hi:g}, got {v!r}")
    return v


def _check_int(v, name, lo=1, hi=None):
    if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < lo or (hi is not None and v > hi):
        rng = f">= {lo}" if hi is None else f"in [{lo}, {hi}]"
        raise ParameterError(f"{name} must be an integer {rng}, got {v!r}")
    return int(v)


def _optimal_count_share(mx: int, my: int) -> float:
    ratio = (2.0 * (mx + my) ** 2 / (mx * mx + my * my)) ** (1.0 / 3.0)
    return 1.0 / (1.0 + ratio)


def split_kmeans_epsilon(epsilon: float, iterations: int, layer_share: float, count_share: float):
    """``(ε_layer, ε_count, ε_sum)`` as floats whose noise spends at most ``ε`` in all, exactly.

    Exact rationals from `dpgeo.noise.noise_epsilon` of ε, each part rounded down
    (`dpgeo.noise.float_at_most`): ``T·(ε_count + ε_sum) + ε_layer <= ε`` as rationals, which a
    floating-point split can break by one unit in the last place.

    >>> layer, count, total = split_kmeans_epsilon(1.0, 5, 0.1, 0.386)
    >>> layer, 5 * (noise_epsilon(count) + noise_epsilon(total)) + noise_epsilon(layer) <= 1
    (0.1, True)
    """
    whole = noise_epsilon(epsilon)
    eps_layer = float_at_most(whole * Fraction(layer_share))
    per_iteration = (whole - noise_epsilon(eps_layer)) / iterations if eps_layer > 0 else Fraction(0)
    eps_count = float_at_most(per_iteration * Fraction(count_share))
    eps_sum = float_at_most(per_iteration - noise_epsilon(eps_count)) if eps_count > 0 else 0.0
    return eps_layer, eps_count, eps_sum


def kmeans_plan(bounds, *, k: int, epsilon: float, iterations: int = DEFAULT_ITERATIONS,
                layer_share: float = DEFAULT_LAYER_SHARE, count_share: float | None = None,
                lattice_m: float | None = None, sensitivity: int = 1) -> KMeansPlan:
    """The lattice, budget split and noise of a DP k-means run, from public inputs only.

    Parameters
    ----------
    bounds : tuple
        ``(minx, miny, maxx, maxy)`` of the public study area in metres.
    k : int
        Number of clusters (1 to :data:`MAX_K`).
    epsilon : float
        Total privacy budget ε (> 0).
    iterations : int
        Lloyd iterations ``T`` (default 5).
    layer_share : float
        Share of ε for the published counts of the Voronoi cells, in (0, 1).
    count_share : float, optional
        Share of each iteration's ε for the counts, in (0, 1); default the
        rule in the module notes (≈ 0.39 for a square study area).
    lattice_m : float, optional
        Lattice step in metres (default: half the longer side / 2**15).
    sensitivity : int
        Points per record (or per person after the cap).

    Examples
    --------
    >>> p = kmeans_plan((0, 0, 1000, 1000), k=3, epsilon=1.0)
    >>> p.half_steps, round(p.count_share, 3), round(p.epsilon_layer, 3)
    ((32768, 32768), 0.386, 0.1)
    >>> round(p.iterations * (p.epsilon_count + p.epsilon_sum) + p.epsilon_layer, 12)
    1.0
    """
    try:
        minx, miny, maxx, maxy = (float(v) for v in bounds)
    except (TypeError, ValueError):
        raise ParameterError(f"bounds must be four numbers minx, miny, maxx, maxy; got {bounds!r}") from None
    if not (np.isfinite([minx, miny, maxx, maxy]).all() and minx < maxx and miny < maxy):
        raise ParameterError(f"bounds must have minx < maxx and miny < maxy; got {bounds!r}")
    k = _check_int(k, "k (number of clusters)", 1, MAX_K)
    epsilon = _check_real(epsilon, "epsilon (the privacy budget)", lo=0.0)
    iterations = _check_int(iterations, "iterations", 1, 1000)
    layer_share = _check_real(layer_share, "layer_share (share of epsilon for the layer's counts)", 0.0, 1.0)
    sensitivity = _check_int(sensitivity, "sensitivity (points per record)")
    hx, hy = (maxx - minx) / 2.0, (maxy - miny) / 2.0
    if lattice_m is None:
        lattice_m = max(hx, hy) / LATTICE_HALF_STEPS
    lattice_m = _check_real(lattice_m, "lattice_m (lattice step, metres)", lo=0.0)
    mx, my = max(1, math.ceil(hx / lattice_m)), max(1, math.ceil(hy / lattice_m))
    if mx + my > 1 << 40:
        raise ParameterError(f"lattice_m={lattice_m:g} m gives {mx + my:,} steps across the study area; "
                             "use a step of at least 1/2**39 of the box (e.g. the default)")
    if count_share is None:
        count_share = _optimal_count_share(mx, my)
    count_share = _check_real(count_share, "count_share (share of each iteration's epsilon for the counts)",
                              0.0, 1.0)
    d_sum = sensitivity * (mx + my)
    eps_layer, eps_count, eps_sum = split_kmeans_epsilon(epsilon, iterations, layer_share, count_share)
    for part, eps_part, delta in (("layer counts", eps_layer, sensitivity), ("iteration counts", eps_count, sensitivity),
                                  ("iteration sums", eps_sum, d_sum)):
        rate = eps_part / delta
        if not (eps_part > 0 and RATE_MIN <= Fraction(eps_part) / delta <= RATE_MAX):
            raise ParameterError(rate_error(rate, f"epsilon of the {part}, per unit of its sensitivity,"))
    q_sum = discrete_laplace_q(eps_sum, d_sum)
    sd_sum = math.sqrt(2.0 * q_sum) / (1.0 - q_sum)  # lattice steps
    min_count = max(1, math.ceil(sd_sum * lattice_m / max(hx, hy)))
    return KMeansPlan(
        bounds=(minx, miny, maxx, maxy), centre=((minx + maxx) / 2.0, (miny + maxy) / 2.0),
        lattice_m=float(lattice_m), half_steps=(int(mx), int(my)), k=k, iterations=iterations, epsilon=epsilon,
        count_share=float(count_share), layer_share=layer_share, epsilon_count=eps_count, epsilon_sum=eps_sum,
        epsilon_layer=eps_layer, sensitivity=sensitivity, sensitivity_sum=int(d_sum),
        q_count=discrete_laplace_q(eps_count, sensitivity), q_sum=q_sum,
        q_layer=discrete_laplace_q(eps_layer, sensitivity), min_count=int(min_count),
    )


# ---------------------------------------------------------------------------
# the iterations


def _lattice(x, y, plan: KMeansPlan):
    g = plan.lattice_m
    mx, my = plan.half_steps
    a = np.clip(np.rint((np.asarray(x, float) - plan.centre[0]) / g), -mx, mx).astype(np.int64)
    b = np.clip(np.rint((np.asarray(y, float) - plan.centre[1]) / g), -my, my).astype(np.int64)
    return a, b


def _cluster_sums(label, values, k):
    """Exact int64 sums of ``values`` per cluster."""
    if values.size == 0:
        return np.zeros(k, dtype=np.int64)
    if values.size * (int(np.abs(values).max()) + 1) < (1 << 52):  # float64 partial sums stay exact
        return np.rint(np.bincount(label, weights=values, minlength=k)).astype(np.int64)
    out = np.zeros(k, dtype=np.int64)
    np.add.at(out, label, values)
    return out


def dp_lloyd(x, y, *, plan: KMeansPlan, init: np.ndarray, rng: NoiseSource):
    """Run the ``plan.iterations`` noisy Lloyd iterations from ``init``.

    Parameters
    ----------
    x, y : numpy.ndarray
        Points in metres, **already restricted to the study area** (private).
    plan : KMeansPlan
    init : numpy.ndarray, shape (k, 2)
        Data-independent starting centroids.
    rng : dpgeo.noise.NoiseSource
        The mechanism's noise generator.

    Returns
    -------
    centroids : numpy.ndarray, shape (k, 2)
        Final centroids in metres (ε-DP with ``plan.epsilon - plan.epsilon_layer``).
    history : list of dict
        Per iteration, the released values: ``centroids`` (the centroids the
        points were assigned to), ``noisy_count`` and ``noisy_sum_x``,
        ``noisy_sum_y`` (lattice steps). All DP; no exact value is kept.
    """
    a, b = _lattice(x, y, plan)
    g, (cx, cy) = plan.lattice_m, plan.centre
    bx0, by0, bx1, by1 = plan.bounds
    C = np.array(init, dtype=float).reshape(plan.k, 2)
    history = []
    for _ in range(plan.iterations):
        lab = nearest_2d(x, y, C[:, 0], C[:, 1])
        cnt = np.bincount(lab, minlength=plan.k).astype(np.int64)
        sx, sy = _cluster_sums(lab, a, plan.k), _cluster_sums(lab, b, plan.k)
        n_hat = cnt + _discrete_laplace(rng, epsilon=plan.epsilon_count, sensitivity=plan.sensitivity,
                                        size=plan.k)
        z = _discrete_laplace(rng, epsilon=plan.epsilon_sum, sensitivity=plan.sensitivity_sum, size=2 * plan.k)
        sx_hat, sy_hat = sx + z[:plan.k], sy + z[plan.k:]
        del cnt, sx, sy, lab
        history.append({"centroids": C.copy(), "noisy_count": n_hat, "noisy_sum_x": sx_hat,
                        "noisy_sum_y": sy_hat})
        upd = n_hat >= plan.min_count
        new = C.copy()
        new[upd, 0] = np.clip(cx + g * sx_hat[upd] / n_hat[upd], bx0, bx1)
        new[upd, 1] = np.clip(cy + g * sy_hat[upd] / n_hat[upd], by0, by1)
        C = new
    return C, history


# ---------------------------------------------------------------------------
# the map layer


def cell_counts(x, y, centroids, *, plan: KMeansPlan, rng: NoiseSource) -> np.ndarray:
    """Noisy number of points nearest to each centroid (its Voronoi cell), with ``plan.epsilon_layer``.

    One count vector of L1 sensitivity ``plan.sensitivity``: ε_layer-DP.
    Returns int64 counts (not clipped).
    """
    C = np.asarray(centroids, dtype=float).reshape(-1, 2)
    lab = nearest_2d(x, y, C[:, 0], C[:, 1])
    cnt = np.bincount(lab, minlength=C.shape[0]).astype(np.int64)
    return cnt + _discrete_laplace(rng, epsilon=plan.epsilon_layer, sensitivity=plan.sensitivity, size=C.shape[0])


@dataclass
class KMeansLayer:
    """Result of :func:`kmeans_layer`.

    Attributes
    ----------
    layer : geopandas.GeoDataFrame
        One row per Voronoi cell: :data:`KMEANS_LAYER_COLUMNS` plus
        ``geometry`` (MultiPolygon, working CRS). Publishable when
        ``metadata["differentially_private"]`` is true.
    metadata : dict
        The plan, the budget split and public facts of the run.
    centroids : numpy.ndarray, shape (m, 2)
        The released centroids (distinct, ``m <= k``), in the order of
        ``cluster_id`` 1..m.
    history : list of dict
        The released per-iteration values (see :func:`dp_lloyd`).
    diagnostics : dict
        Points used and dropped outside the study area: for the data owner
        only, never published.
    """

    layer: object
    metadata: dict
    centroids: np.ndarray
    polygon: object = field(repr=False)
    history: list = field(default_factory=list, repr=False)
    diagnostics: dict = field(default_factory=dict, repr=False)

    @property
    def n_clusters(self) -> int:
        return int(len(self.layer))

    def label_points(self, x, y) -> np.ndarray:
        """Cluster id of the Voronoi cell each point falls in (0 outside the study area)."""
        x = np.asarray(x, dtype=float)
        y = np.asarray(y, dtype=float)
        out = np.zeros(x.size, dtype=np.int64)
        inside = _inside(self.polygon, x, y)
        if self.centroids.shape[0]:
            out[inside] = 1 + nearest_2d(x[inside], y[inside], self.centroids[:, 0], self.centroids[:, 1])
        return out


def _noise_source(rng) -> NoiseSource:
    try:
        return as_source(rng)
    except Exception:
        raise ParameterError("rng must be None, a dpgeo.noise.NoiseSource or a numpy Generator (the latter only "
                             "for tests: the result is marked not private)") from None


def kmeans_layer(x, y, *, area, k: int, epsilon: float, iterations: int = DEFAULT_ITERATIONS,
                 layer_share: float = DEFAULT_LAYER_SHARE, count_share: float | None = None,
                 lattice_m: float | None = None, sensitivity: int = 1, rng=None) -> KMeansLayer:
    """ε-DP k-means over a public study area, published as Voronoi cells with noisy counts.

    Parameters
    ----------
    x, y : array_like
        The private points, projected to ``area``'s working CRS (metres).
        Points outside the study area are dropped.
    area : dpgeo.StudyArea
        The **public** study area (its projected polygon and CRS are used).
    k : int
        Number of clusters.
    epsilon : float
        Total privacy budget ε; the run is ε-DP with δ = 0.
    iterations, layer_share, count_share, lattice_m, sensitivity
        See :func:`kmeans_plan`.
    rng : None, dpgeo.noise.NoiseSource or numpy.random.Generator
        Noise source. ``None`` (the private choice) seeds a fresh generator
        from the operating system's CSPRNG; a seeded source (or a bare
        numpy Generator) marks the result not private.

    Returns
    -------
    KMeansLayer
        ``layer`` has one row per Voronoi cell of the released centroids,
        clipped to the study area: ``cluster_id``, ``dp_count`` (noisy count
        of the points in the cell, at least 0), ``dp_count_low``,
        ``dp_count_high`` (95% interval), ``area_m2``, ``centroid_x``,
        ``centroid_y``, ``geometry``.
    """
    import geopandas as gpd

    if not hasattr(area, "polygon") or not hasattr(area, "crs"):
        raise ParameterError("area must be a dpgeo.StudyArea (the public study area in its working CRS), e.g. "
                             "dpgeo.as_study_area(bbox, domain_crs=..., working_crs=...); got "
                             f"{type(area).__name__}")
    polygon = area.polygon
    plan = kmeans_plan(polygon.bounds, k=k, epsilon=epsilon, iterations=iterations, layer_share=layer_share,
                       count_share=count_share, lattice_m=lattice_m, sensitivity=sensitivity)
    src = _noise_source(rng)
    x = np.asarray(x, dtype=float).ravel()
    y = np.asarray(y, dtype=float).ravel()
    if x.shape != y.shape:
        raise ParameterError(f"x and y must have the same length, got {x.size} and {y.size}")
    ok = np.isfinite(x) & np.isfinite(y)
    inside = np.zeros(x.size, dtype=bool)
    inside[ok] = _inside(polygon, x[ok], y[ok])
    diag = {"n_used": int(inside.sum()), "n_outside_domain": int((ok & ~inside).sum()),
            "n_dropped_invalid": int((~ok).sum())}
    x, y = x[inside], y[inside]
    init = initial_centroids(polygon, plan.k, src.numpy_generator())  # public: data-independent
    C, history = dp_lloyd(x, y, plan=plan, init=init, rng=src)
    _, first = np.unique(C, axis=0, return_index=True)
    C = C[np.sort(first)]  # distinct centroids, in their original order (post-processing)
    n_hat = cell_counts(x, y, C, plan=plan, rng=src)
    cells = voronoi_cells(C, polygon)
    keep = ~shapely.is_empty(cells)
    h = plan.count_error_95
    ids = np.arange(1, C.shape[0] + 1, dtype=np.int64)
    geoms = np.array([_multipolygon(g) for g in cells[keep]], dtype=object)
    layer = gpd.GeoDataFrame(
        {
            "cluster_id": ids[keep],
            "dp_count": np.maximum(n_hat[keep], 0),
            "dp_count_low": np.maximum(n_hat[keep] - h, 0),
            "dp_count_high": np.maximum(n_hat[keep] + h, 0),
            "area_m2": area_m2(geoms),
            "centroid_x": C[keep, 0],
            "centroid_y": C[keep, 1],
        },
        geometry=geoms, crs=area.crs,
    )
    md = {
        "mechanism": "DP k-means (DPLloyd of Su et al. with discrete Laplace noise; Voronoi cells)",
        "method": "kmeans",
        "differentially_private": src.private,
        "not_private_reasons": [] if src.private else [src.not_private_reason],
        "delta": 0.0,
        "neighbouring_relation": f"add or remove one record of at most {plan.sensitivity} point(s)",
        **plan.to_metadata(),
        "initialisation": "data-independent: greedy max-min spreading of random positions in the study area",
        "n_clusters": int(keep.sum()),
        "dp_count_interval": "95%: noisy count of the Voronoi cell ± noise quantile, clipped at 0",
    }
    return KMeansLayer(layer=layer, metadata=md, centroids=C, polygon=polygon, history=history, diagnostics=diag)
