"""``create_app``: the operator console as an ASGI app to mount inside your own.

Internal: not part of the public API (:mod:`mailfathom` lists the public modules).

Public as :func:`mailfathom.web.create_app`. A thin wrapper around the console's
application factory (:func:`mailfathom.web.app.create_app`) that adds what an
embedded console needs:

* **a prefix**: mount it anywhere (``app.mount("/ops", console)`` in FastAPI or
  Starlette, or behind ``uvicorn --root-path``); :class:`UnderPrefix` serves it
  from the ASGI ``root_path`` and writes that prefix into its links and redirects;
* **your authentication**: ``auth=`` is a callable that receives the request (with
  your session, cookies and headers) and returns who it is, a
  :class:`~mailfathom.web.delegated.ConsoleUser` (``read_only=True`` for a viewer
  who can see but not act), or None to refuse. See :mod:`mailfathom.web.delegated`.

Without ``auth=`` the console keeps its own rules: the ``MAILFATHOM_WEB_TOKEN`` token
through ``access=``, or else an open console that serves only clients connecting from
a loopback address, through no proxy (:mod:`mailfathom.web.security`).
"""

from __future__ import annotations

import html
import re
from typing import TYPE_CHECKING

from starlette.applications import Starlette
from starlette.datastructures import MutableHeaders
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mailfathom.console import Console
from mailfathom.errors import ConfigurationError
from mailfathom.web import app as console_app
from mailfathom.web.delegated import AuthCallable, Authenticated
from mailfathom.web.features import Features
from mailfathom.web.security import Access

if TYPE_CHECKING:
    from mailfathom.app import MailFathom

__all__ = ["UnderPrefix", "create_app"]

_LINK = re.compile(rb"""(\s(?:href|action|src)=["'])/(?!/)""")


def create_app(
    app: MailFathom | Console,
    *,
    auth: AuthCallable | None = None,
    access: Access | None = None,
    features: Features | None = None,
    extra_routes: list[BaseRoute] | None = None,
) -> Starlette:
    """The console of ``app`` (a :class:`~mailfathom.MailFathom`), ready to mount under a prefix.

    ``auth(request)`` decides who may use it (sync or ``async``): return a
    :class:`~mailfathom.web.ConsoleUser` (or a name, for a full operator), a
    response of your own (a redirect to your login page), or None to refuse (401;
    JSON on the API). A ``ConsoleUser(..., read_only=True)`` sees every page
    and API read; every state-changing request is refused with 403. What a user
    does is audited as ``web:<name>`` (``api:<name>`` through the JSON API).
    ``access`` (the console's own token rules) and ``auth`` are alternatives: give one.
    """
    if auth is not None and access is not None:
        raise ConfigurationError(
            "give create_app either auth= (your application authenticates) or access= "
            "(the console's own token), not both"
        )
    console = app if isinstance(app, Console) else Console(app)
    built = console_app.create_app(
        console,
        access=access,
        features=features,
        extra_routes=extra_routes,
        delegated_auth=auth is not None,
    )
    built.add_middleware(UnderPrefix)
    if auth is not None:
        built.add_middleware(Authenticated, auth=auth)  # outermost: sees your request as is
    return built


class UnderPrefix:
    """ASGI middleware: serve the console from its mount point (the ASGI ``root_path``).

    The console's routes, guards and templates speak root-relative paths (``/jobs``,
    ``/api/…``); under a prefix this hands them the path below the prefix, and puts
    the prefix back in front of every root-relative ``href``/``action``/``src`` of an
    HTML answer and every ``Location`` of a redirect. Without a prefix it does nothing.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        prefix = str(scope.get("root_path", "")).rstrip("/")
        if scope["type"] != "http" or not prefix:
            await self.app(scope, receive, send)
            return
        path = str(scope["path"])
        if path == prefix or path.startswith(prefix + "/"):
            path = path[len(prefix) :]
        inner = {**scope, "path": path or "/", "root_path": ""}
        inner.pop("raw_path", None)
        await self.app(inner, receive, _prefixing(send, prefix))


def _prefixing(send: Send, prefix: str) -> Send:
    """``send``, with ``prefix`` put in front of the answer's root-relative links."""
    in_html = html.escape(prefix, quote=True).encode()
    held: Message | None = None
    chunks: list[bytes] = []

    async def sender(message: Message) -> None:
        nonlocal held
        if message["type"] == "http.response.start":
            headers = MutableHeaders(scope=message)
            location = headers.get("location")
            if location and location.startswith("/") and not location.startswith("//"):
                headers["location"] = prefix + location
            if headers.get("content-type", "").startswith("text/html"):
                held = message  # rewritten once the whole page is here (pages are small)
                return
        elif message["type"] == "http.response.body" and held is not None:
            chunks.append(message.get("body", b""))
            if message.get("more_body", False):
                return
            body = _LINK.sub(rb"\1" + in_html + b"/", b"".join(chunks))
            MutableHeaders(scope=held)["content-length"] = str(len(body))
            start, held = held, None
            await send(start)
            await send({"type": "http.response.body", "body": body})
            return
        await send(message)

    return sender
