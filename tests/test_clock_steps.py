"""A clock stepped backwards (NTP, a VM restored, an operator) never stops the heartbeat,
never shortens a lease, and a registry problem never stops lease renewal."""

from __future__ import annotations

from datetime import timedelta

import pytest

from mailfathom import FakeClock, JobState, MailFathom, StoreError
from mailfathom.jobs.heartbeat import Heartbeat
from mailfathom.store.base import WorkerRegistration

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
    (claimed,) = mf.queue.claim(registration.id, 1, LEASE)
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
        assert other.store.reap_expired(now=other.clock.now()) == 0
        assert other.queue.claim("other", 1, LEASE) == []

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
    (claimed,) = mf.queue.claim(registration.id, 1, LEASE)
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
