"""``dpgeo compare`` and :func:`dpgeo.compare.compare`: the data owner's private-vs-exact report."""

import json
import math
import struct
import warnings

import numpy as np
import pytest

import dpgeo
from helpers import SAMPLE_AREA, SAMPLE_POINTS
from dpgeo.compare import NOT_PRIVATE_NOTICE, compare
from test_io_cli import run_cli

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def png_size(path):
    """(width, height) of a PNG after checking its signature and IHDR chunk."""
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE
    length, kind = struct.unpack(">I4s", data[8:16])
    assert kind == b"IHDR" and length == 13
    return struct.unpack(">II", data[16:24])


def in_unit(v):
    return 0.0 <= v <= 1.0


@pytest.fixture(scope="module")
def spans_cli(tmp_path_factory):
    out = tmp_path_factory.mktemp("compare") / "spans.png"
    code, stdout, stderr = run_cli("compare", SAMPLE_POINTS, "-o", out, "--epsilon", "1", "--radius", "150",
                                   "--min-points", "40", "--domain", SAMPLE_AREA, "--seed", "3")
    return code, stdout, stderr, out


def test_cli_spans_end_to_end(spans_cli):
    code, stdout, stderr, out = spans_cli
    assert code == 0, stderr
    w, h = png_size(out)
    assert w > 600 and h > 400
    # the notice opens the report, once: not again at its end nor on stderr
    assert stdout.count("NOT PRIVATE") == 1 and stdout.count("do not publish") == 1
    assert stdout.lstrip("!\n").startswith("NOT PRIVATE")
    assert "NOT PRIVATE" not in stderr
    assert "scikit-learn DBSCAN, eps=150 m, min_samples=40" in stdout
    assert "points inside the study area: 51,920" in stdout
    # only the PNG is written, nothing else next to it, with the permissions of any new file (umask)
    assert sorted(p.name for p in out.parent.iterdir()) == ["spans.png"]
    probe = out.parent / "probe.txt"
    probe.write_text("x")
    assert out.stat().st_mode & 0o777 == probe.stat().st_mode & 0o777
    probe.unlink()


def test_cli_spans_measures_in_range(tmp_path):
    out = tmp_path / "m.png"
    code, stdout, stderr = run_cli("compare", SAMPLE_POINTS, "-o", out, "--epsilon", "1", "--radius", "150",
                                   "--min-points", "40", "--domain", SAMPLE_AREA, "--seed", "3", "--json", "-q")
    assert code == 0, stderr
    doc = json.loads(stdout)
    assert doc["notice"] == NOT_PRIVATE_NOTICE and doc["png"] == str(out)
    m = doc["measures"]
    assert m["n_points"] == 51920
    for key in ("clustered_share_reference", "clustered_share_private", "recall", "precision", "f_measure",
                "count_median_rel_error", "count_interval_coverage"):
        assert in_unit(m[key]), (key, m[key])
    assert -0.5 <= m["ari"] <= 1 and -0.5 <= m["ami"] <= 1
    # on 52k stops the spans find the big clusters: far better than chance
    assert m["ari"] > 0.2 and m["recall"] > 0.8 and m["precision"] > 0.9
    assert m["n_clusters_reference"] >= m["n_clusters_private"] >= 1
    assert m["count_mae"] >= 0
    png_size(out)


def test_cli_wavecluster(tmp_path):
    out = tmp_path / "w.png"
    code, stdout, stderr = run_cli("compare", SAMPLE_POINTS, "-o", out, "--algorithm", "wavecluster",
                                   "--epsilon", "1", "--cell", "250", "--domain", SAMPLE_AREA, "--seed", "2",
                                   "--json", "-q")
    assert code == 0, stderr
    m = json.loads(stdout)["measures"]
    for key in ("kprime_error", "dsg_c", "ocm", "two_ce", "ari", "f_measure"):
        assert m[key] is not None and math.isfinite(m[key]), key
    assert 0 <= m["ocm"] <= 1 and 0 <= m["two_ce"] <= 1 and m["dsg_c"] >= 0
    # PrivTHR at ε = 1 on 250 m cells is close to exact WaveCluster
    assert m["kprime_error"] < 0.1 and m["ari"] > 0.8
    assert stderr.count("NOT PRIVATE") == 1  # --json: the notice in the document and once on stderr
    png_size(out)


@pytest.mark.parametrize("args, message", [
    (["--epsilon", "1", "--domain", SAMPLE_AREA], "--radius and --min-points"),
    (["--epsilon", "0", "--radius", "150", "--min-points", "40", "--domain", SAMPLE_AREA], "epsilon"),
    (["--epsilon", "1", "--radius", "150", "--min-points", "40"], "study area"),
    (["--algorithm", "wavecluster", "--epsilon", "1", "--domain", SAMPLE_AREA], "cell"),
])
def test_cli_usage_errors_before_reading(tmp_path, args, message):
    out = tmp_path / "x.png"
    # the input does not exist: the parameters must be refused first
    code, stdout, stderr = run_cli("compare", tmp_path / "missing.gpkg", "-o", out, *args)
    assert code == 2 and message in stderr and stderr.count("\n") == 1, stderr
    assert not out.exists()


def test_cli_png_path_checked(tmp_path):
    code, _, err = run_cli("compare", SAMPLE_POINTS, "-o", tmp_path / "map.pdf", "--epsilon", "1",
                           "--radius", "150", "--min-points", "40", "--domain", SAMPLE_AREA)
    assert code == 2 and ".png" in err
    code, _, err = run_cli("compare", SAMPLE_POINTS, "-o", tmp_path / "no" / "map.png", "--epsilon", "1",
                           "--radius", "150", "--min-points", "40", "--domain", SAMPLE_AREA)
    assert code == 2 and "does not exist" in err


def blobs():
    rng = np.random.default_rng(0)
    x = np.r_[rng.normal(500, 25, 3000), rng.normal(1400, 25, 3000), rng.uniform(0, 2000, 300)]
    y = np.r_[rng.normal(500, 25, 3000), rng.normal(1400, 25, 3000), rng.uniform(0, 2000, 300)]
    return x, y


def test_api_warns_and_matches_a_clear_case(tmp_path):
    x, y = blobs()
    with pytest.warns(dpgeo.NotPrivateWarning, match="NOT PRIVATE"):
        rep = compare((x, y, "EPSG:32615"), algorithm="spans", epsilon=1.0, radius_m=40, min_points=20,
                      domain=(0, 0, 2000, 2000), domain_crs="EPSG:32615", seed=1, png=tmp_path / "b.png")
    m = rep.measures
    # two well separated blobs: both clusterings find exactly them
    assert m["n_clusters_reference"] == 2 and m["n_clusters_private"] == 2
    assert m["ari"] > 0.8 and m["precision"] > 0.99
    # the blobs' cores are inside the spans; the reference and private labels cover the same points
    assert rep.reference_labels.shape == rep.private_labels.shape == (x.size,)
    assert set(np.unique(rep.private_labels)) == {0, 1, 2}
    assert "NOT PRIVATE" in rep.text() and rep.text().count(NOT_PRIVATE_NOTICE[:20]) == 1
    assert rep.png == str(tmp_path / "b.png")
    png_size(tmp_path / "b.png")
    # the private layer is kept in memory for inspection, but compare() wrote no layer file
    assert len(rep.private.layer) == 2 and sorted(p.name for p in tmp_path.iterdir()) == ["b.png"]


def test_api_dp_count_interval_holds_on_a_clear_case():
    x, y = blobs()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dpgeo.NotPrivateWarning)
        rep = compare((x, y, "EPSG:32615"), algorithm="spans", epsilon=1.0, radius_m=40, min_points=20,
                      domain=(0, 0, 2000, 2000), domain_crs="EPSG:32615", seed=4)
    # per span, |dp_count - true| is a sum of a few hundred unit-scale noises: well under 5% of 3000
    assert rep.measures["count_median_rel_error"] < 0.05
    assert rep.png is None


def test_api_parameter_errors():
    x, y = blobs()
    kw = dict(epsilon=1.0, domain=(0, 0, 2000, 2000), domain_crs="EPSG:32615")
    with pytest.raises(dpgeo.ParameterError, match="unknown parameter"):
        compare((x, y, "EPSG:32615"), algorithm="spans", radius_m=40, min_points=20, cell_m=10, **kw)
    with pytest.raises(dpgeo.ParameterError, match="algorithm must be one of"):
        compare((x, y, "EPSG:32615"), algorithm="optics", **kw)
    with pytest.raises(dpgeo.ParameterError, match="needs k"):
        compare((x, y, "EPSG:32615"), algorithm="kmeans", **kw)
    with pytest.raises(dpgeo.ParameterError, match="needs epsilon"):
        compare((x, y, "EPSG:32615"), algorithm="diffhwt", k=2, domain=(0, 0, 2000, 2000),
                domain_crs="EPSG:32615")
    with pytest.raises(dpgeo.ParameterError, match="level s = 0"):
        compare((x, y, "EPSG:32615"), algorithm="diffhwt", k=2, level=1, **kw)
    with pytest.raises(dpgeo.ParameterError, match="unknown parameter"):
        compare((x, y, "EPSG:32615"), algorithm="eppkm", k=2, radius_m=3, **kw)
    with pytest.raises(dpgeo.ParameterError, match="method"):
        compare((x, y, "EPSG:32615"), algorithm="wavecluster", method="exact", cell_m=50, **kw)
    with pytest.raises(dpgeo.ParameterError, match="reference_max_points"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", dpgeo.NotPrivateWarning)
            compare((x, y, "EPSG:32615"), algorithm="spans", radius_m=40, min_points=20, seed=1,
                    reference_max_points=1000, **kw)


# -- the k-means family: DP k-means, and EPP-KM / DiffHWT flagged as not differentially private --------


@pytest.fixture(scope="module")
def small_layer(tmp_path_factory):
    """A real GeoPackage of 6,300 points (two blobs and background) in EPSG:32615, and its public bbox."""
    import geopandas as gpd

    x, y = blobs()
    path = tmp_path_factory.mktemp("small") / "points.gpkg"
    gpd.GeoDataFrame(geometry=gpd.points_from_xy(x, y), crs="EPSG:32615").to_file(path)
    return path, "0,0,2000,2000"


def test_cli_kmeans_end_to_end(tmp_path, small_layer):
    path, bbox = small_layer
    out = tmp_path / "k.png"
    code, stdout, stderr = run_cli("compare", path, "-o", out, "--algorithm", "kmeans", "--epsilon", "1",
                                   "--k", "2", "--domain", bbox, "--domain-crs", "EPSG:32615", "--crs",
                                   "EPSG:32615", "--seed", "2", "-q")
    assert code == 0, stderr
    assert "private : DP k-means, epsilon=1" in stdout and "scikit-learn k-means, k=2" in stdout
    assert "NOT DIFFERENTIALLY PRIVATE" not in stdout and stdout.count("NOT PRIVATE") == 1
    assert "cells whose 95% interval holds the true count" in stdout
    png_size(out)


def test_cli_eppkm_is_marked_not_differentially_private(tmp_path, small_layer):
    path, bbox = small_layer
    out = tmp_path / "e.png"
    code, stdout, stderr = run_cli("compare", path, "-o", out, "--algorithm", "eppkm", "--k", "2", "--bags", "2",
                                   "--domain", bbox, "--domain-crs", "EPSG:32615", "--crs", "EPSG:32615",
                                   "--seed", "1", "--json", "-q")
    assert code == 0, stderr
    doc = json.loads(stdout)
    assert doc["method_differentially_private"] is False
    assert any("adds no noise" in r for r in doc["method_not_private_reasons"])
    assert doc["measures"]["n_clusters_private"] == 2 and doc["measures"]["centroid_shift_m"] >= 0
    assert "WARNING: NOT PRIVATE" in stderr
    png_size(out)


def test_api_kmeans_family_on_a_clear_case(tmp_path):
    x, y = blobs()
    kw = dict(domain=(0, 0, 2000, 2000), domain_crs="EPSG:32615", seed=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dpgeo.NotPrivateWarning)
        km = compare((x, y, "EPSG:32615"), algorithm="kmeans", epsilon=1.0, k=2, png=tmp_path / "k.png", **kw)
        ep = compare((x, y, "EPSG:32615"), algorithm="eppkm", k=2, bags=1, **kw)
        dh = compare((x, y, "EPSG:32615"), algorithm="diffhwt", epsilon=1.0, k=2, png=tmp_path / "d.png", **kw)
    assert km.measures["ari"] > 0.9 and km.measures["centroid_shift_m"] < 50
    assert km.measures["count_median_rel_error"] < 0.05 and km.to_dict()["method_differentially_private"] is False
    assert ep.measures["ari"] > 0.9 and ep.to_dict()["method_differentially_private"] is False
    # the two blobs lie on the diagonal, which (x + y)/2 keeps: DiffHWT separates them despite λ = 0.5
    assert dh.to_dict()["method_differentially_private"] is False
    for rep in (ep, dh):
        text = " ".join(rep.text().split())
        assert text.count("NOT DIFFERENTIALLY PRIVATE") == 2 and "never publish" in text
        assert rep.private.metadata["publishable"] is False
    with pytest.raises(dpgeo.OutputError, match="NOT differentially private"):
        ep.private.to_file(tmp_path / "eppkm.gpkg")
    png_size(tmp_path / "k.png")
    png_size(tmp_path / "d.png")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.png", "k.png"]
