"""``dpgeo preview`` and ``dpgeo info`` print for people (sections, units, what Γ and MinPts′ mean); --json for
scripts."""

import json
import subprocess
import sys

import pytest

from helpers import SAMPLE_AREA

from dpgeo.cli.show import format_info, format_preview
from dpgeo.metadata_fields import MAX_VALUE_CHARS

PREVIEW = ["preview", "--epsilon", "1", "--radius", "100", "--min-points", "30", "--domain", str(SAMPLE_AREA)]


def _dpgeo(*args):
    p = subprocess.run([sys.executable, "-m", "dpgeo", *map(str, args)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return p.stdout


def _rows(text):
    """{label: value} of the indented lines (sections are the unindented ones)."""
    return {line[2:26].strip(): line[26:].strip() for line in text.splitlines()
            if line.startswith("  ") and line[2:26].strip()}


def test_preview_is_grouped_with_units_and_says_what_the_thresholds_mean():
    text = _dpgeo(*PREVIEW)
    sections = [line for line in text.splitlines() if line and not line.startswith(" ")]
    assert sections[0].startswith("Noise preview") and "spends no budget" in sections[0]
    assert sections[1:] == ["Privacy", "Study area and grid", "Parameters", "Thresholds"]
    rows = _rows(text)
    assert rows["radius α"] == "100 m" and rows["MinPts"] == "30 points" and rows["cell width"] == "70.71 m"
    assert rows["MinPts′"].endswith("points (MinPts + Γ + Γ_low)") and rows["Γ"].endswith(" points")
    assert rows["count error (95%)"] == "± 3 points per released count"
    lines = text.splitlines()
    after = {lines[i][2:26].strip(): lines[i + 1] for i in range(len(lines) - 1) if lines[i].startswith("  ")}
    assert "the most the noise adds to a neighbourhood sum" in after["Γ"]
    assert "truly holds MinPts′ points is found" in after["MinPts′"]
    for raw in ("True", "False", "None", "min_points_prime", " : "):
        assert raw not in text, raw
    data = json.loads(_dpgeo(*PREVIEW, "--json"))  # scripts: the same facts, raw
    assert data["min_points_prime"] == pytest.approx(float(rows["MinPts′"].split()[0]), rel=1e-3)
    assert data["theta"] is None and data["spends_budget"] is False


def test_info_elides_the_outline_and_keeps_every_key(tmp_path):
    import dpgeo

    ring = ", ".join(f"{-93.3 + 0.0001 * i} {44.9 + 0.00005 * (i % 7)}" for i in range(900))
    md = {"mechanism": "DP WaveCluster (PrivTHR)", "differentially_private": False,
          "not_private_reasons": ["a fixed random seed was used"], "epsilon": 0.5, "delta": 0.0,
          "domain": {"description": "polygons from area.geojson", "crs": "EPSG:4326",
                     "bounds": [-93.33, 44.89, -93.19, 45.06], "wkt": f"POLYGON (({ring}, -93.3 44.9))"},
          "grid": {"cell_width_m": 200.0, "origin": [473941.2335994537, 4970748.469471854], "nx": 56, "ny": 95},
          "epsilon_split": {"counts": 0.9, "nonpositive_count": 0.09999999999999998},
          "percentile": 60.0, "cell_width_m": 200.0, "n_clusters": 12, "brand_new_key": "x" * 500}
    text = format_info(md)
    assert text.splitlines()[0] == "DP WaveCluster (PrivTHR): NOT differentially private, ε = 0.5"
    rows = _rows(text)
    assert rows["differentially private"] == "NO: not differentially private"
    assert rows["why not"] == "a fixed random seed was used"
    assert rows["outline"] == "Polygon of 901 vertices (--json prints it whole)"
    assert rows["bounds"] == "x -93.33 to -93.19, y 44.89 to 45.06 (EPSG:4326)"
    assert rows["grid"] == "56 × 95 cells of 200 m from (473941.2336, 4970748.469) m"
    assert rows["ε split"] == "counts 0.9, nonpositive_count 0.1" and rows["percentile p"] == "60%"
    assert rows["brand new key"].endswith("(500 characters; --json prints it whole)")
    assert all(len(line) < MAX_VALUE_CHARS + 80 for line in text.splitlines())
    assert "Other" in text.splitlines() and "POLYGON ((" not in text
    path = tmp_path / "r.geojson"
    res = dpgeo.dbscan_spans(([500.0, 510.0, 520.0] * 20, [500.0, 505.0, 510.0] * 20, "EPSG:32615"), epsilon=1.0,
                             radius_m=100, min_points=5, domain=(0, 0, 2000, 2000), domain_crs="EPSG:32615",
                             seed=1, dataset="show test", ledger=str(tmp_path / "l.sqlite"))
    res.to_file(path)
    out = _dpgeo("info", path)
    assert _rows(out)["κ (neighbourhood)"] == "21 cells summed per neighbourhood" and "Result" in out
    assert json.loads(_dpgeo("info", path, "--json")) == res.metadata


def test_formatters_take_any_dict():
    assert format_preview({}).startswith("Noise preview")
    text = format_info({"epsilon": None, "theta": 3, "histogram": "sparse", "k": 8, "lattice_m": 0.289})
    rows = _rows(text)
    assert rows["sparse threshold θ"].startswith("3 points: cells whose noisy count is below θ")
    assert rows["lattice step"] == "0.289 m" and rows["k (clusters asked)"] == "8"
