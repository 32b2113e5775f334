"""A fake HTTP email provider on loopback, for the HTTP transport's tests: a real
server thread speaking HTTP/1.1, scripted answer by answer.

It keeps every request it read (headers and JSON body) and, like a provider that
honours ``Idempotency-Key``, accepts a key at most once: a request repeating an
accepted key gets the first answer again and is not counted as a new message. It
counts the requests in flight (read, not yet answered), in all and per recipient
domain, and the most it saw at once; with ``gate`` cleared it holds every answer
until the test sets it, so requests pile up in flight.
"""

from __future__ import annotations

import base64
import email
import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

__all__ = ["Answer", "FakeProvider", "provider"]


@dataclass(frozen=True)
class Answer:
    """One scripted answer: a status, headers and a JSON body; or ``drop`` (close the
    connection without answering) or ``hang`` (answer nothing until the test ends)."""

    status: int = 200
    body: dict[str, Any] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    drop: bool = False
    hang: bool = False


@dataclass
class Seen:
    """One request the provider read."""

    headers: dict[str, str]
    body: dict[str, Any]


class _QuietServer(ThreadingHTTPServer):
    """A client that vanished mid-answer (a killed worker) is expected here, not an error."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Say nothing: the tests count what the provider accepted instead."""


class FakeProvider:
    """The running server: its URL, its script, what it read and what it accepted."""

    def __init__(self) -> None:
        self.script: list[Answer] = []
        self.requests: list[Seen] = []
        #: Messages accepted, one per distinct Idempotency-Key answered 2xx.
        self.accepted: dict[str, dict[str, Any]] = {}
        #: Called with each request as it arrives, before it is answered.
        self.on_request: Callable[[Seen], None] | None = None
        #: False: a provider that ignores Idempotency-Key (every 2xx is a new message).
        self.dedup = True
        #: Seconds every answer waits (a slow provider: crashes land mid-request).
        self.delay = 0.0
        #: The Message-ID of every message answered 2xx as a new message, in order.
        self.delivered: list[str] = []
        #: An API key the provider requires: a request without ``Bearer <key>`` gets
        #: 401 (None: any key is taken). Setting the app's key is "the key fixed".
        self.require_key: str | None = None
        self.release = threading.Event()
        #: Cleared: every answer waits until the test sets it again.
        self.gate = threading.Event()
        self.gate.set()
        #: Notified whenever the requests in flight change.
        self.changed = threading.Condition()
        #: Requests in flight now, and the most seen at once; the same per recipient
        #: domain (the domain of the first address in ``to``).
        self.in_flight = 0
        self.most = 0
        self.in_flight_by_domain: Counter[str] = Counter()
        self.most_by_domain: Counter[str] = Counter()
        self.done_by_domain: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._next_id = 0
        provider = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                """Quiet."""

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                seen = Seen(dict(self.headers.items()), json.loads(self.rfile.read(length)))
                provider.answer(self, seen)

        self._server = _QuietServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        """Where the API listens."""
        return f"http://127.0.0.1:{self._server.server_address[1]}/emails"

    def wait_in_flight(self, check: Callable[[FakeProvider], bool], timeout: float = 30) -> None:
        """Until ``check(self)`` holds, looked at each time the requests in flight change."""
        with self.changed:
            assert self.changed.wait_for(lambda: check(self), timeout), (
                self.in_flight,
                dict(self.in_flight_by_domain),
            )

    def answer(self, handler: BaseHTTPRequestHandler, seen: Seen) -> None:
        """Answer one request by the script, counting it in flight until it is answered."""
        to = seen.body.get("to") or [""]
        domain = str(to[0]).rpartition("@")[2].lower()
        with self.changed:
            self.in_flight += 1
            self.most = max(self.most, self.in_flight)
            self.in_flight_by_domain[domain] += 1
            self.most_by_domain[domain] = max(
                self.most_by_domain[domain], self.in_flight_by_domain[domain]
            )
            self.changed.notify_all()
        try:
            self._answer(handler, seen)
        finally:
            with self.changed:
                self.in_flight -= 1
                self.in_flight_by_domain[domain] -= 1
                self.in_flight_by_domain += Counter()  # drop zeros
                self.done_by_domain[domain] += 1
                self.changed.notify_all()

    def _answer(self, handler: BaseHTTPRequestHandler, seen: Seen) -> None:
        """Answer one request by the script (200 with a new id once it is used up)."""
        with self._lock:
            self.requests.append(seen)
            wrong_key = (
                self.require_key is not None
                and seen.headers.get("Authorization") != f"Bearer {self.require_key}"
            )
            if wrong_key:
                answer = Answer(401, {"message": "invalid API key"})
            else:
                answer = self.script.pop(0) if self.script else Answer()
            key = seen.headers.get("Idempotency-Key", "")
            repeated = self.accepted.get(key) if self.dedup else None
        if self.on_request is not None:
            self.on_request(seen)
        self.gate.wait(30)
        if answer.drop:
            handler.close_connection = True
            handler.connection.close()
            return
        if answer.hang:
            self.release.wait(30)
            return
        if self.delay:
            time.sleep(self.delay)
        body, status = answer.body, answer.status
        if repeated is not None:  # an accepted key: the first answer again, nothing new
            body, status = repeated, 200
        elif 200 <= status < 300:
            with self._lock:
                self._next_id += 1
                body = {"id": f"prov-{self._next_id}", **body}
                self.accepted[key] = body
                raw = email.message_from_bytes(base64.b64decode(seen.body["raw"]))
                self.delivered.append(str(raw["Message-ID"]))
        data = json.dumps(body).encode()
        handler.send_response(status)
        for name, value in answer.headers.items():
            handler.send_header(name, value)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)

    def stop(self) -> None:
        """Stop serving and free the port."""
        self.release.set()
        self.gate.set()
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def provider() -> Iterator[FakeProvider]:
    """A fresh fake provider on loopback, stopped after the test."""
    server = FakeProvider()
    yield server
    server.stop()
