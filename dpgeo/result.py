"""The result of a dpgeo run: a cluster layer plus its privacy metadata."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from .io import write_layer

__all__ = ["ClusterLayer", "format_metadata"]

_SUMMARY_KEYS = [
    "mechanism", "method", "differentially_private", "not_private_reasons", "neighbouring_relation",
    "epsilon", "epsilon_split", "delta", "beta", "radius_m", "min_points", "min_points_prime", "gamma",
    "gamma_low", "gamma_method", "gamma_laplace", "extent", "extent_threshold", "kappa", "eta", "cell_width_m", "n_cells", "histogram",
    "theta", "wavelet", "percentile", "threshold", "k_prime", "n_clusters", "n_core_cells", "n_span_cells", "working_crs", "dpgeo_version",
]


@dataclass
class ClusterLayer:
    """A differentially private cluster layer.

    Attributes
    ----------
    layer : geopandas.GeoDataFrame
        One row per cluster in the working CRS: ``cluster_id``, ``n_cells``,
        ``area_m2``, ``dp_count``, ``dp_count_low``, ``dp_count_high``,
        ``geometry`` (MultiPolygon). Safe to publish when
        ``metadata["differentially_private"]`` is true.
    metadata : dict
        Mechanism, privacy parameters and public settings (JSON-serialisable).
    diagnostics : dict
        Facts about the private input (points read, dropped, outside the
        study area). For the data owner only: **never publish**; dpgeo never
        writes them into an output file.
    cells : object
        The released cell set (grid and per-cell cluster labels), e.g. for
        evaluation against labelled data.
    """

    layer: Any
    metadata: dict
    diagnostics: dict = field(default_factory=dict)
    cells: Any = None

    @property
    def differentially_private(self) -> bool:
        return bool(self.metadata.get("differentially_private"))

    def to_file(self, path, *, driver=None, crs=None, engine="auto") -> str:
        """Write the layer and its metadata (GeoPackage or GeoJSON).

        GeoJSON is always written in EPSG:4326 (RFC 7946); a GeoPackage in
        the working CRS unless ``crs`` is given, through ``engine``
        (``"auto"``, ``"pyogrio"`` or ``"fiona"``, see
        :func:`dpgeo.io.write_layer`). The file appears only when complete.
        """
        md = dict(self.metadata)
        if crs is not None and driver != "GeoJSON" and not str(path).lower().endswith((".geojson", ".json")):
            from pyproj import CRS

            c = CRS.from_user_input(crs)
            md["output_crs"] = f"EPSG:{c.to_epsg()}" if c.to_epsg() else c.name
        return write_layer(self.layer, path, md, driver=driver, crs=crs, engine=engine)

    def summary(self) -> str:
        """Human-readable summary of the metadata (one ``key: value`` a line)."""
        return format_metadata(self.metadata)

    def __repr__(self) -> str:
        return (f"ClusterLayer({self.metadata.get('method')}, {len(self.layer)} clusters, "
                f"epsilon={self.metadata.get('epsilon')}, "
                f"differentially_private={self.metadata.get('differentially_private')})")


def format_metadata(md: dict) -> str:
    """Format metadata as aligned ``key: value`` lines, the important keys first."""
    keys = [k for k in _SUMMARY_KEYS if k in md] + sorted(k for k in md if k not in _SUMMARY_KEYS)
    width = max((len(k) for k in keys), default=0)
    lines = []
    for k in keys:
        v = md[k]
        if isinstance(v, float):
            v = f"{v:.6g}"
        elif isinstance(v, (dict, list)):
            v = json.dumps(v)
            if len(v) > 160:
                v = v[:157] + "..."
        lines.append(f"{k.ljust(width)} : {v}")
    return "\n".join(lines)
