"""The only clock dpgeo writes down: the UTC day.

Outputs, their metadata and the privacy-budget ledger carry the date of a release, never a time of day:
a time to the second, next to the time the run started (which its owner or a service's analyst may know),
would tell how long the run took, and run time grows with the number of records (docs/privacy.md,
"Output timestamps").
"""

from __future__ import annotations

import datetime as _dt

__all__ = ["today"]


def today() -> str:
    """The UTC day, ISO formatted (``2026-11-23``)."""
    return _dt.datetime.now(_dt.timezone.utc).date().isoformat()
