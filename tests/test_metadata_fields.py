"""Outputs are declared like inputs: every metadata field a release publishes is declared once (the common ones in
dpgeo.metadata_fields, each mechanism's own in its ``outputs``), and ``dpgeo info``, the HTML map's privacy panel,
the PNG footer and QGIS read the declarations; no front end names a mechanism's fields. (QGIS's noise preview:
tests/qgis/test_plugin.py.)"""

import ast
import html
import re
import warnings
from pathlib import Path

import numpy as np
import pytest

import dpgeo
from dpgeo.cli import main
from dpgeo.declare import declared_outputs
from dpgeo.metadata_fields import COMMON_FIELDS, declared_fields, describe, panel_items
from dpgeo.declarations.registry import MECHANISMS, mechanism

ROOT = Path(__file__).resolve().parents[1]
DOMAIN = dict(domain=(0, 0, 2000, 2000), domain_crs="EPSG:32615", ledger=False)


def _points():
    rng = np.random.default_rng(0)
    x = np.r_[rng.normal(500, 40, 1500), rng.uniform(0, 2000, 300)]
    y = np.r_[rng.normal(500, 40, 1500), rng.uniform(0, 2000, 300)]
    times = np.array([f"2014-04-{1 + 7 * d:02d}T10:00:00" for d in rng.integers(0, 3, x.size)])
    return (x, y, "EPSG:32615"), times


#: name: (the mechanism that makes it, how)
RELEASES = {
    "heat": ("dp-heat", lambda p, t: dpgeo.heat(p, epsilon=1, cell_m=100, **DOMAIN)),
    "hotspots": ("dp-hotspots", lambda p, t: dpgeo.hotspots(p, epsilon=1, cell_m=100, **DOMAIN)),
    "kmeans": ("dp-kmeans", lambda p, t: dpgeo.kmeans(p, epsilon=1, k=3, **DOMAIN)),
    "series": ("dp-heat", lambda p, t: dpgeo.heat(p, epsilon=1, cell_m=100, time=t, period="week",
                                                  period_start="2014-03-31", period_end="2014-04-21", **DOMAIN)),
    "spans": ("dp-dbscan-spans", lambda p, t: dpgeo.dbscan_spans(p, epsilon=1, radius_m=60, min_points=20, **DOMAIN)),
    "spans auto": ("dp-dbscan-spans", lambda p, t: dpgeo.dbscan_spans(p, epsilon=1, **DOMAIN)),
    "wavecluster": ("dp-wavecluster", lambda p, t: dpgeo.wavecluster(p, epsilon=1, cell_m=50, **DOMAIN)),
    "running totals": ("dp-heat", lambda p, t: dpgeo.heat(p, epsilon=1, cell_m=100, time=t, period="week",
                                                          period_start="2014-03-31", period_end="2014-04-21",
                                                          cumulative=True, **DOMAIN)),
}


@pytest.fixture(scope="module")
def releases():
    pts, times = _points()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {name: make(pts, times) for name, (_, make) in RELEASES.items()}


def test_one_key_one_meaning():
    fields = declared_fields()  # raises when two declarations label one key differently
    assert len(fields) == len({f.key for f in COMMON_FIELDS} | {f.key for _, f in declared_outputs()})
    for m in MECHANISMS:
        own = [f.key for f in m.outputs]
        assert len(own) == len(set(own)), m.name


def test_every_key_a_release_or_a_preview_publishes_is_declared(releases):
    fields = declared_fields()
    previews = [dpgeo.noise_preview(epsilon=1, radius_m=100, min_points=30, domain=(-93.33, 44.89, -93.19, 45.05)),
                dpgeo.noise_preview(epsilon=1, domain=(-93.33, 44.89, -93.19, 45.05))]
    for name, md in [*((n, r.metadata) for n, r in releases.items()), *(("preview", p) for p in previews)]:
        assert set(md) <= set(fields), (name, sorted(set(md) - set(fields)))
        assert "Other" not in dict(describe(md)), name


def _own(name, md, panel=False):
    """The fields of ``md`` that the release's mechanism declares itself (not the common ones); for a series, also
    the series' own fields."""
    mech = mechanism(RELEASES[name][0])
    series = [f for f in COMMON_FIELDS if f.section == "Series" and not panel] if "series" in md else []
    return [f for f in (*mech.outputs, *series) if f.key in md and (f.panel or not panel)]


@pytest.mark.parametrize("name", ["heat", "hotspots", "series", "kmeans"])
def test_info_shows_the_layers_own_fields_labelled(name, releases, tmp_path, capsys):
    path = tmp_path / "layer.gpkg"
    releases[name].to_file(path)
    assert main(["info", str(path)]) == 0
    out = capsys.readouterr().out
    own = _own(name, releases[name].metadata)
    assert own, name
    for f in own:
        assert re.search(rf"^  {re.escape(f.label)} ", out, re.M), (f.key, f.label, out)
    assert "\nOther\n" not in out
    assert main(["info", str(path), "--explain"]) == 0  # every field's meaning, as declared, under its value
    explained = capsys.readouterr().out
    for f in own:
        assert f"{f.label:<24} " in explained and f" {f.help}" in explained.replace("\n" + " " * 27, " "), f.key


def _panel(page: str) -> str:
    return page[page.index('<details id="dpgeo-privacy"'):].split("</details>", 1)[0]


@pytest.mark.parametrize("name", ["heat", "hotspots", "series", "kmeans"])
def test_the_map_panel_shows_the_layers_own_fields_labelled(name, releases, tmp_path):
    path = tmp_path / "map.html"
    releases[name].to_file(path, basemap="none")
    panel = html.unescape(_panel(path.read_text(encoding="utf-8")))
    md = releases[name].metadata
    own = _own(name, md, panel=True)
    assert own, name
    for label, text in panel_items(md):
        assert f"<dt>{label}</dt><dd>{text}</dd>" in panel, (label, text)
    if "series" in md:
        assert "<dt>Series</dt><dd>3 periods by week" in panel
    for f in own:
        assert f"<dt>{f.label[:1].upper() + f.label[1:]}</dt>" in panel, f.key


def test_a_weak_epsilon_is_shown_as_such_on_the_map_the_png_and_in_info(tmp_path, capsys):
    from dpgeo.io.statement import privacy_line

    pts, _ = _points()
    with pytest.warns(dpgeo.errors.WeakEpsilonWarning):
        res = dpgeo.heat(pts, epsilon=50, cell_m=100, **DOMAIN)
    res.to_file(tmp_path / "map.html", basemap="none")
    panel = _panel((tmp_path / "map.html").read_text(encoding="utf-8"))
    assert 'class="dp-status dp-weak"' in panel and "but weak" in panel and "dp-private" not in panel
    assert privacy_line(res.metadata).startswith("Differentially private, but weak: ε = 50 is above 10")
    res.to_file(tmp_path / "layer.gpkg")
    assert main(["info", str(tmp_path / "layer.gpkg")]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[1].startswith("warning: ε = 50 is above 10") and "yes, but weak" in out


#: The front ends that show a release's metadata: they read the declarations, and name no mechanism's field.
FRONT_ENDS = ["dpgeo/cli/show.py", "dpgeo/io/statement.py", "dpgeo/io/html.py", "dpgeo/io/png.py",
              "dpgeo/io/png_series.py", "qgis_plugin/dpgeo_qgis/preview.py", "qgis_plugin/dpgeo_qgis/writing.py"]


@pytest.mark.parametrize("path", FRONT_ENDS)
def test_no_front_end_names_a_mechanism_field(path):
    common = {f.key for f in COMMON_FIELDS}
    layer_columns = {fld.name for m in MECHANISMS for fld in m.fields} | {"level", "layer"}
    own = {f.key for _, f in declared_outputs()} - common - layer_columns
    tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
    docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                  if isinstance(n, (ast.Module, ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)) and n.body
                  and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    named = sorted({n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
                    and id(n) not in docstrings and n.value in own})
    assert not named, named
