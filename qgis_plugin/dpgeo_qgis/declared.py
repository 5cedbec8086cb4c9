"""Processing parameters and help generated from a mechanism's declaration (:mod:`dpgeo.declare`).

A declared parameter becomes a QGIS parameter of its kind (a distance in
metres, a number, an integer, a choice, a string, a checkbox) with the
declared title, unit, range, default and help; the same declaration gives the
library keyword argument back from the dialog's value. Nothing here knows a
particular mechanism.
"""

from __future__ import annotations

import html

from qgis.core import (
    QgsProcessing,
    QgsProcessingException,
    QgsProcessingParameterBoolean,
    QgsProcessingParameterCrs,
    QgsProcessingParameterDefinition,
    QgsProcessingParameterDistance,
    QgsProcessingParameterEnum,
    QgsProcessingParameterFeatureSink,
    QgsProcessingParameterNumber,
    QgsProcessingParameterString,
    QgsUnitTypes,
)

from .parameters import is_set, tr

__all__ = ["qgis_parameter", "parameter_value", "param_values", "help_html", "label", "advanced", "library_call",
           "is_layer_output", "shared_widget", "shared_params"]

#: How far inside an open end of a range the dialog's bound is put (QGIS bounds are closed).
_OPEN = 1e-6


def label(p) -> str:
    """The dialog's label of a declared parameter: its title and unit."""
    unit = f" ({p.unit})" if p.unit and p.unit not in ("points",) else ""
    return tr(p.title) + unit


def _bounds(p):
    lo, hi = p.minimum, p.maximum
    if lo is not None and p.exclusive_minimum:
        lo = lo + max(abs(lo), 1.0) * 1e-12 if p.kind == "number" else lo + 1
    if hi is not None and p.exclusive_maximum:
        hi = hi - max(abs(hi), 1.0) * _OPEN if p.kind == "number" else hi - 1
    return lo, hi


def is_layer_output(p) -> bool:
    """Whether declared parameter ``p`` asks for a second layer of the release (an optional output in QGIS)."""
    return p.kind == "flag" and bool(getattr(p, "layer_style", None))


def qgis_parameter(p) -> QgsProcessingParameterDefinition:
    """The QGIS parameter of declared parameter ``p`` (a flag that asks for a second layer: an optional output
    layer, skipped unless the user names one)."""
    if is_layer_output(p):
        q = QgsProcessingParameterFeatureSink(p.qgis, tr(p.title), QgsProcessing.TypeVectorPolygon, optional=True,
                                              createByDefault=False)
        if hasattr(q, "setHelp"):
            q.setHelp(tr(p.help))
        return q
    optional = not p.required and p.default is None
    # a required parameter shows its suggested starting value (the dialog is valid as it opens)
    default = p.suggested if p.required or p.default is None else p.default
    if p.kind == "choice":
        options = [tr(t) for t in (p.labels or p.choices)]
        q = QgsProcessingParameterEnum(p.qgis, label(p), options=options,
                                       defaultValue=None if default is None else list(p.choices).index(default),
                                       optional=optional)
    elif p.kind == "flag":
        q = QgsProcessingParameterBoolean(p.qgis, label(p), defaultValue=bool(default), optional=optional)
    elif p.kind == "text":
        q = QgsProcessingParameterString(p.qgis, label(p), defaultValue=default, optional=optional)
    else:
        lo, hi = _bounds(p)
        kw = {}
        if lo is not None:
            kw["minValue"] = lo
        if hi is not None:
            kw["maxValue"] = hi
        if p.kind == "number" and p.unit == "metres":
            q = QgsProcessingParameterDistance(p.qgis, label(p), defaultValue=default, optional=optional, **kw)
            q.setDefaultUnit(QgsUnitTypes.DistanceMeters)  # metres whatever the layer's units
        else:
            t = QgsProcessingParameterNumber.Integer if p.kind == "integer" else QgsProcessingParameterNumber.Double
            q = QgsProcessingParameterNumber(p.qgis, label(p), t, defaultValue=default, optional=optional, **kw)
    if hasattr(q, "setHelp"):
        q.setHelp(tr(p.help))
    if p.advanced:
        q.setFlags(q.flags() | QgsProcessingParameterDefinition.FlagAdvanced)
    return q


def parameter_value(alg, p, parameters, context):
    """The library value of declared parameter ``p`` from the dialog (``None`` when an optional one is unset)."""
    given = is_set(parameters.get(p.qgis))
    if is_layer_output(p):  # asked for when its output is not skipped
        return True if given and alg.parameterAsOutputLayer(parameters, p.qgis, context) else None
    if not given and (p.required or p.default is None):
        return None
    if p.kind == "choice":
        return p.choices[alg.parameterAsEnum(parameters, p.qgis, context)]
    if p.kind == "flag":
        return alg.parameterAsBool(parameters, p.qgis, context)
    if p.kind == "text":
        return alg.parameterAsString(parameters, p.qgis, context)
    if p.kind == "integer":
        return alg.parameterAsInt(parameters, p.qgis, context)
    return alg.parameterAsDouble(parameters, p.qgis, context)


def param_values(alg, mech, parameters, context) -> dict:
    """Every declared parameter of ``mech`` offered in QGIS, as library keyword arguments, checked together."""
    values = {p.name: parameter_value(alg, p, parameters, context) for p in mech.offered("qgis")}
    for group in mech.exactly_one:
        if sum(values.get(n) is not None for n in group) != 1:
            text = mech.exactly_one_message(group)
            raise QgsProcessingException(tr(text[:1].upper() + text[1:] + "."))
    for group in getattr(mech, "at_most_one", ()):
        if sum(values.get(n) is not None for n in group) > 1:
            text = mech.at_most_one_message(group)
            raise QgsProcessingException(tr(text[:1].upper() + text[1:] + "."))
    return {name: v for name, v in values.items() if v is not None}  # unset: the library's own rule


def help_html(mech, notes="", layers=True) -> str:
    """The algorithm's help: the mechanism's description, then one paragraph per parameter (``layers``: with
    the optional output layers)."""
    parts = [f"<p>{html.escape(tr(mech.description))}</p>"]
    for p in mech.offered("qgis"):
        if is_layer_output(p) and not layers:
            continue
        default = "" if p.required else f" <i>({html.escape(tr('default'))}: {html.escape(p.default_text())})</i>"
        parts.append(f"<p><b>{html.escape(label(p))}</b>: {html.escape(tr(p.help))}{default}</p>")
    return "".join(parts) + notes


def advanced(p):
    """``p`` shown under Advanced."""
    p.setFlags(p.flags() | QgsProcessingParameterDefinition.FlagAdvanced)
    return p


def library_call(dpgeo, mech):
    """The library function that runs ``mech``: its entry point in ``dpgeo`` if it has one, else the pipeline."""
    if mech.entry_point and hasattr(dpgeo, mech.entry_point):
        return getattr(dpgeo, mech.entry_point)
    from dpgeo.pipeline.run import run_preview, run_release

    if mech.reads is None:
        return lambda **kw: run_preview(mech, kw)
    return lambda points, **kw: run_release(mech, points, kw)


def shared_params():
    """The shared parameters offered in QGIS, as declared in the library (imported when an algorithm is built)."""
    from dpgeo.shared_params import shared_offered

    return shared_offered("qgis")


def shared_widget(p):
    """The QGIS parameter of a declared shared parameter: the declaration's own kind (:func:`.declared.
    qgis_parameter`), or the widget QGIS has for it (a field of the input for the person, a CRS, a ledger file,
    the dataset name with its live budget); title, help and advanced flag from the declaration."""
    from qgis.core import QgsProcessingParameterField, QgsProcessingParameterFile

    if p.name == "person":
        q = QgsProcessingParameterField(p.qgis, label(p), parentLayerParameterName="INPUT",
                                        optional=True)
    elif p.name == "crs":
        q = QgsProcessingParameterCrs(p.qgis, tr(p.title) + tr(" (default: {})").format(tr(p.none_means)),
                                      optional=True)
    elif p.name == "ledger":
        q = QgsProcessingParameterFile(p.qgis, tr(p.title) + tr(" (default: {})").format(tr(p.none_means)),
                                       behavior=QgsProcessingParameterFile.File,
                                       fileFilter=tr("dpgeo ledger (*.sqlite *.db);;All files (*)"), optional=True)
    elif p.name == "dataset":
        q = QgsProcessingParameterString(p.qgis, tr(p.title) + tr(" (default: {})").format(tr(p.none_means)),
                                         optional=True)
        # in the dialog, the dataset's budget is shown under the name, live (budget_widget.py)
        q.setMetadata({"widget_wrapper": {"class": f"{__package__}.budget_widget.DatasetWidgetWrapper"}})
    else:
        return qgis_parameter(p)
    q.setHelp(tr(p.help))
    return advanced(q) if p.advanced else q
