"""A ledger that knows records, not bytes: copies in another order, line ending, column order or format are charged
to the declared dataset; a strict policy refuses an undeclared input before any record is read.

See docs/budget.md ("How an input is recognised") and dpgeo/budget/sketches.py, dpgeo/counting/sketch.py.
"""

import os
import stat
import struct

import numpy as np
import pytest
from helpers import SAMPLE_POINTS

import dpgeo
from dpgeo.budget import Ledger
from dpgeo.budget.sketches import RECORDS_MATCH, key_path
from dpgeo.cli import main
from dpgeo.counting.sketch import PRECISION_DEG, RecordSketch, containment, siphash24
from dpgeo.errors import BudgetExceededError, BudgetWarning, ParameterError

AREA = dict(domain=(-93.33, 44.89, -93.19, 45.06), domain_crs="EPSG:4326")
HEAT = dict(epsilon=0.5, cell_m=250, **AREA)
CLI_HEAT = ["--epsilon", "0.5", "--cell", "250", "--domain", "-93.33,44.89,-93.19,45.06", "--domain-crs", "EPSG:4326"]
N = 1500


# -- the sketch itself ---------------------------------------------------------------------------------------------

def test_siphash_equals_the_reference_vectors():
    """SipHash-2-4 of the reference implementation (key 00..0f, messages 00.. of 0, 8 and 16 bytes)."""
    key = bytes(range(16))
    w0, w1 = struct.unpack("<QQ", bytes(range(16)))
    assert int(siphash24(key)) == 0x726FDB47DD0E0E31
    assert int(siphash24(key, np.array([w0], np.uint64))[0]) == 0x93F5F5799A932462
    assert int(siphash24(key, np.array([w0]), np.array([w1]))[0]) == 0x3F2ACC7F57C29BDB
    big = np.arange(100_000, dtype=np.uint64)  # blocks give the same as one element at a time
    assert all(int(siphash24(key, big)[i]) == int(siphash24(key, big[i:i + 1])[0]) for i in (0, 32767, 32768, 99_999))


def _lonlat(n, seed=0):
    rng = np.random.default_rng(seed)
    return rng.uniform(-93.3, -93.2, n), rng.uniform(44.9, 45.0, n)


def test_order_fragments_and_rounding_do_not_change_the_sketch():
    key = bytes(16)
    lon, lat = _lonlat(20_000)
    a = RecordSketch(key)
    a.add_lonlat(lon, lat)
    b = RecordSketch(key)  # reversed, in three fragments merged (as the Dask workers do)
    parts = [b.empty() for _ in range(3)]
    for i, p in enumerate(parts):
        p.add_lonlat(lon[::-1][i::3], lat[::-1][i::3] + PRECISION_DEG * 1e-7)  # float noise of a reprojection
    for p in parts:
        b.merge(p)
    assert np.array_equal(a.hashes, b.hashes) and np.array_equal(a.counts, b.counts)
    assert a.n_records == b.n_records == 20_000 and a.hashes.size == 1024
    assert abs(a.n_distinct() / 20_000 - 1) < 0.15  # KMV: relative error ~ 1/sqrt(k) = 3%; 5 sd
    back = RecordSketch.from_bytes(a.to_bytes())
    assert containment(back, a) == containment(a, back) == 1.0


def test_containment_of_subsets_and_supersets():
    key = bytes(range(16))
    lon, lat = _lonlat(40_000, seed=1)
    whole, half, other = RecordSketch(key), RecordSketch(key), RecordSketch(key)
    whole.add_lonlat(lon, lat)
    half.add_lonlat(lon[:20_000], lat[:20_000])
    other.add_lonlat(*_lonlat(40_000, seed=2))
    assert containment(half, whole) == 1.0  # every record of the half is in the whole (exact: same hashes)
    # the share of the whole in the half: 0.5, estimated from >= ~512 sampled locations (sd ~ 0.02; 6 sd)
    assert abs(containment(whole, half) - 0.5) < 0.12
    assert containment(other, whole) < 0.05 and containment(whole, other) < 0.05
    # duplicates count as records: a location held 3 times in a and once in b is a third in b
    a, b = RecordSketch(key), RecordSketch(key)
    a.add_lonlat(np.repeat(lon[:100], 3), np.repeat(lat[:100], 3))
    b.add_lonlat(lon[:100], lat[:100])
    assert containment(b, a) == 1.0 and containment(a, b) == pytest.approx(1 / 3)


def test_another_key_gives_unrelated_hashes():
    """Without the key a stored hash says nothing: another key shares no hash with it."""
    lon, lat = _lonlat(5000)
    a, b = RecordSketch(bytes(16)), RecordSketch(bytes(range(16)))
    a.add_lonlat(lon, lat)
    b.add_lonlat(lon, lat)
    assert np.intersect1d(a.hashes, b.hashes).size == 0 and a.key_id != b.key_id


# -- the files of the done-when ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A small GeoPackage derived from the sample (declared), and copies of its records in other files."""
    import geopandas as gpd

    d = tmp_path_factory.mktemp("records")
    g = gpd.read_file(SAMPLE_POINTS, rows=N)[["date", "problem", "geometry"]]
    out = {"declared": d / "stops.gpkg"}
    g.to_file(out["declared"], driver="GPKG")
    rng = np.random.default_rng(7)
    g.iloc[rng.permutation(len(g))].to_file(d / "shuffled.gpkg", driver="GPKG")
    out["shuffled gpkg"] = d / "shuffled.gpkg"
    df = g.assign(lon=g.geometry.x.map(repr), lat=g.geometry.y.map(repr)).drop(columns="geometry")
    (d / "export.csv").write_text(df.to_csv(index=False))  # a CSV export of the GeoPackage
    out["csv export"] = d / "export.csv"
    (d / "crlf.csv").write_bytes((d / "export.csv").read_bytes().replace(b"\n", b"\r\n"))
    out["crlf csv"] = d / "crlf.csv"
    (d / "columns.csv").write_text(df[["lat", "problem", "lon", "date"]].to_csv(index=False))
    out["columns reordered"] = d / "columns.csv"
    (d / "shuffled.csv").write_text(df.iloc[rng.permutation(len(df))].to_csv(index=False))
    out["shuffled csv"] = d / "shuffled.csv"
    lines = (d / "export.csv").read_text().splitlines(keepends=True)
    (d / "last_row_dropped.csv").write_text("".join(lines[:-1]))
    out["last row dropped"] = d / "last_row_dropped.csv"
    rng2 = np.random.default_rng(3)
    (d / "other.csv").write_text("lon,lat\n" + "".join(f"{float(a)!r},{float(b)!r}\n" for a, b in zip(
        rng2.uniform(-93.3, -93.2, N), rng2.uniform(44.9, 45.0, N))))
    out["other"] = d / "other.csv"
    return out


COPIES = ["shuffled gpkg", "csv export", "crlf csv", "columns reordered", "shuffled csv", "last row dropped"]


@pytest.mark.parametrize("copy", COPIES)
def test_a_copy_of_the_records_is_charged_to_the_declared_dataset_api(files, copy, tmp_path):
    ledger = Ledger(tmp_path / "l.sqlite")
    ledger.declare("stops", [files["declared"]], total_epsilon=1)
    with pytest.warns(BudgetWarning, match="charged to the declared dataset 'stops': the input holds"):
        res = dpgeo.heat(str(files[copy]), ledger=ledger, **HEAT)
    assert res.metadata["dataset"] == "stops" and res.metadata["dataset_total_epsilon"] == 1
    assert ledger.budget("stops").spent_epsilon == 0.5
    dpgeo.heat(str(files[copy]), ledger=ledger, **HEAT)  # the file is now known before it is read
    with pytest.raises(BudgetExceededError, match="'stops'"):  # the total holds for every copy
        dpgeo.heat(str(files[copy]), ledger=ledger, **HEAT)
    assert [d for d in ledger.datasets()] == ["stops"]


@pytest.mark.parametrize("copy", COPIES)
def test_a_copy_is_charged_to_the_declared_dataset_cli(files, copy, tmp_path, capsys):
    led = str(tmp_path / "l.sqlite")
    assert main(["budget", "declare", "stops", "--file", str(files["declared"]), "--total", "0.5",
                 "--ledger", led]) == 0
    out = tmp_path / "heat.gpkg"
    capsys.readouterr()
    assert main(["heat", str(files[copy]), "-o", str(out), *CLI_HEAT, "--ledger", led]) == 0
    err = capsys.readouterr().err
    assert "dpgeo: note: charged to the declared dataset 'stops': the input holds" in err
    assert "nothing limits" not in err  # said before reading, moot once the records are known
    assert dpgeo.read_release(out).metadata["dataset"] == "stops"
    code = main(["heat", str(files[copy]), "-o", str(tmp_path / "again.gpkg"), *CLI_HEAT, "--ledger", led])
    err = capsys.readouterr().err
    assert code == 2 and "'stops'" in err and not (tmp_path / "again.gpkg").exists()


def test_a_declared_file_learns_its_records_at_declaration_and_keeps_no_coordinate(files, tmp_path):
    ledger = Ledger(tmp_path / "l.sqlite")
    ledger.declare("stops", [files["declared"]], total_epsilon=1)
    key = key_path(ledger.path)
    assert stat.S_IMODE(os.stat(key).st_mode) == 0o600 and os.path.getsize(key) == 16
    import sqlite3

    con = sqlite3.connect(ledger.path)
    (blob, n), = con.execute("SELECT sketch, n_records FROM record_sketches WHERE dataset = 'stops'")
    assert n == N
    raw = open(ledger.path, "rb").read()
    assert open(key, "rb").read() not in raw  # the key is never in the ledger
    import geopandas as gpd  # nor a coordinate of the records, as a double or as text

    g = gpd.read_file(files["declared"])
    for x in g.geometry.x[:50]:
        assert struct.pack("<d", x) not in raw and repr(x).encode() not in raw


def test_other_records_are_not_taken_for_the_declared_dataset(files, tmp_path):
    ledger = Ledger(tmp_path / "l.sqlite")
    ledger.declare("stops", [files["declared"]], total_epsilon=1)
    with pytest.warns(BudgetWarning) as caught:
        res = dpgeo.heat(str(files["other"]), ledger=ledger, **HEAT)
    assert "dataset" not in res.metadata and ledger.budget("stops").spent_epsilon == 0
    assert not any("records of dataset" in str(w.message) for w in caught)


def test_a_name_without_a_total_for_declared_records_is_refused_before_any_noise(files, tmp_path):
    ledger = Ledger(tmp_path / "l.sqlite")
    ledger.declare("stops", [files["declared"]], total_epsilon=1)
    with pytest.raises(ParameterError, match="holds records of dataset 'stops'.*not 'mine'.*--dataset stops"):
        dpgeo.heat(str(files["shuffled csv"]), ledger=ledger, dataset="mine", **HEAT)
    assert ledger.budget("mine").spent_epsilon == 0 and ledger.budget("mine").releases[0].status == "cancelled"
    # named as the declared dataset: charged to it, the records confirm it
    assert dpgeo.heat(str(files["shuffled csv"]), ledger=ledger, dataset="stops", **HEAT).metadata["dataset"] == "stops"


def test_the_records_of_a_declared_dataset_whose_total_is_spent_are_refused_before_any_noise(files, tmp_path):
    ledger = Ledger(tmp_path / "l.sqlite")
    ledger.declare("stops", [files["declared"]], total_epsilon=0.5)
    dpgeo.heat(str(files["declared"]), ledger=ledger, **HEAT)
    with pytest.raises(BudgetExceededError, match="recognised from its records.*before any noise"):
        dpgeo.heat(str(files["shuffled csv"]), ledger=ledger, **HEAT)
    b = ledger.budget("stops")
    assert b.spent_epsilon == 0.5 and b.releases[-1].status == "cancelled"


def test_in_memory_points_of_a_declared_dataset_must_name_it(files, tmp_path):
    import geopandas as gpd

    ledger = Ledger(tmp_path / "l.sqlite")
    ledger.declare("stops", [files["declared"]], total_epsilon=1)
    g = gpd.read_file(files["declared"])
    with pytest.raises(ParameterError, match="dataset='stops'"):
        dpgeo.heat(g, ledger=ledger, **HEAT)
    assert dpgeo.heat(g, ledger=ledger, dataset="stops", **HEAT).metadata["dataset"] == "stops"


# -- the strict policy ---------------------------------------------------------------------------------------------

def _garbage(path):
    """An input that fails the moment it is read: a refusal that names the policy was decided before reading."""
    path.write_bytes(b"\x00\xff not a point file \x00" * 100)
    return path


def test_strict_policy_refuses_an_undeclared_file_before_it_is_read_api(files, tmp_path):
    ledger = Ledger(tmp_path / "l.sqlite")
    ledger.declare("stops", [files["declared"]], total_epsilon=1)
    ledger.set_policy("require-declared")
    assert Ledger(ledger.path).policy() == "require-declared"  # persisted in the ledger
    junk = _garbage(tmp_path / "junk.csv")
    with pytest.raises(ParameterError, match="refused before any record was read.*require-declared"):
        dpgeo.heat(str(junk), ledger=ledger, **HEAT)
    # a copy the fingerprint cannot know is refused too, unless it names its dataset
    with pytest.raises(ParameterError, match="refused before any record was read"):
        dpgeo.heat(str(files["shuffled csv"]), ledger=ledger, **HEAT)
    assert dpgeo.heat(str(files["shuffled csv"]), ledger=ledger, dataset="stops", **HEAT).metadata["dataset"] == "stops"
    assert dpgeo.heat(str(files["declared"]), ledger=ledger, **HEAT).metadata["dataset"] == "stops"
    with pytest.raises(ParameterError, match="refused before any record was read"):  # points in memory
        dpgeo.heat(([-93.25], [44.95], "EPSG:4326"), ledger=ledger, **HEAT)
    assert ledger.datasets() == ["stops"]  # nothing recorded for what was refused


def test_strict_policy_cli_one_line_exit_2_and_the_unattended_default(files, tmp_path, capsys):
    led = str(tmp_path / "l.sqlite")
    other = files["other"]  # a readable point file of other records: were it read, the run would succeed
    out = tmp_path / "out.gpkg"
    assert main(["budget", "declare", "stops", "--file", str(files["declared"]), "--total", "2", "--ledger", led]) == 0
    capsys.readouterr()
    # the default: an unattended run must be charged to a declared dataset
    assert main(["heat", str(other), "-o", str(out), *CLI_HEAT, "--ledger", led, "--unattended"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "refused before any record was read" in err[0] and not out.exists()
    assert Ledger(led).datasets() == ["stops"]
    # an attended run is charged to the file's own key, unlimited, and told so
    assert main(["heat", str(other), "-o", str(out), *CLI_HEAT, "--ledger", led]) == 0
    assert "nothing limits" in capsys.readouterr().err
    # the owner may require declared datasets everywhere (persisted in the ledger)
    assert main(["budget", "policy", "--require-declared", "--ledger", led]) == 0
    assert main(["heat", str(other), "-o", str(tmp_path / "b.gpkg"), *CLI_HEAT, "--ledger", led]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "require-declared" in err[0] and not (tmp_path / "b.gpkg").exists()
    assert main(["heat", str(files["declared"]), "-o", str(out), *CLI_HEAT, "--ledger", led, "--unattended"]) == 0
    # or allow undeclared unattended runs
    assert main(["budget", "policy", "--allow-undeclared", "--ledger", led]) == 0
    assert main(["heat", str(other), "-o", str(tmp_path / "c.gpkg"), *CLI_HEAT, "--ledger", led, "--unattended"]) == 0


def test_no_declared_dataset_no_refusal(files, tmp_path):
    """The policy bites once any dataset is declared: a fresh ledger takes any input (and warns)."""
    ledger = Ledger(tmp_path / "l.sqlite")
    ledger.set_policy("require-declared")
    with pytest.warns(BudgetWarning, match="nothing limits"):
        dpgeo.heat(str(files["other"]), ledger=ledger, **HEAT)


def test_copies_printed_with_fewer_decimals_or_in_another_crs_are_recognised():
    """Rounding to 10^-5 degree through 10^-6: a copy printed with 6 decimals keeps > 99% of the records, with 5
    decimals > 90% (measured: 0.996 and 0.949 on the sample); a reprojected copy all of them."""
    import geopandas as gpd
    from pyproj import CRS, Transformer

    g = gpd.read_file(SAMPLE_POINTS)
    x, y = g.geometry.x.to_numpy(), g.geometry.y.to_numpy()
    key = bytes(16)

    def sketch(a, b):
        s = RecordSketch(key)
        s.add_lonlat(a, b)
        return s

    full = sketch(x, y)
    assert containment(sketch(np.round(x, 6), np.round(y, 6)), full) > 0.99
    assert containment(sketch(np.round(x, 5), np.round(y, 5)), full) > RECORDS_MATCH
    utm = RecordSketch(key)
    utm.add_points(*Transformer.from_crs(4326, 26915, always_xy=True).transform(x, y), CRS.from_epsg(26915))
    assert containment(utm, full) == 1.0


def test_records_match_threshold_is_above_what_unrelated_months_share():
    """Two months of the sample share ~40-60% of their rounded locations (the same intersections): the
    threshold must stay above that, or a new month would be taken for an old one."""
    import geopandas as gpd

    g = gpd.read_file(SAMPLE_POINTS)
    month = g["date"].str[5:7]
    key = bytes(16)
    a, b = RecordSketch(key), RecordSketch(key)
    a.add_lonlat(g.geometry.x[month == "06"], g.geometry.y[month == "06"])
    b.add_lonlat(g.geometry.x[month == "07"], g.geometry.y[month == "07"])
    assert max(containment(a, b), containment(b, a)) < RECORDS_MATCH - 0.2


def test_a_4kb_file_with_its_last_row_dropped_is_the_declared_dataset(tmp_path):
    """The issue's case: a 4 KB declared CSV and the same file less its last row (exact containment below k)."""
    rng = np.random.default_rng(5)
    rows = [f"{float(a)!r},{float(b)!r}" for a, b in zip(rng.uniform(-93.3, -93.2, 110), rng.uniform(44.9, 45.0, 110))]
    full, less = tmp_path / "full.csv", tmp_path / "less.csv"
    full.write_text("lon,lat\n" + "\n".join(rows) + "\n")
    less.write_text("lon,lat\n" + "\n".join(rows[:-1]) + "\n")
    assert 3500 < full.stat().st_size < 4500
    ledger = Ledger(tmp_path / "l.sqlite")
    ledger.declare("small", [full], total_epsilon=1)
    with pytest.warns(BudgetWarning, match="charged to the declared dataset 'small': the input holds"):
        assert dpgeo.heat(str(less), ledger=ledger, **HEAT).metadata["dataset"] == "small"


@pytest.mark.postgres
def test_a_copy_is_recognised_on_a_postgresql_ledger_whose_key_lives_in_the_database(files, postgres_db, tmp_path):
    """The record sketch on a ledger several replicas share: its key is one row of the ledger's database (every
    replica sketches under it), and ``budget migrate`` brings a SQLite ledger's key along with its sketches."""
    from dpgeo.budget.sketches import load_key

    server, db = postgres_db
    url = server.url(db, host="localhost")
    src = tmp_path / "l.sqlite"
    Ledger(src).declare("stops", [files["declared"]], total_epsilon=1)
    ledger = Ledger(url)
    ledger.copy_from(src)
    assert ledger.record_key() == load_key(src, create=False) == Ledger(url).record_key()
    with pytest.warns(BudgetWarning, match="charged to the declared dataset 'stops'"):
        res = dpgeo.heat(str(files["shuffled csv"]), ledger=ledger, **HEAT)
    assert res.metadata["dataset"] == "stops" and ledger.budget("stops").spent_epsilon == 0.5
