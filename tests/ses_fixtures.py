"""Amazon SES on loopback, for ``SesTransport``'s tests: moto's server (a real HTTP
server speaking SES's API, in a thread of the test process) and a fault proxy in front
of it.

What SES accepted is counted at moto, over HTTP (``/moto-api/data.json`` lists every
raw message moto took), by Message-ID. The proxy forwards each request to moto unless
its script says otherwise: answer an error SES gives (throttling, 5xx, refused
credentials, a suspended account) without forwarding, forward and then drop the
connection unanswered, or forward and then hold the answer past the client's read
timeout. Those are the faults moto itself cannot produce.
"""

from __future__ import annotations

import email
import http.client
import json
import logging
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

__all__ = [
    "ACCESS_KEY",
    "REGION",
    "SENDER",
    "Fault",
    "MotoSes",
    "SesProxy",
    "moto_ses",
    "ses_proxy",
]

REGION = "us-east-1"
#: The sender every test verifies at moto (moto refuses any other: MessageRejected).
SENDER = "shop@example.com"
#: moto takes any key (as id and secret); boto3 needs one to sign.
ACCESS_KEY = "testing"


class MotoSes:
    """moto's server on loopback: its URL, the identities verified there, and the
    messages it accepted."""

    def __init__(self) -> None:
        from moto.server import ThreadedMotoServer  # imported when a test needs it: slow

        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self._server.start()
        host, port = self._server.get_host_and_port()
        self.url = f"http://{host}:{port}"

    def reset(self) -> None:
        """Forget every identity and message (moto's own reset)."""
        request = urllib.request.Request(f"{self.url}/moto-api/reset", method="POST")
        with urllib.request.urlopen(request, timeout=10) as answer:
            answer.read()

    def verify(self, identity: str = SENDER) -> None:
        """Create ``identity`` through SES v2's API (moto takes it as verified)."""
        import boto3

        client = boto3.client(
            "sesv2",
            region_name=REGION,
            endpoint_url=self.url,
            aws_access_key_id=ACCESS_KEY,
            aws_secret_access_key=ACCESS_KEY,
        )
        try:
            client.create_email_identity(EmailIdentity=identity)
        finally:
            client.close()

    def accepted(self) -> list[dict[str, Any]]:
        """Every raw message moto accepted, in order (``source``, ``destinations``,
        ``raw_data``)."""
        with urllib.request.urlopen(f"{self.url}/moto-api/data.json", timeout=30) as answer:
            data = json.load(answer)
        found: list[dict[str, Any]] = data.get("ses", {}).get("RawMessage", [])
        return found

    def delivered(self) -> list[str]:
        """The Message-ID of every message moto accepted, in order."""
        return [
            str(email.message_from_string(raw["raw_data"])["Message-ID"]) for raw in self.accepted()
        ]

    def stop(self) -> None:
        """Stop serving."""
        self._server.stop()


@dataclass(frozen=True)
class Fault:
    """One scripted fault. ``status``: answer this SES error (``code``, ``message``,
    ``headers``) without forwarding; ``drop``: forward, then close the connection
    unanswered; ``hang``: forward, then answer nothing until the test ends."""

    status: int = 0
    code: str = ""
    message: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    drop: bool = False
    hang: bool = False


class _QuietServer(ThreadingHTTPServer):
    """A client that vanished mid-answer (a killed worker) is expected here."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Say nothing: the tests count what moto accepted instead."""


class SesProxy:
    """A loopback HTTP proxy in front of moto, scripted fault by fault."""

    def __init__(self, upstream: str) -> None:
        self.script: list[Fault] = []
        #: Requests to send an email that reached the proxy, and their JSON bodies.
        self.sends = 0
        self.requests: list[dict[str, Any]] = []
        #: Seconds every forwarded answer waits (a slow SES: crashes land mid-request).
        self.delay = 0.0
        #: Called as each request arrives, before it is forwarded or answered.
        self.on_request: Callable[[], None] | None = None
        self.release = threading.Event()
        self._lock = threading.Lock()
        host, port = upstream.removeprefix("http://").split(":")
        self._upstream = (host, int(port))
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                """Quiet."""

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                proxy.handle(self, body)

            def do_GET(self) -> None:
                proxy.handle(self, b"")

        self._server = _QuietServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        """The endpoint to give ``SesTransport(endpoint_url=...)``."""
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def handle(self, handler: BaseHTTPRequestHandler, body: bytes) -> None:
        """Forward one request to moto, or inject the next scripted fault."""
        sending = handler.path.startswith("/v2/email/outbound-emails")
        fault = Fault()
        with self._lock:
            if sending:
                self.sends += 1
                self.requests.append(json.loads(body))
                fault = self.script.pop(0) if self.script else Fault()
        if sending and self.on_request is not None:
            self.on_request()
        if fault.status:
            data = json.dumps({"message": fault.message}).encode()
            headers = {"x-amzn-ErrorType": fault.code, **fault.headers}
            self._answer(handler, fault.status, headers, data)
            return
        status, headers, data = self._forward(handler, body)
        if fault.drop:
            handler.close_connection = True
            handler.connection.close()
            return
        if fault.hang:
            self.release.wait(30)
            return
        if self.delay and sending:
            time.sleep(self.delay)
        self._answer(handler, status, headers, data)

    def _forward(
        self, handler: BaseHTTPRequestHandler, body: bytes
    ) -> tuple[int, dict[str, str], bytes]:
        connection = http.client.HTTPConnection(*self._upstream, timeout=30)
        try:
            headers = {k: v for k, v in handler.headers.items() if k.lower() != "connection"}
            connection.request(handler.command, handler.path, body=body, headers=headers)
            response = connection.getresponse()
            data = response.read()
            kept = {
                k: v
                for k, v in response.getheaders()
                if k.lower()
                not in ("connection", "content-length", "transfer-encoding", "server", "date")
            }
            return response.status, kept, data
        finally:
            connection.close()

    @staticmethod
    def _answer(
        handler: BaseHTTPRequestHandler, status: int, headers: dict[str, str], data: bytes
    ) -> None:
        handler.send_response(status)
        for name, value in headers.items():
            handler.send_header(name, value)
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)

    def stop(self) -> None:
        """Stop serving and free the port."""
        self.release.set()
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture(scope="session")
def _moto_server() -> Iterator[MotoSes]:
    server = MotoSes()
    yield server
    server.stop()


@pytest.fixture
def moto_ses(_moto_server: MotoSes) -> MotoSes:
    """moto's SES, emptied, with :data:`SENDER` verified."""
    _moto_server.reset()
    _moto_server.verify(SENDER)
    return _moto_server


@pytest.fixture
def ses_proxy(moto_ses: MotoSes) -> Iterator[SesProxy]:
    """A fault proxy in front of :func:`moto_ses`, stopped after the test."""
    proxy = SesProxy(moto_ses.url)
    yield proxy
    proxy.stop()
