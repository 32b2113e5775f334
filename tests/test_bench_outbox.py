"""The outbox benchmark runs (its numbers are reported, not asserted)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).parent.parent / "bench" / "outbox_throughput.py"


@pytest.mark.slow
def test_outbox_benchmark_runs() -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH), "--messages", "20"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "20 messages, sqlite, batches of 100" in done.stdout and "end to end" in done.stdout
