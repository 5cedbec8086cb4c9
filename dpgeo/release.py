"""One release: computed once, charged once to the dataset's privacy budget, written anywhere.

:class:`Release` is what every entry point of :mod:`dpgeo.pipeline` returns.

Every private run of :mod:`dpgeo.pipeline` is a *release*: computed once,
charged once, and then written to as many files as wanted (post-processing
is free). This module holds the one function that charges the ledger
(:func:`start_charge`): the pipeline calls it after every public parameter
is checked and **before** it reads any private data; the mechanism marks the
moment noise may be drawn (``charge.before_noise()`` ends there); the release
is completed when the layer exists. The charge is in the persistent ledger of
:mod:`dpgeo.budget`, shared by the command line, the Python API, the QGIS
plugin and the service.

Runs that are not differentially private (a fixed seed, a study area taken
from the data, the exact reference) release nothing that has an ε and are
not charged; their outputs say ``differentially_private: false``.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import warnings
from dataclasses import dataclass, field
from typing import Any

from .errors import BudgetWarning
from .formats import output_driver
from .io.files import read_layer_metadata, write_layer

__all__ = [
    "IN_MEMORY_DATASET",
    "Charge",
    "ClusterLayer",
    "Release",
    "dataset_key",
    "format_metadata",
    "ledger_file",
    "read_release",
    "run_protected_files",
    "start_charge",
]

#: The dataset key of in-memory inputs (arrays, GeoDataFrames) run without ``dataset=``.
IN_MEMORY_DATASET = "unnamed in-memory data"


def dataset_key(points, dataset=None) -> tuple[str, bool]:
    """The ledger key of a run and whether the owner named it.

    A name given by the owner (``dataset=``, ``--dataset``) is what composes:
    several files of the same people share it. Without one, a file input is
    keyed on its resolved path and an in-memory input on
    :data:`IN_MEMORY_DATASET` (so unnamed in-memory runs all share one budget:
    conservative, never an undercount).
    """
    if dataset is not None:
        return dataset, True
    if isinstance(points, (str, bytes)) or hasattr(points, "__fspath__"):
        from .budget import dataset_key_for_path

        return dataset_key_for_path(os.fsdecode(points) if isinstance(points, bytes) else points), False
    return IN_MEMORY_DATASET, False


def ledger_file(ledger):
    """The file of the ledger a run is given (``None``: the default ledger; ``False``: none, then None)."""
    if ledger is False:
        return None
    path = getattr(ledger, "path", None)
    if path is not None:
        return os.fspath(path)
    if ledger is None or isinstance(ledger, (str, bytes, os.PathLike)):
        from .budget import ledger_path

        return ledger_path(ledger)
    return None


def run_protected_files(points, domain, ledger) -> tuple:
    """What a run's outputs must not replace (:func:`dpgeo.io.paths.protected_files`), kept by its Release."""
    from .io.paths import protected_files

    return protected_files(points, domain=domain, ledger_file=ledger_file(ledger))


def _open_ledger(ledger):
    from .budget import Ledger

    if isinstance(ledger, Ledger):
        return ledger
    return Ledger(ledger)  # None: $DPGEO_LEDGER or the user's data directory


class Charge:
    """The charge of one release (or none, for a run that is not charged).

    Attributes
    ----------
    reservation : dpgeo.budget.Reservation or None
        The ledger's record; ``None`` when no ledger is used (``ledger=False``)
        or the run is not private.
    release_id : str
        Random, unguessable id of the release (the ledger's, when there is one).
    dataset : str or None
        The dataset key the release is charged to.
    """

    def __init__(self, reservation=None, *, dataset=None):
        self.reservation = reservation
        self.dataset = reservation.dataset if reservation is not None else dataset
        self.release_id = reservation.release_id if reservation is not None else secrets.token_hex(16)

    def __enter__(self):
        if self.reservation is not None:
            self.reservation.__enter__()
        return self

    def __exit__(self, exc_type, exc, tb):
        if self.reservation is not None:
            return self.reservation.__exit__(exc_type, exc, tb)
        return False

    def before_noise(self):
        """A block that draws no noise (reading, counting): an error in it cancels the charge."""
        if self.reservation is None:
            return contextlib.nullcontext(self)
        return self.reservation.before_noise()

    def complete(self, outputs=()):
        if self.reservation is not None and self.reservation.status == "reserved":
            self.reservation.complete(outputs)

    def metadata(self) -> dict:
        """What every output of the release records about it (public values only)."""
        from .budget import format_exact

        md = {"release_id": self.release_id, "dataset": self.dataset}
        r = self.reservation
        if r is not None:
            md["dataset_spent_epsilon"] = float(r.spent_epsilon)
            md["dataset_spent_epsilon_exact"] = format_exact(r.spent_epsilon)
            md["dataset_total_epsilon"] = None if r.total_epsilon is None else float(r.total_epsilon)
            md["ledger_release_date"] = r.date
        return md


def start_charge(*, ledger, dataset, points, epsilon, delta=0.0, mechanism, analyst=None, private=True) -> Charge:
    """Reserve the release's ε in the dataset's ledger, before any private data is read.

    Parameters
    ----------
    ledger : dpgeo.budget.Ledger, str, os.PathLike, None or False
        The ledger: an object, a path, ``None`` for the default ledger
        (``$DPGEO_LEDGER``, else the user's data directory), or ``False`` for
        none (the release is then not recorded anywhere: the owner takes on
        the bookkeeping).
    dataset : str or None
        The dataset's name; see :func:`dataset_key` for runs without one.
    points
        The run's input (only its path is used, to key unnamed runs).
    epsilon, delta : float
        What the whole release costs.
    mechanism : str
        What is released (recorded in the ledger).
    analyst : str, optional
        Who runs it (default: the operating-system user).
    private : bool
        ``False`` for runs that are not differentially private: nothing is charged.

    Raises
    ------
    BudgetExceededError
        The release would exceed the dataset's total. Nothing is read or written.
    LedgerError
        The ledger cannot be used (corrupt, locked, read-only, newer version).
    """
    key, named = dataset_key(points, dataset)
    if ledger is False or not private:
        return Charge(None, dataset=key)
    reservation = _open_ledger(ledger).reserve(key, epsilon=epsilon, delta=delta, mechanism=mechanism,
                                               analyst=analyst)
    if reservation.new_dataset and not named:
        from .budget import path_key_notice

        notice = (path_key_notice(key) if key != IN_MEMORY_DATASET else
                  f"no dataset name given: this release is recorded in the privacy-budget ledger under "
                  f"{IN_MEMORY_DATASET!r}, shared by every unnamed in-memory run. Pass dataset=NAME so that the "
                  "budget is kept per population.")
        warnings.warn(notice, BudgetWarning, stacklevel=3)
    return Charge(reservation)


_SUMMARY_KEYS = [
    "mechanism", "method", "differentially_private", "not_private_reasons", "neighbouring_relation",
    "epsilon", "epsilon_split", "delta", "sampler", "beta", "radius_m", "min_points", "min_points_prime", "gamma",
    "gamma_low", "gamma_method", "gamma_laplace", "extent", "extent_threshold", "kappa", "eta", "cell_width_m", "n_cells", "histogram",
    "theta", "wavelet", "percentile", "threshold", "k_prime", "n_clusters", "n_core_cells", "n_span_cells", "working_crs", "dataset", "release_id",
    "dataset_spent_epsilon", "dataset_total_epsilon", "dpgeo_version",
]


@dataclass
class Release:
    """One differentially private release: a cluster layer and its privacy metadata.

    Computed once, charged once; written to any number of files with
    :meth:`to_file` (free: post-processing). Read one back from a file with
    :meth:`from_file`.

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
    levels : geopandas.GeoDataFrame or None
        Spans without a radius (``auto``): the tree of clusters over all
        density levels, nested polygons with ``level_id``, ``parent_id``,
        ``level``, ``level_top``, ``stability``, ``cluster_id`` (the flat
        map's cluster it is, if any), ``depth`` and the columns of ``layer``.
        Same release, same ε. ``None`` for the other mechanisms.
    """

    layer: Any
    metadata: dict
    diagnostics: dict = field(default_factory=dict)
    cells: Any = None
    #: the levels layer, or a function that builds it on first use (its polygons can take seconds)
    _levels: Any = field(default=None, repr=False, compare=False)
    #: ``(what, path)`` of the files :meth:`to_file` must never replace (the private input, the study area,
    #: the ledger): kept here, never in the metadata.
    _protected: tuple = field(default=(), repr=False, compare=False)

    @property
    def levels(self):
        """The tree of levels (``auto`` only, else None), built on first use: same release, same ε."""
        if callable(self._levels):
            self._levels = self._levels()
        return self._levels

    @property
    def differentially_private(self) -> bool:
        return bool(self.metadata.get("differentially_private"))

    def to_file(self, path, *, driver=None, crs=None, engine="auto", basemap=None, attribution=None) -> str:
        """Write the layer and its metadata: GeoPackage, GeoJSON, HTML map or PNG, by extension.

        GeoJSON and the HTML map are always EPSG:4326 (RFC 7946); a
        GeoPackage is in the working CRS unless ``crs`` is given, through
        ``engine`` (``"auto"``, ``"pyogrio"`` or ``"fiona"``); a PNG is drawn
        in ``crs`` or the working CRS. ``basemap`` (an XYZ tile URL template)
        and ``attribution`` add tiles under an HTML map, which otherwise
        requests nothing from any host. See :func:`dpgeo.io.write_layer`.
        Writing is free (post-processing of the release); the file appears
        only when complete.
        """
        from .io.paths import check_not_input

        check_not_input(path, self._protected)
        md = dict(self.metadata)
        if crs is not None and output_driver(path, driver) == "GPKG":
            from pyproj import CRS

            c = CRS.from_user_input(crs)
            md["output_crs"] = f"EPSG:{c.to_epsg()}" if c.to_epsg() else c.name
        return write_layer(self.layer, path, md, driver=driver, crs=crs, engine=engine, basemap=basemap,
                           attribution=attribution)

    def summary(self) -> str:
        """Human-readable summary of the metadata (one ``key: value`` a line)."""
        return format_metadata(self.metadata)

    def __repr__(self) -> str:
        return (f"Release({self.metadata.get('method')}, {len(self.layer)} clusters, "
                f"epsilon={self.metadata.get('epsilon')}, "
                f"differentially_private={self.metadata.get('differentially_private')})")


#: The former name of :class:`Release`.
ClusterLayer = Release


def read_release(path, *, engine="auto"):
    """The release stored in a dpgeo output file, as a :class:`Release`.

    Parameters
    ----------
    path : str or os.PathLike
        A ``.gpkg`` or ``.geojson`` written by dpgeo.
    engine : {"auto", "pyogrio", "fiona"}
        GDAL binding used to read a GeoPackage.

    Returns
    -------
    Release
        ``layer`` in the file's CRS (EPSG:4326 for GeoJSON), ``metadata`` as
        stored; no diagnostics (a file holds none).

    Raises
    ------
    InputError
        No such file, not a layer dpgeo wrote, or unreadable.

    Examples
    --------
    >>> import numpy as np, os, tempfile, dpgeo
    >>> rng = np.random.default_rng(0)
    >>> x, y = rng.normal(500, 30, 3000), rng.normal(500, 30, 3000)
    >>> res = dpgeo.dbscan_spans((x, y, "EPSG:32615"), epsilon=1.0, radius_m=50, min_points=20,
    ...                          domain=(0, 0, 2000, 2000), domain_crs="EPSG:32615", seed=1)
    >>> path = res.to_file(os.path.join(tempfile.mkdtemp(), "spans.geojson"))
    >>> back = read_release(path)
    >>> back.metadata["release_id"] == res.metadata["release_id"], len(back.layer) == len(res.layer)
    (True, True)
    """
    import geopandas as gpd

    from .errors import InputError
    from .formats import output_driver, pick_engine, short_error
    from .io.files import _metadata_layer

    p = os.fspath(path)
    metadata = read_layer_metadata(p, engine=engine)  # says clearly when the file is not a dpgeo release
    try:
        if output_driver(p) == "GPKG":  # the layer that holds the metadata (QGIS adds a layer_styles table)
            name, _ = _metadata_layer(p, pick_engine(engine, needed=True, write=False))
            layer = gpd.read_file(p, layer=name, engine=None if engine == "auto" else engine)
        else:
            layer = gpd.read_file(p)
    except Exception as exc:
        raise InputError(f"cannot read the layer of {p!r}: {short_error(exc)}") from None
    if "fid" in layer.columns:
        layer = layer.drop(columns="fid")
    return Release(layer=layer, metadata=metadata, diagnostics={}, cells=None,
                   _protected=(("the release it was read from", p),))


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
