"""The worker's outcome recorder, alone and inside a worker, on the real stores: one
job's outcome failing to record never loses its siblings', and nothing escapes.

The recorder claims through :meth:`OutcomeRecorder.record_and_claim` and records
through :meth:`OutcomeRecorder.flush`, the calls a worker makes. Failures are forced
with a subclass overriding the recorder's own seams (``failed_attempt``,
``fallback``); the store is never mocked.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta

import pytest

from mailfathom import (
    AttemptOutcome,
    FailureClass,
    FakeClock,
    JobContext,
    JobState,
    MailFathom,
    TransientFailure,
)
from mailfathom.jobs.model import Job
from mailfathom.jobs.queue import Finished
from mailfathom.jobs.worker.outcomes import Outage
from mailfathom.jobs.worker.recorder import Claim, OutcomeRecorder
from mailfathom.jobs.worker.testsignal import WorkerSignals
from mailfathom.store.base import FailedAttempt
from mailfathom.testing import claim

LEASE = timedelta(seconds=30)
OWNER = "recorder-test"


class Poisoned(OutcomeRecorder):
    """Makes the outcome of the jobs in ``bad`` fail in a chosen way."""

    def __init__(self, mf: MailFathom, *, bad: set[int], how: str) -> None:
        super().__init__(
            mf.queue, OWNER, outage=Outage(OWNER, limit=0.5), signals=WorkerSignals().init()
        )
        self.bad = bad
        self.how = how

    def failed_attempt(self, result: Finished, now: datetime) -> FailedAttempt:
        row = super().failed_attempt(result, now)
        if result.job.id not in self.bad:
            return row
        if self.how == "refused":  # the database refuses the row (CHECK on the outcome)
            return dataclasses.replace(row, outcome="NotAnOutcome")
        raise ValueError("no row for you")

    def fallback(self, result: Finished, now: datetime, reason: str) -> FailedAttempt:
        row = super().fallback(result, now, reason)
        if result.job.id in self.bad and self.how == "fallback refused too":
            return dataclasses.replace(row, failure_class="NotAClass")
        return row


def _claim(recorder: OutcomeRecorder, count: int) -> list[Job]:
    jobs = recorder.record_and_claim(Claim(limit=count, lease=LEASE, queues=None, reap=True))
    assert jobs is not None and len(jobs) == count
    return jobs


def _three(mf: MailFathom, recorder: OutcomeRecorder) -> tuple[Job, Job, Job]:
    mf.enqueue_many("k", [{"n": n} for n in range(3)])
    ok, poisoned, failed = _claim(recorder, 3)
    for result in (
        Finished(ok, AttemptOutcome.SUCCEEDED),
        Finished(poisoned, AttemptOutcome.FAILED, error=ConnectionError("poisoned")),
        Finished(failed, AttemptOutcome.FAILED, error=ConnectionError("upstream down")),
    ):
        recorder.unrecorded.add(result)
    return ok, poisoned, failed


def _assert_siblings_recorded(mf: MailFathom, ok: Job, failed: Job) -> None:
    assert mf.jobs.get(ok.id).state is JobState.SUCCEEDED
    retried = mf.jobs.get(failed.id)
    assert retried.state is JobState.PENDING and retried.attempts == 1
    (attempt,) = mf.jobs.attempts(failed.id)
    assert attempt.message == "ConnectionError: upstream down"


@pytest.mark.parametrize("how", ["refused", "unpreparable"])
def test_one_outcome_that_cannot_be_recorded_gets_the_fallback_and_its_siblings_theirs(
    mf: MailFathom, clock: FakeClock, how: str
) -> None:
    recorder = Poisoned(mf, bad=set(), how=how)
    ok, poisoned, failed = _three(mf, recorder)
    recorder.bad = {poisoned.id}
    recorder.flush()
    _assert_siblings_recorded(mf, ok, failed)
    job, reason = recorder._signals.fallback_recorded.wait()
    assert job.id == poisoned.id
    fell_back = mf.jobs.get(poisoned.id)
    assert fell_back.state is JobState.PENDING and fell_back.available_at == clock.now()
    assert fell_back.failure_class is FailureClass.TRANSIENT
    (attempt,) = mf.jobs.attempts(poisoned.id)
    assert attempt.outcome is AttemptOutcome.FAILED and attempt.message == reason
    expected = "StoreError" if how == "refused" else "ValueError: no row for you"
    assert reason.startswith("its Failed outcome could not be") and expected in reason
    assert recorder.unrecorded.empty()
    recorder._signals.left_to_lease.require_empty()


def test_an_outcome_whose_fallback_fails_too_is_left_to_its_lease(mf: MailFathom) -> None:
    recorder = Poisoned(mf, bad=set(), how="fallback refused too")
    ok, poisoned, failed = _three(mf, recorder)
    recorder.bad = {poisoned.id}
    recorder.flush()  # raises nothing
    _assert_siblings_recorded(mf, ok, failed)
    job, reason = recorder._signals.left_to_lease.wait()
    assert job.id == poisoned.id and "its fallback failed too" in reason
    left = mf.jobs.get(poisoned.id)
    assert left.state is JobState.CLAIMED and left.lease_owner == OWNER
    assert mf.jobs.attempts(poisoned.id) == []
    assert recorder.unrecorded.empty() and recorder.unrecorded.jobs() == []


def test_outcomes_carried_by_a_claim_are_recorded_one_by_one_when_the_batch_fails(
    mf: MailFathom,
) -> None:
    recorder = Poisoned(mf, bad=set(), how="refused")
    ok, poisoned, failed = _three(mf, recorder)
    recorder.bad = {poisoned.id}
    fresh = mf.enqueue("k")
    assert recorder.record_and_claim(Claim(limit=5, lease=LEASE, queues=None, reap=True)) is None
    _assert_siblings_recorded(mf, ok, failed)
    assert recorder._signals.fallback_recorded.wait()[0].id == poisoned.id
    assert mf.jobs.get(fresh.id).state is JobState.PENDING  # that claim was undone
    # The next call claims again: the fresh job, and the poisoned one retried at once.
    assert {job.id for job in _claim(recorder, 2)} == {fresh.id, poisoned.id}


def test_a_shutdown_timeout_is_claimable_at_the_instant_it_is_recorded(
    mf: MailFathom, clock: FakeClock
) -> None:
    """The release a stopping worker promises: without it the job would wait its backoff."""
    recorder = OutcomeRecorder(
        mf.queue, OWNER, outage=Outage(OWNER, limit=0.5), signals=WorkerSignals()
    )
    mf.enqueue("k", max_attempts=3)
    (job,) = _claim(recorder, 1)
    recorder.unrecorded.add(
        Finished(job, AttemptOutcome.SHUTDOWN_TIMEOUT, message="still running", started_at=None)
    )
    recorder.flush()
    released = mf.jobs.get(job.id)
    assert released.state is JobState.PENDING and released.available_at == clock.now()
    (again,) = claim(mf, "another", 1, LEASE)
    assert (again.id, again.attempts) == (job.id, 2)


class _Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no text")


def test_a_poison_outcome_never_stops_the_worker_nor_loses_its_siblings(
    mf: MailFathom,
) -> None:
    """A retry delay past the year 9999 and an exception that cannot be printed, in the
    same batch as jobs that succeeded: the worker records each and carries on."""

    @mf.job("ok")
    def fine(ctx: JobContext) -> None:
        pass

    @mf.job("far", max_attempts=3)
    def far(ctx: JobContext) -> None:
        raise TransientFailure("later", retry_after=timedelta.max)

    @mf.job("mute", max_attempts=3)
    def mute(ctx: JobContext) -> None:
        raise _Unprintable()

    oks = mf.enqueue_many("ok", [{} for _ in range(5)])
    poisons = [mf.enqueue("far"), mf.enqueue("mute")]
    more = mf.enqueue_many("ok", [{} for _ in range(5)])
    assert mf.worker(concurrency=4).run(burst=True) >= 12
    for job in [*oks, *more]:
        assert mf.jobs.get(job.id).state is JobState.SUCCEEDED
    # Each is recorded as docs/worker.md says: a transient failure with attempts left,
    # Pending again. The delay past 365 days is cut to 365 days, saying so; the message
    # that cannot be printed reads as its type and what went wrong, after the backoff.
    far_job, mute_job = (mf.jobs.get(poison.id) for poison in poisons)
    (far_attempt,) = mf.jobs.attempts(far_job.id)
    (mute_attempt,) = mf.jobs.attempts(mute_job.id)
    for recorded, attempt in ((far_job, far_attempt), (mute_job, mute_attempt)):
        assert attempt.outcome is AttemptOutcome.FAILED
        assert attempt.failure_class is FailureClass.TRANSIENT
        assert (recorded.state, recorded.attempts, recorded.failure_reason) == (
            JobState.PENDING,
            1,
            attempt.message,
        )
    far_ended, far_due = far_attempt.finished_at, far_job.available_at
    mute_ended, mute_due = mute_attempt.finished_at, mute_job.available_at
    assert far_ended and far_due and mute_ended and mute_due
    assert far_attempt.message is not None
    assert far_attempt.message.startswith("later (retry_after ")
    assert far_attempt.message.endswith(" s is over the 365-day limit: retrying in 365 days)")
    assert far_due == far_ended + timedelta(days=365)
    assert mute_attempt.message == "_Unprintable: <unprintable: str() raised RuntimeError>"
    assert mute_ended < mute_due < far_due  # after the kind's (short) backoff
