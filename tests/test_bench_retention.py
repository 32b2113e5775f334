"""The retention benchmark still runs (a tiny size; timings are reported, never asserted)."""

from __future__ import annotations

import json

import pytest
from bench import retention


def test_retention_benchmark_runs(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--finished", "300", "--pending", "200", "--rounds", "2", "--per-round", "50"]
    assert retention.main([*args, "--window", "0.2", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    baseline, pruning = report["claims"]
    assert (baseline["phase"], pruning["phase"]) == ("baseline", "pruning")
    assert pruning["compacted"] == 300 and baseline["compacted"] == 0
    assert baseline["jobs"] > 0 and pruning["jobs"] > 0
    assert set(report["sizes"]) == {"off", "compact", "delete"}
    assert all(len(sizes) == 2 for sizes in report["sizes"].values())


def test_the_size_runs_can_be_chosen(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--sizes-only", "--rounds", "1", "--per-round", "20", "--modes", "delete"]
    assert retention.main([*args, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["claims"] == [] and list(report["sizes"]) == ["delete"]
    with pytest.raises(SystemExit, match="choose among off, compact, delete"):
        retention.main(["--sizes-only", "--modes", "compact,everything"])
