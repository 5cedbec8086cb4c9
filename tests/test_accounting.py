"""Exact accounting: what the noise spends is never more than what the ledger charges, to the last bit.

The ledger charges the decimal a float ε prints as (0.1 is 1/10); the samplers use ``noise_epsilon(ε)``
(the float's binary value, or the float below when the binary value is above the decimal); every budget
split is made in exact rationals and rounded down. And every mechanism refuses an ε outside the range its
noise supports before it reads the data or charges the ledger (docs/privacy.md §2.1, docs/budget.md).
"""

import math
import os
import subprocess
import sys
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dpgeo
from dpgeo import noise
from dpgeo.budget import Ledger, exact_value
from dpgeo.errors import BudgetExceededError, ParameterError
from dpgeo.mechanisms.kmeans import kmeans_plan, split_kmeans_epsilon

EPSILONS = st.floats(min_value=1e-6, max_value=500.0, allow_nan=False, allow_infinity=False)


@settings(max_examples=400, deadline=None)
@given(eps=EPSILONS)
def test_the_noise_never_uses_more_than_the_ledger_charges(eps):
    used = noise.noise_epsilon(eps)
    assert used <= exact_value(eps)  # what is charged
    assert used >= Fraction(math.nextafter(eps, 0.0))  # and at most one unit in the last place less
    assert noise.noise_rate(eps, 3) == used / 3


@settings(max_examples=300, deadline=None)
@given(eps=EPSILONS, share=st.floats(0.001, 0.999))
def test_a_split_spends_at_most_the_charge(eps, share):
    a, b = noise.split_epsilon(eps, share)
    assert noise.noise_epsilon(a) + noise.noise_epsilon(b) <= exact_value(eps)


@settings(max_examples=500, deadline=None)
@given(eps=st.floats(1e-3, 500.0), iterations=st.integers(1, 1000), layer_share=st.floats(1e-3, 0.999),
       count_share=st.floats(1e-3, 0.999))
def test_the_kmeans_split_never_sums_to_more_than_epsilon(eps, iterations, layer_share, count_share):
    layer, count, total = split_kmeans_epsilon(eps, iterations, layer_share, count_share)
    spent = iterations * (noise.noise_epsilon(count) + noise.noise_epsilon(total)) + noise.noise_epsilon(layer)
    assert spent <= exact_value(eps)
    assert layer == pytest.approx(layer_share * eps, rel=1e-12)
    assert count == pytest.approx(count_share * (1 - layer_share) * eps / iterations, rel=1e-9)


@pytest.mark.parametrize("eps,share", [(1.0, 0.1), (0.7, 0.3), (0.3, 0.1), (2.2, 0.9)])
def test_the_kmeans_plan_states_the_exact_split(eps, share):
    p = kmeans_plan((0, 0, 1000, 1000), k=3, epsilon=eps, iterations=7, layer_share=share)
    spent = p.iterations * (noise.noise_epsilon(p.epsilon_count) + noise.noise_epsilon(p.epsilon_sum)) \
        + noise.noise_epsilon(p.epsilon_layer)
    assert spent <= exact_value(eps)


def test_four_releases_at_0_1_fit_a_total_of_0_4_and_spend_at_most_0_4(tmp_path):
    ledger = Ledger(tmp_path / "l.sqlite")
    ledger.set_total("pts", "0.4")
    for _ in range(4):
        ledger.reserve("pts", epsilon=0.1, mechanism="m").complete()
    assert ledger.budget("pts").spent_epsilon == Fraction(2, 5)  # what is charged: 4 x 1/10, exactly
    assert 4 * noise.noise_epsilon(0.1) <= Fraction(2, 5)  # what the noise of the four spent
    with pytest.raises(BudgetExceededError):
        ledger.reserve("pts", epsilon=5e-324, mechanism="m")  # not one more bit


# -- the sampler's range, refused before the data is read and before the ledger is charged --------------------

RUNS = {
    "spans": lambda pts, eps, **kw: dpgeo.dbscan_spans(pts, epsilon=eps, radius_m=50, min_points=20, **kw),
    "kmeans": lambda pts, eps, **kw: dpgeo.kmeans(pts, epsilon=eps, k=3, **kw),
    **{m: (lambda pts, eps, m=m, **kw: dpgeo.wavecluster(pts, method=m, epsilon=eps, cell_m=50, **kw))
       for m in ("privthr", "privthr-em", "privqt", "baseline")},
}


@pytest.mark.parametrize("eps", [1e-15, 1e6, 1e14])
@pytest.mark.parametrize("run", sorted(RUNS))
def test_an_epsilon_outside_the_noise_range_is_refused_before_reading_and_charging(tmp_path, run, eps):
    ledger = tmp_path / "l.sqlite"
    missing = tmp_path / "not_read.csv"  # a run that got as far as reading would say that it does not exist
    # below the sampler's range: its own refusal; above 100: the declared ε range (dpgeo.shared_params)
    with pytest.raises(ParameterError, match=r"the (smallest|largest)|must be a number in \(0, 100\]") as exc:
        RUNS[run](str(missing), eps, domain=(0, 0, 2000, 2000), domain_crs="EPSG:32615", crs="EPSG:32615",
                  dataset="pts", ledger=ledger)
    assert "\n" not in str(exc.value)
    assert Ledger(ledger).budget("pts").releases == ()


@pytest.mark.parametrize("eps", [1e-15, 1000.0, 1e6])
def test_preview_refuses_an_epsilon_outside_the_noise_range_with_one_line(eps):
    with pytest.raises(ParameterError, match=r"the (smallest|largest)|must be a number in \(0, 100\]"):
        dpgeo.noise_preview(epsilon=eps, radius_m=100, min_points=30, domain=(-93.33, 44.89, -93.19, 45.05))


def test_the_largest_supported_epsilon_still_runs_every_mechanism():
    from dpgeo.shared_params import shared_param

    largest = shared_param("epsilon").maximum  # the declared range's end, inside the sampler's
    assert largest <= float(noise.RATE_MAX)
    rng = np.random.default_rng(0)
    pts = (rng.normal(500, 30, 2000), rng.normal(500, 30, 2000), "EPSG:32615")
    for run in RUNS.values():
        res = run(pts, float(largest), domain=(0, 0, 2000, 2000), domain_crs="EPSG:32615",
                  crs="EPSG:32615", ledger=False)
        assert res.differentially_private


@pytest.mark.parametrize("command", [
    ["spans", "--radius", "150", "--min-points", "40"],
    ["kmeans", "--k", "5"],
    ["wavecluster", "--method", "privthr", "--cell", "200"],
    ["wavecluster", "--method", "baseline", "--cell", "200"],
])
def test_cli_refuses_a_huge_epsilon_in_one_line_without_reading_or_charging(tmp_path, command):
    exe = os.path.join(os.path.dirname(sys.executable), "dpgeo")
    ledger = tmp_path / "l.sqlite"
    p = subprocess.run([exe, command[0], str(tmp_path / "not_read.csv"), "-o", str(tmp_path / "o.gpkg"),
                        "--epsilon", "1e6", "--dataset", "pts", "--ledger", str(ledger),
                        "--domain=-93.33,44.89,-93.19,45.06", *command[1:]], capture_output=True, text=True,
                       check=False)
    assert p.returncode == 2, p.stderr
    assert p.stderr.count("\n") == 1 and "must be a number in (0, 100]" in p.stderr
    assert "math domain error" not in p.stderr and not ledger.exists()
