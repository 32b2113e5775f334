"""``outbox.record(..., run_at=, priority=, expires_at=)`` against a real SMTP server on
every store: scheduled sends, priority among deliveries, and the expiry that refuses a
message not yet transmitted — never one whose body may have gone out."""

from __future__ import annotations

from datetime import timedelta
from email.message import EmailMessage

import pytest

from mailfathom import FakeClock, InvalidInput, JobState, MailFathom, OutgoingEmailStage
from smtp_fixtures import FaultServer


def message(subject: str = "Hello") -> EmailMessage:
    msg = EmailMessage()
    msg["From"] = "alice@example.com"
    msg["To"] = "bob@example.com"
    msg["Subject"] = subject
    msg.set_content("Hi Bob.\n")
    return msg


def deliver(app: MailFathom) -> None:
    app.worker(concurrency=1).run(burst=True)


def test_a_scheduled_send_waits_for_its_time(
    mail_app: MailFathom, smtp: FaultServer, clock: FakeClock
) -> None:
    at = clock.now() + timedelta(hours=1)
    email = mail_app.outbox.record(message(), run_at=at)
    assert email.job_id is not None
    assert mail_app.jobs.get(email.job_id).available_at == at
    deliver(mail_app)
    assert smtp.received() == []
    assert mail_app.outbox.get(email.id).stage is OutgoingEmailStage.RECORDED
    clock.advance(timedelta(hours=1))
    deliver(mail_app)
    assert mail_app.outbox.get(email.id).stage is OutgoingEmailStage.SENT


def test_priority_orders_deliveries(mail_app: MailFathom, smtp: FaultServer) -> None:
    low = mail_app.outbox.record(message("newsletter"), priority=-5)
    high = mail_app.outbox.record(message("password reset"), priority=10)
    assert high.job_id is not None and mail_app.jobs.get(high.job_id).priority == 10
    deliver(mail_app)
    subjects = [r.data.split(b"Subject: ")[1].split(b"\r\n")[0] for r in smtp.received()]
    assert subjects == [b"password reset", b"newsletter"]
    assert {mail_app.outbox.get(e.id).stage for e in (low, high)} == {OutgoingEmailStage.SENT}


def test_a_message_past_its_expiry_is_refused_not_sent(
    mail_app: MailFathom, smtp: FaultServer, clock: FakeClock
) -> None:
    expiry = clock.now() + timedelta(minutes=10)
    email = mail_app.outbox.record(message(), expires_at=expiry)
    assert email.expires_at == expiry
    clock.advance(timedelta(minutes=10))
    deliver(mail_app)
    assert smtp.received() == []
    refused = mail_app.outbox.get(email.id)
    assert (refused.stage, refused.reason) == (OutgoingEmailStage.REFUSED, "expired")
    assert refused.finished_at == clock.now()
    assert email.job_id is not None
    assert mail_app.jobs.get(email.job_id).state is JobState.SUCCEEDED  # nothing left to do


def test_reading_never_settles_an_expired_record_the_worker_does(
    mail_app: MailFathom, smtp: FaultServer, clock: FakeClock
) -> None:
    email = mail_app.outbox.record(message(), expires_at=clock.now() + timedelta(seconds=30))
    clock.advance(31)
    # every read agrees, and none of them writes: get, list and counts say the same
    assert mail_app.outbox.get(email.id).stage is OutgoingEmailStage.RECORDED
    assert [e.stage for e in mail_app.outbox.list()] == [OutgoingEmailStage.RECORDED]
    assert mail_app.outbox.counts()[OutgoingEmailStage.RECORDED] == 1
    deliver(mail_app)
    seen = mail_app.outbox.get(email.id)
    assert (seen.stage, seen.reason) == (OutgoingEmailStage.REFUSED, "expired")
    assert mail_app.outbox.counts()[OutgoingEmailStage.REFUSED] == 1
    assert smtp.accepted() == []


def test_a_record_whose_body_went_out_never_expires(
    mail_app: MailFathom, smtp: FaultServer, clock: FakeClock
) -> None:
    email = mail_app.outbox.record(message(), expires_at=clock.now() + timedelta(minutes=1))
    smtp.script(end="451 4.7.1 greylisted, come back later")  # the body went out
    deliver(mail_app)
    first = mail_app.outbox.get(email.id)
    assert first.stage is OutgoingEmailStage.RECORDED and first.body_transmissions == 1
    clock.advance(timedelta(minutes=5))  # past the expiry, and past the retry's backoff
    assert mail_app.outbox.get(email.id).stage is OutgoingEmailStage.RECORDED
    smtp.script()
    deliver(mail_app)
    assert mail_app.outbox.get(email.id).stage is OutgoingEmailStage.SENT


def test_bad_schedules_are_refused_and_record_nothing(
    mail_app: MailFathom, clock: FakeClock
) -> None:
    now = clock.now()
    cases = [
        ({"run_at": now + timedelta(hours=2), "expires_at": now + timedelta(hours=1)}, "not after"),
        ({"expires_at": now}, "not after"),
        ({"expires_at": "tomorrow"}, "expires_at must be a datetime"),
        ({"priority": True}, "priority must be a 32-bit integer"),
        ({"priority": 2**40}, "32-bit"),
    ]
    for options, error in cases:
        with pytest.raises(InvalidInput, match=error):
            mail_app.outbox.record(message(), **options)  # type: ignore[arg-type]
    assert mail_app.outbox.list() == []
