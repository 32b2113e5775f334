"""``create_app``: the console's ASGI application (pages, JSON API, static files).

Internal. The middleware order matters: the session middleware decodes the
signed cookie first, then :class:`~mailfathom.web.security.Guard` enforces the
host, token, origin and content-type rules before any handler runs.
"""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.sessions import SessionMiddleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from mailfathom.console import Console
from mailfathom.web import (
    api,
    inbox_pages,
    observability_routes,
    outbox_pages,
    pages,
    schedule_pages,
)
from mailfathom.web.features import Features, detect_features
from mailfathom.web.render import HERE
from mailfathom.web.security import Access, Guard

__all__ = ["Features", "create_app"]


def create_app(
    console: Console,
    *,
    access: Access | None = None,
    features: Features | None = None,
    extra_routes: list[BaseRoute] | None = None,
) -> Starlette:
    """The console for ``console``'s app. ``access`` defaults to an open loopback console."""
    access = access or Access.for_bind("127.0.0.1", None)
    routes: list[BaseRoute] = [
        *api.routes,
        Route("/api/{rest:path}", api.not_found, methods=["GET", "POST", "PUT", "PATCH", "DELETE"]),
        *pages.routes,
        *inbox_pages.routes,
        *outbox_pages.routes,
        *schedule_pages.routes,
        *observability_routes.routes,
        *(extra_routes or []),
        Mount("/static", app=StaticFiles(directory=HERE / "static"), name="static"),
    ]
    app = Starlette(
        routes=routes,
        middleware=[
            Middleware(
                SessionMiddleware,
                secret_key=access.session_secret,
                session_cookie="mailfathom_session",
                max_age=12 * 3600,
                same_site="strict",
                https_only=access.secure_cookies,
            ),
            Middleware(Guard, access=access),
        ],
        exception_handlers={HTTPException: _http_error},
        max_body_size=2_000_000,
    )
    app.state.console = console
    app.state.access = access
    app.state.features = features or detect_features(console)
    return app


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if request.url.path.startswith("/api/"):
        return api.api_error(exc.status_code, "HTTPError", str(exc.detail))
    return PlainTextResponse(str(exc.detail), status_code=exc.status_code, headers=exc.headers)
