"""A message recorded as several parts, in the console against a real SMTP server: the JSON
API and the pages show it once, with its parts; a cancel withdraws every Recorded part and
says which had begun; every answer matches the OpenAPI document; the commands do the same."""

from __future__ import annotations

from email.message import EmailMessage
from typing import Any

import jsonschema_rs
from click.testing import CliRunner

from consolekit import csrf_of, make_client
from mailfathom import MailFathom
from mailfathom.cli import cli
from mailfathom.web.openapi import document
from smtp_fixtures import FaultServer


def message(*to: str) -> EmailMessage:
    msg = EmailMessage()
    msg["From"] = "shop@example.com"
    msg["To"] = ", ".join(to)
    msg["Subject"] = "Receipt"
    msg.set_content("Thank you.\n")
    return msg


def conforms(body: Any, schema: str) -> None:
    """``body`` matches the named schema of the API's own OpenAPI document."""
    doc = document()
    jsonschema_rs.validate(
        {"$ref": f"#/components/schemas/{schema}", "components": doc["components"]}, body
    )


def test_the_api_shows_a_split_message_once_and_cancels_every_recorded_part(
    split_app: MailFathom, smtp: FaultServer
) -> None:
    smtp.script(rcpt={"b@yahoo.com": "450 4.2.1 try later"})
    recorded = split_app.outbox.record(message("a@gmail.com", "b@yahoo.com", "c@example.org"))
    smtp.script(rcpt={"b@yahoo.com": "450 4.2.1 try later", "c@example.org": "450 later"})
    split_app.worker(concurrency=1).run(burst=True)  # gmail's part Sent, the others wait
    gmail, yahoo, other = split_app.outbox.parts(recorded.id)
    client = make_client(split_app)
    page = client.get("/api/outbox").json()
    conforms(page, "EmailPage")
    (listed,) = page["emails"]
    assert listed["id"] == recorded.id
    assert [p["id"] for p in listed["parts"]] == [gmail.id, yahoo.id, other.id]
    assert [p["stage"] for p in listed["parts"]] == ["Sent", "Recorded", "Recorded"]
    assert [r["address"] for r in listed["recipients"]] == [
        "a@gmail.com",
        "b@yahoo.com",
        "c@example.org",
    ]
    detail = client.get(f"/api/outbox/{recorded.id}").json()
    conforms(detail, "EmailDetail")
    assert len(detail["email"]["parts"]) == 3
    cancelled = client.post(f"/api/outbox/{recorded.id}/cancel", json={"reason": "dup"})
    assert cancelled.status_code == 200
    body = cancelled.json()
    conforms(body, "CancelledEmail")
    assert [p["id"] for p in body["cancelled"]] == [yahoo.id, other.id]
    assert [(p["id"], p["stage"]) for p in body["begun"]] == [(gmail.id, "Sent")]
    again = client.post(f"/api/outbox/{recorded.id}/cancel", json={})
    assert again.status_code == 409 and "none of its parts" in again.text
    assert [p.stage.value for p in split_app.outbox.parts(recorded.id)] == [
        "Sent",
        "Cancelled",
        "Cancelled",
    ]


def test_the_pages_show_the_parts_and_the_cancel_says_what_it_did(
    split_app: MailFathom,
) -> None:
    recorded = split_app.outbox.record(message("a@gmail.com", "b@yahoo.com"))
    _, part = split_app.outbox.parts(recorded.id)
    client = make_client(split_app)
    listing = client.get("/outbox").text
    assert f'href="/outbox/{part.id}"' not in listing  # listed once, as its message
    assert "2 parts: Recorded, Recorded" in listing
    detail = client.get(f"/outbox/{recorded.id}").text
    assert "<h2>Parts" in detail and f'<a href="/outbox/{part.id}">{part.id}</a>' in detail
    assert (
        f'<a href="/outbox/{recorded.id}">message {recorded.id}</a>'
        in client.get(f"/outbox/{part.id}").text
    )
    confirm = client.get(f"/outbox/{recorded.id}/cancel").text
    assert "every part still Recorded becomes Cancelled" in confirm
    done = client.post(
        f"/outbox/{recorded.id}/cancel",
        data={"csrf_token": csrf_of(confirm)},
        follow_redirects=True,
    )
    assert "2 of its 2 parts cancelled" in done.text
    assert [p.stage.value for p in split_app.outbox.parts(recorded.id)] == ["Cancelled"] * 2


def test_the_commands_show_the_parts_and_the_cancel_says_what_it_did(
    split_app: MailFathom, smtp: FaultServer, database_url: str
) -> None:
    smtp.script(rcpt={"b@yahoo.com": "450 4.2.1 try later"})
    recorded = split_app.outbox.record(message("a@gmail.com", "b@yahoo.com"))
    split_app.worker(concurrency=1).run(burst=True)
    gmail, yahoo = split_app.outbox.parts(recorded.id)

    def run(*args: str) -> Any:
        return CliRunner().invoke(cli, ["--database", database_url, *args])

    shown = run("outbox", "show", str(recorded.id)).output
    assert "b@yahoo.com" in shown and f"{yahoo.id}" in shown and "Recorded" in shown
    done = run("outbox", "cancel", str(recorded.id))
    assert done.exit_code == 0
    assert f"cancelled parts: {yahoo.id}" in done.output
    assert f"left alone, their transmission had begun: {gmail.id} (Sent)" in done.output
