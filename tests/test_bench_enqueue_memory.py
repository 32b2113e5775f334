"""The one-call memory benchmark still runs (small size; its figures are printed, never asserted
beyond being figures: the bound itself is tests/test_enqueue_memory.py's)."""

from __future__ import annotations

import json

import pytest
from bench import enqueue_memory


@pytest.mark.slow
def test_it_reports_the_peak_of_one_call_on_both_stores(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert enqueue_memory.main(["--jobs", "2000", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert list(report) == list(enqueue_memory.STORES)
    for modes in report.values():
        assert list(modes) == list(enqueue_memory.MODES)
        for figures in modes.values():
            assert figures["jobs"] == 2000
            assert figures["peak"] >= figures["start"] > 0


def test_a_batch_of_no_jobs_is_refused() -> None:
    with pytest.raises(SystemExit):
        enqueue_memory.main(["--jobs", "0"])
