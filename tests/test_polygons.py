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
