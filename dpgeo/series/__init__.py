"""A map series: one DP release per public period, read, charged and written as one.

The one home of what a series is, besides the runner's step that releases
each period (:mod:`dpgeo.pipeline`)::

    layer     SeriesRelease, the time-enabled layer, cluster ids that persist across periods
    info      what a series' metadata says about its periods and accounting
    append    an earlier series read back and checked, to append later periods

Its options are declared in :mod:`dpgeo.series_params` (read by every front
end); its periods in the ledger in :mod:`dpgeo.budget.series_rows`.
"""

from __future__ import annotations

from .layer import PERIOD_FIELDS, SeriesRelease, period_file_name, persistent_ids, series_layer

__all__ = ["SeriesRelease", "persistent_ids", "series_layer", "PERIOD_FIELDS", "period_file_name"]
