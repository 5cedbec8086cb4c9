"""Owner's mode vs unattended mode: who may learn what from a run (docs/privacy.md, "Who sees what")."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import dpgeo
from dpgeo.errors import DataError, DomainError, OutsideStudyAreaError

CRS = "EPSG:32615"
DOMAIN = dict(domain=(0, 0, 2000, 2000), domain_crs=CRS, crs=CRS)
SPANS = dict(epsilon=1.0, radius_m=50, min_points=20)
#: metadata values computed from the released (noisy) output, or random: allowed to differ between inputs
DP_DERIVED = {"n_clusters", "n_span_cells", "n_core_cells", "noisy_nonpositive_count", "n_positive_noisy",
              "k_prime", "n_significant", "threshold", "k_target", "synthetic", "created_utc", "created",
              "release_id"}  # random per release


def clustered(n=3000, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(500, 30, n), rng.normal(500, 30, n)


def far_away(n=50):
    return np.full(n, 1e7), np.full(n, 1e7)


def test_owner_mode_refuses_no_point_in_the_study_area_before_any_noise(monkeypatch):
    import dpgeo.declarations.spans as pl  # where dbscan_spans binds _release_histogram

    def no_noise(*a, **k):
        raise AssertionError("noise was drawn")

    monkeypatch.setattr(pl, "_release_histogram", no_noise)
    x, y = far_away()
    with pytest.raises(OutsideStudyAreaError, match="none of the 50 usable points") as exc:
        dpgeo.dbscan_spans((x, y, CRS), seed=1, **SPANS, **DOMAIN)
    # an owner-only data condition, and still the DomainError it always was
    assert isinstance(exc.value, DataError) and isinstance(exc.value, DomainError)
    assert exc.value.owner_only
    # an exact count about the private data: labelled for the owner like every other diagnostic
    assert str(exc.value).endswith("(exact, not private: do not publish)")


def test_every_owner_mode_refusal_that_states_counts_carries_the_owner_label(tmp_path):
    x = np.full(20, np.nan)
    with pytest.raises(DataError, match=r"no usable points .*\(exact, not private: do not publish\)$"):
        dpgeo.dbscan_spans((x, x, CRS), **SPANS, **DOMAIN)
    csv = tmp_path / "utm.csv"
    csv.write_text("lon,lat\n" + "\n".join(f"{478000 + i},{4980000 + i}" for i in range(50)) + "\n")
    with pytest.raises(DataError, match=r"in 50 of 50 records.*do not publish\)$"):
        dpgeo.dbscan_spans(str(csv), ledger=False, **SPANS, **DOMAIN)


@pytest.mark.parametrize("run", ["spans", "privthr", "privthr-em", "baseline"])
def test_unattended_success_and_metadata_do_not_depend_on_the_data(run):
    def go(x, y):
        if run == "spans":
            return dpgeo.dbscan_spans((x, y, CRS), seed=3, unattended=True, **SPANS, **DOMAIN)
        return dpgeo.wavecluster((x, y, CRS), method=run, epsilon=1.0, cell_m=50, seed=3, unattended=True,
                                 **DOMAIN)

    with_data = go(*clustered())
    without = go(*far_away())
    assert with_data.diagnostics.get("owner_warnings") is None
    assert "none of the 50 usable points" in without.diagnostics["owner_warnings"][0]
    # the run succeeds either way and its published metadata has the same shape and public values
    a, b = with_data.metadata, without.metadata
    assert set(a) == set(b)
    for key in set(a) - DP_DERIVED:
        assert json.dumps(a[key], sort_keys=True) == json.dumps(b[key], sort_keys=True), key
    assert list(with_data.layer.columns) == list(without.layer.columns)
    # nothing the owner was told reaches the metadata
    text = json.dumps(b)
    assert "owner" not in text and "none of the" not in text


def test_unattended_with_no_usable_record_at_all():
    x = np.full(20, np.nan)
    with pytest.raises(DataError, match="no usable points"):
        dpgeo.dbscan_spans((x, x, CRS), **SPANS, **DOMAIN)
    res = dpgeo.dbscan_spans((x, x, CRS), unattended=True, **SPANS, **DOMAIN)
    assert res.differentially_private and "no usable points" in res.diagnostics["owner_warnings"][0]


def test_unattended_warnings_go_to_the_owner_log_and_only_there(tmp_path):
    """Not to Python's last-resort handler (stderr), not to the root logger's handlers (an application's log,
    here logging.basicConfig on stderr): only to a handler the owner attaches to ``dpgeo.owner``."""
    code = f"""
import logging, sys, numpy as np, dpgeo
logging.basicConfig(level=logging.INFO)
if sys.argv[1] == "attach":
    logging.getLogger("dpgeo.owner").addHandler(logging.FileHandler({str(tmp_path / "owner.log")!r}))
x = np.full(50, 1e7)
dpgeo.dbscan_spans((x, x, "EPSG:32615"), unattended=True, ledger=False, epsilon=1.0, radius_m=50, min_points=20,
                   domain=(0, 0, 2000, 2000), domain_crs="EPSG:32615", crs="EPSG:32615")
"""
    for how in ("plain", "attach"):
        p = subprocess.run([sys.executable, "-c", code, how], capture_output=True, text=True, check=False)
        assert p.returncode == 0 and "usable" not in p.stderr and "publish" not in p.stderr, p.stderr
    assert "none of the 50 usable points" in (tmp_path / "owner.log").read_text()


def _cli(*args, cwd):
    exe = os.path.join(os.path.dirname(sys.executable), "dpgeo")
    return subprocess.run([exe, *map(str, args)], capture_output=True, text=True, cwd=cwd)


def test_cli_unattended_writes_a_layer_when_no_record_is_usable(tmp_path):
    csv = tmp_path / "pts.csv"
    csv.write_text("lon,lat\n" + "nan,nan\n" * 5)
    common = ["spans", csv, "--epsilon", "1", "--radius", "150", "--min-points", "40",
              "--domain=-93.33,44.89,-93.19,45.06"]
    owner = _cli(*common, "-o", tmp_path / "a.geojson", cwd=tmp_path)
    assert owner.returncode == 2 and "no usable points" in owner.stderr
    assert not (tmp_path / "a.geojson").exists()
    unattended = _cli(*common, "-o", tmp_path / "b.geojson", "--unattended", cwd=tmp_path)
    assert unattended.returncode == 0, unattended.stderr
    assert "do not publish" not in unattended.stderr and "usable" not in unattended.stderr  # unattended: no data
    doc = json.loads((tmp_path / "b.geojson").read_text())
    assert doc["type"] == "FeatureCollection" and doc["dpgeo"]["differentially_private"] is True
    assert "no usable" not in json.dumps(doc)


def _odd_record_files(folder):
    """The same 400 points as GeoPackage and CSV, once clean and once with one unusable record among them."""
    import geopandas as gpd
    from shapely.geometry import LineString, Point

    rng = np.random.default_rng(5)
    lon, lat = rng.normal(-93.26, 0.004, 400), rng.normal(44.97, 0.003, 400)
    pts = [Point(a, b) for a, b in zip(lon, lat)]
    files = {}
    for name, odd_geom, odd_csv in (("clean", None, None),
                                    ("odd", LineString([(-93.26, 44.97), (-93.25, 44.98)]), "200.5,44.97")):
        geoms = pts + ([odd_geom] if odd_geom is not None else [])
        gpkg = folder / f"{name}.gpkg"
        gpd.GeoDataFrame(geometry=geoms, crs="EPSG:4326").to_file(gpkg, driver="GPKG")
        csv = folder / f"{name}.csv"
        rows = [f"{float(a)!r},{float(b)!r}" for a, b in zip(lon, lat)] + ([odd_csv] if odd_csv else [])
        csv.write_text("lon,lat\n" + "\n".join(rows) + "\n")
        files[name] = {"gpkg": gpkg, "csv": csv}
    return files


@pytest.mark.parametrize("kind,engine", [("gpkg", "pyogrio"), ("gpkg", "fiona"), ("csv", "auto")])
@pytest.mark.parametrize("unattended", [False, True])
def test_one_unusable_record_is_dropped_and_does_not_change_the_release(tmp_path, kind, engine, unattended):
    """A record that is not a usable point (a line; a longitude of 200.5) must not decide whether a release
    succeeds: that would publish one bit about one record. It is dropped and counted by reason, in both modes."""
    from dpgeo.counting import PointFile

    pytest.importorskip(engine if engine != "auto" else "pyproj")
    files = _odd_record_files(tmp_path)
    area = dict(domain=(-93.33, 44.89, -93.19, 45.06), domain_crs="EPSG:4326")
    args = dict(epsilon=1.0, radius_m=150, min_points=20, seed=2, unattended=unattended, **area)
    clean = dpgeo.dbscan_spans(PointFile(str(files["clean"][kind]), engine=engine), **args)
    odd = dpgeo.dbscan_spans(PointFile(str(files["odd"][kind]), engine=engine), **args)
    assert set(odd.metadata) == set(clean.metadata)  # (not private only for the test seed)
    assert odd.metadata["not_private_reasons"] == clean.metadata["not_private_reasons"]
    assert odd.diagnostics["n_read"] == 401 and odd.diagnostics["n_dropped_invalid"] == 1
    reason = "lon_out_of_range" if kind == "csv" else "non_point"
    assert odd.diagnostics["dropped_by_reason"] == {reason: 1}
    assert clean.diagnostics["n_dropped_invalid"] == 0
    # the same seed and the same usable points: the same release
    assert odd.layer["dp_count"].tolist() == clean.layer["dp_count"].tolist()


@pytest.mark.parametrize("unattended", [False, True])
def test_a_csv_record_that_cannot_be_parsed_is_dropped(tmp_path, unattended):
    from dpgeo.counting import PointFile

    csv = tmp_path / "pts.csv"
    csv.write_text("lon,lat\n" + "-93.26,44.97\n" * 300 + '"-93.25,44.98\n' + "-93.26,44.97\n" * 10)
    area = dict(domain=(-93.33, 44.89, -93.19, 45.06), domain_crs="EPSG:4326", dataset="pts")
    res = dpgeo.dbscan_spans(PointFile(str(csv)), epsilon=1.0, radius_m=150, min_points=20, unattended=unattended,
                             **area)
    assert res.differentially_private and res.diagnostics["n_read"] >= 300  # (how much the quote swallows: the parser)
    assert res.diagnostics["dropped_by_reason"].get("malformed_row", 0) >= 1


def _three_inputs():
    """A normal input, an empty one and one whose every record is bad: the same columns, the same file name."""
    rng = np.random.default_rng(1)
    rows = "\n".join(f"{a:.6f},{b:.6f}" for a, b in zip(rng.normal(-93.26, 0.003, 800), rng.normal(44.97, 0.003, 800)))
    return {"normal": "lon,lat\n" + rows + "\n", "empty": "lon,lat\n", "all bad": "lon,lat\n" + "nan,nan\n" * 30}


_API = """
import sys, dpgeo
dpgeo.dbscan_spans("in.csv", epsilon=1.0, radius_m=150, min_points=20, domain=(-93.33, 44.89, -93.19, 45.06),
                   unattended=True, **({"dataset": sys.argv[1]} if sys.argv[1] else {})).to_file("o.geojson")
"""


@pytest.mark.parametrize("how", ["cli", "cli -q", "cli unnamed", "cli -q unnamed", "api", "api unnamed"])
def test_unattended_stderr_is_the_same_byte_for_byte_whatever_the_data(tmp_path, how):
    """Unattended, nothing that depends on the data reaches stderr, whatever the verbosity: the same bytes for
    a normal input, an empty one and one where every record is bad (the owner's warnings go to the owner's log)."""
    env = dict(os.environ, DPGEO_LEDGER=str(tmp_path / "ledger.sqlite"))
    named = "unnamed" not in how
    seen = {}
    for name, text in _three_inputs().items():
        for f in tmp_path.glob("ledger.sqlite*"):
            f.unlink()  # each run starts from the same ledger state: what stderr says about it is then the same
        (tmp_path / "o.geojson").unlink(missing_ok=True)
        (tmp_path / "in.csv").write_text(text)
        if how.startswith("api"):
            cmd = [sys.executable, "-c", _API, "pts" if named else ""]
        else:
            cmd = [os.path.join(os.path.dirname(sys.executable), "dpgeo"), "spans", "in.csv", "-o", "o.geojson",
                   "--epsilon", "1", "--radius", "150", "--min-points", "20", "--domain=-93.33,44.89,-93.19,45.06",
                   "--unattended"] + (["-q"] if "-q" in how else []) + (["--dataset", "pts"] if named else [])
        p = subprocess.run(cmd, capture_output=True, cwd=tmp_path, env=env, check=False)
        assert p.returncode == 0, p.stderr.decode()
        assert json.loads((tmp_path / "o.geojson").read_text())["dpgeo"]["differentially_private"] is True
        seen[name] = p.stderr
    assert seen["normal"] == seen["empty"] == seen["all bad"], seen
    assert b"usable" not in seen["normal"] and b"do not publish" not in seen["normal"]


# -- heat layers and hot spots: the same guarantees -------------------------------------------------------------------

#: heat metadata computed from the released counts (DP post-processing): allowed to differ between inputs
HEAT_DP_DERIVED = DP_DERIVED | {"hotspot_cutoffs", "hotspot_variance", "hotspot_counts", "bands",
                                "bands_levels_per_cell"}


@pytest.mark.parametrize("run", ["heat", "heat-h3-bands", "hotspots"])
def test_unattended_heat_layers_and_metadata_do_not_depend_on_the_data(run):
    lonlat = dict(domain=(-93.33, 44.89, -93.19, 45.06))

    def go(x, y):
        pts = (x, y, "EPSG:4326")
        if run == "heat":
            return dpgeo.heat(pts, epsilon=1.0, cell_m=500, seed=3, unattended=True, **lonlat)
        if run == "heat-h3-bands":
            return dpgeo.heat(pts, epsilon=1.0, h3_resolution=8, bands=3, seed=3, unattended=True, **lonlat)
        return dpgeo.hotspots(pts, epsilon=1.0, h3_resolution=8, fdr=True, seed=3, unattended=True, **lonlat)

    rng = np.random.default_rng(2)
    with_data = go(rng.normal(-93.26, 0.01, 3000), rng.normal(44.97, 0.01, 3000))
    without = go(np.full(50, 10.0), np.full(50, 10.0))
    assert with_data.diagnostics.get("owner_warnings") is None
    assert "none of the 50 usable points" in without.diagnostics["owner_warnings"][0]
    a, b = with_data.metadata, without.metadata
    assert set(a) == set(b)
    for key in set(a) - HEAT_DP_DERIVED:
        assert json.dumps(a[key], sort_keys=True) == json.dumps(b[key], sort_keys=True), key
    assert list(with_data.layer.columns) == list(without.layer.columns)
    if run != "heat-h3-bands":  # every cell of the study area, whatever the data
        assert len(with_data.layer) == len(without.layer) == a["n_cells"]
    assert "none of the" not in json.dumps(b)


_API_HEAT = """
import sys, dpgeo
kw = dict(h3_resolution=8, bands=3) if sys.argv[2] == "heat" else dict(cell_m=500, fdr=True)
getattr(dpgeo, sys.argv[2])("in.csv", epsilon=1.0, domain=(-93.33, 44.89, -93.19, 45.06), unattended=True,
                            **({"dataset": sys.argv[1]} if sys.argv[1] else {}), **kw).to_file("o.geojson")
"""


@pytest.mark.parametrize("how", ["cli", "cli unnamed", "api unnamed"])
@pytest.mark.parametrize("command", ["heat", "hotspots"])
def test_unattended_heat_stderr_is_the_same_byte_for_byte_whatever_the_data(tmp_path, how, command):
    """As for the spans: a normal input, an empty one and one whose every record is bad give the same stderr."""
    env = dict(os.environ, DPGEO_LEDGER=str(tmp_path / "ledger.sqlite"))
    named = "unnamed" not in how
    opts = ["--h3", "8", "--bands", "3"] if command == "heat" else ["--cell", "500", "--fdr"]
    seen = {}
    for name, text in _three_inputs().items():
        for f in tmp_path.glob("ledger.sqlite*"):
            f.unlink()
        (tmp_path / "o.geojson").unlink(missing_ok=True)
        (tmp_path / "in.csv").write_text(text)
        if how.startswith("api"):
            cmd = [sys.executable, "-c", _API_HEAT, "pts" if named else "", command]
        else:
            cmd = [os.path.join(os.path.dirname(sys.executable), "dpgeo"), command, "in.csv", "-o", "o.geojson",
                   "--epsilon", "1", "--domain=-93.33,44.89,-93.19,45.06", "--unattended", *opts] + \
                (["--dataset", "pts"] if named else [])
        p = subprocess.run(cmd, capture_output=True, cwd=tmp_path, env=env, check=False)
        assert p.returncode == 0, p.stderr.decode()
        assert json.loads((tmp_path / "o.geojson").read_text())["dpgeo"]["differentially_private"] is True
        seen[name] = p.stderr
    assert seen["normal"] == seen["empty"] == seen["all bad"], seen
    assert b"usable" not in seen["normal"] and b"do not publish" not in seen["normal"]
