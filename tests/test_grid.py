"""Grid geometry: exact neighbourhoods, a grid fixed by the public domain only."""

import math
from fractions import Fraction

import numpy as np
import pytest
import shapely
from hypothesis import given, settings, strategies as st

from dpgeo.domain import StudyArea, utm_crs_for
from dpgeo.errors import DomainError, ParameterError
from dpgeo.grid import Grid, cell_width_for_radius, neighbourhood_offsets


def float_kappa(alpha, eta):
    """Neighbourhood size as floating point computes it (the authors' way): wrong at ties."""
    w = eta * alpha / math.sqrt(2)
    r = int(math.ceil(alpha / w)) + 1
    n = 0
    for dx in range(-r, r + 1):
        for dy in range(-r, r + 1):
            a, b = max(abs(dx) - 1, 0) * w, max(abs(dy) - 1, 0) * w
            if math.sqrt(a * a + b * b) < alpha:
                n += 1
    return n


def test_kappa_21_for_alpha_100_where_floats_say_25():
    assert float_kappa(100.0, 1.0) == 25  # the float tie at distance exactly α
    assert len(neighbourhood_offsets(1.0)) == 21


@pytest.mark.parametrize("eta,kappa", [(1.0, 21), (0.5, 45), (0.25, 145), (0.75, 25), (0.9, 25)])
def test_kappa_values(eta, kappa):
    assert len(neighbourhood_offsets(eta)) == kappa


def brute_min_dist_sq(dx, dy):
    """Squared min distance between unit cells at offset (dx, dy), exact."""
    a = max(abs(dx) - 1, 0)
    b = max(abs(dy) - 1, 0)
    return a * a + b * b


@settings(max_examples=60, deadline=None)
@given(num=st.integers(1, 64), den=st.integers(1, 64))
def test_offsets_match_exact_definition(num, den):
    eta = num / den
    if not 0.1 <= eta <= 1:
        return
    offs = {tuple(o) for o in neighbourhood_offsets(eta).tolist()}
    e = Fraction(eta)
    # cell width w = η′α/√2: dist < α  <=>  w²·d² < α²  <=>  η′²·d²/2 < 1
    r = 2 + int(2 / eta)
    want = {(dx, dy) for dx in range(-r, r + 1) for dy in range(-r, r + 1)
            if e * e * brute_min_dist_sq(dx, dy) < 2}
    assert offs == want
    assert (0, 0) in offs
    assert offs == {(-a, -b) for a, b in offs}  # symmetric


def test_eta_validated():
    for bad in (0, -0.5, 1.5):
        with pytest.raises(ParameterError, match="eta"):
            neighbourhood_offsets(bad)


def test_cell_width():
    assert cell_width_for_radius(100) == pytest.approx(70.71067811865476)
    assert cell_width_for_radius(100, 0.5) == pytest.approx(35.35533905932738)


def test_utm_zone_from_domain_centre():
    assert StudyArea.from_bbox((-93.33, 44.89, -93.19, 45.06)).crs.to_epsg() == 32615
    assert utm_crs_for(151.2, -33.9).to_epsg() == 32756
    assert utm_crs_for(5.3, 60.4).to_epsg() == 32632  # Bergen: the Norway exception


def test_working_crs_must_be_projected_metres():
    with pytest.raises(DomainError, match="projected"):
        StudyArea.from_bbox((0, 0, 1, 1), working_crs="EPSG:4326")
    with pytest.raises(DomainError, match="metres"):
        StudyArea.from_bbox((-93.33, 44.89, -93.19, 45.06), working_crs="EPSG:2264")  # US feet


def test_grid_fixed_by_domain_not_data():
    area = StudyArea.from_bbox((-93.33, 44.89, -93.19, 45.06))
    g = Grid(area, 100.0)
    rng = np.random.default_rng(0)
    x = rng.uniform(*area.polygon.bounds[0::2], 1000)
    y = rng.uniform(*area.polygon.bounds[1::2], 1000)
    a1 = g.assign(x, y)
    # move one point far away: no other point changes cell, the grid is the same object state
    x2, y2 = x.copy(), y.copy()
    x2[0], y2[0] = 1e7, 1e7
    g2 = Grid(area, 100.0)
    a2 = g2.assign(x2, y2)
    assert (g.origin_x, g.origin_y, g.nx, g.ny, g.n_cells) == (g2.origin_x, g2.origin_y, g2.nx, g2.ny, g2.n_cells)
    keep1 = g.assign(x[1:], y[1:]).cell_id
    assert np.array_equal(a2.cell_id, keep1)
    assert a2.n_outside == a1.n_outside + (1 if a1.n_in == a2.n_in + 1 else 0)


def test_polygon_domain_keeps_exactly_points_inside():
    # a triangle in a projected CRS: points in cells cut by the edge are tested exactly
    tri = shapely.Polygon([(0, 0), (1000, 0), (0, 1000)])
    area = StudyArea.from_geometry(tri, "EPSG:32615", working_crs="EPSG:32615")
    g = Grid(area, 70.0)
    rng = np.random.default_rng(1)
    x = rng.uniform(-100, 1100, 20000)
    y = rng.uniform(-100, 1100, 20000)
    a = g.assign(x, y)
    inside = shapely.intersects_xy(tri, x, y)
    assert a.n_in == inside.sum()
    # universe: exactly the cells whose box touches the triangle with positive area
    boxes = g.cell_boxes(np.arange(g.nx * g.ny))
    touch = shapely.area(shapely.intersection(boxes, tri)) > 0
    assert np.array_equal(np.flatnonzero(touch), g.universe_ids())


def test_huge_universe_is_cheap():
    # a 200 km square at 1 m cells: 4e10 cells, stored as one run per row
    area = StudyArea.from_bbox((0, 0, 2e5, 2e5), "EPSG:32615", working_crs="EPSG:32615")
    g = Grid(area, 1.0)
    assert g.n_cells == 40_000_000_000
    ids = g.universe_id_at(np.array([0, 1, 200_000, g.n_cells - 1]))
    assert ids.tolist() == [0, 1, 200_000, g.n_cells - 1]
    a = g.assign(np.array([0.5, 2e5, 2e5 + 0.1]), np.array([0.5, 2e5, 5.0]))
    assert a.cell_id.tolist() == [0] and a.n_outside == 2  # the far edge is outside the grid cells
