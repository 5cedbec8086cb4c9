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
    #: (output name, key in the preview, description, column heading). The first ones are for a run with a
    #: radius and MinPts; without them (auto) they are empty, and the auto ones below are filled (those that
    #: depend on the number of points when one is given: "Number of points (auto)").
    NUMBERS = [
        ("GAMMA", "gamma", "Γ: bound on the noise in a neighbourhood sum (with a radius)", "Γ"),
        ("CORE_THRESHOLD", "core_threshold", "Core threshold MinPts + Γ (noisy neighbourhood count; with a radius)",
         "core threshold"),
        ("EXTENT_THRESHOLD", "extent_threshold", "Extent threshold: noisy count a grown span reaches into "
         "(with a radius)", "extent threshold"),
        ("MIN_POINTS_PRIME", "min_points_prime", "MinPts′: true neighbourhood count sure to be found "
         "(with a radius)", "MinPts′"),
        ("COUNT_ERROR_95", "count_error_95", "Expected count error (95%; with a radius)", "count error (95%)"),
        ("N_CELLS", "n_cells", "Grid cells in the study area", "grid cells"),
        ("KAPPA", "kappa", "κ: cells in a neighbourhood (with a radius)", "κ"),
        ("CELL_WIDTH_M", "cell_width_m", "Cell width (metres)", "cell width (m)"),
        ("N_POINTS", "n_points", "auto: the number of points the auto outputs are for", "points"),
        ("SMALLEST_CLUSTER_POINTS", "smallest_cluster_points",
         "auto: the fewest points a cluster can hold and still be shown", "smallest cluster"),
        ("LOWEST_LEVEL_MIN", "lowest_level_min", "auto: the lowest level shown is at least this (noisy points "
         "in 3×3 cells; a map with points everywhere)", "lowest level from"),
        ("LOWEST_LEVEL_MAX", "lowest_level_max", "auto: ... and at most this (a map with one place of points)",
         "lowest level to"),
        ("NOISE_SD_OF_LEVEL", "noise_sd_of_level", "auto: standard deviation of the noise of a level (a 3×3 sum)",
         "level noise s.d."),
        ("GAMMA_ALL_LEVELS", "gamma_all_levels", "auto: Γ, every level within it of its true value (probability "
         "1 − β)", "Γ every level"),
    ]

    def shortHelpString(self):  # noqa: N802 (QGIS API)
        return tr(help_html(self.mechanism, "<p>No point layer is read, so this spends no privacy budget: try "
                                            "several ε before choosing one. Add ε values to <i>Compare ε values</i> "
                                            "to get a table for all of them.</p>" + _AUTO_NOTE, layers=False))

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
        for out, _, desc, _ in self.NUMBERS:
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
        by_points = _by_points(main)
        numbers = dict(main, **by_points[0]) if len(by_points) == 1 else main  # auto: one number of points
        for out, key, _, _ in self.NUMBERS:
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
        return [(head, key) for _, key, _, head in self.NUMBERS if any(key in d for _, d in rows)]

    @staticmethod
    def _lines(rows):
        """``(ε, numbers)`` a line each: auto's preview has a line per number of points."""
        out = []
        for eps, d in rows:
            out += [(eps, dict(d, **r)) for r in _by_points(d)] or [(eps, d)]
        return out

    def _log_table(self, rows, feedback):
        feedback.pushInfo(self.tr("Noise preview (no data read, no budget spent):"))
        full = rows[0]
        rows = self._lines(rows)
        cols = self._columns(rows)
        heads = [head.replace("threshold", "thr.") for head, _ in cols]
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


_AUTO_NOTE = ("<p><b>Without a radius and MinPts</b> (auto) the preview says what such a run would do: its cell "
              "width, the fewest points a cluster can hold and still be shown, and the range of its lowest level, "
              "for a number of points (give <i>Number of points (auto)</i> to have them as the outputs "
              "N_POINTS, CELL_WIDTH_M, N_CELLS, SMALLEST_CLUSTER_POINTS, LOWEST_LEVEL_MIN, LOWEST_LEVEL_MAX and "
              "GAMMA_ALL_LEVELS; "
              "without it the table shows 1,000 to 10 million points). Γ, MinPts′, the thresholds, κ and the count "
              "error are for a run with a radius.</p>")


def _by_points(d):
    """The lines of an auto preview, one per number of points, with the lowest level's range as two numbers."""
    out = []
    for r in d.get("by_points") or []:
        r = dict(r)
        lo_hi = r.pop("floor_level_range", None)
        if isinstance(lo_hi, (list, tuple)) and len(lo_hi) == 2:
            r["lowest_level_min"], r["lowest_level_max"] = lo_hi
        out.append(r)
    return out


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
