"""Every front end is generated from the mechanisms' declarations: the command line, the service and the docs
agree with them (the QGIS dialog is compared in tests/qgis/test_plugin.py)."""

from __future__ import annotations

import argparse
import inspect
import json
import math
from pathlib import Path

import pytest

import dpgeo
from dpgeo.declare import REQUIRED, Mechanism, Param
from dpgeo.errors import ParameterError
from dpgeo.generators.docs import parameters_markdown, qgis_offered
from dpgeo.declarations.registry import MECHANISMS, mechanism

ROOT = Path(__file__).resolve().parent.parent


def _subparser(command):
    from dpgeo.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[command]


@pytest.mark.parametrize("mech", [m for m in MECHANISMS if m.command], ids=lambda m: m.name)
def test_cli_options_are_the_declared_parameters(mech):
    actions = {a.dest: a for a in _subparser(mech.command)._actions}
    for p in mech.offered("cli"):
        a = actions[p.cli_dest]
        assert p.cli_flag in a.option_strings
        grouped = any(p.name in g for g in mech.exactly_one)
        assert a.required == (p.required and not grouped), p.name
        if not p.required:
            assert a.default == p.default, p.name
        if p.kind == "choice":
            assert list(a.choices) == list(p.choices)
        assert p.help.replace("%", "%%")[:40] in a.help
    # nothing on the command line that the declaration does not know (besides the options every run shares)
    shared = {"help", "input", "output", "layer", "x", "y", "input_crs", "quoted_newlines", "out_crs", "engine",
              "scheduler", "basemap", "table", "sql", "geometry", "replace",  # a PostGIS input and output (docs/postgis.md)
              "basemap_attribution", "epsilon", "max_points_per_record", "person", "max_points_per_person", "seed",
              "max_memory", "dataset", "ledger", "unattended", "domain", "domain_crs", "crs", "domain_from_data",
              "quiet", "json", "explain", "title",
              # a map series (pipeline/run.py, series/): every release command takes them
              "time", "period", "period_start", "period_end", "timezone", "time_format", "person_accounting",
              "append", "per_period_files", "cumulative"}
    declared = {p.cli_dest for p in mech.offered("cli")}
    assert set(actions) - declared <= shared, set(actions) - declared - shared


@pytest.mark.parametrize("mech", [m for m in MECHANISMS if "service" in m.fronts], ids=lambda m: m.name)
def test_service_inputs_are_the_declared_parameters(mech):
    from dpgeo.server.processes import PROCESSES

    proc = PROCESSES[mech.name]
    for p in mech.offered("service"):
        desc = proc.inputs[p.name]
        assert desc["schema"] == p.schema("service")
        assert desc["minOccurs"] == (1 if p.required else 0)
        assert desc["description"] == p.help
    extra = set(proc.inputs) - {p.name for p in mech.offered("service")}
    series = {"time", "period", "period_start", "period_end", "person_accounting", "append", "cumulative"}
    assert extra <= {"dataset", "epsilon", "title"} | series


@pytest.mark.parametrize("mech", [m for m in MECHANISMS if m.entry_point], ids=lambda m: m.name)
def test_python_entry_points_take_the_declared_parameters(mech):
    func = getattr(dpgeo, mech.entry_point)
    sig = inspect.signature(func)
    for p in mech.offered("api"):
        want = inspect.Parameter.empty if p.default is REQUIRED else p.default
        assert sig.parameters[p.name].default == want, p.name
        assert p.name in func.__doc__


def test_generated_files_are_up_to_date():
    """docs/parameters.md and the QGIS plugin's list of algorithms are what dev/update-generated writes."""
    assert (ROOT / "docs" / "parameters.md").read_text(encoding="utf-8") == parameters_markdown(MECHANISMS) + "\n", \
        "run dev/update-generated"
    offered = json.loads((ROOT / "qgis_plugin" / "dpgeo_qgis" / "offered.json").read_text(encoding="utf-8"))
    assert offered == qgis_offered(MECHANISMS), "run dev/update-generated"


def test_registry_names_are_unique_and_found():
    for attr in ("name", "command", "qgis_id"):
        names = [getattr(m, attr) for m in MECHANISMS if getattr(m, attr)]
        assert len(names) == len(set(names)), attr
    for m in MECHANISMS:
        assert mechanism(m.name) is m


def test_param_check_states_the_constraint():
    p = Param("share", "number", "Share", "A share.", minimum=0, maximum=1, exclusive_minimum=True,
              exclusive_maximum=True, default=0.5)
    assert p.check(0.25) == 0.25 and p.check(None) == 0.5 or p.check(None) is None
    for bad in (0, 1, -1, math.nan, math.inf, "x", True):
        with pytest.raises(ParameterError, match=r"share must be .* in \(0, 1\)"):
            p.check(bad)
    n = Param("n", "integer", "N", "How many.", minimum=1)
    assert n.check(3) == 3
    with pytest.raises(ParameterError, match="n must be an integer >= 1, got 2.5"):
        n.check(2.5)
    c = Param("mode", "choice", "Mode", "Which.", choices=("a", "b"), default="a")
    with pytest.raises(ParameterError, match="mode must be one of 'a', 'b'"):
        c.check("c")
    assert c.schema() == {"type": "string", "enum": ["a", "b"], "default": "a"}


def test_exactly_one_of_a_group():
    class M(Mechanism):
        params = (Param("a", "number", "Cell size", "A.", default=None), Param("b", "integer", "Grid size", "B.",
                                                                                 default=None))
        exactly_one = (("a", "b"),)

    m = M()
    assert m.validate({"a": 1.0}) == {"a": 1.0, "b": None}
    for values in ({}, {"a": 1.0, "b": 2}):
        with pytest.raises(ParameterError, match="exactly one of the cell size .* or the grid size"):
            m.validate(values)


@pytest.mark.parametrize("mech", [m for m in MECHANISMS if m.command and m.reads is not None], ids=lambda m: m.name)
def test_cli_series_options_are_the_declared_ones(mech):
    """The map series' options on the command line: declared once (dpgeo.series_params), with that help, those
    choices and defaults."""
    from dpgeo.series_params import SERIES_PARAMS, series_offered

    actions = {a.dest: a for a in _subparser(mech.command)._actions}
    assert {p.cli_dest for p in series_offered("cli")} <= set(actions)
    for p in series_offered("cli"):
        a = actions[p.cli_dest]
        assert a.option_strings == [p.cli_flag]
        assert a.help.startswith(p.help.replace("%", "%%")), p.name
        switch = p.kind == "flag" or p.name == "append"  # --append: a switch, the series is the first -o file
        assert a.default == (False if switch else p.default), p.name
        assert list(a.choices or ()) == list(p.choices), p.name
    assert series_offered("cli") == SERIES_PARAMS  # every series option is on the command line


@pytest.mark.parametrize("mech", [m for m in MECHANISMS if "service" in m.fronts and m.reads is not None],
                         ids=lambda m: m.name)
def test_service_series_inputs_are_the_declared_ones(mech):
    from dpgeo.server.processes import PROCESSES
    from dpgeo.series_params import series_offered

    inputs = PROCESSES[mech.name].inputs
    for p in series_offered("service"):
        desc = inputs[p.name]
        assert desc["title"] == p.title and desc["description"].startswith(p.help), p.name
        schema = p.schema("service")
        assert {k: desc["schema"][k] for k in schema} == schema, p.name
        assert desc["minOccurs"] == 0
    # the time zone and the time format are the dataset's (its configuration), not the request's
    assert not {"timezone", "time_format", "per_period_files"} & set(inputs)


def test_series_defaults_and_choices_are_declared_once():
    from dpgeo.periods import DEFAULT_TIMEZONE, PERIOD_KINDS
    from dpgeo.generators.docs import COMMON_DEFAULTS, COMMON_DOCS
    from dpgeo.series.options import PERSON_ACCOUNTING, SERIES_DEFAULTS
    from dpgeo.series_params import series_offered, series_param

    assert series_param("period").choices == PERIOD_KINDS
    assert series_param("person_accounting").choices == PERSON_ACCOUNTING
    assert series_param("timezone").none_means == DEFAULT_TIMEZONE
    api = series_offered("api")
    assert SERIES_DEFAULTS == {p.name: p.default for p in api}
    for p in api:
        assert COMMON_DEFAULTS[p.name] == p.default and p.help in COMMON_DOCS[p.name][1], p.name
    md = parameters_markdown(MECHANISMS)
    for p in api:
        assert p.help.replace("|", "\\|") in md, p.name
