"""What operators do to outgoing email — cancel, list unknown outcomes, resolve — and the
cancel-versus-delivery race: a cancel either wins (nothing transmitted) or fails; never both."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from email.message import EmailMessage

import pytest

from mailfathom import (
    FakeClock,
    IllegalTransition,
    InvalidInput,
    JobContext,
    JobState,
    MailFathom,
    NotFound,
    OutgoingEmail,
    OutgoingEmailStage,
    PermanentFailure,
    RecordedEmail,
)
from mailfathom.testing import claim
from smtp_fixtures import FaultServer

RECORDED = OutgoingEmailStage.RECORDED
BEGUN = OutgoingEmailStage.TRANSMISSION_BEGUN
SENT = OutgoingEmailStage.SENT
REFUSED = OutgoingEmailStage.REFUSED
CANCELLED = OutgoingEmailStage.CANCELLED


def message(to: str = "bob@example.com") -> EmailMessage:
    msg = EmailMessage()
    msg["From"] = "alice@example.com"
    msg["To"] = to
    msg["Subject"] = "Invoice"
    msg.set_content("Please find the invoice attached.\n")
    return msg


def deliver(app: MailFathom) -> None:
    app.worker(concurrency=1).run(burst=True)


@pytest.fixture
def unknown(mail_app: MailFathom, smtp: FaultServer) -> OutgoingEmail:
    """A record whose body went out and whose answer never came: an unknown outcome."""
    smtp.script(end="disconnect")
    recorded = mail_app.outbox.record(message())
    deliver(mail_app)
    smtp.script()
    email = mail_app.outbox.get(recorded.id)
    assert email.stage is BEGUN
    assert mail_app.jobs.get(email.job_id or 0).state is JobState.DEAD_LETTERED
    return email


# -- cancel ----------------------------------------------------------------------------


def test_cancel_withdraws_a_recorded_email_and_nothing_is_sent(
    mail_app: MailFathom, smtp: FaultServer, clock: FakeClock
) -> None:
    recorded = mail_app.outbox.record(message())
    clock.advance(5)
    cancelled = mail_app.outbox.cancel(recorded.id, actor="ops", reason="customer asked")
    assert cancelled.stage is CANCELLED and cancelled.finished_at == clock.now()
    assert cancelled.reason == "cancelled by ops: customer asked"
    (event,) = mail_app.outbox.events(recorded.id)
    assert (event.actor, event.action, event.from_stage, event.to_stage, event.reason) == (
        "ops",
        "cancel",
        RECORDED,
        CANCELLED,
        "customer asked",
    )
    assert event.at == clock.now()
    deliver(mail_app)
    assert mail_app.jobs.get(recorded.job_id or 0).state is JobState.SUCCEEDED
    assert mail_app.outbox.get(recorded.id).attempts == 0
    assert smtp.received() == []


def test_cancel_is_refused_once_sent_or_begun(mail_app: MailFathom, unknown: OutgoingEmail) -> None:
    with pytest.raises(IllegalTransition, match="it is TransmissionBegun") as refused:
        mail_app.outbox.cancel(unknown.id, actor="ops")
    assert refused.value.current == "TransmissionBegun"
    assert refused.value.allowed_from == ("Recorded",)
    sent = mail_app.outbox.record(message(to="carol@example.com"))
    deliver(mail_app)
    with pytest.raises(IllegalTransition, match="it is Sent"):
        mail_app.outbox.cancel(sent.id, actor="ops")
    with pytest.raises(NotFound):
        mail_app.outbox.cancel(999, actor="ops")
    with pytest.raises(InvalidInput, match="actor"):
        mail_app.outbox.cancel(sent.id, actor=" ")
    assert mail_app.outbox.events(unknown.id) == []
    assert mail_app.outbox.get(unknown.id).stage is BEGUN


def test_cancel_is_refused_while_a_worker_holds_the_delivery(
    mail_app: MailFathom, clock: FakeClock
) -> None:
    recorded = mail_app.outbox.record(message())
    (job,) = claim(mail_app, "worker-1", 1, timedelta(seconds=30))
    assert job.id == recorded.job_id
    with pytest.raises(IllegalTransition, match="a worker is delivering it right now"):
        mail_app.outbox.cancel(recorded.id, actor="ops")
    assert mail_app.outbox.get(recorded.id).stage is RECORDED
    clock.advance(41)  # the worker vanished: its lease and the 10 s skew margin lapsed
    assert mail_app.outbox.cancel(recorded.id, actor="ops").stage is CANCELLED


def _attempt_in_thread(app: MailFathom, email: RecordedEmail) -> tuple[threading.Thread, list[str]]:
    """Run one delivery attempt of ``email`` in a thread, as a worker whose lease has
    lapsed would (the job is not Claimed, so nothing stops a cancel but the stage)."""
    ctx = JobContext(
        job=app.jobs.get(email.job_id or 0), deadline=None, logger=logging.getLogger("test")
    )
    results: list[str] = []

    def attempt() -> None:
        try:
            app.deliverer.handle(ctx, email_id=email.id)
            results.append("returned")
        except PermanentFailure as exc:
            results.append(f"permanent: {exc}")

    thread = threading.Thread(target=attempt)
    thread.start()
    return thread, results


def _wait_for(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 10
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.01)


def test_a_cancel_that_wins_the_race_means_nothing_is_transmitted(
    mail_app: MailFathom, smtp: FaultServer, caplog: pytest.LogCaptureFixture
) -> None:
    smtp.script(rcpt_stall=3.0)  # the cancel below must land inside this stall
    recorded = mail_app.outbox.record(message())
    caplog.set_level(logging.INFO, logger="mailfathom.delivery")
    thread, results = _attempt_in_thread(mail_app, recorded)
    _wait_for(lambda: mail_app.outbox.get(recorded.id).attempts == 1, "the attempt began")
    cancelled = mail_app.outbox.cancel(recorded.id, actor="ops")  # while RCPT TO waits
    thread.join(10)
    assert cancelled.stage is CANCELLED
    assert results == ["returned"]
    assert "cancelled before its body: not sent" in caplog.text
    assert mail_app.outbox.get(recorded.id).stage is CANCELLED
    assert smtp.received() == [], "the body of a cancelled email went out"


def test_a_cancel_that_loses_the_race_fails_and_the_delivery_stands(
    database_url: str, clock: FakeClock, smtp: FaultServer
) -> None:
    smtp.script(end="stall:1.0")
    with MailFathom(database_url, clock=clock, smtp_url=smtp.url(), smtp_data_timeout=10) as app:
        app.migrate()
        recorded = app.outbox.record(message())
        thread, results = _attempt_in_thread(app, recorded)
        _wait_for(lambda: app.outbox.get(recorded.id).stage is BEGUN, "transmission began")
        with pytest.raises(IllegalTransition, match=r"it is (TransmissionBegun|Sent)"):
            app.outbox.cancel(recorded.id, actor="ops")
        thread.join(10)
        assert results == ["returned"]
        assert app.outbox.get(recorded.id).stage is SENT
        assert app.outbox.events(recorded.id) == []
    assert len(smtp.accepted()) == 1


# -- unknown outcomes and their resolution -------------------------------------------------


def test_unknown_lists_transmission_begun_records_nobody_is_delivering(
    mail_app: MailFathom, unknown: OutgoingEmail, clock: FakeClock
) -> None:
    assert [e.id for e in mail_app.outbox.unknown()] == [unknown.id]
    mail_app.jobs.requeue(unknown.job_id or 0, actor="ops")
    claim(mail_app, "worker-1", 1, timedelta(seconds=30))
    assert mail_app.outbox.unknown() == [], "a record a live worker holds is not unknown"
    with pytest.raises(IllegalTransition, match="still waiting for the server's answer"):
        mail_app.outbox.resolve(unknown.id, "delivered", actor="ops")
    clock.advance(41)  # past the lease and the 10 s clock-skew margin
    assert [e.id for e in mail_app.outbox.unknown()] == [unknown.id]


def test_resolve_delivered_marks_it_sent_and_drops_the_dead_job(
    mail_app: MailFathom, unknown: OutgoingEmail, smtp: FaultServer
) -> None:
    resolved = mail_app.outbox.resolve(
        unknown.id, "delivered", actor="ops", reason="found it in the server log"
    )
    assert resolved.stage is SENT and resolved.finished_at is not None
    assert resolved.reason == "delivered by ops: found it in the server log"
    (event,) = mail_app.outbox.events(unknown.id)
    assert (event.action, event.from_stage, event.to_stage, event.actor) == (
        "delivered",
        BEGUN,
        SENT,
        "ops",
    )
    job = mail_app.jobs.get(unknown.job_id or 0)
    assert job.state is JobState.DROPPED
    assert [(e.action, e.actor) for e in mail_app.jobs.events(job.id)] == [("drop", "ops")]
    assert mail_app.outbox.unknown() == []
    with pytest.raises(IllegalTransition, match="only TransmissionBegun"):
        mail_app.outbox.resolve(unknown.id, "send_again", actor="ops")
    deliver(mail_app)
    assert len(smtp.received()) == 1


def test_resolve_give_up_refuses_it(mail_app: MailFathom, unknown: OutgoingEmail) -> None:
    resolved = mail_app.outbox.resolve(unknown.id, "give_up", actor="ops", reason="too late")
    assert resolved.stage is REFUSED and resolved.reason == "give_up by ops: too late"
    assert mail_app.jobs.get(unknown.job_id or 0).state is JobState.DROPPED
    assert [e.to_stage for e in mail_app.outbox.events(unknown.id)] == [REFUSED]


def test_resolve_send_again_sends_exactly_one_more_copy(
    mail_app: MailFathom, unknown: OutgoingEmail, smtp: FaultServer
) -> None:
    resolved = mail_app.outbox.resolve(unknown.id, "send_again", actor="ops", reason="lost")
    assert resolved.stage is RECORDED and resolved.transmission_begun_at is None
    job = mail_app.jobs.get(unknown.job_id or 0)
    assert job.state is JobState.PENDING
    assert [(e.action, e.to_state) for e in mail_app.jobs.events(job.id)] == [
        ("requeue", JobState.PENDING)
    ]
    deliver(mail_app)
    deliver(mail_app)
    email = mail_app.outbox.get(unknown.id)
    assert email.stage is SENT and email.attempts == 2
    first, second = smtp.received()
    assert (first.answer, second.accepted) == ("disconnect", True)
    assert first.data == second.data


def test_send_again_after_the_job_was_dropped_makes_a_new_job(
    mail_app: MailFathom, unknown: OutgoingEmail, smtp: FaultServer
) -> None:
    mail_app.jobs.drop(unknown.job_id or 0, actor="ops", reason="tidying dead letters")
    resolved = mail_app.outbox.resolve(unknown.id, "send_again", actor="ops")
    assert resolved.job_id is not None and resolved.job_id != unknown.job_id
    deliver(mail_app)
    assert mail_app.outbox.get(unknown.id).stage is SENT
    assert len(smtp.accepted()) == 1


def test_resolve_refuses_bad_input_and_other_stages(
    mail_app: MailFathom, unknown: OutgoingEmail
) -> None:
    with pytest.raises(InvalidInput, match="'delivered'"):
        mail_app.outbox.resolve(unknown.id, "maybe", actor="ops")
    with pytest.raises(InvalidInput, match="actor"):
        mail_app.outbox.resolve(unknown.id, "delivered", actor="")
    with pytest.raises(NotFound):
        mail_app.outbox.resolve(404, "delivered", actor="ops")
    recorded = mail_app.outbox.record(message(to="carol@example.com"))
    with pytest.raises(IllegalTransition, match="it is Recorded") as refused:
        mail_app.outbox.resolve(recorded.id, "give_up", actor="ops")
    assert refused.value.allowed_from == ("TransmissionBegun",)
    assert mail_app.outbox.get(unknown.id).stage is BEGUN
    assert mail_app.outbox.events(unknown.id) == []


def test_a_refused_email_is_recorded_again_as_a_new_linked_record(
    mail_app: MailFathom, smtp: FaultServer
) -> None:
    smtp.script(mail="550 5.7.1 relay misconfigured")
    refused = mail_app.outbox.record(message(to="bob@example.com, carol@example.com"))
    deliver(mail_app)
    assert mail_app.outbox.get(refused.id).stage is REFUSED
    with pytest.raises(IllegalTransition, match="only Refused"):
        mail_app.outbox.record_again(
            mail_app.outbox.record(message(to="dan@example.com")).id, actor="ops"
        )
    smtp.script()
    again = mail_app.outbox.record_again(refused.id, actor="ops", reason="relay fixed")
    assert (again.stage, again.parent_id, again.message_id) == (
        RECORDED,
        refused.id,
        refused.message_id,
    )
    assert [r.address for r in again.recipients] == ["bob@example.com", "carol@example.com"]
    assert mail_app.outbox.message_bytes(again.id) == mail_app.outbox.message_bytes(refused.id)
    (event,) = mail_app.outbox.events(refused.id)
    assert (event.action, event.from_stage, event.to_stage, event.reason) == (
        "record_again",
        REFUSED,
        REFUSED,
        f"recorded again as {again.id}: relay fixed",
    )
    deliver(mail_app)
    assert mail_app.outbox.get(again.id).stage is SENT
    assert mail_app.outbox.get(refused.id).stage is REFUSED
    assert sorted(r.rcpt_tos for r in smtp.accepted()) == [
        ["bob@example.com", "carol@example.com"],
        ["dan@example.com"],  # the Recorded one used to show that only Refused is copied
    ]
