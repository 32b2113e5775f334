"""``mailfathom health`` and the checks behind /healthz: the database down (a closed
port, a missing file), migrations behind, a worker's heartbeat stale."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

from click.testing import CliRunner

from mailfathom import FakeClock, MailFathom
from mailfathom.cli import cli
from mailfathom.observability.health import check_store, check_url
from mailfathom.store.base import WorkerRegistration
from raw_database import raw_transaction


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port  # nothing listens there once the probe is closed


def _health(url: str, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["--database", url, "health", *args])
    return result.exit_code, result.output


def test_health_passes_on_a_migrated_database(mf: MailFathom) -> None:
    code, output = _health(mf.settings.database_url)
    assert code == 0, output
    assert output.splitlines()[0] == f"ok database: {mf.store.dialect} answers"
    assert output.splitlines()[1].startswith("ok migrations: all ")


def test_health_fails_when_postgresql_is_down() -> None:
    url = f"postgresql://postgres@127.0.0.1:{_closed_port()}/postgres?connect_timeout=1"
    code, output = _health(url)
    assert code == 1
    assert output.startswith("FAIL database: ")
    report = check_url(url, FakeClock())
    assert not report.ok
    assert [c.name for c in report.checks] == ["database"]


def test_health_fails_on_a_missing_sqlite_file_without_creating_it(tmp_path: Path) -> None:
    path = tmp_path / "nothing-here.db"
    code, output = _health(f"sqlite:///{path}", "--json")
    assert code == 1
    report = json.loads(output)
    assert report["status"] == "failing"
    assert report["checks"]["database"]["ok"] is False
    assert "no SQLite database at" in report["checks"]["database"]["detail"]
    assert not path.exists()


def test_health_fails_when_migrations_are_behind(mf: MailFathom) -> None:
    with raw_transaction(mf) as cur:
        cur.execute(
            "DELETE FROM mf_migrations WHERE version = (SELECT max(version) FROM mf_migrations)"
        )
    code, output = _health(mf.settings.database_url)
    assert code == 1
    assert "FAIL migrations: 1 of " in output
    assert "run mailfathom migrate" in output


def test_health_fails_on_a_never_migrated_database(database_url: str) -> None:
    app = MailFathom(database_url)  # nothing migrated
    try:
        report = check_store(app.store, app.clock)
    finally:
        app.close()
    assert [(c.name, c.ok) for c in report.checks] == [("database", True), ("migrations", False)]


def test_health_checks_a_workers_heartbeat(mf: MailFathom, clock: FakeClock) -> None:
    registration = WorkerRegistration(
        id="w-1",
        host="here",
        pid=os.getpid(),
        queues=None,
        kinds=(),
        concurrency=1,
        lease_seconds=30.0,
        started_at=clock.now(),
    )
    mf.store.workers.heartbeat(registration, now=clock.now())
    assert check_store(mf.store, clock, worker_id="w-1").ok
    missing = check_store(mf.store, clock, worker_id="w-2")
    assert not missing.ok
    assert "no worker 'w-2' is registered" in missing.checks[-1].detail
    clock.advance(30 + mf.store.clock_skew.total_seconds() + 1)
    stale = check_store(mf.store, clock, worker_id="w-1")
    assert not stale.ok
    assert stale.checks[-1].name == "heartbeat"
    assert "past its" in stale.checks[-1].detail
