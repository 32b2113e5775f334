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
