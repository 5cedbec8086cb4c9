"""Utility measures for comparing a private cluster layer with a reference.

These functions are for **evaluation only**: for benchmarks on labelled data
and for a data owner who wants to compare, on their own machine, a private
layer with the clustering of the raw data. They read exact labels and exact
point positions, release nothing, and are never called by the private
pipeline. Their results describe the private data and must not be published
as if they were differentially private.

Three groups of measures are offered.

*Point labelling.* A cluster layer is a set of regions (grid cells or
polygons). :func:`label_points_by_cells` and :func:`label_points_by_polygons`
give each point the id of the region it falls in, ``0`` (noise) outside
every region, which is how the DP-DBSCAN paper (Qiu & Yi, §8) scores its
spans.

*Partition agreement on points.* :func:`adjusted_rand_index` and
:func:`adjusted_mutual_info` (the measures of the DP-DBSCAN paper, §8, from
scikit-learn) and :func:`f_measure` (the F-measure the DP WaveCluster paper
compares against, §7.3).

*The DP WaveCluster measures* (Chen, Yu & Chirkova, §6 and §7.2):
:func:`dsg_c` (dissimilarity of significant grids and clusters, with the
Hungarian method), :func:`ocm` and :func:`two_ce` (dissimilarity of two
classifiers' predictions; :func:`classification_dissimilarity` runs the
whole "clustering first, then classification" protocol with an entropy
decision tree) and :func:`kprime_error` (relative error ``|k' - k| / k`` of
the significance rank).

Label conventions: labels are non-negative integers and ``0`` means noise
(no cluster); the ids of the clusters themselves are arbitrary. scikit-learn
is imported only by the functions that need it (:func:`adjusted_rand_index`,
:func:`adjusted_mutual_info` and the classification helpers).

Examples
--------
>>> import numpy as np
>>> true = np.array([1, 1, 2, 2, 0])
>>> found = np.array([5, 5, 7, 7, 0])   # same partition, other ids
>>> float(f_measure(true, found))
1.0
>>> float(two_ce(true, found))
0.0
"""

from __future__ import annotations

from .classification import (
    classification_dissimilarity,
    cluster_then_classify,
    split_train_test,
)
from .labelling import label_points_by_cells, label_points_by_polygons
from .partitions import adjusted_mutual_info, adjusted_rand_index, f_measure
from .wavecluster_measures import dsg_c, kprime_error, ocm, two_ce

__all__ = [
    "label_points_by_cells",
    "label_points_by_polygons",
    "adjusted_rand_index",
    "adjusted_mutual_info",
    "f_measure",
    "dsg_c",
    "ocm",
    "two_ce",
    "kprime_error",
    "split_train_test",
    "cluster_then_classify",
    "classification_dissimilarity",
]
