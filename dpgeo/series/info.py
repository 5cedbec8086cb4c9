"""What a series' metadata says about the series: its periods, its id, and how it is accounted for (public)."""

from __future__ import annotations

__all__ = ["ACCOUNTING_TEXT", "series_info"]

ACCOUNTING_TEXT = {
    "parallel": ("one record lies in one period: the periods compose in parallel, so the series costs epsilon "
                 "once; a later period appended with the same or a smaller epsilon costs nothing more "
                 "(docs/privacy.md §6, Series)"),
    "one-pass": ("at most {k} point(s) per person over the whole series, drawn in one pass over all periods: the "
                 "series costs epsilon once; no period can be appended to it (docs/privacy.md §6, Series)"),
    "sequential": ("at most {k} point(s) per person in each period: the periods compose sequentially, each costs "
                   "epsilon, and the dataset's total bounds them all (docs/privacy.md §6, Series)"),
}


def series_info(periods, so, composition, c, series_id, prior=None) -> dict:
    """What every period's metadata, and the series', say about the series (public)."""
    md = periods.to_metadata()
    if prior is not None:
        md["period_start"] = prior.metadata["series"]["period_start"]
        md["n_periods"] = prior.n_periods + len(periods)
    md.update(series_id=series_id, time_column=so.time.column if so.time.column else "given in memory",
              time_format=so.time.time_format,
              composition=composition, unit=f"{'person' if c.cap is not None else 'record'}:"
                                            f"{c.cap if c.cap is not None else c.sensitivity}",
              accounting=ACCOUNTING_TEXT[composition].format(k=c.cap),
              person_accounting=None if c.cap is None else so.person_accounting, cumulative=so.cumulative)
    return md
