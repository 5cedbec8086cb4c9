"""Tests of dpgeo.evaluation: every measure on hand-made cases with known answers,
reference brute-force implementations on small random cases, and invariances."""

from __future__ import annotations

import itertools
import math
import subprocess
import sys

import numpy as np
import pytest
import shapely
from hypothesis import given, settings
from hypothesis import strategies as st
from shapely.geometry import MultiPolygon, Point, box

from dpgeo import evaluation as ev
from dpgeo.errors import ParameterError

FAST = settings(max_examples=60, deadline=None)


# ---------------------------------------------------------------------------
# strategies and reference implementations


def labels_strategy(min_size=1, max_size=25, max_label=5):
    return st.lists(st.integers(0, max_label), min_size=min_size, max_size=max_size).map(
        lambda v: np.array(v, dtype=np.int64)
    )


@st.composite
def label_pairs(draw, min_size=1, max_size=25, max_label=5):
    n = draw(st.integers(min_size, max_size))
    a = draw(st.lists(st.integers(0, max_label), min_size=n, max_size=n))
    b = draw(st.lists(st.integers(0, max_label), min_size=n, max_size=n))
    return np.array(a, dtype=np.int64), np.array(b, dtype=np.int64)


def relabel(labels, seed, keep_zero=True):
    """Apply a random bijection to the ids (0 stays 0 if keep_zero)."""
    rng = np.random.default_rng(seed)
    ids = np.unique(labels)
    if keep_zero:
        ids = ids[ids != 0]
    new = rng.permutation(np.arange(100, 100 + ids.size) * 7)  # disjoint from old ids
    mapping = dict(zip(ids.tolist(), new.tolist()))
    return np.array([mapping.get(v, v) for v in labels.tolist()], dtype=np.int64)


def brute_dsg_c(true, priv):
    """DSG_C straight from the definition: enumerate every matching."""
    true = np.asarray(true).ravel()
    priv = np.asarray(priv).ravel()
    tc = [set(np.flatnonzero(true == c).tolist()) for c in np.unique(true[true > 0])]
    pc = [set(np.flatnonzero(priv == c).tolist()) for c in np.unique(priv[priv > 0])]
    n_true = sum(len(c) for c in tc)
    big, small = (tc, pc) if len(tc) >= len(pc) else (pc, tc)
    best = math.inf
    # each cluster of the smaller side matched to a distinct one of the larger side
    for chosen in itertools.permutations(range(len(big)), len(small)):
        cost = sum(max(len(big[b] - small[s]), len(small[s] - big[b])) for s, b in enumerate(chosen))
        cost += sum(len(big[b]) for b in range(len(big)) if b not in chosen)
        best = min(best, cost)
    return best / n_true


def brute_ocm(a, b):
    ca, cb = list(np.unique(a)), list(np.unique(b))
    big, small, swap = (ca, cb, False) if len(ca) >= len(cb) else (cb, ca, True)
    best = 0
    for chosen in itertools.permutations(big, len(small)):
        ct = 0
        for s, g in zip(small, chosen):
            lt, lp = (s, g) if swap else (g, s)
            ct += int(np.sum((a == lt) & (b == lp)))
        best = max(best, ct)
    return 1 - best / a.size


def brute_two_ce(a, b):
    n = a.size
    bad = sum(
        (a[i] == a[j]) != (b[i] == b[j]) for i in range(n) for j in range(i + 1, n)
    )
    return bad / (n * (n - 1) / 2)


def brute_f_set_matching(a, b):
    total = 0.0
    for c in np.unique(a):
        in_c = a == c
        best = 0.0
        for k in np.unique(b):
            in_k = b == k
            nij = np.sum(in_c & in_k)
            if nij:
                p, r = nij / in_k.sum(), nij / in_c.sum()
                best = max(best, 2 * p * r / (p + r))
        total += in_c.sum() / a.size * best
    return total


# ---------------------------------------------------------------------------
# labelling by cells


def test_cells_orientation_and_half_open_edges():
    cells = np.array([[1, 2, 3],
                      [4, 5, 6]])  # ny = 2 rows (y), nx = 3 columns (x)
    x = np.array([100.5, 110.0, 129.99, 100.0, 125.0, 130.0, 99.99, 105.0, np.nan, 105.0])
    y = np.array([200.5, 200.0, 219.99, 210.0, 215.0, 205.0, 205.0, 220.0, 205.0, np.inf])
    got = ev.label_points_by_cells(x, y, origin_x=100.0, origin_y=200.0, cell_m=10.0, cell_labels=cells)
    # (i, j) = (floor((y-200)/10), floor((x-100)/10));
    # x = 130 and y = 220 are the grid's upper edges (outside), x < 100 is outside
    np.testing.assert_array_equal(got, [1, 2, 6, 4, 6, 0, 0, 0, 0, 0])
    assert got.dtype == np.int64


def test_cells_zero_cells_are_noise_and_empty_input():
    cells = np.array([[0, 7]])
    got = ev.label_points_by_cells([1.0, 3.0], [1.0, 1.0], origin_x=0, origin_y=0, cell_m=2.0,
                                   cell_labels=cells)
    np.testing.assert_array_equal(got, [0, 7])
    empty = ev.label_points_by_cells([], [], origin_x=0, origin_y=0, cell_m=2.0, cell_labels=cells)
    assert empty.shape == (0,)


def test_cells_far_points_do_not_overflow():
    cells = np.ones((2, 2), dtype=np.int32)
    got = ev.label_points_by_cells([1e300, -1e300, 1.0], [1.0, 1.0, 1.0], origin_x=0.0,
                                   origin_y=0.0, cell_m=1.0, cell_labels=cells)
    np.testing.assert_array_equal(got, [0, 0, 1])


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(cell_m=0.0), "cell_m"),
        (dict(cell_m=float("nan")), "cell_m"),
        (dict(origin_x=float("inf")), "origin_x"),
        (dict(cell_labels=np.array([1, 2])), "2-D"),
        (dict(cell_labels=np.array([[1, -1]])), "non-negative"),
        (dict(cell_labels=np.array([[0.5, 1.0]])), "integer"),
    ],
)
def test_cells_validation(kwargs, match):
    args = dict(origin_x=0.0, origin_y=0.0, cell_m=1.0, cell_labels=np.array([[1, 2]]))
    args.update(kwargs)
    with pytest.raises(ParameterError, match=match):
        ev.label_points_by_cells([0.5], [0.5], **args)


def test_cells_xy_length_mismatch():
    with pytest.raises(ParameterError, match="same length"):
        ev.label_points_by_cells([0.5, 1], [0.5], origin_x=0.0, origin_y=0.0, cell_m=1.0,
                                 cell_labels=np.array([[1]]))


# ---------------------------------------------------------------------------
# labelling by polygons


def test_polygons_overlap_first_wins_and_boundary():
    polys = [box(0, 0, 2, 2), box(1, 0, 3, 2), None,
             MultiPolygon([box(10, 10, 11, 11), box(12, 10, 13, 11)])]
    x = [0.5, 1.5, 2.5, 12.5, 50.0, 2.0, np.nan]
    y = [0.5, 1.0, 1.0, 10.5, 50.0, 1.0, 1.0]
    got = ev.label_points_by_polygons(x, y, polys, [3, 9, 4, 8])
    # (1.5, 1) lies in both boxes -> the first; (2, 1) lies on box 0's boundary and inside box 1
    np.testing.assert_array_equal(got, [3, 3, 9, 8, 0, 3, 0])
    interior = ev.label_points_by_polygons(x, y, polys, [3, 9, 4, 8], include_boundary=False)
    np.testing.assert_array_equal(interior, [3, 3, 9, 8, 0, 9, 0])
    on_edge_only = ev.label_points_by_polygons([0.0], [0.0], [box(0, 0, 1, 1)], include_boundary=False)
    np.testing.assert_array_equal(on_edge_only, [0])
    # the caller's geometries are not left prepared
    assert not any(shapely.is_prepared(g) for g in polys if g is not None)
    already = box(0, 0, 1, 1)
    shapely.prepare(already)
    ev.label_points_by_polygons([0.5], [0.5], [already])
    assert shapely.is_prepared(already)


def test_polygons_default_ids_and_geodataframe():
    gpd = pytest.importorskip("geopandas")
    polys = [box(0, 0, 1, 1), box(5, 5, 6, 6)]
    np.testing.assert_array_equal(
        ev.label_points_by_polygons([0.5, 5.5, 3.0], [0.5, 5.5, 3.0], polys), [1, 2, 0]
    )
    gdf = gpd.GeoDataFrame({"cluster_id": [17, 4]}, geometry=polys, crs="EPSG:32615")
    np.testing.assert_array_equal(
        ev.label_points_by_polygons([0.5, 5.5, 3.0], [0.5, 5.5, 3.0], gdf), [17, 4, 0]
    )
    np.testing.assert_array_equal(
        ev.label_points_by_polygons([0.5, 5.5], [0.5, 5.5], gdf.geometry, [2, 3]), [2, 3]
    )
    assert ev.label_points_by_polygons([0.5], [0.5], []).tolist() == [0]


@pytest.mark.parametrize(
    "polys, ids, match",
    [
        ([box(0, 0, 1, 1)], [0], "positive"),
        ([box(0, 0, 1, 1)], [1, 2], "one id per polygon"),
        ([Point(0, 0)], None, "Polygon or MultiPolygon"),
        (box(0, 0, 1, 1), None, "sequence"),
    ],
)
def test_polygons_validation(polys, ids, match):
    with pytest.raises(ParameterError, match=match):
        ev.label_points_by_polygons([0.5], [0.5], polys, ids)


@st.composite
def cell_grids(draw):
    ny = draw(st.integers(1, 5))
    nx = draw(st.integers(1, 5))
    vals = draw(st.lists(st.integers(0, 3), min_size=nx * ny, max_size=nx * ny))
    return np.array(vals, dtype=np.int64).reshape(ny, nx)


@FAST
@given(cell_grids(), st.integers(0, 2**31 - 1))
def test_polygons_agree_with_cells(cells, seed):
    """A layer made of the cells' unions labels points as the cells do."""
    ox, oy, w = 500.0, -300.0, 25.0
    ids = [c for c in np.unique(cells) if c > 0]
    polys = []
    for c in ids:
        ii, jj = np.nonzero(cells == c)
        polys.append(shapely.union_all([box(ox + j * w, oy + i * w, ox + (j + 1) * w, oy + (i + 1) * w)
                                        for i, j in zip(ii, jj)]))
    rng = np.random.default_rng(seed)
    ny, nx = cells.shape
    # continuous uniform points (never exactly on a cell edge), some outside the grid
    x = rng.uniform(ox - w, ox + (nx + 1) * w, 300)
    y = rng.uniform(oy - w, oy + (ny + 1) * w, 300)
    by_cells = ev.label_points_by_cells(x, y, origin_x=ox, origin_y=oy, cell_m=w, cell_labels=cells)
    by_polys = ev.label_points_by_polygons(x, y, polys, ids)
    np.testing.assert_array_equal(by_cells, by_polys)


# ---------------------------------------------------------------------------
# ARI and AMI


def test_ari_hand_case():
    # contingency [[2, 1, 0], [0, 1, 2]]: sum C(n_ij, 2) = 2, rows 6, columns 3, C(6, 2) = 15
    # ARI = (2 - 6*3/15) / ((6 + 3)/2 - 6*3/15) = 0.8 / 3.3
    true = [1, 1, 1, 2, 2, 2]
    pred = [1, 1, 2, 2, 3, 3]
    assert ev.adjusted_rand_index(true, pred) == pytest.approx(0.8 / 3.3)


def test_ari_noise_modes():
    true = [1, 1, 0, 0]
    pred = [1, 1, 2, 2]
    # noise as one cluster: the two partitions are identical
    assert ev.adjusted_rand_index(true, pred) == pytest.approx(1.0)
    # noise as singletons: {01}{2}{3} vs {01}{23}: index 1, expected 1*2/6, max 3/2
    expected = (1 - 1 / 3) / (1.5 - 1 / 3)
    assert ev.adjusted_rand_index(true, pred, noise="singletons") == pytest.approx(expected)
    with pytest.raises(ParameterError, match="noise"):
        ev.adjusted_rand_index(true, pred, noise="ignore")


def test_ami_matches_sklearn_and_noise_modes():
    from sklearn.metrics import adjusted_mutual_info_score

    rng = np.random.default_rng(3)
    a = rng.integers(0, 4, 80)
    b = np.where(rng.random(80) < 0.7, a, rng.integers(0, 4, 80))
    assert ev.adjusted_mutual_info(a, b) == pytest.approx(adjusted_mutual_info_score(a, b))
    assert ev.adjusted_mutual_info(a, b, average_method="max") == pytest.approx(
        adjusted_mutual_info_score(a, b, average_method="max"))
    # singletons: each noise point gets a fresh id of its own
    a_s = a.copy()
    a_s[a == 0] = 1000 + np.arange(np.sum(a == 0))
    b_s = b.copy()
    b_s[b == 0] = 5000 + np.arange(np.sum(b == 0))
    assert ev.adjusted_mutual_info(a, b, noise="singletons") == pytest.approx(
        adjusted_mutual_info_score(a_s, b_s))
    with pytest.raises(ParameterError, match="average_method"):
        ev.adjusted_mutual_info(a, b, average_method="mean")


@FAST
@given(labels_strategy(min_size=2), st.integers(0, 1000))
def test_ari_ami_one_for_relabelled_copy(labels, seed):
    other = relabel(labels, seed)
    assert ev.adjusted_rand_index(labels, other) == pytest.approx(1.0)
    assert ev.adjusted_mutual_info(labels, other) == pytest.approx(1.0)


@FAST
@given(label_pairs(min_size=2), st.integers(0, 1000), st.sampled_from(["cluster", "singletons"]))
def test_ari_ami_permutation_invariant(pair, seed, noise):
    a, b = pair
    ra, rb = relabel(a, seed), relabel(b, seed + 1)
    assert ev.adjusted_rand_index(ra, rb, noise=noise) == pytest.approx(
        ev.adjusted_rand_index(a, b, noise=noise))
    assert ev.adjusted_mutual_info(ra, rb, noise=noise) == pytest.approx(
        ev.adjusted_mutual_info(a, b, noise=noise), abs=1e-9)


@pytest.mark.parametrize(
    "a, b, match",
    [
        ([1, 2], [1], "same points"),
        ([], [], "empty"),
        ([1, -1], [1, 1], "non-negative"),
        ([True, False], [1, 1], "booleans"),
        (["a", "b"], [1, 1], "integer"),
    ],
)
def test_label_validation(a, b, match):
    with pytest.raises(ParameterError, match=match):
        ev.adjusted_rand_index(a, b)


def test_sklearn_is_lazy_and_missing_sklearn_is_explained(monkeypatch):
    code = "import sys, dpgeo.evaluation; print('sklearn' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
    monkeypatch.setitem(sys.modules, "sklearn", None)  # makes `import sklearn` fail
    with pytest.raises(ImportError, match="pip install scikit-learn"):
        ev.adjusted_rand_index([1, 2], [1, 2])
    # the measures that do not need it still work
    assert ev.f_measure([1, 2], [1, 2]) == 1.0


# ---------------------------------------------------------------------------
# F-measure


def test_f_measure_set_matching_hand_cases():
    # class 1 (3 points) best F = 2*2/(3+2) = 0.8, class 2 (1 point) best F = 2*1/(1+2)
    assert ev.f_measure([1, 1, 1, 2], [1, 1, 2, 2]) == pytest.approx(0.75 * 0.8 + 0.25 * 2 / 3)
    # not symmetric: the other way round each true class has 2 points
    assert ev.f_measure([1, 1, 2, 2], [1, 1, 1, 2]) == pytest.approx(0.5 * 0.8 + 0.5 * 2 / 3)
    # one true class spread over many found clusters (the many-to-one case of the paper)
    assert ev.f_measure([1] * 4, [1, 2, 3, 4]) == pytest.approx(2 * 1 / (4 + 1))
    # the reverse: many true classes all mapped to one found cluster
    assert ev.f_measure([1, 2, 3, 4], [1] * 4) == pytest.approx(2 * 1 / (1 + 4))


def test_f_measure_pair_counting_hand_cases():
    # same pairs as the ARI case: 2 common, 6 true, 3 found: P = 2/3, R = 1/3, F = 4/9
    got = ev.f_measure([1, 1, 1, 2, 2, 2], [1, 1, 2, 2, 3, 3], method="pair_counting")
    assert got == pytest.approx(4 / 9)
    assert ev.f_measure([1, 2, 3], [4, 5, 6], method="pair_counting") == 1.0
    assert ev.f_measure([1, 1, 3], [4, 5, 6], method="pair_counting") == 0.0
    with pytest.raises(ParameterError, match="method"):
        ev.f_measure([1], [1], method="bcubed")


def test_f_measure_noise_modes():
    true = [1, 1, 0, 0]
    pred = [1, 1, 0, 2]
    # noise as a cluster: true class 0 {2,3} best F = 2*1/(2+1)
    assert ev.f_measure(true, pred) == pytest.approx(0.5 * 1 + 0.5 * 2 / 3)
    # noise as singletons: both noise points are perfectly matched singletons
    assert ev.f_measure(true, pred, noise="singletons") == pytest.approx(1.0)


@FAST
@given(label_pairs())
def test_f_measure_matches_reference(pair):
    a, b = pair
    assert ev.f_measure(a, b) == pytest.approx(brute_f_set_matching(a, b))
    from sklearn.metrics import pair_confusion_matrix

    (_, fp), (fn, tp) = pair_confusion_matrix(a, b) // 2
    if tp + fp + fn == 0:
        expected = 1.0
    else:
        expected = 2 * tp / (2 * tp + fp + fn)
    assert ev.f_measure(a, b, method="pair_counting") == pytest.approx(expected)


@FAST
@given(label_pairs(), st.integers(0, 1000), st.sampled_from(["set_matching", "pair_counting"]))
def test_f_measure_invariance_and_identity(pair, seed, method):
    a, b = pair
    assert ev.f_measure(relabel(a, seed), relabel(b, seed + 7), method=method) == pytest.approx(
        ev.f_measure(a, b, method=method))
    assert ev.f_measure(a, relabel(a, seed), method=method) == pytest.approx(1.0)
    assert 0.0 <= ev.f_measure(a, b, method=method) <= 1.0 + 1e-12


# ---------------------------------------------------------------------------
# DSG_C


def test_dsg_c_paper_worked_example():
    # cells g1 .. g9 at positions 1 .. 9; C_i = {g1, g3, g5}, C_j = {g1, g5, g7, g9}
    ci = np.zeros(10, dtype=int)
    ci[[1, 3, 5]] = 1
    cj = np.zeros(10, dtype=int)
    cj[[1, 5, 7, 9]] = 4
    # distance max(|{g3}|, |{g7, g9}|) = 2, divided by the number of true cells
    assert ev.dsg_c(ci, cj) == pytest.approx(2 / 3)
    assert ev.dsg_c(cj, ci) == pytest.approx(2 / 4)
    assert brute_dsg_c(ci, cj) == pytest.approx(2 / 3)


def test_dsg_c_unmatched_true_cluster_costs_its_cells():
    # true A = {0,1,2,3}, B = {4,5}; private P = {0,1,2}
    # A-P: max(1, 0) = 1, plus unmatched B: 2 -> 3;  B-P: max(2, 3) = 3 plus A: 4 -> 7
    true = [1, 1, 1, 1, 2, 2, 0, 0]
    priv = [5, 5, 5, 0, 0, 0, 0, 0]
    assert ev.dsg_c(true, priv) == pytest.approx(3 / 6)


def test_dsg_c_more_private_clusters_than_true():
    # true A = {0..3}; private P1 = A, P2 = {8}: A-P1 costs 0, P2 unmatched costs 1
    true = [1, 1, 1, 1, 0, 0, 0, 0, 0]
    priv = [2, 2, 2, 2, 0, 0, 0, 0, 3]
    assert ev.dsg_c(true, priv) == pytest.approx(1 / 4)


def test_dsg_c_merge_and_split():
    # two true clusters of 3 cells merged into one private cluster of 7 cells
    true = np.array([[1, 1, 1, 0, 2, 2, 2]])
    merged = np.array([[1, 1, 1, 1, 1, 1, 1]])
    # best: match either true cluster to the merged one: max(0, 4) = 4, plus 3 unmatched
    assert ev.dsg_c(true, merged) == pytest.approx(7 / 6)
    # a true cluster split in two private ones (s > t)
    assert ev.dsg_c(merged, true) == pytest.approx((4 + 3) / 7)


def test_dsg_c_edge_cases():
    grid = np.array([[0, 1, 1], [2, 0, 2]])
    assert ev.dsg_c(grid, grid) == 0.0
    assert ev.dsg_c(grid, np.where(grid == 1, 9, np.where(grid == 2, 4, 0))) == 0.0
    assert ev.dsg_c(grid, np.zeros_like(grid)) == 1.0
    with pytest.raises(ParameterError, match="no significant cell"):
        ev.dsg_c(np.zeros_like(grid), grid)
    with pytest.raises(ParameterError, match="same grid"):
        ev.dsg_c(grid, grid.ravel())


@st.composite
def cell_label_pairs(draw):
    n = draw(st.integers(1, 14))
    a = draw(st.lists(st.integers(0, 4), min_size=n, max_size=n).filter(lambda v: any(v)))
    b = draw(st.lists(st.integers(0, 4), min_size=n, max_size=n))
    return np.array(a), np.array(b)


@FAST
@given(cell_label_pairs(), st.integers(0, 1000))
def test_dsg_c_matches_definition_and_is_invariant(pair, seed):
    a, b = pair
    got = ev.dsg_c(a, b)
    assert got == pytest.approx(brute_dsg_c(a, b))
    assert ev.dsg_c(relabel(a, seed), relabel(b, seed + 3)) == pytest.approx(got)
    assert ev.dsg_c(a, relabel(a, seed)) == 0.0
    assert got >= 0.0


# ---------------------------------------------------------------------------
# OCM and 2CE


def test_ocm_two_ce_hand_cases():
    # table [[2, 0], [1, 1]]: best matching keeps 2 + 1 of 4 samples
    assert ev.ocm([1, 1, 2, 2], [5, 5, 5, 6]) == pytest.approx(0.25)
    # pairs (0,2), (1,2), (2,3) are classified inconsistently: 3 of 6
    assert ev.two_ce([1, 1, 2, 2], [5, 5, 5, 6]) == pytest.approx(0.5)
    # more private classes than true ones (c1 < c2): only one class can match
    assert ev.ocm([1, 1, 1, 1], [1, 2, 3, 3]) == pytest.approx(0.5)
    # N test samples all in one true class, k of them moved to another class by the
    # private classifier: OCM = k / N and 2CE = k (N - k) / C(N, 2)
    n, k = 50, 7
    true = np.ones(n, dtype=int)
    priv = np.ones(n, dtype=int)
    priv[:k] = 2
    assert ev.ocm(true, priv) == pytest.approx(k / n)
    assert ev.two_ce(true, priv) == pytest.approx(k * (n - k) / (n * (n - 1) / 2))


def test_two_ce_needs_pairs():
    with pytest.raises(ParameterError, match="at least 2"):
        ev.two_ce([1], [1])
    assert ev.ocm([3], [4]) == 0.0


@FAST
@given(label_pairs(min_size=2, max_size=18, max_label=4), st.integers(0, 1000))
def test_ocm_two_ce_match_definitions(pair, seed):
    a, b = pair
    assert ev.ocm(a, b) == pytest.approx(brute_ocm(a, b))
    assert ev.two_ce(a, b) == pytest.approx(brute_two_ce(a, b))
    # class ids are arbitrary, noise included
    ra, rb = relabel(a, seed, keep_zero=False), relabel(b, seed + 1, keep_zero=False)
    assert ev.ocm(ra, rb) == pytest.approx(ev.ocm(a, b))
    assert ev.two_ce(ra, rb) == pytest.approx(ev.two_ce(a, b))
    assert ev.two_ce(b, a) == pytest.approx(ev.two_ce(a, b))
    assert ev.ocm(a, ra) == 0.0 and ev.two_ce(a, ra) == 0.0


def test_two_ce_is_one_minus_rand_index_on_large_input():
    from sklearn.metrics import rand_score

    rng = np.random.default_rng(11)
    a = rng.integers(0, 6, 20000)
    b = np.where(rng.random(20000) < 0.8, a, rng.integers(0, 6, 20000))
    assert ev.two_ce(a, b) == pytest.approx(1 - rand_score(a, b), abs=1e-12)


# ---------------------------------------------------------------------------
# k'


def test_kprime_error_paper_numbers():
    # DS2 of the paper, k = 144 at epsilon = 1 (section 7.2): PrivTHR 141.0 (2.1 %),
    # PrivTHR_EM 142.8 (0.8 %), Baseline 284.0 (97.2 %), PrivQT 249.2 (73.1 %)
    assert ev.kprime_error(144, 141.0) == pytest.approx(3 / 144)
    np.testing.assert_allclose(
        np.round(ev.kprime_error(144, [141.0, 142.8, 284.0, 249.2]) * 100, 1), [2.1, 0.8, 97.2, 73.1]
    )
    assert isinstance(ev.kprime_error(10, 10), float)
    with pytest.raises(ParameterError, match="k_true"):
        ev.kprime_error(0, 3)
    with pytest.raises(ParameterError, match="k_found"):
        ev.kprime_error(3, -1)


# ---------------------------------------------------------------------------
# clustering first, then classification


def test_split_train_test():
    train, test = ev.split_train_test(1000, seed=5)
    assert train.size == 900 and test.size == 100
    assert np.intersect1d(train, test).size == 0
    np.testing.assert_array_equal(np.union1d(train, test), np.arange(1000))
    again = ev.split_train_test(1000, seed=5)
    np.testing.assert_array_equal(again[1], test)
    assert not np.array_equal(ev.split_train_test(1000, seed=6)[1], test)
    assert [p.size for p in ev.split_train_test(3, test_fraction=0.01)] == [2, 1]
    for kwargs, match in [(dict(n_points=1), "n_points"),
                          (dict(n_points=10, test_fraction=1.0), "test_fraction"),
                          (dict(n_points=10, seed=-1), "seed")]:
        with pytest.raises(ParameterError, match=match):
            ev.split_train_test(**kwargs)


def _two_blobs(n=400, seed=0):
    """Points in two vertical bands with a gap (x in [0, 40] or [60, 100])."""
    rng = np.random.default_rng(seed)
    x = np.where(rng.random(n) < 0.5, rng.uniform(0, 40, n), rng.uniform(60, 100, n))
    y = rng.uniform(0, 100, n)
    return x, y, np.where(x < 50, 1, 2)


def test_cluster_then_classify_noise_modes():
    x, y, lab = _two_blobs()
    lab = lab.copy()
    lab[y > 80] = 0  # a noise band at the top
    tx, ty = np.array([20.0, 80.0, 20.0, 80.0]), np.array([10.0, 10.0, 90.0, 90.0])
    np.testing.assert_array_equal(ev.cluster_then_classify(x, y, lab, tx, ty), [1, 2, 0, 0])
    dropped = ev.cluster_then_classify(x, y, lab, tx, ty, noise="drop")
    np.testing.assert_array_equal(dropped, [1, 2, 1, 2])
    none = ev.cluster_then_classify(x, y, np.zeros_like(lab), tx, ty, noise="drop")
    np.testing.assert_array_equal(none, [0, 0, 0, 0])
    with pytest.raises(ParameterError, match="noise"):
        ev.cluster_then_classify(x, y, lab, tx, ty, noise="keep")
    with pytest.raises(ParameterError, match="one label per training point"):
        ev.cluster_then_classify(x, y, lab[:-1], tx, ty)
    with pytest.raises(ParameterError, match="finite"):
        ev.cluster_then_classify(x, y, lab, [np.nan], [1.0])
    with pytest.raises(ParameterError, match="max_depth"):
        ev.cluster_then_classify(x, y, lab, tx, ty, max_depth=0)


def test_classification_dissimilarity_known_answer():
    x, y, true = _two_blobs(n=600, seed=2)
    # relabelled copy: the two classifiers agree exactly
    res = ev.classification_dissimilarity(x, y, true, 3 - true, seed=4)
    assert res == {"ocm": 0.0, "two_ce": 0.0, "n_train": 540, "n_test": 60}
    # a private result that merged the two clusters: the private tree predicts one class
    res = ev.classification_dissimilarity(x, y, true, np.ones_like(true), seed=4)
    _, test = ev.split_train_test(600, seed=4)
    n1 = int(np.sum(true[test] == 1))
    n2 = test.size - n1
    assert res["ocm"] == pytest.approx(min(n1, n2) / test.size)
    assert res["two_ce"] == pytest.approx(n1 * n2 / (test.size * (test.size - 1) / 2))


def test_classification_dissimilarity_with_given_split():
    x, y, true = _two_blobs(n=300, seed=3)
    split = ev.split_train_test(300, test_fraction=0.2, seed=9)
    res = ev.classification_dissimilarity(x, y, true, true, split=split)
    assert res["n_test"] == 60 and res["ocm"] == 0.0
    with pytest.raises(ParameterError, match="split indices"):
        ev.classification_dissimilarity(x, y, true, true, split=(np.arange(10), np.array([5, 300])))
    with pytest.raises(ParameterError, match="2 test points"):
        ev.classification_dissimilarity(x, y, true, true, split=(np.arange(10), np.array([11])))
    with pytest.raises(ParameterError, match="one label per point"):
        ev.classification_dissimilarity(x[:-1], y[:-1], true, true)
