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

__all__ = ["Release", "ClusterLayer", "read_release", "format_metadata", "Charge", "start_charge", "dataset_key",
           "DatasetChoice", "choose_dataset", "IN_MEMORY_DATASET", "ledger_file", "run_protected_files"]

#: The dataset key of in-memory inputs (arrays, GeoDataFrames) run without ``dataset=``.
IN_MEMORY_DATASET = "unnamed in-memory data"


def dataset_key(points, dataset=None) -> tuple[str, bool]:
    """The ledger key of a run without looking at the ledger, and whether the owner named it.

    A name given by the owner (``dataset=``, ``--dataset``) is what composes:
    several files of the same people share it. Without one, a file input is
    charged by its content (`start_charge` asks the ledger: a declared
    dataset, else a key of the content); this is the key of an in-memory
    input, :data:`IN_MEMORY_DATASET` (so unnamed in-memory runs all share one
    budget: conservative, never an undercount).
    """
    if isinstance(dataset, DatasetChoice):
        return dataset.key, dataset.published is not None
    if dataset is not None:
        return dataset, True
    if _is_path(points):
        from .budget import dataset_key_for_path

        return dataset_key_for_path(os.fsdecode(points) if isinstance(points, bytes) else points), False
    from .counting.postgis import DATABASE_DATASET, is_database_input

    if is_database_input(points):
        return DATABASE_DATASET, False
    return IN_MEMORY_DATASET, False


def _is_path(points) -> bool:
    from .counting.postgis import is_database_input

    return (isinstance(points, (str, bytes)) or hasattr(points, "__fspath__")) and not is_database_input(points)


def _database_note():
    from .counting.postgis import DATABASE_DATASET

    return (f"no dataset name given: this release from a database is charged to {DATABASE_DATASET!r}, shared by "
            "every unnamed database run. Name the dataset (dataset=NAME, --dataset NAME) so that the budget is kept "
            "per population")


@dataclass(frozen=True)
class DatasetChoice:
    """A dataset already resolved by a front end (QGIS reads the points itself): pass it as ``dataset=``.

    ``key`` is the ledger's key; ``published`` what the release may publish
    (None: nothing); ``notes`` what the front end told the owner already.
    Make one with :func:`choose_dataset`.
    """

    key: str
    published: str | None
    notes: tuple = ()


def choose_dataset(source, name=None, *, ledger=None, record=True) -> DatasetChoice:
    """The dataset a run on ``source`` (a file path, or None for points in memory) is charged to.

    Parameters
    ----------
    source : str, os.PathLike or None
        The input file (its content decides: see :meth:`dpgeo.budget.Ledger.resolve`).
    name : str, optional
        The name the owner gave.
    ledger : Ledger, str or None
        The ledger (None: the default one).
    record : bool
        False: record nothing in the ledger (a dialog showing the budget as it is filled in).

    Raises
    ------
    ParameterError
        ``name`` is not the dataset the input's content was declared as.
    """
    if source is None:
        if name is None:
            return DatasetChoice(IN_MEMORY_DATASET, None, (_in_memory_note(),))
        return DatasetChoice(name, name)
    r = _open_ledger(ledger).resolve(source, name, record=record)
    return DatasetChoice(r.key, r.published, r.notes)


def _in_memory_note():
    return (f"no dataset name given: this release is charged to {IN_MEMORY_DATASET!r}, shared by every unnamed "
            "in-memory run. Pass dataset=NAME so that the budget is kept per population")


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
        The dataset key the release is charged to (owner-side: it may be a key made from the input's content).
    published : str or None
        The dataset's name as the release publishes it: the name the owner gave or declared, else None.
    ledger_path : str or None
        The ledger's file (owner-side).
    """

    def __init__(self, reservation=None, *, dataset=None, published=None, ledger_path=None, source=None,
                 unattended=False):
        self.reservation = reservation
        self.dataset = reservation.dataset if reservation is not None else dataset
        self.published = published
        self.ledger_path = ledger_path
        self.release_id = reservation.release_id if reservation is not None else secrets.token_hex(16)
        self._source = source  # the input file (None: points in memory), for the check of its records
        self._unattended = unattended
        self._sketch = None
        self._later = ()  # notes about an unnamed file, told once its records are known

    def record_sketch(self):
        """An empty keyed sketch the counting fills with the records it reads (None when nothing is charged)."""
        if self.reservation is None:
            return None
        self._sketch = self.reservation.ledger.record_sketch()
        return self._sketch

    def records_read(self):
        """After counting, before any noise: the ledger checks which declared dataset the records are.

        The charge may move to the declared dataset an unnamed file's records
        belong to; a refusal raises (inside ``before_noise``: the charge is
        cancelled). See :mod:`dpgeo.budget.sketches`.
        """
        if self.reservation is None or self._sketch is None:
            return
        dataset, notes = self.reservation.ledger.check_records(self.reservation, self._sketch, source=self._source)
        self._sketch = None
        told = [(t, True) for t in notes]  # about the records: the owner's log only when unattended
        if dataset != self.dataset:
            self.dataset = self.published = dataset
        else:
            told = list(self._later) + told
        self._later = ()
        for text, depends_on_content in told:
            _tell_owner(text, unattended=self._unattended and depends_on_content, stacklevel=4)

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
        """Record that the release exists (its layer and metadata are made); call it last, never before."""
        for text, depends_on_content in self._later:  # a run that never checked its records
            _tell_owner(text, unattended=self._unattended and depends_on_content, stacklevel=4)
        self._later = ()
        if self.reservation is not None and self.reservation.status == "reserved":
            self.reservation.complete(outputs)

    def metadata(self) -> dict:
        """What every output of the release records about it (public values only: never a path)."""
        from .budget import format_exact

        md = {"release_id": self.release_id}
        if self.published is not None:
            md["dataset"] = self.published
        r = self.reservation
        if r is not None and r.series_id is not None:
            md["series_id"] = r.series_id
            md["charged_epsilon"] = float(r.cost_epsilon)
            md["charged_epsilon_exact"] = format_exact(r.cost_epsilon)
        if r is not None:
            md["dataset_spent_epsilon"] = float(r.spent_epsilon)
            md["dataset_spent_epsilon_exact"] = format_exact(r.spent_epsilon)
            md["dataset_total_epsilon"] = None if r.total_epsilon is None else float(r.total_epsilon)
            md["ledger_release_date"] = r.date
        return md

    def record_outputs(self, paths):
        """Add files written from the release to its ledger record (spends nothing); a warning if that fails."""
        if self.reservation is None or self.ledger_path is None or not paths:
            return
        from .budget import Ledger
        from .errors import DpgeoError

        try:
            Ledger(self.ledger_path).add_outputs(self.release_id, [p if p.startswith("PostGIS table ")
                                                                  else os.path.abspath(p) for p in paths])
        except DpgeoError as exc:
            warnings.warn(f"the file was written but not recorded with its release in the ledger: {exc}",
                          BudgetWarning, stacklevel=3)


def start_charge(*, ledger, dataset, points, epsilon, delta=0.0, mechanism, analyst=None, private=True,
                 unattended=False, stacklevel=3, series=None) -> Charge:
    """Reserve the release's ε in the dataset's ledger, before any private data is read.

    Parameters
    ----------
    ledger : dpgeo.budget.Ledger, str, os.PathLike, None or False
        The ledger: an object, a path, ``None`` for the default ledger
        (``$DPGEO_LEDGER``, else the user's data directory), or ``False`` for
        none (the release is then not recorded anywhere: the owner takes on
        the bookkeeping).
    dataset : str, DatasetChoice or None
        The dataset's name. For a file input the ledger checks it against the
        file's content: a file declared as another dataset is refused, and a
        run without a name is charged to the declared dataset the file holds
        (else to a key of its content). See :mod:`dpgeo.budget.datasets`.
    points
        The run's input (a file's bytes are fingerprinted; no record is read).
    epsilon, delta : float
        What the whole release costs.
    mechanism : str
        What is released (recorded in the ledger).
    analyst : str, optional
        Who runs it (default: the operating-system user).
    private : bool
        ``False`` for runs that are not differentially private: nothing is charged.
    unattended : bool
        Notes that depend on the input's content go to the owner's log
        (``dpgeo.owner``), never to a warning (stderr).
    stacklevel : int
        Where a warning about an unnamed dataset points (the caller of the caller, by default).
    series : dict, optional
        A series (:mod:`dpgeo.pipeline.steps`): ``periods`` (``[(start, end, label)]``),
        ``composition`` and ``unit``, and ``append`` (the id of the series its periods are appended to,
        or None). See :meth:`dpgeo.budget.Ledger.reserve` and :meth:`~dpgeo.budget.Ledger.append_periods`.

    Raises
    ------
    BudgetExceededError
        The release would exceed the dataset's total. Nothing is read or written.
    LedgerError
        The ledger cannot be used (corrupt, locked, read-only, newer version).
    ParameterError
        The input's content is declared as another dataset than the one named.
    """
    if ledger is False or not private:
        key, named = dataset_key(points, dataset)
        return Charge(None, dataset=key, published=key if named else None)
    book = _open_ledger(ledger)
    if isinstance(dataset, DatasetChoice):
        choice = DatasetChoice(dataset.key, dataset.published)  # its notes were told by the front end
    elif _is_path(points):  # the ledger's policy is checked here too: before any record is read
        r = book.resolve(points, dataset, unattended=unattended)
        choice = DatasetChoice(r.key, r.published, tuple(zip(r.notes, r.content_notes)))
    elif dataset is None and dataset_key(points)[0] != IN_MEMORY_DATASET:  # a database input without a name
        choice = DatasetChoice(dataset_key(points)[0], None, ((_database_note(), False),))
    elif dataset is None:
        choice = DatasetChoice(IN_MEMORY_DATASET, None, ((_in_memory_note(), False),))
    else:
        choice = DatasetChoice(dataset, dataset)
    if not _is_path(points) or isinstance(dataset, DatasetChoice):
        book.check_policy(choice.key, unattended=unattended)
    if series is not None and series.get("append"):
        reservation = book.append_periods(series["append"], dataset=choice.key, periods=series["periods"],
                                          epsilon=epsilon, delta=delta, composition=series["composition"],
                                          unit=series["unit"], analyst=analyst)
    elif series is not None:
        reservation = book.reserve(choice.key, epsilon=epsilon, delta=delta, mechanism=mechanism, analyst=analyst,
                                   periods=series["periods"], composition=series["composition"],
                                   unit=series["unit"])
    else:
        reservation = book.reserve(choice.key, epsilon=epsilon, delta=delta, mechanism=mechanism, analyst=analyst)
    notes = list(choice.notes)
    unnamed_file = choice.published is None and _is_path(points)  # its resolution note says it already
    later = ()
    if unnamed_file:  # told once its records are known: they may be a declared dataset's (Charge.records_read)
        later, notes = tuple(notes), []
    if reservation.total_epsilon is None and not unnamed_file:
        notes.append((undeclared_notice(reservation.dataset, choice.published is None), False))
    for text, depends_on_content in notes:
        _tell_owner(text, unattended=unattended and depends_on_content, stacklevel=stacklevel)
    charge = Charge(reservation, published=choice.published, ledger_path=book.path,
                    source=points if _is_path(points) else None, unattended=unattended)
    charge._later = later
    return charge


def undeclared_notice(key, unnamed=False) -> str:
    """What a run charged to a dataset without a declared total says, every time."""
    if unnamed:
        return ("nothing limits the privacy budget this release spends: no dataset with a declared total was named "
                "or found for its input. Declare the dataset once: dpgeo budget declare NAME --file FILE --total "
                "EPSILON")
    return (f"nothing limits the privacy budget of dataset {key!r}: it has no declared total. Declare one: "
            f"dpgeo budget declare {key} --file FILE --total EPSILON (or dpgeo budget set {key} --total EPSILON)")


def _tell_owner(text, *, unattended, stacklevel=3):
    if unattended:  # about the input's content: the owner's log only, never stderr
        from .counting import OWNER_LOG

        OWNER_LOG.warning("%s", text)
    else:
        warnings.warn(text, BudgetWarning, stacklevel=stacklevel + 1)


_SUMMARY_KEYS = [
    "mechanism", "method", "differentially_private", "not_private_reasons", "neighbouring_relation",
    "epsilon", "epsilon_split", "delta", "sampler", "beta", "radius_m", "min_points", "min_points_prime", "gamma",
    "gamma_low", "gamma_method", "gamma_laplace", "extent", "extent_threshold", "kappa", "eta", "cell_width_m", "n_cells", "histogram",
    "theta", "wavelet", "percentile", "threshold", "k_prime", "n_clusters", "n_core_cells", "n_span_cells",
    "cells", "h3_resolution", "bands", "bands_bandwidth_m", "hotspot_neighbourhood", "hotspot_fdr", "working_crs",
    "dataset", "release_id",
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
    #: The release's :class:`Charge` (owner-side: the ledger and the dataset key), None for a release read
    #: from a file; :meth:`to_file` records each file written with it in the ledger.
    _charge: Any = field(default=None, repr=False, compare=False)

    @property
    def ledger_record(self) -> dict | None:
        """For the owner, never published: the ledger, dataset key and release id this release is charged to.

        None when nothing was charged (not private, ``ledger=False``, or read from a file).
        """
        c = self._charge
        if c is None or c.reservation is None:
            return None
        r = c.reservation
        return {"ledger": c.ledger_path, "dataset": c.dataset, "published_dataset": c.published,
                "release_id": c.release_id, "spent_epsilon": r.spent_epsilon, "total_epsilon": r.total_epsilon}

    @property
    def levels(self):
        """The tree of levels (``auto`` only, else None), built on first use: same release, same ε."""
        if callable(self._levels):
            self._levels = self._levels()
        return self._levels

    @property
    def differentially_private(self) -> bool:
        return bool(self.metadata.get("differentially_private"))

    def to_file(self, path, *, driver=None, crs=None, engine="auto", basemap="osm", attribution=None,
                title=None, levels=None, replace=False) -> str:
        """Write the layer and its metadata: GeoPackage, GeoJSON, HTML map or PNG, by extension, or a PostGIS table.

        GeoJSON and the HTML map are always EPSG:4326 (RFC 7946); a
        GeoPackage is in the working CRS unless ``crs`` is given, through
        ``engine`` (``"auto"``, ``"pyogrio"`` or ``"fiona"``); a PNG is drawn
        in ``crs`` or the working CRS. An HTML map is drawn over
        OpenStreetMap's standard tiles (``basemap="osm"``, the default), the
        tiles of an XYZ URL template (``basemap``, credited with
        ``attribution``), or nothing (``basemap="none"``: the page then
        requests nothing from any host). ``title`` is the heading of an HTML
        or PNG map (default: the mechanism). See :func:`dpgeo.io.write_layer`.
        Writing is free (post-processing of the release); the file appears
        only when complete, and is recorded with the release in the ledger.

        ``levels`` (spans without a radius): also write the tree of density
        levels — the GeoPackage layer ``<name>_levels`` in the same file,
        ``<stem>_levels.geojson`` beside a GeoJSON file, a switch between the
        map and its levels in an HTML map, the levels drawn in a PNG. Default:
        when the release was made with ``levels=True``.

        A PostGIS table: ``path`` is ``postgresql://USER@HOST/DATABASE?table=[SCHEMA.]NAME`` (no password:
        libpq finds it in ~/.pgpass, PGPASSWORD or a service file); the table gets the layer, its comment and
        the side table ``dpgeo_metadata`` the metadata (:mod:`dpgeo.io.postgis`). An existing table is
        refused unless ``replace=True``. The ledger records ``PostGIS table 'NAME'``, never the connection.
        """
        from .io.paths import check_not_input

        check_not_input(path, self._protected)
        if levels is None:
            levels = bool(self.metadata.get("levels_layer"))
        lv = self.levels if levels else None
        md = dict(self.metadata)
        if md.get("levels_layer") and lv is None:  # the copy has no levels layer: its metadata says so
            md["levels_layer"] = False
        side = None
        if lv is not None and output_driver(path, driver) == "GeoJSON":
            side = os.path.splitext(os.fspath(path))[0] + "_levels.geojson"
            check_not_input(side, self._protected)
        if crs is not None and output_driver(path, driver) in ("GPKG", "PostGIS"):
            from pyproj import CRS

            c = CRS.from_user_input(crs)
            md["output_crs"] = f"EPSG:{c.to_epsg()}" if c.to_epsg() else c.name
        written = write_layer(self.layer, path, md, driver=driver, crs=crs, engine=engine, basemap=basemap,
                              attribution=attribution, title=title, levels=lv, replace=replace)
        if self._charge is not None:
            self._charge.record_outputs([written] + ([side] if side else []))
        return written

    def summary(self) -> str:
        """The metadata for people: a status line, then every field labelled, in sections, as declared
        (:func:`dpgeo.metadata_fields.release_text`; what ``dpgeo info`` prints)."""
        from .metadata_fields import release_text

        return release_text(dict(self.metadata))

    def __repr__(self) -> str:
        noun = "clusters" if "cluster_id" in getattr(self.layer, "columns", ()) else "features"
        return (f"Release({self.metadata.get('method')}, {len(self.layer)} {noun}, "
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
    from .io.files import _metadata_layer, read_levels_layer

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
    levels = read_levels_layer(p, name if output_driver(p) == "GPKG" else None, engine=engine) \
        if metadata.get("levels_layer") else None
    return Release(layer=layer, metadata=metadata, diagnostics={}, cells=None,
                   _protected=(("the release it was read from", p),), _levels=levels)


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
