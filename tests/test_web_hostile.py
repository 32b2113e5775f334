"""Hostile messages, forms and clients against the console: it fails soft and stays up.

MIME nested deeper than Python can recurse (in the dev inbox and in the outbox), forms
that are not UTF-8, bodies that trickle in (a real uvicorn server on a loopback port).
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from starlette.testclient import TestClient

from consolekit import LOOPBACK_PEER, csrf_of, make_client, register_demo_kinds
from mailfathom import MailFathom
from mailfathom.console import Console
from mailfathom.devmail import Inbox
from mailfathom.web.app import create_app
from mailfathom.web.connections import ActiveLimit, HeadDeadlineProtocol
from mailfathom.web.limits import server_config


def deep_mime(levels: int) -> bytes:
    """A message whose multipart parts nest ``levels`` deep, with a plain-text leaf."""
    body = b"Content-Type: text/plain\r\n\r\nhello from the bottom\r\n"
    for i in range(levels):
        body = (
            f'Content-Type: multipart/mixed; boundary="b{i}"\r\n\r\n--b{i}\r\n'.encode()
            + body
            + f"\r\n--b{i}--\r\n".encode()
        )
    head = b"From: a@example.com\r\nTo: b@example.com\r\nSubject: deep\r\nMIME-Version: 1.0\r\n"
    return head + body


def plain(subject: str, body: bytes = b"hi") -> bytes:
    return f"From: a@example.com\r\nTo: b@example.com\r\nSubject: {subject}\r\n\r\n".encode() + body


@pytest.fixture
def inbox(tmp_path: Path) -> Inbox:
    return Inbox(tmp_path / "inbox")


@pytest.fixture
def client(mf: MailFathom, inbox: Inbox) -> Any:
    register_demo_kinds(mf)
    app = create_app(Console(mf, inbox=inbox))
    return TestClient(app, base_url="http://127.0.0.1:8025", client=LOOPBACK_PEER)


def test_a_message_nested_1200_deep_does_not_break_the_inbox(client: Any, inbox: Inbox) -> None:
    inbox.add("a@example.com", ["b@example.com"], plain("fine"))
    key = inbox.add("a@example.com", ["b@example.com"], deep_mime(1200))
    listing = client.get("/inbox")
    assert listing.status_code == 200 and "deep" in listing.text and "fine" in listing.text
    shown = client.get(f"/inbox/{key}")
    assert shown.status_code == 200 and "nested too deeply" in shown.text
    assert "hello from the bottom" in shown.text  # the source is still there
    assert client.get(f"/inbox/{key}/preview").status_code == 200
    cleared = client.post("/inbox/clear", data={"csrf_token": csrf_of(listing.text)})
    assert cleared.status_code == 200 and inbox.count() == 0


def test_the_inbox_lists_the_newest_page_from_heads_only(client: Any, inbox: Inbox) -> None:
    big = b"x" * 200_000
    for n in range(120):
        inbox.add("a@example.com", ["b@example.com"], plain(f"message {n:03}", big))
    listed = inbox.messages(limit=100)
    assert len(listed) == 100 and all(len(m.raw) < 1000 for m in listed)
    assert listed[0].subject == "message 119" and all(m.size > 200_000 for m in listed)
    page = client.get("/inbox").text
    assert "The newest 100 of 120 are listed." in page and "Delete all 120" in page
    assert "message 119" in page and "message 019" not in page


def test_an_outbox_record_nested_1200_deep_shows_soft(client: Any, mf: MailFathom) -> None:
    email = mf.outbox.record(deep_mime(1200), sender="a@example.com", recipients=["b@example.com"])
    shown = client.get(f"/outbox/{email.id}")
    assert shown.status_code == 200 and "nested too deeply" in shown.text
    assert client.get(f"/outbox/{email.id}/preview").status_code == 200
    assert client.get(f"/api/outbox/{email.id}").status_code == 200


def test_a_form_that_is_not_utf8_is_refused(mf: MailFathom) -> None:
    register_demo_kinds(mf)
    client = make_client(mf)
    form = client.get("/jobs/new").text
    token = csrf_of(form)
    for body in (
        f"csrf_token={token}&kind=demo.ok&payload=%7B%22a%22%3A%22%FF%22%7D".encode(),
        f"csrf_token={token}&kind=demo.ok&payload=".encode() + b'{"a":"\xff"}',
    ):
        answer = client.post(
            "/jobs/new",
            content=body,
            headers={"content-type": "application/x-www-form-urlencoded"},
        )
        assert answer.status_code == 400 and "not UTF-8" in answer.text
    multipart = client.post(
        "/jobs/new", data={"csrf_token": token, "kind": "demo.ok"}, files={"f": ("a", b"")}
    )
    assert multipart.status_code == 415
    assert sum(mf.jobs.counts().values()) == 0
    good = client.post(
        "/jobs/new",
        data={"csrf_token": token, "kind": "demo.ok", "payload": '{"a": "é"}'},
        follow_redirects=False,
    )
    assert good.status_code == 303 and mf.jobs.get(1).payload == {"a": "é"}


@pytest.fixture
def served(mf: MailFathom) -> Iterator[int]:
    """The console on a real uvicorn server, with a half-second body deadline."""
    app = create_app(Console(mf), body_seconds=0.5)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    server = uvicorn.Server(server_config(app, host="127.0.0.1", port=port))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
        time.sleep(0.01)
    yield port
    server.should_exit = True
    thread.join(10)


def test_a_body_that_trickles_in_gets_408(served: int) -> None:
    with socket.create_connection(("127.0.0.1", served), timeout=10) as sock:
        sock.sendall(
            b"POST /jobs/bulk HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 100\r\n\r\n"
            b"csrf_token="
        )
        started = time.monotonic()
        answer = sock.recv(4096)  # the server answers; nothing more is sent
        waited = time.monotonic() - started
    assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
    assert b"content-security-policy" in answer.lower()
    assert 0.4 < waited < 5


def test_the_server_limits_connections_keep_alive_and_heads(mf: MailFathom) -> None:
    config = server_config(create_app(Console(mf)), host="127.0.0.1", port=8025)
    # requests in flight are limited by ActiveLimit; uvicorn's limit counts idle connections
    assert config.limit_concurrency is None and config.timeout_keep_alive == 5
    assert isinstance(config.app, ActiveLimit) and config.app.limit == 100
    protocol = config.http
    assert isinstance(protocol, type) and issubclass(protocol, HeadDeadlineProtocol)
    assert protocol.head_seconds == 10
    assert config.h11_max_incomplete_event_size == 64 * 1024
    assert not config.proxy_headers and not config.server_header and not config.access_log


@pytest.mark.slow  # the parser takes seconds to recurse 1,200 levels
def test_a_parser_that_recurses_out_fails_soft(monkeypatch: pytest.MonkeyPatch) -> None:
    from mailfathom.web import preview as module

    monkeypatch.setattr(module, "MAX_MULTIPARTS", 10_000)  # past the cheap look, into the parser
    shown = module.preview(deep_mime(1200))
    assert shown.problem == "its MIME parts are nested too deeply to follow"
    assert ("Subject", "deep") in shown.headers and shown.text is None and shown.html is None
