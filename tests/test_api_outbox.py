"""The outbox part of the console against a real SMTP server process: API endpoints, pages
and commands — list, counts, detail with stage history, cancel, unknown, resolve, record again."""

from __future__ import annotations

import json
from collections.abc import Iterator
from email.message import EmailMessage
from typing import Any

import pytest
from click.testing import CliRunner

from consolekit import csrf_of, make_client
from mailfathom import MailFathom
from mailfathom.cli import cli
from smtp_fixtures import FaultServer


def message(to: str = "dora@example.com", subject: str = "Receipt") -> EmailMessage:
    msg = EmailMessage()
    msg["From"] = "shop@example.com"
    msg["To"] = to
    msg["Subject"] = subject
    msg.set_content("Thank you.\n")
    msg.add_alternative('<p onclick="x()">Thank <script>evil()</script>you.</p>', subtype="html")
    return msg


def deliver(app: MailFathom) -> None:
    app.worker(concurrency=1).run(burst=True)


@pytest.fixture
def emails(mail_app: MailFathom, smtp: FaultServer) -> Iterator[dict[str, int]]:
    """One email in each interesting stage: sent, recorded, unknown and refused."""
    sent = mail_app.outbox.record(message(subject="Sent one"))
    deliver(mail_app)
    smtp.script(end="disconnect")
    unknown = mail_app.outbox.record(message(subject="Unknown one"))
    deliver(mail_app)
    smtp.script(mail="550 5.7.1 relay misconfigured")
    refused = mail_app.outbox.record(message(subject="Refused one"))
    deliver(mail_app)
    smtp.script()
    recorded = mail_app.outbox.record(message(subject="Waiting one"))
    yield {"sent": sent.id, "unknown": unknown.id, "refused": refused.id, "recorded": recorded.id}


def test_outbox_api_reads(mail_app: MailFathom, emails: dict[str, int]) -> None:
    client = make_client(mail_app)
    page = client.get("/api/outbox", params={"limit": 2}).json()
    assert [e["id"] for e in page["emails"]] == [emails["recorded"], emails["refused"]]
    rest = client.get("/api/outbox", params={"before": page["next_before"]}).json()
    assert [e["id"] for e in rest["emails"]] == [emails["unknown"], emails["sent"]]
    only_sent = client.get("/api/outbox", params={"stage": "Sent"}).json()["emails"]
    assert [e["id"] for e in only_sent] == [emails["sent"]]
    assert client.get("/api/outbox", params={"stage": "Lost"}).status_code == 400
    assert client.get("/api/outbox/counts").json() == {
        "Recorded": 1,
        "TransmissionBegun": 1,
        "Sent": 1,
        "Refused": 1,
        "Cancelled": 0,
    }
    (unknown,) = client.get("/api/outbox/unknown").json()["emails"]
    assert unknown["id"] == emails["unknown"] and unknown["stage"] == "TransmissionBegun"
    detail = client.get(f"/api/outbox/{emails['sent']}").json()
    assert [h["stage"] for h in detail["history"]] == ["Recorded", "TransmissionBegun", "Sent"]
    (recipient,) = detail["email"]["recipients"]
    assert recipient["address"] == "dora@example.com" and recipient["reply_code"] == 250
    assert client.get("/api/outbox/999").status_code == 404
    overview = client.get("/api/overview").json()
    assert overview["email_counts"]["TransmissionBegun"] == 1
    assert "unknown_outcomes" in [a["key"] for a in overview["attention"]]


def test_outbox_api_decisions(mail_app: MailFathom, emails: dict[str, int]) -> None:
    client = make_client(mail_app)
    cancelled = client.post(f"/api/outbox/{emails['recorded']}/cancel", json={"reason": "dup"})
    assert cancelled.json()["stage"] == "Cancelled"
    refused_cancel = client.post(f"/api/outbox/{emails['sent']}/cancel", json={})
    assert refused_cancel.status_code == 409
    no_reason = client.post(
        f"/api/outbox/{emails['unknown']}/resolve", json={"decision": "give_up"}
    )
    assert no_reason.status_code == 400 and "say why" in no_reason.json()["error"]["message"]
    bad = client.post(
        f"/api/outbox/{emails['unknown']}/resolve", json={"decision": "maybe", "reason": "x"}
    )
    assert bad.status_code == 400 and "unknown resolution" in bad.json()["error"]["message"]
    resolved = client.post(
        f"/api/outbox/{emails['unknown']}/resolve",
        json={"decision": "give_up", "reason": "customer called", "actor": "eve"},
    )
    assert resolved.status_code == 200 and resolved.json()["stage"] == "Refused"
    twice = client.post(
        f"/api/outbox/{emails['unknown']}/resolve", json={"decision": "delivered", "reason": "x"}
    )
    assert twice.status_code == 409
    again = client.post(f"/api/outbox/{emails['refused']}/record-again", json={"reason": "fixed"})
    assert again.status_code == 201 and again.json()["parent_id"] == emails["refused"]
    assert client.post(f"/api/outbox/{emails['sent']}/record-again", json={}).status_code == 409
    events = client.get(f"/api/outbox/{emails['unknown']}").json()["events"]
    assert [(e["actor"], e["action"], e["reason"]) for e in events] == [
        ("api:eve", "give_up", "customer called")
    ]


def test_outbox_pages(mail_app: MailFathom, emails: dict[str, int]) -> None:
    client: Any = make_client(mail_app)
    listing = client.get("/outbox").text
    assert "Unknown one" in listing and "Refused one" in listing
    assert "Send a test email" not in listing  # only with mailfathom dev
    detail = client.get(f"/outbox/{emails['sent']}").text
    assert "Stage history" in detail and "dora@example.com" in detail and "<script>" not in detail
    frame = client.get(f"/outbox/{emails['sent']}/preview")
    assert "Thank" in frame.text and "<script" not in frame.text and "onclick" not in frame.text
    assert "sandbox" in frame.headers["content-security-policy"]
    unknown = client.get("/outbox/unknown").text
    assert "Unknown one" in unknown and f'href="/outbox/{emails["unknown"]}/resolve"' in unknown
    form = client.get(f"/outbox/{emails['unknown']}/resolve").text
    missing = client.post(
        f"/outbox/{emails['unknown']}/resolve",
        data={"csrf_token": csrf_of(form), "decision": "send_again"},
    )
    assert missing.status_code == 400 and "say why" in missing.text
    done = client.post(
        f"/outbox/{emails['unknown']}/resolve",
        data={
            "csrf_token": csrf_of(form),
            "decision": "send_again",
            "reason": "not in the relay's log",
        },
    )
    assert "resolved as send_again: now Recorded" in done.text
    confirm = client.get(f"/outbox/{emails['recorded']}/cancel").text
    assert "Cancel email" in confirm
    assert client.post(f"/outbox/{emails['recorded']}/cancel").status_code == 403
    client.post(f"/outbox/{emails['recorded']}/cancel", data={"csrf_token": csrf_of(confirm)})
    assert mail_app.outbox.get(emails["recorded"]).stage.value == "Cancelled"
    again = client.get(f"/outbox/{emails['refused']}/record-again").text
    made = client.post(
        f"/outbox/{emails['refused']}/record-again", data={"csrf_token": csrf_of(again)}
    )
    assert "Recorded again as email" in made.text
    assert client.post("/outbox/test-email", data={"csrf_token": csrf_of(again)}).status_code == 400


def test_outbox_commands(mail_app: MailFathom, emails: dict[str, int], database_url: str) -> None:
    def run(*args: str) -> Any:
        return CliRunner().invoke(cli, ["--database", database_url, *args])

    assert "Unknown one" in run("outbox", "list").output
    assert "Unknown one" in run("outbox", "unknown").output
    page = json.loads(run("outbox", "list", "--stage", "Sent", "--json").output)
    assert [e["id"] for e in page["emails"]] == [emails["sent"]]
    shown = run("outbox", "show", str(emails["sent"]))
    assert "TransmissionBegun" in shown.output and "dora@example.com" in shown.output
    missing_reason = run("outbox", "resolve", str(emails["unknown"]), "delivered")
    assert missing_reason.exit_code == 2 and "--reason" in missing_reason.output
    resolved = run("outbox", "resolve", str(emails["unknown"]), "delivered", "--reason", "logs")
    assert resolved.exit_code == 0 and "now Sent" in resolved.output
    assert "no unknown outcomes" in run("outbox", "unknown").output
    cancelled = run("outbox", "cancel", str(emails["sent"]))
    assert cancelled.exit_code == 2 and "only Recorded email can be cancelled" in cancelled.output
    assert run("outbox", "cancel", str(emails["recorded"])).exit_code == 0
    again = run("outbox", "record-again", str(emails["refused"]))
    assert again.exit_code == 0 and "recorded again as email" in again.output
    assert run("outbox", "show", "999").exit_code == 2
