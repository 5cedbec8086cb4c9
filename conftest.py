"""Session-wide test settings (doctests in dpgeo/ and tests/ alike)."""

import os
import tempfile

import pytest

# Never record test runs in the user's real privacy-budget ledger: every run in this session (and the
# command-line and QGIS subprocesses it starts, which inherit the environment) uses a throw-away ledger.
# Under pytest-xdist each worker is its own session, with its own ledger.
os.environ["DPGEO_LEDGER"] = os.path.join(tempfile.mkdtemp(prefix="dpgeo-test-ledger-"), "ledger.sqlite")


def pytest_addoption(parser):
    parser.addoption("--run-slow", action="store_true", default=os.environ.get("DPGEO_RUN_SLOW") == "1",
                     help="also run the tests marked slow: full-power versions of checks that the default run "
                          "makes in bounded form (DPGEO_RUN_SLOW=1 does the same; benchmarks/README.md)")


def pytest_itemcollected(item):
    """Groups for ``pytest -n N --dist loadgroup``, given as each test is collected (pytest-xdist reads them off
    the items before any ``pytest_collection_modifyitems`` of ours would run).

    A test file runs whole on one worker (its module fixtures are built once, and tests that follow one
    another in a file keep their order). All the QGIS tests share one worker: each QGIS session cleans up the
    temporary folders QGIS made while it ran, which would take a concurrent session's folders away. A test
    that names its own ``xdist_group`` keeps it.
    """
    if item.get_closest_marker("xdist_group") is not None:
        return
    path = str(item.path)
    group = "qgis" if f"{os.sep}tests{os.sep}qgis{os.sep}" in path else os.path.relpath(path, item.config.rootpath)
    item.add_marker(pytest.mark.xdist_group(name=group))


def pytest_collection_modifyitems(config, items):
    """Leave out the ``slow`` tests unless asked.

    A ``slow`` test runs with ``--run-slow``, or when it is named by its node id (``file.py::test``);
    every one of them has a bounded counterpart in the default run (see its docstring).
    """
    named = any("::" in str(a) for a in config.args)
    if not (config.getoption("--run-slow") or named):
        slow = [item for item in items if item.get_closest_marker("slow") is not None]
        if slow:
            config.hook.pytest_deselected(items=slow)
            items[:] = [item for item in items if item.get_closest_marker("slow") is None]
