"""Scenarios of the privacy audit: neighbouring data sets, events, exact laws, injected breaks.

Each scenario calls one mechanism through its usual entry point (a stage such
as ``histogram.noisy_histogram``, ``dbscan_cells`` or ``wavecluster_cells``, or
the public ``dpgeo.dbscan_spans``) on two neighbouring data sets ``D`` and
``D′``, and gives the exact probability of each of its events under the
correct mechanism and under every injected break. The method and the
statistics are in ``privacy_audit.py``.

A break is a context manager that patches one place in dpgeo (a noise scale,
a budget split, a sensitivity, the cap, the false-cell path) the way a bug
there would; ``getattr`` on the patched name fails loudly if the code moves,
so that the companion tests are pointed at it again rather than passing
silently.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import itertools
import math
from collections.abc import Callable

import numpy as np
import shapely
from scipy import stats

import dpgeo
import dpgeo.pipeline._common
import dpgeo.declarations.spans
import dpgeo.pipeline.run
from dpgeo import histogram
from dpgeo.counting import CellCounts, reservoir
from dpgeo.counting.accumulate import sum_by_id
from dpgeo.counting.reservoir import PersonReservoir
from dpgeo.domain import StudyArea
from dpgeo.grid import Grid, cell_width_for_radius, neighbourhood_offsets
from dpgeo.mechanisms import auto as m_auto
from dpgeo.mechanisms import dbscan
from dpgeo.mechanisms import wavecluster as wc
from dpgeo.mechanisms.resolution import fine_grid
from dpgeo.mechanisms.wavecluster import _checks as m_checks
from dpgeo.mechanisms.wavecluster import privqt as m_privqt
from dpgeo.mechanisms.wavecluster import privthr as m_privthr
from dpgeo.mechanisms.wavecluster import privthr_em as m_privthr_em
from dpgeo.mechanisms.wavecluster import transform as m_transform
from privacy_audit import Scenario

#: The working CRS of every scenario (metres; the coordinates are abstract).
CRS = "EPSG:32615"


def _square_grid(side: int, cell_m: float = 10.0) -> Grid:
    area = StudyArea.from_bbox((0, 0, side * cell_m, side * cell_m), CRS, working_crs=CRS)
    return Grid(area, cell_m)


def _dlap_tail(t, q):
    """``Pr[Z >= t]`` for the discrete Laplace law of decay ``q``, any integer ``t``."""
    return q**t / (1 + q) if t >= 1 else 1.0 - q ** (1 - t) / (1 + q)


def _at_least(v, t):
    return v >= t


def _released(h, cell):
    return int(h.lookup(np.array([cell]))[0])


def dense_histogram(epsilon: float = 1.0, n: int = 500) -> Scenario:
    """Dense DP histogram, one record apart.

    3 × 3 grid; ``D`` has 3 points in the centre cell ``c`` (and 2 elsewhere),
    ``D′`` one more in ``c``. ``S`` = "the released count of ``c`` is ≥ 4":
    ``Pr[S | D′] = Pr[Z ≥ 0] = 1/(1+q)``, ``Pr[S | D] = Pr[Z ≥ 1] = q/(1+q)``,
    ratio ``1/q = e^ε``.
    """
    grid = _square_grid(3)
    c = 4
    d = np.array([0, 0, c, c, c])
    data = {"D": d, "D'": np.r_[d, c]}

    def run(which, rng):
        return _released(histogram.noisy_histogram(grid, data[which], epsilon=epsilon, rng=rng, method="dense"), c)

    def law(q):
        return [(1 / (1 + q), q / (1 + q))]

    q = math.exp(-epsilon)
    return Scenario(
        "DP-DBSCAN dense histogram", epsilon, n, run, [("released count of c >= 4", lambda v: v >= 4)],
        {"correct": law(q), "dense noise scale x1/2": law(q * q)},
        "one record (1 point) in cell c: 3 vs 4 points")


def sparse_histogram(epsilon: float = 1.0, n: int = 650) -> Scenario:
    """Sparse DP histogram (θ = 1), one record apart: the empty cell's false release.

    3 × 3 grid, θ = 1 (the public rule with the default memory bound). In
    ``D`` the centre cell ``c`` is **empty**, so its release comes from the
    false-cell path (``m ~ Bin(M, Pr[Z ≥ θ])`` empty cells, values from
    ``Z | Z ≥ θ``); in ``D′`` it holds the record's point. Two events:
    ``S₁`` = "``c`` is released": ``Pr[S₁ | D′] = Pr[1 + Z ≥ 1] = 1/(1+q)``,
    ``Pr[S₁ | D] = Pr[Z ≥ 1] = q/(1+q)``; ``S₂`` = "``c`` is released with
    value θ = 1": ``Pr[S₂ | D′] = Pr[Z = 0] = (1−q)/(1+q)``, ``Pr[S₂ | D] =
    Pr[Z ≥ 1]·Pr[Z = 1 | Z ≥ 1] = q(1−q)/(1+q)``. Both ratios are ``e^ε``.
    """
    grid = _square_grid(3)
    c = 4
    q = math.exp(-epsilon)
    theta = histogram.sparse_threshold(grid.n_cells, q, histogram.DEFAULT_MAX_FALSE_CELLS)
    assert theta == 1
    d = np.array([0, 0, 8])
    data = {"D": d, "D'": np.r_[d, c]}

    def run(which, rng):
        return _released(histogram.noisy_histogram(grid, data[which], epsilon=epsilon, rng=rng, method="sparse"), c)

    def law(q, rate=1.0, shift=False):
        c0 = (1 - q) / (1 + q)
        return [(1 / (1 + q), rate * q / (1 + q)), (c0, 0.0 if shift else rate * q * c0)]

    return Scenario(
        "DP-DBSCAN sparse histogram", epsilon, n, run,
        [("c released", lambda v: v >= 1), ("c released with value θ = 1", lambda v: v == 1)],
        {"correct": law(q),
         "sparse noise scale x1/2": law(q * q),
         "false cells released at q·Pr[Z >= θ]": law(q, rate=q),
         "false-cell values from θ+1": law(q, shift=True)},
        "one record (1 point) in cell c: c empty (false-cell path) vs 1 point")


def person_cap(epsilon: float = 1.0, k: int = 3, n: int = 1400) -> Scenario:
    """Per-person cap K = 3 and the histogram with Δ = K, one person apart.

    3 × 3 grid, cells ``c`` (centre) and ``d``. In ``D``: person a has 6
    points (3 in ``c``, 3 in ``d``), b has 2 in ``c``, e has 5 in ``d``; ``D′``
    adds person p with 7 points in ``c``. The cap keeps 3 of a's points at
    random, so ``c`` keeps ``X = 2 + H`` points of ``D`` with ``H``
    hypergeometric (3 of 6, 3 good), and ``X + 3`` of ``D′``. Events
    ``S_t`` = "released count of ``c`` ≥ t" for ``t = 8`` and ``t = 12``
    (both ≥ the largest ``X`` + 3): with ``q = e^{−ε/K}``, ``Pr[S_t | D′] =
    E[q^{t−5−H}]/(1+q)``, ``Pr[S_t | D] = E[q^{t−2−H}]/(1+q)``, ratio
    ``q^{−3} = e^ε`` whatever the cap chose for a. ``S₈`` catches noise that
    does not scale with K, ``S₁₂`` a cap that lets p's 7 points through.
    """
    grid = _square_grid(3)
    c, d = 4, 0
    person_d = np.array(["a"] * 6 + ["b"] * 2 + ["e"] * 5)
    cells_d = np.array([c, c, c, d, d, d, c, c, d, d, d, d, d])
    data = {"D": (person_d, cells_d),
            "D'": (np.r_[person_d, ["p"] * 7], np.r_[cells_d, [c] * 7])}

    def run(which, rng):
        person, cells = data[which]
        res = PersonReservoir(k, rng.numpy_generator())  # the cap as the pipeline applies it, batch by batch
        res.add(person[:5], cells[:5])
        res.add(person[5:], cells[5:])
        kept = res.result().cell_id
        h = histogram.noisy_histogram(grid, kept, epsilon=epsilon, sensitivity=k, rng=rng, method="dense")
        return _released(h, c)

    hyp = stats.hypergeom(6, 3, 3)
    h = np.arange(4)
    w = hyp.pmf(h)
    ts = (8, 12)

    def law(q):
        return [(float(np.sum(w * q ** (t - 5 - h))) / (1 + q), float(np.sum(w * q ** (t - 2 - h))) / (1 + q))
                for t in ts]

    q = math.exp(-epsilon / k)
    return Scenario(
        "person cap K = 3", epsilon, n, run,
        [(f"released count of c >= {t}", functools.partial(_at_least, t=t)) for t in ts],
        {"correct": law(q),
         # every point kept: c holds 5 points of D and 12 of D′
         "cap not applied": [(_dlap_tail(t - 12, q), _dlap_tail(t - 5, q)) for t in ts],
         "histogram noise not scaled by K": law(math.exp(-epsilon))},
        "one person (7 points in c, 3 kept) added to persons a (6 points, capped at random), b, e")


class _Memo:
    """Exact memo of a deterministic post-processing step, keyed by the released histogram."""

    def __init__(self, fn):
        self.fn = fn
        self.cache = {}

    def __call__(self, h):
        key = (h.kind, h.cell_id.tobytes(), h.count.tobytes())
        if key not in self.cache:
            self.cache[key] = self.fn(h)
        return self.cache[key]


def dbscan_spans_stage(kind: str = "dense", epsilon: float = 1.0, n: int = 500, min_points: int = 5) -> Scenario:
    """DP-DBSCAN (histogram, then ``dbscan_cells`` with grown spans), one record apart.

    The study area is two cells far apart (``c`` and ``e``; radius α = 10·√2 m,
    cells of 10 m), so ``c``'s neighbourhood sum is its own released count
    and ``c`` is in a span exactly when that reaches the public core
    threshold ``T = MinPts + Γ``. ``e`` is empty (for the sparse histogram,
    a false-cell candidate). ``D`` has ``⌈T⌉ − 1`` points in ``c``, ``D′``
    ``⌈T⌉``. ``S`` = "``c`` is in a span": ``Pr[S | D′] = Pr[Z ≥ 0]``,
    ``Pr[S | D] = Pr[Z ≥ 1]``, ratio ``e^ε``.

    ``dbscan_cells`` is deterministic post-processing of the released
    histogram, so it is computed once per distinct released histogram (an
    exact memo); every run still draws a fresh histogram.
    """
    geom = shapely.MultiPolygon([shapely.box(0, 0, 10, 10), shapely.box(90, 90, 100, 100)])
    area = StudyArea.from_geometry(geom, CRS, working_crs=CRS)
    grid = Grid(area, cell_width_for_radius(10.0 * math.sqrt(2.0), 1.0))
    c = 9 * grid.nx + 9
    offsets = neighbourhood_offsets(1.0)
    assert grid.n_cells == 2 and grid.in_universe(np.array([0, c])).all()
    assert np.abs(offsets).max() < 9  # the two cells are not within α of each other
    q = math.exp(-epsilon)
    theta = histogram.sparse_threshold(grid.n_cells, q, histogram.DEFAULT_MAX_FALSE_CELLS) \
        if kind == "sparse" else None
    kw = dict(kappa=len(offsets), n_cells=grid.n_cells, q=q, epsilon_eff=epsilon, beta=dbscan.DEFAULT_BETA,
              theta=theta)
    bound = dbscan.noise_bound(method="laplace", **kw)
    extent = dbscan.noise_bound(method="exact", **kw)
    t = int(math.ceil(min_points + bound.gamma))
    data = {"D": np.full(t - 1, c), "D'": np.full(t, c)}

    def spans_of(h):
        spans = dbscan.dbscan_cells(h, min_points=min_points, eta=1.0, bound=bound, extent_bound=extent)
        hit = np.flatnonzero(spans.cell_id == c)
        return int(spans.count[hit[0]]) if hit.size else None

    memo = _Memo(spans_of)

    def run(which, rng):
        return memo(histogram.noisy_histogram(grid, data[which], epsilon=epsilon, rng=rng, method=kind))

    def law(q):
        return [(1 / (1 + q), q / (1 + q))]

    return Scenario(
        f"DP-DBSCAN spans, {kind} histogram", epsilon, n, run, [("c is in a span", lambda v: v is not None)],
        {"correct": law(q), f"{kind} noise scale x1/2": law(q * q)},
        f"one record (1 point) in an isolated cell c: {t - 1} vs {t} points (T = MinPts + Γ = "
        f"{min_points + bound.gamma:.2f})")


def privthr_joint(epsilon: float = 1.5, n: int = 1200) -> Scenario:
    """PrivTHR (Haar, default split α = 0.9): the noisy counts and |Z|′ together, one record apart.

    4 × 4 grid (4 Haar coefficients, Δ|Z| = 1). ``D`` is empty (``|Z| = 4``),
    ``D′`` has one point in cell (0, 0) (``|Z| = 3``). ``S`` = "noisy count of
    (0, 0) ≥ 1 and ``|Z|′ ≤ 3``": with ``q₁ = e^{−αε}``, ``q₂ = e^{−(1−α)ε}``
    the two noises are independent, ``Pr[S | D′] = 1/((1+q₁)(1+q₂))`` and
    ``Pr[S | D] = q₁q₂/((1+q₁)(1+q₂))``, ratio ``e^{ε₁+ε₂} = e^ε``.
    """
    d = np.zeros((4, 4), dtype=np.int64)
    d1 = d.copy()
    d1[0, 0] = 1
    data = {"D": d, "D'": d1}
    for which, z in (("D", 4), ("D'", 3)):
        assert wc.wavecluster_cells(data[which], method="exact").report["n_nonpositive"] == z
    assert wc.approximation_sensitivity(d.shape)["nonpositive_count"] == 1

    def run(which, rng):
        r = wc.wavecluster_cells(data[which], method="privthr", epsilon=epsilon, rng=rng)
        return int(r.noisy_counts[0, 0]), int(r.report["noisy_nonpositive_count"])

    def law(q1, q2):
        den = (1 + q1) * (1 + q2)
        return [(1 / den, q1 * q2 / den)]

    q1, q2 = math.exp(-0.9 * epsilon), math.exp(-0.1 * epsilon)
    return Scenario(
        "PrivTHR (counts and |Z|′)", epsilon, n, run,
        [("noisy count of (0, 0) >= 1 and |Z|′ <= 3", lambda v: v[0] >= 1 and v[1] <= 3)],
        {"correct": law(q1, q2), "count noise scale x1/2": law(q1 * q1, q2)},
        "one record (1 point): empty 4 x 4 grid vs one point in cell (0, 0)")


def privthr_nonpositive(epsilon: float = 15.0, n: int = 750) -> Scenario:
    """PrivTHR's ``|Z|′`` alone (bior2.2, Δ|Z| = 5), against its share ε₂ = (1 − α)ε = 1.5.

    8 × 8 grid. ``D`` is empty; ``D′`` has one point in a cell whose impulse
    response has ``P⁺ = 5`` positive coefficients, so ``|Z|`` drops by 5, the
    derived sensitivity (the paper says 1). ``S`` = "``|Z|′ ≤ |Z|(D′)``":
    with ``q = e^{−ε₂/5}``, ``Pr[S | D′] = 1/(1+q)``, ``Pr[S | D] =
    Pr[Z ≤ −5] = q⁵/(1+q)``, ratio ``e^{ε₂}``.
    """
    shape = (8, 8)
    sens = wc.approximation_sensitivity(shape, wavelet="bior2.2")
    dz = sens["nonpositive_count"]
    assert dz == 5
    d = np.zeros(shape, dtype=np.int64)
    n_coef = sens["n_coefficients"]
    d1 = None
    for i, j in itertools.product(range(shape[0]), range(shape[1])):
        e = d.copy()
        e[i, j] = 1
        if n_coef - wc.wavecluster_cells(e, method="exact", wavelet="bior2.2").report["n_nonpositive"] == dz:
            d1 = e
            break
    assert d1 is not None
    z1 = n_coef - dz
    data = {"D": d, "D'": d1}
    eps2 = 0.1 * epsilon

    def run(which, rng):
        r = wc.wavecluster_cells(data[which], method="privthr", epsilon=epsilon, wavelet="bior2.2", rng=rng)
        return int(r.report["noisy_nonpositive_count"])

    def law(q):
        return [(1 / (1 + q), q**dz / (1 + q))]

    return Scenario(
        "PrivTHR |Z|′ (bior2.2)", eps2, n, run, [(f"|Z|′ <= {z1}", lambda v: v <= z1)],
        {"correct": law(math.exp(-eps2 / dz)),
         "|Z|′ sensitivity 1 (the paper's)": law(math.exp(-eps2)),
         "|Z|′ noise scale x1/2": law(math.exp(-2 * eps2 / dz)),
         "PrivTHR split swapped": law(math.exp(-0.9 * epsilon / dz))},
        f"one record (1 point) that makes {dz} coefficients positive: empty 8 x 8 grid vs that point")


def privthr_em(epsilon2: float = 2.0, width: int = 8, n: int = 1900) -> Scenario:
    """PrivTHR_EM's threshold (Haar, default split α = 0.7), against its share ε₂ = 2.

    A record holds 2 points (``sensitivity=2``, so Δu = 2); percentile 40;
    public candidates 0..64 (``count_cap=1``). 6 × 6 grid: ``D`` has three
    2 × 2 blocks of sum 100 and two of sum ``width + 1`` (``m = 5`` positive
    coefficients, ``k = 3``); ``D′`` adds the record's 2 points to two empty
    blocks (``m = 7``, ``k = 5``). The quality ``u(t) = −|c(t) − k|`` of the
    candidates ``1..width`` rises by 2, that of ``width+1..64`` falls by 2, and
    ``t = 0`` keeps its quality, so ``S`` = "the chosen threshold is in
    ``1..width``" has ratio ``e^{ε₂/2}`` times the ratio of the normalisers,
    ``e^{1.72}`` for ε₂ = 2 and width 8 (the exponential mechanism reaches
    ``e^{ε₂}`` only on events of vanishing probability). The law is computed
    here from the definitions (exact coefficients, ``c(t)``, ``k``) and the
    closed form ``Pr[t] ∝ exp(ε₂·u(t)/(2Δu))``.
    """
    alpha = 0.7
    epsilon = epsilon2 / (1 - alpha)
    d = np.zeros((6, 6), dtype=np.int64)
    for bx in range(3):
        d[0:2, 2 * bx:2 * bx + 2] = 25
    d[2, 0] = width + 1
    d[2, 2] = width + 1
    d1 = d.copy()
    d1[4, 0] += 1
    d1[4, 2] += 1
    data = {"D": d, "D'": d1}
    cand = wc.em_candidates(count_cap=1)
    assert np.array_equal(cand, np.arange(65))
    du = wc.approximation_sensitivity(d.shape, percentile=40, sensitivity=2)["em_quality"]
    assert du == 2

    def quality(counts):
        w = wc.approximation(counts)
        k = wc.wavecluster_cells(counts, method="exact", percentile=40).report["k"]
        above = (w.ravel()[None, :] > cand[:, None]).sum(axis=1)
        return -np.abs(above - k)

    u = {which: quality(data[which]) for which in data}
    in_s = (cand >= 1) & (cand <= width)
    assert np.all(u["D'"][in_s] - u["D"][in_s] == 2) and np.all(u["D'"][~in_s] - u["D"][~in_s] <= 0)

    def law(e2, delta_u):
        out = []
        for which in ("D'", "D"):
            z = e2 * u[which] / (2 * delta_u)
            p = np.exp(z - z.max())
            out.append(float(p[in_s].sum() / p.sum()))
        return [tuple(out)]

    def run(which, rng):
        r = wc.wavecluster_cells(data[which], method="privthr-em", epsilon=epsilon, percentile=40, sensitivity=2,
                                 count_cap=1, rng=rng)
        return float(r.report["threshold"])

    return Scenario(
        "PrivTHR_EM threshold", epsilon2, n, run, [(f"chosen threshold in 1..{width}", lambda v: 1 <= v <= width)],
        {"correct": law(epsilon2, du),
         "EM without the factor 2": law(2 * epsilon2, du),
         "EM quality sensitivity 1 (record size ignored)": law(epsilon2, 1),
         "PrivTHR_EM split swapped": law(alpha * epsilon, du)},
        "one record (2 points) in two empty Haar blocks: k = 3 vs 5")


def end_to_end_person_cap(epsilon: float = 1.0, k: int = 8, n: int = 125, min_points: int = 5) -> Scenario:
    """``dpgeo.dbscan_spans`` with ``person=``, ``max_points_per_person=K``, one person apart.

    The study area is one cell of 100 m (radius 100·√2 m), so the only
    possible span is that cell and its ``dp_count`` is the cell's released
    count. ``T`` = the public core threshold (``noise_preview`` with
    sensitivity K), ``t = ⌈T⌉``. ``D``: person a with 20 points (K kept) and
    persons of at most K points, ``t − K`` kept points in all; ``D′`` adds a
    person with 2K points (K kept). ``S`` = "a span with ``dp_count ≥ t``":
    ``Pr[S | D′] = 1/(1+q)``, ``Pr[S | D] = q^K/(1+q)``, ``q = e^{−ε/K}``,
    ratio ``e^ε``. Seeds are passed through ``seed=``.
    """
    side = 100.0
    kw = dict(epsilon=epsilon, radius_m=side * math.sqrt(2.0), min_points=min_points, domain=(0.0, 0.0, side, side),
              domain_crs=CRS, crs=CRS)
    t = int(math.ceil(dpgeo.noise_preview(max_points_per_record=k, **kw)["core_threshold"]))
    rest = t - 2 * k
    assert rest > 0
    person = np.array(["a"] * 20 + [f"b{i // k}" for i in range(rest)])
    data = {"D": person, "D'": np.r_[person, ["p"] * (2 * k)]}

    def run(which, seeds):
        who = data[which]
        xy = np.full(who.size, side / 2)
        res = dpgeo.dbscan_spans((xy, xy, CRS), person=who, max_points_per_person=k, seed=next(seeds), **kw)
        if res.metadata["sensitivity_points_per_record"] == k:  # the public threshold the event was built on
            assert math.ceil(res.metadata["core_threshold"]) == t
        return int(res.layer["dp_count"].iloc[0]) if len(res.layer) else None

    def law(q):
        return [(1 / (1 + q), q**k / (1 + q))]

    return Scenario(
        f"end to end: dbscan_spans, person cap K = {k}", epsilon, n, run,
        [(f"a span with dp_count >= {t}", lambda v: v is not None and v >= t)],
        {"correct": law(math.exp(-epsilon / k)), "pipeline sensitivity not scaled by K": law(math.exp(-epsilon))},
        f"one person ({2 * k} points, {k} kept) in a one-cell study area: {t - k} vs {t} kept points",
        make_source=lambda seed: itertools.count(seed * 1_000_003 + 1))


def _one_cell_series(epsilon, sensitivity=1):
    """A series on a study area of one 100 m cell (the only possible span is that cell) over two months."""
    side = 100.0
    kw = dict(epsilon=epsilon, radius_m=side * math.sqrt(2.0), min_points=5, domain=(0.0, 0.0, side, side),
              domain_crs=CRS, crs=CRS)
    t = int(math.ceil(dpgeo.noise_preview(sensitivity=sensitivity, **kw)["core_threshold"]))
    months = [int(dt.timestamp()) for dt in (_utc(2014, 1, 15), _utc(2014, 2, 15))]
    series = dict(period="month", period_start="2014-01-01", period_end="2014-03-01")
    return side, kw, t, months, series


def _utc(*ymd):
    import datetime

    return datetime.datetime(*ymd, tzinfo=datetime.timezone.utc)


def _span_counts(res):
    """The ``dp_count`` of each period's span (None where a period has none)."""
    return tuple(int(r.layer["dp_count"].iloc[0]) if len(r.layer) else None for r in res.releases)


def series_record(epsilon: float = 1.5, n: int = 700) -> Scenario:
    """A monthly series (``dpgeo.dbscan_spans`` with ``time=``, two months), one record apart in one month.

    Study area of one cell, so each period's only possible span is that cell
    and its ``dp_count`` is the cell's released count; ``t`` = the public core
    threshold. ``D``: ``t − 1`` records in January, none in February; ``D′``
    adds one record in January. The two months are released with independent
    noise at ε each, and the record lies in one month only, so the series is
    ε-DP (parallel composition, docs/privacy.md §6). ``E₁`` = "January has a
    span with ``dp_count ≥ t``": ``1/(1+q)`` vs ``q/(1+q)``; ``E₂`` = "both
    months have one": ``E₁`` times February's ``Pr[Z ≥ t]``, the same in both,
    so again ratio ``e^ε``. If the periods overlapped (each map counting its
    month and the one before, the record in two releases), ``E₂`` would be
    ``1/(1+q)²`` vs ``(q/(1+q))²``: ratio ``e^{2ε}``.
    """
    side, kw, t, months, series = _one_cell_series(epsilon)
    data = {"D": t - 1, "D'": t}
    q = math.exp(-epsilon)

    def run(which, seeds):
        m = data[which]
        xy = np.full(m, side / 2)
        res = dpgeo.dbscan_spans((xy, xy, CRS), time=np.full(m, months[0]), seed=next(seeds), **series, **kw)
        return _span_counts(res)

    tail_t = _dlap_tail(t, q)
    both = lambda v: v[0] is not None and v[0] >= t and v[1] is not None and v[1] >= t  # noqa: E731
    return Scenario(
        "series: dbscan_spans by month, one record in one month", epsilon, n, run,
        [(f"January has a span with dp_count >= {t}", lambda v: v[0] is not None and v[0] >= t),
         (f"both months have a span with dp_count >= {t}", both)],
        {"correct": [(1 / (1 + q), q / (1 + q)), (tail_t / (1 + q), tail_t * q / (1 + q))],
         "series periods overlap (a record in two releases)": [(1 / (1 + q), q / (1 + q)),
                                                               (1 / (1 + q) ** 2, (q / (1 + q)) ** 2)]},
        f"one record in January: {t - 1} vs {t} records in January, none in February",
        make_source=lambda seed: itertools.count(seed * 1_000_003 + 1))


def series_person(epsilon: float = 2.0, k: int = 1, n: int = 700) -> Scenario:
    """A monthly series with ``person=``, the cap K over the whole series, one person across two months apart.

    One-cell study area as in :func:`series_record`, sensitivity K, ``t`` the
    core threshold. ``D``: persons of one point each, ``t − K`` in January and
    ``t − K`` in February. ``D′`` adds a person with K points in January and K
    in February; the cap keeps K of their 2K points, ``j`` in January and
    ``K − j`` in February (hypergeometric). ``E`` = "both months have a span
    with ``dp_count ≥ t``": for every ``j``, ``Pr = q^{K−j}/(1+q) · q^j/(1+q) =
    q^K/(1+q)²`` in ``D′`` against ``q^{2K}/(1+q)²`` in ``D``, ``q = e^{−ε/K}``:
    ratio ``e^ε``, whatever the split — the series costs ε once. A cap counted in
    each month (K in January *and* K in February) gives ``1/(1+q)²``: ``e^{2ε}``.
    """
    side, kw, t, months, series = _one_cell_series(epsilon, k)
    base = t - k
    assert base > 0
    people = [f"a{i}" for i in range(2 * base)]
    times = [months[0]] * base + [months[1]] * base
    data = {"D": (people, times), "D'": (people + ["p"] * (2 * k), times + [months[0]] * k + [months[1]] * k)}
    q = math.exp(-epsilon / k)

    def run(which, seeds):
        who, when = data[which]
        xy = np.full(len(who), side / 2)
        res = dpgeo.dbscan_spans((xy, xy, CRS), time=np.asarray(when), person=np.asarray(who),
                                 max_points_per_person=k, seed=next(seeds), **series, **kw)
        return _span_counts(res)

    both = lambda v: v[0] is not None and v[0] >= t and v[1] is not None and v[1] >= t  # noqa: E731
    return Scenario(
        f"series: dbscan_spans by month, one person across months, cap K = {k} over the series", epsilon, n, run,
        [(f"both months have a span with dp_count >= {t}", both)],
        {"correct": [(q ** k / (1 + q) ** 2, q ** (2 * k) / (1 + q) ** 2)],
         "series cap counted per period": [(1 / (1 + q) ** 2, q ** (2 * k) / (1 + q) ** 2)]},
        f"one person with {k} point(s) in January and {k} in February ({k} kept over the series)",
        make_source=lambda seed: itertools.count(seed * 1_000_003 + 1))

def _next_seed(seeds):
    """The next seed of a seeded audit; ``None`` (the default CSPRNG, fresh OS entropy) when the audit hands a
    noise source instead (``benchmarks/audit_privacy.py`` without ``--seed``)."""
    return next(seeds) if hasattr(seeds, "__next__") else None


def end_to_end_heat(epsilon: float = 1.0, k: int = 4, n: int = 200) -> Scenario:
    """``dpgeo.heat`` on H3 cells (resolution 9) with ``person=``, ``max_points_per_person=K``, one person apart.

    The study area is a small box around one H3 cell ``c`` (a few cells
    intersect it); every point lies at ``c``'s centre. ``D``: person a with 20
    points (K kept) and persons of at most K points, ``m`` kept points in all;
    ``D′`` adds a person with 2K points (K kept). ``S`` = "``c``'s released
    count (``dp_count_raw``) ≥ m + K": ``Pr[S | D′] = Pr[Z ≥ 0] = 1/(1+q)``,
    ``Pr[S | D] = Pr[Z ≥ K] = q^K/(1+q)``, ``q = e^{−ε/K}``, ratio ``e^ε``.
    Seeds are passed through ``seed=`` (none in the benchmark's unseeded audit).
    """
    import h3

    cell = h3.latlng_to_cell(44.97, -93.26, 9)
    lat, lon = h3.cell_to_latlng(cell)
    box = (lon - 0.002, lat - 0.0015, lon + 0.002, lat + 0.0015)
    person = np.array(["a"] * 20 + [f"b{i // k}" for i in range(2 * k + 1)])
    m = k + 2 * k + 1
    data = {"D": person, "D'": np.r_[person, ["p"] * (2 * k)]}

    def run(which, seeds):
        who = data[which]
        res = dpgeo.heat((np.full(who.size, lon), np.full(who.size, lat), "EPSG:4326"), epsilon=epsilon,
                         h3_resolution=9, domain=box, person=who, max_points_per_person=k, seed=_next_seed(seeds),
                         ledger=False)
        row = res.layer[res.layer["h3"] == cell]
        return int(row["dp_count_raw"].iloc[0])

    def law(q):
        return [(1 / (1 + q), q**k / (1 + q))]

    return Scenario(
        f"end to end: heat on H3 cells, person cap K = {k}", epsilon, n, run,
        [(f"released count of c >= {m + k}", lambda v: v >= m + k)],
        {"correct": law(math.exp(-epsilon / k)), "pipeline sensitivity not scaled by K": law(math.exp(-epsilon))},
        f"one person ({2 * k} points, {k} kept) in H3 cell c: {m} vs {m + k} kept points",
        make_source=lambda seed: itertools.count(seed * 1_000_003 + 1))


def end_to_end_hotspots(epsilon: float = 1.0, n: int = 500) -> Scenario:
    """``dpgeo.hotspots`` on square cells (the count release under the Gi* classes), one record apart.

    A 4 × 4 study area of 100 m cells; ``D`` has 3 points in cell ``c`` and 5
    elsewhere, ``D′`` one more in ``c``. ``S`` = "``c``'s released count ≥ 4":
    ``Pr[S | D′] = 1/(1+q)``, ``Pr[S | D] = q/(1+q)``, ``q = e^{−ε}``. (The
    classes are post-processing of these counts.)
    """
    kw = dict(epsilon=epsilon, cell_m=100.0, domain=(0.0, 0.0, 400.0, 400.0), domain_crs=CRS, crs=CRS)
    xs = np.array([150.0, 150.0, 150.0, 50.0, 350.0, 350.0, 250.0, 50.0])
    ys = np.array([150.0, 150.0, 150.0, 50.0, 350.0, 50.0, 250.0, 350.0])
    data = {"D": (xs, ys), "D'": (np.r_[xs, 150.0], np.r_[ys, 150.0])}
    c = 1 * 4 + 1  # the cell (1, 1): x 100–200, y 100–200

    def run(which, seeds):
        x, y = data[which]
        res = dpgeo.hotspots((x, y, CRS), seed=_next_seed(seeds), ledger=False, **kw)
        return int(res.layer.loc[res.layer["cell_id"] == c, "dp_count_raw"].iloc[0])

    def law(q):
        return [(1 / (1 + q), q / (1 + q))]

    q = math.exp(-epsilon)
    return Scenario(
        "end to end: hotspots on square cells", epsilon, n, run, [("released count of c >= 4", lambda v: v >= 4)],
        {"correct": law(q), "release noise scale x1/2": law(q * q)},
        "one record (1 point) in cell c: 3 vs 4 points",
        make_source=lambda seed: itertools.count(seed * 1_000_003 + 7))


def auto_spans(epsilon: float = 1.0, n: int = 4000, points: int = 3000) -> Scenario:
    """Spans without a radius (``auto``): the noisy total, the occupancy histogram and the histogram together,
    one record apart.

    Every point lies in the corner cell of the finest grid of a 100 m square, so
    whatever cell widths the noisy total and the occupancy histogram pick they all
    lie in the first cell ``c`` of both released histograms. ``D`` has
    ``N - 1 = 2999`` points, ``D′`` ``N = 3000`` (enough for the uniform grid to
    have more than 1024 cells: the occupancy histogram takes 10 % of the
    histogram's budget). The statistic is ``(n̂, occupancy count of c, released
    count of c)``; ``S`` = "all three are at least ``N``":
    ``Pr[S | D′] = Π 1/(1+q_i)``, ``Pr[S | D] = Π q_i/(1+q_i)``, ratio
    ``e^{ε₀+ε_c+ε₁} = e^ε`` (``q_i = e^{-ε_i}``, the three shares of the budget).
    """
    from dpgeo.mechanisms.concentration import LARGE_CONCENTRATION_SHARE, concentration_budget

    area = StudyArea.from_bbox((0, 0, 100, 100), CRS, working_crs=CRS)
    fine = fine_grid(area)
    e0, eh = m_auto.auto_budget(epsilon)
    ec, e1 = concentration_budget(eh, LARGE_CONCENTRATION_SHARE)
    data = {"D": points - 1, "D'": points}

    def run(which, rng):
        r = m_auto.auto_spans_cells(fine, np.array([0]), np.array([data[which]]), epsilon=epsilon, rng=rng)
        return r.n_hat, int(r.occupancy.lookup(np.array([0]))[0]), int(r.hist.lookup(np.array([0]))[0])

    def law(*qs):
        return [(math.prod(1 / (1 + q) for q in qs), math.prod(q / (1 + q) for q in qs))]

    q0, qc, q1, qh = math.exp(-e0), math.exp(-ec), math.exp(-e1), math.exp(-eh)
    return Scenario(
        "spans without a radius (auto): noisy total, occupancy and histogram", epsilon, n, run,
        [(f"n_hat, the occupancy count of c and the count of c all >= {points}",
          lambda v: v[0] >= points and v[1] >= points and v[2] >= points)],
        {"correct": law(q0, qc, q1), "auto histogram noise scale x1/2": law(q0, qc * qc, q1 * q1),
         "auto occupancy at the histogram's share": law(q0, q1, q1),
         "auto total at the histogram's share": law(qh, qc, q1)},
        f"one record (1 point) in the corner cell: {points - 1} vs {points} points")


def all_scenarios() -> dict[str, Callable[[], Scenario]]:
    """Factories of every scenario, by key."""
    return {
        "dense": dense_histogram,
        "sparse": sparse_histogram,
        "cap": person_cap,
        "dbscan-dense": lambda: dbscan_spans_stage("dense"),
        "dbscan-sparse": lambda: dbscan_spans_stage("sparse"),
        "privthr": privthr_joint,
        "privthr-z": privthr_nonpositive,
        "privthr-em": privthr_em,
        "e2e-cap": end_to_end_person_cap,
        "series": series_record,
        "series-person": series_person,
        "e2e-heat": end_to_end_heat,
        "e2e-hotspots": end_to_end_hotspots,
        "auto": auto_spans,
    }


# ---------------------------------------------------------------------------
# injected breaks (each would make the mechanism leak about twice its ε or more)
# ---------------------------------------------------------------------------


@contextlib.contextmanager
def _patched(obj, name, value):
    old = getattr(obj, name)  # AttributeError if the code moved: the audit must be pointed at it again
    setattr(obj, name, value)
    try:
        yield
    finally:
        setattr(obj, name, old)


@contextlib.contextmanager
def _patched_everywhere(modules, name, make):
    """Patch ``name`` in each module that binds it (a ``from … import`` copies the binding)."""
    with contextlib.ExitStack() as stack:
        for m in modules:
            stack.enter_context(_patched(m, name, make(getattr(m, name))))
        yield


@contextlib.contextmanager
def _item(mapping, key, value):
    old = mapping[key]
    mapping[key] = value
    try:
        yield
    finally:
        mapping[key] = old


def _false_cells(h, ids):
    """Mask of the released cells of a sparse histogram that were empty in the data."""
    return ~np.isin(h.cell_id, ids)


def _drop_false_cells(keep_probability):
    orig = histogram.sparse_histogram
    coin = np.random.default_rng(12345)

    def sparse(grid, ids, counts, **kw):
        h = orig(grid, ids, counts, **kw)
        drop = _false_cells(h, ids) & (coin.random(h.cell_id.size) >= keep_probability(kw))
        return dataclasses.replace(h, cell_id=h.cell_id[~drop], count=h.count[~drop])
    return sparse


def _shift_false_cells(grid, ids, counts, _orig=None, **kw):
    h = _orig(grid, ids, counts, **kw)
    return dataclasses.replace(h, count=h.count + _false_cells(h, ids))


def _scale_epsilon(orig, factor, key="epsilon"):
    def f(*a, **kw):
        kw[key] = kw[key] * factor
        return orig(*a, **kw)
    return f


def _sensitivity_override(orig, **changes):
    def f(*a, **kw):
        out = dict(orig(*a, **kw))
        for key, fn in changes.items():
            out[key] = fn(out[key])
        return out
    return f


def _em_select_doubled(coefs, k, cand_norm, eps, du, rng, _orig=None):
    return _orig(coefs, k, cand_norm, 2 * eps, du, rng)


def _noisy_counts_doubled(c, universe, eps_counts, s, rng, _orig=None):
    return _orig(c, universe, 2 * eps_counts, s, rng)


def _contribution_without_k(person, max_points_per_person, sensitivity, _orig=None):
    s, cap = _orig(person, max_points_per_person, sensitivity)
    return (1 if cap is not None else s), cap


def _no_cap(person, keys, k, group=None):
    return np.ones(np.asarray(keys).size, dtype=bool)


def _memo_noise_bound(**kw):
    return _NOISE_BOUND(**kw)


_NOISE_BOUND = functools.lru_cache(maxsize=64)(dbscan.noise_bound)


#: Pipeline modules that bind the contribution bound (the one release pipeline and the series: both take the
#: bound from pipeline/_common.py's contribution()).
_PIPELINE_MODULES = (dpgeo.pipeline._common,)
#: Modules that bind the count step and the sensitivity table (patched wherever bound).
_COUNT_MODULES = (m_privqt, m_privthr, m_privthr_em)
_SENS_MODULES = (m_transform, m_privthr, m_privthr_em)


def breaks() -> dict[str, Callable[[], contextlib.AbstractContextManager]]:
    """Every injected break, by the name the scenarios' laws use."""
    return {
        "dense noise scale x1/2":
            lambda: _patched(histogram, "dense_histogram", _scale_epsilon(histogram.dense_histogram, 2)),
        "sparse noise scale x1/2":
            lambda: _patched(histogram, "sparse_histogram", _scale_epsilon(histogram.sparse_histogram, 2)),
        "false cells released at q·Pr[Z >= θ]":
            lambda: _patched(histogram, "sparse_histogram",
                             _drop_false_cells(lambda kw: math.exp(-kw["epsilon"] / kw.get("sensitivity", 1)))),
        "false-cell values from θ+1":
            lambda: _patched(histogram, "sparse_histogram",
                             functools.partial(_shift_false_cells, _orig=histogram.sparse_histogram)),
        "cap not applied": lambda: _patched(reservoir, "_smallest_keys", _no_cap),
        "histogram noise not scaled by K":
            lambda: _patched(histogram, "dense_histogram", _sensitivity_one(histogram.dense_histogram)),
        "count noise scale x1/2":
            lambda: _patched_everywhere(_COUNT_MODULES, "_noisy_counts",
                                        lambda o: functools.partial(_noisy_counts_doubled, _orig=o)),
        "|Z|′ sensitivity 1 (the paper's)":
            lambda: _patched_everywhere(_SENS_MODULES, "approximation_sensitivity",
                                        lambda o: _sensitivity_override(o, nonpositive_count=lambda v: 1)),
        "|Z|′ noise scale x1/2":
            lambda: _patched_everywhere(_SENS_MODULES, "approximation_sensitivity",
                                        lambda o: _sensitivity_override(o, nonpositive_count=lambda v: v / 2)),
        "PrivTHR split swapped": lambda: _item(m_checks._DEFAULT_SPLIT, "privthr", 1 - m_checks._DEFAULT_SPLIT["privthr"]),
        "EM without the factor 2":
            lambda: _patched(m_privthr_em, "_em_select",
                             functools.partial(_em_select_doubled, _orig=m_privthr_em._em_select)),
        "EM quality sensitivity 1 (record size ignored)":
            lambda: _patched_everywhere(_SENS_MODULES, "approximation_sensitivity",
                                        lambda o: _sensitivity_override(o, em_quality=lambda v: 1)),
        "PrivTHR_EM split swapped":
            lambda: _item(m_checks._DEFAULT_SPLIT, "privthr-em", 1 - m_checks._DEFAULT_SPLIT["privthr-em"]),
        "auto histogram noise scale x1/2":
            lambda: _patched(m_auto, "dense_histogram", _scale_epsilon(m_auto.dense_histogram, 2)),
        "auto total at the histogram's share":
            lambda: _patched(m_auto, "release_total", _total_at_histogram_share(m_auto.release_total)),
        "auto occupancy at the histogram's share":
            lambda: _patched(m_auto, "concentration_budget", _occupancy_at_histogram_share(m_auto.concentration_budget)),
        "pipeline sensitivity not scaled by K":
            lambda: _patched_everywhere(_PIPELINE_MODULES, "_contribution",
                                        lambda o: functools.partial(_contribution_without_k, _orig=o)),
        "series periods overlap (a record in two releases)":
            lambda: _patched(CellCounts, "by_period", _overlapping_periods(CellCounts.by_period)),
        "series cap counted per period":
            lambda: _patched(dpgeo.pipeline.run, "count_points",
                             functools.partial(_cap_per_period, _orig=dpgeo.pipeline.run.count_points)),
        # the count release of the pipeline (heat layers, hot spots, spans) draws from the histogram it binds
        "release noise scale x1/2":
            lambda: _patched_everywhere((dpgeo.declarations.spans,), "dense_histogram",
                                        lambda o: _scale_epsilon(o, 2)),
    }


def _overlapping_periods(orig):
    """Each period's counts plus the period before's: windows that overlap, so a record is in two releases."""
    def by_period(self):
        parts = orig(self)
        out = [parts[0]]
        for prev, cur in zip(parts, parts[1:]):
            ids, counts = sum_by_id(np.r_[prev.cell_id, cur.cell_id], np.r_[prev.count, cur.count])
            out.append(dataclasses.replace(cur, cell_id=ids, count=counts))
        return out
    return by_period


def _cap_per_period(*a, _orig=None, **kw):
    kw["cap_per_period"] = kw.get("cap") is not None and kw.get("time") is not None  # a series' counting only
    return _orig(*a, **kw)
def _total_at_histogram_share(orig):
    def f(*a, **kw):
        kw["epsilon"] = kw["epsilon"] * (1.0 - m_auto.TOTAL_SHARE) / m_auto.TOTAL_SHARE
        return orig(*a, **kw)
    return f


def _occupancy_at_histogram_share(orig):
    def f(*a, **kw):  # the occupancy histogram drawn with the final histogram's ε (its share not taken out)
        e_c, e_1 = orig(*a, **kw)
        return e_1, e_1
    return f


def _sensitivity_one(orig):
    def f(*a, **kw):
        kw["sensitivity"] = 1.0
        return orig(*a, **kw)
    return f


def memoised_noise_bound():
    """Memoise Γ in the pipeline (a function of public parameters only) for fast end-to-end runs."""
    return _patched(dpgeo.declarations.spans, "noise_bound", _memo_noise_bound)
