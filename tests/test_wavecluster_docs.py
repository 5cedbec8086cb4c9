"""The WaveCluster sensitivity table in docs/privacy.md matches the code."""

from pathlib import Path

import pytest

from dpgeo.mechanisms import wavecluster as wc

DOC = Path(__file__).resolve().parents[1] / "docs" / "privacy.md"


def table_rows():
    rows = []
    for w in wc.WAVELETS:
        for m in wc.SAFE_MODES:
            row = [w, m]
            for shape in [(64, 64), (65, 65)]:
                d = wc.approximation_sensitivity(shape, wavelet=w, mode=m, percentile=60)
                row += [f"{d['max_positive_taps']}, {d['max_negative_taps']}",
                        str(d["nonpositive_count"]), str(d["em_quality"])]
            rows.append("| " + " | ".join(row) + " |")
    return rows


def test_sensitivity_table_in_docs_is_current():
    if not DOC.exists():
        pytest.skip("docs not present")
    text = DOC.read_text(encoding="utf-8")
    start = text.index("<!-- sensitivity-table:start -->")
    end = text.index("<!-- sensitivity-table:end -->")
    lines = [ln for ln in text[start:end].splitlines() if ln.startswith("| ") and not ln.startswith("| wavelet")]
    assert lines == table_rows()
