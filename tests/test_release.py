"""One release, many files, one charge: the pipeline, the ledger and the command line together."""

import json
import os
import subprocess
import sys

import geopandas as gpd
import numpy as np
import pytest

import dpgeo
from dpgeo.budget import Ledger
from dpgeo.cli import main
from dpgeo.errors import BudgetExceededError, BudgetWarning, DataError
from helpers import SAMPLE_AREA, SAMPLE_POINTS

SPANS = ["--epsilon", "1", "--radius", "150", "--min-points", "40", "--domain", str(SAMPLE_AREA)]
CRS = "EPSG:32615"
KW = dict(epsilon=0.5, radius_m=50, min_points=20, domain=(0, 0, 2000, 2000), domain_crs=CRS, crs=CRS)


def blob(n=3000, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(500, 30, n), rng.normal(500, 30, n), CRS


@pytest.fixture
def ledger(tmp_path):
    return Ledger(tmp_path / "ledger.sqlite")


def test_api_release_is_charged_once_and_recorded(ledger):
    ledger.set_total("clinic", 1.0)
    res = dpgeo.dbscan_spans(blob(), dataset="clinic", ledger=ledger, analyst="ana", **KW)
    md = res.metadata
    assert md["dataset"] == "clinic" and md["dataset_spent_epsilon"] == 0.5 and md["dataset_total_epsilon"] == 1.0
    b = ledger.budget("clinic")
    assert [r.release_id for r in b.releases] == [md["release_id"]]
    assert b.releases[0].status == "completed" and b.releases[0].analyst == "ana"
    assert b.releases[0].mechanism == "dp-dbscan-spans"
    # writing the release again, in any number of files, is free
    for _ in range(3):
        res.to_file(os.path.join(os.path.dirname(ledger.path), "x.geojson"))
    assert ledger.budget("clinic").spent_epsilon == 0.5


def test_api_refusal_reads_no_data(ledger, monkeypatch):
    ledger.set_total("clinic", 0.4)
    import dpgeo.pipeline.run as pl  # where the release pipeline binds count_points

    def no_read(*a, **k):
        raise AssertionError("private data was read")

    monkeypatch.setattr(pl, "count_points", no_read)
    with pytest.raises(BudgetExceededError, match="0.4 is left"):
        dpgeo.dbscan_spans(blob(), dataset="clinic", ledger=ledger, **KW)
    assert list(ledger.budget("clinic").releases) == []


def test_owner_data_error_before_noise_cancels_the_charge(ledger):
    x = np.full(10, 1e7)
    with pytest.raises(DataError):
        dpgeo.dbscan_spans((x, x, CRS), dataset="far", ledger=ledger, **KW)
    b = ledger.budget("far")
    assert b.spent_epsilon == 0 and [r.status for r in b.releases] == ["cancelled"]


def test_failure_after_noise_stays_charged(ledger, monkeypatch):
    import dpgeo.declarations.spans as pl  # where dbscan_spans binds cluster_polygons

    def broken(*a, **k):
        raise RuntimeError("polygons failed")

    monkeypatch.setattr(pl, "cluster_polygons", broken)
    with pytest.raises(RuntimeError):
        dpgeo.dbscan_spans(blob(), dataset="d", ledger=ledger, **KW)
    b = ledger.budget("d")
    assert b.spent_epsilon == 0.5 and [r.status for r in b.releases] == ["failed"]


def test_not_private_runs_are_not_charged(ledger):
    dpgeo.dbscan_spans(blob(), dataset="d", ledger=ledger, seed=1, **KW)
    dpgeo.wavecluster(blob(), method="exact", cell_m=50, dataset="d", ledger=ledger,
                      **{k: v for k, v in KW.items() if k not in ("epsilon", "radius_m", "min_points")})
    assert list(ledger.budget("d").releases) == []


def test_wavecluster_release_is_charged(ledger):
    kw = {k: v for k, v in KW.items() if k not in ("radius_m", "min_points")}
    res = dpgeo.wavecluster(blob(), method="privthr", cell_m=50, dataset="w", ledger=ledger, **kw)
    rec = ledger.budget("w").releases
    assert len(rec) == 1 and rec[0].mechanism == "dp-wavecluster-privthr"
    assert res.metadata["release_id"] == rec[0].release_id


def test_unnamed_in_memory_runs_share_a_key_and_every_one_says_that_nothing_limits_it(ledger, tmp_path):
    for _ in range(2):  # on every run, not only the first: nothing limits the spending of either
        with pytest.warns(BudgetWarning) as caught:
            res = dpgeo.dbscan_spans(blob(), ledger=ledger, **KW)
        text = " ".join(str(w.message) for w in caught)
        assert "in-memory" in text and "nothing limits" in text
    assert ledger.budget("unnamed in-memory data").spent_epsilon == 2 * KW["epsilon"]
    assert "dataset" not in res.metadata  # a key the owner did not choose is published as nothing


def test_ledger_false_records_nothing_but_still_identifies_the_release(tmp_path):
    res = dpgeo.dbscan_spans(blob(), ledger=False, **KW)
    assert len(res.metadata["release_id"]) == 32 and "dataset_spent_epsilon" not in res.metadata


def _cli(*args, cwd, env=None):
    exe = os.path.join(os.path.dirname(sys.executable), "dpgeo")
    return subprocess.run([exe, *map(str, args)], capture_output=True, text=True, cwd=cwd,
                          env=dict(os.environ, **(env or {})))


def test_cli_one_release_many_outputs_and_export(tmp_path):
    env = {"DPGEO_LEDGER": str(tmp_path / "l.sqlite")}
    r = _cli("spans", SAMPLE_POINTS, "-o", "a.gpkg", "-o", "a.geojson", *SPANS, "--dataset", "stops",
             cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr
    assert "privacy budget of dataset 'stops': epsilon 1 spent so far" in r.stderr
    g1, g2 = gpd.read_file(tmp_path / "a.gpkg"), gpd.read_file(tmp_path / "a.geojson")
    # the same clusters and noisy counts in both files: one release
    assert g1.dp_count.tolist() == g2.dp_count.tolist() and len(g1) == len(g2) >= 1
    md1, md2 = dpgeo.read_layer_metadata(tmp_path / "a.gpkg"), dpgeo.read_layer_metadata(tmp_path / "a.geojson")
    assert md1["release_id"] == md2["release_id"] and md1["dataset"] == "stops"
    rec = Ledger(tmp_path / "l.sqlite").budget("stops").releases
    assert len(rec) == 1 and sorted(map(os.path.basename, rec[0].outputs)) == ["a.geojson", "a.gpkg"]
    # export: another format and CRS, no data read, no budget spent, metadata carried over
    r = _cli("export", "a.gpkg", "-o", "b.geojson", "-o", "c.gpkg", "--out-crs", "EPSG:3857", cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr
    assert "no budget spent" in r.stderr
    assert dpgeo.read_layer_metadata(tmp_path / "b.geojson")["release_id"] == md1["release_id"]
    c = gpd.read_file(tmp_path / "c.gpkg")
    assert c.crs.to_epsg() == 3857 and c.dp_count.tolist() == g1.dp_count.tolist()
    assert Ledger(tmp_path / "l.sqlite").budget("stops").spent_epsilon == 1
    code, out, _ = (lambda p: (p.returncode, p.stdout, p.stderr))(_cli("info", "b.geojson", "--json", cwd=tmp_path))
    assert code == 0 and json.loads(out)["dataset"] == "stops"


def test_cli_refused_release_reads_and_writes_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("DPGEO_LEDGER", str(tmp_path / "l.sqlite"))
    Ledger().set_total("stops", 0.5)

    def no_read(*a, **k):
        raise AssertionError("private data was read")

    monkeypatch.setattr("dpgeo.counting.readers.read_points", no_read)
    out = tmp_path / "a.gpkg"
    assert main(["spans", str(SAMPLE_POINTS), "-o", str(out), *SPANS, "--dataset", "stops"]) == 2
    err = capsys.readouterr().err
    assert "0.5 is left" in err and len(err.strip().splitlines()) == 1
    assert sorted(os.listdir(tmp_path)) == ["l.sqlite"] or not out.exists()


def test_cli_same_output_twice_is_refused_before_reading(tmp_path, capsys):
    assert main(["spans", str(SAMPLE_POINTS), "-o", str(tmp_path / "a.gpkg"), "-o",
                 str(tmp_path / "." / "a.gpkg"), *SPANS, "--ledger", str(tmp_path / "l.sqlite")]) == 2
    assert "given twice" in capsys.readouterr().err
    assert not (tmp_path / "l.sqlite").exists()


def test_export_refuses_a_non_dpgeo_file(tmp_path, capsys):
    p = tmp_path / "plain.geojson"
    p.write_text('{"type": "FeatureCollection", "features": []}')
    assert main(["export", str(p), "-o", str(tmp_path / "x.gpkg")]) == 2
    assert "no dpgeo metadata" in capsys.readouterr().err
    assert not (tmp_path / "x.gpkg").exists()


@pytest.mark.parametrize("engine", ["pyogrio", "fiona"])
def test_outputs_carry_the_day_of_the_release_never_a_time_of_day(ledger, tmp_path, engine):
    """A time to the second would measure the run (and run time grows with the data): only the UTC day."""
    import datetime as dt
    import re
    import sqlite3

    pytest.importorskip(engine)
    res = dpgeo.dbscan_spans(blob(), dataset="clinic", ledger=ledger, **KW)
    day = dt.datetime.now(dt.timezone.utc).date().isoformat()
    assert res.metadata["created_utc"] in (day, (dt.date.fromisoformat(day) - dt.timedelta(days=1)).isoformat())
    out = res.to_file(tmp_path / "spans.gpkg", engine=engine)
    with sqlite3.connect(out) as conn:
        stamps = [r[0] for r in conn.execute("SELECT last_change FROM gpkg_contents")]
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "gpkg_metadata_reference" in tables:
            stamps += [r[0] for r in conn.execute("SELECT timestamp FROM gpkg_metadata_reference")]
    assert stamps and all(re.fullmatch(r"\d{4}-\d\d-\d\dT00:00:00(\.000)?Z", s) for s in stamps), stamps
    assert dpgeo.io.read_layer_metadata(out)["created_utc"] == res.metadata["created_utc"]


def test_a_release_whose_layer_fails_is_recorded_failed_never_completed(ledger, monkeypatch):
    """WaveCluster made its polygons after completing the charge: a failure there left 'completed' and no file."""
    from dpgeo.declarations import wavecluster as wave

    def broken(*a, **k):
        raise RuntimeError("the layer could not be made")

    monkeypatch.setattr(wave, "cluster_polygons", broken)
    with pytest.raises(RuntimeError):
        dpgeo.wavecluster(blob(), method="privthr", epsilon=0.5, cell_m=50, domain=(0, 0, 2000, 2000),
                          domain_crs=CRS, crs=CRS, dataset="d", ledger=ledger)
    (rec,) = ledger.budget("d").releases
    assert rec.status == "failed" and rec.charged


def test_files_written_from_python_are_recorded_with_the_release(ledger, tmp_path):
    res = dpgeo.dbscan_spans(blob(), dataset="d", ledger=ledger, **KW)
    assert ledger.budget("d").releases[0].outputs == ()
    a = res.to_file(tmp_path / "a.gpkg")
    b = res.to_file(tmp_path / "b.geojson")
    (rec,) = ledger.budget("d").releases
    assert rec.status == "completed" and list(rec.outputs) == [os.path.abspath(a), os.path.abspath(b)]
    assert res.ledger_record["dataset"] == "d" and res.ledger_record["ledger"] == ledger.path
    assert ledger.path not in json.dumps(dpgeo.read_layer_metadata(a))  # owner-side only
