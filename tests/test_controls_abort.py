"""Once ``mf.jobs.abort`` has returned, the job never starts again, on every store:
whichever way its current attempt ends before the worker learns of the request (a
failure, a snooze, a release of a job claimed ahead, a lost lease), it ends
DeadLettered, permanent, the actor in its reason. A success the handler reached first
stays Succeeded with a clean row, and the audit trail says the abort came too late. A
Pending job aborted never starts.

The worker tests use a lease long enough that no heartbeat carries the request during
the test: each attempt ends *before* its worker could learn of the abort, which is the
race these guarantees are about. The interleaving is driven by events, never sleeps.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

import pytest

from mailfathom import (
    AttemptOutcome,
    FailureClass,
    FakeClock,
    IllegalTransition,
    Job,
    JobContext,
    JobState,
    MailFathom,
    Snooze,
)
from mailfathom.jobs.worker import claim_ahead
from mailfathom.jobs.worker.worker import Worker
from mailfathom.testing import claim
from reaping import reap
from test_worker_claim_ahead import _claimed_ahead, _long_among_short

#: The heartbeat (a third of the lease) never comes during a test: the attempt ends first.
LONG_LEASE = 600.0
LEASE = timedelta(seconds=30)


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


def _recorded(worker: Worker, job_id: int) -> None:
    worker.signals.batch_recorded.wait_for(
        lambda batch: any(pair[0] == job_id for pair in batch.recorded)
    )


def _dead_by_abort(mf: MailFathom, job_id: int, reason: str) -> Job:
    job = mf.jobs.get(job_id)
    assert job.state is JobState.DEAD_LETTERED
    assert job.failure_class is FailureClass.PERMANENT
    assert job.failure_reason == reason
    assert job.lease_owner is None and job.finished_at is not None
    return job


def _gated(
    mf: MailFathom, kind: str, end: object, *, max_attempts: int = 5
) -> tuple[threading.Event, list[int]]:
    """Register ``kind``: its handler waits for the gate, then raises ``end`` (an
    exception) or returns. Returns the gate and the list of attempts that ran."""
    gate = threading.Event()
    ran: list[int] = []

    @mf.job(kind, max_attempts=max_attempts)
    def handler(ctx: JobContext) -> None:
        ran.append(ctx.job.attempts)
        assert gate.wait(30)
        if isinstance(end, BaseException):
            raise end

    return gate, ran


def _abort_while_it_runs(mf: MailFathom, kind: str, gate: threading.Event) -> tuple[Job, Worker]:
    """Start ``kind``'s job on a worker, abort it, let the handler end, wait until its
    outcome is recorded; the worker is stopped on return."""
    job = mf.enqueue(kind)
    worker = mf.worker(lease=LONG_LEASE, poll_interval=0.05, shutdown_timeout=5)
    try:
        with running(worker):
            worker.signals.started.wait_for(lambda started: started.id == job.id)
            asked = mf.jobs.abort(job.id, actor="erin", reason="wrong customer")
            assert asked.state is JobState.CLAIMED
            gate.set()
            _recorded(worker, job.id)
    finally:
        gate.set()  # whatever failed, the handler ends and the worker can stop
    worker.signals.abort_seen.require_empty()  # the heartbeat did not come first
    return job, worker


# -- through the worker: the attempt ends before the worker learns of the abort ----------


def test_a_transient_failure_after_an_abort_dead_letters_instead_of_retrying(
    mf: MailFathom,
) -> None:
    gate, ran = _gated(mf, "flaky", RuntimeError("connection reset"))
    job, _ = _abort_while_it_runs(mf, "flaky", gate)
    _dead_by_abort(mf, job.id, "aborted by erin: wrong customer (its attempt had failed first)")
    (attempt,) = mf.jobs.attempts(job.id)
    assert attempt.outcome is AttemptOutcome.FAILED  # what the attempt itself did
    assert attempt.message is not None and "connection reset" in attempt.message
    assert mf.worker().run(burst=True) == 0 and ran == [1]  # never starts again


def test_a_last_attempt_failing_after_an_abort_is_dead_lettered_as_the_abort(
    mf: MailFathom,
) -> None:
    """Out of attempts, it would be dead-lettered anyway: as the operator's abort
    (permanent, the actor in the reason), not as a transient failure."""
    gate, ran = _gated(mf, "last", RuntimeError("connection reset"), max_attempts=1)
    job, _ = _abort_while_it_runs(mf, "last", gate)
    _dead_by_abort(mf, job.id, "aborted by erin: wrong customer")
    (attempt,) = mf.jobs.attempts(job.id)
    assert attempt.outcome is AttemptOutcome.FAILED
    assert attempt.failure_class is FailureClass.TRANSIENT
    assert ran == [1]


def test_a_snooze_after_an_abort_dead_letters_instead_of_waiting(mf: MailFathom) -> None:
    gate, ran = _gated(mf, "early", Snooze(60))
    job, _ = _abort_while_it_runs(mf, "early", gate)
    dead = _dead_by_abort(
        mf, job.id, "aborted by erin: wrong customer (its attempt had snoozed first)"
    )
    assert dead.snoozes == 0  # the snooze was not taken
    (attempt,) = mf.jobs.attempts(job.id)
    assert attempt.outcome is AttemptOutcome.SNOOZED
    assert mf.worker().run(burst=True) == 0 and ran == [1]


def test_a_success_after_an_abort_stays_succeeded_with_a_clean_row_and_says_so(
    mf: MailFathom,
) -> None:
    gate, ran = _gated(mf, "quick", None)
    job, worker = _abort_while_it_runs(mf, "quick", gate)
    done = mf.jobs.get(job.id)
    assert done.state is JobState.SUCCEEDED and ran == [1]
    assert (done.abort_reason, done.failure_class, done.failure_reason) == (None, None, None)
    abort, late = mf.jobs.events(job.id)
    assert (abort.action, abort.actor, abort.to_state) == ("abort", "erin", JobState.CLAIMED)
    assert (late.action, late.actor) == ("abort_too_late", worker.id)
    assert (late.from_state, late.to_state) == (JobState.CLAIMED, JobState.SUCCEEDED)
    assert late.reason == (
        "aborted by erin: wrong customer: the attempt had already succeeded, and stays Succeeded"
    )


def test_a_job_claimed_ahead_and_released_at_stop_after_an_abort_never_starts(
    mf: MailFathom, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(claim_ahead, "LATE_AFTER", 3600.0)  # only the stop releases them
    gate = threading.Event()
    long_id, behind = _long_among_short(mf, gate, 10)
    worker = mf.worker(concurrency=1, shutdown_timeout=30, lease=LONG_LEASE)
    worker.signals.init()
    try:
        with running(worker):
            _claimed_ahead(worker, long_id, behind)
            # the long job holds the only slot: what is Claimed behind it has not started
            (victim, *_) = sorted(
                job.id for job in mf.jobs.list(JobState.CLAIMED) if job.id in behind
            )
            mf.jobs.abort(victim, actor="erin", reason="wrong customer")
            worker.stop()
            gate.set()
            released = worker.signals.released.wait_for(
                lambda jobs: victim in {job.id for job in jobs}
            )
            worker.signals.stopped.wait()
    finally:
        gate.set()
    worker.signals.abort_seen.require_empty()
    dead = _dead_by_abort(mf, victim, "aborted by erin: wrong customer (before it started)")
    assert dead.attempts == 0 and mf.jobs.attempts(victim) == []  # it never ran
    for job in released:
        if job.id != victim:
            assert mf.jobs.get(job.id).state is JobState.PENDING  # the others go back


# -- through the store: release, reap, and the order of abort and success ----------------


def test_a_late_release_of_an_aborted_job_dead_letters_it(mf: MailFathom) -> None:
    job = mf.enqueue("k", max_attempts=5)
    other = mf.enqueue("k")
    claim(mf, "w", 10, LEASE)
    mf.jobs.abort(job.id, actor="erin", reason="wrong customer")
    held = [(job.id, 1), (other.id, 1)]
    assert mf.store.claims.release_unstarted(owner="w", held=held, now=mf.clock.now()) == {
        job.id,
        other.id,
    }
    _dead_by_abort(mf, job.id, "aborted by erin: wrong customer (before it started)")
    assert mf.jobs.get(other.id).state is JobState.PENDING
    (again,) = claim(mf, "w", 10, LEASE)
    assert again.id == other.id


def test_a_lost_lease_of_an_aborted_job_is_reaped_into_the_dead_letters(
    mf: MailFathom, clock: FakeClock
) -> None:
    """Its worker's outcome comes too late (the lease moved on): the reaper's is final."""
    job = mf.enqueue("k", max_attempts=5)
    claim(mf, "w", 10, LEASE)
    mf.jobs.abort(job.id, actor="erin", reason="wrong customer")
    clock.advance(LEASE + timedelta(minutes=1))
    assert reap(mf.store, now=clock.now()) == 1
    assert mf.store.claims.record_outcomes(owner="w", now=clock.now(), succeeded=[(job.id, 1)]) == {
        job.id
    }
    _dead_by_abort(mf, job.id, "aborted by erin: wrong customer (its worker w was gone)")
    assert claim(mf, "w2", 10, LEASE) == []


def test_a_success_committed_before_the_abort_refuses_it_and_stays_clean(
    mf: MailFathom, clock: FakeClock
) -> None:
    job = mf.enqueue("k")
    claim(mf, "w", 10, LEASE)
    assert (
        mf.store.claims.record_outcomes(owner="w", now=clock.now(), succeeded=[(job.id, 1)])
        == set()
    )
    with pytest.raises(IllegalTransition, match="it is Succeeded"):
        mf.jobs.abort(job.id, actor="erin")
    done = mf.jobs.get(job.id)
    assert done.state is JobState.SUCCEEDED and done.abort_reason is None
    assert mf.jobs.events(job.id) == []


# -- a Pending job --------------------------------------------------------------------


@pytest.mark.parametrize("held", [False, True], ids=["due", "held"])
def test_an_aborted_pending_job_is_dead_lettered_and_never_starts(
    mf: MailFathom, held: bool
) -> None:
    ran: list[int] = []

    @mf.job("report")
    def report(ctx: JobContext) -> None:
        ran.append(ctx.job_id)

    job = mf.enqueue("report")
    if held:
        mf.jobs.hold(job.id, actor="erin")
    dead = mf.jobs.abort(job.id, actor="erin", reason="not wanted")
    assert dead.state is JobState.DEAD_LETTERED
    _dead_by_abort(mf, job.id, "aborted by erin: not wanted (before it started)")
    assert mf.worker().run(burst=True) == 0 and ran == []
    event = mf.jobs.events(job.id)[-1]
    assert (event.action, event.from_state, event.to_state) == (
        "abort",
        JobState.PENDING,
        JobState.DEAD_LETTERED,
    )
    with pytest.raises(IllegalTransition, match="it is DeadLettered"):
        mf.jobs.abort(job.id, actor="erin")
    # the operator's usual moves apply to the dead letter
    assert mf.jobs.requeue(job.id, actor="erin").abort_reason is None
    mf.worker().run(burst=True)
    assert ran == [job.id]
