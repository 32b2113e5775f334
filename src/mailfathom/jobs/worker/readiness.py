"""Tell a service manager when a worker is ready and when it stops (``NOTIFY_SOCKET``).

Internal. systemd's notify protocol (``Type=notify`` in a unit; docs/operations.md):
the manager names a Unix datagram socket in ``NOTIFY_SOCKET`` and the service sends
``READY=1`` once it works, ``STOPPING=1`` when it begins to stop. ``mailfathom
worker`` calls :func:`enable`, which takes the socket's name out of the environment
(so that processes the worker starts never speak for it); a worker embedded in an
application never notifies, since nothing enabled it. A message that cannot be sent
at once (no socket, a full queue) is dropped: readiness must never hold a worker up.
"""

from __future__ import annotations

import contextlib
import os
import socket

__all__ = ["enable", "notify"]

_target: str | None = None


def enable() -> None:
    """Notify the socket named in ``NOTIFY_SOCKET`` from now on (this process only)."""
    global _target  # noqa: PLW0603 - one service manager per process
    name = os.environ.pop("NOTIFY_SOCKET", "")
    if name.startswith("@"):  # Linux's abstract namespace
        name = "\0" + name[1:]
    _target = name if name.startswith(("/", "\0")) else None


def notify(state: str) -> None:
    """Send ``state`` (``READY=1``, ``STOPPING=1``) with this process's id, when enabled."""
    target = _target
    if target is None:
        return
    message = f"{state}\nMAINPID={os.getpid()}".encode()
    with contextlib.suppress(OSError), socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.setblocking(False)  # a manager that reads nothing must not hold the worker up
        sock.sendto(message, target)
