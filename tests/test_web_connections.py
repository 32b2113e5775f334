"""Connections that hold the console without asking anything of it: sockets that send
nothing or half a request head, heads that trickle in a byte at a time, and refused
requests whose bodies trickle in after the refusal. Real uvicorn servers on loopback
ports; the slow test runs a real ``mailfathom web`` process.

Each connection's head has a deadline of its own, counted from when the server began to
wait for it and not reset by each byte; only requests in flight count against the limit;
a response sent before its request body was read closes the connection.
"""

from __future__ import annotations

import asyncio
import os
import select
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from starlette.types import Receive, Scope, Send

from consolekit import TOKEN
from mailfathom import MailFathom
from mailfathom.console import Console
from mailfathom.web.app import create_app
from mailfathom.web.limits import HEAD_SECONDS, server_config

#: The head deadline of the in-process servers (the real one is HEAD_SECONDS).
SHORT = 1.0


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _serve(app: Any, **limits: Any) -> Iterator[int]:
    port = _free_port()
    server = uvicorn.Server(server_config(app, host="127.0.0.1", port=port, **limits))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
        time.sleep(0.01)
    yield port
    server.should_exit = True
    thread.join(15)


@pytest.fixture
def console_port(tmp_path: Path) -> Iterator[int]:
    """The console on a real uvicorn server with a one-second head deadline (connections
    are the server's business, not the store's: SQLite)."""
    with MailFathom(f"sqlite:///{tmp_path / 'console.db'}") as mf:
        mf.migrate()
        yield from _serve(create_app(Console(mf)), head_seconds=SHORT)


def closed_within(sock: socket.socket, seconds: float, *, trickle: bytes = b"") -> float | None:
    """Seconds until the server closes ``sock`` (None if it does not within ``seconds``),
    reading whatever it sends and, with ``trickle``, sending one byte of it every 0.1 s."""
    started = time.monotonic()
    sock.setblocking(False)
    sent = 0
    while (waited := time.monotonic() - started) < seconds:
        readable, _, _ = select.select([sock], [], [], 0.1)
        if readable:
            try:
                if sock.recv(65536) == b"":
                    return waited
            except (ConnectionResetError, BrokenPipeError):
                return waited
        if trickle:
            try:
                sock.send(trickle[sent % len(trickle) : sent % len(trickle) + 1])
                sent += 1
            except (ConnectionResetError, BrokenPipeError):
                return time.monotonic() - started
    return None


def _response(sock: socket.socket) -> bytes:
    """One whole response (head and Content-Length body) read from ``sock``."""
    answer = b""
    while b"\r\n\r\n" not in answer:
        chunk = sock.recv(65536)
        assert chunk, f"closed before a whole head: {answer[:200]!r}"
        answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.lower().split(b"\r\n")
        if line.startswith(b"content-length:")
    )
    while len(body) < length:
        chunk = sock.recv(65536)
        assert chunk, "closed before the whole body"
        body += chunk
    return head + b"\r\n\r\n" + body


def _get(port: int, path: str = "/healthz") -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
        return _response(sock)


def test_a_head_that_trickles_in_is_closed_at_its_deadline(console_port: int) -> None:
    head = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"a" * 10_000
    with socket.create_connection(("127.0.0.1", console_port), timeout=10) as sock:
        waited = closed_within(sock, SHORT + 10, trickle=head)  # a byte per 0.1 s
    assert waited is not None, "a head trickling in a byte at a time was never closed"
    assert SHORT * 0.8 < waited < SHORT + 5


def test_idle_and_half_head_sockets_are_closed_and_never_lock_anyone_out(
    console_port: int,
) -> None:
    idle = [socket.create_connection(("127.0.0.1", console_port)) for _ in range(110)]
    halves = [socket.create_connection(("127.0.0.1", console_port)) for _ in range(40)]
    for sock in halves:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Half: ")
    try:
        answer = _get(console_port)  # 150 sockets open: uvicorn's own limit would say 503
        assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
        for sock in idle + halves:
            assert closed_within(sock, SHORT + 10) is not None, "a silent socket stayed open"
    finally:
        for sock in idle + halves:
            sock.close()


def test_a_kept_alive_connection_gets_a_fresh_deadline_per_request(console_port: int) -> None:
    with socket.create_connection(("127.0.0.1", console_port), timeout=10) as sock:
        for _ in range(3):
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            answer = _response(sock)
            assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
            time.sleep(SHORT * 0.6)  # idle, but within each head's own deadline


def test_a_refused_post_is_closed_while_its_body_trickles(console_port: int) -> None:
    with socket.create_connection(("127.0.0.1", console_port), timeout=10) as sock:
        sock.sendall(
            b"POST /api/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\n"
            b"Content-Length: 1000000\r\n\r\n" + b"x" * 10
        )
        answer = sock.recv(65536)
        assert answer.startswith(b"HTTP/1.1 415"), answer[:200]
        assert b"connection: close" in answer.lower()
        waited = closed_within(sock, 10, trickle=b"x")
    assert waited is not None, "the refused request's connection stayed open"
    assert waited < 5


def test_a_request_with_its_body_read_keeps_its_connection(console_port: int) -> None:
    body = b'{"kind": "report.build", "max_attempts": 0}'  # read whole, then refused
    with socket.create_connection(("127.0.0.1", console_port), timeout=10) as sock:
        sock.sendall(
            b"POST /api/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        answer = _response(sock)
        assert answer.startswith(b"HTTP/1.1 400") and b"connection: close" not in answer.lower()
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert _response(sock).startswith(b"HTTP/1.1 200")


def test_only_requests_in_flight_count_against_the_limit() -> None:
    release = threading.Event()
    entered = threading.Semaphore(0)

    async def slow(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        entered.release()
        while not release.is_set():
            await asyncio.sleep(0.01)
        await send(
            {"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"4")]}
        )
        await send({"type": "http.response.body", "body": b"done"})

    served = _serve(slow, head_seconds=SHORT, active_limit=2)
    port = next(served)
    busy = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(2)]
    try:
        for sock in busy:
            sock.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            assert entered.acquire(timeout=10)
        third = _get(port, "/")
        assert third.startswith(b"HTTP/1.1 503"), third[:200]
        assert b"connection: close" in third.lower()
        release.set()
        for sock in busy:
            assert _response(sock).startswith(b"HTTP/1.1 200")
        assert _get(port, "/").startswith(b"HTTP/1.1 200")
    finally:
        release.set()
        for sock in busy:
            sock.close()
        next(served, None)


@pytest.mark.slow  # waits out the real ten-second head deadline
def test_a_real_mailfathom_web_outlasts_150_silent_sockets(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'web.db'}"
    with MailFathom(url) as app:
        app.migrate()
    port = _free_port()
    env = {**os.environ, "MAILFATHOM_DATABASE_URL": url, "MAILFATHOM_WEB_TOKEN": TOKEN}
    process = subprocess.Popen(
        [sys.executable, "-m", "mailfathom.cli", "web", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    sockets: list[socket.socket] = []
    try:
        deadline = time.monotonic() + 30
        while True:
            assert process.poll() is None, process.stderr.read() if process.stderr else ""
            try:
                if _get(port).startswith(b"HTTP/1.1 200"):
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, "mailfathom web did not answer"
            time.sleep(0.1)
        opened = time.monotonic()
        sockets = [socket.create_connection(("127.0.0.1", port)) for _ in range(150)]
        for sock in sockets[100:]:
            sock.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Half: ")
        trickler = socket.create_connection(("127.0.0.1", port))
        sockets.append(trickler)
        started = time.monotonic()
        answer = _get(port)
        assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
        assert time.monotonic() - started < 5  # at once, not after the attackers' deadline
        waited = closed_within(trickler, HEAD_SECONDS + 15, trickle=b"GET / HTTP/1.1\r\nX: " * 50)
        assert waited is not None, "a trickling head outlived its deadline"
        for sock in sockets[:150]:
            assert closed_within(sock, max(0.1, opened + HEAD_SECONDS + 15 - time.monotonic()))
        with socket.create_connection(("127.0.0.1", port), timeout=10) as refused:
            refused.sendall(
                b"POST /api/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json"
                b"\r\nContent-Length: 1000000\r\n\r\n{"
            )
            answer = refused.recv(65536)
            assert answer.startswith(b"HTTP/1.1 401"), answer[:200]  # no token: refused unread
            assert closed_within(refused, 10, trickle=b" ") is not None
    finally:
        for sock in sockets:
            sock.close()
        process.terminate()
        process.communicate(timeout=30)
