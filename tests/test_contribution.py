"""Per-person guarantee: at most K random points per person, noise scaled by K."""

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import dpgeo
from dpgeo.contribution import cap_per_person
from helpers import SAMPLE_AREA
from test_io_cli import run_cli


def test_cap_keeps_at_most_k_per_person_and_everything_below():
    rng = np.random.default_rng(0)
    sizes = rng.integers(1, 12, 500)
    person = np.repeat(np.arange(500), sizes).astype(str)
    rng.shuffle(person)
    keep = cap_per_person(person, 4, dpgeo.noise.NoiseSource(seed=1))
    kept = pd.Series(person[keep]).value_counts()
    total = pd.Series(person).value_counts()
    assert (kept <= 4).all()
    assert (kept == np.minimum(total[kept.index], 4)).all()
    assert set(kept.index) == set(total.index)


def test_cap_chooses_uniformly():
    """A person with 5 points and K = 2: each point kept with probability 2/5.

    2000 independent draws, chi-square over the 5 points at significance 1e-6.
    """
    person = np.array(["p"] * 5 + ["q"] * 3)
    gen = dpgeo.noise.NoiseSource(seed=7)
    hits = np.zeros(5)
    for _ in range(2000):
        keep = cap_per_person(person, 2, gen)
        assert keep[5:].sum() == 2 and keep[:5].sum() == 2
        hits += keep[:5]
    assert stats.chisquare(hits).pvalue > 1e-6


def test_cap_validates():
    with pytest.raises(dpgeo.ParameterError):
        cap_per_person(["a"], 0, np.random.default_rng(0))
    with pytest.raises(dpgeo.ParameterError, match="missing"):
        cap_per_person(np.array(["a", None], dtype=object), 1, np.random.default_rng(0))


def _trips():
    rng = np.random.default_rng(3)
    # 200 drivers, 1-40 points each, around two hot spots
    sizes = rng.integers(1, 40, 200)
    person = np.repeat(np.arange(200), sizes)
    hot = rng.integers(0, 2, person.size)
    x = np.where(hot == 0, 300.0, 1500.0) + rng.normal(0, 40, person.size)
    y = np.where(hot == 0, 300.0, 1500.0) + rng.normal(0, 40, person.size)
    return x, y, person


def test_spans_per_person_metadata_and_noise_scale():
    x, y, person = _trips()
    res = dpgeo.dbscan_spans((x, y, "EPSG:32615"), epsilon=1.0, radius_m=50, min_points=10,
                             domain=(0, 0, 2000, 2000), domain_crs="EPSG:32615", crs="EPSG:32615",
                             person=person, max_points_per_person=5, seed=4)
    md = res.metadata
    assert md["privacy_unit"] == "person" and "at most 5 point(s) per person" in md["neighbouring_relation"]
    assert md["sensitivity_points_per_record"] == 5
    assert md["noise_q"] == pytest.approx(math.exp(-1.0 / 5))
    sizes = pd.Series(person).value_counts()
    assert res.diagnostics["n_used"] == int(np.minimum(sizes, 5).sum())
    assert res.diagnostics["n_dropped_by_person_cap"] == int((sizes - np.minimum(sizes, 5)).sum())


def test_named_series_names_the_person_column_in_the_metadata():
    x, y, person = _trips()
    kw = dict(epsilon=1.0, radius_m=50, min_points=10, domain=(0, 0, 2000, 2000), domain_crs="EPSG:32615",
              crs="EPSG:32615", max_points_per_person=5, seed=4)
    named = dpgeo.dbscan_spans((x, y, "EPSG:32615"), person=pd.Series(person, name="patient_id"), **kw)
    assert "identified by column 'patient_id'" in named.metadata["neighbouring_relation"]
    plain = dpgeo.dbscan_spans((x, y, "EPSG:32615"), person=person, **kw)
    assert "identified by the given person identifiers" in plain.metadata["neighbouring_relation"]
    # the same ids give the same capped points and noise (same seed): only the label differs
    assert named.layer.equals(plain.layer)


def test_wavecluster_per_person():
    x, y, person = _trips()
    res = dpgeo.wavecluster((x, y, "EPSG:32615"), method="privthr", epsilon=1.0, cell_m=50,
                            domain=(0, 0, 2000, 2000), domain_crs="EPSG:32615", crs="EPSG:32615",
                            person=person, max_points_per_person=3, seed=4)
    assert res.metadata["privacy_unit"] == "person"
    assert res.metadata["sensitivities"]["counts"] == 3


def test_person_parameter_errors():
    x, y, person = _trips()
    kw = dict(epsilon=1.0, radius_m=50, min_points=10, domain=(0, 0, 2000, 2000), domain_crs="EPSG:32615",
              crs="EPSG:32615")
    with pytest.raises(dpgeo.ParameterError, match="max_points_per_person"):
        dpgeo.dbscan_spans((x, y, "EPSG:32615"), person=person, **kw)
    with pytest.raises(dpgeo.ParameterError, match="needs person"):
        dpgeo.dbscan_spans((x, y, "EPSG:32615"), max_points_per_person=3, **kw)
    with pytest.raises(dpgeo.ParameterError, match="not max_points_per_record"):
        dpgeo.dbscan_spans((x, y, "EPSG:32615"), person=person, max_points_per_person=3, max_points_per_record=2,
                           **kw)
    with pytest.raises(dpgeo.InputError, match="one identifier per point"):
        dpgeo.dbscan_spans((x, y, "EPSG:32615"), person=person[:-1], max_points_per_person=3, **kw)


def test_cli_person_column(tmp_path):
    x, y, person = _trips()
    from pyproj import Transformer

    lon, lat = Transformer.from_crs(32615, 4326, always_xy=True).transform(x + 478000, y + 4978000)
    csv = tmp_path / "trips.csv"
    ids = np.where(np.arange(person.size) % 50 == 0, "", np.char.add("driver-", person.astype(str)))
    pd.DataFrame({"lon": lon, "lat": lat, "driver": ids}).to_csv(csv, index=False)
    out = tmp_path / "o.gpkg"
    args = ["spans", csv, "-o", out, "--epsilon", "1", "--radius", "50", "--min-points", "10",
            "--domain", SAMPLE_AREA]
    code, _, err = run_cli(*args, "--person", "driver")
    assert code == 2 and "--max-points-per-person" in err.replace("max_points_per_person", "--max-points-per-person")
    code, _, err = run_cli(*args, "--person", "nope", "--max-points-per-person", "3")
    assert code == 2 and "nope" in err
    code, _, err = run_cli(*args, "--person", "driver", "--max-points-per-person", "3")
    assert code == 0, err
    assert "dropped by the per-person cap" in err
    md = dpgeo.read_layer_metadata(out)
    assert md["privacy_unit"] == "person" and "column 'driver'" in md["neighbouring_relation"]
    assert md["differentially_private"] is True
