"""Heat layers, H3 cells and noise-aware Gi* hot spots (dpgeo.heat, dpgeo.hotspots)."""

import math
import warnings

import numpy as np
import pytest
import shapely
from scipy import stats

import dpgeo
from dpgeo.domain import StudyArea
from dpgeo.h3cells import H3Cells
from dpgeo.mechanisms.hotspots import getis_ord, square_band_sums
from dpgeo.noise import NoiseSource, discrete_laplace_q, sample_discrete_laplace

h3 = pytest.importorskip("h3")

NYC = (-74.05, 40.55, -73.75, 40.85)


def _h3_pos(cells, lon, lat, res):
    ref = np.array([int(h3.str_to_int(h3.latlng_to_cell(a, b, res))) for a, b in zip(lat, lon)], dtype=np.uint64)
    return cells._position(ref)


@pytest.mark.parametrize("bbox,res", [(NYC, 9), ((10, 60, 12, 61), 8), ((-1, -1, 1, 1), 6), ((-20, 70, 20, 75), 4),
                                      ((140, -40, 150, -35), 11)])
def test_h3_index_is_h3s_own(bbox, res):
    """The numpy indexer gives h3's latlng_to_cell for random points and for points a hair from cell edges."""
    area = StudyArea.from_bbox(bbox)
    if res == 11:  # a small area at a fine resolution
        area = StudyArea.from_bbox((145.0, -37.9, 145.02, -37.88))
    cells = H3Cells(area, res)
    rng = np.random.default_rng(res)
    b = cells._ll.bounds
    lon = rng.uniform(b[0], b[2], 20000)
    lat = rng.uniform(b[1], b[3], 20000)
    # vertices of cells, nudged by 1e-11 degrees: on the edges between cells
    some = cells.cells[rng.integers(0, cells.n_cells, 300)]
    verts = np.array([v for c in some for v in h3.cell_to_boundary(h3.int_to_str(int(c)))])
    nudge = rng.normal(0, 1e-11, verts.shape)
    lat = np.r_[lat, verts[:, 0] + nudge[:, 0]]
    lon = np.r_[lon, verts[:, 1] + nudge[:, 1]]
    ok = (lon >= cells._bbox[0]) & (lon <= cells._bbox[2]) & (lat >= cells._bbox[1]) & (lat <= cells._bbox[3])
    got = cells.cell_of(lon[ok], lat[ok])
    assert np.array_equal(got, _h3_pos(cells, lon[ok], lat[ok], res))


def test_h3_cells_cover_the_study_area_and_drop_points_outside():
    """Every point inside a polygon study area is counted in a cell of the set; points outside are dropped."""
    poly = shapely.Polygon([(-74.0, 40.6), (-73.8, 40.62), (-73.85, 40.8), (-73.97, 40.75)])
    area = StudyArea.from_geometry(poly, "EPSG:4326")
    cells = H3Cells(area, 9)
    rng = np.random.default_rng(1)
    lon, lat = rng.uniform(-74.05, -73.75, 200000), rng.uniform(40.55, 40.85, 200000)
    inside = shapely.intersects_xy(poly, lon, lat)
    a = cells.assign(lon, lat, return_mask=True)
    assert np.array_equal(a.mask, inside)
    assert np.array_equal(a.cell_id, _h3_pos(cells, lon[inside], lat[inside], 9))
    # every cell of the set intersects the study area (a little tolerance for straight vs geodesic edges)
    polys = cells.polygons(np.arange(cells.n_cells), crs=4326)
    assert shapely.dwithin(polys, poly, 1e-6).all()


def test_h3_cells_across_the_antimeridian_are_single_hexagons():
    """A study area across ±180 (given in a projected CRS): cells on both sides, each drawn as one hexagon."""
    area = StudyArea.from_bbox((-20000, -20000, 20000, 20000), "+proj=merc +lon_0=180 +datum=WGS84 +units=m")
    cells = H3Cells(area, 7)
    strings = cells.h3_strings(np.arange(cells.n_cells))
    lons = np.array([h3.cell_to_latlng(s)[1] for s in strings])
    assert (lons > 179).any() and (lons < -179).any()
    polys = cells.polygons(np.arange(cells.n_cells))
    areas = shapely.area(polys)
    true = np.array([h3.cell_area(s, "m^2") for s in strings])
    assert np.all(np.abs(areas / true - 1) < 0.02)  # each one hexagon of its own area: none spans the world
    rng = np.random.default_rng(2)
    lon = np.r_[rng.uniform(179.9, 180, 5000), rng.uniform(-180, -179.9, 5000)]
    lat = rng.uniform(-0.1, 0.1, 10000)
    a = cells.assign(lon, lat)
    assert a.n_in == 10000
    assert np.array_equal(a.cell_id, _h3_pos(cells, lon, lat, 7))


@pytest.mark.parametrize("bbox,res", [(NYC, 9), ((10, 60, 11, 60.5), 8), ((-20, 70, 20, 75), 4),
                                      ((25.0, 45.0, 45.0, 60.0), 3), ((-1, -1, 1, 1), 5)])
def test_h3_hexagons_are_h3s_boundaries(bbox, res):
    """The numpy hexagons are h3's cell_to_boundary (to 1e-11 degrees, corners in order), the cells left to h3ronpy
    (across a face edge, pentagons) are few and drawn by it, and neighbours share their corners exactly."""
    cells = H3Cells(StudyArea.from_bbox(bbox), res)
    ids = np.arange(cells.n_cells)
    lon, lat, ok = cells._corners(ids)
    assert ok.mean() > 0.8
    rng = np.random.default_rng(res)
    for i in rng.choice(np.flatnonzero(ok), min(400, int(ok.sum())), replace=False):
        ref = np.array(h3.cell_to_boundary(h3.int_to_str(int(cells.cells[i]))))
        mine = np.column_stack([lat[i], cells.wrap_lon(lon[i])])
        shift = int(np.argmin(np.abs(mine - ref[0]).max(axis=1)))
        ring = np.roll(mine, -shift, axis=0)
        if np.abs(ring - ref).max() > 1e-11:  # the other orientation
            ring = np.roll(mine[::-1], -(5 - shift), axis=0)
        assert np.abs(ring - ref).max() < 1e-11, (i, np.abs(ring - ref).max())
    polys = cells.polygons(ids, crs=4326)
    assert shapely.is_valid(polys).all()
    left = np.flatnonzero(~ok)
    if left.size:  # the rest: h3ronpy's polygons, pentagons with five corners
        want = cells._polygons_h3ronpy(left, None)
        assert all(shapely.equals_exact(a, b, 1e-9) for a, b in zip(polys[left], want))
    # neighbours share corners bit for bit: the union of a block of hexagons has no slivers
    block = ids[ok][:2000]
    merged = shapely.union_all(cells.polygons(block))
    assert merged.area == pytest.approx(shapely.area(cells.polygons(block)).sum(), rel=1e-9)


def test_h3_cells_across_the_antimeridian_in_geojson_and_the_map(tmp_path):
    """Hexagons across ±180 are one hexagon in the working CRS and cut at the antimeridian in GeoJSON and the HTML
    map (RFC 7946): no feature spans the world, and the pieces add up to the cells' areas."""
    from pyproj import Geod

    area = StudyArea.from_bbox((-30000, -20000, 30000, 20000), "+proj=merc +lon_0=180 +datum=WGS84 +units=m")
    rng = np.random.default_rng(5)
    lon = np.r_[rng.uniform(179.8, 180, 3000), rng.uniform(-180, -179.8, 3000)]
    lat = rng.uniform(-0.15, 0.15, 6000)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = dpgeo.heat((lon, lat, "EPSG:4326"), epsilon=1.0, domain=area, h3_resolution=7, seed=1, ledger=False)
    crossing = {s for s in r.layer["h3"] if np.ptp([v[1] for v in h3.cell_to_boundary(s)]) > 180}
    assert len(crossing) >= 10  # cells that straddle the antimeridian
    r.to_file(tmp_path / "heat.geojson")
    r.to_file(tmp_path / "heat.html")
    import json

    fc = json.loads((tmp_path / "heat.geojson").read_text())
    page = (tmp_path / "heat.html").read_text()
    embedded = json.loads(page.split('id="dpgeo-layer">', 1)[1].split("</script>", 1)[0])
    for doc in (fc, embedded):
        geoms = shapely.from_geojson([json.dumps(f["geometry"]) for f in doc["features"]])
        b = shapely.bounds(shapely.get_parts(geoms))
        assert (b[:, 0] >= -180).all() and (b[:, 2] <= 180).all() and (b[:, 2] - b[:, 0] < 1).all()
        cut = {f["properties"]["h3"] for f, g in zip(doc["features"], geoms) if shapely.get_num_geometries(g) == 2}
        assert cut == crossing
        geod = Geod(ellps="WGS84")
        for f, g in zip(doc["features"], geoms):
            if f["properties"]["h3"] in crossing:  # the pieces make up the whole hexagon
                ring = np.array(h3.cell_to_boundary(f["properties"]["h3"]))[:, ::-1]
                ring[:, 0] = np.where(ring[:, 0] < 0, ring[:, 0] + 360, ring[:, 0])
                whole = abs(geod.polygon_area_perimeter(ring[:, 0], ring[:, 1])[0])
                got = sum(abs(geod.geometry_area_perimeter(p)[0]) for p in shapely.get_parts(g))
                assert got == pytest.approx(whole, rel=1e-3)


@pytest.mark.parametrize("kw", [dict(h3_resolution=8), dict(cell_m=400.0)])
def test_heat_releases_every_cell_with_the_exact_noise_law(kw):
    """dp_count_raw - true count is discrete Laplace with q = exp(-ε/Δ) (χ², false failure 1e-6), not 1.3× wider."""
    rng = np.random.default_rng(3)
    lon, lat = rng.uniform(NYC[0], NYC[2], 30000), rng.uniform(NYC[1], NYC[3], 30000)
    eps, sens = 0.7, 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = dpgeo.heat((lon, lat, "EPSG:4326"), epsilon=eps, domain=NYC, max_points_per_record=sens, seed=11,
                       ledger=False, **kw)
    grid = r.cells.grid
    exact = np.bincount(grid.assign(*(_to_grid(grid, lon, lat))).cell_id, minlength=grid.nx * grid.ny)
    noise = r.layer["dp_count_raw"].to_numpy() - exact[r.layer["cell_id"].to_numpy()]
    assert len(r.layer) == grid.n_cells and r.metadata["histogram"] == "dense"
    q = math.exp(-eps / sens)
    assert _chi2_p(noise, q) > 1e-6
    assert _chi2_p(noise, q ** (1 / 1.3)) < 1e-6
    assert (r.layer["dp_count"] == np.maximum(r.layer["dp_count_raw"], 0)).all()


def _to_grid(grid, lon, lat):
    if getattr(grid, "kind", None) == "h3":
        return lon, lat
    from pyproj import Transformer

    return Transformer.from_crs(4326, grid.area.crs, always_xy=True).transform(lon, lat)


def _chi2_p(noise, q):
    k = np.arange(0, 12)
    p = np.r_[(1 - q) / (1 + q), 2 * (1 - q) / (1 + q) * q ** k[1:]]
    p = np.r_[p, 1 - p.sum()]
    obs = np.bincount(np.minimum(np.abs(noise), 12), minlength=13)
    return stats.chisquare(obs, p * noise.size).pvalue


def test_heat_is_charged_once_before_the_data_is_read(tmp_path):
    from dpgeo.budget import Ledger

    led = Ledger(tmp_path / "ledger.sqlite")
    led.set_total("d", 1.0)
    rng = np.random.default_rng(4)
    pts = (rng.uniform(NYC[0], NYC[2], 1000), rng.uniform(NYC[1], NYC[3], 1000), "EPSG:4326")
    r = dpgeo.hotspots(pts, epsilon=0.6, domain=NYC, h3_resolution=7, ledger=led, dataset="d")
    assert r.metadata["differentially_private"] and r.metadata["dataset_spent_epsilon"] == pytest.approx(0.6)
    csv = tmp_path / "points.csv"
    csv.write_text("lon,lat\n-73.9,40.7\n")
    before = csv.stat().st_atime_ns, csv.read_bytes()
    with pytest.raises(dpgeo.errors.BudgetExceededError):
        dpgeo.heat(str(csv), epsilon=0.6, domain=NYC, cell_m=500, ledger=led, dataset="d")
    b = led.budget("d")  # one release each: the refused one left nothing
    assert float(b.spent_epsilon) == pytest.approx(0.6) and [r.mechanism for r in b.releases] == ["dp-hotspots"]
    assert csv.read_bytes() == before[1]


@pytest.mark.slow
@pytest.mark.parametrize("lam", [0.3, 4.0])
def test_no_more_than_5_percent_false_hot_spots_on_uniform_data(lam):
    """Uniform points (no hot spot): cells called hot at 95% stay below 5% at every ε; ignoring the noise does not.

    Cells on a lattice of step 3 have disjoint 3×3 neighbourhoods, so their calls are independent but for the
    shared global statistics; the test is calibrated when each is hot with probability at most
    0.025 + W²/(2n) (W = 9, n = 10⁴; the with/without-replacement gap). Over 4 runs of 1,156 such cells,
    Pr[Binomial(4624, 0.0291) ≥ 5%] < 1e-11 is the false-failure rate.
    """
    ny = nx = 100
    mask = np.ones((ny, nx), bool)
    offs = np.array([(dx, dy) for dx in (-1, 0, 1) for dy in (-1, 0, 1)])
    sub = np.zeros((ny, nx), bool)
    sub[1::3, 1::3] = True
    sub = sub.ravel()
    m = int(sub.sum()) * 4
    bound = stats.binom.sf(math.ceil(0.05 * m) - 1, m, 0.025 + 81 / 2e4)
    assert bound < 1e-11
    rng = np.random.default_rng(int(lam * 10))
    src = NoiseSource(seed=5)
    for eps in (0.05, 0.3, 1.0, 3.0, 10.0):
        q = discrete_laplace_q(eps, 1)
        hot = naive_hot = 0
        for _ in range(4):
            x = rng.poisson(lam, size=(ny, nx))
            y = x + sample_discrete_laplace(src, ny * nx, epsilon=eps).reshape(ny, nx)
            s, w = square_band_sums(y, mask, offs)
            res = getis_ord(y.ravel(), s.ravel(), w.ravel(), q=q)
            hot += int((res.gi_bin[sub] >= 2).sum())
            # a test that ignored the noise: normal null with the true counts' variance only
            zn = (s.ravel() - y.mean() * w.ravel()) / np.sqrt(max(res.s2_true, 1e-9) * (1e4 * 9 - 81) / (1e4 - 1))
            naive_hot += int((zn[sub] > 1.96).sum())
        assert hot / m <= 0.05, (eps, hot / m)
        if eps <= 0.3:
            assert naive_hot / m > 0.05


def test_gi_star_on_exact_counts_is_esdas():
    """Classic Gi* (q=None) equals PySAL's esda.G_Local(star=True) z-scores with binary weights."""
    esda = pytest.importorskip("esda")
    libpysal = pytest.importorskip("libpysal")
    rng = np.random.default_rng(6)
    y = rng.poisson(3, size=(12, 15)).astype(float)
    y[3:6, 4:7] += 6
    w = libpysal.weights.lat2W(12, 15, rook=False)
    w.transform = "B"
    g = esda.G_Local(y.ravel(), w, star=True, transform="B", permutations=0)
    s, c = square_band_sums(y, np.ones_like(y, bool), np.array([(dx, dy) for dx in (-1, 0, 1) for dy in (-1, 0, 1)]))
    res = getis_ord(y.ravel(), s.ravel(), c.ravel())
    assert np.allclose(res.gi_z, g.Zs, atol=1e-9)


def test_hotspots_find_a_planted_cluster_and_fdr_is_stricter():
    rng = np.random.default_rng(7)
    lon = np.r_[rng.uniform(NYC[0], NYC[2], 20000), rng.normal(-73.9, 0.01, 3000)]
    lat = np.r_[rng.uniform(NYC[1], NYC[3], 20000), rng.normal(40.7, 0.01, 3000)]
    kw = dict(epsilon=1.0, domain=NYC, h3_resolution=8, seed=2, ledger=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = dpgeo.hotspots((lon, lat, "EPSG:4326"), **kw)
        f = dpgeo.hotspots((lon, lat, "EPSG:4326"), fdr=True, **kw)
    hot = r.layer[r.layer["gi_bin"] == 3]
    from pyproj import Transformer

    cx, cy = Transformer.from_crs(4326, r.layer.crs, always_xy=True).transform(-73.9, 40.7)
    assert hot.geometry.union_all().buffer(1).contains(shapely.Point(cx, cy))
    assert (f.layer["gi_bin"] != 0).sum() <= (r.layer["gi_bin"] != 0).sum()
    assert set(r.layer["hotspot"]) <= set(dpgeo.mechanisms.hotspots.HOTSPOT_CLASSES.values())
    assert r.layer["h3"].str.len().eq(15).all()
    for key in ("hotspot_test", "hotspot_neighbourhood", "hotspot_fdr", "clamp", "layer_cells", "noise_q"):
        assert key in r.metadata


def _check_bands(r, n_asked):
    """Bands: valid, disjoint, inside the study area, nested limits, the released counts shared out."""
    layer, md = r.layer, r.metadata
    assert 1 <= len(layer) == md["bands"] <= n_asked and md["bands_requested"] == n_asked
    assert layer["band"].tolist() == list(range(1, len(layer) + 1))
    g = layer.geometry.values
    assert shapely.is_valid(g).all() and (shapely.area(g) > 0).all()
    assert shapely.area(g).sum() == pytest.approx(shapely.union_all(g).area, rel=1e-9)  # no overlaps
    area = r.cells.grid.area.polygon
    assert shapely.difference(shapely.union_all(g), area).area <= 1e-9 * area.area  # clipped to the study area
    lo, hi = layer["density_low"].to_numpy(), layer["density_high"].to_numpy()
    assert np.all(np.diff(lo) > 0) and np.array_equal(hi[:-1], lo[1:]) and np.isnan(hi[-1])
    # every step between limits is at least twice the smoothed noise's standard deviation
    levels = np.array(md["bands_levels_per_cell"])
    assert np.all(np.diff(levels) >= md["bands_min_step_per_cell"] * (1 - 1e-12))
    # each band's dp_count is the released count of its cells (those whose smoothed count is in its limits)
    from dpgeo.mechanisms.heat import released_vector, smooth

    y = released_vector(r.cells).astype(float)
    sm, _ = smooth(r.cells.grid, y, md["bands_bandwidth_m"])
    band = np.searchsorted(np.r_[levels, np.inf], sm, side="right")
    totals = np.array([y[band == b].sum() for b in range(1, len(layer) + 1)])
    assert np.array_equal(layer["dp_count"].to_numpy(), np.maximum(np.rint(totals), 0).astype(int))
    assert np.array_equal(layer["n_cells"].to_numpy(), np.bincount(band, minlength=len(layer) + 1)[1:])
    # in about equal shares (the limits split the smoothed count equally)
    counts = layer["dp_count"].to_numpy()
    share = counts / counts.sum()
    assert share.min() > 0.4 / len(layer) and share.max() < 2.5 / len(layer), share


def test_density_bands_share_out_the_released_counts(tmp_path):
    rng = np.random.default_rng(8)
    lon = np.r_[rng.uniform(NYC[0], NYC[2], 5000), rng.normal(-73.9, 0.02, 5000)]
    lat = np.r_[rng.uniform(NYC[1], NYC[3], 5000), rng.normal(40.7, 0.02, 5000)]
    for kw in (dict(cell_m=500.0), dict(h3_resolution=8)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = dpgeo.heat((lon, lat, "EPSG:4326"), epsilon=1.0, domain=NYC, bands=4, seed=3, ledger=False, **kw)
        _check_bands(r, 4)
        for ext in ("gpkg", "geojson", "html", "png"):
            path = r.to_file(tmp_path / f"b.{ext}")
            assert dpgeo.read_layer_metadata(path)["bands"] == len(r.layer)


def test_density_bands_of_more_than_1e5_cells():
    """Bands of a large release (square and H3 cells, over 10^5 each) are valid, disjoint and share out the counts
    (their time is in benchmarks/bench_heat.py)."""
    rng = np.random.default_rng(12)
    box = (-74.02, 40.6, -73.82, 40.8)
    n = 60000
    lon = np.r_[rng.uniform(box[0], box[2], n), rng.normal(-73.95, 0.01, n), rng.normal(-73.88, 0.02, n)]
    lat = np.r_[rng.uniform(box[1], box[3], n), rng.normal(40.72, 0.01, n), rng.normal(40.68, 0.015, n)]
    for kw in (dict(h3_resolution=11), dict(cell_m=50.0)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = dpgeo.heat((lon, lat, "EPSG:4326"), epsilon=1.0, domain=box, bands=5, seed=4, ledger=False, **kw)
        assert r.metadata["n_cells"] > 100_000
        _check_bands(r, 5)


def test_sparse_heat_layers_hold_only_released_cells():
    rng = np.random.default_rng(9)
    pts = (rng.normal(-73.9, 0.01, 2000), rng.normal(40.7, 0.01, 2000), "EPSG:4326")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = dpgeo.heat(pts, epsilon=1.0, domain=NYC, h3_resolution=10, histogram="sparse", seed=1, ledger=False)
    assert r.metadata["histogram"] == "sparse" and len(r.layer) < r.metadata["n_cells"]
    assert (r.layer["dp_count_raw"] >= r.metadata["theta"]).all()
    with pytest.raises(dpgeo.ParameterError, match="dense"):
        dpgeo.hotspots(pts, epsilon=1.0, domain=NYC, h3_resolution=10, max_dense_cells=1000, ledger=False)
