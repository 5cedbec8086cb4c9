"""``dpgeo preview`` and ``dpgeo info`` for people: grouped sections, units, what Γ and MinPts′ mean.

Both print a dictionary of public facts (a noise preview, a release's privacy metadata). Scripts read
the same dictionary with ``--json``; this module only lays it out: one section per topic, each value
with its unit, the thresholds with one line on what they mean, and long values (a study area's
outline, a grid) shortened to what a person can read. Keys it does not know are listed at the end, so
nothing in the dictionary is hidden.
"""

from __future__ import annotations

import math

__all__ = ["format_preview", "format_info"]

#: Values longer than this (characters) are shortened; ``--json`` prints them whole.
MAX_VALUE_CHARS = 200
_LABEL_WIDTH = 24
_JSON_HINT = "--json prints it whole"


# -- values ------------------------------------------------------------------------------------------------------

def _num(v, digits=4) -> str:
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
        return _num(v)
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


def _metres(v) -> str:
    return f"{_num(v)} m" if isinstance(v, (int, float)) and not isinstance(v, bool) else _plain(v)


def _points(v) -> str:
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return f"{_num(v)} point" + ("" if v == 1 else "s")
    return _plain(v)


def _cells(v) -> str:
    return f"{_num(v)} cells" if isinstance(v, int) and not isinstance(v, bool) else _plain(v)


def _share(v) -> str:
    if isinstance(v, dict):
        return ", ".join(f"{k} {_num(x, 3)}" for k, x in v.items())
    return _plain(v)


def _vertices(wkt) -> int:
    import re

    return len(re.findall(r"-?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?\s+-?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?", wkt))


def _outline(wkt) -> str:
    if not wkt:
        return "none"
    kind = str(wkt).split("(", 1)[0].strip().title().replace("Multipolygon", "MultiPolygon")
    return f"{kind} of {_vertices(str(wkt)):,} vertices ({_JSON_HINT})"


def _coord(v) -> str:
    return f"{v:.10g}" if isinstance(v, (int, float)) and not isinstance(v, bool) else _plain(v)


def _bounds(b, crs=None) -> str:
    if isinstance(b, (list, tuple)) and len(b) == 4:
        return (f"x {_coord(b[0])} to {_coord(b[2])}, y {_coord(b[1])} to {_coord(b[3])}"
                + (f" ({crs})" if crs else ""))
    return _plain(b)


def _grid(g) -> str:
    if not isinstance(g, dict):
        return _plain(g)
    parts = []
    if "nx" in g and "ny" in g:
        parts.append(f"{_num(g['nx'])} × {_num(g['ny'])} cells")
    if "cell_width_m" in g:
        parts.append(f"of {_num(g['cell_width_m'])} m")
    if isinstance(g.get("origin"), (list, tuple)) and len(g["origin"]) == 2:
        parts.append(f"from ({_coord(g['origin'][0])}, {_coord(g['origin'][1])}) m")
    return " ".join(parts) or _plain(g)


def _by_points(rows) -> str:
    """The preview's table of auto's choices, one line per number of points."""
    if not isinstance(rows, list):
        return _plain(rows)
    pad = "\n" + " " * (_LABEL_WIDTH + 3)
    return pad.join(
        f"{_num(r['n_points'])}: cells of {_metres(r['cell_width_m'])} ({_num(r['n_cells'])} cells), smallest "
        f"cluster {_num(r['smallest_cluster_points'])} points"
        + (f" (a compact group alone in the study area: {_num(r['smallest_group_points'])})"
           if "smallest_group_points" in r else "")
        + f", floor {r['floor_level_range'][0]}–"
        f"{r['floor_level_range'][1]} points per 3×3 cells"
        + (f", every level within {_num(r['gamma_all_levels'])}" if "gamma_all_levels" in r else "") for r in rows)


def _status(md) -> str:
    if md.get("differentially_private") is True:
        return "yes: differentially private"
    return "NO: not differentially private"


# -- what is shown where -----------------------------------------------------------------------------------------

#: (key, section, label, format, explanation). Sections are printed in the order they first appear here.
_FIELDS = [
    ("differentially_private", "Privacy", "differentially private", lambda v, md: _status(md), None),
    ("not_private_reasons", "Privacy", "why not", lambda v, md: "; ".join(map(str, v)) if v else "none", None),
    ("epsilon", "Privacy", "ε (privacy budget)", lambda v, md: _num(v), None),
    ("delta", "Privacy", "δ", lambda v, md: _num(v) + (" (pure ε-DP)" if v == 0 else ""), None),
    ("epsilon_split", "Privacy", "ε split", lambda v, md: _share(v), None),
    ("neighbouring_relation", "Privacy", "neighbouring datasets", lambda v, md: _plain(v), None),
    ("privacy_unit", "Privacy", "privacy unit", lambda v, md: _plain(v), None),
    ("sensitivity_points_per_record", "Privacy", "points per unit", lambda v, md: f"at most {_num(v)}", None),
    ("person_column", "Privacy", "person column", lambda v, md: _plain(v), None),
    ("spends_budget", "Privacy", "spends budget", lambda v, md: "no (reads no data)" if v is False else _plain(v),
     None),
    ("sampler", "Privacy", "noise sampler", lambda v, md: _plain(v), None),
    ("noise", "Privacy", "noise", lambda v, md: _plain(v), None),
    ("noise_q", "Privacy", "noise parameter q", lambda v, md: _share(v) if isinstance(v, dict) else _num(v), None),

    ("mechanism", "Release", "mechanism", lambda v, md: _plain(v), None),
    ("method", "Release", "method", lambda v, md: _plain(v), None),
    ("dataset", "Release", "dataset", lambda v, md: _plain(v), None),
    ("release_id", "Release", "release id", lambda v, md: _plain(v), None),
    ("created_utc", "Release", "made", lambda v, md: _plain(v), None),
    ("ledger_release_date", "Release", "recorded in the ledger", lambda v, md: _plain(v), None),
    ("dpgeo_version", "Release", "dpgeo version", lambda v, md: _plain(v), None),
    ("dataset_spent_epsilon_exact", "Release", "dataset's ε spent", lambda v, md: _plain(v), None),
    ("dataset_spent_epsilon", "Release", "dataset's ε spent", lambda v, md: _num(v), None),
    ("dataset_total_epsilon", "Release", "dataset's total ε", lambda v, md: "none declared" if v is None else _num(v),
     None),
    ("output_crs", "Release", "file CRS", lambda v, md: _plain(v), None),

    ("domain", "Study area and grid", "study area", None, None),  # expanded by _domain_lines
    ("working_crs", "Study area and grid", "working CRS", lambda v, md: _plain(v), None),
    ("cell_width_m", "Study area and grid", "cell width", lambda v, md: _metres(v), None),
    ("n_cells", "Study area and grid", "cells", lambda v, md: _num(v), None),
    ("grid", "Study area and grid", "grid", lambda v, md: _grid(v), None),
    ("grid_shape", "Study area and grid", "grid (rows × columns)",
     lambda v, md: " × ".join(map(_num, v)) if isinstance(v, (list, tuple)) else _plain(v), None),
    ("cell_offset", "Study area and grid", "cell offset", lambda v, md: _plain(v), None),
    ("histogram", "Study area and grid", "histogram", lambda v, md: _plain(v), None),
    ("theta", "Study area and grid", "sparse threshold θ",
     lambda v, md: "none: every cell's noisy count is released" if v is None
     else f"{_points(v)}: cells whose noisy count is below θ are not released", None),

    ("radius_m", "Parameters", "radius α", lambda v, md: _metres(v), None),
    ("min_points", "Parameters", "MinPts", lambda v, md: _points(v), None),
    ("beta", "Parameters", "β", lambda v, md: f"{_num(v)} (the bounds below hold with probability ≥ "
                                                f"{_num(round(100 * (1 - v), 6))}%)"
     if isinstance(v, (int, float)) else _plain(v), None),
    ("eta", "Parameters", "η′ (cell width factor)", lambda v, md: f"{_num(v)} (cells of η′·α/√2)", None),
    ("gamma_method", "Parameters", "Γ bound", lambda v, md: _plain(v), None),
    ("extent", "Parameters", "extent", lambda v, md: _plain(v), None),
    ("wavelet", "Parameters", "wavelet", lambda v, md: _plain(v), None),
    ("mode", "Parameters", "boundary mode", lambda v, md: _plain(v), None),
    ("level", "Parameters", "wavelet level", lambda v, md: _plain(v), None),
    ("percentile", "Parameters", "percentile p", lambda v, md: f"{_num(v)}%", None),
    ("connectivity", "Parameters", "connectivity", lambda v, md: f"{_num(v)} neighbours", None),
    ("count_split", "Parameters", "share of ε for counts", lambda v, md: _plain(v), None),
    ("count_cap", "Parameters", "count cap", lambda v, md: "none" if v is None else _points(v), None),
    ("k_rule", "Parameters", "k rule", lambda v, md: _plain(v), None),
    ("k", "Parameters", "k (clusters asked)", lambda v, md: _plain(v), None),
    ("iterations", "Parameters", "iterations", lambda v, md: _plain(v), None),
    ("count_share", "Parameters", "share of ε for counts", lambda v, md: _num(v, 3), None),
    ("layer_share", "Parameters", "share of ε for the layer", lambda v, md: _num(v, 3), None),
    ("lattice_m", "Parameters", "lattice step", lambda v, md: _metres(v), None),
    ("initialisation", "Parameters", "initial centroids", lambda v, md: _plain(v), None),

    ("gamma", "Thresholds", "Γ", lambda v, md: _points(v),
     "the most the noise adds to a neighbourhood sum (probability ≥ 1 − β); a core cell needs MinPts + Γ"),
    ("gamma_low", "Thresholds", "Γ_low", lambda v, md: _points(v), None),
    ("gamma_laplace", "Thresholds", "Γ of the paper (Γ_Lap)", lambda v, md: _points(v), None),
    ("core_threshold", "Thresholds", "core threshold", lambda v, md: f"{_points(v)} (MinPts + Γ)", None),
    ("min_points_prime", "Thresholds", "MinPts′", lambda v, md: f"{_points(v)} (MinPts + Γ + Γ_low)",
     "every cell whose α-neighbourhood truly holds MinPts′ points is found (probability ≥ 1 − β)"),
    ("extent_threshold", "Thresholds", "extent threshold", lambda v, md: _points(v), None),
    ("kappa", "Thresholds", "κ (neighbourhood)", lambda v, md: f"{_cells(v)} summed per neighbourhood", None),
    ("threshold", "Thresholds", "threshold", lambda v, md: _plain(v), None),
    ("threshold_rule", "Thresholds", "threshold rule", lambda v, md: f"coefficient {v} threshold", None),
    ("threshold_units", "Thresholds", "threshold units", lambda v, md: _plain(v), None),
    ("min_count", "Thresholds", "smallest count kept", lambda v, md: _points(v), None),
    ("count_error_95", "Thresholds", "count error (95%)", lambda v, md: f"± {_points(v)} per released count",
     None),
    ("count_sd", "Thresholds", "count noise s.d.", lambda v, md: _points(v), None),
    ("dp_count_interval", "Thresholds", "dp_count interval", lambda v, md: _plain(v), None),

    ("auto", "Parameters", "radius and MinPts", lambda v, md: "chosen from ε (auto: none given)" if v else "given",
     None),
    ("epsilon_total", "Privacy", "ε of the noisy total", lambda v, md: _num(v), None),
    ("epsilon_histogram", "Privacy", "ε of the histogram", lambda v, md: _num(v), None),
    ("noisy_total", "Result", "noisy total n̂", lambda v, md: _points(v), "released with ε₀; it fixes the cell width"),
    ("fine_cell_width_m", "Study area and grid", "finest grid", lambda v, md: f"cells of {_metres(v)}", None),
    ("coarsening_factor", "Study area and grid", "coarsening", lambda v, md: f"cells {_num(v)} × as wide as the finest",
     None),
    ("max_cells", "Study area and grid", "largest grid", lambda v, md: _cells(v), None),
    ("floor_fdr", "Thresholds", "floor: FDR", lambda v, md: _num(v),
     "the expected share of shown cells whose 3×3 neighbourhood is empty"),
    ("fdr", "Thresholds", "floor: FDR", lambda v, md: _num(v),
     "the expected share of shown cells whose 3×3 neighbourhood is empty"),
    ("floor_level", "Thresholds", "floor", lambda v, md: _points(v), None),
    ("noise_sd_of_level", "Thresholds", "noise s.d. of a level", lambda v, md: _points(v), None),
    ("min_cluster_mass", "Thresholds", "smallest cluster", lambda v, md: _points(v), None),
    ("min_prominence", "Thresholds", "smallest prominence", lambda v, md: _points(v), None),
    ("gamma_all_levels", "Thresholds", "Γ (every level at once)", lambda v, md: _points(v), None),
    ("by_points", "Auto: its choices", "for n points", lambda v, md: _by_points(v), None),
    ("n_clusters", "Result", "clusters", lambda v, md: _num(v), None),
    ("n_levels", "Result", "levels (tree)", lambda v, md: _num(v), None),
    ("n_core_cells", "Result", "core cells", lambda v, md: _num(v), None),
    ("n_span_cells", "Result", "cells in spans", lambda v, md: _num(v), None),
    ("n_significant", "Result", "significant coefficients", lambda v, md: _num(v), None),
    ("k_prime", "Result", "k′", lambda v, md: _num(v), None),
    ("n_coefficients", "Result", "coefficients", lambda v, md: _num(v), None),
]
_BY_KEY = {f[0]: f for f in _FIELDS}
_SECTIONS = list(dict.fromkeys(f[1] for f in _FIELDS))


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
        out.append(("outline", _outline(d["wkt_simplified"]) + (f", simplified by {_num(tol)}" if tol else ""),
                    None))
    if d.get("from_private_data"):
        out.append(("from the data", "yes: taken from the private data (NOT private)", None))
    for k, v in d.items():
        if k not in ("description", "bounds", "crs", "wkt", "wkt_simplified", "simplify_tolerance",
                     "from_private_data"):
            out.append((k.replace("_", " "), _plain(v), None))
    return out


def _sections(md: dict, skip=()) -> list:
    """``[(section, [(label, value, explanation)])]`` for every key of ``md``, unknown keys last."""
    groups = {s: [] for s in _SECTIONS}
    other = []
    for key, value in md.items():
        if key in skip or (key == "dataset_spent_epsilon" and "dataset_spent_epsilon_exact" in md):
            continue
        spec = _BY_KEY.get(key)
        if spec is None:
            other.append((key.replace("_", " "), _plain(value), None))
            continue
        order, (_, section, label, fmt, note) = _ORDER[key], spec
        if key == "domain":
            groups[section] += [(order + i / 100, *row) for i, row in enumerate(_domain_lines(value))]
        else:
            groups[section].append((order, label, fmt(value, md), note))
    out = [(s, [row[1:] for row in sorted(groups[s], key=lambda r: r[0])]) for s in _SECTIONS if groups[s]]
    if other:
        out.append(("Other", other))
    return out


_ORDER = {f[0]: i for i, f in enumerate(_FIELDS)}


def _render(title, lines_before, sections) -> str:
    out = [title, *lines_before]
    for name, rows in sections:
        out.append("")
        out.append(name)
        for label, value, note in rows:
            out.append(f"  {label:<{_LABEL_WIDTH}} {value}")
            if note:
                out.append(f"  {'':<{_LABEL_WIDTH}} {note}")
    return "\n".join(out) + "\n"


# -- the two commands ------------------------------------------------------------------------------------------------

def format_preview(p: dict) -> str:
    """A noise preview (``dpgeo.noise_preview``) for people.

    Examples
    --------
    >>> text = format_preview({"epsilon": 1.0, "radius_m": 100.0, "min_points": 30, "gamma": 49.07,
    ...                        "min_points_prime": 128.15, "theta": None, "spends_budget": False})
    >>> print(text.splitlines()[0])
    Noise preview: what a run with these parameters would have (reads no data, spends no budget)
    >>> "MinPts′" in text and "128.2 points" in text and "None" not in text
    True
    """
    title = "Noise preview: what a run with these parameters would have (reads no data, spends no budget)"
    return _render(title, [], _sections(dict(p), skip=("spends_budget",)))


def format_info(md: dict) -> str:
    """A release's privacy metadata (``dpgeo.io.read_layer_metadata``) for people.

    Examples
    --------
    >>> text = format_info({"mechanism": "DP-DBSCAN spans", "differentially_private": True, "epsilon": 1.0,
    ...                     "delta": 0.0, "domain": {"crs": "EPSG:4326", "bounds": [-93.33, 44.89, -93.19, 45.06],
    ...                     "wkt": "POLYGON ((0 0, 1 0, 1 1, 0 0))"}})
    >>> print(text.splitlines()[0])
    DP-DBSCAN spans: differentially private, ε = 1
    >>> "Polygon of 4 vertices" in text and "POLYGON ((" not in text
    True
    """
    private = md.get("differentially_private") is True
    head = f"{md.get('mechanism') or 'dpgeo release'}: " + (
        "differentially private" if private else "NOT differentially private")
    if md.get("epsilon") is not None:
        head += f", ε = {_num(md['epsilon'])}"
    return _render(head, [], _sections(dict(md)))
