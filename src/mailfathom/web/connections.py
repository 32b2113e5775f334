"""How the console's server holds connections: a deadline on every request head, and a
limit on requests in flight rather than on connections.

Internal. uvicorn arms its keep-alive timer only after a response, and every byte
received disarms it: a connection that never sends a request, or sends its head a byte
at a time, stays open for as long as the client likes; and its ``limit_concurrency``
counts open connections, so a hundred such sockets turn every request into a 503.
:func:`head_deadline_protocol` makes uvicorn's h11 protocol close a connection whose
request head is not complete within a deadline counted from when the server began
waiting for it (not reset by each byte); :class:`ActiveLimit` answers 503 only when that
many requests are being served at once, and closes that connection.
"""

from __future__ import annotations

import asyncio
from typing import Any

import h11
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = ["ActiveLimit", "HeadDeadlineProtocol", "head_deadline_protocol"]


class HeadDeadlineProtocol(H11Protocol):
    """uvicorn's h11 protocol, closing a connection whose next request head has not fully
    arrived within :attr:`head_seconds` of when the server began to wait for it (the
    connection opened, or the previous response was sent)."""

    #: Seconds a whole request head may take; set by :func:`head_deadline_protocol`.
    head_seconds: float = 10.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """Start the head deadline with the connection."""
        super().connection_made(transport)
        self._watch_head()

    def connection_lost(self, exc: Exception | None) -> None:
        """Drop the deadline with the connection."""
        self._stop_head_timer()
        super().connection_lost(exc)

    def handle_events(self) -> None:
        """Parse what arrived; a complete head stops the deadline."""
        super().handle_events()
        self._watch_head()

    def on_response_complete(self) -> None:
        """After a response, the next head has its own deadline."""
        super().on_response_complete()
        self._watch_head()

    def _watch_head(self) -> None:
        waiting = self.conn.their_state is h11.IDLE and not self.transport.is_closing()
        if not waiting:
            self._stop_head_timer()
        elif self._head_timer is None:
            self._head_timer = self.loop.call_later(self.head_seconds, self._head_late)

    def _stop_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_late(self) -> None:
        self._head_timer = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self.transport.close()


def head_deadline_protocol(seconds: float) -> type[HeadDeadlineProtocol]:
    """The protocol class to give uvicorn (``Config(http=...)``) for a ``seconds`` deadline."""
    return type("HeadDeadlineProtocol", (HeadDeadlineProtocol,), {"head_seconds": seconds})


class ActiveLimit:
    """ASGI middleware: at most ``limit`` requests served at once; one more is answered
    503 at once, with ``Connection: close``. Idle connections count for nothing."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit
        self.active = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.active >= self.limit:
            busy = PlainTextResponse(
                f"busy: {self.limit} requests are being served; retry in a moment",
                status_code=503,
                headers={"connection": "close", "retry-after": "1"},
            )
            await busy(scope, receive, send)
            return
        self.active += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.active -= 1
