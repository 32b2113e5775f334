"""Readiness for a service manager (``NOTIFY_SOCKET``): what a worker reports, and that
reporting never holds it up."""

from __future__ import annotations

import os
import socket
import threading
import uuid
from collections.abc import Iterator

import pytest

from mailfathom.jobs.worker import readiness


@pytest.fixture
def unread_socket(monkeypatch: pytest.MonkeyPatch) -> Iterator[socket.socket]:
    """A notify socket that nobody reads, named in NOTIFY_SOCKET."""
    name = f"@mailfathom-test-{uuid.uuid4().hex}"
    made = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    made.bind("\0" + name[1:])
    monkeypatch.setenv("NOTIFY_SOCKET", name)
    yield made
    made.close()
    monkeypatch.setattr(readiness, "_target", None)


def test_reports_carry_the_pid_and_a_full_queue_never_holds_the_worker_up(
    unread_socket: socket.socket,
) -> None:
    readiness.enable()
    assert "NOTIFY_SOCKET" not in os.environ  # what the worker starts never speaks for it
    readiness.notify("READY=1")
    assert unread_socket.recv(4096) == f"READY=1\nMAINPID={os.getpid()}".encode()
    # The kernel queues a few datagrams (net.unix.max_dgram_qlen, 10 by default); past
    # them a blocking send would wait for the manager to read. It must not.

    def flood() -> None:
        for _ in range(500):
            readiness.notify("STATUS=x")

    sender = threading.Thread(target=flood, daemon=True)
    sender.start()
    sender.join(10)
    assert not sender.is_alive(), "notify blocked on a socket nobody reads"


def test_nothing_is_sent_unless_enabled(unread_socket: socket.socket) -> None:
    readiness.notify("READY=1")  # an embedded worker: the command line never enabled it
    unread_socket.setblocking(False)
    with pytest.raises(BlockingIOError):
        unread_socket.recv(4096)
