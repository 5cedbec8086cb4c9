"""Paths and small loaders shared by the tests (import as ``from helpers import ...``)."""

import os
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


# -- a real browser (tests/test_webmap.py, benchmarks/bench_webmap.py) -------------------------

#: Debian's Chromium (``apt-get install chromium``); playwright drives it, it never downloads one.
CHROMIUM = Path(os.environ.get("DPGEO_CHROMIUM", "/usr/bin/chromium"))
#: Headless Chromium as root, with nothing of its own on the network (no updates, sync or pings).
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--no-first-run", "--disable-sync"]


def browser_missing():
    """Why the browser tests cannot run here (a sentence), or None when they can."""
    if not CHROMIUM.exists():
        return f"no Chromium at {CHROMIUM} (Debian: apt-get install chromium; or set DPGEO_CHROMIUM)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is not installed (from the checkout: pip install -e '.[test]')"
    return None


def launch_chromium(playwright):
    """Headless Debian Chromium through playwright's Python API."""
    return playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
