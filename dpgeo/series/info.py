"""What a series' metadata says: its periods, its id, how it is accounted for (public), and the series' metadata
made from its periods' (what all share, and one entry per period with what differs)."""

from __future__ import annotations

__all__ = ["ACCOUNTING_TEXT", "series_info", "series_metadata"]

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


#: Keys of a period's metadata that are the period's own (not the series').
_PERIOD_KEYS = ("period", "period_index", "period_start", "period_end", "series", "release_id")


def series_metadata(md, period_mds, outcome_mds, charge_md, info, p, prior=None) -> dict:
    """The series' metadata: what all periods share, plus one entry per period with what differs."""
    out = dict(md)
    shared = {}
    differ = set()
    for om in outcome_mds:
        for k, val in om.items():
            if k in shared and shared[k] != val:
                differ.add(k)
            shared.setdefault(k, val)
    earlier = [] if prior is None else [dict(e) for e in prior.metadata.get("periods", [])]
    if prior is not None:  # continued: what differed before still differs, and so does what changes now
        differ |= {k for e in earlier for k in e if k in shared}
        differ |= {k for k, val in shared.items() if k in prior.metadata and prior.metadata[k] != val}
        for e in earlier:  # the earlier periods' value of a key that was the same in all of them
            e.update({k: prior.metadata[k] for k in differ if k not in e and k in prior.metadata})
    out.update({k: val for k, val in shared.items() if k not in differ})
    for k in differ:
        out.pop(k, None)
    out.update(charge_md)
    out["release_id"] = charge_md.get("release_id", info["series_id"])  # this run (an append has its own)
    out["series_id"] = info["series_id"]
    out["series"] = info
    out["parameters"] = {k: val for k, val in p.items() if k != "epsilon"}
    entries = earlier
    if prior is not None:  # what the series costs stays the series' epsilon; each period says its own
        out["epsilon"] = prior.metadata.get("epsilon")
    for pm in period_mds:
        e = {"label": pm["period"], "period_start": pm["period_start"], "period_end": pm["period_end"],
             "release_id": pm["release_id"], "epsilon": pm["epsilon"]}
        e.update({k: pm[k] for k in sorted(differ) if k in pm})
        entries.append(e)
    out["periods"] = entries
    out["period_start"] = info["period_start"]
    out["period_end"] = entries[-1]["period_end"]
    return out
