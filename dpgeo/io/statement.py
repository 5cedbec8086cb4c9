"""The privacy statement of a release in plain words, shared by the HTML map and the PNG.

Everything here is plain text built from the release's metadata; the HTML
writer escapes it (metadata can hold user-provided names).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..metadata_fields import panel_items
from ..shared_params import WEAK_EPSILON, epsilon_status, epsilon_warning

__all__ = ["PrivacyStatement", "privacy_statement", "privacy_line"]


@dataclass
class PrivacyStatement:
    """What a map says about its privacy (plain text, unescaped).

    Attributes
    ----------
    private : bool
        ``metadata["differentially_private"]`` is true.
    headline : str
        ``"Differentially private"`` or ``"NOT differentially private"``.
    summary : str
        One or two sentences on what the guarantee means, or why there is none.
    reasons : list of str
        Why the release is not private (empty when it is).
    items : list of (str, str)
        Labelled facts: mechanism, ε and δ, neighbouring relation, contribution
        cap, dataset, release id, study area, counts, cell size, when made.
    """

    private: bool
    headline: str
    summary: str
    reasons: list = field(default_factory=list)
    items: list = field(default_factory=list)
    weak: bool = False  # private, but ε above the declared weak threshold (dpgeo.shared_params)


def _num(v) -> str:
    if isinstance(v, bool) or v is None:
        return str(v)
    if isinstance(v, (int, float)) and math.isfinite(v):
        return f"{v:.4g}"
    return str(v)


def _when(v):
    """The release date as written (``2026-11-23``; older releases carried a UTC time: shown as its day)."""
    if not v:
        return ""
    import datetime as dt

    try:
        t = dt.datetime.fromisoformat(str(v))
    except ValueError:
        return str(v)
    if t.tzinfo is not None and t.utcoffset() != dt.timedelta(0):
        return str(v)
    return t.strftime("%Y-%m-%d")


def _name(v):
    """A dataset/release given as a string or a dict with a name or id."""
    if isinstance(v, dict):
        for k in ("name", "id", "release_id"):
            if v.get(k) not in (None, ""):
                return str(v[k])
        return None
    return None if v in (None, "") else str(v)


def privacy_statement(metadata: dict) -> PrivacyStatement:
    """The privacy statement of a release from its metadata.

    Parameters
    ----------
    metadata : dict
        A release's metadata (as written by dpgeo). Keys used when present:
        ``differentially_private``, ``not_private_reasons``, ``mechanism``,
        ``epsilon``, ``delta``, ``neighbouring_relation``, ``privacy_unit``,
        ``sensitivity_points_per_record``, ``dataset``, ``release_id``,
        ``domain``, ``dp_count_interval``, ``cell_width_m``, ``created_utc``,
        ``dpgeo_version``.

    Returns
    -------
    PrivacyStatement

    Examples
    --------
    >>> s = privacy_statement({"differentially_private": True, "epsilon": 1.0, "delta": 0.0,
    ...                        "mechanism": "DP-DBSCAN spans", "privacy_unit": "record",
    ...                        "neighbouring_relation": "add or remove one record"})
    >>> s.headline, dict(s.items)["Privacy loss"]
    ('Differentially private', 'ε = 1, δ = 0 (pure ε-differential privacy)')
    >>> privacy_statement({"differentially_private": False,
    ...                    "not_private_reasons": ["a fixed random seed was used"]}).headline
    'NOT differentially private'
    """
    md = metadata or {}
    private = md.get("differentially_private") is True
    weak = epsilon_status(md) == "weak"
    unit = "person" if md.get("privacy_unit") == "person" else "record"
    eps, delta = md.get("epsilon"), md.get("delta")
    reasons = [str(r) for r in (md.get("not_private_reasons") or [])]
    if not private and not reasons:
        reasons = ["the release's metadata does not state that it is differentially private"]

    items = []
    if md.get("mechanism"):
        items.append(("Mechanism", str(md["mechanism"])))
    if eps is None:
        items.append(("Privacy loss", "none stated (no ε: computed without differential privacy)"))
    else:
        d = 0.0 if delta is None else delta
        kind = "pure ε-differential privacy" if d == 0 else "(ε, δ)-differential privacy"
        items.append(("Privacy loss", f"ε = {_num(eps)}, δ = {_num(d)} ({kind})"))
    if md.get("neighbouring_relation"):
        items.append(("Neighbouring datasets", str(md["neighbouring_relation"])))
    cap = md.get("sensitivity_points_per_record")
    if cap is not None:
        if unit == "person":
            items.append(("Person cap", f"at most {_num(cap)} point(s) per person; extra points dropped at random"))
        elif not md.get("neighbouring_relation"):  # the relation already states the record cap
            items.append(("Record cap", f"at most {_num(cap)} point(s) per record"))
    if _name(md.get("dataset")):
        items.append(("Dataset", _name(md["dataset"])))
    rid = _name(md.get("release_id")) or _name(md.get("release"))
    if rid:
        items.append(("Release", rid))
    series = md.get("series")
    if isinstance(series, dict) and series.get("period"):
        n = len(md.get("periods") or []) or series.get("n_periods")
        what = "running totals over " if series.get("cumulative") else ""
        items.append(("Series", f"{what}{_num(n)} periods by {series['period']} ({series.get('timezone', 'UTC')}), "
                                f"{series.get('period_start')} to {md.get('period_end') or series.get('period_end')}"
                                f"; {series.get('accounting', '')}".rstrip("; ")))
    dom = md.get("domain")
    if isinstance(dom, dict) and dom.get("description"):
        items.append(("Study area", str(dom["description"])))
    interval = md.get("dp_count_interval")
    counts = "dp_count is a noisy count of points"
    if isinstance(interval, str) and interval.startswith("95%"):
        counts += f"; the interval is a 95% range for the true count of {_counted(md)}"
    elif interval:
        counts += f"; interval: {interval}"
    items.append(("Counts", counts))
    # the mechanism's own fields, as declared for the map (Mechanism.outputs, dpgeo.metadata_fields)
    items += panel_items(md)
    made = " ".join(x for x in (_when(md.get("created_utc")),
                                md.get("dpgeo_version") and f"with dpgeo {md['dpgeo_version']}") if x)
    if made:
        items.append(("Made", made))

    if private:
        factor = math.exp(eps) if isinstance(eps, (int, float)) and eps < 50 else None
        summary = (f"Adding or removing any one {unit} changes the probability of this map (or of any other) "
                   f"by at most a factor of e^ε" + (f" ≈ {factor:.3g}" if factor else "") +
                   f"; this bounds what anyone can learn from the map about whether a given {unit} is in the data.")
        headline = "Differentially private"
        if weak:
            headline = f"Differentially private, but weak: ε = {_num(eps)} is above {WEAK_EPSILON:g}"
            summary = epsilon_warning(eps) + ". " + summary
    else:
        summary = ("This map does not carry a differential privacy guarantee: it may reveal information about "
                   "individual records. Do not publish it.")
        headline = "NOT differentially private"
    return PrivacyStatement(private=private, headline=headline, summary=summary, reasons=reasons, items=items,
                            weak=weak)


def privacy_line(metadata: dict) -> str:
    """The statement on one line (the PNG's footer).

    Examples
    --------
    >>> privacy_line({"differentially_private": True, "epsilon": 0.5, "delta": 0.0,
    ...               "mechanism": "DP WaveCluster (PrivTHR)",
    ...               "neighbouring_relation": "add or remove one record"})
    'Differentially private: DP WaveCluster (PrivTHR); ε = 0.5, δ = 0; neighbouring datasets: add or remove one record'
    """
    s = privacy_statement(metadata)
    d = dict(s.items)
    parts = [d[k] for k in ("Mechanism",) if k in d]
    if "Privacy loss" in d:
        parts.append(d["Privacy loss"].split(" (")[0])
    if "Neighbouring datasets" in d:
        parts.append("neighbouring datasets: " + d["Neighbouring datasets"])
    for k in ("Dataset", "Release"):
        if k in d:
            parts.append(f"{k.lower()} {d[k]}")
    if not s.private:
        parts.append("reasons: " + "; ".join(s.reasons))
    return f"{s.headline}: " + "; ".join(parts)


def _counted(md) -> str:
    """What one feature's ``dp_count`` counts the points of, in the words of the layer's kind."""
    method = str(md.get("method") or "")
    if method == "dp_heat_bands":
        return "the band's cells"
    if method.startswith(("dp_heat", "dp_hotspots")):
        return "the cell"
    if md.get("layer") == "levels":
        return "the level's cells"
    return "the cluster's cells"
