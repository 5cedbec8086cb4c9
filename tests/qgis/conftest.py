"""Fixtures for the tests of the QGIS plugin, run in a real (headless) QGIS.

* Tests marked ``qgis`` are skipped when QGIS's Python bindings are missing,
  unless ``DPGEO_REQUIRE_QGIS=1`` (as in CI): then they fail.
* ``QT_QPA_PLATFORM=offscreen`` must be set before Python starts; the QGIS
  fixtures fail otherwise.
* QGIS runs with a throw-away profile, settings file and cache folder; the
  user's own QGIS profile is never touched.
"""

from __future__ import annotations

import gc
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

QGIS_TESTS_ROOT = Path(__file__).resolve().parents[2]
PLUGIN_PARENT = QGIS_TESTS_ROOT / "qgis_plugin"
PLUGIN_NAME = "dpgeo_qgis"
QGIS_SHARED_DATA = QGIS_TESTS_ROOT.parent / "shared" / "data"
QGIS_SAMPLE_POINTS = QGIS_TESTS_ROOT / "sample_layers" / "minneapolis_police_stops_2017.gpkg"
QGIS_SAMPLE_POINTS_LAYER = "police_stops"
QGIS_SAMPLE_STUDY_AREA = QGIS_TESTS_ROOT / "sample_layers" / "minneapolis_study_area.geojson"
#: Public bounding box of Minneapolis (lon/lat), used when the sample study area file is absent.
MINNEAPOLIS_BBOX = (-93.34, 44.88, -93.19, 45.06)

REQUIRE_QGIS = os.environ.get("DPGEO_REQUIRE_QGIS", "") == "1"


def _qgis_problem() -> str | None:
    """Why QGIS cannot be used here, or None."""
    try:
        if importlib.util.find_spec("qgis") is None or importlib.util.find_spec("qgis.core") is None:
            return "QGIS Python bindings (python3-qgis) are not importable"
    except Exception as exc:  # a broken qgis package
        return f"QGIS Python bindings are broken: {exc}"
    return None


QGIS_PROBLEM = _qgis_problem()


def pytest_collection_modifyitems(config, items):
    here = Path(__file__).resolve().parent
    for item in items:
        if here not in Path(str(item.fspath)).resolve().parents:
            continue
        if item.get_closest_marker("qgis") is None:
            continue
        if QGIS_PROBLEM and not REQUIRE_QGIS:
            item.add_marker(pytest.mark.skip(reason=f"{QGIS_PROBLEM} (set DPGEO_REQUIRE_QGIS=1 to make this fail)"))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """With DPGEO_REQUIRE_QGIS=1 a skipped QGIS test is a failure: in CI they must run."""
    outcome = yield
    report = outcome.get_result()
    if REQUIRE_QGIS and report.skipped and item.get_closest_marker("qgis") is not None:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"DPGEO_REQUIRE_QGIS=1 but this QGIS test was skipped: {reason}"


def _require_environment():
    if QGIS_PROBLEM:
        pytest.fail(f"DPGEO_REQUIRE_QGIS=1 but {QGIS_PROBLEM}; install qgis and python3-qgis", pytrace=False)
    if os.environ.get("QT_QPA_PLATFORM") != "offscreen":
        pytest.fail(
            "QGIS tests must run headless: export QT_QPA_PLATFORM=offscreen before starting Python "
            f"(it is {os.environ.get('QT_QPA_PLATFORM')!r})",
            pytrace=False,
        )


# -- a throw-away QGIS -----------------------------------------------------------

@pytest.fixture(scope="session")
def qgis_home(tmp_path_factory):
    """Temporary folder for QGIS's profile, settings and cache."""
    return tmp_path_factory.mktemp("qgis-home")


@pytest.fixture(scope="session")
def qgis_app(qgis_home):
    """A running QgsApplication (GUI enabled, offscreen) with a temporary profile."""
    _require_environment()
    if not os.environ.get("XDG_RUNTIME_DIR"):
        runtime = qgis_home / "runtime"
        runtime.mkdir(mode=0o700)
        os.environ["XDG_RUNTIME_DIR"] = str(runtime)
    from qgis.PyQt.QtCore import QCoreApplication, QSettings

    QCoreApplication.setOrganizationName("dpgeo-tests")
    QCoreApplication.setApplicationName("QGIS3-dpgeo-tests")
    QSettings.setDefaultFormat(QSettings.IniFormat)
    QSettings.setPath(QSettings.IniFormat, QSettings.UserScope, str(qgis_home / "settings"))
    settings = QSettings()
    settings.setValue("cache/directory", str(qgis_home / "cache"))
    settings.sync()

    from qgis.core import QgsApplication
    from qgis.PyQt.QtCore import QDir

    temp_pattern = f"{QCoreApplication.applicationName()}-*"
    temp_before = set(Path(QDir.tempPath()).glob(temp_pattern))
    app = QgsApplication([], True, str(qgis_home / "profile"))
    app.initQgis()
    processing_dir = os.path.join(QgsApplication.pkgDataPath(), "python", "plugins")
    if processing_dir not in sys.path:
        sys.path.append(processing_dir)
    yield app
    # free QGIS objects held in reference cycles (processing contexts, layers) while QGIS still runs
    gc.collect()
    app.exitQgis()
    for leftover in set(Path(QDir.tempPath()).glob(temp_pattern)) - temp_before:
        shutil.rmtree(leftover, ignore_errors=True)  # Qt temporary folders QGIS leaves behind


class StubIface:
    """The parts of QgisInterface the plugin and the Processing dialogs use, with real widgets."""

    def __init__(self):
        from qgis.gui import QgsMapCanvas, QgsMessageBar
        from qgis.PyQt.QtWidgets import QMainWindow, QMenu, QToolBar

        self._window = QMainWindow()
        self._window.resize(1000, 700)
        self._canvas = QgsMapCanvas(self._window)
        self._window.setCentralWidget(self._canvas)
        self._toolbar = QToolBar("Plugins", self._window)
        self._toolbar.setObjectName("mPluginToolBar")
        self._window.addToolBar(self._toolbar)
        self._vector_menu = QMenu("&Vector", self._window)
        self._window.menuBar().addMenu(self._vector_menu)
        self._message_bar = QgsMessageBar(self._window)
        self._browser_model = None

    # windows and widgets
    def mainWindow(self):  # noqa: N802
        return self._window

    def mapCanvas(self):  # noqa: N802
        return self._canvas

    def messageBar(self):  # noqa: N802
        return self._message_bar

    def activeLayer(self):  # noqa: N802
        return None

    def browserModel(self):  # noqa: N802
        if self._browser_model is None:
            from qgis.gui import QgsBrowserGuiModel

            self._browser_model = QgsBrowserGuiModel(self._window)
        return self._browser_model

    def pluginToolBar(self):  # noqa: N802
        return self._toolbar

    def vectorMenu(self):  # noqa: N802
        return self._vector_menu

    # toolbar
    def addToolBarIcon(self, action):  # noqa: N802
        self._toolbar.addAction(action)
        return 0

    def removeToolBarIcon(self, action):  # noqa: N802
        self._toolbar.removeAction(action)

    # Vector menu: one submenu per plugin menu name, as QGIS does
    def _submenu(self, name, create):
        for action in self._vector_menu.actions():
            menu = action.menu()
            if menu is not None and menu.title() == name:
                return menu
        return self._vector_menu.addMenu(name) if create else None

    def addPluginToVectorMenu(self, name, action):  # noqa: N802
        self._submenu(name, True).addAction(action)

    def removePluginVectorMenu(self, name, action):  # noqa: N802
        menu = self._submenu(name, False)
        if menu is None:
            return
        menu.removeAction(action)
        if not menu.actions():
            self._vector_menu.removeAction(menu.menuAction())

    def vector_submenu(self, name):
        return self._submenu(name, False)


@pytest.fixture(scope="session")
def stub_iface(qgis_app):
    """A stub QgisInterface installed as ``qgis.utils.iface`` (before Processing is imported)."""
    import qgis.utils

    iface = StubIface()
    qgis.utils.iface = iface
    yield iface
    # widgets must go before the QgsApplication does, or the interpreter crashes at exit
    from qgis.PyQt import sip

    qgis.utils.iface = None
    iface._window.close()
    sip.delete(iface._window)


@pytest.fixture(scope="session")
def processing_module(stub_iface):
    """QGIS's ``processing`` Python package, importable after the stub iface exists."""
    from qgis.analysis import QgsNativeAlgorithms
    from qgis.core import QgsApplication

    registry = QgsApplication.processingRegistry()
    if registry.providerById("native") is None:
        registry.addProvider(QgsNativeAlgorithms(registry))
    import processing

    return processing


def _load_plugin():
    import qgis.utils

    if str(PLUGIN_PARENT) not in sys.path:
        sys.path.insert(0, str(PLUGIN_PARENT))
    if str(PLUGIN_PARENT) not in qgis.utils.plugin_paths:
        qgis.utils.plugin_paths.insert(0, str(PLUGIN_PARENT))
    qgis.utils.updateAvailablePlugins()
    assert PLUGIN_NAME in qgis.utils.available_plugins, qgis.utils.available_plugins
    assert qgis.utils.loadPlugin(PLUGIN_NAME), "qgis.utils.loadPlugin failed (see the QGIS message log)"
    assert qgis.utils.startPlugin(PLUGIN_NAME), "qgis.utils.startPlugin failed (see the QGIS message log)"
    return qgis.utils.plugins[PLUGIN_NAME]


@pytest.fixture(scope="session")
def load_plugin(stub_iface, processing_module):
    """Function that loads and starts the plugin through qgis.utils; returns the plugin object."""
    return _load_plugin


@pytest.fixture(scope="module")
def plugin(load_plugin):
    """The plugin, loaded and started through qgis.utils with the stub iface; unloaded afterwards."""
    import qgis.utils

    if qgis.utils.isPluginLoaded(PLUGIN_NAME):
        obj = qgis.utils.plugins[PLUGIN_NAME]
    else:
        obj = load_plugin()
    yield obj
    if qgis.utils.isPluginLoaded(PLUGIN_NAME):
        qgis.utils.unloadPlugin(PLUGIN_NAME)


# -- data -------------------------------------------------------------------------

@pytest.fixture(scope="session")
def sample_points(tmp_path_factory):
    """``(path, layer name)`` of the sample point layer (EPSG:4326).

    The checked-in sample layer when present; otherwise the same points built
    from the shared CSV.
    """
    if QGIS_SAMPLE_POINTS.exists():
        return str(QGIS_SAMPLE_POINTS), QGIS_SAMPLE_POINTS_LAYER
    csv = QGIS_SHARED_DATA / "geo" / "minneapolis_police_stops_2017.csv.gz"
    if not csv.exists():
        pytest.fail(f"neither {QGIS_SAMPLE_POINTS} nor {csv} exists")
    import geopandas as gpd
    import pandas as pd

    df = pd.read_csv(csv)
    gdf = gpd.GeoDataFrame(df[["date", "problem", "precinct"]],
                           geometry=gpd.points_from_xy(df["lon"], df["lat"]), crs="EPSG:4326")
    path = tmp_path_factory.mktemp("sample") / "police_stops.gpkg"
    gdf.to_file(path, layer=QGIS_SAMPLE_POINTS_LAYER, driver="GPKG")
    return str(path), QGIS_SAMPLE_POINTS_LAYER


@pytest.fixture(scope="session")
def sample_study_area(tmp_path_factory):
    """Path of a public study area polygon (GeoJSON, EPSG:4326)."""
    if QGIS_SAMPLE_STUDY_AREA.exists():
        return str(QGIS_SAMPLE_STUDY_AREA)
    import json

    x0, y0, x1, y1 = MINNEAPOLIS_BBOX
    gj = {"type": "FeatureCollection", "features": [{
        "type": "Feature", "properties": {"name": "Minneapolis (bounding box)"},
        "geometry": {"type": "Polygon", "coordinates": [[[x0, y0], [x1, y0], [x1, y1], [x0, y1], [x0, y0]]]},
    }]}
    path = tmp_path_factory.mktemp("area") / "study_area.geojson"
    path.write_text(json.dumps(gj))
    return str(path)


@pytest.fixture
def points_layer(qgis_app, sample_points):
    """The sample point layer as a QgsVectorLayer."""
    from qgis.core import QgsVectorLayer

    path, name = sample_points
    layer = QgsVectorLayer(f"{path}|layername={name}", "police_stops", "ogr")
    assert layer.isValid(), path
    yield layer
    _delete_now(layer)


def _delete_now(obj):
    """Delete a Qt object now: pytest keeps fixture values alive, and QGIS objects that outlive the
    QgsApplication crash the interpreter at exit."""
    from qgis.PyQt import sip

    if not sip.isdeleted(obj) and sip.ispyowned(obj):
        sip.delete(obj)


class RecordingFeedback:
    """Factory of a QgsProcessingFeedback that records what the algorithm reports."""

    @staticmethod
    def create():
        from qgis.core import QgsProcessingFeedback

        class _Feedback(QgsProcessingFeedback):
            def __init__(self):
                super().__init__()
                self.infos, self.errors, self.warnings, self.texts, self.progress_values = [], [], [], [], []
                self.progressChanged.connect(self.progress_values.append)

            def pushInfo(self, info):  # noqa: N802
                self.infos.append(info)
                super().pushInfo(info)

            def pushWarning(self, warning):  # noqa: N802
                self.warnings.append(warning)
                super().pushWarning(warning)

            def reportError(self, error, fatalError=False):  # noqa: N802,N803
                self.errors.append(error)
                super().reportError(error, fatalError)

            def setProgressText(self, text):  # noqa: N802
                self.texts.append(text)
                super().setProgressText(text)

            def log(self):
                return "\n".join(self.infos + self.errors + self.warnings + self.texts)

        return _Feedback()


@pytest.fixture
def feedback(qgis_app):
    fb = RecordingFeedback.create()
    yield fb
    _delete_now(fb)


# -- qgis_process -------------------------------------------------------------------

def qgis_process_env(home: Path) -> dict:
    """Environment for ``qgis_process.bin`` with a throw-away profile that enables the plugin."""
    profile = home / ".local" / "share" / "QGIS" / "QGIS3" / "profiles" / "default"
    (profile / "QGIS").mkdir(parents=True, exist_ok=True)
    ini = profile / "QGIS" / "QGIS3.ini"
    if not ini.exists():
        ini.write_text(f"[PythonPlugins]\n{PLUGIN_NAME}=true\n")
    runtime = home / "runtime"
    runtime.mkdir(mode=0o700, exist_ok=True)
    tmp = home / "tmp"
    tmp.mkdir(exist_ok=True)
    env = dict(os.environ)
    for var in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "PYTHONPATH"):
        env.pop(var, None)
    env.update({
        "HOME": str(home),
        "XDG_RUNTIME_DIR": str(runtime),
        "QT_QPA_PLATFORM": "offscreen",
        "QGIS_PLUGINPATH": str(PLUGIN_PARENT),
        "TMPDIR": str(tmp),
        "PYTHONDONTWRITEBYTECODE": "1",
    })
    if sys.prefix != sys.base_prefix:  # the tests run in a venv: let QGIS's Python find dpgeo there
        env["DPGEO_VENV"] = sys.prefix
    return env


@pytest.fixture(scope="session")
def qgis_process(tmp_path_factory):
    """Run ``qgis_process.bin`` with a temporary profile in which the plugin is enabled.

    ``qgis_process(*args, venv=True, home=None, timeout=150)``: with ``venv=True`` the
    environment variable DPGEO_VENV points QGIS's Python at the venv running the tests.
    """
    _require_environment()
    exe = shutil.which("qgis_process.bin") or shutil.which("qgis_process")
    if exe is None:
        if REQUIRE_QGIS:
            pytest.fail("qgis_process.bin not found", pytrace=False)
        pytest.skip("qgis_process.bin not found")
    default_home = tmp_path_factory.mktemp("qgis-process-home")

    def run(*args, venv=True, home=None, timeout=150):
        env = qgis_process_env(Path(home or default_home))
        if not venv:
            env.pop("DPGEO_VENV", None)
        return subprocess.run([exe, *args], env=env, capture_output=True, text=True, timeout=timeout,
                              cwd=str(home or default_home))

    return run
