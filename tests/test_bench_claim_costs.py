"""The claim-cost benchmark still runs (tiny sizes; its figures are printed, never asserted)."""

from __future__ import annotations

import json

import pytest
from bench import claim_costs


def test_the_guards_part_drains_every_variant(capsys: pytest.CaptureFixture[str]) -> None:
    assert claim_costs.main(["--part", "guards", "--jobs", "300", "--batch", "50", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert list(report["guards"]) == list(claim_costs.GUARDS)
    for cost in report["guards"].values():
        assert set(cost) == {"complete", "claim", "commit", "total"}
        assert all(value > 0 for value in cost.values())


def test_a_part_must_be_one_it_knows() -> None:
    with pytest.raises(SystemExit):
        claim_costs.main(["--part", "everything"])


def test_the_kinds_part_times_the_claim_with_and_without_the_kind_filter(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = ["--part", "kinds", "--backlog", "300", "--skipped", "60", "--batch", "20"]
    assert claim_costs.main([*args, "--runs", "2", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)["kinds"]
    assert list(report) == [
        "SQLite",
        "PostgreSQL",
        "SQLite, 60 of another kind ahead",
        "PostgreSQL, 60 of another kind ahead",
    ]
    for cost in report.values():
        assert set(cost) == {"without the filter", "with the filter"}
        assert all(value > 0 for value in cost.values())
