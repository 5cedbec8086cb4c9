"""Session-wide test settings (doctests in dpgeo/ and tests/ alike)."""

import os
import tempfile

# Never record test runs in the user's real privacy-budget ledger: every run in this session (and the
# command-line and QGIS subprocesses it starts, which inherit the environment) uses a throw-away ledger.
os.environ["DPGEO_LEDGER"] = os.path.join(tempfile.mkdtemp(prefix="dpgeo-test-ledger-"), "ledger.sqlite")
