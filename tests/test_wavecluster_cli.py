"""DP WaveCluster through the public API and the command line, on the sample layer."""

import json

import geopandas as gpd
import numpy as np
import pytest

import dpgeo
from helpers import SAMPLE_AREA, SAMPLE_POINTS
from test_io_cli import COLUMNS, run_cli


@pytest.mark.parametrize("method", ["privthr", "privthr-em", "privqt", "baseline", "exact"])
def test_cli_wavecluster_methods(tmp_path, method):
    out = tmp_path / f"{method}.gpkg"
    args = ["wavecluster", SAMPLE_POINTS, "-o", out, "--method", method, "--cell", "250",
            "--domain", SAMPLE_AREA]
    if method != "exact":
        args += ["--epsilon", "1"]
    code, _, err = run_cli(*args)
    assert code == 0, err
    g = gpd.read_file(out)
    assert list(g.columns) == COLUMNS and len(g) >= 1 and set(g.geom_type) == {"MultiPolygon"}
    md = dpgeo.read_layer_metadata(out)
    assert md["method"] == method and md["percentile"] == 60.0 and md["wavelet"] == "haar"
    assert md["cell_width_m"] == 250.0 and "k_prime" in md and "threshold" in md
    if method == "exact":
        assert md["differentially_private"] is False and "NOT differentially private" in err
    else:
        assert md["differentially_private"] is True and md["epsilon"] == 1.0
        assert abs(sum(md["epsilon_split"].values()) - 1.0) < 1e-9
    if method in ("privthr", "privqt", "privthr-em"):
        assert (g.dp_count_low <= g.dp_count).all() and (g.dp_count <= g.dp_count_high).all()


def test_cli_wavecluster_grid_size_and_geojson(tmp_path):
    out = tmp_path / "w.geojson"
    code, _, err = run_cli("wavecluster", SAMPLE_POINTS, "-o", out, "--method", "privthr-em", "--epsilon", "1",
                           "--grid", "64", "--percentile", "50", "--domain", SAMPLE_AREA, "-q")
    assert code == 0, err
    doc = json.loads(out.read_text())
    assert doc["dpgeo"]["grid"]["ny"] == 64 and doc["dpgeo"]["percentile"] == 50.0
    assert gpd.read_file(out).crs.to_epsg() == 4326


def test_cli_wavecluster_usage_errors(tmp_path):
    out = tmp_path / "w.gpkg"
    code, _, err = run_cli("wavecluster", SAMPLE_POINTS, "-o", out, "--epsilon", "1", "--domain", SAMPLE_AREA)
    assert code == 2 and "--cell" in err  # one of --cell/--grid is required
    code, _, err = run_cli("wavecluster", SAMPLE_POINTS, "-o", out, "--cell", "100", "--domain", SAMPLE_AREA)
    assert code == 2 and "epsilon" in err
    code, _, err = run_cli("wavecluster", SAMPLE_POINTS, "-o", out, "--epsilon", "1", "--cell", "100",
                           "--percentile", "100", "--domain", SAMPLE_AREA)
    assert code == 2 and "percentile" in err
    code, _, err = run_cli("wavecluster", SAMPLE_POINTS, "-o", out, "--epsilon", "1", "--cell", "0.5",
                           "--domain", SAMPLE_AREA)
    assert code == 2 and "too large" in err
    assert not out.exists()


def test_api_labels_follow_the_grid():
    rng = np.random.default_rng(0)
    x = np.r_[rng.normal(300, 40, 4000), rng.normal(1400, 60, 4000)]
    y = np.r_[rng.normal(300, 40, 4000), rng.normal(1200, 60, 4000)]
    res = dpgeo.wavecluster((x, y, "EPSG:32615"), method="privthr", epsilon=1.0, cell_m=50,
                            domain=(0, 0, 2000, 2000), domain_crs="EPSG:32615", crs="EPSG:32615", seed=1)
    lab = res.cells.label_points(x, y)
    assert len(res.layer) == 2
    assert len(set(lab[:4000]) - {0}) == 1 and len(set(lab[4000:]) - {0}) == 1
    assert (lab[:4000] > 0).mean() > 0.8
