"""``flask mailfathom`` in a real Flask app, run as a user runs it (subprocesses): the
``mailfathom`` command line itself on the extension's app, the worker with the same
options and per-attempt log lines as ``mailfathom worker``."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from mailfathom import JobState, MailFathom
from worker_processes import TESTS

pytestmark = pytest.mark.slow


def _environ(database_url: str) -> dict[str, str]:
    environ = dict(os.environ)
    environ["MAILFATHOM_DATABASE_URL"] = database_url
    environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(TESTS), environ.get("PYTHONPATH")]))
    environ.pop("FLASK_APP", None)
    return environ


def _command(*args: str) -> list[str]:
    return [sys.executable, "-m", "flask", "--app", "flask_site", "mailfathom", *args]


def flask(database_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``flask --app flask_site mailfathom <args>`` to its end."""
    return subprocess.run(
        _command(*args),
        env=_environ(database_url),
        cwd=TESTS,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture
def app(database_url: str) -> Iterator[MailFathom]:
    with MailFathom(database_url) as mf:
        migrated = flask(database_url, "migrate")
        assert migrated.returncode == 0, migrated.stderr
        assert "migration(s)" in migrated.stdout
        yield mf


def _marks(app: MailFathom, folder: Path, count: int) -> list[int]:
    return [app.enqueue("site.mark", {"path": str(folder / f"{i}.txt")}).id for i in range(count)]


def test_the_worker_logs_each_attempt_in_json_and_runs_jobs_in_the_app_context(
    app: MailFathom, database_url: str, tmp_path: Path
) -> None:
    ids = _marks(app, tmp_path, 2)
    ran = flask(database_url, "worker", "--burst", "--log-format", "json", "--log-level", "info")
    assert ran.returncode == 0, ran.stderr
    lines = [json.loads(line) for line in ran.stderr.splitlines() if line.startswith("{")]
    attempts = [line for line in lines if line.get("action") == "attempt"]
    assert sorted(line["job_id"] for line in attempts) == sorted(ids), ran.stderr
    assert {line["kind"] for line in attempts} == {"site.mark"}
    assert all(app.jobs.get(i).state is JobState.SUCCEEDED for i in ids)
    assert all(p.read_text().startswith("Flask Site ") for p in tmp_path.glob("*.txt"))


def test_the_worker_with_two_processes_runs_flask_workers(
    app: MailFathom, database_url: str, tmp_path: Path
) -> None:
    ids = _marks(app, tmp_path, 20)
    supervisor = subprocess.Popen(
        _command("worker", "--burst", "--processes", "2", "--log-level", "info"),
        env=_environ(database_url),
        cwd=TESTS,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    _, err = supervisor.communicate(timeout=120)
    assert supervisor.returncode == 0, err
    assert all(app.jobs.get(i).state is JobState.SUCCEEDED for i in ids)
    pids = {int(p.read_text().split()[-1]) for p in tmp_path.glob("*.txt")}
    assert pids and supervisor.pid not in pids  # run by the worker processes it started
    assert all(p.read_text().startswith("Flask Site ") for p in tmp_path.glob("*.txt"))
    assert "attempt job_id=" in err


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def test_the_worker_serves_metrics_and_stops_on_sigterm(
    app: MailFathom, database_url: str, tmp_path: Path
) -> None:
    port = _free_port()
    worker = subprocess.Popen(
        _command("worker", "--metrics-port", str(port), "--log-level", "warning"),
        env=_environ(database_url),
        cwd=TESTS,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as got:
                    metrics = got.read().decode()
                break
            except OSError:
                assert worker.poll() is None, worker.communicate()[1]
                assert time.monotonic() < deadline, "no /metrics"
                time.sleep(0.1)
        assert "mailfathom_" in metrics
    finally:
        worker.send_signal(signal.SIGTERM)
        _, err = worker.communicate(timeout=60)
    assert worker.returncode == 0, err


def test_the_other_subcommands_use_the_apps_database(
    app: MailFathom, database_url: str, tmp_path: Path
) -> None:
    listed = flask(database_url, "--help")
    assert listed.returncode == 0, listed.stderr
    for name in ("worker", "migrate", "jobs", "outbox", "queues", "schedules", "health"):
        assert name in listed.stdout
    payload = json.dumps({"path": str(tmp_path / "x.txt")})
    enqueued = flask(database_url, "enqueue", "site.mark", "--payload", payload)
    assert enqueued.returncode == 0, enqueued.stderr
    jobs = flask(database_url, "jobs", "list", "--json")
    assert jobs.returncode == 0, jobs.stderr
    assert [job["kind"] for job in json.loads(jobs.stdout)["jobs"]] == ["site.mark"]
    assert sum(app.jobs.counts().values()) == 1
    health = flask(database_url, "health")
    assert health.returncode == 0, health.stdout + health.stderr
    assert "ok database" in health.stdout
    refused = flask(database_url, "--database", "sqlite:///other.db", "migrate")
    assert refused.returncode == 2
    assert "do not apply here" in refused.stderr
    assert not (TESTS / "other.db").exists()
