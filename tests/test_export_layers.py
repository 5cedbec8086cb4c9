"""``dpgeo export`` carries every layer of a release: the levels layer too, and ``dpgeo info`` of the copy tells
the truth about it."""

import numpy as np
import pyogrio
import pytest

import dpgeo
from dpgeo.cli import main

CRS = "EPSG:32615"
KW = {"domain": (0, 0, 2000, 2000), "domain_crs": CRS, "crs": CRS}


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    rng = np.random.default_rng(0)
    x = np.r_[rng.normal(500, 40, 3000), rng.normal(1500, 40, 3000), rng.uniform(0, 2000, 1000)]
    y = np.r_[rng.normal(500, 40, 3000), rng.normal(1500, 40, 3000), rng.uniform(0, 2000, 1000)]
    res = dpgeo.dbscan_spans((x, y, CRS), epsilon=1.0, seed=1, ledger=False, levels=True, **KW)
    folder = tmp_path_factory.mktemp("release")
    return res, res.to_file(folder / "spans.gpkg"), res.to_file(folder / "spans.geojson")


def _info(path, capsys):
    capsys.readouterr()
    assert main(["info", str(path)]) == 0
    return capsys.readouterr().out


def _levels_line(text):
    """What ``dpgeo info`` says on its "levels layer" line (None: no such line)."""
    for line in text.splitlines():
        if line.strip().startswith("levels layer"):
            return line.split("levels layer", 1)[1].strip()
    return None


@pytest.mark.parametrize("source", [1, 2], ids=["from-gpkg", "from-geojson"])
def test_export_writes_the_levels_layer_everywhere(release, source, tmp_path, capsys):
    res, src = release[0], release[source]
    back = dpgeo.read_release(src)
    assert back.levels is not None and len(back.levels) == len(res.levels)
    outs = [tmp_path / "copy.gpkg", tmp_path / "copy.geojson", tmp_path / "copy.html"]
    assert main(["export", str(src), "-q", "--basemap", "none"] + [a for o in outs for a in ("-o", str(o))]) == 0
    names = [n for n, g in pyogrio.list_layers(outs[0]) if g is not None]  # (layer_styles: the QGIS style table)
    assert len(names) == 2 and names[1] == names[0] + "_levels"
    assert (tmp_path / "copy_levels.geojson").exists()
    page = outs[2].read_text()
    assert "dpgeo-levels" in page
    for copy in outs[:2]:
        again = dpgeo.read_release(copy)
        assert again.metadata["levels_layer"] is True and len(again.levels) == len(res.levels)
        assert _levels_line(_info(copy, capsys)) == "yes"


def test_a_copy_without_its_levels_says_so(release, tmp_path, capsys):
    """A GeoJSON moved without its ``_levels.geojson``: the export has no levels layer, and says so."""
    import shutil

    lone = tmp_path / "lone.geojson"
    shutil.copy(release[2], lone)
    assert main(["export", str(lone), "-q", "-o", str(tmp_path / "out.gpkg")]) == 0
    assert [n for n, g in pyogrio.list_layers(tmp_path / "out.gpkg") if g is not None] == ["out"]
    assert not dpgeo.read_release(tmp_path / "out.gpkg").metadata.get("levels_layer")
    assert _levels_line(_info(tmp_path / "out.gpkg", capsys)) in (None, "no")
