"""Limits that keep slow or greedy clients from holding the console: deadlines for request
heads and bodies, and the uvicorn settings it is served with.

Internal. uvicorn times out idle keep-alive connections but not a body that trickles
in; :class:`BodyDeadline` answers 408 to a request whose body has not fully arrived
within :data:`BODY_SECONDS`. :class:`CloseUnread` closes the connection of a request
answered before its body was read (a refusal), so a body that trickles in after it
holds nothing. :func:`server_config` closes a connection whose request head has not
arrived within :data:`HEAD_SECONDS` (:mod:`mailfathom.web.connections`), answers 503 at
once past :data:`ACTIVE_LIMIT` requests in flight (idle connections do not count), and
caps the size of an incomplete request head. Off loopback the console belongs behind a
reverse proxy that buffers requests and limits connections per client (docs/console.md,
Security).
"""

from __future__ import annotations

import asyncio

import uvicorn
from starlette.datastructures import Headers, MutableHeaders
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mailfathom.web.connections import ActiveLimit, head_deadline_protocol

__all__ = [
    "ACTIVE_LIMIT",
    "BODY_SECONDS",
    "HEAD_SECONDS",
    "KEEP_ALIVE_SECONDS",
    "BodyDeadline",
    "CloseUnread",
    "server_config",
]

#: The whole request body must arrive within this many seconds of the first read.
BODY_SECONDS = 30.0
#: The whole request head must arrive within this many seconds of when the server began
#: to wait for it (the connection opened, or the previous response was sent).
HEAD_SECONDS = 10.0
#: Requests served at once; one more is answered 503 (open idle connections do not count).
ACTIVE_LIMIT = 100
#: An idle keep-alive connection is closed after this many seconds.
KEEP_ALIVE_SECONDS = 5
#: Largest request head (request line and headers) buffered before it is complete.
HEAD_BYTES = 64 * 1024


class _BodyLate(Exception):
    """The request body did not arrive in time."""


class BodyDeadline:
    """ASGI middleware: a body that has not fully arrived within ``seconds`` gets a 408."""

    def __init__(self, app: ASGIApp, seconds: float = BODY_SECONDS) -> None:
        self.app = app
        self.seconds = seconds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        loop = asyncio.get_running_loop()
        deadline: float | None = None
        complete = False
        started = False

        async def timed_receive() -> Message:
            nonlocal deadline, complete
            if complete:  # after the body: waiting for a disconnect is not bounded
                return await receive()
            if deadline is None:
                deadline = loop.time() + self.seconds
            try:
                message = await asyncio.wait_for(receive(), max(deadline - loop.time(), 0.0))
            except TimeoutError:
                raise _BodyLate from None
            if message["type"] != "http.request" or not message.get("more_body", False):
                complete = True
            return message

        async def watched_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, timed_receive, watched_send)
        except _BodyLate:
            if started:
                raise
            late = PlainTextResponse(
                f"the request body did not arrive within {self.seconds:g} s: send it at once",
                status_code=408,
                headers={"connection": "close"},
            )
            await late(scope, receive, send)


class CloseUnread:
    """ASGI middleware: a response that starts before the request body has been read to
    its end carries ``Connection: close``, so the server closes the connection once the
    response is sent instead of keeping it open while the rest of the body trickles in."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given = Headers(scope=scope)
        unread = "transfer-encoding" in given or given.get("content-length", "0") != "0"

        async def reading() -> Message:
            nonlocal unread
            message = await receive()
            if message["type"] != "http.request" or not message.get("more_body", False):
                unread = False
            return message

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start" and unread:
                MutableHeaders(scope=message)["connection"] = "close"
            await send(message)

        await self.app(scope, reading, sending)


def server_config(
    app: ASGIApp,
    *,
    host: str,
    port: int,
    log_level: str = "warning",
    head_seconds: float = HEAD_SECONDS,
    active_limit: int = ACTIVE_LIMIT,
) -> uvicorn.Config:
    """How uvicorn serves the console: no access log or server header, no trust in
    forwarded headers, short keep-alive, a deadline on each request head, a limit on
    requests in flight (not on connections), a bounded request head."""
    return uvicorn.Config(
        ActiveLimit(app, active_limit),
        host=host,
        port=port,
        log_level=log_level,
        access_log=False,
        server_header=False,
        proxy_headers=False,
        http=head_deadline_protocol(head_seconds),
        ws="none",
        timeout_keep_alive=KEEP_ALIVE_SECONDS,
        limit_concurrency=None,
        h11_max_incomplete_event_size=HEAD_BYTES,
        timeout_graceful_shutdown=10,
    )
