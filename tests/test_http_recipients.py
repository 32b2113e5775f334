"""Per-recipient results in a provider's 2xx answer (``{"recipients": [{"address",
"status", "reason"}]}``), on every store, against the fake provider on loopback: each
recipient gets the reply RCPT TO would have given it, so a message to three recipients
of which the provider rejects one records exactly what an SMTP server refusing that
RCPT records; a deferred one is split off and sent later; none accepted is Refused
(every one rejected) or retried without the rejected ones."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from email.message import EmailMessage
from typing import Any

import pytest

from fake_provider import Answer, FakeProvider
from mailfathom import HttpJsonTransport, JobState, MailFathom, OutgoingEmailStage
from mailfathom.clock import FakeClock
from smtp_fixtures import FaultServer

TO = ("ann@example.com", "bob@example.com", "cid@example.com")


def message(*to: str) -> EmailMessage:
    """A small message from us to ``to``."""
    msg = EmailMessage()
    msg["From"] = "app@example.net"
    msg["To"] = ", ".join(to)
    msg["Subject"] = "hello"
    msg.set_content("hello\n")
    return msg


def results(*entries: tuple[str, str, str | None]) -> Answer:
    """A 200 listing ``(address, status, reason)`` per recipient."""
    listed: list[dict[str, Any]] = []
    for address, status, reason in entries:
        entry: dict[str, Any] = {"address": address, "status": status}
        if reason is not None:
            entry["reason"] = reason
        listed.append(entry)
    return Answer(200, {"recipients": listed})


@pytest.fixture
def http_app(database_url: str, clock: FakeClock, provider: FakeProvider) -> Iterator[MailFathom]:
    """A migrated app whose deliveries go to the fake provider."""
    mf = MailFathom(
        database_url, clock=clock, transport=HttpJsonTransport(provider.url, name="acme")
    )
    mf.migrate()
    yield mf
    mf.close()


def outcomes(mf: MailFathom, email_id: int) -> list[tuple[str, int | None, bool, bool]]:
    """Each recipient's address, reply code, accepted and refused."""
    return [
        (r.address, r.reply_code, r.accepted, r.refused) for r in mf.outbox.get(email_id).recipients
    ]


def test_one_rejected_recipient_of_three_is_refused_for_it_alone_as_rcpt_does(
    http_app: MailFathom, provider: FakeProvider, mail_app: MailFathom, smtp: FaultServer
) -> None:
    provider.script = [
        results(
            ("ann@example.com", "accepted", None),
            ("BOB@example.com", "rejected", "mailbox does not exist"),
            ("cid@example.com", "accepted", None),
        )
    ]
    recorded = http_app.outbox.record(message(*TO))
    assert http_app.worker().run(burst=True) == 1
    assert [seen.body["to"] for seen in provider.requests] == [list(TO)]
    email = http_app.outbox.get(recorded.id)
    assert email.stage is OutgoingEmailStage.SENT
    assert len(http_app.outbox.parts(recorded.id)) == 1  # nothing owed again
    ann, bob, _ = email.recipients
    assert bob.reply_text == "rejected by acme: mailbox does not exist"
    assert "accepted by acme, message id prov-1" in (ann.reply_text or "")

    # the same refusal by an SMTP server, at RCPT TO: the same record
    smtp.script(rcpt={"bob@example.com": "550 5.1.1 mailbox does not exist"})
    over_smtp = mail_app.outbox.record(message(*TO))
    assert mail_app.worker().run(burst=True) == 1
    assert [m.rcpt_tos for m in smtp.accepted()] == [["ann@example.com", "cid@example.com"]]
    assert mail_app.outbox.get(over_smtp.id).stage is OutgoingEmailStage.SENT
    assert len(mail_app.outbox.parts(over_smtp.id)) == 1
    expected = [
        ("ann@example.com", 250, True, False),
        ("bob@example.com", 550, False, True),
        ("cid@example.com", 250, True, False),
    ]
    assert outcomes(http_app, recorded.id) == expected
    assert outcomes(mail_app, over_smtp.id) == expected


def test_a_deferred_recipient_is_split_off_and_sent_later_alone(
    http_app: MailFathom, provider: FakeProvider, clock: FakeClock
) -> None:
    provider.script = [
        results(("bob@example.com", "deferred", "mailbox full, try later")),
    ]
    recorded = http_app.outbox.record(message(*TO))
    assert http_app.worker().run(burst=True) == 1
    first, part = http_app.outbox.parts(recorded.id)
    assert first.stage is OutgoingEmailStage.SENT
    assert (part.stage, part.parent_id) == (OutgoingEmailStage.RECORDED, recorded.id)
    assert part.message_id == first.message_id
    assert [r.address for r in part.recipients] == ["bob@example.com"]
    # owed by the new part now, which has not been tried yet
    assert outcomes(http_app, recorded.id)[1] == ("bob@example.com", None, False, False)
    clock.advance(timedelta(hours=1))  # past the split part's backoff
    assert http_app.worker().run(burst=True) == 1
    assert [seen.body["to"] for seen in provider.requests] == [list(TO), ["bob@example.com"]]
    assert http_app.outbox.get(part.id).stage is OutgoingEmailStage.SENT
    assert all(r.accepted for r in http_app.outbox.get(recorded.id).recipients)


def test_every_recipient_rejected_is_refused_with_each_reason(
    http_app: MailFathom, provider: FakeProvider
) -> None:
    provider.script = [
        results(
            ("ann@example.com", "rejected", "unknown user"),
            ("bob@example.com", "Rejected", "blocked"),
        )
    ]
    recorded = http_app.outbox.record(message("ann@example.com", "bob@example.com"))
    http_app.worker().run(burst=True)
    email = http_app.outbox.get(recorded.id)
    assert email.stage is OutgoingEmailStage.REFUSED
    assert "every recipient was refused" in (email.reason or "")
    assert "unknown user" in (email.reason or "") and "blocked" in (email.reason or "")
    assert http_app.jobs.get(recorded.job_id or 0).state is JobState.DEAD_LETTERED
    assert [(r.reply_code, r.refused) for r in email.recipients] == [(550, True), (550, True)]


def test_none_accepted_with_one_deferred_is_retried_without_the_rejected_one(
    http_app: MailFathom, provider: FakeProvider, clock: FakeClock
) -> None:
    provider.script = [
        results(
            ("ann@example.com", "rejected", "unknown user"),
            ("bob@example.com", "deferred", None),
        )
    ]
    recorded = http_app.outbox.record(message("ann@example.com", "bob@example.com"))
    http_app.worker().run(burst=True)
    email = http_app.outbox.get(recorded.id)
    assert email.stage is OutgoingEmailStage.RECORDED
    assert "acme accepted no recipient" in (email.reason or "")
    assert outcomes(http_app, recorded.id) == [
        ("ann@example.com", 550, False, True),
        ("bob@example.com", 450, False, False),
    ]
    assert "deferred by acme: no reason given" in (email.recipients[1].reply_text or "")
    job = http_app.jobs.get(recorded.job_id or 0)
    assert job.state is JobState.PENDING and job.available_at is not None
    clock.advance(job.available_at - clock.now())
    http_app.worker().run(burst=True)
    assert [seen.body["to"] for seen in provider.requests][1] == ["bob@example.com"]
    email = http_app.outbox.get(recorded.id)
    assert email.stage is OutgoingEmailStage.SENT
    assert outcomes(http_app, recorded.id) == [
        ("ann@example.com", 550, False, True),
        ("bob@example.com", 250, True, False),
    ]


def test_recipients_left_out_or_given_another_status_are_accepted(
    http_app: MailFathom, provider: FakeProvider
) -> None:
    provider.script = [
        Answer(
            200,
            {
                "recipients": [
                    {"address": "ann@example.com", "status": "queued"},
                    {"address": 7, "status": "rejected"},
                    "cid@example.com",
                ]
            },
        )
    ]
    recorded = http_app.outbox.record(message(*TO))
    http_app.worker().run(burst=True)
    assert http_app.outbox.get(recorded.id).stage is OutgoingEmailStage.SENT
    assert [o[1:] for o in outcomes(http_app, recorded.id)] == [(250, True, False)] * 3
