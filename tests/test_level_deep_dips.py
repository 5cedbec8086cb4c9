"""The deep-dip rule of the tree of levels (:func:`dpgeo.mechanisms.level_ridges.deep_dips`).

Noise-free histograms (ε = 50: every released count is its exact count with probability
1 - 2e-22 per cell), so each assertion is about the rule, not about a draw.
"""

import math

import numpy as np
import pytest

from dpgeo.domain import StudyArea
from dpgeo.grid import Grid
from dpgeo.histogram import NoisyHistogram
from dpgeo.mechanisms.auto import auto_spans_cells
from dpgeo.mechanisms.levels import DEEP_DIP_RATIO, density_levels
from dpgeo.mechanisms.resolution import fine_grid
from dpgeo.noise import NoiseSource


def _plateau_with(shape):
    """A wide low plateau (4 points a cell) holding two compact groups or two parallel bars, and a group
    of its own elsewhere: the plateau's long life below the split outweighs the two in excess of mass."""
    g = Grid(StudyArea.from_bbox((0, 0, 600, 300), "EPSG:32615", working_crs="EPSG:32615"), 10.0)
    c = np.zeros((30, 60), dtype=np.int64)
    c[2:28, 1:48] = 4
    if shape == "groups":  # 3x3 cells of 10: a peak of 90 in 3x3 sums, the plateau's 36 between them
        c[12:15, 15:18] = c[12:15, 26:29] = 10
    else:  # two bars 25 cells long, one wide: a peak of 114, as deep, not compact
        c[10, 10:35] = c[17, 10:35] = 30
    c[12:15, 53:56] = 10
    h = NoisyHistogram(g, "dense", np.arange(c.size), c.ravel(), 50.0, 1, math.exp(-50.0))
    return h, int(c.sum())


def _clusters(shape, ratio):
    h, n = _plateau_with(shape)
    return density_levels(h, deep_dip_ratio=ratio, n_hat=n, min_mass=10, min_prominence=1)[0]


def test_two_compact_groups_far_above_their_split_are_two_places():
    # excess of mass alone joins them (the plateau weighs more); the rule keeps them apart
    assert _clusters("groups", None).n_clusters == 2
    assert _clusters("groups", DEEP_DIP_RATIO).n_clusters == 3


@pytest.mark.parametrize("ratio, n", [(0.4, 3), (0.39, 2)])
def test_the_ratio_is_the_split_against_each_peak(ratio, n):
    # split 36, peaks 90: deep for a ratio of 36/90 = 0.4 or more, not below
    assert _clusters("groups", ratio).n_clusters == n


def test_long_shapes_are_left_to_excess_of_mass():
    # as deep, but bars are not compact groups: a ridge's pieces or a trail's curls are not read apart
    assert _clusters("bars", DEEP_DIP_RATIO).n_clusters == _clusters("bars", None).n_clusters == 2


def test_the_rule_is_recorded_and_can_be_switched_off():
    f = fine_grid(StudyArea.from_bbox((0, 0, 2000, 2000), "EPSG:32615", working_crs="EPSG:32615"))
    rng = np.random.default_rng(0)
    x, y = rng.normal(1000, 60, 2000), rng.normal(1000, 60, 2000)
    ids, counts = np.unique(f.assign(x, y).cell_id, return_counts=True)
    on = auto_spans_cells(f, ids, counts, epsilon=1.0, rng=NoiseSource(seed=1))
    off = auto_spans_cells(f, ids, counts, epsilon=1.0, rng=NoiseSource(seed=1), deep_dip_ratio=None)
    assert on.settings["deep_dip_ratio"] == DEEP_DIP_RATIO and off.settings["deep_dip_ratio"] is None
