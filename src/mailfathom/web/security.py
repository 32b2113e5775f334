"""Who may use the console, and the protections every request passes through.

Internal. The rules:

* With no token the console serves only a loopback address, and only to a
  connecting peer whose address is loopback (``scope["client"]``, never a header),
  through no proxy (a request carrying ``Forwarded``, ``X-Forwarded-For`` or the
  like is refused: behind a proxy every peer looks local), with a ``Host`` that is
  a loopback name (a DNS-rebinding page cannot reach it under another name).
* With a token (``MAILFATHOM_WEB_TOKEN``) every page and API call needs it: the
  API as ``Authorization: Bearer <token>``, browsers through the login form,
  which starts a server-side session (:mod:`mailfathom.web.sessions`). A weak
  token is refused at start (:func:`~mailfathom.web.tokens.check_token`); the
  right token is checked first and always gets in; wrong tokens and logins back
  off per client address and every refusal is logged (:mod:`mailfathom.web.throttle`).
* Every state-changing form carries the session's CSRF token
  (:func:`check_csrf`); a state-changing API call must send JSON (a cross-site
  HTML form cannot); any unsafe request whose ``Origin`` is another site is refused.
* Every response, a 500 from :class:`ServerErrors` included, carries a strict
  Content-Security-Policy and no-sniff, same-origin-referrer and no-framing
  headers (:class:`SecurityHeaders`).
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import logging
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit

from starlette.concurrency import run_in_threadpool
from starlette.datastructures import Headers, MutableHeaders
from starlette.exceptions import HTTPException
from starlette.requests import HTTPConnection, Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mailfathom.errors import ConfigurationError
from mailfathom.loopback import hostname, is_loopback, loopback_host
from mailfathom.observability.logs import log_fields
from mailfathom.web.sessions import LOGGED_IN, LoggedIn, SessionStore
from mailfathom.web.throttle import Throttle, client_address, log_refusal
from mailfathom.web.tokens import MAKE_TOKEN, check_token, token_bits

__all__ = [
    "CSRF_FIELD",
    "MAKE_TOKEN",
    "SIGNED_PATHS",
    "Access",
    "Guard",
    "SecurityHeaders",
    "ServerErrors",
    "check_csrf",
    "check_token",
    "csrf_token",
    "forwarded_by",
    "is_json",
    "is_loopback",
    "is_loopback_peer",
    "logged_in",
    "loopback_host",
    "origin_netloc",
    "token_bits",
    "token_matches",
]

CSRF_FIELD = "csrf_token"
error_log = logging.getLogger(__name__)
_PUBLIC_PREFIXES = ("/static/",)
_PUBLIC_PATHS = {"/login", "/healthz"}
#: Paths whose requests authenticate by their own signature, not the token: SNS posts
#: (``text/plain``) there, and the handler verifies each message (mailfathom.web.sns).
SIGNED_PATHS = frozenset({"/api/suppressions/sns"})
_UNSAFE = {"POST", "PUT", "PATCH", "DELETE"}
#: Headers reverse proxies add: a console without a token refuses requests carrying any.
_PROXY_HEADERS = (
    "forwarded",
    "x-forwarded-for",
    "x-forwarded-host",
    "x-forwarded-proto",
    "x-real-ip",
    "via",
)
_PROTECT_IT = (
    "give it a token (MAILFATHOM_WEB_TOKEN or --token-file; access= or auth= for a "
    "console mounted with create_app)"
)
PAGE_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "form-action 'self'; frame-src 'self'; frame-ancestors 'none'; base-uri 'none'"
)


@dataclass(frozen=True, slots=True)
class Access:
    """The console's access rules: the token (if any) and whether cookies are ``Secure``."""

    token: str | None
    #: The session cookie is ``Secure`` (HTTPS only): the console is served behind TLS.
    secure_cookies: bool = False

    @classmethod
    def for_bind(cls, host: str, token: str | None, *, secure_cookies: bool = False) -> Access:
        """Rules for a console bound to ``host``; refuses a non-loopback bind without a token,
        and a weak token anywhere (:func:`check_token`)."""
        token = token or None
        if token is None and not is_loopback(host):
            raise ConfigurationError(
                f"refusing to serve the console on {host}, which is not a loopback address, "
                "without a token: set MAILFATHOM_WEB_TOKEN (or --token-file) to a long random "
                f"secret ({MAKE_TOKEN}), or bind 127.0.0.1"
            )
        if token is not None:
            check_token(token)
        return cls(token=token, secure_cookies=secure_cookies)

    @property
    def protected(self) -> bool:
        """True when a token is required."""
        return self.token is not None


def token_matches(expected: str | None, given: str | None) -> bool:
    """Constant-time comparison of a presented token with the expected one."""
    if expected is None or given is None:
        return False
    return hmac.compare_digest(expected.encode(), given.encode())


def csrf_token(session: dict[str, Any]) -> str:
    """The session's CSRF token, created on first use."""
    token = session.get("csrf")
    if not isinstance(token, str):
        token = secrets.token_urlsafe(32)
        session["csrf"] = token
    return token


def check_csrf(request: Request, form: Mapping[str, Any]) -> None:
    """Refuse (403, logged) a form whose CSRF token is missing or is not this session's."""
    given = form.get(CSRF_FIELD)
    expected = request.session.get("csrf")
    if not isinstance(given, str) or not isinstance(expected, str) or not given:
        message = "refused: this form has no CSRF token; reload the page and retry"
    elif not hmac.compare_digest(given.encode(), expected.encode()):
        message = "refused: this form's CSRF token is not this session's; reload the page and retry"
    else:
        return
    log_refusal(request, "csrf", message)
    raise HTTPException(403, message)


def logged_in(request: HTTPConnection) -> LoggedIn | None:
    """This request's live browser session, as the guard found it (None when there is none)."""
    found = request.scope.get(LOGGED_IN)
    return found if isinstance(found, LoggedIn) else None


class Guard:
    """ASGI middleware (inside the session middleware) enforcing the rules above."""

    def __init__(
        self, app: ASGIApp, access: Access, sessions: SessionStore, throttle: Throttle
    ) -> None:
        self.app = app
        self.access = access
        self.sessions = sessions
        self.throttle = throttle

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        csrf_token(scope["session"])
        refusal = await self._refusal(request)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        await self.app(scope, receive, send)

    async def _refusal(self, request: Request) -> ASGIApp | None:
        host = request.headers.get("host", "")
        if not self.access.protected:
            refused = _open_console_refusal(request, host)
            if refused is not None:
                return refused
        api = request.url.path.startswith("/api/") or request.url.path in ("/api", "/metrics")
        signed = request.method == "POST" and request.url.path in SIGNED_PATHS
        if request.method in _UNSAFE:
            origin = request.headers.get("origin")
            if origin and origin_netloc(origin) != host.lower():
                message = "refused: a state-changing request from another site"
                log_refusal(request, "origin", message, origin=origin)
                return _plain(403, message)
            if api and not signed and not is_json(request.headers):
                return _json(
                    415,
                    "UnsupportedMediaType",
                    "send the request body as JSON with Content-Type: application/json",
                )
        if not self.access.protected or self._public(request.url.path) or signed:
            return None
        if api:
            return self._bearer(request)
        session_id = request.session.get("sid")
        if isinstance(session_id, str):
            found = await run_in_threadpool(self.sessions.check, session_id)
            if found is not None:
                request.scope[LOGGED_IN] = found
                return None
        if request.method == "GET":
            target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
            return _redirect(f"/login?next={quote(target, safe='')}")
        return _plain(401, "refused: log in first")

    def _bearer(self, request: Request) -> ASGIApp | None:
        given = request.headers.get("authorization")
        address = client_address(request)
        scheme, _, presented = (given or "").partition(" ")
        # The right token first: whoever holds it is never locked out by others' guesses.
        if scheme.lower() == "bearer" and token_matches(self.access.token, presented.strip()):
            self.throttle.succeeded(address)
            return None
        wait = self.throttle.retry_after(address)
        if wait is not None:
            message = f"too many failed attempts from {address}: retry in {wait} s"
            log_refusal(request, "throttled", message, retry_after=wait)
            return _json(429, "TooManyRequests", message, {"retry-after": str(wait)})
        if given is not None:
            self.throttle.failed(address)
            log_refusal(request, "bad_token", "the bearer token is not the console token")
        return _json(
            401,
            "Unauthorized",
            "send the console token as 'Authorization: Bearer <token>'",
            {"www-authenticate": 'Bearer realm="mailfathom"'},
        )

    @staticmethod
    def _public(path: str) -> bool:
        return path in _PUBLIC_PATHS or path.startswith(_PUBLIC_PREFIXES)


class SecurityHeaders:
    """ASGI middleware (the outermost of ours) adding the security headers to every response,
    the error pages of :class:`ServerErrors` included."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        await self.app(scope, receive, _with_headers(send))


class ServerErrors:
    """ASGI middleware (inside :class:`SecurityHeaders`): an unexpected exception becomes a
    plain 500 (JSON under ``/api``) that says what to do, and a logged traceback."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def sender(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, sender)
        except Exception:
            if started:
                raise
            error_log.exception(
                "the console failed on %s %s",
                scope.get("method"),
                scope["path"][:200],
                extra=log_fields(
                    "console_error", method=scope.get("method"), path=scope["path"][:200]
                ),
            )
            message = (
                "the console failed unexpectedly: its log has the traceback; retry, or report it"
            )
            path: str = scope["path"]
            if path == "/api" or path.startswith("/api/"):
                response = _json(500, "InternalError", message)
            else:
                response = _plain(500, message)
            await response(scope, receive, send)


def _open_console_refusal(request: Request, host: str) -> ASGIApp | None:
    """Why a console without a token refuses this request, or None: the peer must be a
    loopback address, the request must not come through a proxy, and its ``Host`` must
    be a loopback name."""
    peer = request.client.host if request.client else None
    if peer is None or not is_loopback_peer(peer):
        message = (
            "refused: this console has no token and serves only this machine's own "
            f"loopback clients, not {peer or 'an unknown peer'}: {_PROTECT_IT}"
        )
        log_refusal(request, "peer", message)
        return _plain(403, message)
    forwarded = forwarded_by(request.headers)
    if forwarded is not None:
        message = (
            f"refused: this request came through a proxy (it carries {forwarded}), and a "
            f"console without a token cannot tell who is behind one: {_PROTECT_IT}"
        )
        log_refusal(request, "proxy", message, header=forwarded)
        return _plain(403, message)
    if not is_loopback(hostname(host)):
        message = f"refused: this console answers only to loopback names, not {host!r}"
        log_refusal(request, "host", message, host=host)
        return _plain(421, message)
    return None


def is_loopback_peer(address: str) -> bool:
    """True when the connecting peer's address (not a name) is 127.0.0.0/8 or ::1, an
    IPv4 loopback address mapped into IPv6 included."""
    try:
        parsed = ipaddress.ip_address(address.strip("[]"))
    except ValueError:
        return False
    if isinstance(parsed, ipaddress.IPv6Address) and parsed.ipv4_mapped is not None:
        return parsed.ipv4_mapped.is_loopback
    return parsed.is_loopback


def forwarded_by(headers: Headers) -> str | None:
    """The first header a proxy adds that this request carries (``Forwarded``,
    ``X-Forwarded-For``, …), or None."""
    return next((name for name in _PROXY_HEADERS if name in headers), None)


def _with_headers(send: Send) -> Send:
    async def sender(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = MutableHeaders(scope=message)
            headers.setdefault("content-security-policy", PAGE_POLICY)
            headers.setdefault("x-frame-options", "DENY")
            headers["x-content-type-options"] = "nosniff"
            headers["referrer-policy"] = "same-origin"  # so our own form posts carry Origin
            headers.setdefault("cache-control", "no-store")
        await send(message)

    return sender


def origin_netloc(origin: str) -> str:
    """The ``host[:port]`` of an ``Origin`` header, lower-cased ('' when it does not parse)."""
    try:
        return urlsplit(origin).netloc.lower()
    except ValueError:
        return ""


def is_json(headers: Headers) -> bool:
    """Whether the request says its body is JSON (``application/json`` or ``…+json``)."""
    kind = headers.get("content-type", "").split(";")[0].strip().lower()
    return kind == "application/json" or (
        kind.startswith("application/") and kind.endswith("+json")
    )


def _plain(status: int, text: str) -> ASGIApp:
    return PlainTextResponse(text, status_code=status)


def _json(status: int, kind: str, message: str, headers: dict[str, str] | None = None) -> ASGIApp:
    body = json.dumps({"error": {"type": kind, "message": message}})
    return Response(body, status_code=status, media_type="application/json", headers=headers)


def _redirect(location: str) -> ASGIApp:
    return RedirectResponse(location, status_code=303)
