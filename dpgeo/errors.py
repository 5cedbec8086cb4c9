"""Errors and warnings raised by dpgeo.

Every error message states the constraint that was broken and what to change,
so that the command line can print it as a one-line message.

The hierarchy is small on purpose::

    DpgeoError
    ├── ParameterError     a privacy or algorithm parameter is out of range
    ├── InputError         the point layer cannot be used (format, CRS, geometry)
    │   └── DataError      a condition of the private data itself (owner-only message)
    │       └── OutsideStudyAreaError   no point lies inside the study area (also a DomainError)
    ├── DomainError        the public study area is missing or unusable
    ├── OutputError        the result cannot be written where asked
    ├── LedgerError        the privacy-budget ledger cannot be used (corrupt, locked, read-only, newer)
    └── BudgetExceededError  a release would spend more than its dataset's total budget

    NotPrivateWarning      the result is *not* differentially private
    BudgetWarning          something to know about the privacy-budget ledger
    StudyAreaWarning       the study area was changed to be usable (an invalid polygon repaired)
"""

__all__ = [
    "DpgeoError",
    "ParameterError",
    "InputError",
    "DataError",
    "OutsideStudyAreaError",
    "DomainError",
    "OutputError",
    "LedgerError",
    "BudgetExceededError",
    "NotPrivateWarning",
    "BudgetWarning",
    "StudyAreaWarning",
    "WeakEpsilonWarning",
]


class DpgeoError(Exception):
    """Base class of every error raised on purpose by dpgeo."""


class ParameterError(DpgeoError, ValueError):
    """A parameter is outside its allowed range (e.g. ``epsilon <= 0``)."""


class InputError(DpgeoError, ValueError):
    """The input point layer cannot be used as given."""


class DataError(InputError):
    """A condition of the private data makes the run pointless (owner's mode only).

    For example: no point lies inside the study area, or no record is usable.
    The message describes the private data, so it is for the data owner who
    holds it and must not be shown to anyone else. It is raised before any
    noise is drawn or budget is charged. In unattended mode the same
    conditions are logged for the owner instead, and the run releases a
    valid, possibly empty, layer (see :func:`dpgeo.counting.count_points`).
    """

    owner_only = True


class DomainError(DpgeoError, ValueError):
    """The public study area (domain) is missing or cannot be used."""


class OutsideStudyAreaError(DataError, DomainError):
    """No point of the input lies inside the study area (owner's mode only; see :class:`DataError`)."""


class OutputError(DpgeoError, OSError):
    """The output layer cannot be written."""


class LedgerError(DpgeoError):
    """The privacy-budget ledger cannot be used, so nothing is released.

    Raised for a ledger file that is corrupt or not a dpgeo ledger, locked by
    another process for longer than the timeout, read-only, in a missing
    folder, or written by a newer dpgeo; and for a reservation used against
    its lifecycle (e.g. cancelled after noise may have been drawn).
    """


class BudgetExceededError(DpgeoError):
    """A release would spend more than its dataset's declared total budget.

    The message names the dataset, the total, what is spent and what is
    left. The same figures are attributes (exact ``fractions.Fraction``
    values; ``left_*`` is never negative) for front ends that format their
    own answer.
    """

    def __init__(self, message, *, dataset, requested_epsilon, total_epsilon, spent_epsilon, left_epsilon,
                 requested_delta=0, total_delta=None, spent_delta=0, left_delta=None):
        super().__init__(message)
        self.dataset = dataset
        self.requested_epsilon = requested_epsilon
        self.total_epsilon = total_epsilon
        self.spent_epsilon = spent_epsilon
        self.left_epsilon = left_epsilon
        self.requested_delta = requested_delta
        self.total_delta = total_delta
        self.spent_delta = spent_delta
        self.left_delta = left_delta

    def __reduce__(self):  # picklable (process pools, job queues) despite the keyword-only arguments
        return _rebuild_budget_error, (self.args[0], dict(vars(self)))


def _rebuild_budget_error(message, state):
    err = BudgetExceededError.__new__(BudgetExceededError)
    Exception.__init__(err, message)
    err.__dict__.update(state)
    return err


class NotPrivateWarning(UserWarning):
    """The result does not carry a differential-privacy guarantee.

    Raised when a run uses a fixed seed, a grid derived from the data
    (``domain_from_data``) or any other shortcut that reads the private data
    without a privacy mechanism. Such results are marked
    ``differentially_private: false`` in their metadata and must not be
    published.
    """


class WeakEpsilonWarning(UserWarning):
    """ε is above :data:`dpgeo.shared_params.WEAK_EPSILON`: the release is differentially private, but the
    guarantee is weak (docs/privacy.md, "Choosing ε"). Every front end shows it; the release's map says so too.
    """


class BudgetWarning(UserWarning):
    """Something the data owner should know about the privacy-budget ledger.

    For example: no total is declared for the dataset a release was charged
    to, so nothing limits its spending; or the input looks like a near-copy
    of a declared dataset's file. The command line prints it as a note.
    """


class StudyAreaWarning(UserWarning):
    """The public study area was changed to make it usable.

    For example: a self-intersecting polygon was repaired; the message says
    what area (km²) and bounding box were used instead. The command line
    prints it as one warning line.
    """
