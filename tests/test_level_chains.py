"""The corridor rule: chosen clusters that lie end to end along a line are one cluster (level_chains)."""

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpgeo.domain import StudyArea
from dpgeo.grid import Grid
from dpgeo.mechanisms.auto import auto_spans_cells
from dpgeo.mechanisms.level_chains import chain_merges, renumber_groups
from dpgeo.mechanisms.level_tree import adjacent_pairs
from dpgeo.mechanisms.resolution import fine_grid
from dpgeo.noise import NoiseSource

CRS = "EPSG:32615"


def _grid(nx, ny):
    return Grid(StudyArea.from_bbox((0, 0, 10 * nx, 10 * ny), CRS, working_crs=CRS), 10.0)


def _raster(rows):
    """Cells and labels from strings of digits (0 or '.': no cluster), top row first."""
    ny, nx = len(rows), len(rows[0])
    lab = np.array([[0 if ch == "." else int(ch) for ch in r] for r in rows[::-1]]).ravel()
    ids = np.flatnonzero(lab > 0)
    return _grid(nx, ny), ids, lab[ids]


def _merge(rows, value=None, **kw):
    g, ids, lab = _raster(rows)
    return chain_merges(g, ids, lab, np.ones(ids.size, bool), value, **kw).tolist()


def test_bars_end_to_end_are_one_corridor():
    assert _merge(["..........",
                   "1111122222",
                   ".........."]) == [0, 1, 1]


def test_bars_side_by_side_stay_two():
    assert _merge(["11111111",
                   "22222222"]) == [0, 1, 2]


def test_round_places_in_a_row_stay_apart():
    """Squares in a line are as long together as a road, but each is as wide as it is long."""
    assert _merge(["1122334455",
                   "1122334455"]) == [0, 1, 2, 3, 4, 5]


def test_a_bar_ending_at_a_round_place_stays_apart():
    assert _merge(["....222",
                   "1111222",
                   "....222"]) == [0, 1, 2]


def test_a_deep_gap_keeps_a_corridor_in_two():
    """The two bars meet where the density is a tenth of their peaks: a road cut by a deep dip."""
    g, ids, lab = _raster(["1111122222"])
    value = np.array([90, 100, 95, 90, 10, 10, 90, 95, 100, 90], float)
    assert chain_merges(g, ids, lab, np.ones(10, bool), value).tolist() == [0, 1, 2]
    value[4:6] = 60  # a shallow dip: one corridor
    assert chain_merges(g, ids, lab, np.ones(10, bool), value).tolist() == [0, 1, 1]


def test_a_hot_spot_at_a_crossing_joins_the_corridor():
    """Two pieces of a street meet a round hot spot at a crossing between them: the three are one cluster;
    a cross street's piece leaving the hot spot sideways stays its own."""
    assert _merge(["......4.......",
                   "......4.......",
                   ".....333......",
                   "11111333222222",
                   ".....333......"]) == [0, 1, 1, 1, 2]


def test_two_pieces_between_join_too():
    assert _merge([".....3344.......",
                   "1111133442222222",
                   ".....3344......."]) == [0, 1, 1, 1, 1]


def test_renumbered_in_the_order_of_first_labels():
    assert renumber_groups(np.array([0, 5, 5, 3, 9, 3])).tolist() == [0, 1, 1, 2, 3, 2]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 4), min_size=48, max_size=48), st.booleans())
def test_only_clusters_that_meet_are_joined_and_the_rule_has_no_preferred_axis(cells, flip):
    """Every joined group is connected through neighbouring cells of its clusters, and the rule reads the
    same map turned a quarter (x and y swapped) the same way."""
    lab = np.array(cells).reshape(6, 8)
    g = _grid(8, 6)
    ids = np.flatnonzero(lab.ravel() > 0)
    k = int(lab.max())
    new = chain_merges(g, ids, lab.ravel()[ids], np.ones(ids.size, bool))
    a, b = adjacent_pairs(g, ids)
    la, lb = lab.ravel()[ids][a], lab.ravel()[ids][b]
    for grp in np.unique(new[1:]):
        members = set(np.flatnonzero(new == grp)) - {0}
        present = members & set(lab.ravel()[ids].tolist())
        if len(present) < 2:
            continue
        reached, frontier = set(), [min(present)]
        while frontier:  # clusters of the group reachable through meetings of clusters of the group
            c = frontier.pop()
            reached.add(c)
            nxt = set(lb[la == c].tolist()) | set(la[lb == c].tolist())
            frontier += [d for d in nxt & present if d not in reached]
        assert reached == present
    t = lab.T.copy()  # 8 rows, 6 columns
    gt = _grid(6, 8)
    idt = np.flatnonzero(t.ravel() > 0)
    newt = chain_merges(gt, idt, t.ravel()[idt], np.ones(idt.size, bool))
    same = lambda n: {(i, j) for i in range(1, k + 1) for j in range(1, k + 1) if n[i] == n[j]}  # noqa: E731
    assert same(new) == same(newt)


def _street(seed_points=11):
    """A street 6 km long (1,000 points a km, 40 m across) with hot spots at three crossings (400 points
    each, s.d. 80 m) and faint cross streets (2 km, 200 points a km), in a 10 km box."""
    rng = np.random.default_rng(seed_points)
    xs, ys = [rng.uniform(2000, 8000, 6000)], [5000 + rng.normal(0, 20, 6000)]
    for cx in (3500, 5000, 6500):
        xs += [rng.normal(cx, 80, 400), cx + rng.normal(0, 20, 400)]
        ys += [rng.normal(5000, 80, 400), rng.uniform(4000, 6000, 400)]
    x, y = np.concatenate(xs), np.concatenate(ys)
    f = fine_grid(StudyArea.from_bbox((0, 0, 10_000, 10_000), CRS, working_crs=CRS))
    ids, counts = np.unique(f.assign(x, y).cell_id, return_counts=True)
    return f, ids, counts


def _clusters_along(r, y=5000.0, xs=(2500, 4250, 5750, 7500)):
    g = r.grid
    cid, ok = g.cell_index(np.asarray(xs, float), np.full(len(xs), y))
    pos = np.minimum(np.searchsorted(r.clusters.cell_id, cid), r.clusters.cell_id.size - 1)
    hit = ok & (r.clusters.cell_id[pos] == cid)
    return np.where(hit, r.clusters.label[pos], 0).tolist()


def test_a_street_with_hot_spots_at_its_crossings_is_one_cluster():
    """Seeded: with the corridor rule the street's pieces between its hot spots are one cluster (on each of
    three seeds); without it (``chain_elongation=None``) they are several clusters on at least one."""
    f, ids, counts = _street()
    with_rule, without = [], []
    for s in (1, 2, 3):
        a = _clusters_along(auto_spans_cells(f, ids, counts, epsilon=1.0, rng=NoiseSource(seed=s)))
        b = _clusters_along(auto_spans_cells(f, ids, counts, epsilon=1.0, rng=NoiseSource(seed=s),
                                             chain_elongation=None))
        with_rule.append(a)
        without.append(b)
    assert all(len(set(a)) == 1 and a[0] > 0 for a in with_rule), with_rule
    assert any(len(set(b) - {0}) > 1 for b in without), without


@pytest.mark.parametrize("seed", [2, 4, 7])
def test_lake_street_on_the_sample_is_one_cluster(seed):
    """The sample's corridor (Lake Street, 4 km of stops along one line whose density falls between hot
    spots at its crossings) is one cluster of the published map, seeded; and still no two clusters share a
    boundary."""
    import geopandas as gpd
    from shapely.geometry import Point

    import dpgeo
    from helpers import SAMPLE_AREA, SAMPLE_POINTS

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run = dpgeo.dbscan_spans(str(SAMPLE_POINTS), epsilon=1.0, domain=str(SAMPLE_AREA), seed=seed, ledger=False)
    layer = run.layer
    along = gpd.GeoSeries([Point(x, 4977250) for x in (476600, 477200, 478000, 479200, 480200)],
                          crs="EPSG:32615").to_crs(layer.crs)
    ids = [tuple(layer.loc[layer.contains(p), "cluster_id"]) for p in along]
    assert len(set(ids)) == 1 and len(ids[0]) == 1, ids
    geoms = list(layer.geometry)
    assert not any(geoms[i].intersects(geoms[j]) for i in range(len(geoms)) for j in range(i + 1, len(geoms)))
