"""Queue names that look like paths (``reports/../mail``, ``..``) reach the queue they name:
pages put them in query strings and form fields, never in a path a browser would resolve,
and the API takes them path-encoded, on every store."""

from __future__ import annotations

import html
import re
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

import pytest

from consolekit import csrf_of, make_client, register_demo_kinds
from mailfathom import MailFathom

TRICKY = ["reports/../mail", "..", "a/./b", "mail/"]


@pytest.fixture
def client(mf: MailFathom) -> Any:
    register_demo_kinds(mf)
    for name in [*TRICKY, "mail"]:
        mf.enqueue("demo.ok", {}, queue=name)
    return make_client(mf)


def _paused(mf: MailFathom) -> set[str]:
    return {q.queue for q in mf.queues.paused()}


def _links(page: str, label: str) -> list[str]:
    return [html.unescape(h) for h in re.findall(rf'href="([^"]+)">{label}…</a>', page)]


@pytest.mark.parametrize("name", TRICKY)
def test_the_pause_link_form_and_post_carry_the_name_whole(
    client: Any, mf: MailFathom, name: str
) -> None:
    listing = client.get("/queues").text
    [link] = [
        h for h in _links(listing, "Pause") if parse_qs(urlsplit(h).query) == {"queue": [name]}
    ]
    assert urlsplit(link).path == "/queues/pause"  # no queue name in a path
    confirm = client.get(link)
    assert confirm.status_code == 200
    assert f"Pause queue {html.escape(name)}?" in confirm.text
    action = re.search(r'<form method="post" action="([^"]+)"', confirm.text)
    assert action is not None and action.group(1) == "/queues/pause"
    assert f'name="queue" value="{html.escape(name)}"' in confirm.text
    done = client.post(
        action.group(1),
        data={"csrf_token": csrf_of(confirm.text), "queue": name, "reason": "x"},
        follow_redirects=False,
    )
    assert done.status_code == 303
    assert _paused(mf) == {name}  # that queue, and not "mail"
    listing = client.get("/queues").text
    [link] = [
        h for h in _links(listing, "Resume") if parse_qs(urlsplit(h).query) == {"queue": [name]}
    ]
    confirm = client.get(link)
    client.post("/queues/resume", data={"csrf_token": csrf_of(confirm.text), "queue": name})
    assert _paused(mf) == set()


def test_the_api_takes_a_path_encoded_name(client: Any, mf: MailFathom) -> None:
    name = "reports/../mail"
    paused = client.post(f"/api/queues/{quote(name, safe='')}/pause", json={"reason": "x"})
    assert paused.status_code == 200, paused.text
    assert paused.json()["queue"] == name and _paused(mf) == {name}
    resumed = client.post(f"/api/queues/{quote(name, safe='')}/resume", json={})
    assert resumed.status_code == 200 and _paused(mf) == set()
