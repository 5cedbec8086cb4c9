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


def chi2_discrete_laplace_p(samples, q, hi):
    """p-value of a chi-square test that integer ``samples`` follow discrete Laplace of decay ``q`` (values
    -hi..hi one bin each, both tails one bin; bins expecting fewer than 5 left out)."""
    from scipy import stats

    from dpgeo.noise import discrete_laplace_pmf

    samples = np.asarray(samples)
    edges = np.arange(-hi, hi + 1)
    obs = np.r_[(samples < -hi).sum(), [(samples == v).sum() for v in edges], (samples > hi).sum()]
    tail = q ** (hi + 1) / (1 + q)
    exp = np.r_[tail, discrete_laplace_pmf(edges, q), tail] * samples.size
    keep = exp > 5
    return stats.chisquare(obs[keep], exp[keep] * obs[keep].sum() / exp[keep].sum()).pvalue


def chi2_binned_discrete_laplace_p(err, q, *, lo=-60, hi=60, width=10):
    """The same test over bins of ``width`` values (for a law too wide to test value by value)."""
    from scipy import stats

    err = np.asarray(err)
    edges = np.arange(lo, hi + 1, width)

    def cdf(t):
        return np.where(t >= 0, 1 - q ** (np.floor(t) + 1) / (1 + q), q ** (-np.floor(t)) / (1 + q))

    probs = np.diff(np.r_[0.0, cdf(edges[1:] - 1), 1.0])
    obs = np.bincount(np.searchsorted(edges[1:], err, side="right"), minlength=probs.size)
    exp = probs * err.size
    keep = exp > 5
    return stats.chisquare(obs[keep], exp[keep] * obs[keep].sum() / exp[keep].sum()).pvalue
