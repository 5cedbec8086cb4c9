"""Fixtures shared by the tests; plain helpers live in helpers.py."""

import pytest

from helpers import SAMPLE_AREA, SAMPLE_POINTS


@pytest.fixture
def sample_points():
    return SAMPLE_POINTS


@pytest.fixture
def sample_area():
    return SAMPLE_AREA
