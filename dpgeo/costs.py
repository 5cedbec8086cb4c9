"""What a run costs, from its request alone: cells, features, memory and work of one period, in O(1).

Each mechanism declares its estimate (:meth:`dpgeo.declare.Mechanism.cost`);
the functions here are the shared models. None lists a cell: square cells
are counted from the study area's bounding box and the cell width (as
:func:`dpgeo.resources.grid_shape`), H3 cells from the study area's area and
outline and the mean cell area of the resolution. The service checks these
estimates against its limits before it accepts a request
(``docs/service.md``, "Limits"); what cannot be estimated up front (the
points a k-means run keeps) is bounded by the worker's own limits.

Memory model (upper estimates, bytes):

* a **cell**: :data:`CELL_BYTES` (its running count, its noisy count and
  released value, the point-assignment mask, its id);
* a **released feature**: :data:`FEATURE_BYTES`, through the layer, the
  GeoPackage, the GeoJSON and the map page (measured: a 522,000-cell heat
  layer of 20 m squares took 2.9 GB in its worker);
* a **smoothing pixel** of density bands: :data:`PIXEL_BYTES` (the FFTs);
* a **neighbour pair** of hot spots: :data:`PAIR_BYTES`.

Examples
--------
>>> from dpgeo.domain import StudyArea
>>> area = StudyArea.from_bbox((0, 0, 10_000, 10_000), "EPSG:32615")
>>> c = grid_cost(area, 100.0)
>>> c.cells, c.features
(10000, 10000)
>>> h3_cell_count(area, 9)  # 100 km² of 0.105 km² hexagons, and those the outline crosses
1443
"""

from __future__ import annotations

import math

from dataclasses import dataclass

__all__ = ["CELLS_PER_CLUSTER", "Cost", "CELL_BYTES", "FEATURE_BYTES", "PAIR_BYTES", "PIXEL_BYTES", "RUN_FIXED_BYTES", "bands_cost",
           "clusters_cost", "grid_cost", "h3_cell_count", "heat_cost", "hotspots_cost", "kmeans_cost",
           "preview_cost"]

#: Bytes per cell of the public cell set.
CELL_BYTES = 48
#: Bytes per released feature, layer and files together.
FEATURE_BYTES = 5 * 1024
#: Bytes per pixel of the smoothing raster of density bands.
PIXEL_BYTES = 96
#: Bytes per neighbour pair of hot spots.
PAIR_BYTES = 40
#: Cells per cluster of the cluster mechanisms' feature estimate.
CELLS_PER_CLUSTER = 16
#: A run's fixed memory (the counting buffers and two input batches: ``dpgeo.resources``), once per job.
RUN_FIXED_BYTES = 400 * 2**20
#: The kernel of density bands is cut at this many σ.
_KERNEL_SIGMAS = 3.0
#: Nominal points per centre and iteration of k-means (the real number is private: the worker's limits bound it).
_KMEANS_POINTS_PER_CENTRE = 1000


@dataclass(frozen=True)
class Cost:
    """What one period of a run costs, estimated from the request alone (:meth:`dpgeo.declare.Mechanism.cost`).

    Attributes
    ----------
    cells : int
        Cells of the run's public cell set (from the study area's size and the cell's, never listed).
    features : int
        The most features one period's layer can have.
    bytes : int
        Memory of one period beyond a run's fixed cost (cells, released features, kernels), upper estimate.
    work : float
        Elementary cell operations of one period (cells, neighbour pairs, kernel pixels).
    """

    cells: int
    features: int
    bytes: int
    work: float


def _shape(area, cell_m):
    """Columns and rows of square cells over the study area's bounding box, as :class:`dpgeo.grid.Grid` lays them
    (:func:`dpgeo.resources.grid_shape`, which this module may not import: it imports the declarations)."""
    minx, miny, maxx, maxy = area.polygon.bounds
    return (max(1, int(math.ceil((maxx - minx) / float(cell_m) - 1e-9))),
            max(1, int(math.ceil((maxy - miny) / float(cell_m) - 1e-9))))


def grid_cost(area, cell_m, *, features_per_cell=1.0, cell_bytes=CELL_BYTES) -> Cost:
    """Square cells of ``cell_m`` metres over ``area``'s bounding box, ``features_per_cell`` of them features."""
    nx, ny = _shape(area, cell_m)
    cells = nx * ny
    features = int(math.ceil(cells * features_per_cell))
    return Cost(cells=cells, features=features, bytes=cells * cell_bytes + features * FEATURE_BYTES, work=cells)


def clusters_cost(area, cell_m, *, cell_bytes=CELL_BYTES, layers=1) -> Cost:
    """Clusters of connected cells: one feature per :data:`CELLS_PER_CLUSTER` cells (an estimate, not a bound:
    a cluster covers a core cell's neighbourhood, and clusters do not touch)."""
    return grid_cost(area, cell_m, features_per_cell=layers / CELLS_PER_CLUSTER, cell_bytes=cell_bytes)


def h3_cell_count(area, resolution) -> int:
    """About how many H3 cells of ``resolution`` meet ``area`` (area and outline; no cell listed)."""
    from .h3cells import H3_AREA_M2, H3_EDGE_M

    poly = area.polygon
    return int(poly.area / H3_AREA_M2[resolution] * 1.1 + poly.length / H3_EDGE_M[resolution] * 2 + 7)


def heat_cost(area, p) -> Cost:
    """Heat cells (square or H3): every cell may be a feature (dense, or a sparse release of busy cells)."""
    if p.get("h3_resolution") is not None:
        cells = h3_cell_count(area, p["h3_resolution"])
        return Cost(cells=cells, features=cells, bytes=cells * CELL_BYTES + cells * FEATURE_BYTES, work=cells)
    return grid_cost(area, p["cell_m"])


def bands_cost(area, p, cell_width_m) -> Cost:
    """Density bands: the cells' counts smoothed on a raster padded by the kernel, cut into ``bands`` polygons."""
    base = heat_cost(area, dict(p, bands=None))
    sigma = p.get("bandwidth_m") or 2.0 * cell_width_m
    pad = 2 * math.ceil(_KERNEL_SIGMAS * sigma / cell_width_m)
    nx, ny = _shape(area, cell_width_m)
    pixels = (nx + pad) * (ny + pad) * (2 * math.sqrt(3.0) if p.get("h3_resolution") is not None else 1.0)
    kernel = (pad + 1) ** 2
    return Cost(cells=base.cells, features=int(p["bands"]),
                bytes=int(base.cells * CELL_BYTES + pixels * PIXEL_BYTES + kernel * 8 + base.cells * 64),
                work=pixels * max(1.0, math.log2(max(pixels, 2.0))) + base.cells)


def hotspots_cost(area, p) -> Cost:
    """Hot spots: every cell a feature, and one pair per cell per neighbour."""
    base = heat_cost(area, p)
    if p.get("h3_resolution") is not None:
        k = int(p.get("k") or 1)
        neighbours = 3 * k * (k + 1) + 1
    else:
        r = (p.get("radius_m") or 1.5 * p["cell_m"]) / p["cell_m"]
        neighbours = (2 * math.floor(r) + 1) ** 2
    pairs = base.cells * neighbours
    return Cost(cells=base.cells, features=base.features, bytes=base.bytes + pairs * PAIR_BYTES,
                work=base.work + pairs)


def kmeans_cost(area, p, membership_cells) -> Cost:
    """k-means: ``k`` Voronoi cells; the work of its iterations per centre (the points it keeps are private and
    bounded by the worker's memory limit)."""
    k, it = int(p["k"]), int(p.get("iterations") or 1)
    return Cost(cells=membership_cells, features=k, bytes=membership_cells * CELL_BYTES + k * FEATURE_BYTES,
                work=membership_cells + k * it * _KMEANS_POINTS_PER_CENTRE)


def preview_cost(area, cell_m) -> Cost:
    """A preview: the grid is planned (its cells counted), nothing is released."""
    c = grid_cost(area, cell_m, features_per_cell=0.0)
    return Cost(cells=c.cells, features=0, bytes=c.cells * CELL_BYTES, work=c.cells)
