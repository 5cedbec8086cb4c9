"""The privacy-budget ledger in real QGIS: processing.run("dpgeo:...") with the real library and a temporary ledger.

Each test uses its own ledger file (the LEDGER parameter) or, where it says
so, the session's throw-away default ledger ($DPGEO_LEDGER, set by the root
conftest), never the user's.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pytest

pytestmark = pytest.mark.qgis

ROOT = Path(__file__).resolve().parents[2]
EXACT = "(exact, not private — do not publish)"


def _params(sample_points, sample_study_area, **extra):
    path, name = sample_points
    p = {"INPUT": f"{path}|layername={name}", "EPSILON": 1.0, "RADIUS": 200, "MIN_POINTS": 100,
         "STUDY_AREA_LAYER": sample_study_area, "OUTPUT": "TEMPORARY_OUTPUT"}
    p.update(extra)
    return p


def _ledger(path):
    from dpgeo.budget import Ledger

    return Ledger(str(path))


def _dpgeo_info(path, *args):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-m", "dpgeo", "info", str(path), *args], capture_output=True, text=True,
                         env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout


def _sha(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


@pytest.mark.parametrize("ext", ["gpkg", "geojson"])
def test_release_is_charged_once_logged_and_readable_by_dpgeo_info(plugin, processing_module, sample_points,
                                                                    sample_study_area, feedback, tmp_path, ext):
    ledger_file = tmp_path / "ledger.sqlite"
    ledger = _ledger(ledger_file)
    ledger.set_total("police stops 2017", 1.5)
    out = tmp_path / f"spans.{ext}"
    res = processing_module.run("dpgeo:dbscanspans", _params(
        sample_points, sample_study_area, DATASET="police stops 2017", LEDGER=str(ledger_file), OUTPUT=str(out)),
        feedback=feedback)
    assert res["DIFFERENTIALLY_PRIVATE"] is True
    # the budget was logged before any point was read
    before = next(i for i, line in enumerate(feedback.infos) if line.startswith("Before this run"))
    read = next(i for i, line in enumerate(feedback.infos) if line.startswith("Read "))
    assert before < read
    assert "dataset 'police stops 2017'" in feedback.infos[before] and str(ledger_file) in feedback.infos[before]
    assert "ε 0 of 1.5 spent, 1.5 left. This run spends ε 1." in feedback.infos[before]
    assert any("after this release: ε 1 of 1.5 spent, 0.5 left" in line for line in feedback.infos)

    # charged exactly once, by the library, and the file is recorded with the release
    budget = ledger.budget("police stops 2017")
    assert budget.n_charged == 1 and budget.spent_epsilon == 1
    (rec,) = budget.releases
    assert rec.status == "completed" and rec.mechanism == "dp-dbscan-spans"
    assert list(rec.outputs) == [str(out.resolve())]

    meta = json.loads(res["METADATA_JSON"])
    assert meta["release_id"] == rec.release_id and meta["dataset"] == "police stops 2017"
    assert meta["dataset_spent_epsilon"] == 1.0 and meta["dataset_total_epsilon"] == 1.5

    # `dpgeo info` on the file QGIS wrote prints the same metadata as for a file the command line writes
    text = _dpgeo_info(out)
    rows = {line[2:26].strip(): line[26:].strip() for line in text.splitlines() if line.startswith("  ")}
    for label, value in (("release id", rec.release_id), ("dataset", "police stops 2017"),
                         ("dataset's ε spent", "1"), ("dataset's total ε", "1.5"), ("ε (privacy budget)", "1"),
                         ("δ", "0 (pure ε-DP)"), ("differentially private", "yes: differentially private")):
        assert rows.get(label) == value, (label, text)
    assert "DP-DBSCAN" in text
    assert json.loads(_dpgeo_info(out, "--json")) == meta
    from dpgeo.release import read_release

    assert read_release(out).metadata["release_id"] == rec.release_id
    if ext == "gpkg":  # the day of the release only, wherever GDAL or QGIS wrote a time (docs/privacy.md)
        import re
        import sqlite3

        with sqlite3.connect(out) as conn:
            stamps = [r[0] for r in conn.execute("SELECT last_change FROM gpkg_contents")]
            stamps += [r[0] for r in conn.execute("SELECT timestamp FROM gpkg_metadata_reference")]
            stamps += [str(r[0]) for r in conn.execute("SELECT update_time FROM layer_styles")]
        assert len(stamps) >= 3 and all(re.fullmatch(r"\d{4}-\d\d-\d\dT00:00:00\.000Z", s) for s in stamps), stamps
    # and `dpgeo export` converts it without spending anything
    copy = tmp_path / "copy.geojson"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-m", "dpgeo", "export", str(out), "-o", str(copy)], capture_output=True,
                          text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(_dpgeo_info(copy, "--json"))["release_id"] == rec.release_id
    assert ledger.budget("police stops 2017").n_charged == 1


def test_a_run_beyond_the_total_is_refused_before_reading(plugin, processing_module, sample_points,
                                                          sample_study_area, feedback, tmp_path):
    from qgis.core import QgsProcessingException

    ledger_file = tmp_path / "ledger.sqlite"
    ledger = _ledger(ledger_file)
    ledger.set_total("stops", 1.5)
    processing_module.run("dpgeo:dbscanspans", _params(sample_points, sample_study_area, DATASET="stops",
                                                       LEDGER=str(ledger_file)))
    out = tmp_path / "second.gpkg"
    with pytest.raises(QgsProcessingException) as err:
        processing_module.run("dpgeo:dbscanspans", _params(sample_points, sample_study_area, DATASET="stops",
                                                           LEDGER=str(ledger_file), OUTPUT=str(out)),
                              feedback=feedback)
    message = str(err.value)
    assert "total of ε = 1.5" in message and "ε 1 is spent and 0.5 is left" in message
    assert "Nothing was read or written" in message and "Use ε ≤ 0.5" in message
    assert not any(line.startswith("Read ") for line in feedback.infos)  # no point was read
    assert not out.exists()
    assert ledger.budget("stops").n_charged == 1  # the refused run charged nothing
    # what is left still fits
    res = processing_module.run("dpgeo:dbscanspans", _params(sample_points, sample_study_area, DATASET="stops",
                                                             LEDGER=str(ledger_file), EPSILON=0.5))
    assert json.loads(res["METADATA_JSON"])["dataset_spent_epsilon"] == 1.5
    assert ledger.budget("stops").left_epsilon == 0


def test_any_file_output_is_recorded_with_its_release(plugin, processing_module, sample_points, sample_study_area,
                                                      tmp_path):
    ledger_file = tmp_path / "ledger.sqlite"
    out = tmp_path / "spans.shp"
    res = processing_module.run("dpgeo:dbscanspans", _params(sample_points, sample_study_area, DATASET="stops",
                                                             LEDGER=str(ledger_file), OUTPUT=str(out)))
    (rec,) = _ledger(ledger_file).budget("stops").releases
    assert rec.release_id == json.loads(res["METADATA_JSON"])["release_id"]
    assert list(rec.outputs) == [str(out.resolve())]


def test_without_a_name_the_dataset_is_found_from_the_input_files_content(plugin, processing_module, sample_points,
                                                                            sample_study_area, feedback, tmp_path):
    path, name = sample_points
    copy = tmp_path / "renamed copy.gpkg"
    shutil.copy(path, copy)
    ledger_file = tmp_path / "ledger.sqlite"
    # undeclared: a key of the content, shared by the copy; nothing published; the log says nothing limits it
    res = processing_module.run("dpgeo:dbscanspans", _params(
        sample_points, sample_study_area, INPUT=f"{copy}|layername={name}", LEDGER=str(ledger_file)),
        feedback=feedback)
    (key,) = _ledger(ledger_file).datasets()
    assert key.startswith("unnamed file ") and "dataset" not in json.loads(res["METADATA_JSON"])
    assert str(copy) not in res["METADATA_JSON"] and str(tmp_path) not in res["METADATA_JSON"]
    assert any("nothing limits what it spends" in line for line in feedback.infos)
    # declared once (the command line's dpgeo budget declare): the copy is charged to it, by name
    _ledger(ledger_file).declare("minneapolis-stops", [path], total_epsilon=5)
    res = processing_module.run("dpgeo:dbscanspans", _params(
        sample_points, sample_study_area, INPUT=f"{copy}|layername={name}", LEDGER=str(ledger_file)))
    assert json.loads(res["METADATA_JSON"])["dataset"] == "minneapolis-stops"
    assert _ledger(ledger_file).budget("minneapolis-stops").spent_epsilon == 2
    # another name for the declared content is refused before anything is read
    from qgis.core import QgsProcessingException

    with pytest.raises(QgsProcessingException, match="declared as dataset 'minneapolis-stops'"):
        processing_module.run("dpgeo:dbscanspans", _params(
            sample_points, sample_study_area, INPUT=f"{copy}|layername={name}", LEDGER=str(ledger_file),
            DATASET="stops"))


def test_the_default_ledger_is_the_command_lines(plugin, processing_module, sample_points, sample_study_area,
                                                 feedback):
    from dpgeo.budget import Ledger

    res = processing_module.run("dpgeo:dbscanspans", _params(sample_points, sample_study_area,
                                                             DATASET="default ledger test"), feedback=feedback)
    default = Ledger()  # $DPGEO_LEDGER: a throw-away file in the tests, the user's data folder otherwise
    assert default.path == os.environ["DPGEO_LEDGER"]
    (rec,) = default.budget("default ledger test").releases
    assert rec.release_id == json.loads(res["METADATA_JSON"])["release_id"]


@pytest.mark.parametrize("algorithm, extra", [
    ("dpgeo:dbscanspans", {"SEED": 3}),
    ("dpgeo:wavecluster", {"SEED": 3, "CELL_SIZE": 250}),
    ("dpgeo:wavecluster", {"METHOD": 4, "CELL_SIZE": 250}),  # exact: no noise
])
def test_runs_that_are_not_private_are_not_charged(plugin, processing_module, sample_points, sample_study_area,
                                                   feedback, tmp_path, algorithm, extra):
    ledger_file = tmp_path / "ledger.sqlite"
    ledger = _ledger(ledger_file)
    ledger.set_total("stops", 0.1)  # less than the run's ε: a charged run would be refused
    params = _params(sample_points, sample_study_area, DATASET="stops", LEDGER=str(ledger_file), **extra)
    if algorithm == "dpgeo:wavecluster":
        for key in ("RADIUS", "MIN_POINTS"):
            params.pop(key)
    res = processing_module.run(algorithm, params, feedback=feedback)
    assert res["DIFFERENTIALLY_PRIVATE"] is False
    meta = json.loads(res["METADATA_JSON"])
    assert meta["differentially_private"] is False and "dataset_spent_epsilon" not in meta
    budget = ledger.budget("stops")
    assert budget.n_charged == 0 and budget.spent_epsilon == Fraction(0)
    assert any("NOT differentially private, so it is not charged" in line for line in feedback.infos)


def test_an_unusable_ledger_stops_the_run_before_reading(plugin, processing_module, sample_points,
                                                         sample_study_area, feedback, tmp_path):
    from qgis.core import QgsProcessingException

    bad = tmp_path / "ledger.sqlite"
    bad.write_bytes(b"this is not a SQLite database" * 100)
    with pytest.raises(QgsProcessingException, match="ledger"):
        processing_module.run("dpgeo:dbscanspans", _params(sample_points, sample_study_area, DATASET="stops",
                                                           LEDGER=str(bad)), feedback=feedback)
    assert not any(line.startswith("Read ") for line in feedback.infos)


def test_an_output_that_is_the_input_is_refused(plugin, processing_module, sample_points, sample_study_area,
                                                tmp_path, monkeypatch):
    from qgis.core import QgsProcessingException

    path, name = sample_points
    private = tmp_path / "private.gpkg"
    shutil.copyfile(path, private)
    (tmp_path / "alias.gpkg").symlink_to(private)
    area = tmp_path / "area.geojson"
    shutil.copyfile(sample_study_area, area)
    ledger_file = tmp_path / "ledger.sqlite"
    digest, area_digest = _sha(private), _sha(area)
    monkeypatch.chdir(tmp_path)
    os.link(private, tmp_path / "hard.gpkg")
    outputs = ["alias.gpkg",  # relative, and a symbolic link to the input
               str(private),
               "./sub/../private.gpkg",
               "hard.gpkg",  # a hard link to the input
               f"ogr:dbname='{private}' table=\"spans\" (geom)",  # a new layer in the input GeoPackage
               "area.geojson",  # the study area's file
               str(ledger_file)]  # the privacy-budget ledger (the library's one check: dpgeo.io.paths)
    for output in outputs:
        with pytest.raises(QgsProcessingException, match="choose another output file; nothing was read"):
            processing_module.run("dpgeo:dbscanspans", _params(
                sample_points, str(area), INPUT=f"{private}|layername={name}", LEDGER=str(ledger_file),
                OUTPUT=output))
    assert _sha(private) == digest and _sha(area) == area_digest
    assert _ledger(ledger_file).datasets() == []  # nothing was charged


def test_style_uses_the_library_palette(plugin, processing_module, sample_points, sample_study_area):
    from qgis.core import QgsCategorizedSymbolRenderer

    from dpgeo.io import palette

    res = processing_module.run("dpgeo:dbscanspans", _params(sample_points, sample_study_area, EPSILON=0.5,
                                                             RADIUS=150, MIN_POINTS=40, SEED=11))
    layer = res["OUTPUT"]
    renderer = layer.renderer()
    assert isinstance(renderer, QgsCategorizedSymbolRenderer)
    cats = renderer.categories()
    assert len(cats) >= 2
    from dpgeo_qgis.style import layer_frame

    frame = layer_frame(layer)  # the library's colours of these clusters: neighbours apart
    colour = dict(zip(frame["cluster_id"].tolist(), palette.layer_style(frame)[2].tolist()))
    for cat in cats:
        i = colour[int(cat.value())]
        layer_symbol = cat.symbol().symbolLayer(0)
        assert layer_symbol.color().name() == palette.CLUSTER_COLOURS[i]
        assert layer_symbol.color().alpha() == palette.FILL_ALPHA
        assert layer_symbol.strokeColor().name() == palette.OUTLINE_COLOURS[i]
        assert layer_symbol.strokeWidth() == pytest.approx(palette.OUTLINE_WIDTH_MM)


def test_exact_counts_are_labelled_and_the_release_summary_holds_only_dp_values(
        plugin, processing_module, sample_points, sample_study_area, feedback, tmp_path):
    res = processing_module.run("dpgeo:dbscanspans", _params(sample_points, sample_study_area,
                                                             LEDGER=str(tmp_path / "ledger.sqlite")),
                                feedback=feedback)
    infos = feedback.infos
    exact_lines = [line for line in infos if line.startswith(("Read ", "About the private input"))]
    assert len(exact_lines) == 2 and all(EXACT in line for line in exact_lines)
    assert "n_read=" in exact_lines[1]
    start = next(i for i, line in enumerate(infos) if line.startswith("The release (only differentially private"))
    summary = "\n".join(infos[start:])
    for key in ("n_read", "n_dropped", "n_outside_domain", "n_used"):
        assert key not in summary and key not in res["METADATA_JSON"]


def test_the_dialog_shows_the_datasets_budget_live(plugin, processing_module, stub_iface, sample_points,
                                                   tmp_path):
    from qgis.core import QgsProcessingContext, QgsProject, QgsVectorLayer
    from qgis.PyQt import sip
    from qgis.PyQt.QtWidgets import QLabel

    ledger_file = tmp_path / "ledger.sqlite"
    _ledger(ledger_file).set_total("dialog test", 2)
    path, name = sample_points
    layer = QgsVectorLayer(f"{path}|layername={name}", "police_stops", "ogr")
    QgsProject.instance().addMapLayer(layer)
    dialog = processing_module.createAlgorithmDialog("dpgeo:dbscanspans")
    try:
        wrappers = dialog.mainWidget().wrappers
        context = QgsProcessingContext()
        wrappers["LEDGER"].setParameterValue(str(ledger_file), context)
        label = dialog.findChild(QLabel, "dpgeo_budget_label")
        assert label is not None

        wrappers["INPUT"].setParameterValue(layer.id(), context)
        wrappers["DATASET"].setValue("")  # the default: found from the input file's content (undeclared here)
        assert "Dataset 'unnamed file " in label.text() and "nothing limits its spending" in label.text()
        assert _ledger(ledger_file).datasets() == ["dialog test"]  # the dialog only reads the ledger

        wrappers["DATASET"].setValue("dialog test")
        wrappers["EPSILON"].setParameterValue(1.5, context)
        assert label.text() == "Dataset 'dialog test': ε 0 of 2 spent, 2 left. This run spends ε 1.5."
        wrappers["EPSILON"].setParameterValue(3, context)
        assert "A run with ε = 3 would exceed the total: it will be refused." in label.text()
        wrappers["SEED"].setParameterValue(5, context)
        assert "not private: it is not charged" in label.text()
        assert dialog.mainWidget().createProcessingParameters()["DATASET"] == "dialog test"
    finally:
        dialog.close()
        sip.delete(dialog)
        QgsProject.instance().removeMapLayer(layer.id())


def test_the_batch_dialog_takes_a_dataset_name(plugin, processing_module, stub_iface):
    from processing.gui.BatchAlgorithmDialog import BatchAlgorithmDialog
    from qgis.core import QgsApplication
    from qgis.PyQt import sip
    from qgis.PyQt.QtWidgets import QLineEdit

    alg = QgsApplication.processingRegistry().algorithmById("dpgeo:dbscanspans").create()
    dialog = BatchAlgorithmDialog(alg)
    try:
        dialog.show()
        edits = [e for e in dialog.findChildren(QLineEdit) if e.placeholderText() == "the input file's path"]
        assert len(edits) == 1  # the dataset name's column (no budget line in a batch table)
    finally:
        dialog.close()
        sip.delete(dialog)
