"""A clock stepped backwards (NTP, a VM restored, an operator) never stops the heartbeat,
never shortens a lease, and a registry problem never stops lease renewal; a clock stepped
forward never makes a worker reap the leases it holds and renews."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest

from mailfathom import FakeClock, JobContext, JobState, MailFathom, StoreError
from mailfathom.jobs.worker import pacing
from mailfathom.jobs.worker.heartbeat import Heartbeat
from mailfathom.store.base import WorkerRegistration
from mailfathom.testing import claim
from reaping import reap

LEASE = timedelta(seconds=30)


def _registration(mf: MailFathom, *, concurrency: int = 1) -> WorkerRegistration:
    return WorkerRegistration(
        id="host:1:w",
        host="host",
        pid=1,
        queues=None,
        kinds=(),
        concurrency=concurrency,
        lease_seconds=LEASE.total_seconds(),
        started_at=mf.clock.now(),
    )


@pytest.mark.parametrize("step", [timedelta(minutes=1), timedelta(hours=1)])
def test_a_heartbeat_survives_a_clock_stepped_back(
    mf: MailFathom, clock: FakeClock, database_url: str, step: timedelta
) -> None:
    registration = _registration(mf)
    job = mf.enqueue("k")
    (claimed,) = claim(mf, registration.id, 1, LEASE)
    lost: list[set[tuple[int, int]]] = []
    heartbeat = Heartbeat(
        mf.store, clock, registration, lease=LEASE, held=lambda: [claimed], on_lost=lost.append
    )
    heartbeat.beat()
    start = clock.now()
    clock.advance(10)
    heartbeat.beat()
    renewed = mf.jobs.get(job.id).lease_expires_at
    assert renewed == clock.now() + LEASE

    clock.set(clock.now() - step)
    heartbeat.beat()  # before: the registry CHECK failed and rolled the renewal back
    heartbeat.beat()
    assert lost == []
    after = mf.jobs.get(job.id)
    assert after.state is JobState.CLAIMED and after.lease_owner == registration.id
    assert after.lease_expires_at == renewed, "a backwards step shortened the lease"
    (worker,) = mf.workers.list()
    assert worker.started_at == start and worker.last_heartbeat_at >= worker.started_at

    # a worker whose clock is right does not see the lease expire early
    with MailFathom(database_url, clock=FakeClock(start + timedelta(seconds=30))) as other:
        assert reap(other.store, now=other.clock.now()) == 0
        assert claim(other, "other", 1, LEASE) == []

    # once the stepped clock has caught up, beats renew the lease again
    clock.set(start + timedelta(seconds=20))
    heartbeat.beat()
    assert mf.jobs.get(job.id).lease_expires_at == clock.now() + LEASE
    assert mf.workers.list()[0].last_heartbeat_at == clock.now()


def test_a_registry_that_refuses_the_worker_does_not_stop_lease_renewal(
    mf: MailFathom, clock: FakeClock
) -> None:
    registration = _registration(mf, concurrency=0)  # the registry's CHECK refuses it
    job = mf.enqueue("k")
    (claimed,) = claim(mf, registration.id, 1, LEASE)
    lost: list[set[tuple[int, int]]] = []
    heartbeat = Heartbeat(
        mf.store, clock, registration, lease=LEASE, held=lambda: [claimed], on_lost=lost.append
    )
    clock.advance(20)
    with pytest.raises(StoreError):
        heartbeat.beat()
    assert mf.jobs.get(job.id).lease_expires_at == clock.now() + LEASE
    assert lost == []
    assert mf.workers.list() == []


# -- a clock stepped forward -------------------------------------------------------------


def test_a_reaper_whose_clock_stepped_ahead_leaves_its_own_live_leases(
    mf: MailFathom, clock: FakeClock
) -> None:
    """The store's side: a claim that reaps passes the leases its worker holds and renews;
    those are never reaped by it, however far its clock ran ahead. Anyone else's view, and
    its own leases it no longer renews, are reaped as before."""
    job = mf.enqueue("k", max_attempts=5)
    (claimed,) = claim(mf, "w", 1, LEASE)
    clock.advance(timedelta(hours=1))
    now = clock.now()
    live = [(claimed.id, claimed.attempts)]
    assert (
        mf.store.claims.claim(owner="w", limit=1, now=now, lease_until=now + LEASE, live=live) == []
    )
    assert reap(mf.store, now=now, owner="w", live=live) == 0
    kept = mf.jobs.get(job.id)
    assert (kept.state, kept.lease_owner, kept.attempts) == (JobState.CLAIMED, "w", 1)
    assert mf.jobs.attempts(job.id) == []
    # a lease "w" holds at another attempt, or no longer renews, is reaped as before
    assert reap(mf.store, now=now, owner="w", live=[(job.id, 2)]) == 1
    assert mf.jobs.get(job.id).state is JobState.PENDING
    assert claim(mf, "w", 1, LEASE)
    clock.advance(timedelta(hours=1))
    assert reap(mf.store, now=clock.now(), owner="w", live=[]) == 1
    # and another worker's reaper takes a lease whose owner stopped renewing it
    (third,) = claim(mf, "w", 1, LEASE)
    clock.advance(timedelta(hours=1))
    live = [(third.id, third.attempts)]
    assert reap(mf.store, now=clock.now(), owner="other", live=live) == 1


def test_a_worker_whose_clock_jumps_an_hour_ahead_keeps_its_running_jobs(
    mf: MailFathom, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its next claim reaps (every claim does here) with a clock an hour ahead of the lease
    it holds, before any heartbeat renewed it: the job it runs is not taken from it, so it
    runs once, with no LeaseExpired attempt."""
    monkeypatch.setattr(pacing, "REAP_INTERVAL", 0.0)
    gate = threading.Event()
    runs: list[int] = []

    @mf.job("long", max_attempts=5)
    def long(ctx: JobContext) -> None:
        runs.append(ctx.job.attempts)
        assert gate.wait(30)

    @mf.job("marker")
    def marker(ctx: JobContext) -> None:
        pass

    job = mf.enqueue("long")
    worker = mf.worker(concurrency=4, lease=600, poll_interval=0.05)  # no heartbeat comes
    worker.signals.init()
    thread = threading.Thread(target=worker.run)
    thread.start()
    try:
        worker.signals.started.wait_for(lambda started: started.id == job.id)
        clock.advance(timedelta(hours=1))
        after = mf.enqueue("marker")  # claimed by a claim that reaps, at the stepped clock
        worker.signals.started.wait_for(lambda started: started.id == after.id)
        held = mf.jobs.get(job.id)
        assert (held.state, held.lease_owner, held.attempts) == (
            JobState.CLAIMED,
            worker.id,
            1,
        )
        gate.set()
        worker.signals.batch_recorded.wait_for(
            lambda batch: any(pair[0] == job.id for pair in batch.recorded)
        )
    finally:
        gate.set()
        worker.stop()
        thread.join(30)
    assert not thread.is_alive()
    done = mf.jobs.get(job.id)
    assert done.state is JobState.SUCCEEDED and done.attempts == 1
    assert runs == [1] and mf.jobs.attempts(job.id)[:-1] == []  # no LeaseExpired attempt
