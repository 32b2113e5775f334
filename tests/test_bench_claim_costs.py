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
