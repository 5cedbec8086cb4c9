"""dpgeo: differentially private cluster map layers from sensitive point data.

The modules, in the order of the data flow (a module imports only modules
listed above it)::

    errors        the exception hierarchy (used everywhere)
    domain        public study area and working CRS (metres)
    grid          square cells over the study area, neighbourhoods
    h3cells       H3 hexagon cells over the study area (_h3math: the H3 lattice in numpy)
    periods       the public periods of a map series (day … year, between public bounds, in a time zone)
    formats       file formats and GDAL engines (for counting/ and io/)
    randomness    NoiseSource: ChaCha20 keyed from the OS's CSPRNG (a test seed marks output not private)
    counting/     the private side: point layers in, projected, snapped to cells
    noise         exact samplers in integer arithmetic (_exact): discrete Laplace, exponential
                  mechanism; interval widths (contribution: per-person caps)
    histogram     ε-DP histograms of the cell counts (dense, sparse)
    resources     a run's grid and memory from its public parameters, checked before any data is read
    mechanisms/   one module per mechanism, its privacy argument in its docstring:
                  dbscan (DP-DBSCAN spans, Qiu & Yi); wavecluster/ (Chen, Yu &
                  Chirkova: transform, thresholds, components; privqt, privthr,
                  privthr_em, baseline; exact, not private); kmeans (DP Lloyd,
                  voronoi); eppkm, diffhwt (comparison systems, not private)
    polygons      cluster cells → (multi)polygons with noisy counts
    io/           release files: GeoPackage, GeoJSON, HTML map, PNG (+ metadata back in)
    budget/       the persistent privacy-budget ledger (SQLite), one per organisation
    release       Release: one charge, one layer + metadata, written to any number of files
    series/       SeriesRelease: one release per period as one time-enabled layer, cluster ids that persist;
                  a series' metadata; an earlier series read back to append periods
    pipeline/     the one release runner: validate → plan → charge → count → step → assemble
    generators/   what the declarations generate: entry points' docstrings, docs/parameters.md
    declarations/ one declaration per mechanism and its entry point (dbscan_spans, noise_preview,
                  wavecluster, kmeans, heat, hotspots), the registry the front ends list
    evaluation    utility measures against a reference (owner only: not private)
    compare       private vs exact clustering of the same data (owner only)
    server/       dpgeo serve: the OGC API – Processes service (jobs, releases, analysts' tokens)
    cli/          the command line (its ``serve`` command starts server/); the QGIS plugin
                  (qgis_plugin/) is the other front end

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
from .counting.readers import read_points
from .counting.inputs import open_points
from .counting.postgis import postgis
from .io.files import read_layer_metadata
from .declarations.spans import dbscan_spans, noise_preview
from .declarations.wavecluster import wavecluster
from .declarations.kmeans import kmeans
from .declarations.heat import cells_preview, heat, hotspots
from .release import ClusterLayer, Release, read_release
from .series import SeriesRelease

__all__ = [
    "__version__",
    "dbscan_spans",
    "wavecluster",
    "kmeans",
    "heat",
    "hotspots",
    "cells_preview",
    "noise_preview",
    "Release",
    "SeriesRelease",
    "ClusterLayer",
    "read_release",
    "StudyArea",
    "as_study_area",
    "read_points",
    "open_points",
    "postgis",
    "read_layer_metadata",
    "DpgeoError",
    "ParameterError",
    "InputError",
    "DomainError",
    "OutputError",
    "NotPrivateWarning",
]
