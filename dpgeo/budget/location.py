"""Where the ledger lives, the path key of an unnamed run without a ledger, and who is running it."""

from __future__ import annotations

import getpass
import os

from .store import LEDGER_ENV

__all__ = ["ledger_path", "dataset_key_for_path", "LEDGER_FILENAME"]

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
    from .pgstore import LedgerURL, is_ledger_url

    if is_ledger_url(path):  # a ledger on PostgreSQL (dpgeo.budget.pgstore): printed as "(PostgreSQL)"
        return LedgerURL(str.__str__(path).strip())
    return os.path.abspath(os.path.expanduser(os.fspath(path)))


def _default_path():
    import platformdirs

    return os.path.join(platformdirs.user_data_dir("dpgeo", appauthor=False), LEDGER_FILENAME)


def dataset_key_for_path(path) -> str:
    """The input's resolved absolute path: the key of an unnamed run that uses no ledger (``ledger=False``).

    Ledgers of schema 1 keyed unnamed runs on it; a ledger now charges them
    by content (:mod:`dpgeo.budget.datasets`) and takes such a path key
    over when the file is declared or first run again.

    Examples
    --------
    >>> dataset_key_for_path("/data/../data/stops.gpkg")
    '/data/stops.gpkg'
    """
    return os.path.realpath(os.path.expanduser(os.fspath(path)))


def _os_user():
    try:
        return getpass.getuser()
    except Exception:  # no login name in the environment or the password database
        return "unknown"
