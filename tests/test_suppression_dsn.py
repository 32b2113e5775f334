"""Suppression end to end from a bounce, on every store with a real SMTP server: a
delivery status notification (RFC 3464) handed to ``mf.suppressions.ingest_dsn`` (or
``mailfathom suppressions ingest-dsn``) suppresses each hard-bounced recipient, reports
soft bounces without suppressing them, and the next message skips the suppressed one."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from mailfathom import InvalidInput, MailFathom, OutgoingEmailStage
from mailfathom.cli import cli
from outbox_kit import message
from smtp_fixtures import FaultServer

DSN = b"""From: MAILER-DAEMON@mx.example.com\r
To: app@example.net\r
Subject: Undelivered Mail Returned to Sender\r
MIME-Version: 1.0\r
Content-Type: multipart/report; report-type=delivery-status; boundary="B"\r
\r
--B\r
Content-Type: text/plain\r
\r
Some recipients could not be reached.\r
--B\r
Content-Type: message/delivery-status\r
\r
Reporting-MTA: dns; mx.example.com\r
Arrival-Date: Mon, 7 Dec 2026 10:00:00 +0000\r
\r
Final-Recipient: rfc822; Bob@Example.com\r
Action: failed\r
Status: 5.1.1\r
Diagnostic-Code: smtp; 550 5.1.1 <bob@example.com>: user unknown\r
\r
Final-Recipient: rfc822; carol@example.com\r
Action: delayed\r
Status: 4.2.2\r
Diagnostic-Code: smtp; 452 4.2.2 mailbox full\r
\r
Final-Recipient: rfc822; dan@example.com\r
Action: delivered\r
Status: 2.0.0\r
\r
--B\r
Content-Type: message/rfc822-headers\r
\r
From: app@example.net\r
Subject: hello\r
\r
--B--\r
"""


def test_a_dsn_suppresses_the_hard_bounce_and_the_next_message_skips_it(
    mail_app: MailFathom, smtp: FaultServer
) -> None:
    report = mail_app.suppressions.ingest_dsn(DSN)
    assert [(r.address, r.status) for r in report.hard] == [("Bob@Example.com", "5.1.1")]
    assert [(r.address, r.status) for r in report.soft] == [("carol@example.com", "4.2.2")]
    assert [r.address for r in report.other] == ["dan@example.com"]
    (entry,) = mail_app.suppressions.list()
    assert (entry.address, entry.reason, entry.source, entry.actor) == (
        "bob@example.com",
        "hard_bounce",
        "dsn",
        "dsn",
    )
    assert entry.detail == "5.1.1 smtp; 550 5.1.1 <bob@example.com>: user unknown"
    recorded = mail_app.outbox.record(message("bob@example.com", "carol@example.com"))
    assert mail_app.worker().run(burst=True) == 1
    assert [m.rcpt_tos for m in smtp.accepted()] == [["carol@example.com"]]
    email = mail_app.outbox.get(recorded.id)
    assert email.stage is OutgoingEmailStage.SENT
    assert (email.recipients[0].reply_text or "").startswith("suppressed: hard_bounce (dsn)")


def test_ingesting_the_same_dsn_twice_changes_nothing_more(mail_app: MailFathom) -> None:
    mail_app.suppressions.ingest_dsn(DSN)
    mail_app.suppressions.ingest_dsn(DSN)
    assert [e.action for e in mail_app.suppressions.events("bob@example.com")] == ["add"]


@pytest.mark.parametrize(
    "data", [b"From: a@example.com\r\nSubject: hi\r\n\r\nnot a bounce\r\n", b""]
)
def test_a_message_that_is_no_dsn_is_refused_and_changes_nothing(
    mail_app: MailFathom, data: bytes
) -> None:
    with pytest.raises(InvalidInput, match="not a delivery status notification"):
        mail_app.suppressions.ingest_dsn(data)
    assert mail_app.suppressions.list() == []


def test_the_cli_ingests_dsn_files_checking_all_before_writing(
    database_url: str, tmp_path: Path
) -> None:
    mf = MailFathom(database_url)
    mf.migrate()
    bounce, other = tmp_path / "bounce.eml", tmp_path / "other.eml"
    bounce.write_bytes(DSN)
    other.write_bytes(b"Subject: hi\r\n\r\nhello\r\n")

    def run(*files: Path) -> tuple[int, str]:
        args = ["--database", database_url, "suppressions", "ingest-dsn", *map(str, files)]
        result = CliRunner().invoke(cli, args)
        return result.exit_code, result.output

    try:
        code, output = run(bounce, other)
        assert code == 2 and "other.eml: this message is not a delivery status" in output
        assert mf.suppressions.list() == []  # the good file was not applied either
        code, output = run(bounce)
        assert code == 0
        assert "Bob@Example.com bounced hard (5.1.1): suppressed" in output
        assert "carol@example.com bounced soft (4.2.2): not suppressed" in output
        assert mf.suppressions.is_suppressed("bob@example.com")
    finally:
        mf.close()
