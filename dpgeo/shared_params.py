"""The parameters every release shares, declared once for every front end.

Besides its own parameters (:mod:`dpgeo.declare`) and the options of a map
series (:mod:`dpgeo.series_params`), every release takes the same keyword
arguments: ε, the public study area and its CRS, the working CRS, the
contribution bound (points per record, or a person column and a cap per
person), the test seed, the dataset and ledger it is charged to, the memory
limit, ... They are declared here as :class:`~dpgeo.declare.Param`, with one
name, one title, one help text, one range and where they are offered. The
library checks ε with this declaration; the command line
(:mod:`dpgeo.cli.args`), the QGIS parameters (``qgis_plugin/dpgeo_qgis``), the
service's process inputs (:mod:`dpgeo.server.processes`), the entry points'
documentation and ``docs/parameters.md`` read it.

One name per concept: the contribution bound of a record is
``max_points_per_record`` everywhere (``--max-points-per-record``,
``MAX_POINTS_PER_RECORD``, the service dataset's ``max_points_per_record``);
the library's older keyword ``sensitivity=`` is a deprecated alias of it.

ε is a number in (0, 100] everywhere (:data:`EPSILON_MAX`); above
:data:`WEAK_EPSILON` every front end warns that the guarantee is weak
(:func:`epsilon_warning`; the reasons are in docs/privacy.md, "Choosing ε").

Like :mod:`dpgeo.declare`, this module imports nothing of the data side.

Examples
--------
>>> shared_param("epsilon").range_text()
'in (0, 100]'
>>> shared_param("max_points_per_record").cli_flag
'--max-points-per-record'
>>> is_weak_epsilon(1.0), is_weak_epsilon(50)
(False, True)
"""

from __future__ import annotations

import math
import numbers

from .declare import Param, named, offered_on

__all__ = ["SHARED_PARAMS", "EPSILON_MAX", "WEAK_EPSILON", "ALIASES", "PREVIEW_KEYS", "shared_param", "shared_offered",
           "is_weak_epsilon", "epsilon_warning", "epsilon_status"]

#: The largest ε any front end accepts. At ε = 100 a record may change the probability of an outcome
#: by a factor e¹⁰⁰ ≈ 10⁴³: nothing is protected any more, so a larger value can only be a mistake.
EPSILON_MAX = 100.0
#: Above this ε every front end warns that the guarantee is weak (docs/privacy.md, "Choosing ε"): one record may
#: change the probability of an outcome by more than e¹⁰ ≈ 22,000 times.
WEAK_EPSILON = 10.0

_ALL = frozenset({"api", "cli", "qgis", "service"})
_LOCAL = frozenset({"api", "cli", "qgis"})  # the service takes them from the dataset's configuration
_CODE = frozenset({"api", "cli"})  # QGIS has widgets of its own (the study area), or none (a scheduler)

#: The parameters every release shares, in the order the front ends show them.
SHARED_PARAMS = (
    Param("epsilon", "number", "Privacy budget ε (smaller = more private, noisier)",
          "The privacy budget this release spends: the whole release is ε-differentially private (δ = 0). Smaller "
          f"ε: more noise, more privacy. Above {WEAK_EPSILON:g} the guarantee is weak, and every front end says "
          "so (docs/privacy.md, \"Choosing ε\").",
          minimum=0, maximum=EPSILON_MAX, exclusive_minimum=True, suggested=1.0, label="epsilon (the privacy budget)",
          fronts=_ALL),
    Param("dataset", "text", "Dataset name in the privacy-budget ledger",
          "The population this release protects, as named in the privacy-budget ledger: every release of the same "
          "people is charged to this name, whatever file they come from (several files of the same people share "
          "one name).",
          default=None, fronts=_ALL, none_means="the dataset declared for the input's content (dpgeo budget declare)"),
    Param("max_points_per_record", "integer", "Maximum points per record",
          "The most points one record may contribute; the noise scales with it.",
          minimum=1, default=1, advanced=True, fronts=_LOCAL, flag="--max-points-per-record"),
    Param("person", "text", "Person field (protect whole persons, not single points)",
          "The column saying whose each point is (a patient, driver, account): the guarantee then covers everything "
          "one person contributes; needs the maximum points per person. Records without a person are skipped.",
          default=None, fronts=_LOCAL, qgis_name="PERSON_FIELD", none_means="none"),
    Param("max_points_per_person", "integer", "Maximum points per person K (needed with a person field)",
          "Each person keeps at most K of their points, chosen uniformly at random; the noise scales with K. "
          "Required with a person column.",
          minimum=1, default=None, fronts=_LOCAL, none_means="none"),
    Param("domain", "text", "Public study area",
          "The public study area: a bbox minx,miny,maxx,maxy (in the domain CRS) or a polygon file, known without "
          "looking at the data. Points outside it are dropped.",
          default=None, fronts=_CODE, none_means="none (refused: give one)"),
    Param("domain_crs", "text", "CRS of a bbox study area",
          "The CRS of a bbox or polygon study area given without one.",
          default=None, fronts=_CODE, none_means="EPSG:4326 (longitude/latitude)"),
    Param("crs", "text", "Working CRS in metres",
          "The working CRS, projected, in metres.",
          default=None, advanced=True, fronts=_LOCAL, qgis_name="WORKING_CRS",
          none_means="the UTM zone of the study area's centre"),
    Param("seed", "integer", "Test seed (for tests only: makes the result NOT private)",
          "A fixed random seed, FOR TESTS ONLY: the noise is reproducible, so the output is marked not private and "
          "not charged.",
          minimum=0, default=None, advanced=True, fronts=_LOCAL, none_means="none (private noise)"),
    Param("domain_from_data", "flag", "Study area from the data (NOT private)",
          "Use the data's own extent as the study area: exploration only; the output is marked NOT differentially "
          "private and not charged.",
          default=False, fronts=_CODE),
    Param("input_crs", "text", "CRS of an input that declares none",
          "The CRS of an input (a CSV, a Parquet table, a file) that declares none.",
          default=None, fronts=_CODE, none_means="none"),
    Param("unattended", "flag", "Unattended run",
          "Conditions of the private data (no point in the study area, no usable record) are warnings for the data "
          "owner, not errors: a valid, possibly empty, layer is always written, so whoever sees only the output "
          "learns nothing beyond the DP result. A service always runs this way.",
          default=False, fronts=_CODE),
    Param("ledger", "text", "Privacy-budget ledger file",
          "The privacy-budget ledger file that records the release and refuses it beyond the dataset's total.",
          default=None, advanced=True, fronts=_LOCAL, none_means="$DPGEO_LEDGER, else your user data directory"),
    Param("analyst", "text", "Analyst",
          "Who runs the release, for the ledger.",
          default=None, fronts=frozenset({"api"}), none_means="the operating-system user"),
    Param("progress", "text", "Progress callback",
          "progress(fraction, message) between stages, and about every second while a long input is read; raise "
          "from it to cancel.",
          default=None, fronts=frozenset({"api"}), none_means="none"),
    Param("scheduler", "text", "Dask scheduler",
          "Count the points with Dask: 'local' starts a cluster here ('local:N': N workers), an address such as "
          "tcp://host:8786 uses a running one. The workers only count; the noise is drawn here.",
          default=None, fronts=_CODE, none_means="count here, in one process"),
    Param("max_memory_bytes", "text", "Memory limit",
          "Refuse, before anything is read, a run estimated to need more memory than this (e.g. 8G).",
          default=None, fronts=_CODE, flag="--max-memory", none_means="$DPGEO_MAX_MEMORY, else half the memory"),
)

#: The shared parameters a preview takes (it reads no data and spends nothing).
PREVIEW_KEYS = ("epsilon", "max_points_per_record", "domain", "domain_crs", "crs", "max_memory_bytes")

#: Deprecated names of shared parameters: ``old: new`` (still accepted, with a DeprecationWarning).
ALIASES = {"sensitivity": "max_points_per_record"}


def shared_param(name) -> Param:
    """The declared shared parameter called ``name`` (or by a deprecated alias)."""
    return named(SHARED_PARAMS, ALIASES.get(name, name))


def shared_offered(front) -> tuple:
    """The shared parameters offered on ``front`` (``"api"``, ``"cli"``, ``"qgis"``, ``"service"``)."""
    return offered_on(SHARED_PARAMS, front)


def _real(epsilon) -> bool:
    return isinstance(epsilon, numbers.Real) and not isinstance(epsilon, bool) and math.isfinite(epsilon)


def is_weak_epsilon(epsilon) -> bool:
    """Whether ``epsilon`` is above :data:`WEAK_EPSILON` (a weak guarantee)."""
    return _real(epsilon) and epsilon > WEAK_EPSILON


def epsilon_warning(epsilon) -> str | None:
    """The one-line warning every front end shows for a weak ``epsilon``; ``None`` when it is not weak.

    Examples
    --------
    >>> epsilon_warning(1) is None
    True
    >>> epsilon_warning(50)[:40]
    'ε = 50 is above 10: a weak guarantee (on'
    """
    if not is_weak_epsilon(epsilon):
        return None
    return (f"ε = {epsilon:g} is above {WEAK_EPSILON:g}: a weak guarantee (one record may change the "
            f"probability of what is published {_factor(epsilon)} times); a privacy officer would not call this "
            f"private. Use ε ≤ {WEAK_EPSILON:g}, 1 or less where you can (docs/privacy.md, \"Choosing ε\")")


def _factor(epsilon) -> str:
    exponent = epsilon / math.log(10)
    return f"up to e^{epsilon:g} ≈ 10^{exponent:.0f}"


def epsilon_status(metadata: dict) -> str:
    """``"private"``, ``"weak"`` (private, ε above :data:`WEAK_EPSILON`) or ``"not private"`` for a release's
    metadata: what the HTML panel, the PNG footer, QGIS and ``dpgeo info`` show.

    Examples
    --------
    >>> epsilon_status({"differentially_private": True, "epsilon": 50.0})
    'weak'
    """
    if metadata.get("differentially_private") is not True:
        return "not private"
    return "weak" if is_weak_epsilon(metadata.get("epsilon")) else "private"
