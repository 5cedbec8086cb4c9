"""The algorithm of a declared mechanism that reads no data: what a release would look like, for free.

The noise preview: its parameters come from the declaration; it shows the
preview for ε and for a list of other ε values (a table in the log and an
HTML report) and returns the main numbers as outputs.
"""

from __future__ import annotations

import html
import json

from qgis.core import (
    QgsProcessingException,
    QgsProcessingOutputNumber,
    QgsProcessingOutputString,
    QgsProcessingParameterFileDestination,
    QgsProcessingParameterString,
)

from .base import DeclaredBase
from .declared import help_html, library_call, param_values
from .parameters import is_set, tr

__all__ = ["PreviewAlgorithm"]


class PreviewAlgorithm(DeclaredBase):
    """The algorithm of a declared mechanism that reads no data: what a release would look like, for free."""

    COMPARE = "COMPARE_EPSILONS"
    OUTPUT_HTML = "OUTPUT_HTML"
    PREVIEW_JSON = "PREVIEW_JSON"
    def numbers(self):
        """``(output name, key in the preview, description, column heading)`` of every number of the preview that
        has a column: the fields declared for it (``dpgeo.metadata_fields``: the common ones and the mechanism's
        ``outputs``), in their declared order. Without data, a field a run would not have is empty."""
        from dpgeo.metadata_fields import COMMON_FIELDS

        return [(f.key.upper(), f.key, f.label + (f": {f.help}" if f.help else ""), f.column)
                for f in (*COMMON_FIELDS, *self.mechanism.outputs) if f.column]

    def shortHelpString(self):  # noqa: N802 (QGIS API)
        return tr(help_html(self.mechanism, "<p>No point layer is read, so this spends no privacy budget: try "
                                            "several ε before choosing one. Add ε values to <i>Compare ε values</i> "
                                            "to get a table for all of them.</p>" + self._outputs_note(),
                               layers=False))

    def _outputs_note(self):
        names = ", ".join(out for out, _, _, _ in self.numbers())
        return (f"<p>The main numbers are also outputs ({html.escape(names)}); those a preview without some "
                "parameters cannot compute are empty.</p>")

    def initAlgorithm(self, config=None):  # noqa: N802 (QGIS API)
        from dpgeo.shared_params import PREVIEW_KEYS

        self.add_shared(advanced=False, names=PREVIEW_KEYS)
        self.add_declared(advanced=False)
        self.add_study_area(data_fallback=False)
        self.addParameter(QgsProcessingParameterString(
            self.COMPARE, self.tr("Compare ε values (comma-separated, optional)"),
            defaultValue="0.1, 0.5, 1, 2", optional=True))
        self.add_shared(advanced=True, names=PREVIEW_KEYS)
        self.add_declared(advanced=True)
        self.addParameter(QgsProcessingParameterFileDestination(
            self.OUTPUT_HTML, self.tr("Preview report"), self.tr("HTML files (*.html)"), optional=True,
            createByDefault=True))
        for out, _, desc, _ in self.numbers():
            self.addOutput(QgsProcessingOutputNumber(out, self.tr(desc)))
        self.addOutput(QgsProcessingOutputString(self.PREVIEW_JSON, self.tr("Preview (JSON)")))

    def _compare_values(self, parameters, context, epsilon):
        values = [epsilon]
        # not given at all (qgis_process, processing.run): the default list; given empty: none
        given = self.COMPARE in parameters
        text = self.parameterAsString(parameters, self.COMPARE, context) \
            if not given or is_set(parameters.get(self.COMPARE)) else ""
        if text:
            for part in text.replace(";", ",").split(","):
                part = part.strip()
                if not part:
                    continue
                try:
                    v = float(part)
                except ValueError:
                    raise QgsProcessingException(self.tr("'Compare ε values' must be numbers separated by "
                                                         "commas, e.g. 0.1, 0.5, 1; got {!r}.").format(part)) from None
                if v not in values:
                    values.append(v)
        return values

    def processAlgorithm(self, parameters, context, feedback):  # noqa: N802 (QGIS API)
        preview = library_call(self.load_dpgeo(feedback), self.mechanism)
        epsilon = self.parameterAsDouble(parameters, self.EPSILON, context)
        base = param_values(self, self.mechanism, parameters, context)
        area = self.study_area(parameters, context, feedback, source=None)
        base["domain"] = area["domain"]
        base["domain_crs"] = area["domain_crs"]
        working = self.working_crs(parameters, context)
        if working:
            base["crs"] = working
        per_record = self.optional_int(parameters, self.MAX_POINTS_PER_RECORD, context)
        if per_record is not None and per_record != 1:
            base["max_points_per_record"] = per_record
        values = self._compare_values(parameters, context, epsilon)
        rows = []
        for i, eps in enumerate(values):
            if feedback.isCanceled():
                raise QgsProcessingException(self.tr("Cancelled by the user."))
            rows.append((eps, self.call_library(preview, feedback, **base, epsilon=eps)))
            feedback.setProgress(100.0 * (i + 1) / len(values))
        main = rows[0][1]
        self._log_table(rows, feedback)

        results = {}
        by_points = self.mechanism.table_rows(main)
        numbers = dict(main, **by_points[0]) if len(by_points) == 1 else main  # auto: one number of points
        for out, key, _, _ in self.numbers():
            value = numbers.get(key)
            results[out] = float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
        results[self.PREVIEW_JSON] = json.dumps(main, sort_keys=True, default=str)
        if is_set(parameters.get(self.OUTPUT_HTML)):
            path = self.parameterAsFileOutput(parameters, self.OUTPUT_HTML, context)
            if path:
                with open(path, "w", encoding="utf-8") as fh:
                    fh.write(self._html(rows, base))
                results[self.OUTPUT_HTML] = path
        return results

    def _columns(self, rows):
        """The preview's numbers that every row has, as (heading, key)."""
        return [(head, key) for _, key, _, head in self.numbers() if any(key in d for _, d in rows)]

    def _lines(self, rows):
        """``(ε, numbers)`` a line each: auto's preview has a line per number of points."""
        out = []
        for eps, d in rows:
            out += [(eps, dict(d, **r)) for r in self.mechanism.table_rows(d)] or [(eps, d)]
        return out

    def _log_table(self, rows, feedback):
        feedback.pushInfo(self.tr("Noise preview (no data read, no budget spent):"))
        full = rows[0]
        rows = self._lines(rows)
        cols = self._columns(rows)
        heads = [head for head, _ in cols]
        widths = [max(len(h), 10) for h in heads]
        feedback.pushInfo(f"{'ε':>8} " + " ".join(f"{h:>{w}}" for h, w in zip(heads, widths)))
        for eps, d in rows:
            feedback.pushInfo(f"{eps:>8g} " + " ".join(f"{_fmt(d.get(key)):>{w}}" for (_, key), w in zip(cols, widths)))
        feedback.pushInfo(self.tr("Full preview for ε = {}: {}").format(
            full[0], json.dumps(full[1], sort_keys=True, default=str)))

    def _html(self, rows, base):
        rows = self._lines(rows)
        cols = [("ε", None)] + self._columns(rows)
        head = "".join(f"<th>{html.escape(c)}</th>" for c, _ in cols)
        body = ""
        for eps, d in rows:
            cells = [f"{eps:g}"] + [_fmt(d.get(k)) for _, k in cols[1:]]
            body += "<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in cells) + "</tr>"
        given = ", ".join(f"{html.escape(p.title)} {html.escape(_fmt(base.get(p.name)))}"
                          for p in self.mechanism.offered("qgis") if base.get(p.name) is not None)
        return (
            "<html><head><meta charset='utf-8'><title>dpgeo noise preview</title></head><body>"
            f"<h2>{html.escape(self.mechanism.title)}</h2>"
            f"<p>{given}. No data was read and no privacy budget was spent.</p>"
            f"<table border='1' cellpadding='4' cellspacing='0'><tr>{head}</tr>{body}</table>"
            f"<p>{html.escape(self.mechanism.description)}</p></body></html>"
        )


def _fmt(v):
    if v is None:
        return "—"
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return f"{v:.4g}" if abs(v) < 1e6 else f"{v:.3e}"
    return str(v)
