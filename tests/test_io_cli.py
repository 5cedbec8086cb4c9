"""Real files in and out, through the Python API and the command line."""

import json
import os
import subprocess
import sys

import geopandas as gpd
import numpy as np
import pandas as pd
import pytest
import shapely

import dpgeo
from helpers import SAMPLE_AREA, SAMPLE_POINTS
from dpgeo.cli import main

SPANS = ["--epsilon", "1", "--radius", "150", "--min-points", "40"]
COLUMNS = ["cluster_id", "n_cells", "area_m2", "dp_count", "dp_count_low", "dp_count_high", "geometry"]


def run_cli(*args):
    """Run the installed console script; return (exit code, stdout, stderr)."""
    exe = os.path.join(os.path.dirname(sys.executable), "dpgeo")
    p = subprocess.run([exe, *map(str, args)], capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


@pytest.fixture(scope="module")
def sample_run(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli")
    gpkg, gj = d / "spans.gpkg", d / "spans.geojson"
    for out in (gpkg, gj):
        code, _, err = run_cli("spans", SAMPLE_POINTS, "-o", out, *SPANS, "--domain", SAMPLE_AREA)
        assert code == 0, err
    return gpkg, gj, err


def test_cli_sample_to_geopackage(sample_run):
    gpkg, _, err = sample_run
    g = gpd.read_file(gpkg)
    assert list(g.columns) == COLUMNS
    assert g.crs.to_epsg() == 32615  # working CRS: UTM 15N from the study area's centre
    assert len(g) >= 1 and set(g.geom_type) == {"MultiPolygon"}
    assert (g.dp_count_low <= g.dp_count).all() and (g.dp_count <= g.dp_count_high).all()
    assert np.allclose(g.area_m2, g.geometry.area)
    md = dpgeo.read_layer_metadata(gpkg)
    for key in ("mechanism", "epsilon", "delta", "beta", "radius_m", "min_points", "min_points_prime", "gamma",
                "kappa", "cell_width_m", "working_crs", "domain", "dpgeo_version", "differentially_private"):
        assert key in md, key
    assert md["differentially_private"] is True and md["kappa"] == 21 and md["epsilon"] == 1.0
    # diagnostics about the private data are shown locally, never stored
    assert "51,920 records read" in err
    text = json.dumps(md)
    assert "51920" not in text and "n_read" not in text and "n_outside" not in text


def test_cli_sample_to_geojson_rfc7946(sample_run):
    _, gj, _ = sample_run
    doc = json.loads(gj.read_text())
    assert doc["type"] == "FeatureCollection" and "crs" not in doc
    assert doc["dpgeo"]["differentially_private"] is True
    g = gpd.read_file(gj)
    assert g.crs.to_epsg() == 4326
    minx, miny, maxx, maxy = g.total_bounds
    assert -93.34 < minx < maxx < -93.18 and 44.88 < miny < maxy < 45.07
    # RFC 7946: exterior rings counter-clockwise
    ext = [p.exterior for geom in g.geometry for p in geom.geoms]
    assert all(shapely.is_ccw(r) for r in ext)


def test_cli_info(sample_run):
    gpkg, gj, _ = sample_run
    code, out, _ = run_cli("info", gpkg)
    assert code == 0 and "differentially private" in out and "κ (neighbourhood)" in out
    code, out, _ = run_cli("info", gj, "--json")
    assert code == 0 and json.loads(out)["method"] == "dbscan_spans"


def test_out_crs_for_geopackage(tmp_path):
    out = tmp_path / "o.gpkg"
    assert main(["spans", str(SAMPLE_POINTS), "-o", str(out), *SPANS, "--domain", str(SAMPLE_AREA),
                 "--out-crs", "EPSG:3857", "-q"]) == 0
    assert gpd.read_file(out).crs.to_epsg() == 3857


def test_seeded_output_is_marked_not_private(tmp_path):
    out = tmp_path / "o.geojson"
    code, _, err = run_cli("spans", SAMPLE_POINTS, "-o", out, *SPANS, "--domain", SAMPLE_AREA, "--seed", "1")
    assert code == 0 and "NOT differentially private" in err
    md = dpgeo.read_layer_metadata(out)
    assert md["differentially_private"] is False and "seed" in md["not_private_reasons"][0]


def test_domain_from_data_is_marked_not_private(tmp_path):
    out = tmp_path / "o.gpkg"
    assert main(["spans", str(SAMPLE_POINTS), "-o", str(out), *SPANS, "--domain-from-data", "-q"]) == 0
    md = dpgeo.read_layer_metadata(out)
    assert md["differentially_private"] is False
    assert any("extent" in r for r in md["not_private_reasons"])


# -- input formats -----------------------------------------------------------------

@pytest.fixture(scope="module")
def stops():
    return gpd.read_file(SAMPLE_POINTS).iloc[:5000]


@pytest.mark.parametrize("ext", ["gpkg", "geojson", "shp", "parquet", "csv"])
def test_all_input_formats_give_the_same_points(tmp_path, stops, ext):
    path = tmp_path / f"in.{ext}"
    if ext == "parquet":
        stops.to_parquet(path)
    elif ext == "csv":
        pd.DataFrame({"longitude": stops.geometry.x, "latitude": stops.geometry.y}).to_csv(path, index=False)
    else:
        stops.to_file(path)
    t = dpgeo.read_points(path)
    assert t.crs.to_epsg() == 4326 and t.n_read == 5000 and t.n_dropped == 0
    assert np.allclose(np.sort(t.x), np.sort(stops.geometry.x.to_numpy()))


def test_geodataframe_in_other_crs(stops):
    a = dpgeo.dbscan_spans(stops, epsilon=1, radius_m=150, min_points=40, domain=SAMPLE_AREA, seed=1)
    b = dpgeo.dbscan_spans(stops.to_crs(3857), epsilon=1, radius_m=150, min_points=40, domain=SAMPLE_AREA, seed=1)
    assert a.metadata["working_crs"] == b.metadata["working_crs"] == "EPSG:32615"
    assert len(a.layer) == len(b.layer)


def test_csv_with_explicit_columns_needs_crs(tmp_path, stops):
    p = tmp_path / "xy.csv"
    pd.DataFrame({"px": stops.geometry.x, "py": stops.geometry.y}).to_csv(p, index=False)
    code, _, err = run_cli("spans", p, "-o", tmp_path / "o.gpkg", *SPANS, "--domain", SAMPLE_AREA,
                           "--x", "px", "--y", "py")
    assert code == 2 and "--input-crs" in err
    code, _, err = run_cli("spans", p, "-o", tmp_path / "o.gpkg", *SPANS, "--domain", SAMPLE_AREA,
                           "--x", "px", "--y", "py", "--input-crs", "EPSG:4326", "-q")
    assert code == 0, err


def test_empty_geometries_and_nans_are_dropped(tmp_path):
    p = tmp_path / "pts.gpkg"
    geoms = [shapely.Point(-93.27, 44.98), shapely.Point(), None, shapely.Point(-93.26, 44.97)]
    gpd.GeoDataFrame({"a": [1, 2, 3, 4]}, geometry=geoms, crs=4326).to_file(p)
    t = dpgeo.read_points(p)
    assert t.n_read == 4 and t.x.size == 2 and t.n_dropped == 2
    c = tmp_path / "nan.csv"
    c.write_text("lon,lat\n-93.27,44.98\nnan,44.9\n,\n-93.2,abc\n")
    t = dpgeo.read_points(c)
    assert t.n_read == 4 and t.x.size == 1 and t.n_dropped == 3


# -- bad input: one-line message, exit 2, no output file ----------------------------------

def bad(tmp_path, *args):
    out = tmp_path / "out.gpkg"
    code, stdout, err = run_cli("spans", *args[:1], "-o", out, *args[1:])
    assert code == 2, err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) >= 1 and err.strip().splitlines()[-1].startswith("dpgeo")
    assert not out.exists()
    assert not [f for f in os.listdir(tmp_path) if f.startswith(".dpgeo-")]
    return err


def test_bad_epsilon_and_radius(tmp_path):
    assert "epsilon" in bad(tmp_path, SAMPLE_POINTS, "--epsilon", "0", "--radius", "100", "--min-points", "5",
                            "--domain", SAMPLE_AREA)
    assert "epsilon" in bad(tmp_path, SAMPLE_POINTS, "--epsilon", "-1", "--radius", "100", "--min-points", "5",
                            "--domain", SAMPLE_AREA)
    assert "radius" in bad(tmp_path, SAMPLE_POINTS, "--epsilon", "1", "--radius", "0", "--min-points", "5",
                           "--domain", SAMPLE_AREA)


def test_missing_domain_says_how(tmp_path):
    err = bad(tmp_path, SAMPLE_POINTS, *SPANS)
    assert "--domain" in err and "--domain-from-data" in err


def test_empty_file(tmp_path):
    p = tmp_path / "empty.gpkg"
    gpd.GeoDataFrame({"a": []}, geometry=gpd.GeoSeries([], crs=4326)).to_file(p)
    assert "no records" in bad(tmp_path, p, *SPANS, "--domain", SAMPLE_AREA)
    c = tmp_path / "empty.csv"
    c.write_text("lon,lat\n")
    assert "no records" in bad(tmp_path, c, *SPANS, "--domain", SAMPLE_AREA)


def test_layer_without_crs(tmp_path):
    p = tmp_path / "nocrs.geojson"
    p.write_text(json.dumps({"type": "FeatureCollection", "features": [
        {"type": "Feature", "properties": {}, "geometry": {"type": "Point", "coordinates": [480000, 4980000]}}]}))
    # GeoJSON is lon/lat by definition; a shapefile without .prj has no CRS
    shp = tmp_path / "nocrs.shp"
    gpd.GeoDataFrame({"a": [1]}, geometry=[shapely.Point(480000, 4980000)]).to_file(shp)
    assert "--input-crs" in bad(tmp_path, shp, *SPANS, "--domain", SAMPLE_AREA)


def test_lines_are_refused(tmp_path):
    p = tmp_path / "lines.gpkg"
    gpd.GeoDataFrame({"a": [1]}, geometry=[shapely.LineString([(-93.3, 44.9), (-93.2, 45.0)])],
                     crs=4326).to_file(p)
    assert "LineString" in bad(tmp_path, p, *SPANS, "--domain", SAMPLE_AREA)


def test_all_nan_points(tmp_path):
    c = tmp_path / "nan.csv"
    c.write_text("lon,lat\nnan,nan\n,\n")
    assert "no usable points" in bad(tmp_path, c, *SPANS, "--domain", SAMPLE_AREA)


def test_domain_not_overlapping(tmp_path):
    # a study area in Sydney for Minneapolis data: every point is outside
    code, _, err = run_cli("spans", SAMPLE_POINTS, "-o", tmp_path / "o.gpkg", *SPANS,
                           "--domain=151.1,-33.95,151.3,-33.8")
    assert code == 2 and "inside the study area" in err
    assert not (tmp_path / "o.gpkg").exists()


def test_bad_domain_and_output(tmp_path):
    assert "bbox" in bad(tmp_path, SAMPLE_POINTS, *SPANS, "--domain=10,10,5,5")
    code, _, err = run_cli("spans", SAMPLE_POINTS, "-o", tmp_path / "out.shp", *SPANS, "--domain", SAMPLE_AREA)
    assert code == 2 and ".gpkg, .geojson, .html or .png" in err
    code, _, err = run_cli("spans", SAMPLE_POINTS, "-o", tmp_path / "nodir" / "o.gpkg", *SPANS,
                           "--domain", SAMPLE_AREA)
    assert code == 2 and "does not exist" in err


def test_failed_write_leaves_no_file(tmp_path, monkeypatch):
    import pyogrio

    def boom(*a, **k):
        open(a[1], "w").write("partial")
        raise RuntimeError("disk full")

    monkeypatch.setattr(pyogrio, "write_dataframe", boom)
    r = dpgeo.dbscan_spans((np.array([0.0]), np.array([0.0]), "EPSG:32615"), epsilon=1, radius_m=10,
                           min_points=5, domain=(0, 0, 100, 100), domain_crs="EPSG:32615", crs="EPSG:32615")
    with pytest.raises(dpgeo.OutputError, match="disk full"):
        r.to_file(tmp_path / "x.gpkg")
    assert os.listdir(tmp_path) == []


def test_help_has_examples():
    code, out, _ = run_cli("spans", "--help")
    assert code == 0 and "examples:" in out and "--domain" in out


def test_extent_option_reaches_the_output_and_bad_values_are_refused(tmp_path):
    from dpgeo.io import read_layer_metadata

    bad = tmp_path / "bad.gpkg"
    code, _, err = run_cli("spans", SAMPLE_POINTS, "-o", bad, *SPANS, "--domain", SAMPLE_AREA, "--extent", "wide")
    assert code == 2 and "--extent" in err and not bad.exists()
    out = tmp_path / "core.gpkg"
    assert main(["spans", str(SAMPLE_POINTS), "-o", str(out), *SPANS, "--domain", str(SAMPLE_AREA),
                 "--extent", "core", "--seed", "3", "-q"]) == 0
    md = read_layer_metadata(out)
    assert md["extent"] == "core" and md["extent_threshold"] == md["core_threshold"]
    assert md["n_core_cells"] == md["n_span_cells"]
