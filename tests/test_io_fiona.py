"""The fiona engine: the same points in, the same GeoPackage and metadata out as with pyogrio."""

import os
import shutil
import sqlite3
import subprocess
import sys

import geopandas as gpd
import numpy as np
import pandas as pd
import pytest
import shapely

fiona = pytest.importorskip("fiona")

import dpgeo  # noqa: E402
from dpgeo.cli import main  # noqa: E402
from dpgeo.io import check_engine, read_layer_metadata, read_points  # noqa: E402
from helpers import SAMPLE_AREA, SAMPLE_POINTS  # noqa: E402

SPANS = dict(epsilon=1, radius_m=150, min_points=40, domain=SAMPLE_AREA)
SPANS_CLI = ["--epsilon", "1", "--radius", "150", "--min-points", "40", "--domain", str(SAMPLE_AREA)]


@pytest.fixture(scope="module")
def stops():
    """5,000 sample points with a person column (string ids, some missing)."""
    g = gpd.read_file(SAMPLE_POINTS).iloc[:5000][["geometry"]].copy()
    person = np.array([f"p{i % 613}" for i in range(len(g))], dtype=object)
    person[::250] = None
    g["person"] = person
    return g


@pytest.fixture(scope="module")
def result(stops):
    # fixed seed: reproducible, and marked not private, as every test run must be
    return dpgeo.dbscan_spans(stops, seed=11, **SPANS)


@pytest.fixture(scope="module")
def written(result, tmp_path_factory):
    """The same result written once by each engine."""
    d = tmp_path_factory.mktemp("engines")
    return {e: result.to_file(d / f"spans_{e}.gpkg", engine=e) for e in ("pyogrio", "fiona")}


def _no_pyogrio(monkeypatch):
    monkeypatch.setitem(sys.modules, "pyogrio", None)


# -- reading ------------------------------------------------------------------------------

@pytest.mark.parametrize("ext", ["gpkg", "geojson", "shp"])
def test_fiona_reads_the_same_points_as_pyogrio(tmp_path, stops, ext):
    path = tmp_path / f"in.{ext}"
    stops.to_file(path)
    a = read_points(path, engine="pyogrio", person="person")
    b = read_points(path, engine="fiona", person="person")
    assert b.n_read == a.n_read == 5000 and b.n_dropped == a.n_dropped == 20  # the rows without a person
    assert np.array_equal(a.x, b.x) and np.array_equal(a.y, b.y)
    assert list(a.person) == list(b.person)
    assert a.crs.equals(b.crs) and b.crs.to_epsg() == 4326
    # without a person column every point is kept
    c = read_points(path, engine="fiona")
    assert c.x.size == 5000 and c.person is None and np.array_equal(np.sort(c.x), np.sort(stops.geometry.x.to_numpy()))


def test_fiona_drops_empty_and_null_geometries(tmp_path):
    p = tmp_path / "pts.gpkg"
    geoms = [shapely.Point(-93.27, 44.98), shapely.Point(), None, shapely.Point(-93.26, 44.97)]
    gpd.GeoDataFrame({"a": [1, 2, 3, 4]}, geometry=geoms, crs=4326).to_file(p)
    a, b = read_points(p, engine="pyogrio"), read_points(p, engine="fiona")
    assert b.n_read == 4 and b.x.size == 2 and b.n_dropped == 2
    assert np.array_equal(a.x, b.x) and np.array_equal(a.y, b.y)


@pytest.mark.filterwarnings("ignore:'crs' was not provided")
def test_fiona_input_errors(tmp_path, stops):
    lines = tmp_path / "lines.gpkg"
    gpd.GeoDataFrame({"a": [1]}, geometry=[shapely.LineString([(-93.3, 44.9), (-93.2, 45.0)])],
                     crs=4326).to_file(lines)
    with pytest.raises(dpgeo.InputError, match="LineString"):
        read_points(lines, engine="fiona")
    pts = tmp_path / "pts.gpkg"
    stops.iloc[:10].to_file(pts)
    with pytest.raises(dpgeo.InputError, match="person column 'who'"):
        read_points(pts, engine="fiona", person="who")
    nocrs = tmp_path / "nocrs.shp"
    gpd.GeoDataFrame({"a": [1]}, geometry=[shapely.Point(480000, 4980000)]).to_file(nocrs)
    with pytest.raises(dpgeo.InputError, match="--input-crs"):
        read_points(nocrs, engine="fiona")
    assert read_points(nocrs, engine="fiona", input_crs="EPSG:26915").crs.to_epsg() == 26915
    empty = tmp_path / "empty.gpkg"
    gpd.GeoDataFrame({"a": []}, geometry=gpd.GeoSeries([], crs=4326)).to_file(empty)
    with pytest.raises(dpgeo.InputError, match="no records"):
        read_points(empty, engine="fiona")
    junk = tmp_path / "junk.gpkg"
    junk.write_text("not a geopackage")
    with pytest.raises(dpgeo.InputError, match="cannot read"):
        read_points(junk, engine="fiona")


# -- writing ------------------------------------------------------------------------------

def test_fiona_writes_the_same_geopackage(written):
    pg, fi = written["pyogrio"], written["fiona"]
    # the layer: same name, columns, types, CRS and geometries
    a, b = gpd.read_file(pg, layer="spans_pyogrio"), gpd.read_file(fi, layer="spans_fiona")
    assert len(a) >= 1 and list(a.columns) == list(b.columns)
    assert (a.dtypes == b.dtypes).all() and a.crs == b.crs and a.crs.to_epsg() == 32615
    pd.testing.assert_frame_equal(a.drop(columns="geometry"), b.drop(columns="geometry"))
    assert shapely.equals_exact(np.asarray(a.geometry.values), np.asarray(b.geometry.values), 0).all()
    assert set(b.geom_type) == {"MultiPolygon"}
    # gpkg_contents: identifier = layer name, description = the one-line summary
    rows = {}
    for e, path in written.items():
        with sqlite3.connect(path) as con:
            rows[e] = con.execute("SELECT table_name, identifier, description FROM gpkg_contents "
                                  "WHERE data_type = 'features'").fetchall()  # (and the QGIS style's table)
    assert rows["fiona"] == [("spans_fiona", "spans_fiona", rows["pyogrio"][0][2])]
    assert "differentially_private=false" in rows["fiona"][0][2]


def test_metadata_reads_back_with_either_engine(written, result):
    import pyogrio

    mds = {(w, r): read_layer_metadata(path, engine=r) for w, path in written.items() for r in ("pyogrio", "fiona")}
    first = next(iter(mds.values()))
    assert all(md == first for md in mds.values())
    assert first["method"] == "dbscan_spans" and first["differentially_private"] is False
    assert first == result.metadata  # the JSON round trip is lossless
    # the raw GDAL layer metadata items are identical (what QGIS and ogrinfo show)
    tags = [pyogrio.read_info(p).get("layer_metadata") for p in written.values()]
    assert tags[0] == tags[1] and tags[1]["DIFFERENTIALLY_PRIVATE"] == "FALSE"


@pytest.mark.parametrize("engine", ["pyogrio", "fiona"])
def test_metadata_of_foreign_files_is_refused(tmp_path, stops, engine):
    plain = tmp_path / "plain.gpkg"
    stops.iloc[:5].to_file(plain)
    with pytest.raises(dpgeo.InputError, match="no dpgeo metadata"):
        read_layer_metadata(plain, engine=engine)
    junk = tmp_path / "junk.gpkg"
    junk.write_text("not a geopackage")
    with pytest.raises(dpgeo.InputError, match="cannot read the metadata"):
        read_layer_metadata(junk, engine=engine)


@pytest.mark.skipif(shutil.which("ogrinfo") is None, reason="GDAL's ogrinfo is not installed")
def test_ogrinfo_sees_the_fiona_metadata(written):
    out = subprocess.run(["ogrinfo", "-so", "-al", str(written["fiona"])], capture_output=True, text=True,
                         check=True).stdout
    assert "DIFFERENTIALLY_PRIVATE=FALSE" in out and '  dpgeo={"mechanism"' in out


def test_fiona_writes_an_empty_layer_with_metadata(tmp_path):
    r = dpgeo.dbscan_spans((np.array([0.0]), np.array([0.0]), "EPSG:32615"), epsilon=1, radius_m=10,
                           min_points=5, domain=(0, 0, 100, 100), domain_crs="EPSG:32615", crs="EPSG:32615", seed=1)
    assert len(r.layer) == 0
    out = r.to_file(tmp_path / "empty.gpkg", engine="fiona")
    assert read_layer_metadata(out, engine="pyogrio") == read_layer_metadata(out, engine="fiona") == r.metadata
    assert len(gpd.read_file(out)) == 0


def test_failed_fiona_write_leaves_no_file(tmp_path, monkeypatch, result):
    from fiona.collection import Collection

    def boom(self, records):
        assert os.path.exists(self.path)  # the driver has created the (temporary) file by now
        raise RuntimeError("disk full")

    monkeypatch.setattr(Collection, "writerecords", boom)
    with pytest.raises(dpgeo.OutputError, match="disk full"):
        result.to_file(tmp_path / "x.gpkg", engine="fiona")
    assert os.listdir(tmp_path) == []


# -- choosing the engine --------------------------------------------------------------------

def test_auto_falls_back_to_fiona_without_pyogrio(tmp_path, monkeypatch, stops, result):
    src = tmp_path / "in.gpkg"
    stops.to_file(src)
    expected = read_points(src, engine="pyogrio")
    _no_pyogrio(monkeypatch)
    assert check_engine("auto", read=src) == "fiona"
    with pytest.raises(ImportError):
        import pyogrio  # noqa: F401
    t = read_points(src)
    assert np.array_equal(t.x, expected.x) and np.array_equal(t.y, expected.y)
    out = result.to_file(tmp_path / "o.gpkg")
    assert read_layer_metadata(out) == result.metadata
    with pytest.raises(dpgeo.InputError, match="pip install pyogrio"):
        read_points(src, engine="pyogrio")


def test_a_missing_engine_says_what_to_install(tmp_path, monkeypatch, result, written):
    monkeypatch.setitem(sys.modules, "fiona", None)
    with pytest.raises(dpgeo.InputError, match="pip install fiona"):
        read_points(SAMPLE_POINTS, engine="fiona")
    with pytest.raises(dpgeo.InputError, match="pip install fiona"):
        read_layer_metadata(written["pyogrio"], engine="fiona")
    with pytest.raises(dpgeo.OutputError, match="pip install fiona"):
        result.to_file(tmp_path / "o.gpkg", engine="fiona")
    # asked for by name, it must be there even for formats that need no engine
    with pytest.raises(dpgeo.OutputError, match="pip install fiona"):
        result.to_file(tmp_path / "o.geojson", engine="fiona")
    assert os.listdir(tmp_path) == []
    with pytest.raises(dpgeo.ParameterError, match="'auto', 'pyogrio', 'fiona'"):
        read_points(SAMPLE_POINTS, engine="gdal")
    # with neither binding, GDAL formats fail up front, CSV in and GeoJSON out still work
    _no_pyogrio(monkeypatch)
    with pytest.raises(dpgeo.InputError, match="pyogrio or fiona"):
        read_points(SAMPLE_POINTS)
    with pytest.raises(dpgeo.OutputError, match="pyogrio or fiona"):
        result.to_file(tmp_path / "o.gpkg")
    csv = tmp_path / "p.csv"
    csv.write_text("lon,lat\n-93.27,44.98\n-93.26,44.97\n")
    assert read_points(csv).x.size == 2
    assert check_engine("auto", read=csv, write=tmp_path / "o.geojson") is None
    assert read_layer_metadata(result.to_file(tmp_path / "o.geojson")) == result.metadata


# -- command line --------------------------------------------------------------------------

def _pyogrio_must_not_be_used(monkeypatch):
    import pyogrio

    def boom(*a, **k):
        raise AssertionError("pyogrio was used although --engine fiona was given")

    for name in ("read_arrow", "read_dataframe", "write_dataframe", "read_info", "list_layers"):
        monkeypatch.setattr(pyogrio, name, boom)


def test_cli_engine_fiona_end_to_end(tmp_path, monkeypatch, stops, capsys):
    src = tmp_path / "stops.gpkg"
    stops.to_file(src)
    engine_before = gpd.options.io_engine
    _pyogrio_must_not_be_used(monkeypatch)
    out = tmp_path / "spans.gpkg"
    assert main(["spans", str(src), "-o", str(out), *SPANS_CLI, "--seed", "11", "--engine", "fiona", "-q",
                 "--person", "person", "--max-points-per-person", "3"]) == 0
    assert out.exists() and gpd.options.io_engine == engine_before
    md = read_layer_metadata(out, engine="fiona")
    assert md["epsilon"] == 1.0 and md["privacy_unit"] == "person" and md["differentially_private"] is False
    assert main(["info", str(out), "--engine", "fiona"]) == 0
    assert "differentially private" in capsys.readouterr().out
    assert main(["wavecluster", str(src), "-o", str(tmp_path / "w.gpkg"), "--epsilon", "1", "--cell", "400",
                 "--domain", str(SAMPLE_AREA), "--seed", "2", "--engine", "fiona", "-q"]) == 0
    assert read_layer_metadata(tmp_path / "w.gpkg", engine="fiona")["method"] == "privthr"
    assert main(["preview", "--epsilon", "1", "--radius", "150", "--min-points", "40", "--domain",
                 str(SAMPLE_AREA), "--engine", "fiona", "--json"]) == 0
    pytest.importorskip("matplotlib")
    assert main(["compare", str(src), "-o", str(tmp_path / "c.png"), *SPANS_CLI, "--seed", "3", "--engine", "fiona",
                 "-q"]) == 0
    assert (tmp_path / "c.png").exists() and gpd.options.io_engine == engine_before


def test_cli_missing_engine_fails_before_reading(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "fiona", None)

    def no_read(*a, **k):
        raise AssertionError("the input was read")

    monkeypatch.setattr("dpgeo.counting.readers.read_points", no_read)
    out = tmp_path / "o.gpkg"
    assert main(["spans", str(SAMPLE_POINTS), "-o", str(out), *SPANS_CLI, "--engine", "fiona"]) == 2
    err = capsys.readouterr().err
    assert "pip install fiona" in err and len(err.strip().splitlines()) == 1
    assert os.listdir(tmp_path) == []
    with pytest.raises(SystemExit) as exc:
        main(["spans", str(SAMPLE_POINTS), "-o", str(out), *SPANS_CLI, "--engine", "gdal"])
    assert exc.value.code == 2 and "--engine" in capsys.readouterr().err


def test_cli_engine_choices_are_the_library_engines():
    from dpgeo import cli, io

    assert cli._ENGINES == io.ENGINES
