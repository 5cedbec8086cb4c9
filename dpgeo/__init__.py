"""dpgeo: differentially private cluster map layers from sensitive point data.

The data flow is visible in the modules::

    domain     public study area and working CRS (metres)
    grid       square cells over the study area, neighbourhoods
    histogram  ε-DP histograms of point counts (dense, sparse)
    dbscan     DP-DBSCAN spans (Qiu & Yi)
    wave       DP WaveCluster (Chen, Yu & Chirkova)
    polygons   cluster cells → (multi)polygons with noisy counts
    io         point layers in, cluster layers + privacy metadata out

The flat API below is what scripts, the command line and the QGIS plugin use.

Examples
--------
>>> import dpgeo
>>> dpgeo.noise_preview(epsilon=1.0, radius_m=100, min_points=30,
...                     domain=(-93.33, 44.89, -93.19, 45.05))["kappa"]
21
"""

from ._version import __version__
from .domain import StudyArea, as_study_area
from .errors import (
    DomainError,
    DpgeoError,
    InputError,
    NotPrivateWarning,
    OutputError,
    ParameterError,
)
from .io import read_layer_metadata, read_points
from .pipeline import dbscan_spans, noise_preview, wavecluster
from .result import ClusterLayer

__all__ = [
    "__version__",
    "dbscan_spans",
    "wavecluster",
    "noise_preview",
    "ClusterLayer",
    "StudyArea",
    "as_study_area",
    "read_points",
    "read_layer_metadata",
    "DpgeoError",
    "ParameterError",
    "InputError",
    "DomainError",
    "OutputError",
    "NotPrivateWarning",
]
