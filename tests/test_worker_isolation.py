"""``isolation="process"``: each attempt in a child process, killed at its deadline."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

import worker_app
from mailfathom import AttemptOutcome, FailureClass, JobState, MailFathom
from worker_processes import alive

pytestmark = pytest.mark.slow


def _pid(marker: Path) -> int:
    return int(marker.read_text().split()[0])


def test_a_hanging_handler_is_killed_at_its_timeout(mf: MailFathom, tmp_path: Path) -> None:
    mf.job("hang", timeout=1, isolation="process", max_attempts=1)(worker_app.hang)
    marker = tmp_path / "hang"
    job = mf.enqueue("hang", {"marker": str(marker)})
    began = time.monotonic()
    assert mf.worker().run(burst=True) == 1
    assert time.monotonic() - began < 10
    child = _pid(marker)
    assert child != os.getpid()
    assert not alive(child), "the child process outlived its timeout"
    (attempt,) = mf.jobs.attempts(job.id)
    assert attempt.outcome is AttemptOutcome.EXECUTION_TIMEOUT
    assert attempt.message == (
        "attempts exhausted (1 of 1): ran past its 1 s timeout; its process was killed"
    )
    assert mf.jobs.get(job.id).state is JobState.DEAD_LETTERED


def test_outcomes_come_back_from_the_child(mf: MailFathom, tmp_path: Path) -> None:
    mf.job("ok", isolation="process")(worker_app.succeed)
    mf.job("refuse", isolation="process")(worker_app.refuse)
    mf.job("odd", isolation="process", max_attempts=1)(worker_app.raise_unpicklable)
    mf.job("die", isolation="process", max_attempts=1)(worker_app.die)
    marker = tmp_path / "ok"
    ok = mf.enqueue("ok", {"marker": str(marker)})
    refused = mf.enqueue("refuse", {"reason": "no such customer"})
    odd = mf.enqueue("odd")
    died = mf.enqueue("die")
    assert mf.worker(concurrency=4).run(burst=True) == 4

    assert mf.jobs.get(ok.id).state is JobState.SUCCEEDED
    assert _pid(marker) != os.getpid()

    dead = mf.jobs.get(refused.id)
    assert dead.state is JobState.DEAD_LETTERED
    assert (dead.failure_class, dead.failure_reason) == (FailureClass.PERMANENT, "no such customer")
    (attempt,) = mf.jobs.attempts(refused.id)
    assert attempt.error_type == "mailfathom.jobs.failures.PermanentFailure"
    assert attempt.traceback is not None and "worker_app.py" in attempt.traceback

    (attempt,) = mf.jobs.attempts(odd.id)
    assert attempt.error_type == "mailfathom.jobs.isolation.HandlerFailedInChild"
    assert attempt.message == (
        "attempts exhausted (1 of 1): HandlerFailedInChild: worker_app.Unpicklable: code 7: "
        "no way back"
    )

    (attempt,) = mf.jobs.attempts(died.id)
    assert attempt.error_type == "mailfathom.jobs.isolation.ChildProcessDied"
    assert attempt.message is not None and "exit status 3 without a result" in attempt.message


def test_shutdown_kills_an_isolated_child(mf: MailFathom, tmp_path: Path) -> None:
    mf.job("hang", isolation="process")(worker_app.hang)
    marker = tmp_path / "hang"
    job = mf.enqueue("hang", {"marker": str(marker)})
    worker = mf.worker(shutdown_timeout=0.2)
    thread = threading.Thread(target=worker.run)
    thread.start()
    deadline = time.monotonic() + 20
    while not marker.exists():
        assert time.monotonic() < deadline, "the child never started"
        time.sleep(0.02)
    worker.stop()
    thread.join(20)
    assert not thread.is_alive()
    assert not alive(_pid(marker))
    (attempt,) = mf.jobs.attempts(job.id)
    assert attempt.outcome is AttemptOutcome.SHUTDOWN_TIMEOUT
    assert attempt.message is not None and "its process was killed" in attempt.message
    assert mf.jobs.get(job.id).state is JobState.PENDING
