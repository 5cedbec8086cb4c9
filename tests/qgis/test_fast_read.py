"""The plugin's fast read path: the library reads a point file itself when that equals QGIS's own reading.

Each test runs an algorithm twice where it matters, once as the user would
(the fast path when it applies) and once forced feature by feature, and
checks that the library receives exactly the same coordinates, CRS, person
identifiers (values, types and order) and that the log says the same, apart
from the line naming the reader. Inputs that the file reader cannot
reproduce (selections, filters, edits, a CRS changed in QGIS, multipoints,
empty points) must take the feature-by-feature path.
"""

from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.qgis

UTM15 = "EPSG:32615"
FAST = "with the fast file reader"
SLOW = "feature by feature"
#: How the log labels every exact count about the private data.
EXACT = " (exact, not private — do not publish)"


# -- a stand-in for the library's mechanisms ----------------------------------------------------

class _Result:
    def __init__(self, metadata):
        import geopandas as gpd
        import shapely

        self.layer = gpd.GeoDataFrame({"cluster_id": np.array([1], dtype=np.int64)},
                                      geometry=[shapely.MultiPolygon([shapely.box(478000, 4980000, 478500,
                                                                                  4980500)])], crs=UTM15)
        self.metadata = metadata
        self.diagnostics = {}

    def summary(self):
        return "fake mechanism"


class Recorder:
    """Stands in for dpgeo.dbscan_spans / dpgeo.wavecluster; keeps what it was given."""

    def __init__(self):
        self.calls = []

    def __call__(self, points, **kwargs):
        self.calls.append((points, kwargs))
        return _Result({"mechanism": "fake", "epsilon": kwargs["epsilon"], "differentially_private": True,
                        "not_private_reasons": [], "working_crs": UTM15})

    def last(self):
        (x, y, crs), kwargs = self.calls[-1]
        person = kwargs.get("person")
        return x, y, crs, None if person is None else list(person), kwargs


@pytest.fixture
def spans(monkeypatch, plugin):
    import dpgeo

    rec = Recorder()
    monkeypatch.setattr(dpgeo, "dbscan_spans", rec, raising=False)
    return rec


@pytest.fixture
def common(plugin):
    import dpgeo_qgis.reading as module

    return module


@pytest.fixture
def layers(qgis_app):
    """``layers(uri)``: a QgsVectorLayer of the ogr provider, deleted after the test."""
    from qgis.core import QgsVectorLayer
    from qgis.PyQt import sip

    made = []

    def make(uri, provider="ogr"):
        layer = QgsVectorLayer(uri, "points", provider)
        assert layer.isValid(), uri
        made.append(layer)
        return layer

    yield make
    for layer in made:
        if not sip.isdeleted(layer) and sip.ispyowned(layer):
            sip.delete(layer)


@pytest.fixture
def points_copy(layers, sample_points, tmp_path):
    """The sample layer from a copy of its GeoPackage: editing or filtering a GeoPackage layer in QGIS
    rewrites the file's header, and the checked-in sample must stay as it is."""
    import shutil

    path, name = sample_points
    copy = tmp_path / "police_stops.gpkg"
    shutil.copyfile(path, copy)
    return layers(f"{copy}|layername={name}")


def _params(layer, **extra):
    p = {"INPUT": layer, "EPSILON": 0.5, "RADIUS": 150, "MIN_POINTS": 30,
         "STUDY_AREA_EXTENT": "-93.34,-93.19,44.88,45.06 [EPSG:4326]", "OUTPUT": "TEMPORARY_OUTPUT"}
    p.update(extra)
    return p


def _feedback():
    from qgis.core import QgsProcessingFeedback

    class Feedback(QgsProcessingFeedback):
        def __init__(self):
            super().__init__()
            self.infos = []

        def pushInfo(self, info):  # noqa: N802
            self.infos.append(info)
            super().pushInfo(info)

    return Feedback()


def _refuse(value, layer):
    from dpgeo_qgis.reading import NoFastRead

    raise NoFastRead("forced by the test")


def _run(processing, layer, *, slow=False, **extra):
    """Run dpgeo:dbscanspans (with ``slow``, the fast path refused) and return the log's info lines."""
    import dpgeo_qgis.reading as common

    fb = _feedback()
    with pytest.MonkeyPatch.context() as mp:  # its own: undoing it leaves the test's other patches alone
        if slow:
            mp.setattr(common, "fast_read_target", _refuse)
        processing.run("dpgeo:dbscanspans", _params(layer, **extra), feedback=fb)
    return fb.infos


def _same_apart_from_reader(fast_infos, slow_infos):
    """The two runs' logs equal each other once the lines naming the reader are dropped."""
    def strip(infos):
        # (the "Results:" line that Processing adds names a fresh temporary output)
        return [i for i in infos if not i.startswith(("Read ", "Reading the point layer", "Results:"))]

    assert strip(fast_infos) == strip(slow_infos)


def _assert_identical(a, b):
    """Two recorded library calls: same coordinates (bit for bit, same order), CRS and person values."""
    xa, ya, ca, pa, _ = a
    xb, yb, cb, pb, _ = b
    assert xa.dtype == xb.dtype == np.float64
    assert np.array_equal(xa, xb) and np.array_equal(ya, yb)
    assert ca == cb
    if pa is None or pb is None:
        assert pa is pb
    else:
        assert pa == pb
        assert [type(v) for v in pa] == [type(v) for v in pb]


def _fast_and_slow(processing, spans, layer, **extra):
    fast_infos = _run(processing, layer, **extra)
    fast = spans.last()
    slow_infos = _run(processing, layer, slow=True, **extra)
    slow = spans.last()
    _assert_identical(fast, slow)
    _same_apart_from_reader(fast_infos, slow_infos)
    return fast, fast_infos, slow_infos


# -- writing test files -------------------------------------------------------------------------------

def _write(path, driver, rows, *, layer="pts", geom_type="Point", field_type="int", fids=None, epsg=4326):
    """A point file from ``(wkt or None, person or None)`` rows, written with GDAL (field ``pid``)."""
    from osgeo import ogr, osr

    ds = ogr.GetDriverByName(driver).CreateDataSource(str(path))
    srs = osr.SpatialReference()
    srs.ImportFromEPSG(epsg)
    srs.SetAxisMappingStrategy(osr.OAMS_TRADITIONAL_GIS_ORDER)
    kind = {"Point": ogr.wkbPoint, "MultiPoint": ogr.wkbMultiPoint, "PointZ": ogr.wkbPoint25D}[geom_type]
    lyr = ds.CreateLayer(layer, srs, kind)
    lyr.CreateField(ogr.FieldDefn("pid", {"int": ogr.OFTInteger64, "str": ogr.OFTString,
                                          "real": ogr.OFTReal}[field_type]))
    for i, (wkt, pid) in enumerate(rows):
        f = ogr.Feature(lyr.GetLayerDefn())
        if fids is not None:
            f.SetFID(fids[i])
        if wkt is not None:
            f.SetGeometry(ogr.CreateGeometryFromWkt(wkt))
        if pid is not None:
            f.SetField("pid", pid)
        assert lyr.CreateFeature(f) == 0
    ds = None
    return str(path)


def _rows(n=400, seed=3, null_geometry=(), null_person=(), persons=12, as_text=False):
    rng = np.random.default_rng(seed)
    lon = -93.34 + 0.15 * rng.random(n)
    lat = 44.88 + 0.18 * rng.random(n)
    pid = rng.integers(0, persons, n)
    rows = []
    for i in range(n):
        wkt = None if i in null_geometry else f"POINT ({lon[i]!r} {lat[i]!r})"
        who = None if i in null_person else (f"p{pid[i]}" if as_text else int(pid[i]))
        rows.append((wkt, who))
    return rows


# -- the sample GeoPackage ------------------------------------------------------------------------------

def test_sample_geopackage_takes_the_fast_path_and_equals_the_slow_one(spans, processing_module, points_layer):
    (x, y, crs, _, kwargs), fast_infos, slow_infos = _fast_and_slow(processing_module, spans,
                                                                      points_layer)
    n = points_layer.featureCount()
    assert x.size == n and crs == "EPSG:4326" and "person" not in kwargs
    assert f"Read {n} points {FAST}.{EXACT}" in fast_infos
    assert f"Read {n} points {SLOW}.{EXACT}" in slow_infos
    assert "Reading the point layer feature by feature: forced by the test." in slow_infos
    # in the layer's own (fid) order
    assert np.array_equal(x, [f.geometry().asPoint().x() for f in points_layer.getFeatures()])


def test_sample_geopackage_given_as_a_path_string(spans, processing_module, sample_points):
    path, name = sample_points
    fast_infos = _run(processing_module, f"{path}|layername={name}")
    assert any(FAST in i for i in fast_infos)
    x = spans.last()[0]
    # and a file name without a layer name: the GeoPackage has only one layer
    _run(processing_module, path)
    assert np.array_equal(spans.last()[0], x)


@pytest.mark.parametrize("field", ["precinct", "neighborhood"])
def test_person_field_through_the_fast_path(spans, processing_module, points_layer, field):
    (x, _, _, person, kwargs), fast_infos, _ = _fast_and_slow(processing_module, spans, points_layer,
                                                              PERSON_FIELD=field, MAX_POINTS_PER_PERSON=3)
    assert any(FAST in i for i in fast_infos)
    assert kwargs["person"].name == field and kwargs["person"].dtype == object
    assert kwargs["max_points_per_person"] == 3
    assert len(person) == x.size
    assert person == [f[field] for f in points_layer.getFeatures()]


def test_person_cap_gives_the_same_result_with_the_real_library(processing_module, points_layer, common):
    """With a test seed the random per-point keys of the person cap depend on the order of the points: the
    fast path must give the same clusters, point for point."""
    import dpgeo

    assert hasattr(dpgeo, "wavecluster")

    def run(slow):
        fb = _feedback()
        with pytest.MonkeyPatch.context() as mp:
            if slow:
                mp.setattr(common, "fast_read_target", _refuse)
            res = processing_module.run("dpgeo:wavecluster", _params(points_layer, GRID_SIZE=64, SEED=7,
                                                                     PERSON_FIELD="neighborhood",
                                                                     MAX_POINTS_PER_PERSON=2), feedback=fb)
        layer = res["OUTPUT"]
        rows = sorted((f["cluster_id"], f["dp_count"], round(f.geometry().area(), 3)) for f in layer.getFeatures())
        diag = [i for i in fb.infos if i.startswith("About the private input")]
        return rows, diag, fb.infos

    fast_rows, fast_diag, fast_infos = run(False)
    slow_rows, slow_diag, slow_infos = run(True)
    assert any(FAST in i for i in fast_infos) and not any(FAST in i for i in slow_infos)
    assert fast_rows == slow_rows and fast_rows
    assert fast_diag == slow_diag and fast_diag  # e.g. n_dropped_by_person_cap


# -- inputs that must be read feature by feature ----------------------------------------------------------

def test_selected_features_take_the_slow_path(spans, processing_module, points_layer):
    from qgis.core import QgsProcessingFeatureSourceDefinition, QgsProject

    QgsProject.instance().addMapLayer(points_layer, False)
    try:
        points_layer.selectByIds([f.id() for f in points_layer.getFeatures()][:321])
        infos = _run(processing_module, QgsProcessingFeatureSourceDefinition(points_layer.id(), True))
        assert "Reading the point layer feature by feature: selected features only." in infos
        assert f"Read 321 points feature by feature.{EXACT}" in infos
        # a feature limit, or a geometry check of its own on the input, are refused as well
        limited = QgsProcessingFeatureSourceDefinition(points_layer.id(), False, 100)
        infos = _run(processing_module, limited)
        assert "Reading the point layer feature by feature: a feature limit is set." in infos
        assert spans.last()[0].size == 100
        checked = QgsProcessingFeatureSourceDefinition(
            points_layer.id(), False, -1, QgsProcessingFeatureSourceDefinition.FlagOverrideDefaultGeometryCheck)
        infos = _run(processing_module, checked)
        assert any("feature by feature: the input has its own geometry check" in i for i in infos)
        # not selected-only: the same layer by id goes fast
        infos = _run(processing_module, QgsProcessingFeatureSourceDefinition(points_layer.id(), False))
        assert any(FAST in i for i in infos), infos
        assert spans.last()[0].size == points_layer.featureCount()
    finally:
        points_layer.removeSelection()
        QgsProject.instance().takeMapLayer(points_layer)


def test_subset_string_takes_the_slow_path(spans, processing_module, points_copy):
    n = points_copy.featureCount()
    assert points_copy.setSubsetString('"fid" % 2 = 0')
    infos = _run(processing_module, points_copy)
    assert "Reading the point layer feature by feature: the layer has a filter." in infos
    assert spans.last()[0].size == points_copy.featureCount() < n
    # a filter that keeps everything still goes feature by feature, with the same points
    assert points_copy.setSubsetString('"fid" >= 0')
    infos = _run(processing_module, points_copy)
    assert any("feature by feature: the layer has a filter" in i for i in infos)
    assert spans.last()[0].size == n


def test_uncommitted_edits_take_the_slow_path(spans, processing_module, points_copy):
    from qgis.core import QgsGeometry, QgsPointXY

    first = next(points_copy.getFeatures())
    assert points_copy.startEditing()
    try:
        infos = _run(processing_module, points_copy)
        assert "Reading the point layer feature by feature: the layer is in edit mode." in infos
        assert points_copy.changeGeometry(first.id(), QgsGeometry.fromPointXY(QgsPointXY(-93.3, 44.9)))
        _run(processing_module, points_copy)
        x, y = spans.last()[:2]
        assert x[0] == -93.3 and y[0] == 44.9  # the unsaved edit is what the library gets
    finally:
        points_copy.rollBack()
    infos = _run(processing_module, points_copy)
    assert any(FAST in i for i in infos)
    assert spans.last()[0][0] == first.geometry().asPoint().x()


def test_crs_changed_in_qgis_takes_the_slow_path(spans, processing_module, points_layer):
    from qgis.core import QgsCoordinateReferenceSystem

    points_layer.setCrs(QgsCoordinateReferenceSystem("EPSG:4269"))  # NAD83 instead of the file's WGS 84
    infos = _run(processing_module, points_layer)
    assert "Reading the point layer feature by feature: the layer's CRS in QGIS is not the one its file " \
           "declares." in infos
    assert spans.last()[2] == "EPSG:4269"  # QGIS's CRS is what the user asked for


def test_memory_layer_takes_the_slow_path(spans, processing_module, layers):
    from qgis.core import QgsFeature, QgsGeometry

    layer = layers("Point?crs=EPSG:4326", "memory")
    f = QgsFeature()
    f.setGeometry(QgsGeometry.fromWkt("Point(-93.25 44.97)"))
    layer.dataProvider().addFeatures([f])
    infos = _run(processing_module, layer)
    assert "Reading the point layer feature by feature: the layer is not a file (provider 'memory')." in infos


def test_reader_failure_falls_back_with_one_line(spans, processing_module, points_layer, monkeypatch):
    import dpgeo

    fast_infos = _run(processing_module, points_layer)
    fast = spans.last()

    def broken(*args, **kwargs):
        raise RuntimeError("disk on fire\nsecond line")

    monkeypatch.setattr(dpgeo, "read_points", broken)
    infos = _run(processing_module, points_layer)
    assert [i for i in infos if i.startswith("Reading the point layer")] == [
        "Reading the point layer feature by feature: the file reader failed: disk on fire."]
    _assert_identical(fast, spans.last())
    _same_apart_from_reader(fast_infos, infos)


# -- other formats, NULLs and order ---------------------------------------------------------------------------

@pytest.mark.parametrize("driver, name", [("GeoJSON", "pts.geojson"), ("ESRI Shapefile", "pts.shp"),
                                          ("FlatGeobuf", "pts.fgb"), ("GPKG", "pts.gpkg")])
@pytest.mark.parametrize("field_type", ["int", "str"])
def test_formats_with_null_geometries_and_persons(spans, processing_module, layers, tmp_path,
                                                  driver, name, field_type):
    rows = _rows(null_geometry={0, 7, 8, 100}, null_person={3, 8, 50, 51}, as_text=field_type == "str")
    path = _write(tmp_path / name, driver, rows, field_type=field_type)
    layer = layers(path + ("|layername=pts" if driver == "GPKG" else ""))
    n_null = sum(w is None for w, _ in rows)
    n_no_person = sum(w is not None and p is None for w, p in rows)
    if driver == "FlatGeobuf":  # the FlatGeobuf writer drops features without geometry
        n_null = 0
    # without a person field
    (x, _, crs, _, _), infos, _ = _fast_and_slow(processing_module, spans, layer)
    n_points = layer.featureCount() - n_null
    assert crs == "EPSG:4326" and x.size == n_points
    assert f"Read {n_points} points {FAST}.{EXACT}" in infos
    if n_null:
        assert f"{n_null} features without a point geometry were skipped.{EXACT}" in infos
    else:
        assert not any("without a point geometry" in i for i in infos)
    # with one
    (x, _, _, person, _), infos, _ = _fast_and_slow(processing_module, spans, layer,
                                                    PERSON_FIELD="pid", MAX_POINTS_PER_PERSON=2)
    assert f"Read {n_points - n_no_person} points {FAST}.{EXACT}" in infos
    assert f"{n_no_person} features without a person (NULL in 'pid') were skipped.{EXACT}" in infos
    assert all(type(p) is (str if field_type == "str" else int) for p in person)


def test_fid_order_is_kept(spans, processing_module, layers, tmp_path):
    """Features stored with scrambled fids: both readers go in fid order, so the person cap's keys match."""
    rows = _rows(n=60, persons=5)
    fids = np.random.default_rng(1).permutation(np.arange(1, 61) * 7).tolist()
    path = _write(tmp_path / "scrambled.gpkg", "GPKG", rows, fids=fids)
    layer = layers(f"{path}|layername=pts")
    (x, _, _, person, _), infos, _ = _fast_and_slow(processing_module, spans, layer,
                                                    PERSON_FIELD="pid", MAX_POINTS_PER_PERSON=1)
    assert any(FAST in i for i in infos)
    order = np.argsort(fids)
    assert person == [rows[i][1] for i in order]


def test_real_and_null_persons_in_a_geopackage(spans, processing_module, layers, tmp_path):
    rows = [("POINT (-93.25 44.97)", 1.5), ("POINT (-93.26 44.98)", None), ("POINT (-93.27 44.99)", -0.0),
            (None, 2.0), ("POINT (-93.28 45.0)", 1.5)]
    path = _write(tmp_path / "real.gpkg", "GPKG", rows, field_type="real")
    layer = layers(f"{path}|layername=pts")
    (x, _, _, person, _), infos, _ = _fast_and_slow(processing_module, spans, layer,
                                                    PERSON_FIELD="pid", MAX_POINTS_PER_PERSON=1)
    assert any(FAST in i for i in infos)
    assert x.tolist() == [-93.25, -93.27, -93.28] and person == [1.5, 0.0, 1.5]


def test_large_integer_persons_stay_distinct(spans, processing_module, layers, tmp_path):
    """64-bit identifiers with a NULL among them: not merged by a round trip through float64."""
    big = 2 ** 62
    rows = [("POINT (-93.25 44.97)", big), ("POINT (-93.26 44.98)", big + 1), ("POINT (-93.27 44.99)", None)]
    path = _write(tmp_path / "big.gpkg", "GPKG", rows)
    layer = layers(f"{path}|layername=pts")
    (_, _, _, person, _), infos, _ = _fast_and_slow(processing_module, spans, layer,
                                                    PERSON_FIELD="pid", MAX_POINTS_PER_PERSON=1)
    assert person == [big, big + 1]
    # the reader hands integers with NULLs on as float64, which cannot hold these: feature by feature
    assert "Reading the point layer feature by feature: the person field is not read as integers." in infos
    # without the NULL they arrive as int64, exactly
    layer = layers(_write(tmp_path / "big2.gpkg", "GPKG", rows[:2]) + "|layername=pts")
    (_, _, _, person, _), infos, _ = _fast_and_slow(processing_module, spans, layer,
                                                    PERSON_FIELD="pid", MAX_POINTS_PER_PERSON=1)
    assert person == [big, big + 1] and any(FAST in i for i in infos)


def test_empty_points_take_the_slow_path(spans, processing_module, layers, tmp_path):
    """QGIS passes an empty GeoPackage point on as a point with NaN coordinates (the library then drops it):
    the file reader drops it at once, so the counts would differ."""
    rows = [("POINT (-93.25 44.97)", 1), ("POINT EMPTY", 2), (None, 3), ("POINT (-93.26 44.98)", 4)]
    layer = layers(_write(tmp_path / "empty.gpkg", "GPKG", rows) + "|layername=pts")
    infos = _run(processing_module, layer)
    assert "Reading the point layer feature by feature: 1 features have an empty point or non-finite " \
           f"coordinates{EXACT}." in infos
    assert f"1 features without a point geometry were skipped.{EXACT}" in infos
    x = spans.last()[0]
    assert x.size == 3 and np.isnan(x[1])


def test_multipoints_take_the_slow_path(spans, processing_module, layers, tmp_path):
    single = [("MULTIPOINT ((-93.25 44.97))", 1), ("MULTIPOINT ((-93.26 44.98))", 2)]
    layer = layers(_write(tmp_path / "multi.gpkg", "GPKG", single, geom_type="MultiPoint") + "|layername=pts")
    infos = _run(processing_module, layer)
    assert "Reading the point layer feature by feature: the layer type is MultiPoint, not Point." in infos
    assert spans.last()[0].tolist() == [-93.25, -93.26]
    # a multipoint with two points in a layer declared as points: the file reader drops that record (a bad
    # record never stops it), which disagrees with QGIS's count, so the plugin reads feature by feature and
    # skips that record alone, as the library does: one record never decides whether the run succeeds
    rows = [("POINT (-93.25 44.97)", 1), ("MULTIPOINT ((-93.26 44.98), (-93.2 44.9))", 2)]
    layer = layers(_write(tmp_path / "mixed.gpkg", "GPKG", rows) + "|layername=pts")
    fb = _feedback()
    processing_module.run("dpgeo:dbscanspans", _params(layer), feedback=fb)
    assert spans.last()[0].tolist() == [-93.25]
    assert any(i.startswith("Reading the point layer feature by feature: ") for i in fb.infos)
    assert any("1 features without a point geometry" in i for i in fb.infos)


def test_missing_person_field_is_the_same_error(spans, processing_module, points_layer):
    from qgis.core import QgsProcessingException

    with pytest.raises(QgsProcessingException):
        processing_module.run("dpgeo:dbscanspans", _params(points_layer, PERSON_FIELD="nope",
                                                           MAX_POINTS_PER_PERSON=1))
    assert spans.calls == []


def test_setting_turns_the_fast_reader_off(spans, processing_module, points_layer, common):
    from qgis.core import QgsSettings

    settings = QgsSettings()
    settings.setValue(common.FAST_READ_SETTING, False)
    try:
        infos = _run(processing_module, points_layer)
    finally:
        settings.remove(common.FAST_READ_SETTING)
    assert "Reading the point layer feature by feature: the fast file reader is turned off (setting " \
           "dpgeo/fast_read)." in infos
    assert any(FAST in i for i in _run(processing_module, points_layer))


@pytest.mark.parametrize("driver, name", [("ESRI Shapefile", "utm.shp"), ("GPKG", "utm.gpkg")])
def test_projected_layers(spans, processing_module, layers, tmp_path, driver, name):
    """A layer in UTM metres (a shapefile's .prj is ESRI WKT): the CRS string handed on is QGIS's."""
    rng = np.random.default_rng(5)
    rows = [(f"POINT ({478000 + 3000 * a!r} {4980000 + 3000 * b!r})", int(c))
            for a, b, c in zip(rng.random(200), rng.random(200), rng.integers(0, 9, 200))]
    path = _write(tmp_path / name, driver, rows, epsg=26915)
    layer = layers(path + ("|layername=pts" if driver == "GPKG" else ""))
    (x, _, crs, person, _), infos, _ = _fast_and_slow(processing_module, spans, layer, PERSON_FIELD="pid",
                                                      MAX_POINTS_PER_PERSON=2)
    assert f"Read 200 points {FAST}.{EXACT}" in infos
    assert crs == "EPSG:26915" and person == [r[1] for r in rows]


def test_points_with_z(spans, processing_module, layers, tmp_path):
    rows = [("POINT Z (-93.25 44.97 250)", "a"), (None, "b"), ("POINT Z (-93.26 44.98 251)", None),
            ("POINT Z (-93.27 44.99 252)", "a")]
    layer = layers(_write(tmp_path / "z.gpkg", "GPKG", rows, geom_type="PointZ", field_type="str")
                   + "|layername=pts")
    (x, y, _, person, _), infos, _ = _fast_and_slow(processing_module, spans, layer, PERSON_FIELD="pid",
                                                    MAX_POINTS_PER_PERSON=1)
    assert any(FAST in i for i in infos)
    assert x.tolist() == [-93.25, -93.27] and y.tolist() == [44.97, 44.99] and person == ["a", "a"]


def test_shapefile_with_non_ascii_persons_takes_the_slow_path(spans, processing_module, layers, tmp_path):
    """QGIS and the file reader may decode a shapefile's text with different encodings."""
    rows = [("POINT (-93.25 44.97)", "Zoë"), ("POINT (-93.26 44.98)", "Ana")]
    layer = layers(_write(tmp_path / "names.shp", "ESRI Shapefile", rows, field_type="str"))
    (_, _, _, person, _), infos, _ = _fast_and_slow(processing_module, spans, layer, PERSON_FIELD="pid",
                                                    MAX_POINTS_PER_PERSON=1)
    assert "Reading the point layer feature by feature: the shapefile's person field has non-ASCII text." in infos
    assert person == [f["pid"] for f in layer.getFeatures()]  # as QGIS decodes them, right or wrong


def test_unexpected_errors_after_the_read_fall_back(spans, processing_module, points_layer, common, monkeypatch):
    def broken(*args, **kwargs):
        raise TypeError("unexpected")

    monkeypatch.setattr(common, "_same_crs", broken)
    infos = _run(processing_module, points_layer)
    assert "Reading the point layer feature by feature: the fast file reader failed (TypeError: unexpected)." \
        in infos
    assert f"Read {points_layer.featureCount()} points {SLOW}.{EXACT}" in infos
