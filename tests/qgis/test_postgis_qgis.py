"""The plugin on a PostGIS layer, in real QGIS (the postgres provider) against a real PostgreSQL server."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.qgis, pytest.mark.postgres]


@pytest.fixture(scope="module")
def pg_stops(postgres_server, sample_points):
    import geopandas as gpd

    from postgres import load_layer

    path, name = sample_points
    db = postgres_server.new_database("qgis")
    load_layer(postgres_server, db, "stops", gpd.read_file(path, layer=name))
    return postgres_server, db


def _pg_layer(server, db, table="stops"):
    from qgis.core import QgsDataSourceUri, QgsVectorLayer

    uri = QgsDataSourceUri()
    uri.setConnection("127.0.0.1", str(server.port), db, server.user, "")  # the password: from PGPASSFILE
    uri.setDataSource("public", table, "geom", "", "id")
    layer = QgsVectorLayer(uri.uri(False), table, "postgres")
    assert layer.isValid(), layer.dataProvider().error().message() if layer.dataProvider() else "no provider"
    return layer


def test_the_plugin_runs_on_a_postgis_layer(plugin, processing_module, pg_stops, sample_points, sample_study_area,
                                            feedback, tmp_path):
    from qgis.core import QgsProject, QgsVectorLayer

    server, db = pg_stops
    layer = _pg_layer(server, db)
    QgsProject.instance().addMapLayer(layer)
    try:
        assert layer.featureCount() == 51920
        out = str(tmp_path / "spans.gpkg")
        res = processing_module.run("dpgeo:dbscanspans", {
            "INPUT": layer, "EPSILON": 1.0, "RADIUS": 200, "MIN_POINTS": 100,
            "STUDY_AREA_LAYER": sample_study_area, "OUTPUT": out}, feedback=feedback)
        assert res["DIFFERENTIALLY_PRIVATE"] is True and res["N_CLUSTERS"] >= 1
        read = [line for line in feedback.infos if line.startswith("Read ")]
        assert len(read) == 1 and "51920" in read[0].replace(",", "") and "library's PostGIS reader" in read[0], \
            feedback.infos
        assert QgsVectorLayer(out, "spans", "ogr").featureCount() == res["N_CLUSTERS"]
        log = feedback.log()
        assert server.password not in log and server.user not in log
    finally:
        QgsProject.instance().removeMapLayer(layer.id())


def test_a_release_written_to_postgis_opens_in_qgis_with_its_metadata(qgis_app, postgres_db, sample_points,
                                                                       sample_study_area):
    import json

    import dpgeo

    server, db = postgres_db
    path, name = sample_points
    res = dpgeo.dbscan_spans(path, epsilon=1.0, radius_m=200, min_points=100, domain=sample_study_area,
                             ledger=False)
    written = res.to_file(server.url(db, table="stops_clusters_2026_11"))
    assert written == "PostGIS table 'stops_clusters_2026_11'"
    layer = _pg_layer(server, db, "stops_clusters_2026_11")
    try:
        assert layer.featureCount() == len(res.layer) >= 1
        assert layer.crs().authid() == res.metadata["working_crs"]
        comment = layer.dataComment()
        meta = json.loads(comment.split("dpgeo metadata (JSON):\n", 1)[1])
        assert meta["release_id"] == res.metadata["release_id"] and meta["epsilon"] == 1.0
        assert "differentially_private=true" in comment
        assert {"cluster_id", "dp_count"} <= {f.name() for f in layer.fields()}
    finally:
        from qgis.PyQt import sip

        sip.delete(layer)


def test_the_library_reader_and_qgis_feature_reader_agree(plugin, processing_module, postgres_db, feedback):
    """A table with a feature without geometry: both readers read the same points and count it the same way;
    a layer with a person field or a filter is read feature by feature."""
    import geopandas as gpd
    import numpy as np
    import shapely
    from qgis.core import QgsProcessingFeedback

    import dpgeo_qgis.reading as reading
    from postgres import load_layer

    server, db = postgres_db
    rng = np.random.default_rng(4)
    geoms = list(shapely.points(rng.uniform(-93.3, -93.2, 500), rng.uniform(44.9, 45.0, 500)))
    geoms[7] = None
    gdf = gpd.GeoDataFrame({"officer": [f"p{i % 9}" for i in range(500)]}, geometry=geoms, crs="EPSG:4326")
    load_layer(server, db, "few", gdf)
    layer = _pg_layer(server, db, "few")
    try:
        from qgis.core import QgsProcessingContext, QgsProcessingFeatureSource

        ctx = QgsProcessingContext()
        source = QgsProcessingFeatureSource(layer, ctx)
        target, name = reading.fast_read_target(layer, layer)
        import dpgeo

        fast = reading.read_postgis_fast(dpgeo, target, source, QgsProcessingFeedback())
        slow = reading.read_points(source, QgsProcessingFeedback())
        assert fast[3] == slow[3] == 1  # the feature without geometry
        assert sorted(zip(fast[0], fast[1])) == sorted(zip(slow[0], slow[1]))
        layer.setSubsetString("id > 10")
        with pytest.raises(reading.NoFastRead, match="filter"):
            reading.fast_read_target(layer, layer)
    finally:
        from qgis.PyQt import sip

        sip.delete(layer)


def test_qgis_process_runs_the_plugin_on_a_postgis_layer(qgis_process, qgis_app, pg_stops, sample_study_area,
                                                          tmp_path):
    """``qgis_process.bin`` (QGIS's own command line, the plugin loaded from a profile) on a PostGIS layer named by
    its provider and data source: the release is private and read by the library's PostGIS reader."""
    import json

    from qgis.core import QgsVectorLayer

    server, db = pg_stops
    source = _pg_layer(server, db).source()
    out_path = tmp_path / "spans.gpkg"
    proc = qgis_process("--json", "run", "dpgeo:dbscanspans", "--", f"INPUT=postgres://{source}", "EPSILON=1",
                        "RADIUS=200", "MIN_POINTS=100", f"STUDY_AREA_LAYER={sample_study_area}", f"OUTPUT={out_path}")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = json.loads(proc.stdout[proc.stdout.index("{"):])
    assert out["results"]["DIFFERENTIALLY_PRIVATE"] is True and out["results"]["N_CLUSTERS"] >= 1
    read = [line for line in (proc.stdout + proc.stderr).splitlines() if "library's PostGIS reader" in line]
    assert read and "51920" in read[0].replace(",", ""), proc.stdout[-3000:]
    layer = QgsVectorLayer(str(out_path), "spans", "ogr")
    assert layer.isValid() and layer.featureCount() == out["results"]["N_CLUSTERS"]
    assert server.password not in proc.stdout + proc.stderr
