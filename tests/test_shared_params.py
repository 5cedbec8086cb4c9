"""The parameters every release shares are declared once (dpgeo.shared_params), and every front end reads them:
one ε range, one weak-ε warning, one name per concept. (QGIS: tests/qgis/test_plugin.py.)"""

import inspect
import warnings

import numpy as np
import pytest

import dpgeo
from dpgeo.cli import build_parser, main
from dpgeo.errors import ParameterError, WeakEpsilonWarning
from dpgeo.declarations.registry import MECHANISMS
from dpgeo.shared_params import (
    EPSILON_MAX,
    PREVIEW_KEYS,
    WEAK_EPSILON,
    epsilon_status,
    epsilon_warning,
    shared_offered,
    shared_param,
)

AREA = "-93.33,44.89,-93.19,45.06"
EPS = shared_param("epsilon")


def _subparser(command):
    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    return sub.choices[command]


def test_one_epsilon_range_and_one_weak_threshold():
    assert EPS.range_text() == f"in (0, {EPSILON_MAX:g}]" and 1 < WEAK_EPSILON < EPSILON_MAX
    assert EPS.check(EPSILON_MAX) == EPSILON_MAX and EPS.check(1e-9) == 1e-9
    for bad in (0, -1, EPSILON_MAX * 1.0001, float("nan"), True):
        with pytest.raises(ParameterError, match=r"epsilon \(the privacy budget\) must be"):
            EPS.check(bad)
    assert epsilon_warning(WEAK_EPSILON) is None and "weak" in epsilon_warning(WEAK_EPSILON * 1.01)
    assert epsilon_status({"differentially_private": True, "epsilon": 50.0}) == "weak"
    assert epsilon_status({"differentially_private": True, "epsilon": 1.0}) == "private"
    assert epsilon_status({"differentially_private": False, "epsilon": 50.0}) == "not private"


@pytest.mark.parametrize("mech", [m for m in MECHANISMS if m.command], ids=lambda m: m.name)
def test_cli_options_are_the_declared_shared_parameters(mech):
    actions = {a.dest: a for a in _subparser(mech.command)._actions}
    offered = [p for p in shared_offered("cli") if mech.reads is not None or p.name in PREVIEW_KEYS]
    for p in offered:
        a = actions[p.cli_dest]
        assert p.cli_flag in a.option_strings, p.name
        assert p.help.replace("%", "%%")[:40] in a.help, p.name
        if p.kind == "flag":
            continue
        if p.required and mech.epsilon_required:
            assert a.required, p.name
        else:
            assert a.default == (None if p.required else p.default), p.name
        if p.kind in ("number", "integer"):
            assert a.type is {"number": float, "integer": int}[p.kind]


@pytest.mark.parametrize("value", ["0", "-1", "100.5", "1e6"])
def test_cli_refuses_an_epsilon_outside_the_declared_range(value, capsys):
    code = main(["preview", "--epsilon", value, "--radius", "100", "--min-points", "30", "--domain", AREA])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.count("\n") == 0, err
    assert EPS.range_text() in err


def test_cli_warns_of_a_weak_epsilon(capsys):
    assert main(["preview", "--epsilon", "50", "--radius", "100", "--min-points", "30", "--domain", AREA]) == 0
    err = capsys.readouterr().err
    assert f"dpgeo: warning: {epsilon_warning(50.0)}" in err
    assert main(["preview", "--epsilon", "1", "--radius", "100", "--min-points", "30", "--domain", AREA]) == 0
    assert "weak" not in capsys.readouterr().err


@pytest.mark.parametrize("mech", [m for m in MECHANISMS if m.entry_point], ids=lambda m: m.name)
def test_python_entry_points_take_the_shared_parameters_by_their_public_names(mech):
    sig = inspect.signature(getattr(dpgeo, mech.entry_point))
    assert "sensitivity" not in sig.parameters  # one name per concept: max_points_per_record
    offered = [p for p in shared_offered("api") if mech.reads is not None or p.name in PREVIEW_KEYS]
    for p in offered:
        if p.name == "scheduler" and mech.reads == "points":
            continue
        assert p.name in sig.parameters, p.name
        if not p.required and p.name != "domain":  # the study area: required by some entry points
            assert sig.parameters[p.name].default == p.default, p.name
    assert p.help[:40] in getattr(dpgeo, mech.entry_point).__doc__.replace("\n    ", " ")


def test_python_api_epsilon_range_weak_warning_and_the_deprecated_name():
    kw = dict(radius_m=100, min_points=30, domain=(-93.33, 44.89, -93.19, 45.06))
    with pytest.raises(ParameterError, match=r"in \(0, 100\]"):
        dpgeo.noise_preview(epsilon=EPSILON_MAX + 1, **kw)
    with pytest.warns(WeakEpsilonWarning, match="weak"):
        dpgeo.noise_preview(epsilon=50, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        new = dpgeo.noise_preview(epsilon=1, max_points_per_record=3, **kw)
    with pytest.warns(DeprecationWarning, match="max_points_per_record"):
        old = dpgeo.noise_preview(epsilon=1, sensitivity=3, **kw)
    assert new == old and new["count_error_95"] > dpgeo.noise_preview(epsilon=1, **kw)["count_error_95"]
    with pytest.raises(TypeError, match="only"):
        dpgeo.noise_preview(epsilon=1, sensitivity=3, max_points_per_record=3, **kw)


def test_a_release_with_a_weak_epsilon_warns_and_says_so_in_its_metadata_status(tmp_path):
    rng = np.random.default_rng(0)
    pts = (rng.uniform(0, 1000, 200), rng.uniform(0, 1000, 200), "EPSG:32615")
    with pytest.warns(WeakEpsilonWarning):
        res = dpgeo.heat(pts, epsilon=20, cell_m=250, domain=(0, 0, 1000, 1000), domain_crs="EPSG:32615",
                         ledger=False)
    assert res.metadata["differentially_private"] and epsilon_status(res.metadata) == "weak"


@pytest.mark.parametrize("mech", [m for m in MECHANISMS if "service" in m.fronts], ids=lambda m: m.name)
def test_service_epsilon_is_the_declared_one(mech):
    from dpgeo.server.processes import PROCESSES

    proc = PROCESSES[mech.name]
    desc = proc.inputs["epsilon"]
    assert desc["schema"] == EPS.schema("service") and desc["description"].startswith(EPS.help)
    base = {"dataset": "stops"}
    for bad, words in ((0, "must be > 0"), (EPSILON_MAX + 1, f"must be <= {EPSILON_MAX:g}")):
        with pytest.raises(ParameterError, match=words):
            proc.validate({**base, "epsilon": bad})
