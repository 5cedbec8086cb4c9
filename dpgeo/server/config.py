"""The service's configuration: one TOML file written by the data owner.

A minimal configuration::

    [server]
    releases = "releases/"            # where published layers are stored
    # ledger = "/srv/dpgeo/ledger.sqlite"   # default: $DPGEO_LEDGER, else the user's one dpgeo ledger

    [datasets.stops]
    path = "stops.gpkg"               # the private input, never served
    # or a PostGIS table (the password from ~/.pgpass, PGPASSWORD or a service file, never here):
    # connection = "postgresql://dpgeo@db.city.example/city"
    # table = "public.stops"            # or sql = "SELECT geom, reported_at FROM stops WHERE ..."
    study_area = "-93.33,44.89,-93.19,45.06"   # public bbox (lon/lat) or a polygon file
    total_epsilon = 2.0

    [analysts.alice]
    token_sha256 = "<sha256 hex of alice's bearer token>"
    datasets = ["stops"]

Paths are relative to the configuration file. The privacy-budget ledger is
the machine's one ledger unless ``ledger`` names another (see
:func:`resolve_ledger`). Every problem is found when the
file is loaded, before the server listens: a dataset without a study area or
a total budget, a missing input file, a token that is not a SHA-256 hex
digest, an analyst granted a dataset that is not configured, a misspelt key.
The message is one line that names the key to fix (:class:`ConfigError`).
All keys are listed in ``docs/service.md``.
"""

from __future__ import annotations

import math
import numbers
import os
import re
from dataclasses import dataclass, field

import tomllib

from ..errors import DpgeoError

__all__ = [
    "ALLOW_TEST_SEED_ENV",
    "NAME_PATTERN",
    "AnalystConfig",
    "ConfigError",
    "DatasetConfig",
    "ServerConfig",
    "ServerSettings",
    "load_config",
    "parse_config",
    "resolve_ledger",
    "ledger_notice",
    "seed_notice",
]

#: A job's time is rounded up to a multiple of this many seconds (``job_quantum_seconds``): longer than a release
#: of the sample layer (51,920 points) takes on a busy 2-core machine, so that its time says nothing about the data.
DEFAULT_JOB_QUANTUM_S = 2.0
#: Dataset and analyst names: they appear in URLs, the ledger and the log.
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_HEX64 = re.compile(r"^[0-9a-f]{64}$")


class ConfigError(DpgeoError):
    """The service's configuration file cannot be used as written (the message names the key)."""


@dataclass(frozen=True)
class ServerSettings:
    """The ``[server]`` table (paths absolute, limits checked)."""

    ledger: str
    releases: str
    jobs: str
    url: str | None = None
    #: Where ``ledger`` comes from: "configuration", "DPGEO_LEDGER" or "default" (see resolve_ledger).
    ledger_from: str = "configuration"
    title: str = "dpgeo: differentially private cluster maps"
    description: str = ("Cluster map layers computed with differential privacy from data that never leaves "
                        "this server. Run a mechanism (OGC API - Processes); read its releases (OGC API - "
                        "Features).")
    workers: int = 1
    max_body_bytes: int = 65536
    requests_per_minute: int = 300
    executions_per_minute: int = 20
    max_queued_jobs: int = 32
    max_jobs_per_analyst: int = 4
    max_grid_cells: int = 1 << 24
    min_job_seconds: float = 0.0
    job_quantum_seconds: float = DEFAULT_JOB_QUANTUM_S
    owner_log: str | None = None
    #: Reverse proxies whose X-Forwarded-For/-Proto the server believes (IP addresses or networks); none by default.
    trusted_proxies: tuple = ()
    basemap: str | None = None
    basemap_attribution: str | None = None
    #: For tests only: every release made with this fixed seed, reproducible and NOT differentially private
    #: (refused unless ``$DPGEO_ALLOW_TEST_SEED`` is 1; see :func:`_test_seed`).
    test_seed: int | None = None


@dataclass(frozen=True)
class DatasetConfig:
    """One ``[datasets.NAME]`` table: a private input and its public facts."""

    name: str
    path: str | None            # the input file (None for a PostGIS input: see connection)
    study_area: object          # the value as given: a bbox string/list or an absolute polygon file path
    area: object                # the loaded dpgeo.domain.StudyArea (public)
    total_epsilon: object       # exact Fraction
    title: str
    description: str = ""
    layer: str | None = None
    x: str | None = None
    y: str | None = None
    input_crs: str | None = None
    quoted_newlines: bool = False  # a CSV export with line breaks inside quoted fields (see open_points)
    crs: str | None = None
    person: str | None = None
    max_points_per_person: int | None = None
    max_points_per_record: int = 1
    max_epsilon: object = None  # exact Fraction or None (then the total)
    private_releases: bool = False
    time_columns: tuple = ()    # the columns an analyst may name as a series' time (none: no series)
    timezone: str | None = None  # the calendar of its series, and of times written without a zone
    time_format: str | None = None  # strptime format of its text times, when not ISO 8601
    connection: str | None = field(default=None, repr=False)  # a PostGIS input: libpq connection, no password
    table: str | None = None    # its table or view
    sql: str | None = None      # or its query
    geometry: str | None = None  # its geometry column, when several

    @property
    def sensitivity(self) -> int:
        """Points one privacy unit may contribute (the noise scales with it)."""
        return self.max_points_per_person if self.person else self.max_points_per_record

    def read_options(self) -> dict:
        """Keyword arguments of :class:`dpgeo.counting.inputs.PointFile` (or of :func:`dpgeo.postgis`)."""
        if self.connection is not None:
            return {"table": self.table, "sql": self.sql, "geometry": self.geometry, "input_crs": self.input_crs,
                    "person": self.person}
        return {"layer": self.layer, "x": self.x, "y": self.y, "input_crs": self.input_crs, "person": self.person,
                "quoted_newlines": self.quoted_newlines}


@dataclass(frozen=True)
class AnalystConfig:
    """One ``[analysts.NAME]`` table."""

    name: str
    token_sha256: str
    datasets: tuple = ()


@dataclass(frozen=True)
class ServerConfig:
    """The whole configuration."""

    path: str
    server: ServerSettings
    datasets: dict = field(default_factory=dict)
    analysts: dict = field(default_factory=dict)
    limits: object = None  # a dpgeo.server.limits.Limits (the [limits] table)


def load_config(path) -> ServerConfig:
    """Read and check a configuration file.

    Raises
    ------
    ConfigError
        Anything wrong in the file, with the key and what to write instead.
    """
    path = os.path.abspath(os.fspath(path))
    if not os.path.isfile(path):
        raise ConfigError(f"configuration file {path!r} does not exist")
    try:
        with open(path, "rb") as f:
            raw = tomllib.load(f)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    except OSError as exc:
        raise ConfigError(f"cannot read configuration file {path!r}: {exc.strerror}") from None
    return parse_config(raw, path)


def parse_config(raw: dict, path) -> ServerConfig:
    """Check a parsed configuration; relative paths are taken from the folder of ``path``."""
    path = os.path.abspath(os.fspath(path))
    base = os.path.dirname(path)
    _only(raw, {"server", "datasets", "analysts", "limits"}, "the top level")
    server = _server(_table(raw, "server", required=True), base)
    datasets_raw = _table(raw, "datasets", required=True)
    if not datasets_raw:
        raise ConfigError("[datasets] is empty: configure at least one dataset ([datasets.NAME] with path, "
                          "study_area and total_epsilon)")
    datasets = {name: _dataset(name, _table(datasets_raw, name, required=True, where=f"datasets.{name}"), base)
                for name in datasets_raw}
    analysts_raw = _table(raw, "analysts", required=False)
    analysts = {name: _analyst(name, _table(analysts_raw, name, required=True, where=f"analysts.{name}"), datasets)
                for name in analysts_raw}
    seen = {}
    for a in analysts.values():
        if a.token_sha256 in seen:
            raise ConfigError(f"[analysts.{a.name}] token_sha256 is the same as [analysts.{seen[a.token_sha256]}]'s: "
                              "give every analyst a token of their own")
        seen[a.token_sha256] = a.name
    from .limits import parse_limits

    limits = parse_limits(raw.get("limits"), ConfigError)
    return ServerConfig(path=path, server=server, datasets=datasets, analysts=analysts, limits=limits)


# -- tables ------------------------------------------------------------------------------------------------------

def _server(t: dict, base: str) -> ServerSettings:
    w = "[server]"
    _only(t, set(ServerSettings.__dataclass_fields__) - {"ledger_from"}, w)  # (where the ledger came from: derived)
    from ..budget.pgstore import is_ledger_url

    on_pg = is_ledger_url(t.get("ledger"))
    if on_pg:  # a ledger on PostgreSQL, shared by replicas (docs/service.md): no password in it
        from ..budget import ledger_path
        from ..postgres import Connection

        try:
            Connection.parse(t["ledger"])
        except DpgeoError as exc:
            raise ConfigError(f"{w} ledger: {exc}") from None
        ledger, ledger_from = ledger_path(t["ledger"]), "configuration"
    else:
        ledger, ledger_from = resolve_ledger(_path(t, "ledger", base, w))
    if ledger_from == "configuration" and not on_pg and not os.path.isdir(os.path.dirname(ledger)):
        raise ConfigError(f"{w} ledger: the folder of {ledger!r} does not exist (the ledger file itself is created "
                          "on first use)")
    releases = _path(t, "releases", base, w, required=True)
    if os.path.exists(releases) and not os.path.isdir(releases):
        raise ConfigError(f"{w} releases: {releases!r} is a file; give a folder")
    if not os.path.isdir(os.path.dirname(releases)):
        raise ConfigError(f"{w} releases: the folder containing {releases!r} does not exist")
    jobs = _path(t, "jobs", base, w) or os.path.join(os.path.dirname(ledger) if ledger_from == "configuration"
                                                     and not on_pg else base, "jobs.sqlite")
    owner_log = _path(t, "owner_log", base, w)
    url = _str(t, "url", w)
    if url is not None:
        if not re.match(r"^https?://[^\s/?#]+(/[^\s?#]*)?$", url):
            raise ConfigError(f"{w} url must be the public base URL, e.g. \"https://maps.example.org/dpgeo\"; "
                              f"got {url!r}")
        url = url.rstrip("/")
    kw = {}
    for key, lo, hi in (("workers", 1, 64), ("max_body_bytes", 1024, 1 << 26), ("requests_per_minute", 1, 10**6),
                        ("executions_per_minute", 1, 10**6), ("max_queued_jobs", 1, 10**5),
                        ("max_jobs_per_analyst", 1, 10**5), ("max_grid_cells", 1, 1 << 30)):
        if key in t:
            kw[key] = _int(t, key, w, lo, hi)
    for key in ("min_job_seconds", "job_quantum_seconds"):
        if key in t:
            v = t[key]
            if isinstance(v, bool) or not isinstance(v, numbers.Real) or not (0 <= v <= 3600) or not math.isfinite(v):
                raise ConfigError(f"{w} {key} must be a number of seconds in [0, 3600], got {v!r}")
            kw[key] = float(v)
    for key in ("title", "description", "basemap", "basemap_attribution"):
        if key in t:
            kw[key] = _str(t, key, w)
    if "trusted_proxies" in t:
        kw["trusted_proxies"] = _proxies(t["trusted_proxies"], w)
    if "test_seed" in t:
        kw["test_seed"] = _test_seed(t["test_seed"], w)
    return ServerSettings(ledger=ledger, releases=releases, jobs=jobs, url=url, owner_log=owner_log,
                          ledger_from=ledger_from, **kw)


#: The environment variable that must be 1 for a service to start with ``[server] test_seed``.
ALLOW_TEST_SEED_ENV = "DPGEO_ALLOW_TEST_SEED"


def _test_seed(v, w) -> int:
    """``[server] test_seed``: a fixed seed for every release, for tests only; refused unless the environment
    also says ``DPGEO_ALLOW_TEST_SEED=1``, so that a configuration copied from a test cannot turn it on."""
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise ConfigError(f"{w} test_seed must be a non-negative integer (for tests only); got {v!r}")
    if os.environ.get(ALLOW_TEST_SEED_ENV) != "1":
        raise ConfigError(f"{w} test_seed makes every release reproducible and NOT differentially private (for "
                          f"tests only): remove it, or, in a test, also set {ALLOW_TEST_SEED_ENV}=1 in the "
                          "service's environment")
    return v


def seed_notice(settings) -> str | None:
    """The warning a service with ``[server] test_seed`` starts with (and repeats), or None."""
    if settings.test_seed is None:
        return None
    return (f"[server] test_seed = {settings.test_seed}: EVERY RELEASE OF THIS SERVICE IS NOT DIFFERENTIALLY "
            "PRIVATE (a fixed seed, for tests only; releases are marked so and charge nothing). Never run it on "
            "real data")


def _proxies(v, w) -> tuple:
    import ipaddress

    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise ConfigError(f"{w} trusted_proxies must be a list of IP addresses or networks, e.g. [\"127.0.0.1\"]")
    for x in v:
        try:
            ipaddress.ip_network(x, strict=False)
        except ValueError:
            raise ConfigError(f"{w} trusted_proxies: {x!r} is not an IP address or network") from None
    return tuple(v)


def resolve_ledger(configured):
    """``(path, source)``: the service's privacy-budget ledger, and where that choice comes from.

    The configured ``ledger`` (relative paths are taken from the configuration file's folder, like every
    path in it) when there is one; else ``$DPGEO_LEDGER``; else the user's default ledger: the one the
    command line, Python and QGIS use on this machine, so that every front end counts the same releases.
    A configured ledger that is not that one is allowed (a service with a ledger of its own) but never
    silent: the service says so in its log at start (:func:`ledger_notice`).
    """
    from ..budget import LEDGER_ENV, ledger_path

    if configured is not None:
        return configured, "configuration"
    return ledger_path(None), (LEDGER_ENV if os.environ.get(LEDGER_ENV) else "default")


def ledger_notice(settings) -> tuple:
    """``(info, warning or None)``: the log lines a service starts with about its ledger."""
    from ..budget import LEDGER_ENV, ledger_path

    where = {"configuration": "from the configuration's [server] ledger", LEDGER_ENV: f"from ${LEDGER_ENV}",
             "default": "this user's default dpgeo ledger"}[settings.ledger_from]
    info = f"privacy-budget ledger: {settings.ledger} ({where})"
    shared = ledger_path(None)
    if settings.ledger_from == "configuration" and os.path.realpath(settings.ledger) != os.path.realpath(shared):
        return info, (f"this service's ledger {settings.ledger} is not the one the command line, Python and QGIS use "
                      f"here ({shared}): releases of the same data made there are not counted against this "
                      f"service's totals. Use one ledger: remove [server] ledger, or set ${LEDGER_ENV} to "
                      f"{settings.ledger} for every dpgeo on this machine")
    return info, None


_DATASET_KEYS = {"path", "study_area", "total_epsilon", "title", "description", "layer", "x", "y", "input_crs", "crs",
                 "person", "max_points_per_person", "max_points_per_record", "max_epsilon", "private_releases",
                 "time_columns", "timezone", "time_format", "quoted_newlines", "connection", "table", "sql",
                 "geometry"}


def _dataset(name: str, t: dict, base: str) -> DatasetConfig:
    from ..budget import exact_value, format_exact
    from ..domain import as_study_area

    w = f"[datasets.{name}]"
    if not NAME_PATTERN.match(name):
        raise ConfigError(f"{w}: a dataset name is 1-64 letters, digits, '_', '-' or '.', starting with a letter or "
                          "digit (it appears in URLs)")
    _only(t, _DATASET_KEYS, w)
    for key, what in (("study_area", "the public study area: a bbox \"minlon,minlat,maxlon,maxlat\" or a polygon file"),
                      ("total_epsilon", "the total privacy budget of all its releases together, e.g. 2.0")):
        if key not in t:
            raise ConfigError(f"{w} has no {key}: add {key} = ... ({what}); the service refuses to run without it")
    data_path, conn = _input(t, base, w)
    sa = t["study_area"]
    if isinstance(sa, list):
        if len(sa) != 4 or not all(isinstance(v, numbers.Real) and not isinstance(v, bool) for v in sa):
            raise ConfigError(f"{w} study_area as a list needs 4 numbers [minlon, minlat, maxlon, maxlat]")
        spec = [float(v) for v in sa]
    elif isinstance(sa, str) and sa.strip():
        parts = sa.split(",")
        if len(parts) == 4 and _all_float(parts):
            spec = sa
        else:  # a polygon file, relative to the configuration file
            spec = os.path.normpath(os.path.join(base, os.path.expanduser(sa)))
            if not os.path.isfile(spec):
                raise ConfigError(f"{w} study_area: {sa!r} is neither a bbox \"minlon,minlat,maxlon,maxlat\" nor an "
                                  f"existing polygon file ({spec!r} does not exist)")
    else:
        raise ConfigError(f"{w} study_area must be a bbox \"minlon,minlat,maxlon,maxlat\" or a polygon file path")
    crs = _str(t, "crs", w)
    try:
        area = as_study_area(spec, working_crs=crs)
    except DpgeoError as exc:
        raise ConfigError(f"{w} study_area: {exc}") from None
    total = t["total_epsilon"]
    if isinstance(total, bool) or not isinstance(total, (numbers.Real, str)):
        raise ConfigError(f"{w} total_epsilon must be a number, e.g. 2.0; got {total!r}")
    try:
        total = exact_value(total, "total_epsilon")
    except DpgeoError:
        raise ConfigError(f"{w} total_epsilon must be a finite number, got {t['total_epsilon']!r}") from None
    if total <= 0:
        raise ConfigError(f"{w} total_epsilon must be > 0, got {format_exact(total)}")
    max_eps = None
    if "max_epsilon" in t:
        try:
            max_eps = exact_value(t["max_epsilon"], "max_epsilon")
        except DpgeoError:
            raise ConfigError(f"{w} max_epsilon must be a number > 0") from None
        if max_eps <= 0:
            raise ConfigError(f"{w} max_epsilon must be > 0")
    person = _str(t, "person", w)
    k = _int(t, "max_points_per_person", w, 1, 10**6) if "max_points_per_person" in t else None
    if (person is None) != (k is None):
        raise ConfigError(f"{w}: person and max_points_per_person go together (the column naming each point's person, "
                          "and the most points one person may contribute)")
    per_record = _int(t, "max_points_per_record", w, 1, 10**6) if "max_points_per_record" in t else 1
    if person is not None and per_record != 1:
        raise ConfigError(f"{w}: with person, bound the contribution with max_points_per_person, not "
                          "max_points_per_record")
    quoted = t.get("quoted_newlines", False)
    if not isinstance(quoted, bool):
        raise ConfigError(f"{w} quoted_newlines must be true or false (true only for a CSV export with line breaks "
                          "inside quoted fields)")
    private = t.get("private_releases", False)
    if not isinstance(private, bool):
        raise ConfigError(f"{w} private_releases must be true or false")
    times = t.get("time_columns", [])
    if isinstance(times, str):
        times = [times]
    if not isinstance(times, list) or not all(isinstance(c, str) and c.strip() for c in times):
        raise ConfigError(f"{w} time_columns must be a list of column names (the times an analyst may make a series "
                          "of)")
    tz = _str(t, "timezone", w)
    if tz is not None:
        from ..periods import check_timezone

        try:
            check_timezone(tz)
        except DpgeoError as exc:
            raise ConfigError(f"{w} timezone: {exc}") from None
    return DatasetConfig(
        name=name, path=data_path, study_area=spec, area=area, total_epsilon=total,
        title=_str(t, "title", w) or name, description=_str(t, "description", w) or "",
        layer=_str(t, "layer", w), x=_str(t, "x", w), y=_str(t, "y", w), input_crs=_str(t, "input_crs", w),
        quoted_newlines=quoted, crs=crs,
        person=person, max_points_per_person=k, max_points_per_record=per_record, max_epsilon=max_eps,
        private_releases=private, time_columns=tuple(times), timezone=tz, time_format=_str(t, "time_format", w),
        connection=conn, table=_str(t, "table", w), sql=_str(t, "sql", w), geometry=_str(t, "geometry", w))


def _input(t, base, w):
    """``(path, None)`` of a file input, or ``(None, connection)`` of a PostGIS one (checked, not connected)."""
    if "connection" in t:
        if "path" in t:
            raise ConfigError(f"{w}: give either path (a file) or connection (a PostGIS table), not both")
        conn = _str(t, "connection", w)
        for key in ("layer", "x", "y"):
            if key in t:
                raise ConfigError(f"{w} {key} is for files; a PostGIS input takes table or sql (and geometry)")
        from ..counting.postgis import postgis

        try:  # the syntax and the password rule only: the database is reached when a job runs
            postgis(conn or "", table=_str(t, "table", w), sql=_str(t, "sql", w), geometry=_str(t, "geometry", w))
        except DpgeoError as exc:
            raise ConfigError(f"{w} connection: {exc}") from None
        return None, conn
    for key in ("table", "sql", "geometry"):
        if key in t:
            raise ConfigError(f"{w} {key} reads a PostGIS database: add connection = \"postgresql://...\"")
    data_path = _path(t, "path", base, w, required=True)
    if not os.path.isfile(data_path):
        raise ConfigError(f"{w} path: the input {data_path!r} does not exist")
    return data_path, None


def _analyst(name: str, t: dict, datasets: dict) -> AnalystConfig:
    w = f"[analysts.{name}]"
    if not NAME_PATTERN.match(name):
        raise ConfigError(f"{w}: an analyst name is 1-64 letters, digits, '_', '-' or '.', starting with a letter or "
                          "digit")
    _only(t, {"token_sha256", "datasets"}, w)
    h = t.get("token_sha256")
    if not isinstance(h, str) or not _HEX64.match(h.strip().lower()):
        raise ConfigError(f"{w} token_sha256 must be the SHA-256 of the analyst's token as 64 hex digits (never the "
                          "token itself); make both with: dpgeo serve --new-token " + name)
    ds = t.get("datasets", [])
    if not isinstance(ds, list) or not all(isinstance(d, str) for d in ds):
        raise ConfigError(f"{w} datasets must be a list of dataset names, e.g. [\"stops\"]")
    for d in ds:
        if d not in datasets:
            raise ConfigError(f"{w} datasets: {d!r} is not configured (add [datasets.{d}] or remove it here)")
    return AnalystConfig(name=name, token_sha256=h.strip().lower(), datasets=tuple(dict.fromkeys(ds)))


# -- small checks ------------------------------------------------------------------------------------------------

def _table(t, key, required, where=None):
    where = where or key
    if key not in t:
        if required:
            raise ConfigError(f"the configuration has no [{where}] table")
        return {}
    v = t[key]
    if not isinstance(v, dict):
        raise ConfigError(f"[{where}] must be a table")
    return v


def _only(t, allowed, where):
    unknown = sorted(set(t) - set(allowed))
    if unknown:
        raise ConfigError(f"{where}: unknown key {unknown[0]!r} (known: {', '.join(sorted(allowed))})")


def _str(t, key, where):
    v = t.get(key)
    if v is None:
        return None
    if not isinstance(v, str) or not v.strip() or any(ord(c) < 32 for c in v) or len(v) > 4096:
        raise ConfigError(f"{where} {key} must be a non-empty one-line string")
    return v


def _path(t, key, base, where, required=False):
    v = t.get(key)
    if v is None:
        if required:
            raise ConfigError(f"{where} has no {key}")
        return None
    if not isinstance(v, str) or not v.strip():
        raise ConfigError(f"{where} {key} must be a path (relative to the configuration file)")
    return os.path.normpath(os.path.join(base, os.path.expanduser(v)))


def _int(t, key, where, lo, hi):
    v = t[key]
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise ConfigError(f"{where} {key} must be an integer in [{lo}, {hi}], got {v!r}")
    return v


def _all_float(parts):
    try:
        [float(p) for p in parts]
    except ValueError:
        return False
    return True
