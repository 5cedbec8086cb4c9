"""Errors and warnings raised by dpgeo.

Every error message states the constraint that was broken and what to change,
so that the command line can print it as a one-line message.

The hierarchy is small on purpose::

    DpgeoError
    ├── ParameterError     a privacy or algorithm parameter is out of range
    ├── InputError         the point layer cannot be used (format, CRS, geometry)
    ├── DomainError        the public study area is missing or unusable
    └── OutputError        the result cannot be written where asked

    NotPrivateWarning      the result is *not* differentially private
"""

__all__ = [
    "DpgeoError",
    "ParameterError",
    "InputError",
    "DomainError",
    "OutputError",
    "NotPrivateWarning",
]


class DpgeoError(Exception):
    """Base class of every error raised on purpose by dpgeo."""


class ParameterError(DpgeoError, ValueError):
    """A parameter is outside its allowed range (e.g. ``epsilon <= 0``)."""


class InputError(DpgeoError, ValueError):
    """The input point layer cannot be used as given."""


class DomainError(DpgeoError, ValueError):
    """The public study area (domain) is missing or cannot be used."""


class OutputError(DpgeoError, OSError):
    """The output layer cannot be written."""


class NotPrivateWarning(UserWarning):
    """The result does not carry a differential-privacy guarantee.

    Raised when a run uses a fixed seed, a grid derived from the data
    (``domain_from_data``) or any other shortcut that reads the private data
    without a privacy mechanism. Such results are marked
    ``differentially_private: false`` in their metadata and must not be
    published.
    """
