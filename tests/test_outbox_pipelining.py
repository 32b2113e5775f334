"""SMTP PIPELINING (RFC 2920): the submission table's rows again, with a server that
advertises the extension, so MAIL FROM, every RCPT TO and DATA go out in one write.

The rows imported from ``test_outbox_smtp`` (and the phase and SIGKILL crash tests of
``test_outbox_phases`` and ``test_outbox_crash``: TransmissionBegun still committed
after the 354 and before the body) run here against the same real server
process, scripted on top of ``pipelining``; the tests below add what only a pipelined
session can get wrong: replies attributed to the wrong recipient, a refusal whose
trailing replies are left unread, a body sent after a pipelined DATA nobody should
have answered.
"""

from __future__ import annotations

import pytest

from mailfathom import FakeClock, MailFathom, OutgoingEmailStage
from mailfathom.delivery import pipelining
from mailfathom.delivery.smtp import Outcome, SmtpSession
from mailfathom.delivery.smtp_url import parse_smtp_url
from smtp_fixtures import FaultServer, ServerProcess
from test_outbox_crash import test_worker_killed_mid_submission
from test_outbox_phases import (
    observer,
    test_a_failed_transmission_begun_save_sends_no_body,
    test_a_transmission_begun_record_is_never_attempted_again,
    test_the_hook_is_told_every_point_in_order,
    test_transmission_begun_is_durable_before_the_first_byte_of_the_body,
)
from test_outbox_smtp import (
    deliver,
    message,
    test_8bit_content_is_announced,
    test_a_reused_session_the_server_dropped_is_replaced_within_the_attempt,
    test_a_session_left_mid_transaction_is_reset_before_reuse,
    test_accepted_message_is_sent_with_the_exact_bytes,
    test_data_4xx_is_retried_and_5xx_refused,
    test_end_of_data_4xx_returns_to_recorded_and_the_retry_sends,
    test_every_recipient_refused_refuses_with_per_recipient_outcomes,
    test_mail_from_4xx_is_retried_and_5xx_refused,
    test_no_answer_after_the_body_is_an_unknown_outcome,
    test_no_recipient_accepted_with_a_4xx_is_retried_without_the_refused_ones,
    test_one_connection_carries_many_messages,
    test_partial_acceptance_splits_deferred_recipients_into_a_linked_record,
    test_size_limit_is_honoured,
    test_smtputf8_is_used_when_needed_and_refused_without_it,
)

__all__ = [
    "observer",
    "test_8bit_content_is_announced",
    "test_a_failed_transmission_begun_save_sends_no_body",
    "test_a_reused_session_the_server_dropped_is_replaced_within_the_attempt",
    "test_a_session_left_mid_transaction_is_reset_before_reuse",
    "test_a_transmission_begun_record_is_never_attempted_again",
    "test_accepted_message_is_sent_with_the_exact_bytes",
    "test_data_4xx_is_retried_and_5xx_refused",
    "test_end_of_data_4xx_returns_to_recorded_and_the_retry_sends",
    "test_every_recipient_refused_refuses_with_per_recipient_outcomes",
    "test_mail_from_4xx_is_retried_and_5xx_refused",
    "test_no_answer_after_the_body_is_an_unknown_outcome",
    "test_no_recipient_accepted_with_a_4xx_is_retried_without_the_refused_ones",
    "test_one_connection_carries_many_messages",
    "test_partial_acceptance_splits_deferred_recipients_into_a_linked_record",
    "test_size_limit_is_honoured",
    "test_smtputf8_is_used_when_needed_and_refused_without_it",
    "test_the_hook_is_told_every_point_in_order",
    "test_transmission_begun_is_durable_before_the_first_byte_of_the_body",
    "test_worker_killed_mid_submission",
]

SENT = OutgoingEmailStage.SENT


@pytest.fixture
def smtp(smtp_process: ServerProcess) -> FaultServer:
    """The server, advertising PIPELINING, answering everything with success."""
    for path in smtp_process.records.glob("*.json"):
        path.unlink()
    server = FaultServer(smtp_process)
    server.base = {"pipelining": True}
    server.script()
    return server


def test_the_envelope_is_pipelined(mail_app: MailFathom, smtp: FaultServer) -> None:
    mail_app.outbox.record(message(to="a@example.com, b@example.com"))
    assert deliver(mail_app).stage is SENT
    (received,) = smtp.received()
    assert received.pipelined, "RCPT TO waited for the reply to MAIL FROM"


def test_without_the_extension_nothing_is_pipelined(
    mail_app: MailFathom, smtp: FaultServer
) -> None:
    smtp.base = {}
    smtp.script()
    mail_app.outbox.record(message(to="a@example.com, b@example.com"))
    assert deliver(mail_app).stage is SENT
    (received,) = smtp.received()
    assert not received.pipelined


def test_each_pipelined_reply_is_the_recipients_own(
    mail_app: MailFathom, smtp: FaultServer
) -> None:
    addresses = [f"r{n}@example.com" for n in range(6)]
    refusals = {
        addresses[1]: "550 5.1.1 r1 unknown",
        addresses[2]: "451 4.3.0 r2 later",
        addresses[4]: "553 5.1.3 r4 bad",
    }
    smtp.script(rcpt=refusals)
    recorded = mail_app.outbox.record(message(to=", ".join(addresses)))
    mail_app.worker(concurrency=1).run(burst=True)
    email, deferred = mail_app.outbox.parts(recorded.id)  # r2's 451: split off, retried
    assert email.stage is SENT and [r.address for r in deferred.recipients] == [addresses[2]]
    assert [(r.address, r.reply_code, r.reply_text) for r in email.recipients] == [
        (a, int(refusals.get(a, "250")[:3]), refusals.get(a, "250 OK")[4:]) for a in addresses
    ]
    (received,) = smtp.received()
    assert received.pipelined
    assert received.rcpt_tos == [addresses[0], addresses[3], addresses[5]]


def test_a_refused_mail_from_leaves_the_session_in_step(
    mail_app: MailFathom, smtp: FaultServer
) -> None:
    """After MAIL FROM 451 the pipelined RCPTs and DATA were refused too: their replies
    are read, and the next message on the same connection gets its own answers."""
    smtp.script(mail="451 4.3.0 try again later")
    first = mail_app.outbox.record(message(to="a@example.com"))
    mail_app.worker(concurrency=1).run(burst=True)
    assert mail_app.outbox.get(first.id).stage is OutgoingEmailStage.RECORDED
    smtp.script()
    second = mail_app.outbox.record(message(to="b@example.com"))
    mail_app.worker(concurrency=1).run(burst=True)
    sent = mail_app.outbox.get(second.id)
    assert (sent.stage, [r.reply_code for r in sent.recipients]) == (SENT, [250])
    (received,) = smtp.received()
    assert received.rcpt_tos == ["b@example.com"]


def test_a_large_envelope_is_not_pipelined(mail_app: MailFathom, smtp: FaultServer) -> None:
    count = pipelining.MAX_PIPELINED_RECIPIENTS + 1
    mail_app.outbox.record(message(to=", ".join(f"u{n}@example.com" for n in range(count))))
    email = deliver(mail_app)
    assert email.stage is SENT and len(email.recipients) == count
    (received,) = smtp.received()
    assert not received.pipelined and len(received.rcpt_tos) == count


def _session(smtp: FaultServer) -> SmtpSession:
    return SmtpSession.open(parse_smtp_url(smtp.url()), timeout=5.0, data_timeout=5.0)


def _transact(session: SmtpSession, *recipients: str) -> Outcome:
    return session.transact(
        sender="alice@example.com",
        recipients=list(enumerate(recipients)),
        data=bytes(message()),
        smtputf8=False,
        eightbit=False,
        begin=lambda: True,
        clock=FakeClock(),
    )


@pytest.mark.parametrize(
    ("script", "kind"),
    [
        ({"mail": "451 4.3.0 try again later"}, "retry"),
        ({"rcpt": {"a@example.com": "550 5.1.1 gone", "b@example.com": "450 busy"}}, "retry"),
    ],
    ids=["mail-refused", "no-recipient-accepted"],
)
def test_after_a_pipelined_refusal_the_session_is_in_step(
    smtp: FaultServer, script: dict[str, object], kind: str
) -> None:
    """The replies to the commands pipelined after the refusal are read, so the next
    command's reply is its own: RSET gets 250 and the session carries the next message."""
    smtp.script(**script)
    session = _session(smtp)
    try:
        assert _transact(session, "a@example.com", "b@example.com").kind == kind
        assert session.usable and session.reset(), "a stale reply answered RSET"
        smtp.script()
        assert _transact(session, "c@example.com").kind == "sent"
    finally:
        session.close()
    (received,) = smtp.received()
    assert received.rcpt_tos == ["c@example.com"]
