"""Finding dpgeo from QGIS's Python, and the message that says how to install it."""

from __future__ import annotations

import sys

import pytest

pytestmark = pytest.mark.qgis


@pytest.fixture
def deps(plugin):
    from dpgeo_qgis import deps

    return deps


def _fake_venv(root, package, python=None):
    """A folder shaped like a venv whose site-packages holds ``package`` and a .pth file."""
    py = python or f"{sys.version_info[0]}.{sys.version_info[1]}"
    sp = root / "lib" / f"python{py}" / "site-packages"
    (sp / package).mkdir(parents=True)
    (sp / package / "__init__.py").write_text("VALUE = 42\n")
    extra = root / "extra"
    extra.mkdir()
    (sp / "extra.pth").write_text(str(extra) + "\n")
    (root / "pyvenv.cfg").write_text(f"home = /usr/bin\ninclude-system-site-packages = true\nversion = {py}.0\n")
    return sp, extra


def test_fix_message_gives_the_commands(deps):
    msg = deps.fix_message(ModuleNotFoundError("No module named 'dpgeo'"),
                           [("/nowhere", "environment variable DPGEO_VENV", "does not exist")])
    venv = deps.default_venv()
    assert "No module named 'dpgeo'" in msg
    assert f"-m venv --system-site-packages {venv}" in msg
    assert "-m pip install" in msg and "dpgeo" in msg
    import numpy

    assert f"numpy=={numpy.__version__}" in msg  # keep QGIS's numpy
    assert "DPGEO_VENV" in msg and "dpgeo/venv" in msg
    assert "/nowhere (environment variable DPGEO_VENV): does not exist" in msg


def test_add_venv_puts_it_first_and_reads_pth_files(deps, tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "path", list(sys.path))
    sp, extra = _fake_venv(tmp_path / "venv", "dpgeo_fake_pkg_xyz")
    ok, why = deps.add_venv(str(tmp_path / "venv"))
    assert ok, why
    assert sys.path[0] == str(sp) and str(extra) in sys.path
    import dpgeo_fake_pkg_xyz

    assert dpgeo_fake_pkg_xyz.VALUE == 42
    assert deps.add_venv(str(tmp_path / "venv")) == (True, "already on sys.path")
    monkeypatch.delitem(sys.modules, "dpgeo_fake_pkg_xyz")


def test_venv_of_another_python_is_refused(deps, tmp_path):
    _fake_venv(tmp_path / "venv", "whatever", python="2.7")
    sp, why = deps.venv_site_packages(str(tmp_path / "venv"))
    assert sp is None and "Python 2.7" in why
    assert deps.venv_site_packages(str(tmp_path / "missing")) == (None, "does not exist")


def test_candidates_env_setting_default(deps, tmp_path, monkeypatch):
    from qgis.core import QgsSettings

    monkeypatch.setenv("DPGEO_VENV", str(tmp_path / "a"))
    QgsSettings().setValue("dpgeo/venv", str(tmp_path / "b"))
    try:
        cands = deps.candidate_venvs()
    finally:
        QgsSettings().remove("dpgeo/venv")
    assert [c[0] for c in cands] == [str(tmp_path / "a"), str(tmp_path / "b"), deps.default_venv()]


def test_missing_dpgeo_raises_with_the_fix(deps, plugin, monkeypatch, tmp_path):
    from qgis.core import QgsApplication

    monkeypatch.setitem(sys.modules, "dpgeo", None)  # "import dpgeo" now fails
    monkeypatch.setattr(deps, "candidate_venvs", lambda: [(str(tmp_path / "none"), "default location")])
    with pytest.raises(deps.DpgeoImportError) as info:
        deps.import_dpgeo()
    assert "-m venv --system-site-packages" in str(info.value)
    ok, msg = deps.dpgeo_available()
    assert not ok and "pip install" in msg
    # the algorithms refuse to run and say why (QGIS shows this when the dialog opens)
    import dpgeo_qgis.base as base

    monkeypatch.setattr(base, "import_dpgeo", deps.import_dpgeo)
    alg = QgsApplication.processingRegistry().createAlgorithmById("dpgeo:dbscanspans")
    ok, msg = alg.canExecute()
    assert not ok and "-m venv --system-site-packages" in msg


def test_initgui_warns_when_dpgeo_is_missing(plugin, stub_iface, monkeypatch):
    import dpgeo_qgis.plugin as plugin_module
    from qgis.core import QgsApplication

    # unload the module-scoped plugin's GUI temporarily: a second instance must not clash
    monkeypatch.setattr(plugin_module, "dpgeo_available", lambda: (False, "install dpgeo like this"))
    other = plugin_module.DpgeoPlugin(stub_iface)
    registry = QgsApplication.processingRegistry()
    registry.removeProvider(plugin.provider)
    plugin.provider = None
    try:
        other.initGui()
        item = stub_iface.messageBar().currentItem()
        assert item is not None and "cannot be imported" in item.text()
    finally:
        stub_iface.messageBar().clearWidgets()
        other.unload()
        plugin.initProcessing()
    assert registry.providerById("dpgeo") is not None


def test_toolbar_shows_the_fix_when_dpgeo_is_missing(plugin, processing_module, monkeypatch):
    import dpgeo_qgis.plugin as plugin_module
    from qgis.PyQt.QtWidgets import QMessageBox

    shown, opened = [], []
    monkeypatch.setattr(plugin_module, "dpgeo_available", lambda: (False, "run these commands"))
    monkeypatch.setattr(QMessageBox, "warning", lambda parent, title, text, *a: shown.append(text))
    monkeypatch.setattr(processing_module, "execAlgorithmDialog", lambda *a, **k: opened.append(a))
    plugin.toolbar_action.trigger()
    assert shown == ["run these commands"] and not opened


def test_an_editable_install_in_the_venv_is_found(tmp_path):
    """The real editable install of this checkout (`pip install -e`, as dev/setup makes it) is imported.

    setuptools' editable installs are a ``.pth`` file with an ``import`` line that installs a finder;
    only ``site.addsitedir`` runs it. QGIS's own Python (not the venv's) must then import dpgeo from
    this checkout.
    """
    import glob
    import os
    import subprocess

    sp = [p for p in sys.path if p.endswith("site-packages") and p.startswith(sys.prefix)]
    if sys.prefix == sys.base_prefix or not sp or not glob.glob(os.path.join(sp[0], "__editable__*dpgeo*.pth")):
        pytest.skip("the tests do not run in a venv with an editable dpgeo (dev/setup makes one)")
    qgis_python = os.path.join(sys.base_prefix, "bin", f"python{sys.version_info[0]}.{sys.version_info[1]}")
    deps_py = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                           "qgis_plugin", "dpgeo_qgis", "deps.py")
    code = (
        "import importlib.util, sys\n"
        "try:\n    import dpgeo\n    print('BEFORE', dpgeo.__file__)\nexcept ImportError:\n    pass\n"
        f"spec = importlib.util.spec_from_file_location('deps', {deps_py!r})\n"
        "deps = importlib.util.module_from_spec(spec); spec.loader.exec_module(deps)\n"
        f"print(deps.add_venv({sys.prefix!r}))\n"
        "import dpgeo\nprint('AFTER', dpgeo.__file__)\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    p = subprocess.run([qgis_python, "-c", code], cwd=tmp_path, capture_output=True, text=True, env=env,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    assert "BEFORE" not in p.stdout, p.stdout  # not importable without the venv...
    checkout = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    after = p.stdout.split("AFTER", 1)[1].strip()
    assert after.startswith(os.path.join(checkout, "dpgeo")), p.stdout  # ...and from this checkout with it
