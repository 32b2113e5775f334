"""Console access decided by the host application: who is asking, and whether they may act.

Internal; the public face is :func:`mailfathom.web.create_app` (``auth=``). Two ASGI
middlewares split the work:

* :class:`Authenticated` (outermost, so it sees the host application's request as
  it arrived: its full path, its session, its cookies) calls the application's
  ``auth`` callable and puts the verdict, a :class:`ConsoleUser`, in the scope; a
  refusal answers 401 without reaching the console.
* :class:`DelegatedGuard` (in place of the token guard, inside the console's own
  session middleware) refuses any request the first one did not let through,
  refuses every state-changing request of a read-only user with 403, and keeps the
  rules that do not depend on who is asking: same-site ``Origin`` on unsafe
  requests, JSON bodies on the API, a CSRF token in every session, and the
  security headers on every answer.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from starlette.concurrency import run_in_threadpool
from starlette.requests import HTTPConnection, Request
from starlette.responses import PlainTextResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from mailfathom.errors import ConfigurationError
from mailfathom.web.security import SIGNED_PATHS, csrf_token, is_json, origin_netloc

__all__ = [
    "USER_KEY",
    "AuthCallable",
    "AuthResult",
    "Authenticated",
    "ConsoleUser",
    "DelegatedGuard",
    "user_of",
]

#: Where the verdict of ``auth`` travels in the ASGI scope.
USER_KEY = "mailfathom.user"
_UNSAFE = {"POST", "PUT", "PATCH", "DELETE"}


@dataclass(frozen=True, slots=True)
class ConsoleUser:
    """Who uses the console, as the application's ``auth`` callable says.

    ``name`` goes into the audit trail (``web:<name>``) of everything they do.
    ``read_only=True`` is the viewer role: every page and API read, and a 403 for
    every state-changing request (requeue, drop, release, cancel, resolve, …).
    """

    name: str
    read_only: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ConfigurationError(
                "a ConsoleUser needs a non-empty name: it is written to the audit trail"
            )


#: What ``auth`` may return: a user (or just a name, for a full operator), a response of
#: its own (a redirect to the application's login page, say), or None to refuse.
AuthResult = ConsoleUser | str | Response | None
AuthCallable = Callable[[Request], AuthResult | Awaitable[AuthResult]]


def user_of(connection: HTTPConnection) -> ConsoleUser | None:
    """The user :class:`Authenticated` let through for this request (None outside ``auth=``)."""
    found = connection.scope.get(USER_KEY)
    return found if isinstance(found, ConsoleUser) else None


class Authenticated:
    """ASGI middleware: ask the application's ``auth`` callable who is asking, before
    anything of the console runs. A sync callable runs on the thread pool."""

    def __init__(self, app: ASGIApp, auth: AuthCallable) -> None:
        if not callable(auth):
            raise ConfigurationError(
                "auth= must be a callable that takes the request and returns a ConsoleUser, "
                f"a name, or None to refuse; got {auth!r}"
            )
        self.app = app
        self.auth = auth

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        scope.pop(USER_KEY, None)  # only this middleware's verdict counts
        request = Request(scope, receive)
        if inspect.iscoroutinefunction(self.auth) or inspect.iscoroutinefunction(
            getattr(self.auth, "__call__", None)  # noqa: B004 - an async __call__ method
        ):
            verdict = self.auth(request)
        else:
            verdict = await run_in_threadpool(self.auth, request)
        if inspect.isawaitable(verdict):
            verdict = await verdict
        if isinstance(verdict, Response):
            await verdict(scope, receive, send)
            return
        if isinstance(verdict, str):
            verdict = ConsoleUser(verdict)
        if verdict is None:
            await _refused(scope, 401, "Unauthorized", "refused: you may not use this console")(
                scope, receive, send
            )
            return
        if not isinstance(verdict, ConsoleUser):
            raise ConfigurationError(
                f"auth= returned {type(verdict).__name__}: return a ConsoleUser, a name, a "
                "Response, or None to refuse"
            )
        scope[USER_KEY] = verdict
        await self.app(scope, receive, send)


class DelegatedGuard:
    """ASGI middleware (inside the console's session middleware), in place of the token
    guard when the application authenticates: see the module docstring."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        csrf_token(scope["session"])
        refusal = self._refusal(Request(scope))
        # the console's SecurityHeaders middleware (outside this one) adds the headers
        await (refusal or self.app)(scope, receive, send)

    @staticmethod
    def _refusal(request: Request) -> ASGIApp | None:
        user = user_of(request)
        if user is None:  # reached without the Authenticate middleware: never serve
            return _refused(request.scope, 401, "Unauthorized", "refused: not authenticated")
        if request.method not in _UNSAFE:
            return None
        host = request.headers.get("host", "").lower()
        origin = request.headers.get("origin")
        if origin and origin_netloc(origin) != host:
            return _refused(
                request.scope,
                403,
                "Forbidden",
                "refused: a state-changing request from another site",
            )
        if user.read_only:
            return _refused(
                request.scope,
                403,
                "Forbidden",
                f"refused: {user.name} has read-only access to this console (look, not act); "
                "ask an operator",
            )
        signed = request.url.path in SIGNED_PATHS  # SNS posts text/plain, signed
        if _is_api(request.scope) and not signed and not is_json(request.headers):
            return _refused(
                request.scope,
                415,
                "UnsupportedMediaType",
                "send the request body as JSON with Content-Type: application/json",
            )
        return None


def _is_api(scope: Scope) -> bool:
    path = str(scope.get("path", ""))
    root = str(scope.get("root_path", "")).rstrip("/")
    if root and path.startswith(root):
        path = path[len(root) :]
    return path == "/api" or path.startswith("/api/")


def _refused(scope: Scope, status: int, kind: str, message: str) -> Response:
    if _is_api(scope):
        body = json.dumps({"error": {"type": kind, "message": message}})
        headers = {"www-authenticate": 'Bearer realm="mailfathom"'} if status == 401 else None
        return Response(body, status_code=status, media_type="application/json", headers=headers)
    return PlainTextResponse(message, status_code=status)
