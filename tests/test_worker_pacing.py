"""The worker's claim pacing and claim-ahead sizing, alone: pure decisions on the
numbers the worker passes in (instants in seconds), so no store and no clock."""

from __future__ import annotations

from datetime import UTC, datetime

from mailfathom.jobs.model import Job
from mailfathom.jobs.state import JobState
from mailfathom.jobs.worker.claim_ahead import HORIZON, LATE_AFTER, MOST, ReadyJobs
from mailfathom.jobs.worker.pacing import CLAIM_COOLDOWN, REAP_INTERVAL, ClaimPacer, Load

T0 = 1024.0  # a power of two: the sums below are exact


def job(n: int) -> Job:
    now = datetime(2030, 1, 1, tzinfo=UTC)
    return Job(
        id=n,
        kind="k",
        queue="default",
        payload={},
        priority=0,
        state=JobState.CLAIMED,
        idempotency_key=None,
        attempts=1,
        attempt_base=0,
        max_attempts=3,
        available_at=now,
        lease_owner="w",
        lease_expires_at=now,
        claimed_by="w",
        claimed_at=now,
        failure_class=None,
        failure_reason=None,
        created_at=now,
        finished_at=None,
    )


def load(running: int = 0, ready: int = 0, unrecorded: int = 0, age: float = 0.0) -> Load:
    return Load(running=running, ready=ready, unrecorded=unrecorded, unrecorded_age=age)


def test_an_idle_worker_claims_every_poll_interval_or_when_woken() -> None:
    pacer = ClaimPacer(4, 1.0, ReadyJobs(4))
    assert pacer.wanted(T0, load()) == 4  # the first claim
    pacer.claimed(T0, 4, 0, reaped=True)  # nothing was due
    assert pacer.wanted(T0 + 0.5, load()) == 0
    assert pacer.wanted(T0 + 0.5, load(), burst=True) == 4  # a burst drains at once
    pacer.woken = True
    assert pacer.wanted(T0 + 0.5, load()) == 4
    pacer.claimed(T0 + 0.5, 4, 0, reaped=False)
    assert not pacer.woken
    assert pacer.wanted(T0 + 1.5, load()) == 4


def test_a_busy_worker_batches_its_claims() -> None:
    pacer = ClaimPacer(10, 1.0, ReadyJobs(10))
    pacer.claimed(T0, 10, 10, reaped=True)  # full: more is probably due
    assert pacer.wanted(T0 + 0.001, load(running=9)) == 0  # one slot free: wait a little
    assert pacer.wanted(T0 + 0.001, load(running=5)) == 5  # half free: claim now
    assert pacer.wanted(T0 + 2 * CLAIM_COOLDOWN, load(running=9)) == 1
    assert pacer.wanted(T0 + 5, load(running=10)) == 0  # no slot at all


def test_claims_reap_at_most_once_a_reap_interval() -> None:
    pacer = ClaimPacer(1, 1.0, ReadyJobs(1))
    assert pacer.reap_due(T0)
    pacer.claimed(T0, 1, 1, reaped=True)
    assert not pacer.reap_due(T0 + REAP_INTERVAL / 2)
    pacer.claimed(T0 + REAP_INTERVAL / 2, 1, 1, reaped=False)
    assert pacer.reap_due(T0 + REAP_INTERVAL)


def test_short_jobs_are_claimed_ahead_and_long_ones_never() -> None:
    ready = ReadyJobs(2)
    pacer = ClaimPacer(2, 1.0, ready)
    assert pacer.capacity() == 2  # run time unknown: the slots only
    ready.ran(0.001)
    assert pacer.capacity() == 2 + MOST * 2  # capped
    slow = ReadyJobs(2)
    slow.ran(HORIZON * 2 * 1.5)
    assert slow.extra() == 0


def test_a_job_claimed_ahead_that_has_not_started_goes_late_and_stops_claiming_ahead() -> None:
    ready = ReadyJobs(1)
    ready.ran(0.001)
    assert ready.extra() > 0
    ready.add([job(1), job(2)], T0)
    ready.add([job(3)], T0 + 0.03)
    assert ready.late_at() == T0 + LATE_AFTER
    assert ready.late(T0 + LATE_AFTER - 0.001) == []
    assert [j.id for j in ready.late(T0 + LATE_AFTER)] == [1, 2]
    assert ready.extra() == 0, "still claiming ahead behind a long job"
    assert [j.id for j in ready] == [3] and ready.late_at() == T0 + 0.03 + LATE_AFTER
    ready.ran(0.001)  # an attempt ended: slots free up again
    assert ready.extra() > 0
    assert [j.id for j in ready.take_all()] == [3] and ready.late_at() is None


def test_outcomes_are_recorded_alone_when_no_claim_carries_them_soon() -> None:
    pacer = ClaimPacer(10, 1.0, ReadyJobs(10))
    assert not pacer.should_flush(T0, load())
    pacer.claimed(T0, 10, 3, reaped=True)  # the queue looked empty
    assert pacer.should_flush(T0, load(unrecorded=1))
    pacer.claimed(T0, 10, 10, reaped=True)  # busy: the next claim carries them
    assert not pacer.should_flush(T0, load(unrecorded=1, age=0.001))
    assert pacer.should_flush(T0, load(unrecorded=1, age=CLAIM_COOLDOWN))
    assert pacer.should_flush(T0, load(unrecorded=5))


def test_the_loop_sleeps_until_the_earliest_reason_to_wake() -> None:
    pacer = ClaimPacer(2, 1.0, ReadyJobs(2))
    pacer.claimed(T0, 2, 0, reaped=True)
    assert pacer.wait_time(T0, load()) == 1.0
    assert pacer.wait_time(T0, load(), wake_by=T0 + 0.25) == 0.25
    assert pacer.wait_time(T0, load(unrecorded=1)) == CLAIM_COOLDOWN
    assert pacer.wait_time(T0, load(unrecorded=1), not_before=T0 + 0.5) == 0.5
    assert pacer.wait_time(T0, load(), wake_by=T0 - 5) == 0.001  # never a busy spin
    assert pacer.wait_time(T0, load(), not_before=T0 + 60) == 1.0  # never past a poll
