"""The worker's side of the operator controls, on every store: an abort reaches a
running attempt through the heartbeat (a coroutine is cancelled, a child process
killed, a thread handler sees ``ctx.abort_requested``); ``raise Snooze`` puts a job
back without spending an attempt, up to the cap; a paused queue stops claims."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

import pytest

import worker_app
from mailfathom import (
    AttemptOutcome,
    FailureClass,
    FakeClock,
    JobAborted,
    JobContext,
    JobState,
    MailFathom,
    Snooze,
)
from mailfathom.jobs.worker.worker import Worker
from test_worker_isolation import _pid
from worker_processes import alive

#: Short enough that the heartbeat (a third of it) carries an abort within half a second.
LEASE = 1.5


@contextmanager
def running(worker: Worker) -> Iterator[Worker]:
    """Run ``worker`` (its test signals on) on a thread for the block; stop it at the end."""
    worker.signals.init()
    thread = threading.Thread(target=worker.run)
    thread.start()
    try:
        yield worker
    finally:
        worker.stop()
        thread.join(30)
        assert not thread.is_alive(), "the worker did not stop"


def _settled(mf: MailFathom, job_id: int, worker: Worker) -> None:
    """Wait until the worker recorded ``job_id``'s outcome."""
    worker.signals.batch_recorded.wait_for(
        lambda batch: any(pair[0] == job_id for pair in batch.recorded)
    )


def _assert_aborted(mf: MailFathom, job_id: int, actor: str) -> None:
    job = mf.jobs.get(job_id)
    assert job.state is JobState.DEAD_LETTERED
    assert job.failure_class is FailureClass.PERMANENT
    assert job.failure_reason == f"aborted by {actor}: stop it"
    (attempt,) = mf.jobs.attempts(job_id)
    assert attempt.outcome is AttemptOutcome.ABORTED
    assert attempt.message == f"aborted by {actor}: stop it"


def test_abort_cancels_a_coroutine(mf: MailFathom) -> None:
    @mf.job("slow.async")
    async def slow(ctx: JobContext) -> None:
        await asyncio.sleep(600)

    job = mf.enqueue("slow.async")
    with running(mf.worker(lease=LEASE)) as worker:
        worker.signals.started.wait()
        mf.jobs.abort(job.id, actor="ann", reason="stop it")
        assert worker.signals.abort_seen.wait().id == job.id
        _settled(mf, job.id, worker)
    _assert_aborted(mf, job.id, "ann")


def test_abort_kills_a_process_isolated_attempt(mf: MailFathom, tmp_path: Path) -> None:
    mf.job("hang", isolation="process")(worker_app.hang)
    marker = tmp_path / "hang"
    job = mf.enqueue("hang", {"marker": str(marker)})
    with running(mf.worker(lease=LEASE)) as worker:
        worker.signals.started.wait()
        deadline = time.monotonic() + 20
        while not marker.exists():  # the child writes its pid once it runs the handler
            assert time.monotonic() < deadline, "the child never started"
            time.sleep(0.02)
        mf.jobs.abort(job.id, actor="ben", reason="stop it")
        worker.signals.abort_seen.wait()
        _settled(mf, job.id, worker)
    assert not alive(_pid(marker))
    _assert_aborted(mf, job.id, "ben")


def test_a_thread_handler_sees_the_abort_and_raises(mf: MailFathom) -> None:
    seen: list[bool] = []

    @mf.job("steps")
    def steps(ctx: JobContext) -> None:
        seen.append(ctx.abort_requested)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            ctx.raise_if_aborted()
            time.sleep(0.01)

    job = mf.enqueue("steps")
    with running(mf.worker(lease=LEASE)) as worker:
        worker.signals.started.wait()
        mf.jobs.abort(job.id, actor="cleo", reason="stop it")
        worker.signals.abort_seen.wait()
        _settled(mf, job.id, worker)
    assert seen == [False]
    _assert_aborted(mf, job.id, "cleo")
    (attempt,) = mf.jobs.attempts(job.id)
    assert attempt.error_type == "mailfathom.jobs.failures.JobAborted"
    # and from the dead letters, requeue works as for any other
    assert mf.jobs.requeue(job.id, actor="cleo").state is JobState.PENDING


def test_a_thread_handler_that_finishes_despite_the_abort_keeps_its_success(
    mf: MailFathom,
) -> None:
    gate = threading.Event()

    @mf.job("stubborn")
    def stubborn(ctx: JobContext) -> None:
        assert gate.wait(20)

    job = mf.enqueue("stubborn")
    with running(mf.worker(lease=LEASE)) as worker:
        worker.signals.started.wait()
        mf.jobs.abort(job.id, actor="dan", reason="stop it")
        worker.signals.abort_seen.wait()
        gate.set()
        _settled(mf, job.id, worker)
    assert mf.jobs.get(job.id).state is JobState.SUCCEEDED


# -- snooze ----------------------------------------------------------------------------


def test_snooze_puts_the_job_back_without_spending_an_attempt(
    mf: MailFathom, clock: FakeClock
) -> None:
    calls: list[int] = []

    @mf.job("later", max_attempts=1)
    def later(ctx: JobContext) -> None:
        calls.append(ctx.attempt)
        if len(calls) == 1:
            raise Snooze(90)

    job = mf.enqueue("later")
    mf.worker().run(burst=True)
    snoozed = mf.jobs.get(job.id)
    assert snoozed.state is JobState.PENDING
    assert snoozed.available_at == clock.now() + timedelta(seconds=90)
    assert snoozed.attempts_left == 1 and snoozed.snoozes == 1
    (attempt,) = mf.jobs.attempts(job.id)
    assert attempt.outcome is AttemptOutcome.SNOOZED
    assert attempt.message == "snoozed for 90 s (1 of at most 100 snoozes)"
    clock.advance(90)
    mf.worker().run(burst=True)
    done = mf.jobs.get(job.id)
    assert done.state is JobState.SUCCEEDED  # max_attempts=1, and the snooze did not count
    assert calls == [1, 2]


def test_snoozes_past_the_cap_count_as_transient_failures(
    database_url: str, clock: FakeClock
) -> None:
    with MailFathom(database_url, clock=clock, snooze_limit=2) as mf:
        mf.migrate()

        @mf.job("forever", max_attempts=1)
        def forever(ctx: JobContext) -> None:
            raise Snooze(1)

        job = mf.enqueue("forever")
        for _ in range(3):
            mf.worker().run(burst=True)
            clock.advance(1)
        dead = mf.jobs.get(job.id)
        assert dead.state is JobState.DEAD_LETTERED
        assert dead.failure_class is FailureClass.TRANSIENT
        assert dead.failure_reason is not None
        assert "snoozed 2 times, the snooze_limit setting's cap" in dead.failure_reason
        outcomes = [a.outcome for a in mf.jobs.attempts(job.id)]
        assert outcomes == [AttemptOutcome.SNOOZED, AttemptOutcome.SNOOZED, AttemptOutcome.FAILED]


def test_an_isolated_handler_can_snooze(mf: MailFathom, clock: FakeClock) -> None:
    mf.job("snoozy", isolation="process")(worker_app.snooze_once)
    job = mf.enqueue("snoozy", {"seconds": 30})
    mf.worker().run(burst=True)
    (attempt,) = mf.jobs.attempts(job.id)
    assert attempt.outcome is AttemptOutcome.SNOOZED
    assert mf.jobs.get(job.id).attempts_left == mf.jobs.get(job.id).max_attempts


def test_snooze_refuses_a_nonsense_duration() -> None:
    with pytest.raises(ValueError, match="0 to 31622400 seconds"):
        Snooze(-1)
    with pytest.raises(ValueError, match="0 to 31622400 seconds"):
        Snooze(True)


def test_job_aborted_raised_by_a_handler_itself_dead_letters(mf: MailFathom) -> None:
    @mf.job("self.abort")
    def self_abort(ctx: JobContext) -> None:
        raise JobAborted("gave up on purpose")

    job = mf.enqueue("self.abort")
    mf.worker().run(burst=True)
    dead = mf.jobs.get(job.id)
    assert (dead.state, dead.failure_reason) == (JobState.DEAD_LETTERED, "gave up on purpose")


# -- pause -----------------------------------------------------------------------------


def test_a_running_worker_stops_claiming_a_paused_queue_and_resumes(mf: MailFathom) -> None:
    """A paused queue's job waits through a claim pass; after the resume the running
    worker claims and runs it (that the resume itself wakes it, rather than its next
    poll or schedule pass, is the next test's)."""

    @mf.job("k", queue="mail")
    def k(ctx: JobContext) -> None:
        pass

    mf.queues.pause("mail", actor="ops")
    job = mf.enqueue("k")
    with running(mf.worker(poll_interval=60)) as worker:
        worker.signals.loop_waits.wait()  # a claim pass went by: running, idle
        worker.signals.claimed.require_empty()
        assert mf.jobs.get(job.id).state is JobState.PENDING
        mf.queues.resume("mail", actor="ops")
        (claimed,) = worker.signals.claimed.wait(timeout=20)
        assert claimed.id == job.id
        _settled(mf, job.id, worker)
    assert mf.jobs.get(job.id).state is JobState.SUCCEEDED


def test_a_resume_wakes_idle_workers(mf: MailFathom, database_url: str) -> None:
    """What an idle worker waits on (``LISTEN`` on PostgreSQL, the file's data_version
    on SQLite) is woken by the resume itself: no job is enqueued, so nothing else could."""
    mf.queues.pause("mail", actor="ops")
    with MailFathom(database_url) as other:  # another worker process's connection
        store = other.store
        store.wait_for_jobs(0)  # starts listening (PostgreSQL: True, as it just began)
        while store.wait_for_jobs(0.05):  # nothing else pending
            pass
        mf.queues.resume("mail", actor="ops")
        assert store.wait_for_jobs(20), "the resume woke no idle worker"


def test_a_running_worker_woken_by_an_enqueue_skips_a_paused_queue(mf: MailFathom) -> None:
    @mf.job("k", queue="mail")
    def k(ctx: JobContext) -> None:
        pass

    with running(mf.worker(poll_interval=0.2)) as worker:
        worker.signals.loop_waits.wait()  # running, idle
        mf.queues.pause("mail", actor="ops")
        job = mf.enqueue("k")  # wakes the worker, which claims nothing
        # several claim passes go by and the paused queue's job stays Pending
        for _ in range(3):
            worker.signals.loop_waits.wait()
        worker.signals.claimed.require_empty()
        assert mf.jobs.get(job.id).state is JobState.PENDING
    assert mf.jobs.get(job.id).state is JobState.PENDING


def test_a_snooze_is_not_a_failed_attempt_in_the_throughput(
    mf: MailFathom, clock: FakeClock
) -> None:
    @mf.job("nap")
    def nap(ctx: JobContext) -> None:
        if ctx.job.snoozes == 0:
            raise Snooze(0)

    mf.enqueue("nap")
    mf.worker().run(burst=True)
    minute = mf.jobs.throughput(1)[-1]
    assert (minute.succeeded, minute.failed_attempts) == (1, 0)
