"""Points of any accepted kind, projected into the working CRS of a public study area.

This is private data: the coordinates of every usable point. What the rest of
dpgeo needs from it are cell counts (:mod:`dpgeo.counting.cells`); the numbers
describing the input (records read, dropped) are owner-only diagnostics.
"""

from __future__ import annotations

import numpy as np
from pyproj import Transformer

from ..domain import StudyArea, as_study_area
from ..errors import DomainError, InputError
from .readers import PointTable, table_from_source
from .inputs import open_points

__all__ = ["load_points", "prepare_points", "PreparedPoints", "project_table"]

#: Inputs of at least this many points are projected on two threads (PROJ releases the GIL).
_PARALLEL_PROJECT_POINTS = 2_000_000


def load_points(points, *, input_crs=None, person=None) -> PointTable:
    """All coordinates of a path, GeoDataFrame/GeoSeries, (x, y, crs) tuple or PointTable, in memory.

    ``person`` is a column name for files and frames, or an array aligned with
    the coordinates for a tuple. Runs do not need this (they count batch by
    batch, :func:`dpgeo.counting.count_points`).

    Examples
    --------
    >>> t = load_points(([500.0, 510.0, float("nan")], [20.0, 30.0, 40.0], "EPSG:32615"))
    >>> t.x.size, t.n_read, t.n_dropped
    (2, 3, 1)
    """
    if isinstance(points, PointTable):
        if person is not None and points.person is None:
            raise InputError("the PointTable was read without a person column; read it with person=...")
        return points
    return table_from_source(open_points(points, input_crs=input_crs, person=person))


class PreparedPoints:
    """Points projected to the working CRS of the study area (private).

    Attributes
    ----------
    area : StudyArea
    x, y : numpy.ndarray
        Finite coordinates in the working CRS (metres).
    diagnostics : dict
        Owner-only facts: ``n_read``, ``n_dropped_invalid``, ``dropped_by_reason``, ``input_crs``, ``source``.
    person : numpy.ndarray or None
        Person identifier of each point, aligned with ``x``.
    """

    def __init__(self, area: StudyArea, x, y, diagnostics: dict, person=None):
        self.area = area
        self.x = x
        self.y = y
        self.diagnostics = diagnostics
        self.person = person


def prepare_points(points, *, domain, domain_crs=None, crs=None, domain_from_data=False,
                   input_crs=None, person=None) -> PreparedPoints:
    """Load points, fix the public study area and project the points into metres.

    With ``domain_from_data`` the study area is the data's own extent
    (exploration only: marked not private).
    """
    if domain is not None and domain_from_data:
        raise DomainError("give either a study area (--domain) or --domain-from-data, not both")
    if domain is None and not domain_from_data:
        as_study_area(None)  # raises the helpful message
    area = None
    if domain is not None:  # validate the public inputs before touching the data
        area = as_study_area(domain, domain_crs=domain_crs, working_crs=crs)
    table = load_points(points, input_crs=input_crs, person=person)
    if area is None:
        area = StudyArea.from_points_extent(table.x, table.y, table.crs, working_crs=crs)
    x, y = project_table(table, area.crs)
    pers = table.person if person is not None else None
    ok = np.isfinite(x) & np.isfinite(y)
    n_bad = int((~ok).sum())
    if n_bad:
        x, y = x[ok], y[ok]
        pers = None if pers is None else pers[ok]
    drops = dict(table.drops or ({"non_finite": table.n_dropped} if table.n_dropped else {}))
    if n_bad:
        drops["unprojectable"] = drops.get("unprojectable", 0) + n_bad
    diag = {
        "n_read": table.n_read,
        "n_dropped_invalid": table.n_dropped + n_bad,
        "dropped_by_reason": dict(sorted(drops.items())),
        "input_crs": table.crs.to_string(),
        "source": table.source,
    }
    return PreparedPoints(area, x, y, diag, pers)


def project_table(table: PointTable, crs):
    """``(x, y)`` of ``table`` in ``crs`` (non-finite where PROJ cannot transform a point)."""
    if table.crs.equals(crs):
        return table.x, table.y
    n = table.x.size
    if n < _PARALLEL_PROJECT_POINTS:
        tr = Transformer.from_crs(table.crs, crs, always_xy=True)
        return tr.transform(table.x, table.y, errcheck=False)
    from concurrent.futures import ThreadPoolExecutor

    x = np.empty(n)
    y = np.empty(n)
    cuts = np.linspace(0, n, 3).astype(int)

    def work(i):
        t = Transformer.from_crs(table.crs, crs, always_xy=True)
        a, b = cuts[i], cuts[i + 1]
        x[a:b], y[a:b] = t.transform(table.x[a:b], table.y[a:b], errcheck=False)

    with ThreadPoolExecutor(2) as ex:
        list(ex.map(work, range(2)))
    return x, y
