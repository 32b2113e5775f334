"""The worker's metrics port, bound to loopback, answers only loopback Host names (a page
that rebinds its own name to 127.0.0.1 cannot read queue names and health), over a real
socket."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from mailfathom import MailFathom
from mailfathom.clock import FakeClock
from mailfathom.observability import metrics
from mailfathom.observability.health import check_store
from mailfathom.observability.server import MetricsServer


@pytest.fixture(scope="module")
def port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """A metrics server on 127.0.0.1 (the store does not matter here: SQLite)."""
    clock = FakeClock()
    with MailFathom(f"sqlite:///{tmp_path_factory.mktemp('db')}/m.db", clock=clock) as mf:
        mf.migrate()
        server = MetricsServer(metrics.Metrics().registry, lambda: check_store(mf.store, clock))
        server.start()
        yield server.port
        server.stop()


def _get(port: int, path: str, host: str | None) -> bytes:
    head = f"GET {path} HTTP/1.1\r\n" + (f"Host: {host}\r\n" if host is not None else "")
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall((head + "Connection: close\r\n\r\n").encode())
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer


@pytest.mark.parametrize(
    "host", ["evil.example", "evil.example:{port}", "127.0.0.1.evil.example", "10.0.0.1", ""]
)
@pytest.mark.parametrize("path", ["/metrics", "/healthz"])
def test_a_foreign_host_is_refused(port: int, host: str, path: str) -> None:
    answer = _get(port, path, host.format(port=port))
    assert answer.startswith(b"HTTP/1.0 421"), answer[:200]
    assert b"mailfathom_" not in answer and b"checks" not in answer
    assert b"answers only to loopback names" in answer


def test_a_request_without_host_is_refused(port: int) -> None:
    assert _get(port, "/metrics", None).startswith(b"HTTP/1.0 421")


@pytest.mark.parametrize("host", ["127.0.0.1:{port}", "localhost", "LOCALHOST:{port}", "[::1]"])
def test_loopback_names_are_served(port: int, host: str) -> None:
    answer = _get(port, "/metrics", host.format(port=port))
    assert answer.startswith(b"HTTP/1.0 200"), answer[:200]
    assert b"# HELP" in answer
