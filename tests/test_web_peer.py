"""A console without a token trusts the connecting peer's address, never a header.

Real sockets: the console on uvicorn bound to every address, reached from a
non-loopback address of this machine and from loopback, with hostile ``Host`` and
proxy headers. A refused request changes nothing.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.routing import Mount
from starlette.testclient import TestClient

from consolekit import LOOPBACK_PEER, TOKEN, register_demo_kinds
from mailfathom import MailFathom
from mailfathom.web import Access, create_app
from mailfathom.web.limits import server_config
from mailfathom.web.security import is_loopback_peer

SECURITY_LOG = "mailfathom.web.security"
PROXY_HEADERS = {
    "X-Forwarded-For": "198.51.100.7",
    "Forwarded": "for=198.51.100.7;proto=https",
    "X-Real-IP": "198.51.100.7",
    "X-Forwarded-Host": "console.example.com",
    "Via": "1.1 proxy.example.com",
}


def _own_address() -> str | None:
    """An address of this machine that is not loopback, or None if it has none."""
    try:
        listed = subprocess.run(
            ["hostname", "-I"], capture_output=True, text=True, timeout=10, check=False
        ).stdout.split()
    except OSError:
        listed = []
    for address in listed:
        parsed = ipaddress.ip_address(address)
        if parsed.version == 4 and not parsed.is_loopback and not parsed.is_link_local:
            return address
    return None


@pytest.fixture
def served(mf: MailFathom) -> Iterator[int]:
    """``mailfathom.web.create_app(mf)`` (no ``auth=``, no token) on uvicorn, bound to
    every IPv4 address, as a host application might serve it."""
    register_demo_kinds(mf)
    app = create_app(mf)
    with socket.socket() as probe:
        probe.bind(("0.0.0.0", 0))
        port: int = probe.getsockname()[1]
    server = uvicorn.Server(server_config(app, host="0.0.0.0", port=port))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
        time.sleep(0.01)
    yield port
    server.should_exit = True
    thread.join(10)


def _request(
    target: tuple[str, int],
    method: str,
    path: str,
    headers: dict[str, str],
    *,
    body: bytes = b"",
    source: str | None = None,
) -> tuple[int, str]:
    """One HTTP/1.1 request over a fresh socket (from ``source`` when given)."""
    with socket.socket() as sock:
        sock.settimeout(10)
        if source is not None:
            sock.bind((source, 0))
        sock.connect(target)
        head = f"{method} {path} HTTP/1.1\r\n" + "".join(
            f"{k}: {v}\r\n" for k, v in headers.items()
        )
        sock.sendall(
            f"{head}Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body
        )
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    answer = b"".join(chunks).decode("utf-8", "replace")
    status = int(answer.split(" ", 2)[1])
    return status, answer.partition("\r\n\r\n")[2]


def _create_job(target: tuple[str, int], headers: dict[str, str], source: str | None = None) -> int:
    body = json.dumps({"kind": "demo.ok", "payload": {}}).encode()
    status, _ = _request(
        target,
        "POST",
        "/api/jobs",
        {**headers, "Content-Type": "application/json"},
        body=body,
        source=source,
    )
    return status


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_an_open_console_refuses_a_peer_that_is_not_loopback_whatever_its_host(
    served: int, mf: MailFathom, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, SECURITY_LOG)
    address = _own_address()
    if address is None:  # pragma: no cover - every machine the suite runs on has one
        pytest.skip("this machine has no non-loopback IPv4 address to connect from")
    loopback_host = {"Host": f"localhost:{served}"}
    for path in ("/", "/jobs", "/api/jobs", "/metrics", "/healthz"):
        status, body = _request((address, served), "GET", path, loopback_host)
        assert status == 403, (path, body)
        assert f"not {address}" in body and "MAILFATHOM_WEB_TOKEN" in body
    assert _create_job((address, served), loopback_host) == 403
    assert _create_job((address, served), {"Host": f"127.0.0.1:{served}"}) == 403
    assert sum(mf.jobs.counts().values()) == 0
    refused = [r for r in caplog.records if getattr(r, "security_event", None) == "peer"]
    assert refused and all(r.client == address for r in refused)  # type: ignore[attr-defined]
    # The same requests from loopback addresses are served.
    assert _request(("127.0.0.1", served), "GET", "/api/jobs", loopback_host)[0] == 200
    assert _create_job(("127.0.0.1", served), loopback_host, source="127.0.0.2") == 201
    assert sum(mf.jobs.counts().values()) == 1


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_an_open_console_refuses_requests_that_came_through_a_proxy(
    served: int, mf: MailFathom, caplog: pytest.LogCaptureFixture
) -> None:
    """Behind a reverse proxy on the same machine every peer is loopback: a request that
    says it was forwarded is refused, with what to do."""
    caplog.set_level(logging.WARNING, SECURITY_LOG)
    target = ("127.0.0.1", served)
    for name, value in PROXY_HEADERS.items():
        headers = {"Host": f"127.0.0.1:{served}", name: value}
        status, body = _request(target, "GET", "/api/jobs", headers)
        assert status == 403, (name, body)
        assert "came through a proxy" in body and name.lower() in body
        assert "give it a token (MAILFATHOM_WEB_TOKEN" in body
        assert _create_job(target, headers) == 403
    assert sum(mf.jobs.counts().values()) == 0
    events = [getattr(r, "header", None) for r in caplog.records]
    assert {name.lower() for name in PROXY_HEADERS} <= set(events)


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_an_embedded_open_console_checks_the_peer_under_a_prefix(mf: MailFathom) -> None:
    host = Starlette(routes=[Mount("/ops", app=create_app(mf))])
    remote = TestClient(host, base_url="http://localhost", client=("203.0.113.9", 4000))
    assert remote.get("/ops/jobs").status_code == 403
    assert remote.post("/ops/api/jobs", json={"kind": "x", "payload": {}}).status_code == 403
    local = TestClient(host, base_url="http://localhost", client=LOOPBACK_PEER)
    assert local.get("/ops/jobs").status_code == 200
    assert local.get("/ops/jobs", headers={"x-forwarded-for": "127.0.0.1"}).status_code == 403
    mapped = TestClient(host, base_url="http://localhost", client=("::ffff:127.0.0.1", 4000))
    assert mapped.get("/ops/jobs").status_code == 200


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_a_console_with_a_token_serves_any_peer_and_any_proxy(mf: MailFathom) -> None:
    app = create_app(mf, access=Access.for_bind("0.0.0.0", TOKEN))
    remote: Any = TestClient(app, base_url="http://console.example.com", client=("203.0.113.9", 1))
    auth = {"Authorization": f"Bearer {TOKEN}", "X-Forwarded-For": "198.51.100.7"}
    assert remote.get("/api/jobs", headers=auth).status_code == 200
    assert remote.get("/api/jobs").status_code == 401


def test_only_loopback_addresses_are_loopback_peers() -> None:
    for address in ("127.0.0.1", "127.0.0.2", "::1", "::ffff:127.0.0.1", "[::1]"):
        assert is_loopback_peer(address), address
    for address in ("192.0.2.2", "::ffff:192.0.2.2", "fd00::2", "localhost", "testclient", ""):
        assert not is_loopback_peer(address), address
