"""Where the ledger lives, which dataset key a run without a name gets, and who is running it."""

from __future__ import annotations

import getpass
import os

from .store import LEDGER_ENV

__all__ = ["ledger_path", "dataset_key_for_path", "path_key_notice", "LEDGER_FILENAME"]

LEDGER_FILENAME = "ledger.sqlite"


def ledger_path(path=None) -> str:
    """The ledger file to use: ``path`` if given, else ``$DPGEO_LEDGER``, else the user's data folder.

    The default is ``ledger.sqlite`` in platformdirs' user data directory for
    "dpgeo" (``~/.local/share/dpgeo`` on Linux).

    Examples
    --------
    >>> ledger_path("/srv/dpgeo/ledger.sqlite")
    '/srv/dpgeo/ledger.sqlite'
    """
    if path is None:
        path = os.environ.get(LEDGER_ENV) or None
    if path is None:
        return _default_path()
    return os.path.abspath(os.path.expanduser(os.fspath(path)))


def _default_path():
    import platformdirs

    return os.path.join(platformdirs.user_data_dir("dpgeo", appauthor=False), LEDGER_FILENAME)


def dataset_key_for_path(path) -> str:
    """The dataset key for a run that names no dataset: the input's resolved absolute path.

    Symbolic links and ``..`` are resolved so that two spellings of one file
    share one budget. Different files (monthly extracts of the same people)
    get different keys: name the dataset to make them share one.

    Examples
    --------
    >>> dataset_key_for_path("/data/../data/stops.gpkg")
    '/data/stops.gpkg'
    """
    return os.path.realpath(os.path.expanduser(os.fspath(path)))


def path_key_notice(key) -> str:
    """What to tell the owner, once, when a run without a dataset name is recorded under the path ``key``."""
    return (f"no dataset name given: this release is recorded in the privacy-budget ledger under the input's path "
            f"{key!r}. Name the dataset (--dataset NAME) so that every file holding the same people shares one "
            "budget.")


def _os_user():
    try:
        return getpass.getuser()
    except Exception:  # no login name in the environment or the password database
        return "unknown"
