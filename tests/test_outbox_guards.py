"""No outgoing email is stranded: a delivery job that ends outside the handler refuses
its Recorded email, send_again always leaves a job that will deliver, and input the
database cannot store is refused up front on every store."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from email.message import EmailMessage

import pytest

from mailfathom import (
    FakeClock,
    InvalidInput,
    JobState,
    MailFathom,
    OutgoingEmailStage,
)
from mailfathom.testing import claim
from raw_database import own_store, raw_transaction

LEASE = timedelta(seconds=30)


def message() -> EmailMessage:
    msg = EmailMessage()
    msg["From"] = "alice@example.com"
    msg["To"] = "bob@example.com"
    msg["Subject"] = "Invoice"
    msg.set_content("Please find the invoice attached.\n")
    return msg


@pytest.fixture
def last_try(database_url: str, clock: FakeClock) -> Iterator[MailFathom]:
    """An app whose delivery jobs have one attempt."""
    app = MailFathom(database_url, clock=clock, delivery_max_attempts=1)
    app.migrate()
    yield app
    app.close()


def begin_transmission(app: MailFathom, email_id: int) -> int:
    """What a worker does up to the 354: count an attempt, commit TransmissionBegun."""
    with own_store(app) as own:
        store = own.outbox_attempts
        start, _ = store.begin_attempt(email_id, now=app.clock.now())
        assert start is not None
        attempt = start.email["attempts"]
        assert store.mark_transmission_begun(email_id, attempt, now=app.clock.now())
        return attempt


def test_a_lease_lost_on_the_last_attempt_refuses_the_recorded_email(
    last_try: MailFathom, clock: FakeClock
) -> None:
    recorded = last_try.outbox.record(message())
    begun = last_try.outbox.record(message())
    claimed = claim(last_try, "w1", 10, LEASE)  # the worker dies before any SMTP
    assert {job.payload["email_id"] for job in claimed} == {recorded.id, begun.id}
    begin_transmission(last_try, begun.id)
    clock.advance(LEASE + timedelta(seconds=11))  # past the lease + 10 s skew margin
    assert claim(last_try, "w2", 10, LEASE) == []  # reaps: out of attempts

    email = last_try.outbox.get(recorded.id)
    job = last_try.jobs.get(email.job_id or 0)
    assert job.state is JobState.DEAD_LETTERED
    assert email.stage is OutgoingEmailStage.REFUSED
    assert email.finished_at == job.finished_at == clock.now()
    assert email.reason == f"delivery job {job.id} dead-lettered: {job.failure_reason}"
    assert "lease expired" in (email.reason or "")
    # the body may have gone out: an unknown outcome stays for an operator to resolve
    assert last_try.outbox.get(begun.id).stage is OutgoingEmailStage.TRANSMISSION_BEGUN
    assert [e.id for e in last_try.outbox.unknown()] == [begun.id]


def test_dropping_the_dead_job_of_a_recorded_email_refuses_it(
    last_try: MailFathom, clock: FakeClock
) -> None:
    recorded = last_try.outbox.record(message())
    (job,) = claim(last_try, "w1", 10, LEASE)
    begin_transmission(last_try, recorded.id)
    clock.advance(LEASE + timedelta(seconds=11))  # past the lease + 10 s skew margin
    claim(last_try, "w2", 10, LEASE)
    assert last_try.jobs.get(job.id).state is JobState.DEAD_LETTERED
    # a record stranded in Recorded before this guard existed
    with raw_transaction(last_try) as cur:
        cur.execute(
            "UPDATE mf_outbox SET stage = 'Recorded', transmission_begun_at = NULL "
            f"WHERE id = {recorded.id}"
        )
    clock.advance(timedelta(minutes=5))
    dropped = last_try.jobs.drop(job.id, actor="ops", reason="stale")
    email = last_try.outbox.get(recorded.id)
    assert email.stage is OutgoingEmailStage.REFUSED
    assert email.finished_at == dropped.finished_at == clock.now()
    assert email.reason == f"delivery job {job.id} dropped: {dropped.failure_reason}"


def test_send_again_replaces_a_delivery_job_whose_lease_expired(
    mf: MailFathom, clock: FakeClock
) -> None:
    recorded = mf.outbox.record(message())
    (job,) = claim(mf, "w1", 10, LEASE)
    stale_attempt = begin_transmission(mf, recorded.id)
    clock.advance(LEASE + timedelta(seconds=11))  # w1 stalls past lease + margin
    assert [e.id for e in mf.outbox.unknown()] == [recorded.id]
    mf.outbox.resolve(recorded.id, "send_again", actor="ops", reason="not in the server log")

    email = mf.outbox.get(recorded.id)
    assert email.stage is OutgoingEmailStage.RECORDED
    assert email.job_id is not None and email.job_id != job.id
    assert mf.jobs.get(email.job_id).state is JobState.PENDING
    # w1 comes back, renews its lease and records its success: the new job still delivers
    held = [(job.id, job.attempts)]
    still, _ = mf.store.claims.renew_leases(owner="w1", held=held, lease_until=clock.now() + LEASE)
    assert still == {job.id}
    assert mf.store.claims.record_outcomes(owner="w1", now=clock.now(), succeeded=held) == set()
    assert mf.outbox.get(recorded.id).stage is OutgoingEmailStage.RECORDED
    assert [j.id for j in claim(mf, "w2", 10, LEASE)] == [email.job_id]
    with own_store(mf) as own:
        store = own.outbox_attempts
        start, _ = store.begin_attempt(recorded.id, now=mf.clock.now())
        # counted anew (on PostgreSQL the claim above counted one attempt already)
        assert start is not None and start.email["attempts"] > stale_attempt
        # only the latest attempt may begin a transmission
        assert not store.mark_transmission_begun(recorded.id, stale_attempt, now=mf.clock.now())
        assert store.mark_transmission_begun(
            recorded.id, start.email["attempts"], now=mf.clock.now()
        )


@pytest.mark.parametrize(
    "act",
    [
        lambda mf: mf.outbox.record(message(), idempotency_key="k\x00"),
        lambda mf: mf.outbox.cancel(1, actor="o\x00ps"),
        lambda mf: mf.outbox.cancel(1, actor="ops", reason="r\x00"),
        lambda mf: mf.outbox.resolve(1, "give_up", actor="ops", reason="\x00"),
        lambda mf: mf.outbox.record_again(1, actor="\x00"),
        lambda mf: mf.schedules.pause("nightly", actor="o\x00ps"),
        lambda mf: mf.schedules.pause("nightly", actor="ops", reason="r\x00"),
    ],
)
def test_nul_characters_are_refused_on_every_store(mf: MailFathom, act: object) -> None:
    assert callable(act)
    with pytest.raises(InvalidInput, match="NUL"):
        act(mf)
    assert mf.outbox.list() == []


def test_the_claim_counts_a_delivery_attempt_once_and_forgets_it_on_a_later_lease(
    mf: MailFathom, clock: FakeClock
) -> None:
    recorded = mf.outbox.record(message())
    # the claim counts the attempt in its own transaction and keeps what it sends
    (job,) = claim(mf, "w1", 10, LEASE)
    assert mf.outbox.get(recorded.id).attempts == 1
    # w1 gives the job back unstarted; the record is cancelled meanwhile
    assert mf.store.claims.release_unstarted(
        owner="w1", held=[(job.id, job.attempts)], now=mf.clock.now()
    ) == {job.id}
    # given back unstarted, the job spent no attempt, and neither did its message
    assert mf.outbox.get(recorded.id).attempts == 0
    mf.outbox.cancel(recorded.id, actor="ops", reason="not needed")
    # the next lease of the same job has the same attempt number, and its claim started
    # nothing: what the first claim kept must not be handed to its handler
    (again,) = claim(mf, "w2", 10, LEASE)
    assert (again.id, again.attempts) == (job.id, job.attempts)
    assert mf.deliverer._store.claimed_start(again.id, again.attempts) is None
    email = mf.outbox.get(recorded.id)
    assert (email.stage, email.attempts) == (OutgoingEmailStage.CANCELLED, 0)


def test_a_delivery_given_back_unstarted_is_counted_once_when_it_runs(
    mf: MailFathom, clock: FakeClock
) -> None:
    """A worker's shutdown gives back the deliveries it claimed ahead: the next claim
    counts the message's attempt again, once, and hands its handler what to send."""
    recorded = mf.outbox.record(message())
    (job,) = claim(mf, "w1", 10, LEASE)
    assert mf.store.claims.release_unstarted(
        owner="w1", held=[(job.id, job.attempts)], now=mf.clock.now()
    ) == {job.id}
    assert mf.deliverer._store.claimed_start(job.id, job.attempts) is None  # dropped
    (again,) = claim(mf, "w2", 10, LEASE)
    assert mf.outbox.get(recorded.id).attempts == 1
    start = mf.deliverer._store.claimed_start(again.id, again.attempts)
    assert start is not None and start.email["id"] == recorded.id
    assert start.email["attempts"] == 1
