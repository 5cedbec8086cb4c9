"""A charge committed to the ledger for one release, and its lifecycle (reserved → completed, failed or cancelled)."""

from __future__ import annotations

import contextlib
import os
from fractions import Fraction

from ..errors import LedgerError
from .amounts import _check_name, format_exact

__all__ = ["Reservation"]


class Reservation:
    """A charge committed to the ledger for one release, and its lifecycle.

    States: *reserved* (counts as spent; cancellable) → after `noise_started`
    still reserved but no longer cancellable → *completed* (`complete`) or
    *failed* (`fail`, or an error inside the ``with`` block). `cancel` is the
    only way back to "not spent", and only before `noise_started`. A process
    killed at any point leaves the charge reserved: counted, and shown as not
    completed.

    Used as a context manager, an exception inside the block marks the
    charge failed (it stays spent: the block may have drawn noise) and a
    normal exit completes it if `complete` was not called. Wrap the steps
    that come before any noise, such as reading the input, in
    `before_noise`: an error there cancels the charge.

    Attributes
    ----------
    release_id, dataset, mechanism, analyst, date : str
    epsilon, delta : Fraction
    new_dataset : bool
        This reservation created the dataset's entry (say so to the owner once).
    total_epsilon, total_delta : Fraction or None
        The dataset's declared totals at reservation time.
    spent_epsilon, spent_delta : Fraction
        The dataset's spent totals right after this charge.
    status : str
        ``"reserved"``, ``"completed"``, ``"failed"`` or ``"cancelled"`` as far as this object knows.
    series_id : str or None
        For a series (and for periods appended to one): the series' release id.
    cost_epsilon : Fraction
        What this charge spends from the dataset (a series: ε once or ε per period; an append to a
        ``parallel`` series: 0).
    appended : bool
        Whether this charge appends periods to an existing series (``release_id`` is then the run's own id).
    """

    series_id = None
    appended = False

    def __init__(self, ledger, *, release_id, dataset, epsilon, delta, mechanism, analyst, date, new_dataset,
                 total_epsilon, total_delta, spent_epsilon, spent_delta):
        self.ledger = ledger
        self.release_id = release_id
        self.dataset = dataset
        self.epsilon = epsilon
        self.delta = delta
        self.mechanism = mechanism
        self.analyst = analyst
        self.date = date
        self.new_dataset = new_dataset
        self.total_epsilon = total_epsilon
        self.total_delta = total_delta
        self.spent_epsilon = spent_epsilon
        self.spent_delta = spent_delta
        self.status = "reserved"
        self._noise = False
        self.cost_epsilon = epsilon

    def __repr__(self):
        return (f"<Reservation {self.release_id} of {self.dataset!r}: epsilon={format_exact(self.epsilon)}, "
                f"{self.status}{', noise started' if self._noise and self.status == 'reserved' else ''}>")

    @property
    def cancellable(self) -> bool:
        """True until noise may have been drawn (and while still reserved)."""
        return self.status == "reserved" and not self._noise

    @property
    def left_epsilon(self) -> Fraction | None:
        """ε left for the dataset right after this charge; None without a declared total."""
        return None if self.total_epsilon is None else max(Fraction(0), self.total_epsilon - self.spent_epsilon)

    def noise_started(self):
        """Declare that noise may be drawn from now on: the charge can no longer be cancelled."""
        if self.status == "cancelled":
            raise LedgerError(f"release {self.release_id} was cancelled: reserve again before drawing noise")
        self._noise = True

    def cancel(self):
        """Withdraw the charge: allowed only before `noise_started` (e.g. the input could not be read)."""
        if not self.cancellable:
            raise LedgerError(f"release {self.release_id} of dataset {self.dataset!r} cannot be cancelled: "
                              + ("noise may have been drawn, so its charge stands" if self._noise
                                 else f"it is {self.status}"))
        self.ledger._set_status(self.release_id, "cancelled")
        self.status = "cancelled"

    def complete(self, outputs=()):
        """Record success and the files (or URLs) written; the charge stands."""
        if self.status != "reserved":
            raise LedgerError(f"release {self.release_id} is {self.status}; only a reserved release is completed "
                              "(add files to a completed one with Ledger.add_outputs)")
        outputs = [_check_name(os.fspath(o), "an output") for o in outputs]
        self._noise = True
        self.ledger._set_status(self.release_id, "completed", outputs)
        self.status = "completed"

    def fail(self):
        """Record that the run stopped after noise may have been drawn; the charge stands."""
        if self.status != "reserved":
            raise LedgerError(f"release {self.release_id} is {self.status}; only a reserved release can fail")
        self._noise = True
        self.ledger._set_status(self.release_id, "failed")
        self.status = "failed"

    @contextlib.contextmanager
    def before_noise(self):
        """A block that draws no noise: an error inside cancels the charge; leaving it starts the noise phase."""
        if not self.cancellable:
            raise LedgerError(f"release {self.release_id} is past the point where noise may be drawn")
        try:
            yield self
        except BaseException as exc:
            try:
                self.cancel()
            except LedgerError as cancel_exc:  # the charge stays (counted): never hide the first error
                if hasattr(exc, "add_note"):
                    exc.add_note(f"the charge stays recorded: {cancel_exc}")
            raise
        self.noise_started()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if self.status != "reserved":
            return False
        if exc_type is None:
            self.complete()
            return False
        try:
            self.fail()
        except LedgerError as ledger_exc:  # still reserved, i.e. counted: never hide the first error
            if hasattr(exc, "add_note"):
                exc.add_note(f"the charge stays recorded as reserved: {ledger_exc}")
        return False
