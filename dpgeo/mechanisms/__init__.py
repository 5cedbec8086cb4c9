"""Differentially private mechanisms: released cell counts in, clusters out.

One module per mechanism, each with its privacy argument in its docstring;
``docs/privacy.md`` has the proofs in full. Mechanisms start from cell
counts (the WaveCluster baseline from projected points, for its adaptive
grids) and import only what lies below them in the data flow — grid, noise,
histogram — never the pipeline, the writers or a front end
(``tests/test_layout.py`` checks it).

* :mod:`~dpgeo.mechanisms.dbscan` — DP-DBSCAN spans (Qiu & Yi).
* :mod:`~dpgeo.mechanisms.wavecluster` — DP WaveCluster (Chen, Yu & Chirkova),
  a package:

  - the steps every method shares: ``transform`` (the exact integer wavelet
    approximation and its computed sensitivities), ``thresholds`` (the
    percentile rule), ``components`` (8-connected components → cells) and
    ``cells`` (argument checks, report, result);
  - one module per method: ``privqt``, ``privthr``, ``privthr_em`` and
    ``baseline`` (WaveCluster on DP synthetic points from adaptive grids);
  - ``exact``: the non-private reference — **not** differentially private.
* :mod:`~dpgeo.mechanisms.kmeans` — DP k-means (DPLloyd with exact integer
  noise) published as Voronoi cells with noisy counts.

Comparison systems from the literature, **not differentially private** under
dpgeo's neighbouring relation (their results say so and cannot be written as
layers):

* :mod:`~dpgeo.mechanisms.eppkm` — EPP-KM, bootstrap-aggregated k-means
  (Nguyen et al.): no noise at all.
* :mod:`~dpgeo.mechanisms.diffhwt` — DiffHWT, Haar-wavelet per-record
  publishing with Laplace noise: one row per record.
"""
