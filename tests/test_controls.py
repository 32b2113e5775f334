"""Operator controls through the Python API, on every store: hold, run now, abort (the
request and the reaper's part), pause and resume a queue. The worker's side of abort
and snooze is in test_controls_worker.py."""

from __future__ import annotations

from datetime import timedelta

import pytest

from mailfathom import (
    AttemptOutcome,
    FailureClass,
    FakeClock,
    IllegalTransition,
    InvalidInput,
    JobState,
    MailFathom,
)
from mailfathom.testing import claim
from reaping import reap

LEASE = timedelta(seconds=30)


# -- hold and release -------------------------------------------------------------------


def test_hold_keeps_a_pending_job_from_every_worker_until_released(
    mf: MailFathom, clock: FakeClock
) -> None:
    job = mf.enqueue("k", {"n": 1})
    held = mf.jobs.hold(job.id, actor="alice", reason="investigating")
    assert held.held and held.state is JobState.PENDING
    assert claim(mf, "w", 10, LEASE) == []
    (event,) = mf.jobs.events(job.id)
    assert (event.actor, event.action, event.reason) == ("alice", "hold", "investigating")
    assert (event.from_state, event.to_state) == (JobState.PENDING, JobState.PENDING)
    released = mf.jobs.release(job.id, actor="alice")
    assert released.available_at == clock.now()
    assert [claimed.id for claimed in claim(mf, "w", 10, LEASE)] == [job.id]


def test_hold_is_refused_for_a_held_claimed_or_finished_job(mf: MailFathom) -> None:
    held = mf.enqueue("k", hold=True)
    with pytest.raises(IllegalTransition, match="held already; nothing changed"):
        mf.jobs.hold(held.id, actor="ops")
    claimed = mf.enqueue("k")
    claim(mf, "w", 10, LEASE)
    with pytest.raises(IllegalTransition, match="it is Claimed, and only Pending"):
        mf.jobs.hold(claimed.id, actor="ops")
    assert mf.jobs.get(claimed.id).state is JobState.CLAIMED
    assert mf.jobs.events(held.id) == [] and mf.jobs.events(claimed.id) == []
    with pytest.raises(InvalidInput, match="actor"):
        mf.jobs.hold(held.id, actor=" ")


# -- run now ----------------------------------------------------------------------------


def test_run_now_makes_a_delayed_job_due_at_once(mf: MailFathom, clock: FakeClock) -> None:
    job = mf.enqueue("k", delay=3600)
    assert claim(mf, "w", 10, LEASE) == []
    moved = mf.jobs.run_now(job.id, actor="bob", reason="customer waiting")
    assert moved.available_at == clock.now()
    assert [e.action for e in mf.jobs.events(job.id)] == ["run_now"]
    assert [claimed.id for claimed in claim(mf, "w", 10, LEASE)] == [job.id]


def test_run_now_cuts_a_backoff_short(mf: MailFathom, clock: FakeClock) -> None:
    @mf.job("flaky")
    def flaky(ctx: object) -> None:
        raise RuntimeError("down")

    job = mf.enqueue("flaky")
    mf.worker().run(burst=True)
    backed_off = mf.jobs.get(job.id)
    assert backed_off.state is JobState.PENDING and backed_off.available_at is not None
    assert backed_off.available_at > clock.now()
    assert mf.jobs.run_now(job.id, actor="ops").available_at == clock.now()


def test_run_now_is_refused_for_a_due_or_held_job(mf: MailFathom) -> None:
    due = mf.enqueue("k")
    with pytest.raises(IllegalTransition, match="is due already"):
        mf.jobs.run_now(due.id, actor="ops")
    held = mf.enqueue("k", hold=True)
    with pytest.raises(IllegalTransition, match="is held: release it"):
        mf.jobs.run_now(held.id, actor="ops")
    assert mf.jobs.get(held.id).held
    assert mf.jobs.events(due.id) == [] and mf.jobs.events(held.id) == []


# -- abort (the request, and the reaper when the worker is gone) --------------------------


def test_abort_is_a_request_on_a_claimed_job_returned_by_the_lease_renewal(
    mf: MailFathom, clock: FakeClock
) -> None:
    job = mf.enqueue("k")
    other = mf.enqueue("k")
    claim(mf, "w", 10, LEASE)
    asked = mf.jobs.abort(job.id, actor="carol", reason="runaway")
    assert asked.state is JobState.CLAIMED
    assert asked.abort_reason == "aborted by carol: runaway"
    still, aborts = mf.store.claims.renew_leases(
        owner="w", held=[(job.id, 1), (other.id, 1)], lease_until=clock.now() + LEASE
    )
    assert still == {job.id, other.id}
    assert aborts == {job.id: "aborted by carol: runaway"}
    with pytest.raises(IllegalTransition, match="has an abort request already"):
        mf.jobs.abort(job.id, actor="carol")
    (event,) = mf.jobs.events(job.id)
    assert (event.action, event.from_state, event.to_state) == (
        "abort",
        JobState.CLAIMED,
        JobState.CLAIMED,
    )


def test_abort_is_refused_for_a_finished_job(mf: MailFathom, clock: FakeClock) -> None:
    job = mf.enqueue("k")
    claim(mf, "w", 10, LEASE)
    mf.store.claims.record_outcomes(owner="w", now=clock.now(), succeeded=[(job.id, 1)])
    with pytest.raises(IllegalTransition, match="it is Succeeded, and only Pending or Claimed"):
        mf.jobs.abort(job.id, actor="ops")
    assert mf.jobs.get(job.id).abort_reason is None


def test_an_abort_whose_worker_is_gone_dead_letters_when_the_lease_is_reaped(
    mf: MailFathom, clock: FakeClock
) -> None:
    job = mf.enqueue("k", max_attempts=5)  # attempts left: a plain expiry would retry
    claim(mf, "gone", 10, LEASE)
    mf.jobs.abort(job.id, actor="dave", reason="stuck")
    clock.advance(LEASE + timedelta(minutes=1))
    assert reap(mf.store, now=clock.now()) == 1
    dead = mf.jobs.get(job.id)
    assert dead.state is JobState.DEAD_LETTERED
    assert dead.failure_class is FailureClass.PERMANENT
    assert dead.failure_reason == "aborted by dave: stuck (its worker gone was gone)"
    (attempt,) = mf.jobs.attempts(job.id)
    assert attempt.outcome is AttemptOutcome.ABORTED
    assert attempt.failure_class is FailureClass.PERMANENT
    # from there the operator's usual moves apply, and a new claim forgets the request
    mf.jobs.requeue(job.id, actor="dave")
    (again,) = claim(mf, "w2", 10, LEASE)
    assert again.id == job.id and again.abort_reason is None


# -- pause and resume a queue -------------------------------------------------------------


@pytest.mark.parametrize("named", [False, True], ids=["all-queues", "named-queues"])
def test_a_paused_queue_is_skipped_by_every_claim_and_enqueue_goes_on(
    mf: MailFathom, named: bool
) -> None:
    queues = ["mail", "default"] if named else None
    mail = mf.enqueue("k", queue="mail", priority=10)
    paused = mf.queues.pause("mail", actor="erin", reason="smtp maintenance")
    assert (paused.queue, paused.actor, paused.reason) == ("mail", "erin", "smtp maintenance")
    later = mf.enqueue("k", queue="mail", priority=10)  # enqueue still works
    plain = mf.enqueue("k", queue="default")
    claimed = claim(mf, "w", 10, LEASE, queues=queues)
    assert [job.id for job in claimed] == [plain.id]
    assert [p.queue for p in mf.queues.paused()] == ["mail"]
    summary = {s.queue: s for s in mf.queues.list()}
    assert summary["mail"].paused == paused and summary["mail"].pending == 2
    assert summary["default"].paused is None and summary["default"].running == 1

    mf.queues.resume("mail", actor="erin")
    claimed = claim(mf, "w", 10, LEASE, queues=queues)
    assert {job.id for job in claimed} == {mail.id, later.id}
    assert [(e.action, e.actor) for e in mf.queues.events("mail")] == [
        ("resume", "erin"),
        ("pause", "erin"),
    ]


def test_pausing_twice_or_resuming_a_running_queue_is_refused(mf: MailFathom) -> None:
    mf.queues.pause("mail", actor="ops")
    with pytest.raises(IllegalTransition, match="paused already"):
        mf.queues.pause("mail", actor="ops")
    with pytest.raises(IllegalTransition, match="'other' is not paused"):
        mf.queues.resume("other", actor="ops")
    with pytest.raises(InvalidInput, match="queue"):
        mf.queues.pause("bad name!", actor="ops")
    assert len(mf.queues.events()) == 1
