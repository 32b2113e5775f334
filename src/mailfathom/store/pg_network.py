"""Noticing a silent network loss to PostgreSQL: TCP defaults and a watch on stalled calls.

Internal. A connection whose network path goes silent (a cable, a firewall that drops
its state, a dead middlebox) gets no error from the kernel for a quarter of an hour,
or for ever when something in between still acknowledges every packet. Two layers:

* **TCP settings**, the pool's and the ``LISTEN`` connection's defaults unless the URL
  sets them (:data:`TCP_DEFAULTS`): keepalive probes after 5 s of silence, every 5 s,
  and ``tcp_user_timeout`` 10 s, so the kernel breaks a connection whose peer stops
  acknowledging within about 10-20 s.
* **A client-side deadline** (:class:`StallWatch`): a call that has waited on a pooled
  connection for :data:`STALL_AFTER` seconds is logged, and the server is probed on a
  fresh connection. When the probe fails too the server is unreachable: the stalled
  connections are shut down, so their calls fail with :class:`StoreError` (the worker
  logs it and retries) instead of waiting. When the probe succeeds the server is there
  and the call is a long statement or a lock wait: it is left alone.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict

__all__ = ["STALL_AFTER", "TCP_DEFAULTS", "StallWatch", "tcp_defaults"]

logger = logging.getLogger(__name__)

#: libpq options every connection gets unless the database URL sets them itself.
TCP_DEFAULTS: dict[str, int] = {
    "keepalives": 1,
    "keepalives_idle": 5,
    "keepalives_interval": 5,
    "keepalives_count": 3,
    "tcp_user_timeout": 10_000,  # milliseconds
}
#: Seconds a call may wait on its connection before the server is probed.
STALL_AFTER = 10.0
#: Seconds the probe's connection may take (connect and ``SELECT 1``).
PROBE_TIMEOUT = 5
_TICK = 1.0  # seconds between the watch's looks


class _StartGuard:
    """Serialises starting watch threads; made anew in a forked child, where a lock some
    other thread of the parent held at the fork would never open."""

    lock = threading.Lock()

    @classmethod
    def forget(cls) -> None:
        cls.lock = threading.Lock()


os.register_at_fork(after_in_child=_StartGuard.forget)


def _fields(action: str, **values: Any) -> dict[str, Any]:
    """A log call's ``extra`` (as ``observability.logs.log_fields`` makes it; the store
    layer imports nothing above it)."""
    return {"mailfathom": {"action": action, **values}}


def tcp_defaults(url: str) -> dict[str, Any]:
    """The :data:`TCP_DEFAULTS` that ``url`` does not set, as connection keywords."""
    given = conninfo_to_dict(url)
    return {name: value for name, value in TCP_DEFAULTS.items() if name not in given}


class StallWatch:
    """Which pooled connections are in use since when, and a thread that acts on stalls.

    ``probe`` opens a fresh connection and runs ``SELECT 1`` (raising on failure);
    ``stall_after`` is :data:`STALL_AFTER` unless a test says otherwise.
    """

    def __init__(self, probe: Callable[[], None], *, stall_after: float = STALL_AFTER) -> None:
        self._probe = probe
        self.stall_after = stall_after
        self._lock = threading.Lock()
        self._busy: dict[int, tuple[psycopg.Connection[Any], float]] = {}
        self._reported: set[int] = set()
        self._thread: threading.Thread | None = None
        self._pid = 0
        self._stop = threading.Event()

    @contextmanager
    def using(self, conn: psycopg.Connection[Any]) -> Iterator[None]:
        """Mark ``conn`` busy for the block (a dictionary entry; the watch thread starts
        with the first use in a process)."""
        if self._pid != os.getpid():
            self._start()
        key = id(conn)
        with self._lock:
            self._busy[key] = (conn, time.monotonic())
        try:
            yield
        finally:
            with self._lock:
                self._busy.pop(key, None)
                self._reported.discard(key)

    def close(self) -> None:
        """Stop the watch thread (the next use starts another)."""
        with _StartGuard.lock:
            self._stop.set()
            self._pid = 0

    def _start(self) -> None:
        with _StartGuard.lock:
            if self._pid == os.getpid():
                return
            self._lock = threading.Lock()  # the parent's may have been held at a fork
            self._busy, self._reported = {}, set()  # a forked child's copy is not its own
            self._stop = threading.Event()
            self._thread = threading.Thread(
                target=self._run, name="mailfathom-pg-stall-watch", daemon=True
            )
            self._pid = os.getpid()
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(_TICK):
            with contextlib.suppress(Exception):  # the watch must outlive any surprise
                self.look()

    def look(self) -> int:
        """One look: log new stalls, probe, and shut down stalled connections when the
        server is unreachable. Returns how many were shut down."""
        now = time.monotonic()
        with self._lock:
            stalled = {
                key: since
                for key, (_, since) in self._busy.items()
                if now - since >= self.stall_after
            }
            new = [key for key in stalled if key not in self._reported]
            self._reported.update(new)
        if not stalled:
            return 0
        if new:
            waited = now - min(stalled[key] for key in new)
            logger.warning(
                "PostgreSQL has not answered a call for %.0f s (%d call(s) waiting): "
                "checking whether the server is reachable",
                waited,
                len(stalled),
                extra=_fields("database_stalled", waiting=len(stalled), seconds=waited),
            )
        try:
            self._probe()
        except Exception as exc:  # any failure means: unreachable
            return self._cut(stalled, exc)
        if new:
            logger.warning(
                "PostgreSQL answers on a new connection: the waiting call(s) are long "
                "statements or wait for locks; they are left to finish",
                extra=_fields("database_slow", waiting=len(stalled)),
            )
        return 0

    def _cut(self, stalled: dict[int, float], reason: BaseException) -> int:
        """Shut down the connections still busy in the same use as when seen stalled."""
        cut = 0
        with self._lock:
            for key, since in stalled.items():
                entry = self._busy.get(key)
                if entry is None or entry[1] != since:
                    continue  # finished meanwhile, or in use again by another call
                with contextlib.suppress(OSError, psycopg.Error):
                    sock = socket.socket(fileno=os.dup(entry[0].fileno()))
                    try:
                        sock.shutdown(socket.SHUT_RDWR)
                    finally:
                        sock.close()
                    cut += 1
        if cut:
            first = str(reason).strip().splitlines()
            logger.error(
                "PostgreSQL is unreachable (%s): gave up %d call(s) that waited %.0f s or "
                "more; they fail and are retried",
                first[0] if first else type(reason).__name__,
                cut,
                self.stall_after,
                extra=_fields("database_unreachable", given_up=cut),
            )
        return cut
