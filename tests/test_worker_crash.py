"""Real worker processes, killed and stopped with real signals."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from mailfathom import AttemptOutcome, JobState, MailFathom
from mailfathom.testing import claim
from worker_processes import alive, start_worker, stop, wait_for

pytestmark = pytest.mark.slow


@pytest.fixture
def app(database_url: str) -> Iterator[MailFathom]:
    """The test's own view of the database, on the real clock like the workers."""
    with MailFathom(database_url, clock_skew=0) as mf:  # one machine: one clock, no skew
        mf.migrate()
        yield mf


def test_sigkill_mid_job_another_worker_finishes_it_after_the_lease(
    app: MailFathom, database_url: str, tmp_path: Path
) -> None:
    marker, log = tmp_path / "started", tmp_path / "workers.log"
    job = app.enqueue("test.sleep_once", {"marker": str(marker), "seconds": 60})
    first = start_worker(database_url, log, "--lease", "1")
    try:
        wait_for(marker.exists, 30, "the first attempt to start", log, first)
        (victim,) = app.workers.list()
        assert victim.pid == first.pid
        first.kill()
        assert first.wait(10) == -signal.SIGKILL
    finally:
        stop(first)
    second = start_worker(database_url, log, "--lease", "1", env={"MAILFATHOM_CLOCK_SKEW": "0"})
    try:
        wait_for(
            lambda: app.jobs.get(job.id).state is JobState.SUCCEEDED,
            30,
            "another worker to complete the job",
            log,
            second,
        )
        workers = {w.pid: w for w in app.workers.list()}
        assert not workers[first.pid].alive  # the killed worker shows dead
        assert workers[second.pid].alive
    finally:
        assert stop(second) == 0
    lost, won = app.jobs.attempts(job.id)
    assert (lost.attempt, lost.outcome, lost.worker) == (1, AttemptOutcome.LEASE_EXPIRED, victim.id)
    assert lost.started_at is not None and lost.finished_at is not None
    assert lost.finished_at - lost.started_at >= timedelta(seconds=1)  # reaped after the lease
    assert (won.attempt, won.outcome) == (2, AttemptOutcome.SUCCEEDED)
    assert won.worker is not None and won.worker != victim.id
    assert [w.pid for w in app.workers.list()] == [first.pid]  # the clean one deregistered


def test_sigterm_releases_a_slow_job_for_immediate_claim(
    app: MailFathom, database_url: str, tmp_path: Path
) -> None:
    marker, log = tmp_path / "started", tmp_path / "worker.log"
    job = app.enqueue("test.sleep", {"marker": str(marker), "seconds": 60})
    worker = start_worker(database_url, log, "--lease", "60", "--shutdown-timeout", "0.5")
    try:
        wait_for(marker.exists, 30, "the job to start", log, worker)
        signalled = time.monotonic()
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(20) == 0
        assert time.monotonic() - signalled < 10
    finally:
        stop(worker)
    released = app.jobs.get(job.id)
    assert released.state is JobState.PENDING and released.lease_owner is None
    (attempt,) = app.jobs.attempts(job.id)
    assert attempt.outcome is AttemptOutcome.SHUTDOWN_TIMEOUT
    # Due at the instant it was released, not after a backoff: whatever the timing below.
    assert released.available_at == attempt.finished_at
    # Claimable at once, although the 60 s lease it had is far from over.
    (again,) = claim(app, "another", 1, timedelta(seconds=30))
    assert (again.id, again.attempts) == (job.id, 2)
    assert app.workers.list() == []
    text = log.read_text()
    assert "SIGTERM received: stopping gracefully" in text
    assert f"job_id={job.id} kind=test.sleep attempt=1 outcome=ShutdownTimeout" in text


def test_a_second_signal_exits_at_once(app: MailFathom, database_url: str, tmp_path: Path) -> None:
    marker, log = tmp_path / "started", tmp_path / "worker.log"
    job = app.enqueue("test.sleep", {"marker": str(marker), "seconds": 60})
    worker = start_worker(database_url, log, "--shutdown-timeout", "60")
    try:
        wait_for(marker.exists, 30, "the job to start", log, worker)
        worker.send_signal(signal.SIGINT)
        wait_for(lambda: "SIGINT received" in log.read_text(), 10, "the first signal", log, worker)
        signalled = time.monotonic()
        worker.send_signal(signal.SIGINT)
        assert worker.wait(10) == 128 + signal.SIGINT
        assert time.monotonic() - signalled < 5
    finally:
        stop(worker)
    left = app.jobs.get(job.id)
    assert left.state is JobState.CLAIMED  # nothing recorded: its lease will expire
    assert app.jobs.attempts(job.id) == []
    assert "second SIGINT: exiting at once" in log.read_text()


def test_an_isolated_child_does_not_outlive_a_killed_worker(tmp_path: Path) -> None:
    url, marker, log = f"sqlite:///{tmp_path / 'db.sqlite'}", tmp_path / "child", tmp_path / "log"
    with MailFathom(url) as app:
        app.migrate()
        app.enqueue("test.hang_isolated", {"marker": str(marker)})
    worker = start_worker(url, log)
    try:
        wait_for(marker.exists, 30, "the child to start", log, worker)
        child = int(marker.read_text())
        worker.kill()
        worker.wait(10)
    finally:
        stop(worker)
    wait_for(lambda: not alive(child), 10, "the orphaned child to exit", log)
