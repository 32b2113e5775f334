"""The commands as an operator runs them: ``worker --log-format json``, ``worker
--metrics-port`` (scraped while it runs), ``health --worker`` against a live worker."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from consolekit import TOKEN
from mailfathom import JobState, MailFathom
from worker_processes import run_cli, start_worker, stop, wait_for

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def test_worker_json_logs_parse_and_carry_the_attempt(database_url: str, tmp_path: Path) -> None:
    marker = tmp_path / "done"
    with MailFathom(database_url) as app:
        app.migrate()
        job = app.enqueue("test.sleep", {"marker": str(marker), "seconds": 0})
    result = run_cli(
        "worker",
        "--app",
        "worker_app:mf",
        "--database",
        database_url,
        "--burst",
        "--log-format",
        "json",
    )
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stderr.splitlines()]
    (attempt,) = [line for line in lines if line.get("action") == "attempt"]
    assert attempt["outcome"] == "Succeeded"
    assert attempt["kind"] == "test.sleep"
    assert attempt["logger"] == "mailfathom.jobs.worker.runner"
    assert attempt["job_id"] == job.id


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, ConnectionError):
        return False


_SUCCEEDED = (
    "mailfathom_job_attempts_total",
    frozenset({"kind": "test.sleep", "queue": "default", "outcome": "Succeeded"}.items()),
)


def _scrape(base: str) -> str:
    with urllib.request.urlopen(f"{base}/metrics", timeout=10) as response:
        return str(response.read().decode())


def _samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_worker_serves_metrics_and_healthz_while_it_runs(database_url: str, tmp_path: Path) -> None:
    port = _free_port()
    log = tmp_path / "worker.log"
    marker = tmp_path / "done"
    with MailFathom(database_url) as app:
        app.migrate()
        job = app.enqueue("test.sleep", {"marker": str(marker), "seconds": 0})
        process = start_worker(database_url, log, "--metrics-port", str(port))
        try:
            base = f"http://127.0.0.1:{port}"
            wait_for(lambda: _healthy(f"{base}/healthz"), 30, "/healthz to answer", log, process)
            wait_for(
                lambda: app.jobs.get(job.id).state is JobState.SUCCEEDED,
                30,
                "the job to succeed",
                log,
                process,
            )
            # an attempt is counted once its outcome is committed, just after the commit
            wait_for(
                lambda: _SUCCEEDED in _samples(_scrape(base)),
                30,
                "the attempt to be counted",
                log,
                process,
            )
            text = _scrape(base)
            (worker,) = app.workers.list()
            live = run_cli("--database", database_url, "health", "--worker", worker.id)
        finally:
            assert stop(process) == 0, log.read_text()
        after = run_cli("--database", database_url, "health", "--worker", worker.id)
    samples = _samples(text)
    assert samples[_SUCCEEDED] == 1
    assert samples[("mailfathom_workers_alive", frozenset())] == 1
    assert live.returncode == 0, live.stdout + live.stderr
    assert "ok heartbeat: last beat" in live.stdout
    assert after.returncode == 1  # the worker deregistered when it stopped
    assert f"FAIL heartbeat: no worker {worker.id!r} is registered" in after.stdout


def test_web_json_logs_carry_a_refusals_fields(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'web.db'}"
    with MailFathom(url) as app:
        app.migrate()
    port = _free_port()
    env = {**os.environ, "MAILFATHOM_DATABASE_URL": url, "MAILFATHOM_WEB_TOKEN": TOKEN}
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mailfathom.cli",
            "web",
            "--port",
            str(port),
            "--log-format",
            "json",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        wait_for(lambda: _healthy(f"{base}/healthz"), 30, "the console to answer", None, process)
        request = urllib.request.Request(
            f"{base}/api/jobs", headers={"Authorization": "Bearer not-the-token"}
        )
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=10)
        refused.value.close()
        assert refused.value.code == 401
    finally:
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=30)
    lines = [json.loads(line) for line in err.decode().splitlines() if line.startswith("{")]
    (refusal,) = [line for line in lines if line.get("security_event") == "bad_token"]
    assert refusal["logger"] == "mailfathom.web.security"
    assert refusal["level"] == "WARNING"
    assert (refusal["client"], refusal["method"], refusal["path"]) == (
        "127.0.0.1",
        "GET",
        "/api/jobs",
    )
