"""Unknown outcomes in the console are counted exactly and listed in pages, never capped.

More unknown outcomes than any page size (1,005 of them, past the old silent cap of
1,000) on every store: the overview's count, ``mf.outbox.unknown_count()`` and the
API's total are exact, and walking the pages (library, API, command) meets every
record once, oldest first.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from consolekit import make_client
from mailfathom import MailFathom, OutgoingEmailStage
from mailfathom.cli import cli
from mailfathom.console import Console
from raw_database import raw_transaction
from test_outbox_operator import message

MANY = 1005


def _many_unknown(app: MailFathom) -> list[int]:
    """``MANY`` TransmissionBegun records no worker holds: copies of one recorded email."""
    first = app.outbox.record(message())
    with raw_transaction(app) as cur:
        cur.execute(f"UPDATE mf_outbox SET job_id = NULL WHERE id = {first.id}")
        cur.execute(
            "UPDATE mf_outbox SET stage = 'TransmissionBegun', transmission_begun_at = "
            f"created_at, body_transmissions = 1 WHERE id = {first.id}"
        )
        numbers = (
            f"SELECT value AS n FROM json_each('[{','.join(map(str, range(MANY - 1)))}]')"
            if app.store.dialect == "sqlite"
            else f"SELECT generate_series(1, {MANY - 1}) AS n"
        )
        cur.execute(
            "INSERT INTO mf_outbox (stage, message_id, sender, subject, message, size, smtputf8, "
            "eightbit, created_at, transmission_begun_at, body_transmissions) "
            "SELECT stage, message_id, sender, subject, message, size, smtputf8, eightbit, "
            "created_at, transmission_begun_at, body_transmissions "
            f"FROM mf_outbox CROSS JOIN ({numbers}) AS numbers WHERE id = {first.id}"
        )
    ids = [e.id for e in app.outbox.list(OutgoingEmailStage.TRANSMISSION_BEGUN, limit=10_000)]
    assert len(ids) == MANY
    return sorted(ids)


@pytest.fixture
def unknown_ids(mf: MailFathom) -> list[int]:
    return _many_unknown(mf)


def test_counts_are_exact(mf: MailFathom, unknown_ids: list[int]) -> None:
    assert mf.outbox.unknown_count() == MANY
    console = Console(mf)
    assert console.unknown_count() == MANY
    (attention,) = [a for a in console.overview().attention if a.key == "unknown_outcomes"]
    assert attention.count == MANY


def test_library_and_console_pages_meet_every_record_once(
    mf: MailFathom, unknown_ids: list[int]
) -> None:
    seen: list[int] = []
    after = None
    while True:
        page = mf.outbox.unknown(limit=400, after_id=after)
        assert len(page) <= 400
        seen += [e.id for e in page]
        if len(page) < 400:
            break
        after = page[-1].id
    assert seen == unknown_ids

    console, walked, cursor = Console(mf), [], None
    while True:
        found = console.unknown_outcomes(after_id=cursor)
        assert len(found.emails) <= 50 and found.total == MANY
        walked += [e.id for e in found.emails]
        if found.next_after is None:
            break
        cursor = found.next_after
    assert walked == unknown_ids


def test_api_and_command_page_and_count(mf: MailFathom, unknown_ids: list[int]) -> None:
    client = make_client(mf)
    walked: list[int] = []
    params: dict[str, int] = {"limit": 500}
    while True:
        body = client.get("/api/outbox/unknown", params=params).json()
        assert body["total"] == MANY
        walked += [e["id"] for e in body["emails"]]
        if body["next_after"] is None:
            break
        params = {"limit": 500, "after": body["next_after"]}
    assert walked == unknown_ids
    assert client.get("/api/outbox/unknown", params={"limit": 501}).status_code == 400

    url = mf.settings.database_url
    result = CliRunner().invoke(
        cli, ["--database", url, "outbox", "unknown", "--json", "--limit", "1000"]
    )
    assert result.exit_code == 0, result.output
    first = json.loads(result.output)
    assert [e["id"] for e in first["emails"]] == unknown_ids[:1000]
    assert first["total"] == MANY and first["next_after"] == unknown_ids[999]
    result = CliRunner().invoke(
        cli,
        ["--database", url, "outbox", "unknown", "--json", "--after", str(unknown_ids[999])],
    )
    assert [e["id"] for e in json.loads(result.output)["emails"]] == unknown_ids[1000:]
    text = CliRunner().invoke(cli, ["--database", url, "outbox", "unknown"]).output
    assert f"{MANY} unknown outcomes" in text and f"--after {unknown_ids[49]}" in text


def test_the_unknown_page_says_how_many_and_pages_on(
    mf: MailFathom, unknown_ids: list[int]
) -> None:
    client = make_client(mf)
    html = client.get("/outbox/unknown").text
    assert f"{MANY} unknown outcomes" in html
    assert f'href="/outbox/unknown?after={unknown_ids[49]}"' in html
    last = client.get("/outbox/unknown", params={"after": unknown_ids[-2]}).text
    assert f'href="/outbox/{unknown_ids[-1]}"' in last and "?after=" not in last
