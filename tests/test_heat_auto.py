"""Heat and hot-spot layers without a cell size: cells chosen from ε and a noisy total, the split, the pipeline."""

import math

import numpy as np
import pytest

import dpgeo
from helpers import chi2_binned_discrete_laplace_p, chi2_discrete_laplace_p
from dpgeo.budget import Ledger
from dpgeo.domain import StudyArea
from dpgeo.errors import ParameterError
from dpgeo.mechanisms.heat_cells import (
    HEAT_POINTS_PER_NOISE_SD,
    HOTSPOT_POINTS_PER_NOISE_SD,
    MIN_AUTO_CELLS,
    auto_cells_plan,
    choose_cells,
)
from dpgeo.mechanisms.resolution import auto_budget, fine_grid
from dpgeo.noise import NoiseSource

CRS = "EPSG:32615"
KW = {"domain": (0, 0, 4000, 4000), "domain_crs": CRS, "crs": CRS}
#: Each chi-square test below fails a correct implementation with probability at most this.
ALPHA = 1e-6


def _points(seed=0):
    rng = np.random.default_rng(seed)
    x = np.r_[rng.normal(1000, 80, 4000), rng.normal(3000, 80, 4000), rng.uniform(0, 4000, 2000)]
    y = np.r_[rng.normal(1000, 80, 4000), rng.normal(3000, 80, 4000), rng.uniform(0, 4000, 2000)]
    return x, y, CRS


_chi2_p = chi2_discrete_laplace_p


def test_rule_follows_the_noisy_total_and_rho():
    a = StudyArea.from_bbox((0, 0, 2048, 2048), CRS, working_crs=CRS)
    fine = auto_cells_plan(a, 1.0, 100_000, epsilon_counts=0.95, rho=HEAT_POINTS_PER_NOISE_SD, max_cells=1 << 20)
    coarse = auto_cells_plan(a, 1.0, 100_000, epsilon_counts=0.95, rho=HOTSPOT_POINTS_PER_NOISE_SD,
                             max_cells=1 << 20)
    assert fine < coarse  # hot spots take wider cells than heat for the same data
    # more points, narrower cells; never fewer than MIN_AUTO_CELLS cells, never more than the cap
    assert auto_cells_plan(a, 1.0, 10 ** 6, epsilon_counts=0.95, rho=2, max_cells=1 << 20) < fine
    k = auto_cells_plan(a, 1.0, -50, epsilon_counts=0.95, rho=2, max_cells=1 << 20)
    assert (2048 / k) ** 2 >= MIN_AUTO_CELLS - 1e-9
    assert math.ceil(2048 / auto_cells_plan(a, 1.0, 10 ** 12, epsilon_counts=0.95, rho=2, max_cells=1024)) ** 2 <= 1024


def test_heat_without_a_cell_size_chooses_square_cells_and_says_so():
    r = dpgeo.heat(_points(), epsilon=1.0, seed=1, ledger=False, **KW)
    md = r.metadata
    assert md["cells_chosen"] is True and md["cells"] == "square"
    assert md["cell_width_m"] == pytest.approx(md["coarsening_factor"] * md["fine_cell_width_m"])
    assert md["epsilon_total"] + md["epsilon_counts"] <= 1.0 and md["epsilon_counts"] == auto_budget(1.0)[1]
    assert abs(md["noisy_total"] - 10_000) < 1000 and len(r.layer) == md["n_cells"]
    assert abs(int(r.layer["dp_count_raw"].sum()) - 10_000) < 500


def test_counts_get_exactly_the_rest_of_the_budget():
    """Every point in one corner: every other released cell count is pure noise of decay exp(-0.95 ε); a
    chi-square test at 1e-6 accepts it and rejects the law at the whole ε (the total's share not taken out)."""
    z = []
    n = 20_000
    for seed in range(3):
        r = dpgeo.heat((np.full(n, 1.0), np.full(n, 1.0), CRS), epsilon=1.0, seed=seed, ledger=False,
                       histogram="dense", **KW)
        c = r.layer["dp_count_raw"].to_numpy()
        z.append(np.delete(c, np.argmax(c)))
    z = np.concatenate(z)
    assert z.size > 10_000
    assert _chi2_p(z, math.exp(-0.95), 8) > ALPHA
    assert _chi2_p(z, math.exp(-1.0), 8) < ALPHA


def test_total_gets_its_share_of_the_budget():
    """The noisy total's error has decay exp(-0.05 ε): 400 draws, binned chi-square at 1e-6; the law at the
    counts' share is rejected."""
    a = StudyArea.from_bbox((0, 0, 100, 100), CRS, working_crs=CRS)
    f = fine_grid(a)
    from dpgeo.counting.cells import CellCounts

    src = NoiseSource(seed=5)
    err = np.array([choose_cells(CellCounts(f, np.array([0]), np.array([500])), epsilon=1.0, sensitivity=1, rho=2,
                                 max_cells=1 << 20, rng=src).n_hat - 500 for _ in range(400)])

    def binned_p(q):
        return chi2_binned_discrete_laplace_p(err, q)

    assert binned_p(math.exp(-0.05)) > ALPHA
    assert binned_p(math.exp(-0.95)) < ALPHA


def test_hotspots_without_a_cell_size_take_wider_cells_and_find_the_blobs():
    heat = dpgeo.heat(_points(), epsilon=1.0, seed=2, ledger=False, **KW)
    hot = dpgeo.hotspots(_points(), epsilon=1.0, seed=2, ledger=False, **KW)
    assert hot.metadata["cell_width_m"] > heat.metadata["cell_width_m"]
    assert hot.metadata["hotspot_neighbourhood"].startswith("cells whose centre is within")
    layer = hot.layer[hot.layer["gi_bin"] >= 1]  # about 70 cells here: Gi* reaches 90% at most
    import shapely

    union = layer.geometry.union_all()
    assert union.contains(shapely.Point(1000, 1000)) and union.contains(shapely.Point(3000, 3000))


def test_hotspots_with_a_radius_keep_cells_inside_it():
    r = dpgeo.hotspots(_points(), epsilon=1.0, radius_m=300, seed=2, ledger=False, **KW)
    assert r.metadata["cell_width_m"] <= 300


def test_bands_without_a_cell_size():
    r = dpgeo.heat(_points(), epsilon=1.0, bands=4, seed=2, ledger=False, **KW)
    assert r.metadata["cells_chosen"] and 1 <= len(r.layer) <= 4


def test_one_charge_of_epsilon(tmp_path):
    ledger = Ledger(tmp_path / "ledger.sqlite")
    ledger.set_total("clinic", 2.0)
    dpgeo.heat(_points(), epsilon=0.7, dataset="clinic", ledger=ledger, **KW)
    b = ledger.budget("clinic")
    assert len(b.releases) == 1 and b.spent_epsilon == pytest.approx(0.7)


def test_both_a_cell_size_and_h3_are_refused():
    with pytest.raises(ParameterError, match="at most one"):
        dpgeo.heat(_points(), epsilon=1.0, cell_m=100, h3_resolution=9, ledger=False, **KW)


def test_running_totals_need_a_cell_size():
    t = np.full(10_000, np.datetime64("2024-01-05", "s"))
    with pytest.raises(ParameterError, match="cell"):
        dpgeo.heat(_points(), epsilon=1.0, ledger=False, time=t, period="month", period_start="2024-01-01",
                   period_end="2024-03-01", cumulative=True, **KW)


def test_a_series_without_a_cell_size_chooses_cells_per_period():
    t = np.r_[np.full(5000, np.datetime64("2024-01-05", "s")), np.full(5000, np.datetime64("2024-02-05", "s"))]
    r = dpgeo.heat(_points(), epsilon=1.0, seed=3, ledger=False, time=t, period="month", period_start="2024-01-01",
                   period_end="2024-03-01", **KW)
    assert len(r.layer) > 0


def test_preview_says_what_the_run_will_choose():
    pv = dpgeo.cells_preview(epsilon=1.0, layer="hotspots", n_points=10_000, **KW)
    r = dpgeo.hotspots(_points(), epsilon=1.0, seed=4, ledger=False, **KW)
    row = pv["cells_by_points"][0]
    assert pv["spends_budget"] is False and pv["epsilon_counts"] == r.metadata["epsilon_counts"]
    # the run's noisy total is near 10,000: the width it chose is within one fine cell step of the preview's
    assert abs(row["cell_width_m"] - r.metadata["cell_width_m"]) <= 0.2 * row["cell_width_m"]
    fixed = dpgeo.cells_preview(epsilon=1.0, cell_m=250, **KW)
    assert fixed["n_cells"] == 256 and fixed["cell_width_m"] == 250


def test_command_line_heat_and_preview_without_a_cell_size(tmp_path, capsys):
    import pandas as pd

    from dpgeo.cli import main

    x, y, _ = _points()
    src = tmp_path / "pts.csv"
    pd.DataFrame({"x": x, "y": y}).to_csv(src, index=False)
    out = tmp_path / "heat.geojson"
    code = main(["heat", str(src), "-o", str(out), "--epsilon", "1", "--x", "x", "--y", "y", "--input-crs", CRS,
                 "--crs", CRS, "--domain=0,0,4000,4000", "--domain-crs", CRS, "--seed", "1", "-q"])
    assert code in (0, None) and out.exists()
    capsys.readouterr()
    code = main(["preview-cells", "--layer", "hotspots", "--epsilon", "1", "--domain=0,0,4000,4000",
                 "--domain-crs", CRS, "--crs", CRS])
    assert code in (0, None)
    assert "cell" in capsys.readouterr().out


# -- H3 cells of a resolution chosen from ε ------------------------------------------------------------------------

LONLAT = {"domain": (-93.33, 44.89, -93.19, 45.05)}


def _lonlat(seed=0, n=20_000):
    rng = np.random.default_rng(seed)
    k = n // 2
    lon = np.r_[rng.normal(-93.27, 0.01, k), rng.uniform(-93.33, -93.19, n - k)]
    lat = np.r_[rng.normal(44.98, 0.01, k), rng.uniform(44.89, 45.05, n - k)]
    return lon, lat, "EPSG:4326"


def test_h3_parents_are_h3s_own():
    import h3ronpy
    import pyarrow as pa

    from dpgeo.domain import StudyArea
    from dpgeo.h3cells import H3Cells
    from dpgeo.mechanisms.heat_cells import h3_parents

    cells = H3Cells(StudyArea.from_bbox(LONLAT["domain"]), 10).cells
    for r in (4, 7, 9, 10):
        ref = np.asarray(h3ronpy.change_resolution(pa.array(cells), r)).astype(np.uint64)
        assert (h3_parents(cells, r) == ref).all(), r


def test_h3_cells_chosen_from_epsilon():
    heat = dpgeo.heat(_lonlat(), epsilon=1.0, cells="h3", seed=1, ledger=False, **LONLAT)
    hot = dpgeo.hotspots(_lonlat(), epsilon=1.0, cells="h3", seed=1, ledger=False, **LONLAT)
    for r in (heat, hot):
        md = r.metadata
        assert md["cells"] == "H3" and md["cells_chosen"] and md["h3_resolution"] <= md["fine_h3_resolution"]
        assert len(r.layer) == md["n_cells"] and r.layer["h3"].str.len().eq(15).all()
        assert abs(int(r.layer["dp_count_raw"].sum()) - 20_000) < 600  # every point counted once
    assert hot.metadata["h3_resolution"] < heat.metadata["h3_resolution"]  # hot spots take coarser cells
    pv = dpgeo.cells_preview(epsilon=1.0, cells="h3", n_points=20_000, **LONLAT)
    assert pv["cells_by_points"][0]["h3_resolution"] == heat.metadata["h3_resolution"]


def test_h3_shape_with_a_cell_size_is_refused():
    with pytest.raises(ParameterError, match="cells='h3'"):
        dpgeo.heat(_lonlat(), epsilon=1.0, cells="h3", cell_m=200, ledger=False, **LONLAT)
