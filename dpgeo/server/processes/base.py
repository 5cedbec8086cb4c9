"""The small base class every process of the service derives from, and input validation against its schema.

A process declares its inputs as OGC API – Processes input descriptions with a
JSON Schema each (type, bounds, enumerations, defaults), which generic clients
use to build forms. :meth:`Process.validate` checks a request's inputs against
exactly those schemas — no undeclared input, no input by reference, every
bound — and then :meth:`Process.check` runs the library's own checks of the
public parameters (grid size, study area, noise bound). Both happen in the
request, before any job is queued and before any private data is touched; the
messages describe the parameters only.
"""

from __future__ import annotations

import copy
import math
import numbers
import re
from typing import ClassVar

from ...errors import ParameterError

__all__ = ["DATE_PATTERN", "FREE_TEXT_PATTERN", "PATTERN_RULES", "RELEASE_ID_PATTERN", "Process", "check_grid_size",
           "dataset_input", "epsilon_input", "title_input", "validate_inputs"]

#: The string patterns of the inputs: free text (a title), a release id, an ISO 8601 date or date-time.
FREE_TEXT_PATTERN = r"^[^\u0000-\u001f\u007f]*$"
RELEASE_ID_PATTERN = "^[0-9a-f]{32}$"
DATE_PATTERN = r"^[0-9T:+\-Z. /]+$"
#: What a value that does not match each pattern is told (the value itself is never echoed).
PATTERN_RULES = {
    FREE_TEXT_PATTERN: "must not contain control characters",
    RELEASE_ID_PATTERN: "must be a release id: 32 lowercase hex digits",
    DATE_PATTERN: "must be an ISO 8601 date or date-time, e.g. 2014-04-01 or 2014-04-01T06:00",
}


def dataset_input():
    return {"title": "Dataset",
            "description": "The dataset to release from (one of those granted to you). Its public study area, its "
                           "privacy unit and its total budget are set by the data owner.",
            "schema": {"type": "string", "minLength": 1, "maxLength": 64}, "minOccurs": 1, "maxOccurs": 1}


def epsilon_input():
    """ε's input description, from its declaration (:mod:`dpgeo.shared_params`): the same range everywhere."""
    from ...shared_params import shared_param

    p = shared_param("epsilon")
    return {"title": "Privacy budget ε",
            "description": p.help + " The ε this release spends from the dataset's total budget.",
            "schema": p.schema("service"), "minOccurs": 1, "maxOccurs": 1}


def title_input():
    return {"title": "Title", "description": "A title for the published layer (optional).",
            "schema": {"type": "string", "maxLength": 120, "pattern": FREE_TEXT_PATTERN},
            "minOccurs": 0, "maxOccurs": 1}


class Process:
    """One process of the service.

    Subclasses set ``id``, ``title``, ``description``, ``inputs`` (OGC input
    descriptions), ``outputs`` and ``job_control``, and implement
    :meth:`check` (public checks, in the request) and either :meth:`run`
    (a release: runs in a worker, reads the private data, spends budget) or
    :meth:`inline` (answers from public parameters alone).
    """

    id: str = ""
    title: str = ""
    description: str = ""
    version: str = "1.0.0"
    keywords: tuple = ()
    inputs: ClassVar[dict] = {}
    outputs: ClassVar[dict] = {}
    job_control: tuple = ("sync-execute", "async-execute")
    #: Whether executing it spends privacy budget (and reads private data, in a worker).
    spends_budget: bool = True

    # -- descriptions ----------------------------------------------------------------------------------------------

    def summary(self, base_url: str) -> dict:
        """The process summary of ``/processes``."""
        return {
            "id": self.id, "title": self.title, "description": self.description, "version": self.version,
            "keywords": list(self.keywords), "jobControlOptions": list(self.job_control),
            "outputTransmission": ["value"],
            "links": [{"href": f"{base_url}/processes/{self.id}", "rel": "self", "type": "application/json",
                       "title": "process description"}],
        }

    def describe(self, base_url: str, datasets=None) -> dict:
        """The full process description; ``datasets`` (the caller's granted names) become the dataset enum."""
        d = self.summary(base_url)
        inputs = copy.deepcopy(self.inputs)
        if "dataset" in inputs and datasets:
            inputs["dataset"]["schema"]["enum"] = sorted(datasets)
            if len(datasets) == 1:
                inputs["dataset"]["schema"]["default"] = next(iter(datasets))
        d["inputs"] = inputs
        d["outputs"] = copy.deepcopy(self.outputs)
        d["links"].append({"href": f"{base_url}/processes/{self.id}/execution",
                           "rel": "http://www.opengis.net/def/rel/ogc/1.0/execute", "type": "application/json",
                           "title": "execute"})
        return d

    # -- checks and execution --------------------------------------------------------------------------------------

    def validate(self, raw_inputs) -> dict:
        """The inputs checked against their schemas, with defaults filled in (raises ParameterError)."""
        return validate_inputs(raw_inputs, self.inputs)

    def check(self, params: dict, dataset, settings) -> dict:
        """Library checks of the public parameters for ``dataset``; returns the (possibly completed) params."""
        return params

    def run(self, points, params: dict, dataset: dict, *, ledger, analyst, progress=None):
        """The release itself, in a worker: the pipeline in unattended mode, charged to ``dataset`` in ``ledger``.

        ``points`` is a :class:`dpgeo.counting.inputs.PointFile`: the pipeline
        reads it only after the charge. Returns a :class:`dpgeo.result.ClusterLayer`.
        """
        raise NotImplementedError

    def inline(self, params: dict, dataset, settings) -> dict:
        """The outputs of a process that reads no data and spends nothing."""
        raise NotImplementedError

    def release_title(self, params: dict, dataset_title: str) -> str:
        return params.get("title") or f"{self.title} of {dataset_title} (ε = {params['epsilon']:g})"


def check_grid_size(area, cell_m: float, max_cells: int, what: str):
    """Refuse a grid of more than ``max_cells`` cells before building it (the service's memory bound).

    The grid's shape is the library's (:func:`dpgeo.resources.grid_shape`); the memory of the whole run is then
    checked by the pipeline itself (:func:`dpgeo.resources.check_plan`), before the dataset is read.
    """
    from ...resources import grid_shape

    nx, ny = grid_shape(area.polygon.bounds, cell_m)
    if nx * ny > max_cells:
        raise ParameterError(
            f"{what} gives a {nx:,} x {ny:,} grid ({nx * ny:,} cells) over this study area; this server allows at "
            f"most {max_cells:,} cells: use a larger value")
    return nx, ny


# -- input validation against the declared JSON Schemas ------------------------------------------------------------

def validate_inputs(raw, declared: dict) -> dict:
    """Check request inputs against OGC input descriptions; fill defaults.

    Examples
    --------
    >>> decl = {"n": {"schema": {"type": "integer", "minimum": 1, "default": 3}, "minOccurs": 0}}
    >>> validate_inputs({}, decl), validate_inputs({"n": {"value": 5}}, decl)
    ({'n': 3}, {'n': 5})
    >>> validate_inputs({"n": 0}, decl)
    Traceback (most recent call last):
    ...
    dpgeo.errors.ParameterError: input 'n' must be >= 1, got 0
    """
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ParameterError("'inputs' must be a JSON object of input name: value")
    unknown = sorted(set(raw) - set(declared))
    if unknown:
        name = unknown[0]
        shown = name if len(name) <= 40 and name.isprintable() else name[:40].encode("unicode_escape").decode() + "..."
        raise ParameterError(f"unknown input {shown!r}; this process takes: {', '.join(sorted(declared))}")
    out = {}
    for name, desc in declared.items():
        schema = desc.get("schema", {})
        if name not in raw or raw[name] is None:
            if desc.get("minOccurs", 1) >= 1 and "default" not in schema:
                raise ParameterError(f"input {name!r} is required ({desc.get('title', name)})")
            if "default" in schema:
                out[name] = schema["default"]
            continue
        value = raw[name]
        if isinstance(value, dict):
            if "href" in value:
                raise ParameterError(f"input {name!r}: inputs by reference (href) are not accepted; give the value")
            if set(value) - {"value", "mediaType", "encoding", "schema"} or "value" not in value:
                raise ParameterError(f"input {name!r} must be a value, or {{\"value\": ...}}")
            value = value["value"]
        out[name] = check_value(name, value, schema)
    return out


def check_value(name, value, schema):
    t = schema.get("type")
    if t == "number":
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
            raise ParameterError(f"input {name!r} must be a number, got {_show(value)}")
        value = float(value)
    elif t == "integer":
        if isinstance(value, float) and math.isfinite(value) and value.is_integer() and abs(value) < 2**53:
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise ParameterError(f"input {name!r} must be an integer, got {_show(value)}")
    elif t == "string":
        if not isinstance(value, str):
            raise ParameterError(f"input {name!r} must be a string, got {_show(value)}")
        if len(value) > schema.get("maxLength", 4096):
            raise ParameterError(f"input {name!r} must be at most {schema.get('maxLength', 4096)} characters")
        if len(value) < schema.get("minLength", 0):
            raise ParameterError(f"input {name!r} must not be empty")
        if "pattern" in schema and not re.search(schema["pattern"], value):
            rule = PATTERN_RULES.get(schema["pattern"], f"must match the pattern {schema['pattern']}")
            raise ParameterError(f"input {name!r} {rule}")
    if "enum" in schema and value not in schema["enum"]:
        raise ParameterError(f"input {name!r} must be one of {', '.join(map(str, schema['enum']))}; "
                             f"got {_show(value)}")
    if t in ("number", "integer"):
        lo, hi = schema.get("minimum"), schema.get("maximum")
        xlo, xhi = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
        if lo is not None and value < lo:
            raise ParameterError(f"input {name!r} must be >= {lo:g}, got {_show(value)}")
        if hi is not None and value > hi:
            raise ParameterError(f"input {name!r} must be <= {hi:g}, got {_show(value)}")
        if xlo is not None and value <= xlo:
            raise ParameterError(f"input {name!r} must be > {xlo:g}, got {_show(value)}")
        if xhi is not None and value >= xhi:
            raise ParameterError(f"input {name!r} must be < {xhi:g}, got {_show(value)}")
    return value


def _show(value):
    """A short, safe rendering of a caller's value for an error message (the caller's own input)."""
    if isinstance(value, (dict, list)):
        return f"a JSON {'object' if isinstance(value, dict) else 'array'}"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
