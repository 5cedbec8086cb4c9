"""The polygons of the tree of levels (dpgeo.nested_polygons, dpgeo.polygons.nested_cluster_polygons).

Every entry's polygon must cover exactly the cells of its region: valid, of area ``n_cells × w²`` (where the
study area does not cut it), and equal as a point set to the union of its cells drawn one entry at a time
(``dpgeo.polygons._union_cells``, what the levels layer drew before) — on random trees of random cells, on the
shapes where rings touch themselves, and on real releases (the sample, clipped to its study area, and a
labelled set), where the whole layer is compared with the one of ``cluster_polygons``.
"""

import warnings

import numpy as np
import pandas as pd
import pytest
import shapely
from helpers import BENCH_CRS, SAMPLE_AREA, SAMPLE_POINTS, load_benchmark, padded_bbox
from hypothesis import given, settings
from hypothesis import strategies as st

import dpgeo
import dpgeo.nested_polygons as nested
from dpgeo.domain import StudyArea
from dpgeo.grid import Grid
from dpgeo.nested_polygons import nested_cell_polygons, subtree_sums
from dpgeo.declarations import spans_auto as p_auto
from dpgeo.polygons import _union_cells, cluster_polygons, nested_cluster_polygons

CRS = "EPSG:32615"


def _grid(nx, ny, w=10.0):
    return Grid(StudyArea.from_bbox((0, 0, nx * w, ny * w), CRS, working_crs=CRS), w)


def _regions(cell_id, entry, parent):
    """The cells of each entry's region, one entry at a time (children before parents)."""
    out = []
    for e in range(parent.size):
        kids = np.flatnonzero(parent == e)
        out.append(np.sort(np.concatenate([cell_id[entry == e]] + [out[k] for k in kids])))
    return out


def _union(grid, cells):
    """The union of ``cells`` as the levels layer drew it before: one union per entry."""
    w = grid.cell_m
    g = _union_cells(cells % grid.nx, cells // grid.nx)
    return shapely.transform(g, lambda c: np.column_stack([grid.origin_x + c[:, 0] * w, grid.origin_y + c[:, 1] * w]))


def _check(grid, cell_id, entry, parent):
    polys = nested_cell_polygons(grid, cell_id, entry, parent)
    assert polys.size == parent.size
    for e, cells in enumerate(_regions(cell_id, entry, parent)):
        p = polys[e]
        if cells.size == 0:
            assert p.is_empty
            continue
        assert p.geom_type == "MultiPolygon" and p.is_valid, (e, shapely.is_valid_reason(p))
        assert p.area == pytest.approx(cells.size * grid.cell_m ** 2, rel=1e-9)
        ref = _union(grid, cells)
        assert shapely.equals(p, ref) and shapely.symmetric_difference(p, ref).area == 0
        # only corners are kept: no vertex lies on a straight line between its neighbours
        for part in p.geoms:
            for ring in [part.exterior, *part.interiors]:
                c = np.asarray(ring.coords)[:-1]
                prev, nxt = np.roll(c, 1, axis=0), np.roll(c, -1, axis=0)
                cross = (c[:, 0] - prev[:, 0]) * (nxt[:, 1] - c[:, 1]) - (c[:, 1] - prev[:, 1]) * (nxt[:, 0] - c[:, 0])
                assert (cross != 0).all()
    return polys


@pytest.fixture(params=["raster", "search"])
def lookup(request, monkeypatch):
    """Both ways of finding a cell's neighbours: the raster of the tree's bounding box, and binary search."""
    if request.param == "search":
        monkeypatch.setattr(nested, "RASTER_MAX_CELLS", 0)
    return request.param


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 16), st.integers(1, 16), st.floats(0.2, 1.0), st.integers(1, 8), st.integers(0, 2**31 - 1))
def test_every_entry_is_the_union_of_its_cells(nx, ny, density, n, seed):
    """Random cells (corners touching everywhere, holes in holes), shared out among a random tree."""
    rng = np.random.default_rng(seed)
    g = _grid(nx, ny)
    cells = np.flatnonzero(rng.random(nx * ny) < density)
    if cells.size == 0:
        return
    parent = np.array([int(rng.integers(e + 1, n)) if e < n - 1 and rng.random() < 0.9 else -1 for e in range(n)])
    _check(g, cells, rng.integers(0, n, cells.size), parent)


def test_both_lookups_give_the_same_polygons(lookup):
    rng = np.random.default_rng(3)
    g = _grid(30, 20)
    cells = np.flatnonzero(rng.random(600) < 0.6)
    parent = np.array([3, 3, 4, 4, -1])
    polys = _check(g, cells, rng.integers(0, 5, cells.size), parent)
    assert shapely.get_num_coordinates(polys).sum() > 100


def _cells(rows):
    """Flat ids on a grid drawn as text rows (top row first, ``#`` a cell), and the grid."""
    ny, nx = len(rows), len(rows[0])
    ids = [(ny - 1 - r) * nx + c for r, row in enumerate(rows) for c, ch in enumerate(row) if ch == "#"]
    return _grid(nx, ny), np.array(ids, dtype=np.int64)


@pytest.mark.parametrize("rows, parts, holes", [
    (["#.", ".#"], 2, 0),                                        # two cells touching at a corner: two polygons
    (["###", "#.#", "##."], 1, 1),                               # a hole that reaches the outside at a corner
    (["####", "#..#", "#.##", "##.#", "####"], 1, 2),            # two holes touching at a corner
    (["#####", "#...#", "#.#.#", "#...#", "#####"], 2, 1),       # an island in a lake: two shells, one hole
    (["#.#.#", ".#.#.", "#.#.#", ".#.#."], 10, 0),               # a checkerboard
    (["######", "#....#", "#.##.#", "#.#..#", "#....#", "######"], 2, 1),  # an island touching nothing
    (["##.", "#.#", ".##"], 2, 0),                               # two polygons touching at two corners
])
def test_corners_where_rings_touch(rows, parts, holes, lookup):
    g, cells = _cells(rows)
    (p,) = _check(g, cells, np.zeros(cells.size, dtype=np.int64), np.array([-1]))
    assert len(p.geoms) == parts and sum(len(q.interiors) for q in p.geoms) == holes


def test_nested_entries_touching_the_outside_and_each_other():
    """A deep entry drawn in every ancestor once, with the edges of the raster's frame."""
    g, cells = _cells(["#####", "##.##", "#####"])
    entry = np.where(np.isin(cells, [0, 4, 10, 14]), 0, np.where(np.isin(cells, [1, 3]), 1, 2))
    polys = _check(g, cells, entry, np.array([2, 2, -1]))
    assert len(polys[0].geoms) == 4 and len(polys[2].geoms) == 1 and len(polys[2].geoms[0].interiors) == 1


def test_subtree_sums():
    assert subtree_sums(np.array([1, 2, 3]), np.array([0, 1, 2]), np.array([2, 2, -1]), 3).tolist() == [1, 2, 6]
    assert subtree_sums(None, np.zeros(0, int), np.zeros(0, int), 0).tolist() == []


# -- the levels layer of real releases ----------------------------------------------------------------------

def _old_levels(grid, hist, cl):
    """The levels layer's polygons and attributes as drawn before: cluster_polygons over every entry's cells."""
    n = len(cl.node_cells)
    cells = np.concatenate(cl.node_cells)
    labels = np.repeat(np.arange(1, n + 1), [c.size for c in cl.node_cells])
    return cluster_polygons(grid, cells, labels, hist.lookup(cells), q=hist.q)


def _release_with_levels(monkeypatch, *args, **kw):
    """The levels layer of a seeded release, and what it was drawn from."""
    seen = {}
    real = p_auto.levels_layer

    def spy(grid, hist, cl):
        seen.update(grid=grid, hist=hist, cl=cl)
        return real(grid, hist, cl)

    monkeypatch.setattr(p_auto, "levels_layer", spy)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = dpgeo.dbscan_spans(*args, seed=1, ledger=False, levels=True, **kw)
    return r.levels, seen


def _same_layer(lv, seen, clipped_somewhere):
    grid, hist, cl = seen["grid"], seen["hist"], seen["cl"]
    old = _old_levels(grid, hist, cl)
    n = len(lv)
    assert n == len(old) > 10
    new = lv.iloc[np.arange(n)[::-1]].reset_index(drop=True)  # the layer lists the root first
    cols = ["n_cells", "area_m2", "dp_count", "dp_count_low", "dp_count_high"]
    pd.testing.assert_frame_equal(new[cols], old[cols])
    a, b = new.geometry.values, old.geometry.values
    assert shapely.is_valid(a).all() and (shapely.get_type_id(a) == 6).all()
    assert shapely.equals(a, b).all()
    assert np.abs(shapely.area(shapely.symmetric_difference(a, b))).max() < 1e-6
    assert shapely.get_num_coordinates(a).sum() < shapely.get_num_coordinates(b).sum()
    # an entry with no cell on the study area's boundary has exactly the area of its cells
    full = np.asarray(new["n_cells"], dtype=float) * grid.cell_m ** 2
    whole = np.abs(shapely.area(a) - full) <= 1e-6 * full
    on_edge = np.isin(cl.tree.cell_id, grid.boundary_ids()).astype(np.int64)
    cut = subtree_sums(on_edge, cl.cell_entry, np.asarray(cl.nodes["parent"]), n) > 0
    assert whole[~cut].all()
    assert (~whole).any() == clipped_somewhere


def test_levels_of_the_sample_are_the_cells_of_every_entry(monkeypatch):
    """The sample's study area is a city outline: the entries that reach it are clipped, the others not."""
    lv, seen = _release_with_levels(monkeypatch, str(SAMPLE_POINTS), epsilon=1.0, domain=str(SAMPLE_AREA))
    grid = seen["grid"]
    assert not grid.area.is_rectangle
    _same_layer(lv, seen, clipped_somewhere=True)
    # each entry lies inside its parent, and inside the study area
    geoms = dict(zip(lv["level_id"], lv.geometry.values))
    for lid, pid in zip(lv["level_id"], lv["parent_id"]):
        if not pd.isna(pid):
            assert shapely.covers(geoms[int(pid)], geoms[lid])
    assert shapely.covers(grid.area.polygon.buffer(1e-6), lv.geometry.values).all()


def test_levels_of_a_labelled_set_are_the_cells_of_every_entry(monkeypatch):
    x, y, _ = load_benchmark("sipu_a1")
    bbox = padded_bbox(x, y, 2000)
    lv, seen = _release_with_levels(monkeypatch, (x, y, BENCH_CRS), epsilon=1.0, domain=bbox,
                                       domain_crs=BENCH_CRS, crs=BENCH_CRS)
    _same_layer(lv, seen, clipped_somewhere=False)


def test_clipping_keeps_apart_what_the_study_area_cuts_in_two():
    """A chain of holes touching at corners, from a notch of the outline to a hole that a slit of the study
    area opens: once clipped, the chain cuts the polygon in two. GEOS's overlay must take those holes (put
    back as holes, they would make an invalid polygon); eight lone holes inside take the fast way back."""
    slit = shapely.box(63, -1, 67, 55)  # 4 m wide, inside column 6, up into the cell (6, 5)
    area = StudyArea.from_geometry(shapely.box(0, 0, 130, 130).difference(slit), CRS, working_crs=CRS)
    g = Grid(area, 10.0)
    assert not area.is_rectangle and (g.nx, g.ny) == (13, 13) and g.n_cells == 169
    opened = [(6, 5)]
    chain = [(7, 6), (8, 7), (9, 8), (10, 9), (11, 10), (12, 11)]  # ends in a notch of the outline
    lone = [(2, 6), (4, 6), (2, 8), (4, 8), (2, 10), (4, 10), (8, 2), (10, 2)]
    cells = np.setdiff1d(g.universe_ids(), [y * g.nx + x for x, y in opened + chain + lone])
    zero, root = np.zeros(cells.size, dtype=np.int64), np.array([-1])
    whole = nested_cell_polygons(g, cells, zero, root)[0]
    assert len(whole.geoms) == 1 and len(whole.geoms[0].interiors) == 8 + 5 + 1
    clipped = nested_cluster_polygons(g, cells, zero, root, np.ones(cells.size, dtype=np.int64),
                                      q=None).geometry.values[0]
    expected = shapely.intersection(whole, area.polygon)
    assert clipped.is_valid, shapely.is_valid_reason(clipped)
    assert shapely.equals(clipped, expected) and len(clipped.geoms) == 2
    assert clipped.area == pytest.approx(expected.area) and expected.area < cells.size * 100
