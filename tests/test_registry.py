"""Every mechanism of the registry as a single release, a map series and running totals, through the one runner.

For each line of :data:`dpgeo.declarations.registry.MECHANISMS` and each
shape of release, the test asserts what the ledger charged (one entry, its
ε, its mechanism name, its periods, completed) and what was published (the
metadata every release carries, the declared fields of the layer, the
periods; every attribute of a layer is a declared field). A mechanism that reads no data has no series: the refusal is
asserted instead. The command line (in-process) and the service's process
descriptions are checked over the same registry. A new mechanism is covered
by adding its line to the registry; its example parameters come from its
declaration (:func:`example_values`).
"""

from __future__ import annotations

import datetime as dt
import warnings

import numpy as np
import pandas as pd
import pytest

import dpgeo
from dpgeo.budget import Ledger
from dpgeo.declarations.registry import MECHANISMS
from dpgeo.errors import ParameterError
from dpgeo.pipeline.run import is_private_run, run_preview, run_release
from dpgeo.series import PERIOD_FIELDS
from dpgeo.series.running_totals import CUMULATIVE_FIELDS

CRS = "EPSG:32615"
DOMAIN = dict(domain=(0, 0, 2000, 2000), domain_crs=CRS, crs=CRS)
SERIES = dict(period="month", period_start="2014-01-01", period_end="2014-04-01")
LABELS = ["2014-01", "2014-02", "2014-03"]
SHAPES = ("single", "series", "running totals")
#: What every release publishes, whatever its mechanism and shape.
PUBLISHED = {"mechanism", "method", "differentially_private", "not_private_reasons", "neighbouring_relation",
             "privacy_unit", "epsilon", "delta", "sampler", "working_crs", "domain", "dpgeo_version",
             "created_utc", "release_id", "dataset"}
#: What a series publishes besides.
PUBLISHED_SERIES = {"series", "series_id", "periods", "period_start", "period_end", "parameters"}
IDS = [m.name for m in MECHANISMS]


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


@pytest.fixture(scope="module")
def points():
    """Two clusters and background over three months of 2014 (x, y in metres of EPSG:32615, t in seconds)."""
    rng = np.random.default_rng(7)
    n = 3000
    x = np.r_[rng.normal(500, 40, n), rng.normal(1500, 40, n // 2), rng.uniform(0, 2000, n // 4)]
    y = np.r_[rng.normal(500, 40, n), rng.normal(1400, 40, n // 2), rng.uniform(0, 2000, n // 4)]
    start = dt.datetime(2014, 1, 1, tzinfo=dt.timezone.utc).timestamp()
    t = (start + rng.uniform(0, 89 * 86400, x.size)).astype(np.int64)  # Jan 1 to Mar 30
    return x, y, t


def example_values(mech) -> dict:
    """Parameters of a small run of ``mech`` on the 2 km study area, from its declaration: every required
    parameter at its suggested value; of each group of which exactly one must be given, the first, at 100 m
    for a distance (else its suggested value)."""
    values = {p.name: p.suggested for p in mech.params if p.required}
    for group in mech.exactly_one + mech.at_most_one:  # (at most one: a declared cell size)
        p = mech.param(group[0])
        values[p.name] = 100.0 if p.unit == "metres" else p.suggested
    missing = [k for k, v in values.items() if v is None]
    assert not missing, f"{mech.name}: declare a suggested value for {missing} (the registry test runs it)"
    return values


def _values(mech, shape, points, **kw):
    x, y, t = points
    values = {**example_values(mech), "epsilon": 1.0, **DOMAIN, **kw}
    if shape != "single":
        values.update(SERIES, time=t)
    if shape == "running totals":
        values["cumulative"] = True
    return values


def _chooses_grid(mech, values) -> bool:
    """Whether the run picks its grid at run time from a noisy total (a declaration may say so)."""
    return mech.chooses_grid(mech.validate(values))


def _run(mech, shape, points, ledger, dataset):
    """The release through the mechanism's Python entry point (``dpgeo.heat``, ...) as a user calls it, or the
    runner itself for a mechanism without one."""
    x, y, _ = points
    values = _values(mech, shape, points, dataset=dataset, ledger=ledger)
    if mech.entry_point:
        return getattr(dpgeo, mech.entry_point)((x, y, CRS), **values), values
    return run_release(mech, (x, y, CRS), values), values


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("mech", MECHANISMS, ids=IDS)
def test_every_mechanism_in_every_shape_is_charged_once_and_publishes_its_fields(mech, shape, points, tmp_path):
    ledger = Ledger(str(tmp_path / "ledger.sqlite"))
    ledger.set_total("d", 10)
    if mech.reads is None:  # a preview reads no data: no release, no series
        assert isinstance(run_preview(mech, _values(mech, "single", points)), dict)
        if shape != "single":
            x, y, _ = points
            with pytest.raises(ParameterError, match="reads no data: it has no series"):
                run_release(mech, (x, y, CRS), _values(mech, shape, points, dataset="d", ledger=ledger))
        assert list(ledger.budget("d").releases) == []
        return
    values = _values(mech, shape, points, dataset="d", ledger=ledger)
    p = mech.validate(values)
    if shape == "running totals" and _chooses_grid(mech, values):  # they need one grid fixed before the data is read
        with pytest.raises(ParameterError, match="fixed before the data is read"):
            _run(mech, shape, points, ledger, "d")
        assert list(ledger.budget("d").releases) == []
        return
    res, values = _run(mech, shape, points, ledger, "d")
    # -- charged: one entry of ε, completed, under the step's name, with the periods of a series --
    (rec,) = ledger.budget("d").releases
    assert rec.status == "completed" and float(rec.epsilon) == 1.0
    assert rec.mechanism == mech.ledger_name(p) + ("-running-totals" if shape == "running totals" else "")
    assert [q.label for q in rec.periods] == ([] if shape == "single" else LABELS)
    assert ledger.budget("d").spent_epsilon == 1.0
    # -- published: the shared metadata, the declared fields, the periods --
    md = res.metadata
    assert PUBLISHED <= set(md), PUBLISHED - set(md)
    assert md["differentially_private"] is True and md["epsilon"] == 1.0 and md["release_id"] == rec.release_id
    assert is_private_run(mech, values) is True
    fields = CUMULATIVE_FIELDS if shape == "running totals" else mech.fields
    if shape == "single":
        assert not PUBLISHED_SERIES & set(md)
        assert md["method"] == mech.method_name(p)
        assert set(res.layer.columns) - {"geometry"} <= {f.name for f in fields}  # every attribute declared
        return
    assert PUBLISHED_SERIES <= set(md), PUBLISHED_SERIES - set(md)
    assert res.periods == LABELS and [r.metadata["period"] for r in res.releases] == LABELS
    assert {r.metadata["release_id"] for r in res.releases} == {rec.release_id}
    assert md["series"]["cumulative"] is (shape == "running totals")
    assert md["series"]["composition"] == "parallel" and md["series"]["unit"] == "record:1"
    for r in res.releases:
        assert r.metadata["differentially_private"] is True and r.metadata["series"] == md["series"]
        assert set(PERIOD_FIELDS) <= set(r.layer.columns)
        assert set(r.layer.columns) - {"geometry", "period_cluster_id", *PERIOD_FIELDS} <= {f.name for f in fields}
    assert set(res.layer["period"]) <= set(LABELS)
    if shape == "running totals":
        assert md["method"] == mech.method_name(p) + "+running_totals"
        assert [e["n_tree_nodes"] for e in md["periods"]] == [1, 1, 2]  # dyadic nodes: [1], [1-2], [1-2]+[3]
        totals = [r.layer["dp_total"].sum() for r in res.releases]
        assert totals[-1] > totals[0] > 0  # running totals grow (3000+ points per month on a few cells)
    else:
        assert md["method"] == mech.method_name(p)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("mech", [m for m in MECHANISMS if m.reads is not None], ids=lambda m: m.name)
def test_a_seeded_run_is_not_private_and_not_charged_in_every_shape(mech, shape, points, tmp_path):
    """The rule the front ends ask before a run (:func:`is_private_run`) is the one the release states."""
    ledger = Ledger(str(tmp_path / "ledger.sqlite"))
    x, y, _ = points
    values = _values(mech, shape, points, dataset="d", ledger=ledger, seed=5)
    if shape == "running totals" and _chooses_grid(mech, values):
        return  # refused (the test above)
    assert is_private_run(mech, values) is False
    res = run_release(mech, (x, y, CRS), values)
    assert res.metadata["differentially_private"] is False
    assert ledger.budget("d").spent_epsilon == 0


def test_every_mechanism_that_reads_data_is_offered_as_a_series_on_every_front_end():
    """The series keywords reach each entry point, each command and each service process of the registry."""
    import inspect

    from dpgeo.cli import build_parser
    from dpgeo.server.processes import PROCESSES

    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    for mech in MECHANISMS:
        if mech.reads is None:
            continue
        if mech.entry_point:
            params = inspect.signature(getattr(dpgeo, mech.entry_point)).parameters
            assert {"time", "period", "period_start", "period_end", "cumulative", "append"} <= set(params), mech
        if mech.command:
            flags = {s for a in sub.choices[mech.command]._actions for s in a.option_strings}
            assert {"--time", "--period", "--cumulative"} <= flags, mech
        if "service" in mech.fronts:
            inputs = PROCESSES[mech.name].describe("http://127.0.0.1")["inputs"]
            assert {"time", "period", "cumulative"} <= set(inputs), mech


@pytest.mark.parametrize("shape", SHAPES)
def test_the_command_line_runs_every_mechanism_in_every_shape(shape, points, tmp_path):
    """In-process: ``dpgeo <command> points.csv -o out.gpkg`` for each command of the registry, charged once."""
    from dpgeo.cli import main

    x, y, t = points
    csv = tmp_path / "points.csv"
    when = pd.to_datetime(t, unit="s", utc=True).strftime("%Y-%m-%dT%H:%M:%SZ")
    pd.DataFrame({"x": x, "y": y, "t": when}).to_csv(csv, index=False)
    ledger = tmp_path / "ledger.sqlite"
    for mech in MECHANISMS:
        if mech.command is None or mech.reads is None:
            continue
        if shape == "running totals" and _chooses_grid(mech, {**example_values(mech), "epsilon": 1.0}):
            continue  # refused: the registry test above
        args = [mech.command, str(csv), "-o", str(tmp_path / f"{mech.name}.gpkg"), "--x", "x", "--y", "y",
                "--input-crs", CRS, "--crs", CRS, "--domain", "0,0,2000,2000", "--domain-crs", CRS,
                "--epsilon", "1", "--dataset", mech.name, "--ledger", str(ledger), "-q"]
        for name, value in example_values(mech).items():
            args += [mech.param(name).cli_flag, f"{value:g}" if isinstance(value, float) else str(value)]
        if shape != "single":
            args += ["--time", "t", "--period", "month", "--period-start", "2014-01-01", "--period-end",
                     "2014-04-01"]
        if shape == "running totals":
            args += ["--cumulative"]
        assert main(args) == 0, (mech.name, shape)
        md = dpgeo.io.read_layer_metadata(str(tmp_path / f"{mech.name}.gpkg"))
        assert md["differentially_private"] is True and md["method"].endswith(
            "+running_totals" if shape == "running totals" else "")
        assert ("series" in md) is (shape != "single")
        (rec,) = Ledger(str(ledger)).budget(mech.name).releases
        assert rec.status == "completed" and float(rec.epsilon) == 1.0


def test_a_reference_method_that_adds_no_noise_is_private_only_as_running_totals(points):
    """WaveCluster's exact reference releases exact clusters (not private, never charged), but its running totals
    are the binary tree's noisy counts on its grid (private, charged): the one rule says so before a run, for
    every front end (the QGIS plugin asks it before reading the layer)."""
    from dpgeo.declarations.registry import mechanism

    wave = mechanism("dp-wavecluster")
    exact = dict(method="exact")
    assert is_private_run(wave, _values(wave, "single", points, **exact)) is False
    assert is_private_run(wave, _values(wave, "series", points, **exact)) is False
    assert is_private_run(wave, _values(wave, "running totals", points, **exact)) is True
