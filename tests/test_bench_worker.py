"""The worker benchmark still runs (a small size; timings are reported, never asserted)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_worker_throughput_benchmark_runs() -> None:
    result = subprocess.run(
        [sys.executable, "bench/worker_throughput.py", "--jobs", "300", "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert (report["jobs"], report["succeeded"], report["concurrency"]) == (300, 300, 10)
    assert report["jobs_per_second"] > 0


@pytest.mark.slow
def test_worker_throughput_benchmark_runs_with_metrics_scraped() -> None:
    result = subprocess.run(
        [sys.executable, "bench/worker_throughput.py", "--jobs", "300", "--json", "--metrics"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert (report["succeeded"], report["metrics"]) == (300, True)
    assert report["scrapes"] >= 1  # scraped at least once while the worker drained


@pytest.mark.slow
def test_metrics_benchmarks_run(tmp_path: Path) -> None:
    """The gauges' bench (a tiny table), the hook's, and the on/off comparison."""
    gauges = subprocess.run(
        [sys.executable, "-m", "bench.metrics_gauges", "--rows", "500", "--repeat", "1",
         "--database", f"sqlite:///{tmp_path / 'gauges.db'}"],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert gauges.returncode == 0, gauges.stderr
    assert "a recount of Succeeded and Dropped" in gauges.stdout
    hook = subprocess.run(
        [sys.executable, "-m", "bench.metrics_hook", "--calls", "1000", "--repeat", "1", "--json"],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert hook.returncode == 0, hook.stderr
    assert json.loads(hook.stdout)["on_ns"] > 0
    ab = subprocess.run(
        [sys.executable, "bench/worker_throughput.py", "--compare-metrics", "--rounds", "1",
         "--jobs", "100", "--json"],
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert ab.returncode == 0, ab.stderr
    row = json.loads(ab.stdout)["stores"]["sqlite"]
    assert len(row["off_samples"]) == len(row["on_samples"]) == 1
    assert row["scrapes"] >= 1
