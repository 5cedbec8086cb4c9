"""The neighbour fuzzer, a bounded run: for every input path, D and D′ = D plus one drawn record.

The machinery is in ``tests/neighbours.py``.

The reader's property is checked on 8 drawn neighbours per path and the
command line's (``--unattended``: same exit code, standard error and files)
on 1 per file path, with hypothesis' database off so that every run of the
suite draws afresh. ``benchmarks/fuzz_readers.py`` runs the same checks for
as many cases as asked (docs/results.md, "Readers: the neighbour fuzzer").
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import neighbours as nb

_SETTINGS = dict(deadline=None, database=None, suppress_health_check=list(HealthCheck))


@pytest.mark.parametrize("path", list(nb.PATHS))
def test_one_more_record_changes_the_records_used_by_at_most_itself(path, tmp_path):
    @settings(max_examples=8, **_SETTINGS)
    @given(st.data())
    def check(data):
        assert nb.check_reader(path, data.draw, str(tmp_path)) is None

    check()


@pytest.mark.parametrize("path", nb.FILE_PATHS)
def test_one_more_record_changes_nothing_an_unattended_run_shows(path, tmp_path):
    @settings(max_examples=1, **_SETTINGS)
    @given(st.data())
    def check(data):
        assert nb.check_cli(path, data.draw, str(tmp_path)) is None

    check()
