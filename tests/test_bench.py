"""The benchmark harness runs, at a tiny size, for mailfathom and the plain-SQL ceilings
(and the Django send-path script for mailfathom alone).

No peers (nothing is installed), no network, no timing asserted: this keeps the
harness from rotting. What it checks is that every workload really ran — every job
processed, every latency sample back, memory read — and that the report holds a
row, with ratios where they apply, for each figure.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from bench.cli import main

from conftest import POSTGRES_URL, require_postgres

pytestmark = pytest.mark.slow

_SQLITE = (
    "mailfathom-sqlite,mailfathom-sqlite-4,mailfathom-sqlite-p4,mailfathom-sqlite-limited,"
    "mailfathom-sqlite-async,ceiling-sqlite"
)
_POSTGRES = "mailfathom-pg,mailfathom-pg-4,mailfathom-pg-limited,mailfathom-pg-async,ceiling-pg"


@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
def test_tiny_run_measures_every_workload(database: str, tmp_path: Path) -> None:
    if database == "postgresql":
        require_postgres()
    out = tmp_path / "run.json"
    markdown = tmp_path / "run.md"
    argv = [
        "--tiny",
        "--no-peers",
        "--systems",
        _SQLITE if database == "sqlite" else _POSTGRES,
        "--workloads",
        "enqueue_single,enqueue_batch,process,latency,rss",
        "--pg-url",
        POSTGRES_URL,
        "--db-prefix",
        f"bench_t{uuid.uuid4().hex[:8]}_",
        "--data-dir",
        str(tmp_path / "data"),
        "--out",
        str(out),
        "--markdown",
        str(markdown),
        "--charts",
        str(tmp_path / "charts"),
    ]
    assert main(argv) == 0
    run = json.loads(out.read_text())
    assert run["errors"] == []
    measured = {(sample["system"], sample["metric"]) for sample in run["samples"]}
    ours = "mailfathom-sqlite" if database == "sqlite" else "mailfathom-pg"
    ceiling = "ceiling-sqlite" if database == "sqlite" else "ceiling-pg"
    expected = {
        (ours, metric)
        for metric in (
            "enqueue_single",
            "enqueue_batch",
            "process",
            "latency_p50",
            "latency_p99",
            "rss_checkpoint",
            "rss_end",
            "rss_peak",
        )
    }
    expected |= {(ceiling, m) for m in ("enqueue_single", "enqueue_batch", "process")}
    expected.add((f"{ours}-4", "process"))
    expected.add((f"{ours}-limited", "process"))  # with a fleet-wide max_running
    # the async API, in the application's own async transaction
    expected |= {(f"{ours}-async", m) for m in ("enqueue_single", "enqueue_batch")}
    if database == "sqlite":  # the real `mailfathom worker --processes 4` (the CLI's row)
        expected.add((f"{ours}-p4", "process"))
    assert measured == expected
    assert all(sample["value"] > 0 for sample in run["samples"])
    table = markdown.read_text()
    # Each row of ours is compared with the ceiling measured in the same run.
    our_process_row = next(
        line for line in table.splitlines() if line.startswith("| | mailfathom") and "x |" in line
    )
    assert our_process_row.rstrip(" |").endswith("x")
    assert "| target |" in table
    # The ratios are drawn too (processing has a ceiling in the same run).
    assert "mailfathom" in (tmp_path / "charts" / "processing.svg").read_text()


def test_unknown_system_is_refused_with_the_known_ones() -> None:
    with pytest.raises(SystemExit, match="choose from"):
        main(["--tiny", "--systems", "mailfathom-sqlite,rq"])


@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
def test_django_send_path_runs_for_mailfathom(database: str) -> None:
    """``bench/django_send.py`` records through Django's backend and reports both rates."""
    if database == "postgresql":
        require_postgres()
    script = Path(__file__).resolve().parent.parent / "bench" / "django_send.py"
    done = subprocess.run(
        [
            *(sys.executable, str(script), "--database", database, "--systems", "mailfathom"),
            *("--messages", "20", "--batch", "5", "--json"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    assert figures["database"] == database
    rates = figures["results"]["mailfathom"]
    assert set(rates) == {"send_mail", "send_mass_mail"}
    assert all(rate > 0 for rate in rates.values())


@pytest.mark.parametrize("database", ["sqlite", "postgresql"])
def test_django_send_and_delivery_runs_for_mailfathom(database: str) -> None:
    """``bench/django_send.py --deliver`` records through Django's backend, delivers
    every message with the worker (the script fails unless all reach Sent) and reports
    the recording, delivery and end-to-end rates."""
    if database == "postgresql":
        require_postgres()
    script = Path(__file__).resolve().parent.parent / "bench" / "django_send.py"
    done = subprocess.run(
        [
            *(sys.executable, str(script), "--database", database, "--systems", "mailfathom"),
            *("--deliver", "--aiosmtpd", "--messages", "20", "--batch", "5", "--json"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    rates = json.loads(done.stdout.strip().splitlines()[-1])["results"]["mailfathom"]
    assert set(rates) == {"record", "deliver", "end_to_end"}
    assert all(rate > 0 for rate in rates.values())
