"""Who may use the console, and the protections every request passes through.

Internal. The rules:

* With no token the console serves only a loopback address, and only to
  requests whose ``Host`` is a loopback name (a DNS-rebinding page cannot reach
  it under another name).
* With a token (``MAILFATHOM_WEB_TOKEN``) every page and API call needs it: the
  API as ``Authorization: Bearer <token>``, browsers through the login form,
  which sets a signed session cookie (``SameSite=Strict``, ``HttpOnly``).
* Every state-changing form carries the session's CSRF token
  (:func:`check_csrf`); a state-changing API call must send JSON (a cross-site
  HTML form cannot); any unsafe request whose ``Origin`` is another site is refused.
* Every response carries a strict Content-Security-Policy and no-sniff,
  same-origin-referrer and no-framing headers.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit

from starlette.datastructures import Headers, MutableHeaders
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mailfathom.errors import ConfigurationError

__all__ = [
    "CSRF_FIELD",
    "Access",
    "Guard",
    "check_csrf",
    "csrf_token",
    "is_loopback",
    "token_matches",
]

CSRF_FIELD = "csrf_token"
MIN_TOKEN_LENGTH = 16
_LOOPBACK_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost"}
_PUBLIC_PREFIXES = ("/static/",)
_PUBLIC_PATHS = {"/login", "/healthz"}
_UNSAFE = {"POST", "PUT", "PATCH", "DELETE"}
PAGE_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "form-action 'self'; frame-src 'self'; frame-ancestors 'none'; base-uri 'none'"
)


def is_loopback(host: str) -> bool:
    """True for 127.0.0.0/8, ::1 and localhost names."""
    name = host.strip("[]").lower()
    if name in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True, slots=True)
class Access:
    """The console's access rules: the token (if any) and the session signing secret."""

    token: str | None
    session_secret: str
    #: The session cookie is ``Secure`` (HTTPS only): the console is served behind TLS.
    secure_cookies: bool = False

    @classmethod
    def for_bind(cls, host: str, token: str | None, *, secure_cookies: bool = False) -> Access:
        """Rules for a console bound to ``host``; refuses a non-loopback bind without a token."""
        token = token or None
        if token is None and not is_loopback(host):
            raise ConfigurationError(
                f"refusing to serve the console on {host}, which is not a loopback address, "
                "without a token: set MAILFATHOM_WEB_TOKEN (or --token) to a long random "
                "secret, or bind 127.0.0.1"
            )
        if token is not None and len(token) < MIN_TOKEN_LENGTH:
            raise ConfigurationError(
                f"the console token is {len(token)} characters: use at least "
                f"{MIN_TOKEN_LENGTH} random characters (python -c 'import secrets; "
                "print(secrets.token_urlsafe(32))')"
            )
        if token is None:
            secret = secrets.token_urlsafe(32)
        else:  # stable across restarts and processes; a new token ends every session
            mac = hmac.new(token.encode(), b"mailfathom console session", hashlib.sha256)
            secret = mac.hexdigest()
        return cls(token=token, session_secret=secret, secure_cookies=secure_cookies)

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
    """Refuse (403) a form whose CSRF token is missing or is not this session's."""
    given = form.get(CSRF_FIELD)
    expected = request.session.get("csrf")
    if not isinstance(given, str) or not isinstance(expected, str) or not given:
        raise HTTPException(403, "refused: this form has no CSRF token; reload the page and retry")
    if not hmac.compare_digest(given.encode(), expected.encode()):
        raise HTTPException(
            403, "refused: this form's CSRF token is not this session's; reload the page and retry"
        )


class Guard:
    """ASGI middleware (inside the session middleware) enforcing the rules above."""

    def __init__(self, app: ASGIApp, access: Access) -> None:
        self.app = app
        self.access = access

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        csrf_token(scope["session"])
        refusal = self._refusal(request)
        if refusal is not None:
            await refusal(scope, receive, _with_headers(send))
            return
        await self.app(scope, receive, _with_headers(send))

    def _refusal(self, request: Request) -> ASGIApp | None:
        host = request.headers.get("host", "")
        if not self.access.protected and not is_loopback(_hostname(host)):
            return _plain(
                421, f"refused: this console answers only to loopback names, not {host!r}"
            )
        api = request.url.path.startswith("/api/") or request.url.path in ("/api", "/metrics")
        if request.method in _UNSAFE:
            origin = request.headers.get("origin")
            if origin and _hostport(origin) != host.lower():
                return _plain(403, "refused: a state-changing request from another site")
            if api and not _is_json(request.headers):
                return _json(
                    415,
                    "UnsupportedMediaType",
                    "send the request body as JSON with Content-Type: application/json",
                )
        if not self.access.protected or self._public(request.url.path):
            return None
        if api:
            scheme, _, given = request.headers.get("authorization", "").partition(" ")
            if scheme.lower() == "bearer" and token_matches(self.access.token, given.strip()):
                return None
            return _json(
                401,
                "Unauthorized",
                "send the console token as 'Authorization: Bearer <token>'",
                {"www-authenticate": 'Bearer realm="mailfathom"'},
            )
        if request.session.get("auth") is True:
            return None
        if request.method == "GET":
            target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
            return _redirect(f"/login?next={quote(target, safe='')}")
        return _plain(401, "refused: log in first")

    @staticmethod
    def _public(path: str) -> bool:
        return path in _PUBLIC_PATHS or path.startswith(_PUBLIC_PREFIXES)


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


def _hostname(host: str) -> str:
    try:
        return urlsplit(f"//{host}").hostname or ""
    except ValueError:
        return ""


def _hostport(origin: str) -> str:
    try:
        return urlsplit(origin).netloc.lower()
    except ValueError:
        return ""


def _is_json(headers: Headers) -> bool:
    kind = headers.get("content-type", "").split(";")[0].strip().lower()
    return kind == "application/json" or (
        kind.startswith("application/") and kind.endswith("+json")
    )


def _plain(status: int, text: str) -> ASGIApp:
    from starlette.responses import PlainTextResponse

    return PlainTextResponse(text, status_code=status)


def _json(status: int, kind: str, message: str, headers: dict[str, str] | None = None) -> ASGIApp:
    from starlette.responses import Response

    body = json.dumps({"error": {"type": kind, "message": message}})
    return Response(body, status_code=status, media_type="application/json", headers=headers)


def _redirect(location: str) -> ASGIApp:
    from starlette.responses import RedirectResponse

    return RedirectResponse(location, status_code=303)
