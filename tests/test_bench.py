"""The benchmark harness runs, at a tiny size, for mailfathom and the ceilings (the
email rows too: mailfathom's pipeline and its Django backend, counted at the sink).

No peers (nothing is installed), no network, no timing asserted: this keeps the
harness from rotting. What it checks is that every workload really ran — every job
processed, every latency sample back, memory read, every message at the sink exactly
once — and that the report holds a row, with ratios where they apply, for each figure.
"""

from __future__ import annotations

import json
import smtplib
import uuid
from pathlib import Path

import pytest
from bench.cli import main
from bench.counting_sink import SinkMismatch, counting_sink
from bench.drivers.smtp_loop import RECIPIENT, SENDER, message, subject
from bench.environment import ensure_smtp_sink
from bench.systems import DJANGO_EMAIL, select

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
def test_email_rows_run_and_are_counted_at_the_sink(database: str, tmp_path: Path) -> None:
    """The smtplib ceiling, mailfathom's pipeline (SQLite) and mailfathom's Django backend
    (``email_django``) each record and deliver; every measurement checks at the sink
    that each message arrived exactly once (a mismatch would be an error here)."""
    if database == "postgresql":
        require_postgres()
    suffix = "sqlite" if database == "sqlite" else "pg"
    systems = f"mailfathom-django-{suffix}" + (",mailfathom-sqlite" if database == "sqlite" else "")
    out = tmp_path / "run.json"
    argv = [
        *("--tiny", "--no-peers", "--systems", systems, "--workloads", "email,email_django"),
        *("--pg-url", POSTGRES_URL, "--db-prefix", f"bench_t{uuid.uuid4().hex[:8]}_"),
        *("--data-dir", str(tmp_path / "data"), "--out", str(out)),
    ]
    assert main(argv) == 0
    run = json.loads(out.read_text())
    assert run["errors"] == []
    measured = {(sample["system"], sample["metric"]) for sample in run["samples"]}
    rows = [f"mailfathom-django-{suffix}"] + (["mailfathom-sqlite"] if database == "sqlite" else [])
    metrics = ("email_record", "email_record_single", "email_deliver", "email")
    assert measured == {("smtplib-loop", "email")} | {(r, m) for r in rows for m in metrics}
    assert all(sample["value"] > 0 for sample in run["samples"])


def test_no_peers_leaves_out_the_django_email_peers() -> None:
    """``--no-peers`` installs nothing: the Django email peers' rows are not selected,
    mailfathom's Django backend rows are."""
    chosen = {system.key for system in select(None, peers=False)}
    assert {"mailfathom-django-sqlite", "mailfathom-django-pg"} <= chosen
    every = {system.key for system in select(None, peers=True)}
    django_peers = {system.key for system in DJANGO_EMAIL if system.role == "peer"}
    assert django_peers == {
        *("django-mailer-sqlite", "django-mailer-pg", "post-office-sqlite", "post-office-pg"),
        *("post-office-p2-sqlite", "post-office-p2-pg"),
    }
    assert django_peers <= every
    assert not django_peers & chosen


def test_the_counting_sink_catches_a_duplicate_and_a_missing_message() -> None:
    """Against the real smtp-sink: a message sent twice and one never sent each fail the
    check, with their subjects named; the same messages sent once each pass."""
    with counting_sink(ensure_smtp_sink()) as sink:
        wanted = [subject(i) for i in range(3)]
        mark = sink.mark()
        with smtplib.SMTP("127.0.0.1", sink.port, timeout=10) as client:
            for index in (0, 0, 2):  # bench 0 twice, bench 1 never
                client.sendmail(SENDER, [RECIPIENT], message(index, size=512))
        with pytest.raises(SinkMismatch) as caught:
            sink.check("probe", mark, wanted)
        text = str(caught.value)
        assert "received 3 messages for 3 sent" in text
        assert "1 missing ('bench 1')" in text
        assert "1 received more than once ('bench 0')" in text
        mark = sink.mark()
        with smtplib.SMTP("127.0.0.1", sink.port, timeout=10) as client:
            for index in range(3):
                client.sendmail(SENDER, [RECIPIENT], message(index, size=512))
        sink.check("probe", mark, wanted)
        # what arrived but was not sent (a stray message) fails the check too
        with pytest.raises(SinkMismatch, match=r"2 never sent \('bench 1', 'bench 2'\)"):
            sink.check("probe", mark, wanted[:1])
