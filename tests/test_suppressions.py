"""The suppression list on every store, against a real SMTP server: an address that
hard-bounced or complained is never sent to again. Operators add, list, search and lift
entries (Python and CLI, audited); a delivery leaves a suppressed recipient out (a local
550 "suppressed: …" on that recipient, the others sent), and a record whose every
recipient is suppressed is Refused "suppressed" with nothing sent — for each part of a
message split by recipient domain on its own."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from consolekit import csrf_of, make_client
from mailfathom import InvalidInput, MailFathom, NotFound, OutgoingEmailStage
from mailfathom.cli import cli
from outbox_kit import message
from smtp_fixtures import FaultServer


def test_operators_add_search_and_lift_suppressions_audited(mail_app: MailFathom) -> None:
    entries = mail_app.suppressions
    added = entries.add(
        " Bob@Example.COM ", actor="ops", reason="hard_bounce", source="dsn", detail="5.1.1"
    )
    assert (added.address, added.reason, added.source, added.detail) == (
        "bob@example.com",
        "hard_bounce",
        "dsn",
        "5.1.1",
    )
    again = entries.add("bob@example.com", actor="other", reason="complaint")
    assert again == added  # already suppressed: the first entry stands, nothing written
    entries.add("carol_x@example.org", actor="ops", reason="complaint", source="ses")
    entries.add("carolyx@example.org", actor="ops")
    assert entries.is_suppressed("BOB@example.com")
    assert [e.address for e in entries.list()] == [
        "bob@example.com",
        "carol_x@example.org",
        "carolyx@example.org",
    ]
    # a search is a plain substring: "_" is no wildcard
    assert [e.address for e in entries.list(search="CAROL_")] == ["carol_x@example.org"]
    assert [e.address for e in entries.list(limit=1, after="bob@example.com")] == [
        "carol_x@example.org"
    ]
    assert entries.counts() == {"hard_bounce": 1, "complaint": 1, "manual": 1}
    lifted = entries.lift("bob@EXAMPLE.com", actor="ops", reason="mailbox fixed")
    assert lifted.reason == "hard_bounce" and not entries.is_suppressed("bob@example.com")
    assert [(e.action, e.actor, e.detail) for e in entries.events("bob@example.com")] == [
        ("add", "ops", "5.1.1"),
        ("lift", "ops", "mailbox fixed"),
    ]
    with pytest.raises(NotFound, match="not on the suppression list"):
        entries.lift("bob@example.com", actor="ops")


@pytest.mark.parametrize(
    ("address", "options", "match"),
    [
        ("not-an-address", {}, "not an email address"),
        ("a b@example.com", {}, "not an email address"),
        ("x@example.com", {"reason": "soft_bounce"}, "not a suppression reason"),
        ("x@example.com", {"actor": " "}, "actor must name who acts"),
        ("x\x00@example.com", {}, "NUL"),
        ("x@example.com", {"detail": "a\x00b"}, "detail must not contain NUL"),
    ],
)
def test_bad_input_is_refused_and_changes_nothing(
    mail_app: MailFathom, address: str, options: dict[str, str], match: str
) -> None:
    with pytest.raises(InvalidInput, match=match):
        mail_app.suppressions.add(address, **{"actor": "ops", **options})
    assert mail_app.suppressions.list() == []


def test_a_suppressed_recipient_is_left_out_and_the_others_are_sent(
    mail_app: MailFathom, smtp: FaultServer
) -> None:
    recorded = mail_app.outbox.record(message("ann@example.com", "bob@example.com"))
    # suppressed after recording, before the delivery: still never sent to
    mail_app.suppressions.add("Bob@example.com", actor="ops", reason="hard_bounce")
    assert mail_app.worker().run(burst=True) == 1
    assert [m.rcpt_tos for m in smtp.accepted()] == [["ann@example.com"]]
    email = mail_app.outbox.get(recorded.id)
    assert email.stage is OutgoingEmailStage.SENT
    ann, bob = email.recipients
    assert ann.accepted
    assert bob.refused and bob.reply_code == 550
    assert (bob.reply_text or "").startswith("suppressed: hard_bounce (operator)")


def test_a_record_whose_every_recipient_is_suppressed_is_refused_and_sends_nothing(
    mail_app: MailFathom, smtp: FaultServer
) -> None:
    mail_app.suppressions.add("ann@example.com", actor="ops", reason="complaint")
    mail_app.suppressions.add("bob@example.com", actor="ops")
    recorded = mail_app.outbox.record(message("ANN@example.com", "bob@example.com"))
    assert mail_app.worker().run(burst=True) == 1
    assert smtp.received() == []
    email = mail_app.outbox.get(recorded.id)
    assert email.stage is OutgoingEmailStage.REFUSED
    assert (email.reason or "").startswith("suppressed: every recipient")
    assert [(r.reply_code, (r.reply_text or "")[:22]) for r in email.recipients] == [
        (550, "suppressed: complaint "),
        (550, "suppressed: manual (op"),
    ]
    assert email.transmission_begun_at is None  # no body ever began


def test_a_lifted_address_is_sent_to_again(mail_app: MailFathom, smtp: FaultServer) -> None:
    mail_app.suppressions.add("ann@example.com", actor="ops")
    mail_app.suppressions.lift("ann@example.com", actor="ops")
    mail_app.outbox.record(message("ann@example.com"))
    assert mail_app.worker().run(burst=True) == 1
    assert [m.rcpt_tos for m in smtp.accepted()] == [["ann@example.com"]]


def test_each_part_of_a_split_message_skips_only_its_suppressed_recipients(
    split_app: MailFathom, smtp: FaultServer
) -> None:
    split_app.suppressions.add("b@yahoo.com", actor="ops", reason="hard_bounce")
    split_app.suppressions.add("e@example.org", actor="ops", reason="complaint")
    first = split_app.outbox.record(
        message("a@gmail.com", "b@yahoo.com", "c@yahoo.com", "e@example.org")
    )
    assert len(first.parts) == 3
    assert split_app.worker().run(burst=True) == 3
    assert sorted(tuple(m.rcpt_tos) for m in smtp.accepted()) == [
        ("a@gmail.com",),
        ("c@yahoo.com",),
    ]
    by_domain = {
        p.recipients[0].address.rpartition("@")[2]: p for p in split_app.outbox.parts(first.id)
    }
    assert by_domain["gmail.com"].stage is OutgoingEmailStage.SENT
    yahoo = by_domain["yahoo.com"]
    assert yahoo.stage is OutgoingEmailStage.SENT
    assert [(r.address, r.reply_code) for r in yahoo.recipients] == [
        ("b@yahoo.com", 550),
        ("c@yahoo.com", 250),
    ]
    assert (yahoo.recipients[0].reply_text or "").startswith("suppressed: hard_bounce")
    org = by_domain["example.org"]
    assert org.stage is OutgoingEmailStage.REFUSED
    assert (org.reason or "").startswith("suppressed")
    assert (org.recipients[0].reply_text or "").startswith("suppressed: complaint")


def test_the_cli_adds_lists_and_lifts(database_url: str) -> None:
    mf = MailFathom(database_url)
    mf.migrate()
    mf.close()

    def run(*args: str) -> str:
        result = CliRunner().invoke(cli, ["--database", database_url, "suppressions", *args])
        assert result.exit_code == 0, result.output
        return result.output

    assert "is suppressed (hard_bounce, dsn)" in run(
        "add", "Dan@Example.com", "--reason", "hard_bounce", "--source", "dsn", "--actor", "me"
    )
    (entry,) = json.loads(run("list", "--search", "dan", "--json"))
    assert (entry["address"], entry["reason"], entry["actor"]) == (
        "dan@example.com",
        "hard_bounce",
        "me",
    )
    assert "dan@example.com" in run("list")
    assert "no longer suppressed" in run("lift", "dan@example.com", "--reason", "fixed")
    assert "no address is suppressed" in run("list")
    refused = CliRunner().invoke(
        cli, ["--database", database_url, "suppressions", "lift", "dan@example.com"]
    )
    assert refused.exit_code != 0 and "not on the suppression list" in refused.output


def test_the_json_api_lists_adds_and_lifts(mail_app: MailFathom) -> None:
    client = make_client(mail_app)
    added = client.post(
        "/api/suppressions",
        json={"address": "Eve@Example.com", "reason": "complaint", "detail": "abuse report"},
    )
    assert added.status_code == 200, added.text
    assert added.json()["address"] == "eve@example.com"
    assert added.json()["source"] == "api" and added.json()["actor"] == "api"
    client.post("/api/suppressions", json={"address": "fay@example.com"})
    page = client.get("/api/suppressions", params={"limit": 1}).json()
    assert [e["address"] for e in page["suppressions"]] == ["eve@example.com"]
    rest = client.get("/api/suppressions", params={"after": page["next_after"]}).json()
    assert [e["address"] for e in rest["suppressions"]] == ["fay@example.com"]
    assert rest["next_after"] is None
    found = client.get("/api/suppressions", params={"search": "EVE"}).json()["suppressions"]
    assert [(e["address"], e["reason"]) for e in found] == [("eve@example.com", "complaint")]
    bad = client.post("/api/suppressions", json={"address": "nobody", "reason": "manual"})
    assert bad.status_code == 400 and "not an email address" in bad.json()["error"]["message"]
    unknown = client.post("/api/suppressions", json={"address": "a@b.c", "why": "x"})
    assert unknown.status_code == 400
    lifted = client.post("/api/suppressions/lift", json={"address": "eve@example.com"})
    assert lifted.status_code == 200 and lifted.json()["reason"] == "complaint"
    again = client.post("/api/suppressions/lift", json={"address": "eve@example.com"})
    assert again.status_code == 404
    assert [e.address for e in mail_app.suppressions.list()] == ["fay@example.com"]


def test_webhook_events_suppress_hard_bounces_and_complaints_never_soft_ones(
    mail_app: MailFathom, smtp: FaultServer
) -> None:
    report = mail_app.suppressions.ingest_events(
        [
            {"event": "bounce", "bounce": "hard", "address": "Gus@example.com", "detail": "5.1.1"},
            {"event": "complaint", "address": "hal@example.com", "source": "postmark"},
            {"event": "bounce", "bounce": "soft", "address": "ida@example.com"},
        ]
    )
    assert [(e.address, e.reason, e.source) for e in report.suppressed] == [
        ("gus@example.com", "hard_bounce", "webhook"),
        ("hal@example.com", "complaint", "postmark"),
    ]
    assert report.soft == ("ida@example.com",)
    assert not mail_app.suppressions.is_suppressed("ida@example.com")
    mail_app.outbox.record(message("gus@example.com", "hal@example.com", "ida@example.com"))
    mail_app.worker().run(burst=True)
    assert [m.rcpt_tos for m in smtp.accepted()] == [["ida@example.com"]]


@pytest.mark.parametrize(
    ("events", "match"),
    [
        ([{"event": "bounce", "address": "a@example.com"}], "event 0: give"),
        ([{"event": "open", "address": "a@example.com"}], "event 0: give"),
        ([{"event": "complaint", "address": "nope"}], "event 0: address 'nope'"),
        ([{"event": "complaint", "address": "a@example.com", "x": 1}], "unknown fields"),
        ({"event": "complaint", "address": "a@example.com"}, "must be a list"),
    ],
)
def test_a_bad_event_is_refused_and_no_event_of_the_batch_applies(
    mail_app: MailFathom, events: object, match: str
) -> None:
    good = {"event": "complaint", "address": "ok@example.com"}
    batch = [good, *events] if isinstance(events, list) else events
    with pytest.raises(InvalidInput, match=match.replace("event 0", "event 1")):
        mail_app.suppressions.ingest_events(batch)  # type: ignore[arg-type]
    assert mail_app.suppressions.list() == []


def test_the_json_api_takes_webhook_events(mail_app: MailFathom) -> None:
    client = make_client(mail_app)
    answered = client.post(
        "/api/suppressions/events",
        json={
            "events": [
                {"event": "complaint", "address": "jo@example.com"},
                {"event": "bounce", "bounce": "soft", "address": "kim@example.com"},
            ]
        },
    )
    assert answered.status_code == 200, answered.text
    body = answered.json()
    assert [e["address"] for e in body["suppressed"]] == ["jo@example.com"]
    assert body["soft"] == ["kim@example.com"]
    bad = client.post("/api/suppressions/events", json={"events": [{"event": "x"}]})
    assert bad.status_code == 400


def test_the_console_page_lists_searches_adds_and_lifts(mail_app: MailFathom) -> None:
    client = make_client(mail_app)
    mail_app.suppressions.add("liz@example.com", actor="ops", reason="complaint")
    listed = client.get("/suppressions")
    assert listed.status_code == 200 and "liz@example.com" in listed.text
    assert 'href="/suppressions"' in listed.text  # in the navigation
    added = client.post(
        "/suppressions",
        data={
            "csrf_token": csrf_of(listed.text),
            "address": "Max@Example.com",
            "reason": "hard_bounce",
            "detail": "550 5.1.1",
        },
    )
    assert added.status_code == 200 and "max@example.com is suppressed" in added.text
    entry = mail_app.suppressions.get("max@example.com")
    assert entry is not None and (entry.source, entry.reason) == ("console", "hard_bounce")
    searched = client.get("/suppressions", params={"search": "max"})
    assert "max@example.com" in searched.text and "liz@example.com" not in searched.text
    refused = client.post("/suppressions", data={"address": "x@example.com"})  # no CSRF
    assert refused.status_code == 403 and not mail_app.suppressions.is_suppressed("x@example.com")
    confirm = client.get("/suppressions/lift", params={"address": "liz@example.com"})
    assert "Lift the suppression of liz@example.com?" in confirm.text
    lifted = client.post(
        "/suppressions/lift",
        data={"csrf_token": csrf_of(confirm.text), "address": "liz@example.com", "reason": "ok"},
    )
    assert lifted.status_code == 200 and "no longer suppressed" in lifted.text
    assert not mail_app.suppressions.is_suppressed("liz@example.com")
    (event,) = [e for e in mail_app.suppressions.events("liz@example.com") if e.action == "lift"]
    assert event.detail == "ok"
    bad = client.post(
        "/suppressions", data={"csrf_token": csrf_of(confirm.text), "address": "nobody"}
    )
    assert bad.status_code == 400 and "not an email address" in bad.text
