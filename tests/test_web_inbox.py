"""The dev capture server (a real aiosmtpd on a loopback port) and the console's Inbox."""

from __future__ import annotations

import smtplib
import socket
from collections.abc import Iterator
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from consolekit import LOOPBACK_PEER, csrf_of
from mailfathom import ConfigurationError, MailFathom
from mailfathom.console import Console
from mailfathom.devmail import CaptureServer, Inbox
from mailfathom.web import create_app


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture
def capture(tmp_path: Path) -> Iterator[CaptureServer]:
    server = CaptureServer(Inbox(tmp_path / "inbox"), port=_free_port())
    with server:
        yield server


def send(server: CaptureServer, message: EmailMessage, rcpts: list[str]) -> None:
    with smtplib.SMTP(server.host, server.port, timeout=10) as smtp:
        smtp.send_message(message, from_addr="bounce@example.com", to_addrs=rcpts)


def newsletter() -> EmailMessage:
    message = EmailMessage()
    message["From"] = "Shop <shop@example.com>"
    message["To"] = "ann@example.com"
    message["Subject"] = "Your order <b>42</b>"
    message.set_content("Thanks for your order.\nIt ships today.")
    message.add_alternative(
        '<p style="color:#246">Thanks!</p><script>alert("x")</script>'
        '<img src="https://tracker.example/pixel.gif"><a href="javascript:alert(1)">x</a>',
        subtype="html",
    )
    return message


def test_captured_mail_keeps_envelope_and_bytes(capture: CaptureServer) -> None:
    send(capture, newsletter(), ["ann@example.com", "bcc@example.com"])
    (message,) = capture.inbox.messages()
    assert message.mail_from == "bounce@example.com"
    assert message.rcpt_to == ["ann@example.com", "bcc@example.com"]
    assert message.subject == "Your order <b>42</b>"
    assert b"Thanks for your order." not in message.raw  # the list reads heads only
    assert message.headers_only
    with pytest.raises(ValueError, match=r"headers only .*inbox\.get\(message\.key\)"):
        message.parsed()  # a body check on a listing would pass wrongly: refused
    whole = capture.inbox.get(message.key)
    assert not whole.headers_only
    plain = whole.parsed().get_body(("plain",))
    assert plain is not None and "Thanks for your order." in plain.get_content()
    assert b"Thanks for your order." in whole.raw and whole.raw.startswith(message.raw[:-2])
    assert whole.size == message.size == len(whole.raw) and whole.subject == message.subject
    assert capture.url == f"smtp://127.0.0.1:{capture.port}?starttls=off"
    # another process (the console) reading the same folder sees it too
    assert [m.key for m in Inbox(capture.inbox.folder).messages()] == [message.key]


def test_a_taken_port_is_a_clear_error(capture: CaptureServer, tmp_path: Path) -> None:
    second = CaptureServer(Inbox(tmp_path / "other"), port=capture.port)
    with pytest.raises(ConfigurationError, match=f"port {capture.port} on 127.0.0.1 is taken"):
        second.start()


@pytest.fixture
def client(mf: MailFathom, capture: CaptureServer) -> Any:
    app = create_app(Console(mf, inbox=capture.inbox))
    return TestClient(app, base_url="http://127.0.0.1:8025", client=LOOPBACK_PEER)


def test_inbox_pages_show_a_safe_preview(client: Any, capture: CaptureServer) -> None:
    send(capture, newsletter(), ["ann@example.com"])
    listing = client.get("/inbox").text
    assert 'href="/inbox"' in listing  # the navigation shows the Inbox
    assert "Your order &lt;b&gt;42&lt;/b&gt;" in listing
    (message,) = capture.inbox.messages()
    detail = client.get(f"/inbox/{message.key}").text
    assert "It ships today." in detail and "bounce@example.com" in detail
    assert f'<iframe class="preview" sandbox src="/inbox/{message.key}/preview"' in detail
    assert "<script>" not in detail
    frame = client.get(f"/inbox/{message.key}/preview")
    policy = frame.headers["content-security-policy"]
    assert "default-src 'none'" in policy and "sandbox" in policy and "img-src data:" in policy
    assert frame.headers["x-frame-options"] == "SAMEORIGIN"
    assert 'style="color:#246"' in frame.text
    assert "<script" not in frame.text and "javascript:" not in frame.text
    assert client.get("/inbox/no-such-key").status_code == 404
    assert client.get("/inbox/..%2F..%2Fetc").status_code == 404


def test_clearing_the_inbox_needs_csrf(client: Any, capture: CaptureServer) -> None:
    send(capture, newsletter(), ["ann@example.com"])
    assert client.post("/inbox/clear").status_code == 403
    assert len(capture.inbox.messages()) == 1
    page = client.get("/inbox").text
    client.post("/inbox/clear", data={"csrf_token": csrf_of(page)})
    assert capture.inbox.messages() == []


def test_no_inbox_without_dev(mf: MailFathom) -> None:
    client = TestClient(
        create_app(Console(mf)), base_url="http://127.0.0.1:8025", client=LOOPBACK_PEER
    )
    assert 'href="/inbox"' not in client.get("/").text
    missing = client.get("/inbox")
    assert missing.status_code == 404 and "comes with `mailfathom dev`" in missing.text
