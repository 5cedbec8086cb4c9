"""Awkward outputs and parameters: each case is refused cleanly, before the private input is opened.

Every case builds its own files in a fresh folder: a small private point layer whose records carry the
corpus' private markers, a public study area, a release. A case is one command line (or one API call) that
must be refused the :mod:`corpus` way: exit 2, one line naming the problem and the fix, no traceback, nothing
added, removed or changed in the folders involved, and no record value in the message.

The parameter cases name a FIFO as the input (``fifo.gpkg``). dpgeo refuses a named pipe as input (from
``stat``, without opening it), so each case also checks that the refusal is about the case and not about the
pipe: that proves the parameters were checked before the input was looked at (and before the ledger, in
the same folder, was touched).
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time

import geopandas as gpd
import numpy as np
import pytest
import shapely

import dpgeo
from corpus import PRIVATE_MARKERS, api_refused, refused, run_cli, snapshot

AREA_BBOX = (-93.33, 44.89, -93.19, 45.06)
SPANS = ["--epsilon", "1", "--radius", "150", "--min-points", "40"]


def _points(n=400, seed=0):
    """A private layer: clustered stops, one of them at the marker coordinates, with a marker officer name."""
    rng = np.random.default_rng(seed)
    x = np.r_[rng.normal(-93.27, 0.004, n), [float(PRIVATE_MARKERS[0])]]
    y = np.r_[rng.normal(44.97, 0.003, n), [float(PRIVATE_MARKERS[1])]]
    officer = ["OFFICER-7731"] + ["A"] * n
    return gpd.GeoDataFrame({"officer": officer, "name": ["Jane Doe"] * (n + 1)},
                            geometry=gpd.points_from_xy(x, y), crs="EPSG:4326")


@pytest.fixture
def work(tmp_path):
    """A folder with ``in.gpkg``, ``in.geojson``, ``area.geojson``, ``data/`` (CSV parts), ``fifo.gpkg``."""
    pts = _points()
    pts.to_file(tmp_path / "in.gpkg", layer="stops")
    pts.to_file(tmp_path / "in.geojson", driver="GeoJSON")
    gpd.GeoDataFrame(geometry=[shapely.box(*AREA_BBOX)], crs="EPSG:4326").to_file(
        tmp_path / "area.geojson", driver="GeoJSON")
    (tmp_path / "data").mkdir()
    for i, part in enumerate(np.array_split(np.arange(len(pts)), 2)):
        sub = pts.iloc[part]
        sub.assign(lon=sub.geometry.x, lat=sub.geometry.y).drop(columns="geometry").to_csv(
            tmp_path / "data" / f"part{i}.csv", index=False)
    (tmp_path / "sub").mkdir()
    (tmp_path / "folder.gpkg").mkdir()
    os.mkfifo(tmp_path / "fifo.gpkg")
    return tmp_path


@pytest.fixture
def env(work):
    return {"DPGEO_LEDGER": str(work / "ledger.sqlite")}


def _release(work):
    """A release file written by dpgeo (not private: seeded; nothing charged)."""
    res = dpgeo.dbscan_spans(str(work / "in.gpkg"), epsilon=1.0, radius_m=150, min_points=40,
                             domain=str(work / "area.geojson"), seed=1, ledger=False)
    return res.to_file(str(work / "release.gpkg"))


# -- outputs that resolve to an input ---------------------------------------------------------------------------

def _symlinked_input(w):
    os.symlink("in.gpkg", w / "link.gpkg")
    return ["spans", "link.gpkg", "-o", "in.gpkg"]


def _symlinked_output(w):
    os.symlink("in.gpkg", w / "link.gpkg")
    return ["spans", "in.gpkg", "-o", "link.gpkg"]


def _hard_link(w):
    os.link(w / "in.gpkg", w / "hard.gpkg")
    return ["spans", "in.gpkg", "-o", "hard.gpkg"]


def _symlinked_folder(w):
    os.symlink(w / "sub", w / "alias")
    os.replace(w / "in.gpkg", w / "sub" / "in.gpkg")
    return ["spans", "sub/in.gpkg", "-o", "alias/in.gpkg"]


OUTPUT_IS_INPUT = {
    "same name": lambda w: ["spans", "in.gpkg", "-o", "in.gpkg"],
    "same GeoJSON": lambda w: ["spans", "in.geojson", "-o", "in.geojson"],
    "dot-dot path": lambda w: ["spans", "in.gpkg", "-o", "./sub/../in.gpkg"],
    "absolute vs relative": lambda w: ["spans", "in.gpkg", "-o", str(w / "in.gpkg")],
    "relative vs absolute": lambda w: ["spans", str(w / "in.gpkg"), "-o", "in.gpkg"],
    "input is a symlink": _symlinked_input,
    "output is a symlink": _symlinked_output,
    "hard link": _hard_link,
    "folder symlink": _symlinked_folder,
    "study area file": lambda w: ["spans", "in.gpkg", "-o", "area.geojson"],
    "ledger file": lambda w: ["spans", "in.gpkg", "-o", "book.gpkg", "--ledger", "book.gpkg"],
    "second of two outputs": lambda w: ["spans", "in.gpkg", "-o", "ok.gpkg", "-o", "in.gpkg"],
    "inside the input folder": lambda w: ["spans", "data", "--x", "lon", "--y", "lat", "-o", "data/out.gpkg"],
    "matched by the input glob": lambda w: ["spans", "data/*", "--x", "lon", "--y", "lat", "-o", "data/x.geojson"],
    "wavecluster": lambda w: ["wavecluster", "in.gpkg", "-o", "in.gpkg", "--epsilon", "1", "--cell", "200"],
    "kmeans": lambda w: ["kmeans", "in.gpkg", "-o", "in.gpkg", "--epsilon", "1", "--k", "3"],
}


@pytest.mark.parametrize("case", sorted(OUTPUT_IS_INPUT))
def test_output_that_is_an_input_is_refused(work, env, case):
    args = OUTPUT_IS_INPUT[case](work)
    if args[0] == "spans":
        args += SPANS
    msg = refused([*args, "--domain", "area.geojson"], cwd=work, env=env, must_mention=("output", "choose"))
    assert "overwrite" in msg or "change the input" in msg


def test_export_onto_its_release_is_refused(work, env):
    _release(work)
    refused(["export", "release.gpkg", "-o", "./sub/../release.gpkg"], cwd=work, env=env,
            must_mention=("release", "choose another output"))


def test_export_onto_the_ledger_is_refused(work, env):
    _release(work)
    refused(["export", "release.gpkg", "-o", "ledger.gpkg"], cwd=work, env={"DPGEO_LEDGER": str(work / "ledger.gpkg")},
            must_mention=("ledger",))


# -- the output target itself -------------------------------------------------------------------------------------

OUTPUT_TARGETS = {
    "missing folder": (["-o", "nowhere/out.gpkg"], ("does not exist",)),
    "output is a folder": (["-o", "folder.gpkg"], ("folder",)),
    "output without extension": (["-o", "sub"], ("format", ".gpkg")),
    "unknown format": (["-o", "out.txt"], ("out.txt",)),
    "read-only folder": (["-o", "/proc/out.gpkg"], ("cannot write in the output folder",)),
    "invalid out-crs": (["-o", "out.gpkg", "--out-crs", "EPSG:999999"], ("crs",)),
    "out-crs for GeoJSON only": (["-o", "out.geojson", "--out-crs", "EPSG:3857"], ("4326",)),
    "same output twice": (["-o", "out.gpkg", "-o", "./out.gpkg"], ("twice",)),
    "basemap on a GeoPackage": (["-o", "out.gpkg", "--basemap", "https://t.example.org/{z}/{x}/{y}.png"],
                                ("html",)),
}


@pytest.mark.parametrize("case", sorted(OUTPUT_TARGETS))
def test_bad_output_is_refused_before_the_input_is_opened(work, env, case):
    opts, words = OUTPUT_TARGETS[case]
    msg = refused(["spans", "fifo.gpkg", *opts, *SPANS, "--domain", "area.geojson"], cwd=work, env=env,
                  must_mention=words, timeout=60)
    assert "named pipe" not in msg, msg  # refused for the output, before the input was looked at


# -- parameters ---------------------------------------------------------------------------------------------------

def _spans(**change):
    values = {"--epsilon": "1", "--radius": "150", "--min-points": "40"}
    values.update(change)
    out = []
    for k, v in values.items():
        out += [k, v]
    return ["spans", "fifo.gpkg", "-o", "out.gpkg", *out]


def _wave(*opts):
    return ["wavecluster", "fifo.gpkg", "-o", "out.gpkg", *opts]


def _kmeans(*opts):
    return ["kmeans", "fifo.gpkg", "-o", "out.gpkg", *opts]


PARAMETERS = {
    "epsilon 0": (_spans(**{"--epsilon": "0"}), ("epsilon",)),
    "epsilon negative": (_spans(**{"--epsilon": "-1"}), ("epsilon",)),
    "epsilon nan": (_spans(**{"--epsilon": "nan"}), ("epsilon",)),
    "epsilon inf": (_spans(**{"--epsilon": "inf"}), ("epsilon",)),
    "epsilon 1e-13 (below the exact sampler)": (_spans(**{"--epsilon": "1e-13"}), ("2**-40", "epsilon")),
    "radius 0": (_spans(**{"--radius": "0"}), ("radius",)),
    "radius 1 cm (1e12 cells)": (_spans(**{"--radius": "0.01"}), ("cells", "larger radius")),
    "min-points 0": (_spans(**{"--min-points": "0"}), ("min_points",)),
    "beta 1.5": (_spans(**{"--beta": "1.5"}), ("beta",)),
    "eta 2": (_spans(**{"--eta": "2"}), ("eta",)),
    "seed negative": (_spans(**{"--seed": "-1"}), ("seed",)),
    "max-memory tiny": (_spans(**{"--max-memory": "1K"}), ("memory", "limit")),
    "max-memory not a size": (_spans(**{"--max-memory": "lots"}), ("memory size",)),
    "person cap without person": (_spans(**{"--max-points-per-person": "3"}), ("person",)),
    "wavecluster percentile 100": (_wave("--epsilon", "1", "--cell", "200", "--percentile", "100"), ("percentile",)),
    "wavecluster count-split 2": (_wave("--epsilon", "1", "--cell", "200", "--count-split", "2"), ("count_split",)),
    "wavecluster count-cap negative": (_wave("--method", "privthr-em", "--epsilon", "1", "--cell", "200",
                                             "--count-cap", "-1"), ("count_cap",)),
    "wavecluster n-public 0": (_wave("--method", "baseline", "--epsilon", "1", "--cell", "200", "--n-public", "0"),
                               ("n_public",)),
    "wavecluster grid 1": (_wave("--epsilon", "1", "--grid", "1"), ("grid_size",)),
    "wavecluster cell 1 mm": (_wave("--epsilon", "1", "--cell", "0.001"), ("larger cell",)),
    "wavecluster epsilon 1e-12": (_wave("--epsilon", "1e-12", "--cell", "200"), ("2**-40", "epsilon")),
    "baseline epsilon 1e-7": (_wave("--epsilon", "1e-7", "--cell", "200", "--method", "baseline"),
                              ("synthetic points", "larger epsilon")),
    "wavecluster no epsilon": (_wave("--cell", "200"), ("epsilon",)),
    "wavecluster seed negative": (_wave("--epsilon", "1", "--cell", "200", "--seed", "-5"), ("seed",)),
    "kmeans k 0": (_kmeans("--epsilon", "1", "--k", "0"), ("k",)),
    "kmeans epsilon 1e-12": (_kmeans("--epsilon", "1e-12", "--k", "3"), ("larger epsilon",)),
    "kmeans seed negative": (_kmeans("--epsilon", "1", "--k", "3", "--seed", "-3"), ("seed",)),
    "preview epsilon 1e-13": (["preview", "--epsilon", "1e-13", "--radius", "150", "--min-points", "40"],
                              ("2**-40", "epsilon")),
    "preview radius 1 mm": (["preview", "--epsilon", "1", "--radius", "0.001", "--min-points", "40"],
                            ("cells",)),
    "compare epsilon 1e-13": (["compare", "fifo.gpkg", "-o", "c.png", "--epsilon", "1e-13", "--radius", "150",
                               "--min-points", "40"], ("2**-40", "epsilon")),
    "compare radius 1 cm": (["compare", "fifo.gpkg", "-o", "c.png", "--epsilon", "1", "--radius", "0.01",
                             "--min-points", "40"], ("cells",)),
    "compare seed negative": (["compare", "fifo.gpkg", "-o", "c.png", "--epsilon", "1", "--radius", "150",
                               "--min-points", "40", "--seed", "-1"], ("seed",)),
    "export invalid out-crs": (["export", "fifo.gpkg", "-o", "x.gpkg", "--out-crs", "EPSG:999999"], ("crs",)),
    "export to a missing folder": (["export", "fifo.gpkg", "-o", "nowhere/x.gpkg"], ("does not exist",)),
    "export onto itself": (["export", "fifo.gpkg", "-o", "./fifo.gpkg"], ("release", "choose")),
    "bbox too fine, negative minx after a space": (
        ["preview", "--epsilon", "1", "--radius", "0.005", "--min-points", "40", "--domain",
         "-93.33,44.89,-93.19,45.06"], ("cells",)),
}


@pytest.mark.parametrize("case", sorted(PARAMETERS))
def test_bad_parameter_is_refused_before_the_input_is_opened(work, env, case):
    args, words = PARAMETERS[case]
    if "--domain" not in args and args[0] != "export":
        args = [*args, "--domain", "area.geojson"]
    msg = refused(args, cwd=work, env=env, must_mention=words, timeout=60)
    assert "named pipe" not in msg, msg  # refused for the parameter, before the input was looked at
    assert not (work / "ledger.sqlite").exists()


@pytest.mark.parametrize("command", [["info", "fifo.gpkg.missing"], ["export", "missing.gpkg", "-o", "x.gpkg"],
                                     ["budget", "show", "nobody", "--ledger", "nowhere/ledger.sqlite"]])
def test_other_commands_refuse_cleanly(work, env, command):
    refused(command, cwd=work, env=env)


# -- the Python API -----------------------------------------------------------------------------------------------

def _api_release(work, **kw):
    return dpgeo.dbscan_spans(str(work / "in.gpkg"), epsilon=1.0, radius_m=150, min_points=40,
                              domain=str(work / "area.geojson"), seed=1, **kw)


@pytest.mark.parametrize("target", ["in.gpkg", "./sub/../in.gpkg", "area.geojson", "ledger.sqlite"])
def test_api_to_file_refuses_an_input(work, target, monkeypatch):
    monkeypatch.chdir(work)
    res = _api_release(work, ledger=str(work / "ledger.sqlite"))
    assert "in.gpkg" not in repr(res) and "in.gpkg" not in str(res.metadata.get("domain"))
    api_refused(lambda: res.to_file(target), folders=[work], must_mention=("choose",))


def test_api_to_file_refuses_the_release_it_was_read_from(work):
    path = _release(work)
    back = dpgeo.read_release(path)
    api_refused(lambda: back.to_file(path), folders=[work], must_mention=("release",))


def test_api_remembers_inputs_outside_the_metadata(work):
    res = _api_release(work, ledger=str(work / "book.sqlite"))
    text = repr(res.metadata) + repr(res)
    assert "book.sqlite" not in text and "_protected" not in text and "ledger" not in repr(res)
    out = res.to_file(str(work / "fine.gpkg"))
    assert "book.sqlite" not in repr(dpgeo.read_layer_metadata(out))


API_PARAMETERS = {
    "spans epsilon 1e-13": lambda w: dpgeo.dbscan_spans(str(w / "fifo.gpkg"), epsilon=1e-13, radius_m=150,
                                                        min_points=40, domain=str(w / "area.geojson")),
    "spans radius 1 cm": lambda w: dpgeo.dbscan_spans(str(w / "fifo.gpkg"), epsilon=1, radius_m=0.01,
                                                      min_points=40, domain=str(w / "area.geojson")),
    "spans memory limit": lambda w: dpgeo.dbscan_spans(str(w / "fifo.gpkg"), epsilon=1, radius_m=150, min_points=40,
                                                       domain=str(w / "area.geojson"), max_memory_bytes=1024),
    "spans seed -1": lambda w: dpgeo.dbscan_spans(str(w / "fifo.gpkg"), epsilon=1, radius_m=150, min_points=40,
                                                  domain=str(w / "area.geojson"), seed=-1),
    "wavecluster count_split 2": lambda w: dpgeo.wavecluster(str(w / "fifo.gpkg"), epsilon=1, cell_m=200,
                                                             count_split=2.0, domain=str(w / "area.geojson")),
    "wavecluster wavelet": lambda w: dpgeo.wavecluster(str(w / "fifo.gpkg"), epsilon=1, cell_m=200,
                                                       wavelet="mexican-hat", domain=str(w / "area.geojson")),
    "wavecluster epsilon 1e-12": lambda w: dpgeo.wavecluster(str(w / "fifo.gpkg"), epsilon=1e-12, cell_m=200,
                                                             domain=str(w / "area.geojson")),
    "kmeans epsilon 1e-12": lambda w: dpgeo.kmeans(str(w / "fifo.gpkg"), epsilon=1e-12, k=3,
                                                   domain=str(w / "area.geojson")),
    "preview epsilon 1e-13": lambda w: dpgeo.noise_preview(epsilon=1e-13, radius_m=150, min_points=40,
                                                           domain=AREA_BBOX),
}


@pytest.mark.parametrize("case", sorted(API_PARAMETERS))
def test_api_parameters_refused_before_reading(work, case):
    msg = api_refused(lambda: API_PARAMETERS[case](work), folders=[work])
    assert "named pipe" not in msg, msg  # refused for the parameter, before the input was looked at
    assert not (work / "ledger.sqlite").exists()


def test_the_memory_plan_names_its_numbers():
    from dpgeo.domain import as_study_area
    from dpgeo.resources import check_plan, plan_run

    area = as_study_area(AREA_BBOX)
    plan = plan_run(area, 100.0, epsilon=1.0)
    assert plan.cells == plan.nx * plan.ny and plan.total_bytes > 0
    check_plan(plan)  # an ordinary run fits
    with pytest.raises(dpgeo.errors.ParameterError, match=r"would need about [\d.]+ MiB .* limit of 1.0 MiB; use a "
                                                           r"larger cell width or a smaller study area"):
        check_plan(plan, 2**20)
    # a tiny epsilon no longer needs the exact noise laws' memory (they are bounded through the continuous law)
    assert plan_run(area, 100.0, epsilon=1e-9).total_bytes < plan.total_bytes + 2**30


# -- focused: SIGKILL while writing, a closed pipe, a bbox that starts with '-', GeoPackage 1.3 -----------------

def test_sigkill_during_a_write_leaves_no_file_under_the_target_and_the_next_run_cleans_up(work, tmp_path_factory):
    flag = tmp_path_factory.mktemp("flag") / "paused"
    args = [sys.executable, "-m", "dpgeo", "spans", "in.gpkg", "-o", "out.gpkg", *SPANS, "--domain", "area.geojson",
            "--seed", "1", "-q"]
    env = dict(os.environ, DPGEO_TEST_PAUSE_BEFORE_RENAME=str(flag), DPGEO_LEDGER=str(work / "ledger.sqlite"))
    p = subprocess.Popen(args, cwd=work, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(1200):  # bounded: the write starts within seconds
            if flag.exists() or p.poll() is not None:
                break
            time.sleep(0.05)
        assert flag.exists(), "the run never reached its write"
        os.kill(p.pid, signal.SIGKILL)
        p.wait(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
    left = sorted(n for n in os.listdir(work) if n.startswith(".dpgeo-tmp-"))
    assert not (work / "out.gpkg").exists()
    assert left and all(n.startswith(f".dpgeo-tmp-{p.pid}-") for n in left), left
    env.pop("DPGEO_TEST_PAUSE_BEFORE_RENAME")
    q = subprocess.run(args, cwd=work, env=env, capture_output=True, text=True, timeout=120)
    assert q.returncode == 0, q.stderr
    assert (work / "out.gpkg").exists()
    assert not [n for n in os.listdir(work) if n.startswith(".dpgeo-tmp-")]


def test_a_live_process_keeps_its_temporaries(tmp_path):
    from dpgeo.io.atomic import remove_stale_temporaries, temporary_name

    mine = temporary_name(str(tmp_path), ".gpkg")
    open(mine, "w").close()
    dead = tmp_path / ".dpgeo-tmp-999999999-abc.gpkg-journal"
    dead.write_text("x")
    assert remove_stale_temporaries(str(tmp_path)) == [str(dead)]
    assert os.path.exists(mine)


@pytest.mark.parametrize("command", [["info", "release.gpkg"], ["info", "release.gpkg", "--json"], ["--help"],
                                     ["preview", "--epsilon", "1", "--radius", "150", "--min-points", "40",
                                      "--domain", "area.geojson"]])
def test_a_closed_pipe_ends_quietly(work, command):
    _release(work)
    p = subprocess.Popen([sys.executable, "-m", "dpgeo", *command], cwd=work, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    p.stdout.close()  # the reader is gone before dpgeo writes: like `| head -0`
    err = p.stderr.read().decode()
    p.wait(timeout=120)
    assert "Traceback" not in err and "BrokenPipe" not in err, err
    assert p.returncode in (0, 141), (p.returncode, err)


def test_a_closed_pipe_in_a_shell(work):
    _release(work)
    p = subprocess.run(f"{sys.executable} -m dpgeo info release.gpkg --json | head -1", shell=True, cwd=work,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and p.stdout.startswith("{") and "Traceback" not in p.stderr, p.stderr


@pytest.mark.parametrize("spelling", [["--domain", "-93.33,44.89,-93.19,45.06"], ["--domain=-93.33,44.89,-93.19,45.06"],
                                      ["--domain", "-93.33, 44.89, -93.19, 45.06"]])
def test_a_bbox_starting_with_minus_parses(spelling):
    p = run_cli(["preview", "--epsilon", "1", "--radius", "150", "--min-points", "40", "--json", *spelling],
                cwd=os.getcwd())
    assert p.returncode == 0, p.stderr
    assert '"n_cells"' in p.stdout


def test_outputs_and_sample_are_geopackage_1_3(work):
    from helpers import SAMPLE_POINTS

    path = _release(work)
    for f in (path, SAMPLE_POINTS):
        with sqlite3.connect(f) as c:
            assert c.execute("PRAGMA application_id").fetchone()[0] == 0x47504B47  # 'GPKG'
            assert c.execute("PRAGMA user_version").fetchone()[0] == 10300, f


def test_nothing_is_left_by_a_refusal_in_the_input_folder(work, env):
    before = snapshot(work)
    refused(["spans", "in.gpkg", "-o", "in.gpkg", *SPANS, "--domain", "area.geojson"], cwd=work, env=env)
    assert snapshot(work) == before


def test_a_tiny_epsilon_is_a_normal_run():
    # epsilon = 1e-6 used to be refused for the memory of the exact noise laws; the bounds now go through the
    # continuous law there, so the run is small and quick (and, with this much noise, finds nothing)
    import numpy as np

    rng = np.random.default_rng(0)
    x, y = rng.uniform(0, 5000, 2000), rng.uniform(0, 5000, 2000)
    res = dpgeo.dbscan_spans((x, y, "EPSG:32615"), epsilon=1e-6, radius_m=150, min_points=40,
                             domain=(0, 0, 5000, 5000), domain_crs="EPSG:32615", crs="EPSG:32615", seed=1,
                             ledger=False)
    assert res.metadata["gamma"] > 1e6 and len(res.layer) == 0
    assert dpgeo.noise_preview(epsilon=1e-6, radius_m=150, min_points=40, domain=(0, 0, 5000, 5000),
                               domain_crs="EPSG:32615", crs="EPSG:32615")["count_error_95"] > 2.9e6
    with pytest.raises(dpgeo.errors.ParameterError, match=r"2\*\*-40"):
        dpgeo.wavecluster((x, y, "EPSG:32615"), epsilon=2e-12, cell_m=200, domain=(0, 0, 5000, 5000),
                          domain_crs="EPSG:32615", crs="EPSG:32615", seed=1, ledger=False)
