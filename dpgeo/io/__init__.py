"""Release files: cluster layers and their privacy metadata, written and read back.

GeoPackage, GeoJSON, a self-contained HTML map (:mod:`dpgeo.io.html`) and a
PNG picture (:mod:`dpgeo.io.png`), chosen by the file's extension; one
palette (:mod:`dpgeo.io.palette`) styles the maps and the QGIS layer. The
private point input is read by :mod:`dpgeo.counting`; this package only
handles what a release publishes.
"""

from ..counting.readers import PointTable, points_from_frame, read_points
from ..formats import ENGINES, check_engine, output_driver
from .files import METADATA_MEMBER, check_output, geojson_collection, read_layer_metadata, write_layer
from .html import write_html
from .png import write_png
from .statement import privacy_statement

__all__ = [
    "write_layer",
    "check_output",
    "read_layer_metadata",
    "geojson_collection",
    "write_html",
    "write_png",
    "privacy_statement",
    "output_driver",
    "check_engine",
    "ENGINES",
    "METADATA_MEMBER",
    "PointTable",
    "read_points",
    "points_from_frame",
]
