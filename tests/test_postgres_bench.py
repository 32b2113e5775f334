"""The PostgreSQL benchmarks still run (tiny sizes): they are measurements, not tests of speed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import POSTGRES_URL, require_postgres

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    ("module", "args", "expect"),
    [
        ("bench.pg_claim_plan", ["--finished", "300", "--pending", "50", "--claimed", "5",
                                 "--runs", "3", "--churn", "20"], "claim 10 (large)"),
        ("bench.pg_wakeup", ["--jobs", "5"], "enqueue returned → job claimed"),
        ("bench.pg_throughput", ["--jobs", "60", "--workers", "1", "--latency", "5"],
         "enqueue returned → handler started"),
        ("bench.pg_enqueue", ["--jobs", "20", "--sizes", "10", "--runs", "5"],
         "claim 10, prepared"),
        ("bench.claim_costs", ["--part", "stale", "--backlog", "2000", "--runs", "2"],
         "stale statistics, without plan_claims"),
        ("bench.pg_insert_costs", ["--rows", "50", "--runs", "1"], "without CHECKs"),
        ("bench.async_concurrency", ["--requests", "20", "--busy", "2", "--busy-seconds", "0.1"],
         "20 concurrent enqueues, 2 busy threads"),
    ],
)  # fmt: skip
def test_benchmark_runs(module: str, args: list[str], expect: str) -> None:
    require_postgres()
    done = subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=ROOT,
        env={**os.environ, "MAILFATHOM_TEST_POSTGRES_URL": POSTGRES_URL},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert expect in done.stdout
