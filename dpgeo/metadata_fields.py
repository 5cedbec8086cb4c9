"""The fields of a release's metadata, declared once with their label and meaning, and their text for people.

Every release publishes a dictionary of public facts (:attr:`dpgeo.release.Release.metadata`): the privacy
guarantee, the study area and grid, the parameters, the thresholds, the result. The fields every release
shares are declared here (:data:`COMMON_FIELDS`); each mechanism declares its own beside its parameters
(:attr:`dpgeo.declare.Mechanism.outputs`). Each field is a :class:`Meta`: its key, its label, the section
it belongs to, its unit and what it means. ``dpgeo info`` and ``dpgeo preview``, the QGIS noise preview,
the HTML map's privacy panel and the PNG footer read them through :func:`describe`; no front end names a
mechanism's fields. A key not declared anywhere is still shown, under "Other": nothing is hidden.

Like :mod:`dpgeo.declare`, this module imports nothing of the data side.

Examples
--------
>>> sections = dict(describe({"epsilon": 1.0, "cell_width_m": 250.0, "n_clusters": 3}))
>>> sections["Study area and grid"]
[('cell width', '250 m', 'the width of a grid cell')]
>>> dict(describe({"cell_width_m": 250.0}, explain=False))["Study area and grid"]
[('cell width', '250 m', None)]
>>> [label for label, _, _ in sections["Privacy"]], sections["Result"][0][:2]
(['ε (privacy budget)'], ('clusters', '3'))
"""

from __future__ import annotations

import math
import re

from .declare import SECTIONS, Meta, declared_outputs

__all__ = ["Meta", "COMMON_FIELDS", "SECTIONS", "declared_fields", "describe", "describe_text", "release_text",
           "field_text", "panel_items", "number_text", "MAX_VALUE_CHARS", "LABEL_WIDTH"]

#: Values longer than this (characters) are shortened; the JSON holds them whole.
MAX_VALUE_CHARS = 200
_JSON_HINT = "--json prints it whole"

def _m(key, label, section, help="", **kw) -> Meta:
    return Meta(key, label, section, help, **kw)


#: The fields every release (or a preview, or a series) may publish, whatever its mechanism.
COMMON_FIELDS = (
    _m("differentially_private", "differentially private", "Privacy",
       "whether the release carries the ε-DP guarantee (false with a test seed, a study area from the data, a method "
       "without noise)", render="status"),
    _m("not_private_reasons", "why not", "Privacy", "what broke the guarantee, when it is broken", render="reasons"),
    _m("epsilon", "ε (privacy budget)", "Privacy",
       "the privacy budget the release spent: one record changes the probability of any output by at most e^ε"),
    _m("delta", "δ", "Privacy", "the δ of (ε, δ)-DP; 0: pure ε-DP", render="delta"),
    _m("epsilon_split", "ε split", "Privacy",
       "how ε is divided between the release's noisy steps (they compose: the parts add up to ε)", unit="share"),
    _m("neighbouring_relation", "neighbouring datasets", "Privacy", "the two datasets the guarantee cannot tell apart"),
    _m("privacy_unit", "privacy unit", "Privacy", "what the guarantee protects: one record, or one person"),
    _m("sensitivity_points_per_record", "points per unit", "Privacy",
       "the most points one record (or one person) contributes; the noise scales with it", template="at most {}"),
    _m("person_column", "person column", "Privacy", "the column that says whose each point is"),
    _m("spends_budget", "spends budget", "Privacy",
       "whether this spends privacy budget (a preview reads no data and spends nothing)", unit="yes/no"),
    _m("sampler", "noise sampler", "Privacy", "how the noise is drawn (exact, from a cryptographic random source)"),
    _m("noise", "noise", "Privacy", "the noise distribution"),
    _m("noise_q", "noise parameter q", "Privacy",
       "the discrete Laplace parameter q = exp(-ε/Δ) of each noisy step", render="share"),
    _m("mechanism", "mechanism", "Release", "the mechanism and method that made the release"),
    _m("method", "method", "Release", "the method's id"),
    _m("dataset", "dataset", "Release", "the population the release was charged to in the privacy-budget ledger"),
    _m("release_id", "release id", "Release", "the release's id in the ledger"),
    _m("created_utc", "made", "Release",
       "the day the release was made (the day only: a time would tell how long it ran)"),
    _m("ledger_release_date", "recorded in the ledger", "Release", "the day the ledger recorded the release"),
    _m("dpgeo_version", "dpgeo version", "Release", "the dpgeo version that made it"),
    _m("dataset_spent_epsilon_exact", "dataset's ε spent", "Release", "the dataset's ε spent so far, exactly"),
    _m("dataset_spent_epsilon", "dataset's ε spent", "Release", "the dataset's ε spent so far"),
    _m("dataset_total_epsilon", "dataset's total ε", "Release",
       "the total ε declared for the dataset", none="none declared"),
    _m("output_crs", "file CRS", "Release", "the CRS of the file's coordinates"),
    _m("series", "series", "Series", "the periods' kind, bounds, time zone and how a person's cap counts"),
    _m("series_id", "series id", "Series", "the series' id in the ledger"),
    _m("periods", "periods", "Series",
       "the periods of the series, each with its label, bounds and release", render="list"),
    _m("period_start", "from", "Series", "the public start of the series (included)"),
    _m("period_end", "to (excluded)", "Series", "the public end of the series (excluded)"),
    _m("parameters", "period parameters", "Series", "the parameters of every period's release"),
    _m("tree_levels", "tree levels", "Series", "running totals: levels of the binary tree; each point is in one "
       "node per level"),
    _m("node_sensitivity", "node sensitivity", "Series", unit="points",
       help="running totals: the most one record changes a tree node's count, over all levels"),
    _m("grid_of", "grid of", "Series", "what the running totals' grid is laid over"),
    _m("shown_cells", "cells shown", "Series", "which cells the running totals' layer shows"),
    _m("domain", "study area", "Study area and grid", "the public study area the grid is laid over", render="domain"),
    _m("working_crs", "working CRS", "Study area and grid",
       "the projected CRS, in metres, the release was computed in"),
    _m("cell_width_m", "cell width", "Study area and grid",
       "the width of a grid cell", unit="metres", panel=True, column="cell width (m)"),
    _m("n_cells", "cells", "Study area and grid", "the cells of the grid in the study area", column="grid cells"),
    _m("grid", "grid", "Study area and grid", "the grid: cells across, cells down, cell width, origin", render="grid"),
    _m("histogram", "histogram", "Study area and grid",
       "how the noisy cell counts are released: every cell (dense) or above a threshold (sparse)"),
    _m("theta", "sparse threshold θ", "Study area and grid", "the sparse histogram's threshold",
       template="{}: cells whose noisy count is below θ are not released", unit="points",
       none="none: every cell's noisy count is released"),
    _m("count_error_95", "count error (95%)", "Thresholds",
       "the half-width of the 95% interval of one released count's noise",
       unit="points", template="± {} per released count", panel=True, column="count error (95%)"),
    _m("dp_count_interval", "dp_count interval", "Thresholds", "what the dp_count_low and dp_count_high columns bound"),
    _m("n_clusters", "clusters", "Result", "the features of the layer", panel=True),
)


# -- the values for people ------------------------------------------------------------------------------------------

def number_text(v, digits=4) -> str:
    """A number for people: integers with thousands separators, others to ``digits`` significant digits."""
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        if not math.isfinite(v):
            return str(v)
        if v == int(v) and abs(v) < 1e15:
            return f"{int(v):,}"
        return f"{v:,.{digits}g}" if abs(v) >= 1e-4 else f"{v:.{digits}g}"
    return str(v)


def _plain(v) -> str:
    """Any value on one line: yes/no, none, numbers, lists and dicts compactly; long text shortened."""
    if v is None:
        return "none"
    if isinstance(v, (bool, int, float)):
        return number_text(v)
    if isinstance(v, dict):
        text = ", ".join(f"{k} {_plain(x)}" for k, x in v.items())
    elif isinstance(v, (list, tuple)):
        text = ", ".join(_plain(x) for x in v)
    else:
        text = str(v)
    return _shorten(text)


def _shorten(text: str) -> str:
    text = " ".join(str(text).split())
    if len(text) <= MAX_VALUE_CHARS:
        return text
    return f"{text[:MAX_VALUE_CHARS - 1].rstrip()}… ({len(text):,} characters; {_JSON_HINT})"


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _unit_text(unit, v) -> str:
    if not _is_number(v):
        return _plain(v)
    n = number_text(v)
    if unit == "metres":
        return f"{n} m"
    if unit == "points":
        return f"{n} point" + ("" if v == 1 else "s")
    if unit == "cells":
        return f"{n} cells"
    if unit == "%":
        return f"{n}%"
    if unit == "neighbours":
        return f"{n} neighbours"
    return n


def _share(v) -> str:
    if isinstance(v, dict):
        return ", ".join(f"{k} {number_text(x, 3) if _is_number(x) else _plain(x)}" for k, x in v.items())
    return number_text(v, 3) if _is_number(v) else _plain(v)


def _coord(v) -> str:
    return f"{v:.10g}" if _is_number(v) else _plain(v)


def _grid(g) -> str:
    if not isinstance(g, dict):
        return _plain(g)
    parts = []
    if "nx" in g and "ny" in g:
        parts.append(f"{number_text(g['nx'])} × {number_text(g['ny'])} cells")
    if "cell_width_m" in g:
        parts.append(f"of {number_text(g['cell_width_m'])} m")
    if isinstance(g.get("origin"), (list, tuple)) and len(g["origin"]) == 2:
        parts.append(f"from ({_coord(g['origin'][0])}, {_coord(g['origin'][1])}) m")
    return " ".join(parts) or _plain(g)


#: The width of the labels in :func:`describe_text`.
LABEL_WIDTH = 24
_PAD = "\n" + " " * (LABEL_WIDTH + 3)


def _by_points(rows) -> str:
    """A preview's table of auto's choices, one line per number of points."""
    if not isinstance(rows, list):
        return _plain(rows)
    return _PAD.join(
        f"{number_text(r['n_points'])}: cells of {_unit_text('metres', r['cell_width_m'])} "
        f"({number_text(r['n_cells'])} cells), smallest cluster {number_text(r['smallest_cluster_points'])} points"
        + (f" (a compact group alone in the study area: {number_text(r['smallest_group_points'])})"
           if "smallest_group_points" in r else "")
        + ", "
        f"floor {r['floor_level_range'][0]}–{r['floor_level_range'][1]} points per 3×3 cells"
        + (f", every level within {number_text(r['gamma_all_levels'])}" if "gamma_all_levels" in r else "")
        for r in rows)


def _vertices(wkt) -> int:
    return len(re.findall(r"-?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?\s+-?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?", wkt))


def _outline(wkt) -> str:
    if not wkt:
        return "none"
    kind = str(wkt).split("(", 1)[0].strip().title().replace("Multipolygon", "MultiPolygon")
    return f"{kind} of {_vertices(str(wkt)):,} vertices ({_JSON_HINT})"


def _bounds(b, crs=None) -> str:
    if isinstance(b, (list, tuple)) and len(b) == 4:
        return (f"x {_coord(b[0])} to {_coord(b[2])}, y {_coord(b[1])} to {_coord(b[3])}"
                + (f" ({crs})" if crs else ""))
    return _plain(b)


def _domain_lines(d) -> list:
    if not isinstance(d, dict):
        return [("study area", _plain(d), None)]
    out = []
    if d.get("description"):
        out.append(("study area", _plain(d["description"]), None))
    if d.get("bounds") is not None:
        out.append(("bounds", _bounds(d["bounds"], d.get("crs")), None))
    if d.get("wkt"):
        out.append(("outline", _outline(d["wkt"]), None))
    elif d.get("wkt_simplified"):
        tol = d.get("simplify_tolerance")
        out.append(("outline", _outline(d["wkt_simplified"]) + (f", simplified by {number_text(tol)}" if tol else ""),
                    None))
    if d.get("from_private_data"):
        out.append(("from the data", "yes: taken from the private data (NOT private)", None))
    for k, v in d.items():
        if k not in ("description", "bounds", "crs", "wkt", "wkt_simplified", "simplify_tolerance",
                     "from_private_data"):
            out.append((k.replace("_", " "), _plain(v), None))
    return out


def _status(md) -> str:
    from .shared_params import epsilon_status

    status = epsilon_status(md)
    if status == "private":
        return "yes: differentially private"
    if status == "weak":
        from .shared_params import WEAK_EPSILON

        return f"yes, but weak: ε above {WEAK_EPSILON:g} (docs/privacy.md, \"Choosing ε\")"
    return "NO: not differentially private"


def field_text(f: Meta, value, md: dict) -> str:
    """The text of ``value`` as declared by ``f`` (its unit, template, what None means)."""
    r = f.render
    if r == "status":
        return _status(md)
    if r == "reasons":
        return "; ".join(map(str, value)) if value else "none"
    if r == "grid":
        return _grid(value)
    if r == "by_points":
        return _by_points(value)
    if r == "shape":
        return " × ".join(map(number_text, value)) if isinstance(value, (list, tuple)) else _plain(value)
    if r in ("share",):
        return _share(value)
    if r == "list":
        return _plain(value) if not isinstance(value, list) or len(value) <= 6 else \
            f"{len(value)}: {_plain(value[0])} … {_plain(value[-1])}"
    if r == "delta" and _is_number(value):
        return number_text(value) + (" (pure ε-DP)" if value == 0 else "")
    if r == "beta" and _is_number(value):
        return (f"{number_text(value)} (the bounds below hold with probability ≥ "
                f"{number_text(round(100 * (1 - value), 6))}%)")
    if value is None:
        return f.none
    if f.unit == "yes/no" and isinstance(value, bool):
        return "yes" if value else "no"
    return f.template.format(_unit_text(f.unit, value))


# -- the declarations ---------------------------------------------------------------------------------------------

def declared_fields(mechanisms=None) -> dict:
    """``{key: Meta}`` of every declared field: the common ones, then every declared mechanism's (those of
    ``mechanisms`` if given; ``import dpgeo`` declares them all). One key has one meaning: a key that two
    declarations label differently is an error."""
    pairs = declared_outputs() if mechanisms is None else [(m, f) for m in mechanisms for f in m.outputs]
    out = {f.key: f for f in COMMON_FIELDS}
    for m, f in pairs:
        if f.key in out and out[f.key] != f:
            raise ValueError(f"metadata field {f.key!r} is declared twice, differently ({m.name})")
        out[f.key] = f
    return out


_ORDER_CACHE = {}


def _declared():
    if _ORDER_CACHE.get("n") != len(declared_outputs()):
        _ORDER_CACHE["n"] = len(declared_outputs())
        fields = declared_fields()
        _ORDER_CACHE["fields"] = fields
        _ORDER_CACHE["order"] = {k: i for i, k in enumerate(fields)}
    return _ORDER_CACHE["fields"], _ORDER_CACHE["order"]


def describe(md: dict, *, skip=(), explain=True) -> list:
    """``[(section, [(label, text, meaning or None)])]`` for every key of ``md``, in the declared sections and order;
    keys nobody declared last, under "Other". ``explain=False``: the meaning only of the fields declared with
    ``note=True``."""
    fields, order = _declared()
    groups = {s: [] for s in SECTIONS}
    other = []
    for key, value in md.items():
        if key in skip or (key == "dataset_spent_epsilon" and "dataset_spent_epsilon_exact" in md):
            continue
        f = fields.get(key)
        if f is None:
            other.append((key.replace("_", " "), _plain(value), None))
            continue
        if f.render == "domain":
            groups[f.section] += [(order[key] + i / 100, *row) for i, row in enumerate(_domain_lines(value))]
        else:
            groups[f.section].append((order[key], f.label, field_text(f, value, md),
                                      f.help if explain or f.note else None))
    out = [(s, [row[1:] for row in sorted(groups[s], key=lambda r: r[0])]) for s in SECTIONS if groups[s]]
    if other:
        out.append(("Other", other))
    return out


def panel_items(md: dict, skip=()) -> list:
    """``[(Label, text)]`` of the fields of ``md`` declared for the map's panel (``panel=True``), in their
    declared order: what a published map says about its own mechanism."""
    fields, order = _declared()
    rows = [(order[k], f) for k, f in ((k, fields.get(k)) for k in md) if f is not None and f.panel and k not in skip]
    return [(f.label[:1].upper() + f.label[1:], field_text(f, md[f.key], md))
            for _, f in sorted(rows, key=lambda r: r[0])]


def describe_text(md: dict, title: str, *, before=(), skip=(), explain=False) -> str:
    """``md`` as text for people: ``title``, the lines ``before``, then one block per section of
    :func:`describe`, each field labelled and aligned, its meaning under it where declared so (every field's with
    ``explain``): ``dpgeo info``, ``dpgeo preview``, QGIS's log and layer abstract."""
    out = [title, *before]
    for name, rows in describe(md, skip=skip, explain=explain):
        out.append("")
        out.append(name)
        for label, value, note in rows:
            out.append(f"  {label:<{LABEL_WIDTH}} {value}")
            if note:
                out.append(f"  {'':<{LABEL_WIDTH}} {note}")
    return "\n".join(out) + "\n"


def release_text(md: dict, *, explain=False) -> str:
    """A release's metadata for people (``dpgeo info``, QGIS's log and layer abstract): a status line (with the
    weak-ε warning where ε is above the declared threshold), then :func:`describe_text`.

    Examples
    --------
    >>> print(release_text({"mechanism": "m", "differentially_private": True, "epsilon": 50.0}).splitlines()[1])
    warning: ε = 50 is above 10: a weak guarantee (one record may change the probability of what is published up to e^50 ≈ 10^22 times); a privacy officer would not call this private. Use ε ≤ 10, 1 or less where you can (docs/privacy.md, "Choosing ε")
    """
    from .shared_params import epsilon_status, epsilon_warning

    status = epsilon_status(md)
    head = f"{md.get('mechanism') or 'dpgeo release'}: " + (
        "NOT differentially private" if status == "not private" else "differentially private")
    if _is_number(md.get("epsilon")):
        head += f", ε = {number_text(md['epsilon'])}"
    before = [f"warning: {epsilon_warning(md['epsilon'])}"] if status == "weak" else []
    return describe_text(md, head, before=before, explain=explain)
