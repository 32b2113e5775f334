"""Clocks that disagree never run a job twice: a lease counts as expired only once
``lease_expires_at + clock_skew <= now``, judged by whoever looks, on every store.

Each test runs two apps on one database, each with its own FakeClock, the second one
9.5 s ahead of the first — inside the default 10 s margin, and far past the leases used.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import timedelta
from email.message import EmailMessage

import pytest

from mailfathom import (
    ConfigurationError,
    FakeClock,
    IllegalTransition,
    JobContext,
    JobState,
    MailFathom,
    OutgoingEmailStage,
)
from mailfathom.store.base import WorkerRegistration
from mailfathom.testing import claim
from raw_database import own_store
from reaping import reap

AHEAD = timedelta(seconds=9.5)
SKEW = timedelta(seconds=10)
LEASE = timedelta(seconds=1)


@pytest.fixture
def pair(database_url: str) -> Iterator[tuple[MailFathom, MailFathom]]:
    """Two migrated apps on one database: ``behind`` and ``ahead`` (9.5 s ahead)."""
    behind_clock = FakeClock()
    ahead_clock = FakeClock(behind_clock.now() + AHEAD)
    with (
        MailFathom(database_url, clock=behind_clock) as behind,
        MailFathom(database_url, clock=ahead_clock) as ahead,
    ):
        behind.migrate()
        yield behind, ahead


def _clock(app: MailFathom) -> FakeClock:
    assert isinstance(app.clock, FakeClock)
    return app.clock


def test_a_worker_whose_clock_runs_ahead_leaves_a_healthy_job_alone(
    pair: tuple[MailFathom, MailFathom],
) -> None:
    behind, ahead = pair
    started = threading.Event()
    release = threading.Event()
    calls: list[str] = []

    @behind.job("skew.k")
    def slow(ctx: JobContext) -> None:
        calls.append("behind")
        started.set()
        assert release.wait(30)

    @ahead.job("skew.k")
    def stolen(ctx: JobContext) -> None:
        calls.append("ahead")

    job = behind.enqueue("skew.k")
    result: list[int] = []
    worker = behind.worker(lease=LEASE.total_seconds())
    thread = threading.Thread(target=lambda: result.append(worker.run(burst=True)))
    thread.start()
    try:
        assert started.wait(10)
        # 9.5 s ahead of a 1 s lease: without the margin the lease looks long expired
        assert ahead.worker(lease=LEASE.total_seconds()).run(burst=True) == 0
        assert reap(ahead.store, now=ahead.clock.now()) == 0
    finally:
        release.set()
        thread.join(30)
    assert not thread.is_alive() and result == [1]
    assert calls == ["behind"], "the job ran twice"
    done = behind.jobs.get(job.id)
    assert done.state is JobState.SUCCEEDED and done.attempts == 1


def test_a_dead_workers_job_returns_once_lease_and_margin_have_passed(
    pair: tuple[MailFathom, MailFathom],
) -> None:
    behind, ahead = pair
    job = behind.enqueue("skew.k")
    (claimed,) = claim(behind, "dead-worker", 1, LEASE)
    expires = claimed.lease_expires_at
    assert expires == behind.clock.now() + LEASE
    _clock(ahead).set(expires + SKEW - timedelta(microseconds=1))
    assert claim(ahead, "ahead", 1, LEASE) == []
    assert reap(ahead.store, now=ahead.clock.now()) == 0
    assert ahead.jobs.get(job.id).state is JobState.CLAIMED
    _clock(ahead).set(expires + SKEW)
    (taken,) = claim(ahead, "ahead", 1, LEASE)
    assert (taken.id, taken.attempts, taken.lease_owner) == (job.id, 2, "ahead")
    (lost,) = ahead.jobs.attempts(job.id)  # the running second attempt is not listed yet
    assert lost.outcome.value == "LeaseExpired" and lost.worker == "dead-worker"


def test_the_margin_is_a_validated_setting(database_url: str) -> None:
    clock = FakeClock()
    with MailFathom(database_url, clock=clock, clock_skew=0) as app:
        app.migrate()
        assert app.settings.clock_skew == 0
        job = app.enqueue("k")
        claim(app, "dead-worker", 1, LEASE)
        clock.advance(LEASE)
        assert reap(app.store, now=clock.now()) == 1
        assert app.jobs.get(job.id).state is JobState.PENDING
    for bad in (-1, float("nan"), float("inf"), 3601, "10s", True):
        with pytest.raises(ConfigurationError, match="clock_skew"):
            # a type checker refuses the wrong types too; the check holds without one
            MailFathom(database_url, clock=clock, clock_skew=bad)  # type: ignore[arg-type]


def test_the_console_does_not_call_a_worker_dead_because_its_clock_is_ahead(
    pair: tuple[MailFathom, MailFathom],
) -> None:
    behind, ahead = pair
    registration = WorkerRegistration(
        id="host:1:w",
        host="host",
        pid=1,
        queues=None,
        kinds=(),
        concurrency=1,
        lease_seconds=LEASE.total_seconds(),
        started_at=behind.clock.now(),
    )
    behind.store.workers.heartbeat(registration, now=behind.clock.now())
    (seen,) = ahead.workers.list()
    assert seen.alive, "9.5 s of skew made a worker with a 1 s lease look dead"
    _clock(ahead).set(behind.clock.now() + LEASE + SKEW)
    assert [w.alive for w in ahead.workers.list()] == [True]
    _clock(ahead).advance(timedelta(microseconds=1))
    assert [w.alive for w in ahead.workers.list()] == [False]


def _message() -> EmailMessage:
    msg = EmailMessage()
    msg["From"] = "alice@example.com"
    msg["To"] = "bob@example.com"
    msg["Subject"] = "Invoice"
    msg.set_content("Please find the invoice attached.\n")
    return msg


def test_an_operator_whose_clock_runs_ahead_cannot_cancel_a_delivery_in_progress(
    pair: tuple[MailFathom, MailFathom],
) -> None:
    behind, ahead = pair
    recorded = behind.outbox.record(_message())
    (job,) = claim(behind, "worker-1", 1, LEASE)
    assert job.id == recorded.job_id
    with pytest.raises(IllegalTransition, match="a worker is delivering it right now"):
        ahead.outbox.cancel(recorded.id, actor="ops")
    assert ahead.outbox.get(recorded.id).stage is OutgoingEmailStage.RECORDED
    _clock(ahead).set(behind.clock.now() + LEASE + SKEW)
    assert ahead.outbox.cancel(recorded.id, actor="ops").stage is OutgoingEmailStage.CANCELLED


def test_an_unknown_outcome_is_not_listed_while_the_attempt_may_still_be_live(
    pair: tuple[MailFathom, MailFathom],
) -> None:
    behind, ahead = pair
    recorded = behind.outbox.record(_message())
    (job,) = claim(behind, "worker-1", 1, LEASE)
    with own_store(behind) as own:
        store = own.outbox_attempts
        start, _ = store.begin_attempt(recorded.id, now=behind.clock.now())
        assert start is not None
        assert store.mark_transmission_begun(
            recorded.id, start.email["attempts"], now=behind.clock.now()
        )
    assert ahead.outbox.unknown() == []
    with pytest.raises(IllegalTransition, match="live lease"):
        ahead.outbox.resolve(recorded.id, "give_up", actor="ops")
    _clock(ahead).set(behind.clock.now() + LEASE + SKEW)
    assert [email.id for email in ahead.outbox.unknown()] == [recorded.id]
    assert job.lease_expires_at is not None
