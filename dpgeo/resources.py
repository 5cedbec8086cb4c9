"""How big a run will be, from its public parameters alone, before any data is read.

:func:`plan_run` turns the study area, the cell width and the privacy
parameters into the grid's shape and an estimate of the memory the run
needs; :func:`check_plan` refuses a run whose estimate is beyond the limit
(:func:`max_memory_bytes`) with one line that names the numbers and what to
change. Nothing here reads private data: the study area is public.

Memory model (bytes, upper estimates; ``nx × ny`` is the grid over the
study area's bounding box, ``cells = nx·ny``):

* **grid universe**: ``ny × 4096`` for a polygon study area (one strip
  geometry, its intersection with the polygon and the runs per row, GEOS
  memory included), ``ny × 64`` for a rectangle;
* **point assignment**: one byte per cell while ``cells <= 2**28`` (a class
  mask used to put points in cells fast);
* **counting**: the running count, 8 bytes per cell up to ``2**25`` cells,
  a buffer of cell ids (128 MiB) and two batches being read (about 100 MiB
  each), whatever the number of points (``docs/scale.md``);
* **histogram**: dense: 24 bytes per cell (counts, noise, released values,
  int64); sparse: 24 bytes per *expected* released empty cell
  (``cells · q**θ / (1+q)``, at most ``max_false_cells`` by the choice of θ);
* **WaveCluster**: 96 bytes per cell (the dense counts, the wavelet
  sub-bands, the significance mask and the labels);
* **heat layers** (:func:`plan_heat`): the histogram as above, then the
  layer itself, one polygon feature per released cell (square: 640 bytes,
  H3: 1,100 bytes, measured through the GeoDataFrame and the file writer);
  hot spots add 40 bytes per cell per neighbour (the neighbourhood pairs and
  sums), density bands 96 bytes per pixel of the smoothing raster (the FFTs;
  one pixel per cell of the bounding box, or 2√3 per H3 hexagon of it). H3
  cells add the lattice lookup tables, 4 bytes per hexagon of the study
  area's bounding box, and 9 bytes per listed cell;
* **noise laws**: the exact law of a sum of ``κ`` discrete Laplace noises
  (DP-DBSCAN's Γ) takes 32 bytes per point of its support, about
  ``κq/(1-q) + 40·√(κq)/(1-q) + 40/ln(1/q)`` points; a cluster's 95%
  interval (exact for sums of up to 256 cells) takes 48 bytes per point of a
  power-of-two FFT of ``2·256·L + 1`` points, ``L = 39.2/ln(1/q) + 1``. Both
  grow as 1/ε: a tiny ε makes them the largest term.

Not counted: what depends on the private data (the distinct occupied cells
of a sparse histogram, 16 bytes each, at most one per point read), and the
input batches (a fixed number of records at a time).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field

from .errors import ParameterError

__all__ = ["RunPlan", "plan_run", "plan_heat", "check_plan", "max_memory_bytes", "parse_bytes", "grid_shape",
           "format_bytes", "MAX_GRID_CELLS", "MEMORY_ENV"]

#: The most cells any grid may have (bounding box), whatever the memory: the universe takes time per row.
MAX_GRID_CELLS = 10**12
#: Environment variable with the memory limit of a run (bytes, or e.g. ``8G``).
MEMORY_ENV = "DPGEO_MAX_MEMORY"

_UNIVERSE_ROW_BYTES = 4096
_RECT_ROW_BYTES = 64
_CLASS_MASK_MAX_CELLS = 1 << 28
_DENSE_CELL_BYTES = 24
_SPARSE_CELL_BYTES = 24
_WAVECLUSTER_CELL_BYTES = 96
_SUM_LAW_POINT_BYTES = 32
_INTERVAL_POINT_BYTES = 48
_INTERVAL_MAX_K = 256
_DENSE_COUNT_MAX_CELLS = 1 << 25
_COUNTING_FIXED_BYTES = 128 * 2**20 + 2 * 100 * 2**20
_SQUARE_LAYER_CELL_BYTES = 640
_H3_LAYER_CELL_BYTES = 1100
_NEIGHBOUR_PAIR_BYTES = 40
_SMOOTHING_PIXEL_BYTES = 96
_H3_TABLE_ENTRY_BYTES = 4
_H3_CELL_BYTES = 9


@dataclass
class RunPlan:
    """The size of a run, from public parameters.

    Attributes
    ----------
    nx, ny : int
        Columns and rows of the grid over the study area's bounding box.
    cells : int
        ``nx * ny`` (the universe, the cells touching the study area, is at most this).
    cell_m : float
        Cell width in metres.
    expected_noisy_cells : float
        Cells expected in the noisy histogram beyond the occupied ones (dense: every cell).
    bytes : dict
        Estimated bytes per part of the run (see the module's memory model).
    grid_text : str, optional
        How a refusal names the grid (default: its shape and cell width).
    """

    nx: int
    ny: int
    cells: int
    cell_m: float
    expected_noisy_cells: float = 0.0
    bytes: dict = field(default_factory=dict)
    grid_text: str | None = None

    @property
    def total_bytes(self) -> int:
        """Sum of the estimated parts."""
        return int(sum(self.bytes.values()))


def grid_shape(bounds, cell_m: float) -> tuple[int, int]:
    """``(nx, ny)`` of the grid of ``cell_m`` metres over ``bounds`` (as :class:`dpgeo.grid.Grid` makes it).

    Examples
    --------
    >>> grid_shape((0, 0, 1000, 500), 100.0)
    (10, 5)
    """
    minx, miny, maxx, maxy = bounds
    nx = max(1, int(math.ceil((maxx - minx) / cell_m - 1e-9)))
    ny = max(1, int(math.ceil((maxy - miny) / cell_m - 1e-9)))
    return nx, ny


def _sum_law_points(k: int, q: float) -> float:
    """Support of the law of a sum of ``k`` discrete Laplace noises as computed (:func:`dpgeo.noise.sum_abs_bound`)."""
    from .noise import EXACT_SUM_MAX_TERMS, sum_law_terms

    return min(sum_law_terms(k, q), EXACT_SUM_MAX_TERMS)


def _interval_points(k: int, q: float) -> float:
    """FFT size of the interval of a sum of ``k`` noises as computed (:func:`dpgeo.noise.sum_interval_halfwidth`)."""
    from .noise import EXACT_INTERVAL_MAX_FFT, interval_fft_size

    return min(interval_fft_size(k, q), EXACT_INTERVAL_MAX_FFT)


def plan_run(area, cell_m: float, *, mechanism: str = "dbscan", epsilon: float | None = None,
             sensitivity: int = 1, kappa: int = 21, histogram: str = "auto", max_dense_cells: int = 1 << 22,
             max_false_cells: int = 1 << 18) -> RunPlan:
    """The grid and the memory a run needs, from public parameters alone.

    Parameters
    ----------
    area : dpgeo.domain.StudyArea
        The public study area (projected).
    cell_m : float
        Cell width in metres.
    mechanism : {"dbscan", "wavecluster", "kmeans"}
    epsilon : float, optional
        The ε of the noisy counts (None: no noise, e.g. exact WaveCluster).
    sensitivity : int
        Points per record (or per person): the noise scales with it.
    kappa : int
        DP-DBSCAN: cells in a neighbourhood.
    histogram : {"auto", "dense", "sparse"}
        DP-DBSCAN's histogram.
    max_dense_cells, max_false_cells : int
        As for :func:`dpgeo.dbscan_spans`.

    Examples
    --------
    >>> from dpgeo.domain import StudyArea
    >>> p = plan_run(StudyArea.from_bbox((0, 0, 2000, 1000), "EPSG:32615"), 10.0, epsilon=1.0)
    >>> p.nx, p.ny, p.cells, p.total_bytes < 400 * 2**20
    (200, 100, 20000, True)
    """
    nx, ny = grid_shape(area.polygon.bounds, cell_m)
    cells = nx * ny
    plan = RunPlan(nx=nx, ny=ny, cells=cells, cell_m=float(cell_m))
    b = plan.bytes
    b["grid universe"] = ny * (_RECT_ROW_BYTES if area.is_rectangle else _UNIVERSE_ROW_BYTES)
    if cells <= _CLASS_MASK_MAX_CELLS:
        b["point assignment"] = cells
    b["counting"] = min(cells, _DENSE_COUNT_MAX_CELLS) * 8 + _COUNTING_FIXED_BYTES
    q = None
    if epsilon is not None:
        q = math.exp(-float(epsilon) / max(int(sensitivity), 1))
    if mechanism == "wavecluster":
        b["wavelet transform"] = cells * _WAVECLUSTER_CELL_BYTES
        plan.expected_noisy_cells = float(cells)
    elif mechanism == "dbscan":
        dense = histogram == "dense" or (histogram == "auto" and cells <= max_dense_cells)
        if dense or histogram == "auto":  # auto: dense up to max_dense_cells of the (smaller) universe
            b["histogram"] = min(cells, max_dense_cells if not dense else cells) * _DENSE_CELL_BYTES
            plan.expected_noisy_cells = float(min(cells, max_dense_cells if not dense else cells))
        if not dense and q is not None and 0 < q < 1:
            from .histogram import sparse_threshold

            theta = sparse_threshold(cells, q, max_false_cells)
            expected = cells * math.exp(theta * math.log(q)) / (1 + q)
            plan.expected_noisy_cells = max(plan.expected_noisy_cells, expected)
            b["histogram"] = max(b.get("histogram", 0), int(expected * _SPARSE_CELL_BYTES))
        if q is not None and 0 < q < 1:
            b["noise law of the core threshold"] = int(_sum_law_points(kappa, q) * _SUM_LAW_POINT_BYTES)
    if q is not None and 0 < q < 1:
        k = min(_INTERVAL_MAX_K, cells) if mechanism != "kmeans" else 1
        b["count intervals"] = int(_interval_points(k, q) * _INTERVAL_POINT_BYTES)
    return plan


def plan_heat(area, *, cell_m: float | None = None, h3_resolution: int | None = None, epsilon: float | None = None,
              sensitivity: int = 1, histogram: str = "auto", max_dense_cells: int = 1 << 22,
              max_false_cells: int = 1 << 18, neighbours: int = 0, bands: bool = False) -> RunPlan:
    """The memory of a heat layer (:func:`dpgeo.heat`, :func:`dpgeo.hotspots`), from public parameters alone.

    Parameters
    ----------
    area : dpgeo.domain.StudyArea
        The public study area (projected, metres).
    cell_m : float, optional
        Square cells of this width (metres); or
    h3_resolution : int, optional
        H3 cells of this resolution (their number estimated from the study
        area's size, :func:`dpgeo.h3cells.h3_cells_estimate`).
    epsilon, sensitivity, histogram, max_dense_cells, max_false_cells
        As for :func:`plan_run`.
    neighbours : int
        Cells in a hot-spot neighbourhood (0: no hot spots).
    bands : bool
        Whether density bands are made (the smoothing's arrays).

    Examples
    --------
    >>> from dpgeo.domain import StudyArea
    >>> area = StudyArea.from_bbox((0, 0, 10_000, 10_000), "EPSG:32615")
    >>> p = plan_heat(area, cell_m=100.0, epsilon=1.0)
    >>> p.cells, p.bytes["layer"]
    (10000, 6400000)
    >>> h = plan_heat(area, h3_resolution=9, epsilon=1.0, neighbours=7)  # 968 cells, in fact
    >>> h.grid_text
    'about 1,443 H3 cells of resolution 9'
    """
    if (cell_m is None) == (h3_resolution is None):
        raise ParameterError("give exactly one of cell_m and h3_resolution")
    if cell_m is not None:
        plan = plan_run(area, cell_m, mechanism="dbscan", epsilon=None, sensitivity=sensitivity,
                        histogram=histogram, max_dense_cells=max_dense_cells, max_false_cells=max_false_cells)
        per_cell = _SQUARE_LAYER_CELL_BYTES
    else:
        from .h3cells import H3_AREA_M2, h3_cells_estimate

        cells = h3_cells_estimate(area, h3_resolution)
        b0, b1, b2, b3 = area.polygon.bounds
        bbox_hexes = (b2 - b0) * (b3 - b1) / H3_AREA_M2[h3_resolution]
        width = math.sqrt(H3_AREA_M2[h3_resolution])
        plan = RunPlan(nx=cells, ny=1, cells=cells, cell_m=width,
                       grid_text=f"about {cells:,} H3 cells of resolution {h3_resolution}")
        plan.bytes["H3 cells and lookup tables"] = int(cells * _H3_CELL_BYTES
                                                       + bbox_hexes * 1.3 * _H3_TABLE_ENTRY_BYTES)
        plan.bytes["counting"] = min(cells, _DENSE_COUNT_MAX_CELLS) * 8 + _COUNTING_FIXED_BYTES
        dense = histogram == "dense" or (histogram == "auto" and cells <= max_dense_cells)
        plan.expected_noisy_cells = float(cells if dense else 0)
        if dense:
            plan.bytes["histogram"] = cells * _DENSE_CELL_BYTES
        per_cell = _H3_LAYER_CELL_BYTES
    q = None
    if epsilon is not None:
        q = math.exp(-float(epsilon) / max(int(sensitivity), 1))
    if plan.expected_noisy_cells < plan.cells and q is not None and 0 < q < 1:  # sparse: the released empty cells
        from .histogram import sparse_threshold

        theta = sparse_threshold(plan.cells, q, max_false_cells)
        expected = plan.cells * math.exp(theta * math.log(q)) / (1 + q)
        plan.expected_noisy_cells = max(plan.expected_noisy_cells, expected)
        plan.bytes["histogram"] = max(plan.bytes.get("histogram", 0), int(expected * _SPARSE_CELL_BYTES))
    if q is not None and 0 < q < 1:
        plan.bytes["count intervals"] = int(_interval_points(1, q) * _INTERVAL_POINT_BYTES)
    layer_cells = plan.expected_noisy_cells
    plan.bytes["layer"] = int(layer_cells * per_cell)
    if neighbours:
        plan.bytes["hot-spot neighbourhoods"] = int(layer_cells * neighbours * _NEIGHBOUR_PAIR_BYTES)
    if bands:
        pixels = plan.nx * plan.ny if cell_m is not None else bbox_hexes * 2 * math.sqrt(3.0)
        plan.bytes["smoothing"] = int(pixels * _SMOOTHING_PIXEL_BYTES)
    return plan


def format_bytes(n: float) -> str:
    """``n`` bytes for people (powers of 1024).

    Examples
    --------
    >>> format_bytes(1536), format_bytes(3 * 2**40)
    ('1.5 KiB', '3.0 TiB')
    """
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if n < 1024 or unit == "PiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} EiB"  # pragma: no cover


def parse_bytes(text) -> int:
    """A memory size: an integer number of bytes, or with a unit ``K``, ``M``, ``G``, ``T`` (powers of 1024).

    Examples
    --------
    >>> parse_bytes("8G"), parse_bytes("512M"), parse_bytes(1000)
    (8589934592, 536870912, 1000)
    """
    if isinstance(text, bool):
        raise ParameterError(f"a memory size must be bytes or a number with K, M, G or T, got {text!r}")
    if isinstance(text, (int, float)) and math.isfinite(text) and text > 0:
        return int(text)
    s = str(text).strip().upper().removesuffix("IB").removesuffix("B")
    scale = 1
    if s and s[-1] in "KMGT":
        scale = 1024 ** ("KMGT".index(s[-1]) + 1)
        s = s[:-1]
    try:
        value = float(s)
    except ValueError:
        value = float("nan")
    if not (math.isfinite(value) and value > 0):
        raise ParameterError(f"a memory size must be a number of bytes > 0, optionally with K, M, G or T "
                             f"(e.g. 8G), got {text!r}")
    return int(value * scale)


def _physical_memory() -> int | None:
    try:
        import psutil

        return int(psutil.virtual_memory().total)
    except Exception:  # noqa: BLE001 - psutil is optional
        pass
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return None


def max_memory_bytes(value=None) -> int:
    """The memory limit of a run: ``value``, else ``$DPGEO_MAX_MEMORY``, else half the machine's memory.

    Without either and when the machine's memory cannot be read, 8 GiB.
    """
    if value is None:
        value = os.environ.get(MEMORY_ENV) or None
    if value is not None:
        return parse_bytes(value)
    phys = _physical_memory()
    return phys // 2 if phys else 8 * 1024**3


def check_plan(plan: RunPlan, limit_bytes=None, *, cell_option: str = "cell width") -> RunPlan:
    """Refuse a run that is too large, before any data is read; returns the plan.

    Parameters
    ----------
    plan : RunPlan
    limit_bytes : int or str, optional
        The memory limit (default :func:`max_memory_bytes`).
    cell_option : str
        How the caller names what sets the cell width (``"--radius"``, ``"--cell or --grid"``), for the message.

    Raises
    ------
    ParameterError
        One line: the grid's cells, the estimated bytes, the limit, and what to change.
    """
    limit = max_memory_bytes(limit_bytes)
    total = plan.total_bytes
    grid = plan.grid_text or f"a {plan.nx:,} x {plan.ny:,} grid ({plan.cells:.3g} cells of {plan.cell_m:g} m)"
    if plan.cells > MAX_GRID_CELLS:
        raise ParameterError(
            f"{grid} is too large (at most {MAX_GRID_CELLS:.0e} cells); use a larger {cell_option} "
            "or a smaller study area")
    if total > limit:
        part, worst = max(plan.bytes.items(), key=lambda kv: kv[1])
        fix = ("a larger epsilon (the noise laws grow as 1/epsilon)"
               if part in ("noise law of the core threshold", "count intervals")
               else f"a larger {cell_option} or a smaller study area")
        raise ParameterError(
            f"this run would need about {format_bytes(total)} of memory ({part}: {format_bytes(worst)}; {grid}), "
            f"more than the limit of {format_bytes(limit)}; use {fix}, or raise the limit ({MEMORY_ENV} or "
            "--max-memory)")
    return plan
