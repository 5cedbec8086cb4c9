"""The entry points' documentation, written once: the parameters every release shares, and the decorator that
adds a mechanism's own parameters (from its declaration) to its entry point's docstring.

:func:`entry_point` also checks, when the module is imported, that the entry
point's signature and the declaration agree: every declared parameter is a
keyword of the function with the declared default, and every keyword is
declared or one of the common ones. The Python API cannot drift from the
other front ends.
"""

from __future__ import annotations

import functools
import inspect
import textwrap

from ..declare import REQUIRED
from ..series_params import series_offered
from ..shared_params import ALIASES, PREVIEW_KEYS, SHARED_PARAMS, shared_offered

__all__ = ["COMMON_DOCS", "COMMON_DEFAULTS", "common_keys", "entry_point", "param_doc"]

#: ``name: (type, text)`` of the keyword arguments every release shares.
COMMON_DOCS = {
    "points": ("GeoDataFrame, GeoSeries, str, tuple, PointTable or PointSource",
               "The private points: a point layer with a CRS, a file path (also a glob such as "
               "``\"data/*.parquet\"`` or a folder of Parquet files), a :class:`~dpgeo.counting.PointSource` "
               "from :func:`~dpgeo.counting.open_points` (to choose a layer, columns or engine), or "
               "``(x, y, crs)``. Files are read in batches, never whole."),
}

_TYPES = {"number": "float", "integer": "int", "text": "str", "flag": "bool"}


def param_doc(p) -> tuple[str, str]:
    """``(type, text)`` of a declared parameter, for a numpydoc Parameters section."""
    if p.kind == "choice":
        typ = "{" + ", ".join(f'"{c}"' for c in p.choices) + "}"
    else:
        typ = _TYPES[p.kind]
    if not p.required:
        typ += ", optional"
    extra = []
    if p.unit and p.unit != "%":
        extra.append(f"Unit: {p.unit}.")
    if p.range_text() and p.kind in ("number", "integer"):
        extra.append(f"Range: {p.range_text()}.")
    if not p.required:
        extra.append((f"Default: {p.none_means} (see above)." if p.none_means == "automatic" else
                      f"Default: {p.none_means}.") if p.default is None else f"Default: ``{p.default!r}``.")
    return typ, " ".join([p.help, *extra])


#: The Python type of a series keyword where its declaration's kind does not say it, and what only the Python
#: API adds to its declared help (dpgeo.series_params).
_SERIES_API = {
    "time": ("str or array_like, optional",
             " For points given in memory: their times, instead of a column. Returns a "
             ":class:`~dpgeo.series.SeriesRelease`."),
    "period_start": ("str, date or datetime, optional", ""),
    "period_end": ("str, date or datetime, optional", ""),
    "append": ("str, path or SeriesRelease, optional", " The earlier series is its file, or the SeriesRelease."),
}


def _api_doc(p, api) -> tuple[str, str]:
    """``(type, text)`` of a declared parameter, with what only the Python API says of it (``api``: ``name:
    (type, note)``)."""
    typ, text = param_doc(p)
    api_typ, note = api.get(p.name, (typ, ""))
    return api_typ, text.replace(p.help, p.help + note, 1)


#: The Python type of a shared keyword where its declaration's kind does not say it, and what only the Python API
#: adds to its declared help (dpgeo.shared_params).
_SHARED_API = {
    "domain": ("bbox, polygon, GeoDataFrame, path or StudyArea", " A shapely polygon or a GeoDataFrame works too."),
    "domain_crs": ("optional", ""),
    "crs": ("optional", ""),
    "input_crs": ("optional", ""),
    "person": ("str or array_like, optional",
               " A column name (file or frame input) or an array of identifiers (tuple input); a named pandas "
               "Series is recorded in the metadata by its name."),
    "unattended": ("bool", " The owner's warnings go to ``diagnostics[\"owner_warnings\"]`` and the ``dpgeo.owner`` "
                           "logger. Default ``False``: such conditions raise :class:`~dpgeo.errors.DataError`, an "
                           "owner-only message, before any noise is drawn."),
    "ledger": ("dpgeo.budget.Ledger, path, None or False",
               " ``False``: record nothing. The charge is made before any private data is read; runs that are not "
               "private (a seed, ``domain_from_data``) are never charged."),
    "progress": ("callable, optional", ""),
    "scheduler": ("None, \"local\", int, str or distributed.Client",
                  " A number of workers starts a ``LocalCluster`` here; a ``Client`` uses an existing cluster "
                  "(:func:`dpgeo.counting.dask.count_with_dask`). Same layer as without a scheduler for the same "
                  "seed (with a per-person cap: the same law)."),
    "max_memory_bytes": ("int or str, optional", " Bytes, or e.g. ``\"8G\"`` (:mod:`dpgeo.resources`)."),
    "max_points_per_record": ("int", " ``sensitivity=`` is a deprecated alias."),
}


# -- the shared keywords (dpgeo.shared_params), as declared --
COMMON_DOCS.update({p.name: _api_doc(p, _SHARED_API) for p in shared_offered("api")})

# -- a series (pipeline/run.py, series/): one release per public period, its keywords as declared --
COMMON_DOCS.update({p.name: _api_doc(p, _SERIES_API) for p in series_offered("api")})

#: The defaults of the keyword arguments every release shares (see :data:`COMMON_DOCS`).
COMMON_DEFAULTS = {**{p.name: p.default for p in shared_offered("api") if p.name != "epsilon"},
                   **{p.name: p.default for p in series_offered("api")}}


def common_keys(mech) -> tuple:
    """The shared keyword arguments an entry point of ``mech`` takes (no Dask scheduler for a mechanism that
    reads the points themselves; a preview reads nothing)."""
    if mech.reads is None:
        return tuple(k for k in PREVIEW_KEYS if k != "epsilon")
    return tuple(k for k in COMMON_DEFAULTS if not (k == "scheduler" and mech.reads == "points"))


def _full_signature(func, mech):
    """``func``'s signature with its ``**common`` replaced by the shared keyword arguments, defaults included."""
    sig = inspect.signature(func)
    own = [p for p in sig.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
    names = {p.name for p in own}
    extra = [inspect.Parameter(k, inspect.Parameter.KEYWORD_ONLY, default=COMMON_DEFAULTS[k])
             for k in common_keys(mech) if k not in names]
    return sig.replace(parameters=own + extra)


#: The keywords of a map series (``pipeline/run.py``, ``series/``), which every entry point of a mechanism that reads data
#: takes, whether or not its function names them.
_SERIES_KEYS = tuple(p.name for p in series_offered("api"))


def _with_series(target, mech):
    """``target`` taking the series keywords it does not name: given any, the run goes to the one pipeline with the
    function's own arguments and them (a series needs no code in the entry point); otherwise ``target`` runs."""
    sig = inspect.signature(target)
    missing = [k for k in _SERIES_KEYS if k not in sig.parameters]
    if not missing or mech.reads is None:
        return target
    params = list(sig.parameters.values())
    tail = [p for p in params if p.kind is inspect.Parameter.VAR_KEYWORD]
    head = [p for p in params if p.kind is not inspect.Parameter.VAR_KEYWORD]
    full = sig.replace(parameters=head + [inspect.Parameter(k, inspect.Parameter.KEYWORD_ONLY,
                                                            default=COMMON_DEFAULTS[k]) for k in missing] + tail)

    @functools.wraps(target)
    def with_series(*args, **kwargs):
        series = {k: kwargs.pop(k) for k in missing if k in kwargs}
        from ..series.options import is_series

        if not is_series(series):
            return target(*args, **kwargs)
        bound = sig.bind(*args, **kwargs)
        bound.apply_defaults()
        values = dict(bound.arguments)
        for p in tail:
            values.update(values.pop(p.name, {}))
        values.update(series)
        from ..pipeline.run import run_release

        return run_release(mech, values.pop(next(iter(sig.parameters))), values)

    with_series.__signature__ = full
    return with_series


def _public_names(target):
    """``target`` taking each shared keyword by its public name (:data:`dpgeo.shared_params.ALIASES`): the
    signature shows the public name, and a deprecated name is still taken, with a DeprecationWarning."""
    sig = inspect.signature(target)
    inner = {new: old for old, new in ALIASES.items() if old in sig.parameters}  # the function's own older name
    if not inner and not any(new in sig.parameters for new in ALIASES.values()):
        return target
    public = sig.replace(parameters=[p.replace(name=ALIASES[p.name]) if p.name in inner.values() else p
                                     for p in sig.parameters.values()])

    @functools.wraps(target)
    def public_names(*args, **kwargs):
        import warnings

        for old, new in ALIASES.items():
            if old in kwargs:
                if new in kwargs:
                    raise TypeError(f"give {new}= only ({old}= is its deprecated name)")
                warnings.warn(f"{old}= is deprecated: use {new}= (the same value)", DeprecationWarning, stacklevel=2)
                kwargs[new] = kwargs.pop(old)
        for new, old in inner.items():
            if new in kwargs:
                kwargs[old] = kwargs.pop(new)
        return target(*args, **kwargs)

    public_names.__signature__ = public
    return public_names


def entry_point(mech, *, returns="Release\n    The layer, its privacy metadata and the owner's diagnostics."):
    """Decorator: the entry point of ``mech``, its Parameters section generated and its signature checked.

    The function declares the mechanism's own parameters and may take the
    shared ones (:data:`COMMON_DOCS`) as ``**common``: its signature (what
    :func:`inspect.signature` and ``help()`` show) then lists them all, with
    their defaults, and an unknown keyword is refused as by any function.
    The keywords of a map series (``time=``, ``period=``, ...) are added to
    every entry point of a mechanism that reads data, whether or not its
    function names them.
    """

    def decorate(func):
        if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in inspect.signature(func).parameters.values()):
            full = _full_signature(func, mech)

            @functools.wraps(func)
            def wrapper(*args, **kwargs):
                bound = full.bind(*args, **kwargs)  # a TypeError for a keyword nobody declared
                return func(*bound.args, **bound.kwargs)

            wrapper.__signature__ = full
            target = wrapper
        else:
            target = func
        target = _public_names(_with_series(target, mech))
        sig = inspect.signature(target)
        declared = {p.name: p for p in mech.params if "api" in p.fronts}
        for name, p in declared.items():
            if name not in sig.parameters:
                raise TypeError(f"{func.__name__} lacks the declared parameter {name!r}")
            default = sig.parameters[name].default
            want = inspect.Parameter.empty if p.default is REQUIRED else p.default
            if default != want:
                raise TypeError(f"{func.__name__}: {name} defaults to {default!r}, declared {want!r}")
        for name in sig.parameters:
            if name not in declared and name not in COMMON_DOCS:
                raise TypeError(f"{func.__name__}: keyword {name!r} is neither declared nor common")
        lines = ["Parameters", "----------"]
        for name in sig.parameters:
            typ, text = param_doc(declared[name]) if name in declared else COMMON_DOCS[name]
            lines.append(f"{name} : {typ}")
            lines.extend(textwrap.wrap(text, 100, initial_indent="    ", subsequent_indent="    "))
        lines += ["", "Returns", "-------", *returns.splitlines()]
        doc = inspect.cleandoc(func.__doc__ or "")
        head, sep, examples = doc.partition("\nExamples\n--------\n")
        target.__doc__ = head.rstrip() + "\n\n" + "\n".join(lines) + ("\n\nExamples\n--------\n" + examples
                                                                     if sep else "") + "\n"
        target.mechanism = mech
        return target

    return decorate


def _md(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def parameters_markdown(mechanisms) -> str:
    """``docs/parameters.md``: one table per mechanism, generated from the declarations (``dev/update-generated``)."""
    out = ["# Parameters of every mechanism", "",
           "Generated from the mechanisms' declarations (`dpgeo/declarations/`) by `dev/update-generated`; do not edit "
           "by hand (a test compares this file with the declarations). The same declaration makes the Python "
           "keyword, the command-line option, the QGIS parameter and the service input, so the four cannot "
           "disagree. Every release also takes the shared parameters (ε, the study area, the contribution bound, the "
           "dataset, the seed, ...: their table is at the end) and the outputs.",
           ""]
    for m in mechanisms:
        fronts = []
        if m.entry_point:
            fronts.append(f"Python `dpgeo.{m.entry_point}()`")
        if m.command and "cli" in m.fronts:
            fronts.append(f"`dpgeo {m.command}`")
        if m.qgis_id and "qgis" in m.fronts:
            fronts.append(f"QGIS `dpgeo:{m.qgis_id}`")
        if "service" in m.fronts:
            fronts.append(f"service process `{m.name}`")
        out += [f"## {m.title}", "", _md(m.description), "", "Offered as: " + ", ".join(fronts) + ".", ""]
        if m.exactly_one:
            out += ["Give exactly one of: " + "; ".join(" or ".join(f"`{n}`" for n in g) for g in m.exactly_one)
                    + ".", ""]
        if m.at_most_one:
            out += ["Give at most one of: " + "; ".join(" or ".join(f"`{n}`" for n in g) for g in m.at_most_one)
                    + " (with none, the run chooses from ε).", ""]
        out += ["| Python | command line | QGIS | type | unit | range | default | where | meaning |",
                "|---|---|---|---|---|---|---|---|---|"]
        for p in m.params:
            typ = "one of " + ", ".join(f"`{c}`" for c in p.choices) if p.kind == "choice" else p.kind
            fronts = p.fronts - ({"qgis"} if p.layer_style and m.reads is None else set())  # a preview writes no layer
            if p.layer_style and "qgis" in fronts:
                typ += " (QGIS: an optional output layer)"
            where = ", ".join(f for f in ("api", "cli", "qgis", "service") if f in fronts)
            out.append(
                f"| `{p.name}` | {f'`{p.cli_flag}`' if 'cli' in fronts else '—'} | "
                f"{f'`{p.qgis}`' if 'qgis' in fronts else '—'} | {typ} | {_md(p.unit) or '—'} | "
                f"{_md(p.range_text()) or '—'} | {_md(p.default_text())}{' (advanced)' if p.advanced else ''} | "
                f"{where} | {_md(p.help)} |")
        out.append("")
    out += shared_markdown() + series_markdown() + outputs_markdown(mechanisms)
    return "\n".join(out)


def outputs_markdown(mechanisms) -> list:
    """The tables of the metadata fields (``dpgeo.metadata_fields``, ``Mechanism.outputs``) in
    ``docs/parameters.md``."""
    from ..metadata_fields import COMMON_FIELDS

    def table(fields):
        rows = ["| key | label | section | unit | meaning |", "|---|---|---|---|---|"]
        return rows + [f"| `{f.key}` | {_md(f.label)} | {f.section} | {f.unit or '—'} | {_md(f.help) or '—'} |"
                       for f in fields]

    out = ["## What a release publishes: its metadata fields", "",
           "Declared once, with the label `dpgeo info`, QGIS, the HTML map's privacy panel and the PNG footer "
           "show (`dpgeo/metadata_fields.py` for the fields every release shares, `outputs` in each mechanism's "
           "declaration for its own).", "", "### Every release", "", *table(COMMON_FIELDS), ""]
    seen = set()
    for m in mechanisms:
        own = [f for f in m.outputs if f.key not in seen]
        seen |= {f.key for f in own}
        if own:
            out += [f"### {m.title}", "", *table(own), ""]
    return out


def shared_markdown() -> list:
    """The table of the shared keywords (``dpgeo.shared_params``) in ``docs/parameters.md``."""
    out = ["## Every release: the shared parameters", "",
           "Declared once in `dpgeo/shared_params.py`; the Python keyword, the command-line option, the QGIS "
           "parameter and the service input of each are generated from it, with the same range everywhere. "
           "The service takes the study area, the CRSs and the contribution bound from the dataset's "
           "configuration. `sensitivity=` is a deprecated Python name of `max_points_per_record`.", "",
           "| Python | command line | QGIS | service | type | range | default | meaning |",
           "|---|---|---|---|---|---|---|---|"]
    for p in SHARED_PARAMS:
        typ = COMMON_DOCS[p.name][0] if p.name in COMMON_DOCS else p.kind
        out.append(f"| `{p.name}` | {f'`{p.cli_flag}`' if 'cli' in p.fronts else '—'} | "
                   f"{f'`{p.qgis}`' if 'qgis' in p.fronts else '—'} | "
                   f"{f'`{p.name}`' if 'service' in p.fronts else '—'} | {_md(typ)} | {_md(p.range_text()) or '—'} | "
                   f"{_md(p.default_text())}{' (advanced)' if p.advanced else ''} | {_md(p.help)} |")
    return out + [""]


def series_markdown() -> list:
    """The table of the series' keywords in ``docs/parameters.md``."""
    out = ["## Every release: a map series", "",
           "Every mechanism that reads data releases one map per public period when given a time and a period "
           "(README, \"Maps over time\"; docs/privacy.md §6). The same keywords everywhere; the service takes "
           "`time` (one of the dataset's `time_columns`), `period`, `period_start`, `period_end`, "
           "`person_accounting`, `append` (a series id) and `cumulative` as process inputs.", "",
           "| Python | command line | QGIS | type | default | meaning |", "|---|---|---|---|---|---|"]
    for p in series_offered("api"):
        typ = COMMON_DOCS[p.name][0]
        qgis = p.qgis if "qgis" in p.fronts else None
        out.append(f"| `{p.name}` | `{p.cli_flag}` | {f'`{qgis}`' if qgis else '—'} | {_md(typ)} | "
                   f"{_md(p.default_text())}{' (advanced)' if p.advanced else ''} | {_md(p.help)} |")
    return out + [""]


def qgis_offered(mechanisms) -> list:
    """The QGIS algorithms' names and titles, which the plugin shows (and refuses to run, saying how to install
    the library) when it cannot import dpgeo: ``qgis_plugin/dpgeo_qgis/offered.json``."""
    return [{"name": m.qgis_id, "title": m.title} for m in mechanisms if m.qgis_id and "qgis" in m.fronts]
