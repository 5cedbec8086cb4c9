"""A map series: one DP release per public period, read, charged and written as one.

:class:`SeriesRelease` is what a run with ``time=`` and ``period=`` returns
(:func:`dpgeo.pipeline.run.run_release` with ``time=`` and ``period=``): the releases of every period
(:attr:`SeriesRelease.releases`, each a :class:`~dpgeo.release.Release` with
its own metadata) and **one time-enabled layer** that holds them all, each
feature with its period (``period``, ``period_start``, ``period_end``, UTC;
the end excluded). A GeoPackage of it carries the QGIS style that switches on
QGIS's temporal controller (:mod:`dpgeo.io.qgis_style`); the HTML map gets a
time slider and the PNG one panel per period.

Everything here is post-processing of the DP releases: the layers are
concatenated, and cluster ids are made to persist across periods
(:func:`persistent_ids`): a cluster of one period takes the id of the cluster
of the period before that it overlaps most (each earlier cluster passes its
id on at most once), so a reader can follow one hotspot through the year. The
mechanism's own number of a cluster within its period stays in
``period_cluster_id``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np

from ..release import Release

__all__ = ["SeriesRelease", "persistent_ids", "series_layer", "PERIOD_FIELDS", "period_file_name"]

#: The attributes a series adds to every feature.
PERIOD_FIELDS = ("period", "period_start", "period_end")


def persistent_ids(layers, *, previous=None, next_id=1):
    """Cluster ids that persist across periods: a list of int64 arrays, one per layer.

    Parameters
    ----------
    layers : list of GeoDataFrame
        The layers of consecutive periods (same CRS), in order.
    previous : GeoDataFrame, optional
        The clusters seen before ``layers``, each id with its latest geometry in ``cluster_id`` (an appended
        period continues the ids of the series it is appended to).
    next_id : int
        The first id a new cluster gets.

    Notes
    -----
    Every id seen so far keeps the geometry it had in the latest period it
    appeared in. A cluster takes the id whose geometry it shares the largest
    area with, matching pairs in decreasing order of shared area so that each
    id passes on to at most one cluster of a period; a cluster that overlaps
    no free id gets a new one. So a cluster keeps its id through a period in
    which it was not released. Ties are broken by the smaller id, then the
    cluster's position: the ids are a function of the released geometries
    alone.

    Examples
    --------
    >>> import geopandas as gpd, shapely
    >>> a = gpd.GeoDataFrame(geometry=[shapely.box(0, 0, 1, 1), shapely.box(5, 5, 6, 6)])
    >>> b = gpd.GeoDataFrame(geometry=[shapely.box(5.5, 5, 6.5, 6), shapely.box(9, 9, 10, 10)])
    >>> empty = gpd.GeoDataFrame(geometry=[])
    >>> [ids.tolist() for ids in persistent_ids([a, empty, b])]
    [[1, 2], [], [2, 3]]
    """
    import shapely

    tracks = {}  # id -> its latest geometry
    if previous is not None:
        for cid, g in zip(np.asarray(previous["cluster_id"], dtype=np.int64).tolist(),
                          np.asarray(previous.geometry.values, dtype=object)):
            tracks[cid] = g
            next_id = max(next_id, cid + 1)
    out = []
    for layer in layers:
        geoms = np.asarray(layer.geometry.values, dtype=object)
        ids = np.zeros(len(geoms), dtype=np.int64)
        if len(geoms) and tracks:
            old_ids = np.array(sorted(tracks), dtype=np.int64)
            old_geoms = np.array([tracks[i] for i in old_ids.tolist()], dtype=object)
            cur, old = shapely.STRtree(old_geoms).query(geoms, predicate="intersects")
            if cur.size:
                area = shapely.area(shapely.intersection(geoms[cur], old_geoms[old]))
                keep = area > 0
                cur, old, area = cur[keep], old[keep], area[keep]
                used_old, used_cur = set(), set()
                for i in np.lexsort((cur, old_ids[old], -area)).tolist():
                    c, o = int(cur[i]), int(old[i])
                    if c in used_cur or o in used_old:
                        continue
                    ids[c] = old_ids[o]
                    used_cur.add(c)
                    used_old.add(o)
        for j in np.flatnonzero(ids == 0):
            ids[j] = next_id
            next_id += 1
        for cid, g in zip(ids.tolist(), geoms):
            tracks[cid] = g
        out.append(ids)
    return out


def series_layer(layers, periods, *, previous=None, next_id=1):
    """One time-enabled layer from the layers of consecutive periods (post-processing).

    Each feature gets ``period`` (the label), ``period_start`` and
    ``period_end`` (UTC timestamps; the end excluded) and, for a layer of
    clusters, a ``cluster_id`` that persists across periods
    (:func:`persistent_ids`; the mechanism's own number in
    ``period_cluster_id``). Returns ``(layer, period_layers)``: the layer of
    all periods, and each period's layer with the same attributes.
    """
    import geopandas as gpd
    import pandas as pd

    has_ids = all("cluster_id" in g.columns for g in layers) and len(layers) > 0
    ids = persistent_ids(layers, previous=previous, next_id=next_id) if has_ids else [None] * len(layers)
    parts = []
    for i, (g, new) in enumerate(zip(layers, ids)):
        g = g.copy()
        start, end = periods.interval(i)
        cols = {"period": periods.labels[i], "period_start": pd.Timestamp(start), "period_end": pd.Timestamp(end)}
        for k, v in cols.items():
            g[k] = pd.Series([v] * len(g), index=g.index, dtype="datetime64[ns, UTC]" if k != "period" else object)
        if new is not None:
            g["period_cluster_id"] = g["cluster_id"].to_numpy()
            g["cluster_id"] = new
        first = list(PERIOD_FIELDS) + (["cluster_id", "period_cluster_id"] if new is not None else [])
        rest = [c for c in g.columns if c not in first and c != g.geometry.name]
        parts.append(g[first + rest + [g.geometry.name]])
    crs = layers[0].crs if layers else None
    combined = gpd.GeoDataFrame(pd.concat(parts, ignore_index=True), geometry=parts[0].geometry.name, crs=crs) \
        if parts else gpd.GeoDataFrame(geometry=[], crs=crs)
    return combined, parts


def period_file_name(path, label) -> str:
    """``series.gpkg`` and ``2014-04`` → ``series_2014-04.gpkg`` (the file of one period)."""
    p = os.fspath(path)
    stem, ext = os.path.splitext(p)
    if ext.lower() == ".gz":
        stem, inner = os.path.splitext(stem)
        ext = inner + ext
    return f"{stem}_{label}{ext}"


@dataclass
class SeriesRelease(Release):
    """A map series: one DP release per public period, as one time-enabled layer.

    Attributes
    ----------
    layer : geopandas.GeoDataFrame
        Every period's features, with ``period``, ``period_start`` and
        ``period_end`` (UTC; the end excluded) and, for clusters, a
        ``cluster_id`` that persists across periods (``period_cluster_id``:
        the mechanism's own number).
    metadata : dict
        The series' privacy metadata: the mechanism, the neighbouring relation,
        ε of each period and what the series spends (``series``), and one entry
        per period (``periods``).
    releases : list of Release
        The release of each period made by this run (with its own metadata:
        its period, the series' id and accounting).
    diagnostics : dict
        Owner-only facts about the input (never published), including the
        records dropped for their time.
    """

    releases: list = field(default_factory=list)

    @property
    def periods(self) -> list:
        """The labels of the periods in the layer (``2014-04``, ...)."""
        return [p["label"] for p in self.metadata.get("periods", [])]

    def to_file(self, path, *, driver=None, crs=None, engine="auto", basemap="osm", attribution=None,
                title=None, per_period=False, levels=None):
        """Write the series as one time-enabled file (see :meth:`Release.to_file`); with ``per_period``, also
        one file per period of this run (``series_2014-04.gpkg``, ...), each with its own levels layer when
        it has one. Returns the path, or with ``per_period`` the list of paths (the series' first)."""
        written = super().to_file(path, driver=driver, crs=crs, engine=engine, basemap=basemap,
                                  attribution=attribution, title=title, levels=False)
        if not per_period:
            return written
        return [written] + self.period_files(path, driver=driver, crs=crs, engine=engine, basemap=basemap,
                                             attribution=attribution, title=title, levels=levels)

    def period_files(self, path, **kw) -> list:
        """One file per period of this run, named after ``path`` and the period's label."""
        out = []
        for r in self.releases:
            t = kw.get("title")
            kw2 = dict(kw, title=None if t is None else f"{t} — {r.metadata['period']}")
            out.append(r.to_file(period_file_name(path, r.metadata["period"]), **kw2))
        return out

    def __repr__(self) -> str:
        md = self.metadata
        return (f"SeriesRelease({md.get('method')}, {len(self.periods)} periods, {len(self.layer)} features, "
                f"epsilon={md.get('epsilon')}, differentially_private={md.get('differentially_private')})")
