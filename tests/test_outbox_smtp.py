"""Every row of the DESIGN §2 submission table, against a real SMTP server process.

The server (tests/smtp_fault_server.py) answers as each test scripts it; delivery
runs as the ``mailfathom.deliver`` job through a real worker, on every store.
"""

from __future__ import annotations

from collections.abc import Iterator
from email.message import EmailMessage
from typing import Any

import pytest

from mailfathom import (
    FailureClass,
    FakeClock,
    JobState,
    MailFathom,
    OutgoingEmail,
    OutgoingEmailStage,
)
from smtp_fixtures import FaultServer

RECORDED = OutgoingEmailStage.RECORDED
BEGUN = OutgoingEmailStage.TRANSMISSION_BEGUN
SENT = OutgoingEmailStage.SENT
REFUSED = OutgoingEmailStage.REFUSED


def message(to: str = "bob@example.com", **extra: str) -> EmailMessage:
    msg = EmailMessage()
    msg["From"] = "alice@example.com"
    msg["To"] = to
    msg["Subject"] = "Quarterly report"
    for name, value in extra.items():
        msg[name] = value
    msg.set_content("Numbers are up.\n.\nA line that is only a dot, above.\n")
    return msg


def deliver(app: MailFathom) -> OutgoingEmail:
    """Run every due job once; return the (only or newest) record afterwards."""
    app.worker(concurrency=1).run(burst=True)
    return app.outbox.list(limit=1)[0]


def later(app: MailFathom, clock: FakeClock) -> OutgoingEmail:
    """Move past any backoff (attempts 1-2 wait at most 2 minutes) and deliver again."""
    clock.advance(121)
    return deliver(app)


@pytest.fixture
def app_for(
    database_url: str, clock: FakeClock, smtp: FaultServer
) -> Iterator[dict[str, MailFathom]]:
    """Apps submitting with other URLs or settings (``app_for['url']``), closed after."""
    apps: dict[str, MailFathom] = {}
    yield apps
    for app in apps.values():
        app.close()


def _app(apps: dict[str, MailFathom], url: str, clock: FakeClock, db: str, **kw: Any) -> MailFathom:
    app = MailFathom(db, clock=clock, smtp_url=url, **kw)
    app.migrate()
    apps[url] = app
    return app


# -- the whole way ----------------------------------------------------------------------


def test_accepted_message_is_sent_with_the_exact_bytes(
    mail_app: MailFathom, smtp: FaultServer
) -> None:
    recorded = mail_app.outbox.record(message(Cc="carol@example.com", Bcc="dave@example.org"))
    email = deliver(mail_app)
    assert email.stage is SENT
    assert email.finished_at is not None and email.transmission_begun_at is not None
    assert (email.reply_code, email.reason) == (250, None)
    assert [(r.address, r.reply_code, r.accepted) for r in email.recipients] == [
        ("bob@example.com", 250, True),
        ("carol@example.com", 250, True),
        ("dave@example.org", 250, True),
    ]
    (received,) = smtp.received()
    assert received.data == mail_app.outbox.message_bytes(recorded.id)
    assert received.rcpt_tos == ["bob@example.com", "carol@example.com", "dave@example.org"]
    assert received.mail_from == "alice@example.com"
    assert f"SIZE={recorded.size}" in received.mail_options
    assert b"\r\n..\r\n" not in received.data, "dot-stuffing leaked into the message"
    assert mail_app.jobs.get(email.job_id or 0).state is JobState.SUCCEEDED


def test_one_connection_carries_many_messages(mail_app: MailFathom, smtp: FaultServer) -> None:
    for n in range(4):
        mail_app.outbox.record(message(to=f"user{n}@example.com"))
    mail_app.worker(concurrency=1).run(burst=True)  # one thread: one connection
    assert mail_app.outbox.counts()[SENT] == 4
    received = smtp.received()
    assert len(received) == 4
    assert len({r.connection for r in received}) == 1, "the SMTP connection was not reused"


def test_a_reused_session_the_server_dropped_is_replaced_within_the_attempt(
    mail_app: MailFathom, smtp: FaultServer
) -> None:
    smtp.script(hang_up_after_reply=True)
    for n in range(3):
        mail_app.outbox.record(message(to=f"user{n}@example.com"))
    mail_app.worker(concurrency=1).run(burst=True)
    emails = mail_app.outbox.list()
    assert [(e.stage, e.attempts) for e in emails] == [(SENT, 1)] * 3
    assert len({r.connection for r in smtp.received()}) == 3


def test_a_session_left_mid_transaction_is_reset_before_reuse(
    mail_app: MailFathom, smtp: FaultServer
) -> None:
    smtp.script(rcpt={"later@example.com": "450 4.2.0 mailbox busy"})
    first = mail_app.outbox.record(message(to="later@example.com"))
    mail_app.worker(concurrency=1).run(burst=True)  # MAIL accepted, RCPT 450: no DATA
    second = mail_app.outbox.record(message(to="now@example.com"))
    mail_app.worker(concurrency=1).run(burst=True)
    assert mail_app.outbox.get(first.id).stage is RECORDED
    sent = mail_app.outbox.get(second.id)
    assert (sent.stage, sent.attempts) == (SENT, 1), sent.reason
    (received,) = smtp.received()
    assert received.rcpt_tos == ["now@example.com"]


# -- session failures: never a refusal, retried --------------------------------------------


def _assert_retried(app: MailFathom, email: OutgoingEmail, reason: str) -> None:
    assert email.stage is RECORDED
    assert email.attempts == 1 and email.transmission_begun_at is None
    assert reason in (email.reason or ""), email.reason
    job = app.jobs.get(email.job_id or 0)
    assert job.state is JobState.PENDING and job.failure_class is FailureClass.TRANSIENT
    assert job.available_at is not None and job.available_at > app.clock.now()


def test_5xx_greeting_is_a_session_failure_not_a_refusal(
    mail_app: MailFathom, smtp: FaultServer, clock: FakeClock
) -> None:
    smtp.script(greeting="554 5.3.2 not accepting mail")
    mail_app.outbox.record(message())
    email = deliver(mail_app)
    _assert_retried(mail_app, email, "greeted with 554 5.3.2 not accepting mail")
    assert email.reply_code == 554
    smtp.script()
    assert later(mail_app, clock).stage is SENT
    assert len(smtp.accepted()) == 1


def test_unreachable_server_is_retried(
    database_url: str, clock: FakeClock, app_for: dict[str, MailFathom]
) -> None:
    app = _app(app_for, "smtp://127.0.0.1:9", clock, database_url, smtp_timeout=5)
    app.outbox.record(message())
    _assert_retried(app, deliver(app), "at connect")


def test_ehlo_refused_is_retried(mail_app: MailFathom, smtp: FaultServer) -> None:
    smtp.script(ehlo="550 5.7.1 go away")
    mail_app.outbox.record(message())
    _assert_retried(mail_app, deliver(mail_app), "EHLO and HELO were answered 550")
    assert smtp.received() == []


def _assert_waiting(app: MailFathom, email: OutgoingEmail, reason: str) -> None:
    """A configuration error: Recorded, no attempt spent, the job snoozed (no failure)."""
    assert email.stage is RECORDED
    assert email.attempts == 0 and email.transmission_begun_at is None
    assert reason in (email.reason or ""), email.reason
    job = app.jobs.get(email.job_id or 0)
    assert job.state is JobState.PENDING and job.failure_class is None
    assert job.available_at is not None and job.available_at > app.clock.now()


def after_pause(app: MailFathom, clock: FakeClock) -> OutgoingEmail:
    """Move past a configuration error's pause (``smtp_config_retry``) and deliver again."""
    clock.advance(301)
    return deliver(app)


def test_auth_failure_waits_and_good_credentials_send(
    database_url: str, clock: FakeClock, smtp: FaultServer, app_for: dict[str, MailFathom]
) -> None:
    smtp.script(tls=True, auth={"user": "app", "password": "s3cret:@/"})
    wrong = _app(app_for, smtp.url(user="app", password="nope"), clock, database_url)
    wrong.outbox.record(message())
    email = deliver(wrong)
    _assert_waiting(wrong, email, "535")
    assert smtp.received() == []
    right = _app(app_for, smtp.url(user="app", password="s3cret:@/"), clock, database_url)
    assert after_pause(right, clock).stage is SENT
    (received,) = smtp.received()
    assert (received.login, received.tls) == ("app", True)


def test_credentials_are_never_sent_in_clear(
    database_url: str, clock: FakeClock, smtp: FaultServer, app_for: dict[str, MailFathom]
) -> None:
    smtp.script(auth={"user": "app", "password": "pw"})  # no STARTTLS offered
    app = _app(app_for, smtp.url(user="app", password="pw"), clock, database_url)
    app.outbox.record(message())
    _assert_waiting(app, deliver(app), "refusing to send credentials")
    assert smtp.received() == []


def test_starttls_verifies_the_certificate(
    database_url: str, clock: FakeClock, smtp: FaultServer, app_for: dict[str, MailFathom]
) -> None:
    smtp.script(tls=True)
    untrusted = _app(app_for, f"smtp://127.0.0.1:{smtp.port}", clock, database_url)
    untrusted.outbox.record(message())
    _assert_waiting(untrusted, deliver(untrusted), "CERTIFICATE_VERIFY_FAILED")
    assert smtp.received() == []
    trusted = _app(app_for, smtp.url(), clock, database_url)
    assert after_pause(trusted, clock).stage is SENT
    assert [r.tls for r in smtp.received()] == [True]


def test_starttls_off_and_require(
    database_url: str, clock: FakeClock, smtp: FaultServer, app_for: dict[str, MailFathom]
) -> None:
    smtp.script()
    required = _app(app_for, smtp.url(starttls="require"), clock, database_url)
    required.outbox.record(message())
    _assert_waiting(required, deliver(required), "does not offer STARTTLS")
    smtp.script(tls=True)
    plain = _app(app_for, smtp.url(starttls="off"), clock, database_url)
    assert after_pause(plain, clock).stage is SENT
    assert [r.tls for r in smtp.received()] == [False]


def test_implicit_tls(
    database_url: str, clock: FakeClock, smtp: FaultServer, app_for: dict[str, MailFathom]
) -> None:
    app = _app(app_for, smtp.url(implicit_tls=True), clock, database_url)
    app.outbox.record(message())
    assert deliver(app).stage is SENT
    assert [r.tls for r in smtp.received()] == [True]


def test_no_smtp_server_configured_fails_transiently(mf: MailFathom) -> None:
    mf.outbox.record(message())
    _assert_retried(mf, deliver(mf), "no SMTP server configured")


def test_attempts_running_out_refuses_the_record(
    database_url: str, clock: FakeClock, smtp: FaultServer, app_for: dict[str, MailFathom]
) -> None:
    smtp.script(greeting="421 4.3.2 busy")
    app = _app(app_for, smtp.url(), clock, database_url, delivery_max_attempts=2)
    app.outbox.record(message())
    assert deliver(app).stage is RECORDED
    email = later(app, clock)
    assert email.stage is REFUSED
    assert "attempts exhausted (2 of 2)" in (email.reason or "")
    job = app.jobs.get(email.job_id or 0)
    assert job.state is JobState.DEAD_LETTERED
    assert smtp.received() == []


# -- MAIL FROM, RCPT TO, DATA --------------------------------------------------------------


def test_mail_from_4xx_is_retried_and_5xx_refused(mail_app: MailFathom, smtp: FaultServer) -> None:
    smtp.script(mail="451 4.3.0 try again later")
    mail_app.outbox.record(message())
    _assert_retried(mail_app, deliver(mail_app), "MAIL FROM was answered 451")
    smtp.script(mail="550 5.7.1 sender rejected")
    mail_app.outbox.record(message(to="carol@example.com"))
    email = deliver(mail_app)
    assert email.stage is REFUSED and "550 5.7.1 sender rejected" in (email.reason or "")
    job = mail_app.jobs.get(email.job_id or 0)
    assert job.state is JobState.DEAD_LETTERED and job.failure_class is FailureClass.PERMANENT
    assert smtp.received() == []


def test_every_recipient_refused_refuses_with_per_recipient_outcomes(
    mail_app: MailFathom, smtp: FaultServer
) -> None:
    smtp.script(rcpt={"bob@example.com": "550 5.1.1 no such user", "x@example.com": "553 no"})
    mail_app.outbox.record(message(to="bob@example.com, x@example.com"))
    email = deliver(mail_app)
    assert email.stage is REFUSED and "every recipient was refused" in (email.reason or "")
    bob, x = email.recipients
    assert (bob.reply_code, bob.enhanced_status, bob.reply_text) == (
        550,
        "5.1.1",
        "5.1.1 no such user",
    )
    assert bob.replied_at == mail_app.clock.now() and bob.refused
    assert (x.reply_code, x.enhanced_status) == (553, None)
    assert smtp.received() == []


def test_no_recipient_accepted_with_a_4xx_is_retried_without_the_refused_ones(
    mail_app: MailFathom, smtp: FaultServer, clock: FakeClock
) -> None:
    smtp.script(
        rcpt={"bob@example.com": "450 4.2.1 mailbox busy", "x@example.com": "550 5.1.1 gone"}
    )
    mail_app.outbox.record(message(to="bob@example.com, x@example.com"))
    email = deliver(mail_app)
    _assert_retried(mail_app, email, "no recipient was accepted")
    assert [r.reply_code for r in email.recipients] == [450, 550]
    smtp.script()
    email = later(mail_app, clock)
    assert email.stage is SENT
    assert [r.reply_code for r in email.recipients] == [250, 550]
    (received,) = smtp.received()
    assert received.rcpt_tos == ["bob@example.com"], "a permanently refused recipient was retried"


def test_partial_acceptance_splits_deferred_recipients_into_a_linked_record(
    mail_app: MailFathom, smtp: FaultServer, clock: FakeClock
) -> None:
    smtp.script(rcpt={"b@example.com": "452 4.5.3 too many recipients", "c@example.com": "550 no"})
    recorded = mail_app.outbox.record(message(to="a@example.com, b@example.com, c@example.com"))
    mail_app.worker(concurrency=1).run(burst=True)
    parent, child = mail_app.outbox.parts(recorded.id)
    assert parent.stage is SENT
    assert [(r.address, r.reply_code) for r in parent.recipients] == [
        ("a@example.com", 250),
        ("b@example.com", 452),
        ("c@example.com", 550),
    ]
    # the message shows each recipient where it is delivered now: b by the split part
    message_now = mail_app.outbox.get(recorded.id)
    assert [(r.address, r.reply_code) for r in message_now.recipients] == [
        ("a@example.com", 250),
        ("b@example.com", None),
        ("c@example.com", 550),
    ]
    assert [p.id for p in message_now.parts] == [parent.id, child.id]
    assert child.parent_id == parent.id and child.root_id == parent.id
    assert child.stage is RECORDED
    assert child.message_id == parent.message_id
    assert [r.address for r in child.recipients] == ["b@example.com"]
    assert mail_app.outbox.message_bytes(child.id) == mail_app.outbox.message_bytes(parent.id)
    assert mail_app.jobs.get(child.job_id or 0).state is JobState.PENDING
    smtp.script()
    clock.advance(61)
    mail_app.worker(concurrency=1).run(burst=True)
    assert mail_app.outbox.get(child.id).stage is SENT
    first, second = smtp.accepted()
    assert first.rcpt_tos == ["a@example.com"] and second.rcpt_tos == ["b@example.com"]
    assert first.data == second.data


def test_data_4xx_is_retried_and_5xx_refused(mail_app: MailFathom, smtp: FaultServer) -> None:
    smtp.script(data="451 4.3.0 queue full")
    mail_app.outbox.record(message())
    _assert_retried(mail_app, deliver(mail_app), "DATA was answered 451")
    smtp.script(data="554 5.3.4 message too big for system")
    mail_app.outbox.record(message(to="carol@example.com"))
    email = deliver(mail_app)
    assert email.stage is REFUSED and email.transmission_begun_at is None
    assert smtp.received() == []


# -- after the body --------------------------------------------------------------------


def test_end_of_data_4xx_returns_to_recorded_and_the_retry_sends(
    mail_app: MailFathom, smtp: FaultServer, clock: FakeClock
) -> None:
    smtp.script(end="451 4.7.1 greylisted, come back later")
    mail_app.outbox.record(message())
    email = deliver(mail_app)
    _assert_retried(mail_app, email, "451 4.7.1 greylisted")
    smtp.script()
    assert later(mail_app, clock).stage is SENT
    assert [r.answer[:3] for r in smtp.received()] == ["451", "250"]
    assert len(smtp.accepted()) == 1


def test_end_of_data_5xx_refuses(mail_app: MailFathom, smtp: FaultServer) -> None:
    smtp.script(end="554 5.7.1 spam detected")
    mail_app.outbox.record(message())
    email = deliver(mail_app)
    assert email.stage is REFUSED
    assert email.transmission_begun_at is not None, "refused after transmission began"
    assert (email.reply_code, email.reply_text) == (554, "5.7.1 spam detected")
    assert smtp.accepted() == []


@pytest.mark.parametrize("end", ["disconnect", "stall:2"])
def test_no_answer_after_the_body_is_an_unknown_outcome(
    mail_app: MailFathom, smtp: FaultServer, end: str
) -> None:
    smtp.script(end=end)
    recorded = mail_app.outbox.record(message())
    email = deliver(mail_app)
    assert email.stage is BEGUN
    assert "connection lost during the reply to the end of data" in (email.reason or "")
    assert [e.id for e in mail_app.outbox.unknown()] == [recorded.id]
    job = mail_app.jobs.get(email.job_id or 0)
    assert job.state is JobState.DEAD_LETTERED
    assert (job.failure_reason or "").startswith("unknown outcome")
    assert f"mf.outbox.resolve({recorded.id}" in (job.failure_reason or "")
    assert len(smtp.received()) == 1


def test_a_transmission_begun_record_is_never_sent_again_automatically(
    mail_app: MailFathom, smtp: FaultServer
) -> None:
    smtp.script(end="disconnect")
    mail_app.outbox.record(message())
    email = deliver(mail_app)
    smtp.script()
    mail_app.jobs.requeue(email.job_id or 0, actor="ops", reason="try it again")
    again = deliver(mail_app)
    assert again.stage is BEGUN and again.attempts == 1
    assert len(smtp.received()) == 1
    job = mail_app.jobs.get(email.job_id or 0)
    assert job.state is JobState.DEAD_LETTERED
    assert (job.failure_reason or "").startswith("unknown outcome")


# -- extensions ------------------------------------------------------------------------


def test_size_limit_is_honoured(mail_app: MailFathom, smtp: FaultServer) -> None:
    smtp.script(size=200)
    mail_app.outbox.record(message())
    email = deliver(mail_app)
    assert email.stage is REFUSED and "takes at most 200 (SIZE)" in (email.reason or "")
    assert smtp.received() == []


def test_a_size_limit_that_does_not_parse_is_ignored(
    mail_app: MailFathom, smtp: FaultServer
) -> None:
    smtp.script(size_text="unlimited")
    recorded = mail_app.outbox.record(message())
    email = deliver(mail_app)
    assert email.stage is SENT, email.reason
    (received,) = smtp.received()
    assert f"SIZE={recorded.size}" in received.mail_options


def test_smtputf8_is_used_when_needed_and_refused_without_it(
    mail_app: MailFathom, smtp: FaultServer
) -> None:
    smtp.script(smtputf8=False)
    mail_app.outbox.record(message(to="jürgen@example.com"))
    email = deliver(mail_app)
    assert email.stage is REFUSED and "SMTPUTF8" in (email.reason or "")
    smtp.script(smtputf8=True)
    mail_app.deliverer.close()  # extensions are per connection: make the next one afresh
    mail_app.outbox.record(message(to="jürgen@example.com"))
    assert deliver(mail_app).stage is SENT
    (received,) = smtp.received()
    assert "SMTPUTF8" in received.mail_options and received.rcpt_tos == ["jürgen@example.com"]


def test_8bit_content_is_announced(mail_app: MailFathom, smtp: FaultServer) -> None:
    raw = "From: a@example.com\r\nTo: b@example.com\r\nSubject: x\r\n\r\nGrüße\r\n".encode()
    mail_app.outbox.record(raw, sender="a@example.com", recipients=["b@example.com"])
    assert deliver(mail_app).stage is SENT
    (received,) = smtp.received()
    assert "BODY=8BITMIME" in received.mail_options
    assert received.data.endswith("Grüße\r\n".encode())
