"""``create_app``: the console's ASGI application (pages, JSON API, static files).

Internal. The middleware order matters, outermost first:

0. :class:`~mailfathom.web.limits.CloseUnread` closes the connection after any response
   sent before its request body was read (every refusal below included);
1. :class:`~mailfathom.web.security.SecurityHeaders` adds the CSP, no-framing and
   no-sniff headers to every response, error pages included;
2. :class:`~mailfathom.web.security.ServerErrors` turns an unexpected exception into
   a 500 that still passes through (1);
3. :class:`~mailfathom.web.limits.BodyDeadline` answers 408 to a body that trickles in;
4. :class:`~mailfathom.web.sessions.SessionCookies` decodes the signed cookie (its key
   is kept in the database) and writes it back only where a cookie belongs;
5. :class:`~mailfathom.web.security.Guard` enforces the peer, proxy, host, token,
   session, back-off, origin and content-type rules before any handler runs.
"""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from mailfathom.console import Console
from mailfathom.delivery.sns import SnsVerifier
from mailfathom.web import (
    api,
    inbox_pages,
    limit_pages,
    login_pages,
    observability_routes,
    outbox_pages,
    pages,
    queue_pages,
    schedule_pages,
    sns,
    suppression_pages,
)
from mailfathom.web.delegated import DelegatedGuard
from mailfathom.web.features import Features, detect_features
from mailfathom.web.limits import BODY_SECONDS, BodyDeadline, CloseUnread
from mailfathom.web.login_links import LoginLinks
from mailfathom.web.render import HERE
from mailfathom.web.security import Access, Guard, SecurityHeaders, ServerErrors
from mailfathom.web.sessions import SHARED_KEY, SessionCookies, SessionStore
from mailfathom.web.throttle import Throttle

__all__ = ["Features", "create_app"]


def create_app(
    console: Console,
    *,
    access: Access | None = None,
    features: Features | None = None,
    extra_routes: list[BaseRoute] | None = None,
    body_seconds: float = BODY_SECONDS,
    delegated_auth: bool = False,
    sns_verifier: SnsVerifier | None = None,
) -> Starlette:
    """The console for ``console``'s app. ``access`` defaults to an open loopback console.

    Reads (or makes) the session-signing key in the database, so the database must be
    migrated first. A request body must arrive within ``body_seconds``.

    ``delegated_auth=True``: the host application authenticates (the ``auth=`` of
    :func:`mailfathom.web.create_app`, which wraps this app), so the token guard gives
    way to :class:`~mailfathom.web.delegated.DelegatedGuard`.

    ``sns_verifier`` checks the SNS messages of ``POST /api/suppressions/sns``; by default
    one for the app's ``sns_topic_arns`` setting (the endpoint is off while it is unset).
    """
    access = access or Access.for_bind("127.0.0.1", None)
    sessions = SessionStore(console.mf)
    throttle = Throttle(console.now)
    routes: list[BaseRoute] = [
        *(extra_routes or []),  # the caller's, ahead of the API's catch-all
        Route(sns.SNS_PATH, sns.receive_sns, methods=["POST"]),
        *api.routes,
        Route("/api/{rest:path}", api.not_found, methods=["GET", "POST", "PUT", "PATCH", "DELETE"]),
        *pages.routes,
        *login_pages.routes,
        *inbox_pages.routes,
        *outbox_pages.routes,
        *schedule_pages.routes,
        *queue_pages.routes,
        *limit_pages.routes,
        *suppression_pages.routes,
        *observability_routes.routes,
        Mount("/static", app=StaticFiles(directory=HERE / "static"), name="static"),
    ]
    app = Starlette(
        routes=routes,
        middleware=[
            Middleware(CloseUnread),
            Middleware(SecurityHeaders),
            Middleware(ServerErrors),
            Middleware(BodyDeadline, seconds=body_seconds),
            Middleware(
                SessionCookies,
                secret=_signing_key(access, sessions, delegated=delegated_auth),
                protected=access.protected,
                secure=access.secure_cookies,
            ),
            Middleware(DelegatedGuard)
            if delegated_auth
            else Middleware(Guard, access=access, sessions=sessions, throttle=throttle),
        ],
        exception_handlers={HTTPException: _http_error},
        max_body_size=2_000_000,
    )
    app.state.console = console
    app.state.access = access
    app.state.sessions = sessions
    app.state.throttle = throttle
    app.state.login_links = LoginLinks(console.now)
    app.state.features = features or detect_features(console)
    app.state.sns = sns_verifier or sns.verifier_for(console)
    return app


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if request.url.path.startswith("/api/"):
        return api.api_error(exc.status_code, "HTTPError", str(exc.detail))
    return PlainTextResponse(str(exc.detail), status_code=exc.status_code, headers=exc.headers)


def _signing_key(access: Access, sessions: SessionStore, *, delegated: bool) -> str:
    """The key session cookies are signed with, kept in the database so that every
    process of a console agrees (a form rendered by one passes its CSRF check in another).

    A token console uses (and rotates with its token) the key of the logged-in sessions.
    An open loopback console, or one behind the host application's ``auth=``, holds no
    login sessions: it uses a key of its own, created once and never rotated, so it never
    ends a token console's sessions on the same database."""
    if access.token is None or delegated:
        return sessions.secret_for(None, name=SHARED_KEY)
    return sessions.secret_for(access.token)
