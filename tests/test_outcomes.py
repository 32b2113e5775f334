"""Outcomes: success, permanent and transient failures, backoff, exhaustion, history."""

from __future__ import annotations

from datetime import timedelta

import pytest

from mailfathom import (
    AttemptOutcome,
    Backoff,
    FailureClass,
    FakeClock,
    JobContext,
    JobState,
    MailFathom,
    PermanentFailure,
    TransientFailure,
)


def test_success_finishes_the_job(mf: MailFathom, clock: FakeClock) -> None:
    seen: list[tuple[int, str, int, int]] = []

    @mf.job("reports.build")
    def build(ctx: JobContext, report_id: int) -> None:
        seen.append((ctx.job_id, ctx.kind, ctx.attempt, report_id))

    job = mf.enqueue("reports.build", {"report_id": 7})
    assert mf.worker().run(burst=True) == 1
    assert seen == [(job.id, "reports.build", 1, 7)]
    done = mf.jobs.get(job.id)
    assert done.state is JobState.SUCCEEDED
    assert done.finished_at == clock.now()
    assert done.lease_owner is None and done.lease_expires_at is None
    (attempt,) = mf.jobs.attempts(job.id)
    assert attempt.outcome is AttemptOutcome.SUCCEEDED and attempt.attempt == 1


def test_permanent_failure_dead_letters_at_once(mf: MailFathom) -> None:
    @mf.job("k", max_attempts=10)
    def fail(ctx: JobContext) -> None:
        raise PermanentFailure("customer deleted")

    job = mf.enqueue("k")
    mf.worker().run(burst=True)
    dead = mf.jobs.get(job.id)
    assert dead.state is JobState.DEAD_LETTERED
    assert dead.failure_class is FailureClass.PERMANENT
    assert dead.failure_reason == "customer deleted"
    assert dead.attempts == 1 and dead.finished_at is not None
    (attempt,) = mf.jobs.attempts(job.id)
    assert attempt.outcome is AttemptOutcome.FAILED
    assert attempt.error_type == "mailfathom.jobs.failures.PermanentFailure"
    assert attempt.traceback is not None and "customer deleted" in attempt.traceback


def test_listed_exception_types_are_permanent(mf: MailFathom) -> None:
    @mf.job("k", permanent=(KeyError,))
    def fail(ctx: JobContext) -> None:
        raise KeyError("missing")

    job = mf.enqueue("k")
    mf.worker().run(burst=True)
    dead = mf.jobs.get(job.id)
    assert dead.state is JobState.DEAD_LETTERED
    assert dead.failure_class is FailureClass.PERMANENT
    assert dead.failure_reason == "KeyError: 'missing'"


def test_transient_failure_retries_after_backoff(mf: MailFathom, clock: FakeClock) -> None:
    base = timedelta(seconds=10)

    @mf.job("k", max_attempts=5, backoff=Backoff(base=base, cap=timedelta(seconds=60)))
    def flaky(ctx: JobContext) -> None:
        raise ConnectionError("upstream down")

    job = mf.enqueue("k")
    mf.worker().run(burst=True)
    retry = mf.jobs.get(job.id)
    assert retry.state is JobState.PENDING
    assert retry.failure_class is FailureClass.TRANSIENT
    assert retry.failure_reason == "ConnectionError: upstream down"
    assert retry.available_at is not None
    assert clock.now() <= retry.available_at <= clock.now() + base
    (attempt,) = mf.jobs.attempts(job.id)
    assert attempt.error_type == "ConnectionError"
    assert attempt.message == "ConnectionError: upstream down"
    assert attempt.traceback is not None and "upstream down" in attempt.traceback


def test_retry_after_is_honoured(mf: MailFathom, clock: FakeClock) -> None:
    @mf.job("k")
    def later(ctx: JobContext) -> None:
        raise TransientFailure("rate limited", retry_after=timedelta(minutes=7))

    job = mf.enqueue("k")
    mf.worker().run(burst=True)
    assert mf.jobs.get(job.id).available_at == clock.now() + timedelta(minutes=7)
    clock.advance(timedelta(minutes=7) - timedelta(seconds=1))
    assert mf.worker().run(burst=True) == 0
    clock.advance(1)
    assert mf.worker().run(burst=True) == 1


def test_attempts_exhausted_dead_letters_with_the_whole_history(
    mf: MailFathom, clock: FakeClock
) -> None:
    calls: list[int] = []

    @mf.job("k", max_attempts=3)
    def flaky(ctx: JobContext) -> None:
        calls.append(ctx.attempt)
        raise TransientFailure(f"try {ctx.attempt}", retry_after=1)

    job = mf.enqueue("k")
    for _ in range(3):
        mf.worker().run(burst=True)
        clock.advance(1)
    assert calls == [1, 2, 3]
    dead = mf.jobs.get(job.id)
    assert dead.state is JobState.DEAD_LETTERED
    assert dead.failure_class is FailureClass.TRANSIENT
    assert dead.failure_reason == "attempts exhausted (3 of 3): try 3"
    assert [a.message for a in mf.jobs.attempts(job.id)] == [
        "try 1",
        "try 2",
        "attempts exhausted (3 of 3): try 3",
    ]
    assert mf.worker().run(burst=True) == 0


def test_a_kind_the_worker_has_no_handler_for_waits_without_an_attempt(
    mf: MailFathom, clock: FakeClock
) -> None:
    job = mf.enqueue("nobody.handles.this", max_attempts=2)
    assert mf.worker().run(burst=True) == 0
    clock.advance(timedelta(hours=2))
    assert mf.worker().run(burst=True) == 0
    waiting = mf.jobs.get(job.id)
    assert waiting.state is JobState.PENDING and waiting.failure_class is None
    assert waiting.attempts == 0 and mf.jobs.attempts(job.id) == []


def test_async_handler_runs(mf: MailFathom) -> None:
    got: list[int] = []

    @mf.job("k")
    async def handler(ctx: JobContext, n: int) -> None:
        got.append(n)

    mf.enqueue("k", {"n": 3})
    mf.worker().run(burst=True)
    assert got == [3]


def test_async_handler_past_its_timeout_is_cancelled(mf: MailFathom) -> None:
    import asyncio

    @mf.job("k", timeout=0.05, max_attempts=1)
    async def slow(ctx: JobContext) -> None:
        await asyncio.sleep(10)

    job = mf.enqueue("k")
    mf.worker().run(burst=True)
    (attempt,) = mf.jobs.attempts(job.id)
    assert attempt.outcome is AttemptOutcome.EXECUTION_TIMEOUT
    assert mf.jobs.get(job.id).state is JobState.DEAD_LETTERED


def test_backoff_is_capped_full_jitter() -> None:
    import random

    backoff = Backoff(base=timedelta(seconds=2), cap=timedelta(seconds=60))
    assert backoff.ceiling(1) == timedelta(seconds=2)
    assert backoff.ceiling(3) == timedelta(seconds=8)
    assert backoff.ceiling(50) == timedelta(seconds=60)
    rng = random.Random(1)
    delays = [backoff.delay(10, rng) for _ in range(500)]
    assert all(timedelta(0) <= d <= timedelta(seconds=60) for d in delays)
    assert min(delays) < timedelta(seconds=10) and max(delays) > timedelta(seconds=50)
    with pytest.raises(ValueError, match="base <= cap"):
        Backoff(base=timedelta(seconds=5), cap=timedelta(seconds=1))
