"""DP k-means as a release: ``dpgeo.kmeans`` and ``dpgeo kmeans`` (ledger, person cap, files, noise law).

The mechanism itself is tested in ``test_kmeans.py``; here, what the entry
point adds: validation before any data is read, one ledger charge, the
per-person cap scaling every sensitivity, unattended mode, the metadata and
every output format, and the command line end to end.

Statistical test: one chi-square goodness-of-fit test of the published
``dp_count`` noise at significance 1e-6 (false-failure rate 1e-6; with the
fixed seeds it either passes or fails deterministically), and a companion
showing that the nearest wrong scale (the cap K ignored) fails it.
"""

import json
import math
import os
import subprocess
import sys

import geopandas as gpd
import numpy as np
import pytest
import shapely

import dpgeo
from dpgeo.budget import Ledger
from dpgeo.cli import main
from dpgeo.errors import BudgetExceededError, DataError, DomainError, ParameterError
from helpers import SAMPLE_AREA, SAMPLE_POINTS
from test_kmeans import chi2_pvalue

CRS = "EPSG:32615"
DOMAIN = dict(domain=(0, 0, 2000, 2000), domain_crs=CRS, crs=CRS)
ALPHA = 1e-6
#: Keys every release states, whatever its mechanism (those of dbscan_spans and wavecluster).
COMMON_KEYS = {"mechanism", "method", "differentially_private", "not_private_reasons", "neighbouring_relation",
               "privacy_unit", "sensitivity_points_per_record", "epsilon", "delta", "sampler", "working_crs",
               "domain", "dpgeo_version", "created_utc", "release_id", "dataset", "n_clusters",
               "dp_count_interval"}


def two_blobs(n=2000, seed=0):
    rng = np.random.default_rng(seed)
    x = np.r_[rng.normal(500, 60, n), rng.normal(1500, 60, n)]
    y = np.r_[rng.normal(500, 60, n), rng.normal(1400, 60, n)]
    return x, y


@pytest.fixture
def ledger(tmp_path):
    return Ledger(tmp_path / "ledger.sqlite")


def no_read(*a, **k):
    raise AssertionError("private data was read")


# -- the API ----------------------------------------------------------------------------------------


def test_metadata_has_the_keys_of_every_release_and_the_split_adds_up(ledger):
    x, y = two_blobs()
    res = dpgeo.kmeans((x, y, CRS), epsilon=1.0, k=2, ledger=ledger, dataset="d", **DOMAIN)
    spans = dpgeo.dbscan_spans((x, y, CRS), epsilon=1.0, radius_m=50, min_points=20, ledger=False, dataset="d",
                               **DOMAIN)
    md = res.metadata
    assert COMMON_KEYS <= set(md) and COMMON_KEYS <= set(spans.metadata)
    assert md["method"] == "kmeans" and md["mechanism"].startswith("DP k-means")
    assert md["differentially_private"] is True and md["delta"] == 0.0 and md["epsilon"] == 1.0
    assert md["neighbouring_relation"] == spans.metadata["neighbouring_relation"]
    split = md["epsilon_split"]
    assert split["centroids_total"] + split["layer_counts"] == pytest.approx(1.0)
    assert md["iterations"] * (split["per_iteration_counts"] + split["per_iteration_sums"]) == \
        pytest.approx(split["centroids_total"])
    assert list(res.layer.columns) == ["cluster_id", "dp_count", "dp_count_low", "dp_count_high", "area_m2",
                                       "centroid_x", "centroid_y", "geometry"]
    assert res.layer.crs.to_epsg() == 32615 and len(res.layer) == md["n_clusters"] == 2
    # the centroids are released values (random here: no seed); each lies in its own cell
    for cell, cx, cy in zip(res.layer.geometry, res.layer["centroid_x"], res.layer["centroid_y"]):
        assert cell.covers(shapely.Point(cx, cy))
    assert res.diagnostics["n_used"] == x.size  # owner-only, not in the metadata
    assert "n_used" not in json.dumps(md)


def test_release_is_charged_once_and_writing_is_free(ledger, tmp_path):
    ledger.set_total("clinic", 1.0)
    res = dpgeo.kmeans((*two_blobs(), CRS), epsilon=0.5, k=3, dataset="clinic", ledger=ledger, analyst="ana",
                       **DOMAIN)
    md = res.metadata
    assert md["dataset"] == "clinic" and md["dataset_spent_epsilon"] == 0.5 and md["dataset_total_epsilon"] == 1.0
    rec = ledger.budget("clinic").releases
    assert len(rec) == 1 and rec[0].mechanism == "dp-kmeans" and rec[0].analyst == "ana"
    assert rec[0].status == "completed" and rec[0].release_id == md["release_id"]
    for ext in ("gpkg", "geojson", "html", "png"):
        res.to_file(tmp_path / f"k.{ext}")
    assert ledger.budget("clinic").spent_epsilon == 0.5


def test_refusal_beyond_the_budget_reads_no_data(ledger, monkeypatch):
    import dpgeo.pipeline.run as pk  # where the release pipeline binds count_points

    ledger.set_total("clinic", 0.4)
    monkeypatch.setattr(pk, "count_points", no_read)
    with pytest.raises(BudgetExceededError, match="0.4 is left"):
        dpgeo.kmeans((*two_blobs(), CRS), epsilon=0.5, k=2, dataset="clinic", ledger=ledger, **DOMAIN)
    assert list(ledger.budget("clinic").releases) == []


@pytest.mark.parametrize("kw, match", [
    (dict(k=0), "k .number of clusters"),
    (dict(k=2.5), "k .number of clusters"),
    (dict(epsilon=0), "epsilon"),
    (dict(layer_share=1.0), "layer_share"),
    (dict(iterations=0), "iterations"),
    (dict(count_share=0), "count_share"),
    (dict(max_points_per_person=3), "needs person"),
    (dict(person="driver"), "needs max_points_per_person"),
    (dict(domain=None), "no study area"),
])
def test_bad_parameters_are_refused_before_the_ledger_and_the_data(ledger, monkeypatch, kw, match):
    import dpgeo.pipeline.run as pk  # where the release pipeline binds count_points

    monkeypatch.setattr(pk, "count_points", no_read)
    args = dict(epsilon=1.0, k=2, dataset="d", ledger=ledger, **DOMAIN)
    args.update(kw)
    with pytest.raises((ParameterError, DomainError), match=match):
        dpgeo.kmeans((*two_blobs(), CRS), **args)
    assert list(ledger.budget("d").releases) == []


def test_seeded_and_data_extent_runs_are_not_private_and_not_charged(ledger):
    pts = (*two_blobs(), CRS)
    with pytest.warns(dpgeo.NotPrivateWarning, match="seed"):
        a = dpgeo.kmeans(pts, epsilon=1.0, k=2, seed=3, dataset="d", ledger=ledger, **DOMAIN)
    b = dpgeo.kmeans(pts, epsilon=1.0, k=2, seed=3, dataset="d", ledger=ledger, **DOMAIN)
    with pytest.warns(dpgeo.NotPrivateWarning, match="extent"):
        c = dpgeo.kmeans(pts, epsilon=1.0, k=2, domain_from_data=True, crs=CRS, dataset="d", ledger=ledger)
    for r in (a, c):
        assert r.metadata["differentially_private"] is False and r.metadata["not_private_reasons"]
        assert "dataset_spent_epsilon" not in r.metadata
    assert a.layer["dp_count"].tolist() == b.layer["dp_count"].tolist()  # reproducible: a test seed
    assert list(ledger.budget("d").releases) == []


def test_owner_data_error_before_noise_cancels_the_charge(ledger):
    far = np.full(10, 1e7)
    with pytest.raises(DataError, match="none of the 10 usable points"):
        dpgeo.kmeans((far, far, CRS), epsilon=0.5, k=2, dataset="far", ledger=ledger, **DOMAIN)
    b = ledger.budget("far")
    assert b.spent_epsilon == 0 and [r.status for r in b.releases] == ["cancelled"]


def test_unattended_release_does_not_depend_on_whether_there_is_data():
    from test_unattended import DP_DERIVED

    def go(x, y):
        return dpgeo.kmeans((x, y, CRS), epsilon=1.0, k=3, seed=5, unattended=True, ledger=False, **DOMAIN)

    with_data, without = go(*two_blobs()), go(np.full(50, 1e7), np.full(50, 1e7))
    assert with_data.diagnostics.get("owner_warnings") is None
    assert "none of the 50 usable points" in without.diagnostics["owner_warnings"][0]
    a, b = with_data.metadata, without.metadata
    assert set(a) == set(b)
    for key in set(a) - DP_DERIVED:
        assert json.dumps(a[key], sort_keys=True) == json.dumps(b[key], sort_keys=True), key
    assert list(with_data.layer.columns) == list(without.layer.columns) and len(without.layer) >= 1
    assert "none of the" not in json.dumps(b)


def test_person_cap_scales_every_sensitivity_by_k():
    x, y = two_blobs(500)
    person = np.repeat(np.arange(x.size // 4), 4)  # four points per person
    res = dpgeo.kmeans((x, y, CRS), epsilon=1.0, k=2, person=person, max_points_per_person=3, ledger=False,
                       **DOMAIN)
    md = res.metadata
    assert md["privacy_unit"] == "person" and "at most 3 point(s) per person" in md["neighbouring_relation"]
    assert md["sensitivity_count"] == 3 and md["sensitivity_sum_lattice"] == 3 * sum(md["lattice_half_steps"])
    eps_layer = md["epsilon_split"]["layer_counts"]
    assert md["noise_q_layer"] == pytest.approx(math.exp(-eps_layer / 3))
    assert res.diagnostics["n_dropped_by_person_cap"] == x.size // 4 and res.diagnostics["n_used"] == 3 * x.size // 4


def test_published_counts_are_the_mechanism_counts_at_the_cap_and_share(monkeypatch):
    """The bounded check of the end-to-end law below (which runs with --run-slow): the pipeline gives the
    layer's count step ε_layer = ε · layer_share and sensitivity K, and publishes its counts (clipped at 0).
    That step's law at any ε_layer and sensitivity is tested in test_kmeans.py
    (test_layer_counts_have_the_layer_budget)."""
    import dpgeo.mechanisms.kmeans as km

    seen = []
    real = km.cell_counts

    def spy(x, y, centroids, *, plan, rng):
        seen.append((plan, real(x, y, centroids, plan=plan, rng=rng)))
        return seen[-1][1]

    monkeypatch.setattr(km, "cell_counts", spy)
    x, y = two_blobs(150, seed=7)
    person = np.repeat(np.arange(x.size // 2), 2)
    res = dpgeo.kmeans((x, y, CRS), epsilon=2.0, k=2, layer_share=0.5, person=person, max_points_per_person=2,
                       seed=3, ledger=False, **DOMAIN)
    assert len(seen) == 1
    plan, counts = seen[0]
    assert plan.sensitivity == 2 and plan.epsilon_layer == pytest.approx(1.0)
    ids = res.layer["cluster_id"].to_numpy()
    assert res.layer["dp_count"].tolist() == np.maximum(counts[ids - 1], 0).tolist()
    assert res.metadata["noise_q_layer"] == pytest.approx(math.exp(-1.0 / 2))


@pytest.mark.slow
def test_published_counts_have_the_documented_noise_scale():
    """dp_count − true count of each released cell ~ discrete Laplace with q = exp(−ε_layer / K).

    Per person cap K = 2 (every person has exactly 2 points, so none is dropped and the true count of a
    cell is the number of points in it). Cells with fewer than 60 true points are left out (a rule on the
    true counts only, so the noise of the others is not selected on; at q ≈ 0.61 a draw below −60 has
    probability < 1e-12, so ``max(count, 0)`` never clips). False-failure rate: 1e-6.
    """
    x, y = two_blobs(150, seed=7)
    person = np.repeat(np.arange(x.size // 2), 2)
    eps, share, cap = 2.0, 0.5, 2
    z = []
    for seed in range(700):
        res = dpgeo.kmeans((x, y, CRS), epsilon=eps, k=2, layer_share=share, person=person,
                           max_points_per_person=cap, seed=seed, ledger=False, **DOMAIN)
        ids = res.layer["cluster_id"].to_numpy()
        true = np.bincount(res.cells.label_points(x, y), minlength=ids.max() + 1)[ids]
        big = true >= 60
        z.append(res.layer["dp_count"].to_numpy()[big] - true[big])
    z = np.concatenate(z)
    assert z.size > 1000
    q = math.exp(-eps * share / cap)
    assert res.metadata["noise_q_layer"] == pytest.approx(q)
    assert chi2_pvalue(z, q, 12) > ALPHA
    assert chi2_pvalue(z, math.exp(-eps * share), 12) < ALPHA  # the cap K ignored (Δ = 1)
    assert chi2_pvalue(z, math.exp(-0.1 * eps / cap), 12) < ALPHA  # the default layer share, not the one given


# -- the command line -------------------------------------------------------------------------------

KM = ["--epsilon", "1", "--k", "5", "--domain", str(SAMPLE_AREA)]


def _cli(*args, cwd, env=None):
    exe = os.path.join(os.path.dirname(sys.executable), "dpgeo")
    return subprocess.run([exe, *map(str, args)], capture_output=True, text=True, cwd=cwd,
                          env=dict(os.environ, **(env or {})))


def test_cli_one_release_in_every_format(tmp_path):
    env = {"DPGEO_LEDGER": str(tmp_path / "l.sqlite")}
    outs = ["k.gpkg", "k.geojson", "k.html", "k.png"]
    r = _cli("kmeans", SAMPLE_POINTS, *[a for o in outs for a in ("-o", o)], *KM, "--dataset", "stops",
             cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr
    assert "privacy budget of dataset 'stops': epsilon 1 spent so far" in r.stderr
    assert "5 clusters" in r.stderr and "differentially_private=true" in r.stderr
    g1, g2 = gpd.read_file(tmp_path / "k.gpkg"), gpd.read_file(tmp_path / "k.geojson")
    assert len(g1) == len(g2) == 5 and g1.dp_count.tolist() == g2.dp_count.tolist()
    assert {"centroid_x", "centroid_y", "dp_count_low", "dp_count_high"} <= set(g1.columns)
    mds = [dpgeo.read_layer_metadata(tmp_path / o) for o in outs]
    assert len({m["release_id"] for m in mds}) == 1 and all(m["method"] == "kmeans" for m in mds)
    rec = Ledger(tmp_path / "l.sqlite").budget("stops").releases
    assert len(rec) == 1 and rec[0].mechanism == "dp-kmeans" and sorted(map(os.path.basename, rec[0].outputs)) \
        == sorted(outs)
    # the cells cover the study area: the Voronoi partition clipped to it
    area = gpd.read_file(SAMPLE_AREA).to_crs(g1.crs).geometry.area.sum()
    assert g1.geometry.area.sum() == pytest.approx(area, rel=1e-6)


def test_cli_person_cap_with_a_real_file(tmp_path):
    x, y = two_blobs(300)
    pts = gpd.GeoDataFrame({"driver": np.repeat(np.arange(x.size // 3), 3)},
                           geometry=gpd.points_from_xy(x, y), crs=CRS)
    pts.to_file(tmp_path / "trips.gpkg")
    before = (tmp_path / "trips.gpkg").read_bytes()
    assert main(["kmeans", str(tmp_path / "trips.gpkg"), "-o", str(tmp_path / "k.geojson"), "--epsilon", "1",
                 "--k", "2", "--person", "driver", "--max-points-per-person", "2", "--domain", "0,0,2000,2000",
                 "--domain-crs", CRS, "--crs", CRS, "--ledger", str(tmp_path / "l.sqlite"), "-q"]) == 0
    md = dpgeo.read_layer_metadata(tmp_path / "k.geojson")
    assert md["privacy_unit"] == "person" and "column 'driver'" in md["neighbouring_relation"]
    assert md["sensitivity_count"] == 2
    assert (tmp_path / "trips.gpkg").read_bytes() == before  # the input is untouched


@pytest.mark.parametrize("args, message", [
    (["--epsilon", "1", "--k", "0"], "k (number of clusters) must be an integer"),
    (["--epsilon", "1", "--k", "3", "--layer-share", "1.5"], "--layer-share"),
    (["--epsilon", "-1", "--k", "3"], "epsilon"),
    (["--epsilon", "1", "--k", "3", "--max-points-per-person", "2"], "needs person"),
    (["--epsilon", "1", "--k", "3", "--domain", None], "no study area"),
    (["--epsilon", "1", "--k", "3", "-o", "{tmp}/x.shp"], "output"),
    (["--epsilon", "1", "--k", "3", "--domain", "{tmp}/missing.geojson"], "missing.geojson"),
])
def test_cli_bad_input_is_one_line_exit_2_and_nothing_written(tmp_path, capsys, monkeypatch, args, message):
    monkeypatch.setattr("dpgeo.counting.readers.read_points", no_read)
    args = [a.format(tmp=tmp_path) if isinstance(a, str) else a for a in args]
    if None in args:  # no --domain at all
        i = args.index("--domain")
        args = args[:i] + args[i + 2:]
    elif "--domain" not in args:
        args += ["--domain", str(SAMPLE_AREA)]
    argv = ["kmeans", str(SAMPLE_POINTS), "-o", str(tmp_path / "k.gpkg"), *args, "--ledger",
            str(tmp_path / "l.sqlite")]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("dpgeo: error:") and message in err, err
    assert sorted(os.listdir(tmp_path)) == []


def test_cli_missing_input_and_missing_k(tmp_path, capsys):
    assert main(["kmeans", str(tmp_path / "nope.gpkg"), "-o", str(tmp_path / "k.gpkg"), *KM]) == 2
    assert "does not exist" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["kmeans", str(SAMPLE_POINTS), "-o", str(tmp_path / "k.gpkg"), "--epsilon", "1",
              "--domain", str(SAMPLE_AREA)])
    assert exc.value.code == 2 and "--k" in capsys.readouterr().err
    assert os.listdir(tmp_path) == []


def test_cli_refused_release_reads_and_writes_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("DPGEO_LEDGER", str(tmp_path / "l.sqlite"))
    Ledger().set_total("stops", 0.5)
    monkeypatch.setattr("dpgeo.counting.readers.read_points", no_read)
    assert main(["kmeans", str(SAMPLE_POINTS), "-o", str(tmp_path / "k.gpkg"), *KM, "--dataset", "stops"]) == 2
    err = capsys.readouterr().err
    assert "0.5 is left" in err and len(err.strip().splitlines()) == 1
    assert sorted(os.listdir(tmp_path)) == ["l.sqlite"]
