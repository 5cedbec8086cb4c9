"""Paths and small loaders shared by the tests (import as ``from helpers import ...``)."""

from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = ROOT.parent / "shared" / "data"
SAMPLE_LAYERS = ROOT / "sample_layers"
SAMPLE_POINTS = SAMPLE_LAYERS / "minneapolis_police_stops_2017.gpkg"
SAMPLE_AREA = SAMPLE_LAYERS / "minneapolis_study_area.geojson"
#: A projected CRS used for abstract benchmark coordinates (units treated as metres).
BENCH_CRS = "EPSG:32631"


def load_benchmark(name):
    """(x, y, label) arrays of ../shared/data/benchmarks/<name>.csv.gz (label 0 = noise)."""
    import pandas as pd

    path = SHARED_DATA / "benchmarks" / f"{name}.csv.gz"
    if not path.exists():
        pytest.skip(f"shared benchmark {path} not available")
    df = pd.read_csv(path)
    return df["x"].to_numpy(float), df["y"].to_numpy(float), df["label"].to_numpy(int)


def padded_bbox(x, y, pad):
    """A 'public' bbox for a benchmark: its nominal range plus a margin (not fitted per run)."""
    return (np.floor(x.min() - pad), np.floor(y.min() - pad), np.ceil(x.max() + pad), np.ceil(y.max() + pad))
