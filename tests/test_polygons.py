"""Cells to polygons: geometry, areas and count intervals (property tests)."""

import math

import numpy as np
import shapely
from hypothesis import given, settings, strategies as st

from dpgeo.domain import StudyArea
from dpgeo.grid import Grid
from dpgeo.noise import sum_interval_halfwidth
from dpgeo.polygons import LAYER_COLUMNS, cluster_polygons

AREA = StudyArea.from_bbox((0, 0, 1000, 1000), "EPSG:32615", working_crs="EPSG:32615")
GRID = Grid(AREA, 50.0)  # 20 x 20


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 399), st.integers(1, 4), st.integers(-5, 60)), min_size=1,
                max_size=80, unique_by=lambda t: t[0]))
def test_polygons_cover_exactly_their_cells(cells):
    ids = np.array([c[0] for c in cells])
    order = np.argsort(ids)
    ids = ids[order]
    lab = np.array([c[1] for c in cells])[order]
    # relabel to 1..k
    _, lab = np.unique(lab, return_inverse=True)
    lab = lab.ravel() + 1
    cnt = np.array([c[2] for c in cells])[order]
    q = math.exp(-1.0)
    layer = cluster_polygons(GRID, ids, lab, cnt, q=q)
    assert list(layer.columns) == LAYER_COLUMNS + ["geometry"]
    assert len(layer) == lab.max()
    for row in layer.itertuples():
        sel = lab == row.cluster_id
        assert row.n_cells == sel.sum()
        assert math.isclose(row.area_m2, sel.sum() * 2500.0)
        union = shapely.union_all(GRID.cell_boxes(ids[sel]))
        assert shapely.equals(row.geometry, union) or abs(row.geometry.symmetric_difference(union).area) < 1e-6
        s = int(cnt[sel].sum())
        h = sum_interval_halfwidth(int(sel.sum()), q)
        assert row.dp_count == max(s, 0)
        assert row.dp_count_low == max(s - h, 0) and row.dp_count_high == max(s + h, 0)
        assert row.dp_count_low <= row.dp_count <= row.dp_count_high


def test_polygons_clipped_to_a_non_rectangular_study_area():
    tri = shapely.Polygon([(0, 0), (1000, 0), (0, 1000)])
    area = StudyArea.from_geometry(tri, "EPSG:32615", working_crs="EPSG:32615")
    g = Grid(area, 100.0)
    ids = g.universe_ids()
    layer = cluster_polygons(g, ids, np.ones(ids.size, dtype=int), np.ones(ids.size, dtype=int), q=0.5)
    assert len(layer) == 1
    assert math.isclose(layer.geometry.iloc[0].area, tri.area, rel_tol=1e-9)
    assert math.isclose(layer.area_m2.iloc[0], tri.area, rel_tol=1e-9)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 24), st.integers(1, 24), st.floats(0.05, 0.95))
def test_union_of_cells_is_valid_and_covers_exactly_the_cells(seed, nx, ny, fill):
    """Any set of grid cells (holes, corner-touching parts, islands in holes): a valid (Multi)Polygon whose
    point set is exactly the union of the cells' squares."""
    from dpgeo.polygons import _union_cells

    rng = np.random.default_rng(seed)
    mask = rng.random((ny, nx)) < fill
    mask[rng.integers(ny), rng.integers(nx)] = True
    iy, ix = np.nonzero(mask)
    ix, iy = ix + 1000, iy - 50  # anywhere on the grid
    g = _union_cells(ix, iy)
    assert shapely.is_valid(g), shapely.is_valid_reason(g)
    assert g.area == mask.sum()
    reference = shapely.union_all(shapely.box(ix, iy, ix + 1, iy + 1))
    assert shapely.equals(g, reference)


def test_area_m2_is_rounded_to_what_the_grid_can_mean():
    """Cells in real UTM coordinates (millions of metres): the union's area carries floating-point noise
    (708750.0000000347 for 63 cells); area_m2 is given to 0.01 m², the same for the spans and k-means."""
    area = StudyArea.from_bbox((473941.2335994537, 4970748.469471854, 475000.0, 4972000.0), "EPSG:32615",
                               working_crs="EPSG:32615")
    g = Grid(area, 150 / math.sqrt(2))
    ids = np.array([j * g.nx + i for i in range(7) for j in range(9)])
    layer = cluster_polygons(g, ids, np.ones(ids.size, dtype=int), np.ones(ids.size, dtype=int), q=0.5)
    raw = float(layer.geometry.iloc[0].area)
    assert raw != round(raw, 2)  # the noise is there
    assert layer.area_m2.iloc[0] == round(raw, 2) == 708750.0
    from dpgeo.mechanisms.kmeans import kmeans_layer
    from dpgeo.randomness import NoiseSource

    rng = np.random.default_rng(1)
    x, y = rng.uniform(473950, 474990, 400), rng.uniform(4970760, 4971990, 400)
    km = kmeans_layer(x, y, area=area, k=3, epsilon=1.0, rng=NoiseSource(1)).layer
    a = km["area_m2"].to_numpy()
    assert np.array_equal(a, np.round(a, 2)) and np.allclose(a, km.geometry.area, rtol=0, atol=0.005)
