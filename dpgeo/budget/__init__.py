"""The persistent privacy-budget ledger: one SQLite file, shared by every front end.

A **dataset** is the population a guarantee protects, kept under a name the
data owner chooses and declares once with the files it lives in and its
total (`Ledger.declare`); a run on any copy of those files' content is
charged to it (`Ledger.resolve`, :mod:`dpgeo.budget.datasets`), and a file
input run without a name that matches no declared file is charged to a key
of its content. Under sequential composition the ε (and δ) of all
releases of one dataset add up; the ledger records each release and refuses
one that would take the sum past the dataset's declared total.

The charge protocol: a run **reserves** its ε before it reads any private
data; the reservation counts as spent at once. Until the run declares that
noise may be drawn (`Reservation.noise_started`) it may be cancelled, e.g.
because the input file cannot be read; after that the charge stands whatever
happens, so a retry never gets fresh noise for free. On success the run
completes the reservation with the files it wrote.

Every ε and δ is kept as an exact rational (a float is read as the decimal
it prints as, ``0.1`` → 1/10) and sums are compared exactly, so ten releases
at ε = 0.1 fit a total of 1 and an eleventh does not. The noise never spends
more than that charge (`dpgeo.noise.noise_epsilon`: the float's binary value,
or the float below it when the binary value is above the decimal).

Examples
--------
>>> import os, tempfile
>>> ledger = Ledger(os.path.join(tempfile.mkdtemp(), "ledger.sqlite"))
>>> ledger.set_total("stops", 1.0).total_epsilon
Fraction(1, 1)
>>> with ledger.reserve("stops", epsilon=0.4, mechanism="dp-dbscan-spans", analyst="ana") as r:
...     with r.before_noise():      # an error in here (e.g. unreadable input) cancels the charge
...         pass                    # read the private points
...     r.complete(outputs=["spans.gpkg"])
>>> format_exact(ledger.budget("stops").left_epsilon)
'0.6'
>>> ledger.reserve("stops", epsilon=0.7, mechanism="dp-dbscan-spans")  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
dpgeo.errors.BudgetExceededError: dataset 'stops' has a total budget of epsilon = 1; 0.4 is spent and 0.6 is left, ...
"""

from .amounts import exact_value, format_exact
from .ledger import DEFAULT_LOCK_TIMEOUT_S, Ledger
from .location import dataset_key_for_path, ledger_path
from .records import STATUS_LABELS, DatasetBudget, ReleaseRecord
from .reservation import Reservation
from .store import LEDGER_ENV, SCHEMA_VERSION
from .._dates import today as _today  # noqa: F401  (the day every record carries)

__all__ = [
    "Ledger",
    "Reservation",
    "DatasetBudget",
    "ReleaseRecord",
    "STATUS_LABELS",
    "ledger_path",
    "dataset_key_for_path",
    "exact_value",
    "format_exact",
    "LEDGER_ENV",
    "SCHEMA_VERSION",
    "DEFAULT_LOCK_TIMEOUT_S",
]
