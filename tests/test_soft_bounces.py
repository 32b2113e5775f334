"""Soft bounces (a DSN's ``4.x.x``, a webhook's soft bounce) are kept as suppression
events and counted, on every store, and never suppress the address: an operator sees
them in ``mf.suppressions.events`` and ``soft_bounces``, the JSON API, the console's
suppressions page and ``mailfathom_soft_bounces_total``."""

from __future__ import annotations

import pytest

from consolekit import make_client
from mailfathom import InvalidInput, MailFathom
from mailfathom.observability.gauges import DatabaseGauges
from outbox_kit import message
from smtp_fixtures import FaultServer

DSN = b"""From: MAILER-DAEMON@mx.example.com\r
To: app@example.net\r
Subject: Delayed Mail (still being retried)\r
MIME-Version: 1.0\r
Content-Type: multipart/report; report-type=delivery-status; boundary="B"\r
\r
--B\r
Content-Type: text/plain\r
\r
Delivery is delayed.\r
--B\r
Content-Type: message/delivery-status\r
\r
Reporting-MTA: dns; mx.example.com\r
\r
Final-Recipient: rfc822; Carol@Example.com\r
Action: delayed\r
Status: 4.2.2\r
Diagnostic-Code: smtp; 452 4.2.2 mailbox full\r
\r
--B--\r
"""


def _soft_total(mf: MailFathom) -> float:
    gauges = DatabaseGauges(mf.store, mf.clock, min_interval=0, max_duty=None)
    (family,) = [m for m in gauges.collect() if m.name == "mailfathom_soft_bounces"]
    (sample,) = [s for s in family.samples if s.name == "mailfathom_soft_bounces_total"]
    return sample.value


def test_a_dsn_soft_bounce_is_kept_counted_and_never_suppresses(
    mail_app: MailFathom, smtp: FaultServer
) -> None:
    assert _soft_total(mail_app) == 0
    report = mail_app.suppressions.ingest_dsn(DSN)
    assert [r.address for r in report.soft] == ["Carol@Example.com"]
    (event,) = mail_app.suppressions.events("carol@example.com")
    assert (event.action, event.reason, event.source, event.actor) == (
        "soft_bounce",
        "soft_bounce",
        "dsn",
        "dsn",
    )
    assert event.detail == "4.2.2 smtp; 452 4.2.2 mailbox full"
    assert event.at == mail_app.clock.now()
    assert not mail_app.suppressions.is_suppressed("carol@example.com")
    assert mail_app.suppressions.list() == []
    assert mail_app.suppressions.event_counts() == {"soft_bounce": 1}
    assert _soft_total(mail_app) == 1
    mail_app.outbox.record(message("carol@example.com"))
    assert mail_app.worker().run(burst=True) == 1
    assert [m.rcpt_tos for m in smtp.accepted()] == [["carol@example.com"]]


def test_webhook_soft_bounces_are_listed_newest_first_and_paged(mail_app: MailFathom) -> None:
    for n in range(3):
        mail_app.suppressions.ingest_events(
            [
                {
                    "event": "bounce",
                    "bounce": "soft",
                    "address": f"u{n}@example.com",
                    "detail": "greylisted",
                    "source": "postmark",
                },
                {"event": "complaint", "address": f"c{n}@example.com"},
            ],
            actor="hook",
        )
    first = mail_app.suppressions.soft_bounces(limit=2)
    assert [(e.address, e.source, e.actor, e.detail) for e in first] == [
        ("u2@example.com", "postmark", "hook", "greylisted"),
        ("u1@example.com", "postmark", "hook", "greylisted"),
    ]
    rest = mail_app.suppressions.soft_bounces(limit=2, before_id=first[-1].id)
    assert [e.address for e in rest] == ["u0@example.com"]
    assert [e.address for e in mail_app.suppressions.list()] == [
        "c0@example.com",
        "c1@example.com",
        "c2@example.com",
    ]
    assert _soft_total(mail_app) == 3
    with pytest.raises(InvalidInput, match="before_id must be an event id"):
        mail_app.suppressions.soft_bounces(before_id="x")  # type: ignore[arg-type]


def test_a_bad_batch_records_no_soft_bounce(mail_app: MailFathom) -> None:
    batch = [
        {"event": "bounce", "bounce": "soft", "address": "ok@example.com"},
        {"event": "bounce", "bounce": "soft", "address": "nope"},
    ]
    with pytest.raises(InvalidInput, match="event 1: address 'nope'"):
        mail_app.suppressions.ingest_events(batch)
    assert mail_app.suppressions.soft_bounces() == []


def test_the_json_api_and_the_console_show_soft_bounces(mail_app: MailFathom) -> None:
    client = make_client(mail_app)
    posted = client.post(
        "/api/suppressions/events",
        json={"events": [{"event": "bounce", "bounce": "soft", "address": "kim@example.com"}]},
    )
    assert posted.status_code == 200, posted.text
    mail_app.suppressions.ingest_dsn(DSN)
    listed = client.get("/api/suppressions/soft-bounces", params={"limit": 1})
    assert listed.status_code == 200, listed.text
    body = listed.json()
    assert [e["address"] for e in body["soft_bounces"]] == ["carol@example.com"]
    assert body["total"] == 2 and body["next_before_id"] is not None
    older = client.get(
        "/api/suppressions/soft-bounces", params={"before_id": body["next_before_id"]}
    ).json()
    assert [(e["address"], e["source"]) for e in older["soft_bounces"]] == [
        ("kim@example.com", "webhook")
    ]
    assert older["next_before_id"] is None
    bad = client.get("/api/suppressions/soft-bounces", params={"before_id": "x"})
    assert bad.status_code == 400
    page = client.get("/suppressions")
    assert page.status_code == 200
    assert "Soft bounces (2)" in page.text
    assert "carol@example.com" in page.text and "4.2.2 smtp; 452 4.2.2 mailbox full" in page.text
