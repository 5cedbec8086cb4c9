"""A budget that follows the data: datasets declared once, found from the content of any copy of their files.

See docs/budget.md ("Datasets: declare them once") and dpgeo/budget/datasets.py.
"""

import json
import os
import shutil
import sqlite3
import subprocess
import sys

import numpy as np
import pytest
from helpers import SAMPLE_AREA, SAMPLE_POINTS

import dpgeo
from dpgeo.budget import Ledger, store
from dpgeo.budget import fingerprint as fpmod
from dpgeo.errors import BudgetExceededError, BudgetWarning, ParameterError

AREA = dict(domain=(-93.33, 44.89, -93.19, 45.06), domain_crs="EPSG:4326")
SPANS = dict(epsilon=1.0, radius_m=150, min_points=20, **AREA)


def _csv(path, n=3000, seed=0, drop=None):
    rng = np.random.default_rng(seed)
    lon, lat = rng.normal(-93.26, 0.004, n), rng.normal(44.97, 0.003, n)
    rows = [f"{a:.6f},{b:.6f}" for a, b in zip(lon, lat)]
    if drop is not None:
        del rows[drop]
    path.write_text("lon,lat\n" + "\n".join(rows) + "\n")
    return path


def _spans(path, ledger, **kw):
    return dpgeo.dbscan_spans(str(path), ledger=ledger, **SPANS, **kw)


def test_a_copy_of_a_declared_file_is_charged_to_its_dataset_whatever_it_is_called(tmp_path):
    ledger = Ledger(tmp_path / "l.sqlite")
    original = _csv(tmp_path / "stops.csv")
    ledger.declare("stops", [original], total_epsilon=2)
    copy = tmp_path / "elsewhere" / "renamed.csv"
    copy.parent.mkdir()
    shutil.copy(original, copy)
    with pytest.warns(BudgetWarning, match="charged to the declared dataset 'stops'"):
        res = _spans(copy, ledger)
    assert res.metadata["dataset"] == "stops"
    _spans(original, ledger)
    assert ledger.budget("stops").spent_epsilon == 2
    with pytest.raises(BudgetExceededError):  # the total holds for every copy
        _spans(copy, ledger)
    # another name for the same content is refused, and charges nothing
    with pytest.raises(ParameterError, match="declared as dataset 'stops'"):
        _spans(copy, ledger, dataset="other")
    assert ledger.budget("other").releases == ()


def test_an_unnamed_file_and_its_copies_share_one_key_and_declaring_it_takes_over_what_it_spent(tmp_path):
    ledger = Ledger(tmp_path / "l.sqlite")
    a = _csv(tmp_path / "a.csv")
    b = tmp_path / "b.csv"
    shutil.copy(a, b)
    for path in (a, b):
        with pytest.warns(BudgetWarning, match="nothing limits what it spends") as caught:
            res = _spans(path, ledger)
        assert "dpgeo budget declare NAME --file" in str(caught[0].message)
        assert "dataset" not in res.metadata  # a key made from the content is published as nothing
    (key,) = ledger.datasets()
    assert key.startswith("unnamed file ") and ledger.budget(key).spent_epsilon == 2
    budget, notes = ledger.declare("pts", [b], total_epsilon=3)
    assert budget.spent_epsilon == 2 and any("now count towards 'pts'" in n for n in notes)
    assert ledger.datasets() == ["pts"]
    _spans(a, ledger)
    assert ledger.budget("pts").spent_epsilon == 3


def test_declare_is_idempotent_keeps_a_total_and_refuses_a_file_of_another_dataset(tmp_path):
    ledger = Ledger(tmp_path / "l.sqlite")
    f = _csv(tmp_path / "a.csv")
    with pytest.raises(ParameterError, match="--total"):
        ledger.declare("pts", [f])
    ledger.declare("pts", [f], total_epsilon=2)
    b, notes = ledger.declare("pts", [f], total_epsilon=5)  # a set-up script run again
    assert b.total_epsilon == 2 and any("keeps its declared total" in n for n in notes)
    assert ledger.files("pts") == [(os.path.realpath(f), True, f.stat().st_size)]
    # the same file for a second dataset: the owner may, but it is said, and a run must then name one
    _, notes = ledger.declare("other", [f], total_epsilon=1)
    assert any("also declared as dataset 'pts'" in n and "same people" in n for n in notes)
    with pytest.raises(ParameterError, match="declared as datasets 'other' and 'pts'.*name the one"):
        _spans(f, ledger)
    assert _spans(f, ledger, dataset="other").metadata["dataset"] == "other"
    with pytest.raises(ParameterError, match="not 'third'"):
        _spans(f, ledger, dataset="third")


@pytest.mark.parametrize("kind", ["csv", "gpkg"])
def test_a_near_copy_of_a_declared_file_is_charged_to_it_by_its_records(tmp_path, kind):
    """Before reading, the chunk sketch says "near-copy"; once read, its records say which dataset it is."""
    ledger = Ledger(tmp_path / "l.sqlite")
    if kind == "csv":
        declared, near = _csv(tmp_path / "a.csv", n=20000), _csv(tmp_path / "b.csv", n=20000, drop=7000)
    else:
        import geopandas as gpd

        declared, near = tmp_path / "a.gpkg", tmp_path / "b.gpkg"
        shutil.copy(SAMPLE_POINTS, declared)
        shutil.copy(SAMPLE_POINTS, near)
        extra = gpd.read_file(SAMPLE_POINTS, rows=50)
        extra.to_file(near, layer=gpd.list_layers(near)["name"][0], mode="a")  # rows added
    ledger.declare("pts", [declared], total_epsilon=5)
    assert any("near-copy" in n and "'pts'" in n for n in ledger.resolve(near, record=False).notes)
    with pytest.warns(BudgetWarning, match=r"charged to the declared dataset 'pts': the input holds"):
        res = (_spans(near, ledger) if kind == "csv" else
               dpgeo.dbscan_spans(str(near), ledger=ledger, epsilon=1.0, radius_m=150, min_points=40,
                                  domain=SAMPLE_AREA))
    assert res.metadata["dataset"] == "pts"
    unrelated = _csv(tmp_path / "c.csv", n=20000, seed=9)
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _spans(unrelated, ledger)
    assert not any("near-copy" in str(w.message) for w in caught)


def test_a_fingerprint_is_cached_until_the_file_changes(tmp_path, monkeypatch):
    ledger = Ledger(tmp_path / "l.sqlite")
    f = _csv(tmp_path / "a.csv")
    first = ledger.fingerprint(f)
    monkeypatch.setattr(fpmod, "fingerprint_file", lambda p: pytest.fail("a cached file was read again"))
    assert ledger.fingerprint(f).digest == first.digest
    monkeypatch.undo()
    _csv(f, seed=3)  # changed: read again
    assert ledger.fingerprint(f).digest != first.digest


def test_a_folder_of_parquet_files_is_fingerprinted_as_a_set(tmp_path):
    import pandas as pd

    ledger = Ledger(tmp_path / "l.sqlite")
    folder = tmp_path / "trips"
    folder.mkdir()
    rng = np.random.default_rng(0)
    for i in range(4):
        pd.DataFrame({"lon": rng.normal(-93.26, 0.004, 500), "lat": rng.normal(44.97, 0.003, 500)}).to_parquet(
            folder / f"part-{i}.parquet")
    ledger.declare("trips", [folder], total_epsilon=3)
    moved = tmp_path / "moved"
    shutil.copytree(folder, moved)
    with pytest.warns(BudgetWarning, match="declared dataset 'trips'"):
        assert dpgeo.dbscan_spans(str(moved), ledger=ledger, **SPANS).metadata["dataset"] == "trips"
    os.remove(moved / "part-3.parquet")  # one file fewer: a near-copy of the set, and a subset of its records
    assert any("near-copy" in n for n in ledger.resolve(moved, record=False).notes)
    with pytest.warns(BudgetWarning, match="charged to the declared dataset 'trips': the input holds part"):
        assert dpgeo.dbscan_spans(str(moved), ledger=ledger, **SPANS).metadata["dataset"] == "trips"


def test_a_schema_1_ledger_is_upgraded_and_a_path_key_is_taken_over(tmp_path):
    path = tmp_path / "l.sqlite"
    f = _csv(tmp_path / "a.csv")
    con = sqlite3.connect(path)  # what dpgeo wrote before datasets were declared: keyed on the input's path
    store._migrate_to_1(con)
    con.execute("PRAGMA user_version = 1")
    con.execute("INSERT INTO datasets (name, created_date) VALUES (?, '2026-01-01')", (os.path.realpath(f),))
    con.execute("INSERT INTO releases (release_id, dataset, status, date, mechanism, epsilon, delta, analyst, "
                "dpgeo_version) VALUES ('r1', ?, 'completed', '2026-01-01', 'm', '1.5', '0', 'ana', '0')",
                (os.path.realpath(f),))
    con.commit()
    con.close()
    ledger = Ledger(path)
    b, _ = ledger.declare("pts", [f], total_epsilon=2)
    assert b.spent_epsilon == 1.5  # the path key's releases count towards the declared dataset
    with pytest.raises(BudgetExceededError):
        _spans(f, ledger)


def test_budget_declare_command(tmp_path):
    f = _csv(tmp_path / "a.csv")
    env = dict(os.environ, DPGEO_LEDGER=str(tmp_path / "l.sqlite"))
    exe = os.path.join(os.path.dirname(sys.executable), "dpgeo")
    for _ in range(2):  # idempotent
        p = subprocess.run([exe, "budget", "declare", "pts", "--file", str(f), "--total", "0.5", "--json"],
                           capture_output=True, text=True, env=env, check=False)
        assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert doc["dataset"]["total_epsilon"] == 0.5 and doc["files"][0]["path"] == os.path.realpath(f)
    p = subprocess.run([exe, "budget", "show", "pts"], capture_output=True, text=True, env=env, check=False)
    assert os.path.realpath(f) in p.stdout


# -- nothing local in what is published --------------------------------------------------------------------------

@pytest.mark.parametrize("named", [False, True])
def test_no_output_format_carries_the_input_path_or_the_user_name(tmp_path, named):
    """Every format a release is written in, scanned byte by byte (and its metadata as read back) for the
    input's absolute path, its folder and the user name: they stay in the owner's ledger."""
    user = "zq7analyst"
    home = tmp_path / f"home-{user}" / "private data"
    home.mkdir(parents=True)
    src = home / "stops.gpkg"
    shutil.copy(SAMPLE_POINTS, src)
    out = tmp_path / "public"
    out.mkdir()
    env = dict(os.environ, DPGEO_LEDGER=str(tmp_path / "l.sqlite"), USER=user, LOGNAME=user, HOME=str(home))
    exe = os.path.join(os.path.dirname(sys.executable), "dpgeo")
    outputs = [out / n for n in ("s.gpkg", "s.geojson", "s.html", "s.png")]
    args = [exe, "spans", str(src), *[a for o in outputs for a in ("-o", str(o))], "--epsilon", "1", "--radius",
            "150", "--min-points", "40", "--domain", SAMPLE_AREA] + (["--dataset", "minneapolis-stops"] if named else [])
    p = subprocess.run(args, capture_output=True, text=True, env=env, cwd=home, check=False)
    assert p.returncode == 0, p.stderr
    forbidden = [str(src), str(home), str(tmp_path), user, os.path.realpath(src)]
    for o in outputs:
        raw = o.read_bytes()
        md = json.dumps(dpgeo.read_layer_metadata(o), ensure_ascii=False)
        for text in forbidden:
            assert text.encode() not in raw and text not in md, (o.name, text)
        assert ('"dataset": "minneapolis-stops"' in md) == named
    # the owner's ledger keeps the path and who ran it
    rec = Ledger(tmp_path / "l.sqlite").history()[0]
    assert rec.releases[0].analyst == user and any(str(out) in o for o in rec.releases[0].outputs)
