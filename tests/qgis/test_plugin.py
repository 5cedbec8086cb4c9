"""The plugin loads in a real QGIS, registers its provider and GUI entries, and unloads cleanly."""

from __future__ import annotations

import configparser
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PLUGIN_PARENT = ROOT / "qgis_plugin"
PLUGIN_NAME = "dpgeo_qgis"

pytestmark = pytest.mark.qgis

ALGORITHM_IDS = {"dpgeo:dbscanspans", "dpgeo:wavecluster", "dpgeo:kmeans", "dpgeo:heat", "dpgeo:hotspots",
                 "dpgeo:noisepreview"}


def _metadata():
    cp = configparser.ConfigParser()
    cp.read(PLUGIN_PARENT / PLUGIN_NAME / "metadata.txt", encoding="utf-8")
    return cp["general"]


def test_metadata_txt_is_complete():
    md = _metadata()
    for key in ("name", "qgisMinimumVersion", "version", "author", "description", "about", "tracker",
                "repository", "homepage", "icon", "category", "hasProcessingProvider"):
        assert md.get(key, "").strip() != "" or key == "email", key
    assert md["qgisMinimumVersion"] == "3.22"
    assert md["hasProcessingProvider"].strip().lower() == "yes"
    about = md["about"].lower()
    assert "differentially private" in about and "ε" in about and "not differentially private" in about
    assert "public" in about  # the condition on the study area is stated
    assert (PLUGIN_PARENT / PLUGIN_NAME / md["icon"]).exists()
    version = re.search(r'__version__\s*=\s*"([^"]+)"', (ROOT / "dpgeo" / "_version.py").read_text()).group(1)
    assert md["version"] == version, "metadata.txt version must match dpgeo/_version.py"


def test_plugin_loads_registers_and_unloads(load_plugin, stub_iface):
    import qgis.utils
    from qgis.core import QgsApplication

    if qgis.utils.isPluginLoaded(PLUGIN_NAME):
        qgis.utils.unloadPlugin(PLUGIN_NAME)
    plugin = load_plugin()
    registry = QgsApplication.processingRegistry()
    provider = registry.providerById("dpgeo")
    assert provider is not None and provider.name() == "dpgeo"
    assert {a.id() for a in provider.algorithms()} == ALGORITHM_IDS
    for alg_id in ALGORITHM_IDS:
        assert registry.algorithmById(alg_id) is not None

    toolbar_actions = stub_iface.pluginToolBar().actions()
    assert plugin.toolbar_action in toolbar_actions
    assert not plugin.toolbar_action.icon().isNull()
    submenu = stub_iface.vector_submenu("&dpgeo")
    assert submenu is not None
    assert [a.text() for a in submenu.actions()] == [
        "DP-DBSCAN cluster spans…", "DP WaveCluster…", "DP k-means (Voronoi cells)…",
        "DP heat layer (cell counts or density bands)…", "DP hot spots (Getis-Ord Gi*)…",
        "Noise preview for DP-DBSCAN (spends no budget)…"]
    action = plugin.toolbar_action

    assert qgis.utils.unloadPlugin(PLUGIN_NAME)
    assert registry.providerById("dpgeo") is None
    assert registry.algorithmById("dpgeo:dbscanspans") is None
    assert action not in stub_iface.pluginToolBar().actions()
    assert stub_iface.vector_submenu("&dpgeo") is None
    assert not [m for m in sys.modules if m == PLUGIN_NAME or m.startswith(PLUGIN_NAME + ".")]

    # it can be loaded again (QGIS does this on "reload plugin")
    load_plugin()
    assert registry.providerById("dpgeo") is not None
    assert qgis.utils.unloadPlugin(PLUGIN_NAME)
    assert registry.providerById("dpgeo") is None


def test_toolbar_and_menu_open_the_algorithm_dialog(plugin, stub_iface, processing_module, monkeypatch):
    opened = []
    monkeypatch.setattr(processing_module, "execAlgorithmDialog", lambda alg_id, *a, **k: opened.append(alg_id))
    plugin.toolbar_action.trigger()
    for action in stub_iface.vector_submenu("&dpgeo").actions():
        action.trigger()
    assert opened == ["dpgeo:dbscanspans", "dpgeo:dbscanspans", "dpgeo:wavecluster", "dpgeo:kmeans",
                      "dpgeo:heat", "dpgeo:hotspots", "dpgeo:noisepreview"]


def _definitions(alg_id):
    from qgis.core import QgsApplication

    alg = QgsApplication.processingRegistry().createAlgorithmById(alg_id)
    assert alg is not None, alg_id
    return alg, {p.name(): p for p in alg.parameterDefinitions()}


def test_dbscan_parameters(plugin):
    from qgis.core import QgsProcessing, QgsProcessingParameterDefinition as Def, QgsUnitTypes

    alg, params = _definitions("dpgeo:dbscanspans")
    assert list(params) == ["INPUT", "EPSILON", "DATASET", "PERSON_FIELD", "MAX_POINTS_PER_PERSON", "RADIUS",
                            "MIN_POINTS", "TIME_FIELD", "PERIOD", "PERIOD_START", "PERIOD_END", "TIMEZONE",
                            "TIME_FORMAT", "PERSON_ACCOUNTING", "CUMULATIVE",
                            "STUDY_AREA_EXTENT", "STUDY_AREA_LAYER", "OUTPUT_CRS",
                            "MAX_POINTS_PER_RECORD", "WORKING_CRS", "SEED", "LEDGER",
                            "BETA", "ETA", "HISTOGRAM", "GAMMA_BOUND", "SPAN_EXTENT", "FDR",
                            "OUTPUT", "OUTPUT_LEVELS"]
    assert params["INPUT"].type() == "source"
    assert params["INPUT"].dataTypes() == [QgsProcessing.TypeVectorPoint]
    # the radius is in metres whatever the layer's CRS: no parent layer, default unit metres
    assert params["RADIUS"].type() == "distance"
    assert params["RADIUS"].parentParameterName() == ""
    assert params["RADIUS"].defaultUnit() == QgsUnitTypes.DistanceMeters
    assert "metres" in params["RADIUS"].description()
    assert params["EPSILON"].type() == "number" and params["EPSILON"].minimum() > 0
    assert params["MIN_POINTS"].dataType() == params["MIN_POINTS"].Integer
    for name in ("STUDY_AREA_EXTENT", "STUDY_AREA_LAYER", "WORKING_CRS", "OUTPUT_CRS", "SEED", "PERSON_FIELD",
                 "MAX_POINTS_PER_PERSON", "DATASET", "LEDGER"):
        assert params[name].flags() & Def.FlagOptional, name
    # the person field is a field of the input layer; the cap K is a whole number >= 1
    assert params["PERSON_FIELD"].type() == "field" and params["PERSON_FIELD"].parentLayerParameterName() == "INPUT"
    assert params["MAX_POINTS_PER_PERSON"].dataType() == params["MAX_POINTS_PER_PERSON"].Integer
    assert params["MAX_POINTS_PER_PERSON"].minimum() == 1
    assert "one person, many points" in alg.shortHelpString().lower()
    assert params["STUDY_AREA_EXTENT"].type() == "extent"
    assert params["STUDY_AREA_LAYER"].dataTypes() == [QgsProcessing.TypeVectorPolygon]
    assert params["ETA"].maximum() == 1.0
    for name in ("BETA", "ETA", "HISTOGRAM", "GAMMA_BOUND", "SPAN_EXTENT", "FDR", "SEED", "WORKING_CRS",
                 "MAX_POINTS_PER_RECORD", "LEDGER"):
        assert params[name].flags() & Def.FlagAdvanced, name
    # span extent: grown (recommended) is the default, core cells is the paper's Algorithm 1
    assert params["SPAN_EXTENT"].type() == "enum" and params["SPAN_EXTENT"].defaultValue() == 0
    assert params["SPAN_EXTENT"].options() == ["Grown: core spans grown into certified cells (recommended)",
                                               "Core cells only (paper's Algorithm 1)"]
    assert "Span extent" in alg.shortHelpString()
    assert params["OUTPUT"].type() == "sink" and params["OUTPUT"].dataType() == QgsProcessing.TypeVectorPolygon
    # a map series: a field of the input for the time, the period (no series by default), public date-time bounds
    assert params["TIME_FIELD"].type() == "field" and params["TIME_FIELD"].parentLayerParameterName() == "INPUT"
    assert params["PERIOD"].type() == "enum" and params["PERIOD"].defaultValue() == 0
    assert params["PERIOD"].options()[0] == "No series (one map)" and len(params["PERIOD"].options()) == 6
    for name in ("PERIOD_START", "PERIOD_END"):
        assert params[name].type() == "datetime" and params[name].flags() & Def.FlagOptional, name
    for name in ("TIMEZONE", "TIME_FORMAT", "PERSON_ACCOUNTING", "CUMULATIVE"):
        assert params[name].flags() & Def.FlagAdvanced, name
    outputs = {o.name() for o in alg.outputDefinitions()}
    assert {"OUTPUT", "DIFFERENTIALLY_PRIVATE", "N_CLUSTERS", "METADATA_JSON"} <= outputs
    assert "privat" in alg.shortHelpString().lower()
    # the privacy-budget ledger: a dataset name (default the declared dataset the input file holds, found from its
    # content) and a ledger file (default the CLI's)
    assert params["DATASET"].type() == "string" and "dataset declared" in params["DATASET"].description()
    assert params["LEDGER"].type() == "file" and params["LEDGER"].behavior() == params["LEDGER"].File
    assert "refused before any point is read" in alg.shortHelpString()


def test_wavecluster_parameters(plugin):
    from qgis.core import QgsProcessingParameterDefinition as Def, QgsUnitTypes

    alg, params = _definitions("dpgeo:wavecluster")
    method_labels = params["METHOD"].options()
    assert [label.split(" ")[0] for label in method_labels] == ["PrivTHR", "PrivTHR_EM", "PrivQT", "Baseline",
                                                                "exact"]
    assert list(alg.mechanism.param("method").choices) == ["privthr", "privthr-em", "privqt", "baseline", "exact"]
    assert params["CELL_SIZE"].defaultUnit() == QgsUnitTypes.DistanceMeters
    assert params["CELL_SIZE"].flags() & Def.FlagOptional and params["GRID_SIZE"].flags() & Def.FlagOptional
    assert params["PERCENTILE"].defaultValue() == 60.0
    assert {"INPUT", "EPSILON", "DATASET", "LEDGER", "PERSON_FIELD", "MAX_POINTS_PER_PERSON", "STUDY_AREA_EXTENT",
            "STUDY_AREA_LAYER", "OUTPUT_CRS", "OUTPUT"} <= set(params)


def test_heat_and_hotspot_parameters(plugin):
    from qgis.core import QgsProcessingParameterDefinition as Def, QgsUnitTypes

    for alg_id in ("dpgeo:heat", "dpgeo:hotspots"):
        alg, params = _definitions(alg_id)
        # exactly one of the two ways of laying cells, neither pre-filled
        assert params["CELL_SIZE"].defaultUnit() == QgsUnitTypes.DistanceMeters
        assert params["CELL_SIZE"].flags() & Def.FlagOptional and params["H3_RESOLUTION"].flags() & Def.FlagOptional
        assert params["CELL_SIZE"].defaultValue() is None and params["H3_RESOLUTION"].defaultValue() is None
        assert (params["H3_RESOLUTION"].minimum(), params["H3_RESOLUTION"].maximum()) == (0, 15)
    _, heat = _definitions("dpgeo:heat")
    assert heat["BANDS"].flags() & Def.FlagOptional and not heat["BANDS"].flags() & Def.FlagAdvanced
    _, hot = _definitions("dpgeo:hotspots")
    assert hot["H3_RING"].defaultValue() == 1 and hot["FDR"].defaultValue() is False
    assert hot["RADIUS"].defaultUnit() == QgsUnitTypes.DistanceMeters


def test_noise_preview_needs_no_data(plugin):
    alg, params = _definitions("dpgeo:noisepreview")
    assert "INPUT" not in params
    assert not any(p.type() in ("source", "vector", "sink") for n, p in params.items() if n != "STUDY_AREA_LAYER")
    outputs = {o.name() for o in alg.outputDefinitions()}
    assert {"GAMMA", "MIN_POINTS_PRIME", "CORE_THRESHOLD", "EXTENT_THRESHOLD", "COUNT_ERROR_95",
            "PREVIEW_JSON"} <= outputs
    assert params["SPAN_EXTENT"].defaultValue() == 0 and len(params["SPAN_EXTENT"].options()) == 2


def test_algorithm_dialog_builds_offscreen(plugin, processing_module, stub_iface):
    """The Processing dialog of each algorithm can be built and rendered headless."""
    from qgis.PyQt import sip
    from qgis.PyQt.QtWidgets import QComboBox, QLabel

    for alg_id in sorted(ALGORITHM_IDS):
        dialog = processing_module.createAlgorithmDialog(alg_id)
        assert dialog is not None, alg_id
        dialog.resize(900, 800)
        dialog.show()
        pixmap = dialog.grab()
        assert pixmap.width() > 100 and pixmap.height() > 100
        texts = " ".join(lbl.text() for lbl in dialog.findChildren(QLabel) if lbl.isVisible())
        if alg_id == "dpgeo:dbscanspans":
            assert "radius r (metres)" in texts
            # the distance widget offers metres (not the layer's degrees) as its unit
            units = [cb.currentText().lower() for cb in dialog.findChildren(QComboBox) if cb.isVisible()]
            assert "meters" in units or "metres" in units, units
            assert "degrees" not in texts.lower() and "degrees" not in units
        dialog.close()
        sip.delete(dialog)


def test_every_dialog_has_the_declared_parameters(plugin):
    """The QGIS parameters are generated from the library's declarations: names, kinds, defaults, ranges, flags."""
    from dpgeo.declarations.registry import MECHANISMS
    from qgis.core import QgsProcessingParameterDefinition as Def

    for mech in MECHANISMS:
        if "qgis" not in mech.fronts:
            continue
        alg, params = _definitions(f"dpgeo:{mech.qgis_id}")
        for p in mech.offered("qgis"):
            if p.layer_style:  # a second layer of the release: an optional output, skipped by default
                if mech.reads is None:  # a preview writes no layer
                    assert p.qgis not in params and p.help[:30] not in alg.shortHelpString(), p.name
                    continue
                q = params[p.qgis]
                assert q.type() == "sink" and q.flags() & Def.FlagOptional and not q.createByDefault(), p.name
                assert p.help[:30] in alg.shortHelpString(), p.name
                continue
            q = params[p.qgis]
            kind = {"choice": "enum", "flag": "boolean", "text": "string"}.get(
                p.kind, "distance" if p.unit == "metres" else "number")
            assert q.type() == kind, p.name
            assert bool(q.flags() & Def.FlagAdvanced) == p.advanced, p.name
            assert bool(q.flags() & Def.FlagOptional) == (not p.required and p.default is None), p.name
            if p.kind == "choice":
                assert len(q.options()) == len(p.choices)
                assert q.defaultValue() == (None if p.default is None else list(p.choices).index(p.default))
            elif p.kind in ("number", "integer"):
                if not p.required and p.default is not None:
                    assert q.defaultValue() == pytest.approx(p.default), p.name
                if p.minimum is not None:
                    assert q.minimum() == pytest.approx(p.minimum, abs=1e-9 if p.kind == "number" else 1), p.name
                    assert q.minimum() > p.minimum if p.exclusive_minimum else q.minimum() == p.minimum
                if p.maximum is not None:
                    assert q.maximum() == pytest.approx(p.maximum, rel=1e-5, abs=1 if p.kind == "integer" else 0)
            assert p.help[:30] in alg.shortHelpString() or p.help[:30].replace("'", "&#x27;") in \
                alg.shortHelpString(), p.name


def test_every_dialog_has_the_declared_series_parameters(plugin):
    """The map series' parameters are the library's declared series options (dpgeo.series_params): labels, help,
    options, defaults, advanced flags; only the widgets are QGIS's own (a field, date-time bounds, "No series")."""
    from dpgeo.declarations.registry import MECHANISMS
    from dpgeo.series_params import series_offered
    from qgis.core import QgsProcessingParameterDefinition as Def

    for mech in MECHANISMS:
        if mech.reads is None:
            continue
        _, params = _definitions(f"dpgeo:{mech.qgis_id}")
        for p in series_offered("qgis"):
            q = params[p.qgis]
            assert q.description() == p.title, p.name
            assert q.help().startswith(p.help), p.name
            assert bool(q.flags() & Def.FlagAdvanced) == p.advanced, p.name
            if p.name == "period":  # one map, then the declared period kinds
                assert q.options() == ["No series (one map)", *p.labels] and q.defaultValue() == 0
                assert [c.lower() for c in q.options()[1:]] == list(p.choices)
            elif p.kind == "choice":
                assert q.options() == list(p.labels) and q.defaultValue() == p.choices.index(p.default), p.name
            elif p.kind == "flag":
                assert q.type() == "boolean" and q.defaultValue() == p.default, p.name
            elif p.name == "timezone":
                assert q.defaultValue() == p.none_means
        assert "APPEND" not in params and "PER_PERIOD_FILES" not in params


def test_every_dialog_has_the_declared_shared_parameters(plugin):
    """ε, the contribution bounds, the working CRS, the seed, the dataset and the ledger are the library's declared
    shared parameters (dpgeo.shared_params): the same ε range as every other front end, help, advanced flags."""
    from dpgeo.declarations.registry import MECHANISMS
    from dpgeo.shared_params import EPSILON_MAX, PREVIEW_KEYS, shared_offered, shared_param
    from qgis.core import QgsProcessingParameterDefinition as Def

    eps = shared_param("epsilon")
    for mech in MECHANISMS:
        if "qgis" not in mech.fronts:  # (the cells preview: command line, Python and the service)
            continue
        alg, params = _definitions(f"dpgeo:{mech.qgis_id}")
        offered = [p for p in shared_offered("qgis") if mech.reads is not None or p.name in PREVIEW_KEYS]
        assert offered and {p.qgis for p in offered} <= set(params), mech.name
        for p in offered:
            q = params[p.qgis]
            assert q.help() == p.help, p.name
            assert bool(q.flags() & Def.FlagAdvanced) == p.advanced, p.name
            assert bool(q.flags() & Def.FlagOptional) == (not p.required and p.default is None), p.name
        q = params[eps.qgis]
        assert 0 < q.minimum() < 1e-9 and q.maximum() == EPSILON_MAX == eps.maximum, mech.name
        assert q.defaultValue() == eps.suggested
    # the hand-written QGIS parameters are few: the rest is generated from the declarations
    import re
    from pathlib import Path

    plugin_dir = Path(__file__).resolve().parents[2] / "qgis_plugin" / "dpgeo_qgis"
    calls = sum(len(re.findall(r"\baddParameter\(", f.read_text())) for f in plugin_dir.glob("*.py"))
    assert calls <= 12, calls


def test_the_noise_preview_outputs_are_the_declared_fields(plugin):
    """The QGIS noise preview's numbers (outputs and table columns) are the fields its mechanism declares with a
    column (dpgeo.metadata_fields, Mechanism.outputs), labelled as declared: the plugin names none of them."""
    from dpgeo.metadata_fields import COMMON_FIELDS
    from dpgeo.declarations.registry import MECHANISMS

    for mech in (m for m in MECHANISMS if m.reads is None and "qgis" in m.fronts):
        alg, _ = _definitions(f"dpgeo:{mech.qgis_id}")
        declared = [f for f in (*COMMON_FIELDS, *mech.outputs) if f.column]
        assert declared
        outputs = {o.name(): o.description() for o in alg.outputDefinitions()}
        for f in declared:
            assert outputs[f.key.upper()].startswith(f.label), f.key
        assert [c for _, _, _, c in alg.numbers()] == [f.column for f in declared]


@pytest.mark.parametrize("kind", ["heat", "hotspots", "kmeans", "series"])
def test_the_layer_summary_shows_its_own_fields_labelled(plugin, kind):
    """What QGIS logs and puts in the layer's abstract: every field labelled as declared (as dpgeo info prints it),
    the mechanism's own ones included; the plugin names none of them."""
    import warnings

    import numpy as np

    import dpgeo
    from dpgeo.metadata_fields import COMMON_FIELDS
    from dpgeo.declarations.registry import mechanism
    from dpgeo_qgis.writing import _summary

    rng = np.random.default_rng(0)
    pts = (rng.uniform(0, 2000, 600), rng.uniform(0, 2000, 600), "EPSG:32615")
    times = np.array([f"2014-04-{1 + 7 * d:02d}" for d in rng.integers(0, 3, 600)])
    kw = dict(epsilon=1, domain=(0, 0, 2000, 2000), domain_crs="EPSG:32615", ledger=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res, name = {
            "heat": lambda: (dpgeo.heat(pts, cell_m=200, **kw), "dp-heat"),
            "hotspots": lambda: (dpgeo.hotspots(pts, cell_m=200, **kw), "dp-hotspots"),
            "kmeans": lambda: (dpgeo.kmeans(pts, k=3, **kw), "dp-kmeans"),
            "series": lambda: (dpgeo.heat(pts, cell_m=200, time=times, period="week", period_start="2014-03-31",
                                          period_end="2014-04-21", **kw), "dp-heat"),
        }[kind]()
    text = _summary(res, dict(res.metadata, output_crs="EPSG:4326"))
    own = [f for f in (*mechanism(name).outputs, *(f for f in COMMON_FIELDS if f.section == "Series"))
           if f.key in res.metadata]
    assert own
    for f in own:
        assert f"\n  {f.label} " in text, (f.key, text)
    assert "\n  file CRS " in text and "\nOther\n" not in text
