"""How page and API handlers are wrapped: errors to statuses, forms to CSRF checks.

Internal. Handlers are plain functions that call the (blocking) console
service; :func:`view` and :func:`form_action` run them on a worker thread, and
``form_action`` refuses any form without this session's CSRF token *before*
the handler runs. Every state-changing page route is a ``form_action``: a test
walks the routes and checks it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import wraps
from typing import Any
from urllib.parse import parse_qsl

from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

from mailfathom.errors import (
    ConfigurationError,
    IllegalTransition,
    InvalidInput,
    MailFathomError,
    NotFound,
    StoreError,
)
from mailfathom.web.render import page
from mailfathom.web.security import check_csrf

__all__ = ["error_page", "form_action", "status_for", "view"]

Endpoint = Callable[[Request], Awaitable[Response]]


def status_for(exc: MailFathomError) -> int:
    """The HTTP status for one of our errors."""
    if isinstance(exc, NotFound):
        return 404
    if isinstance(exc, IllegalTransition):
        return 409
    if isinstance(exc, (InvalidInput, ConfigurationError)):
        return 400
    if isinstance(exc, StoreError):
        return 503
    return 500


def error_page(request: Request, exc: MailFathomError) -> Response:
    """The error page: what went wrong and what to do, with the matching status."""
    return page(
        request,
        "error.html",
        {"title": type(exc).__name__, "message": str(exc)},
        status_code=status_for(exc),
    )


def view(handler: Callable[[Request], Response]) -> Endpoint:
    """A read-only page: run ``handler`` off the event loop; our errors become error pages."""

    @wraps(handler)
    async def endpoint(request: Request) -> Response:
        try:
            return await run_in_threadpool(handler, request)
        except MailFathomError as exc:
            return error_page(request, exc)

    return endpoint


def form_action(handler: Callable[[Request, FormData], Response]) -> Endpoint:
    """A state-changing form post: CSRF-checked first, then ``handler(request, form)``."""

    @wraps(handler)
    async def endpoint(request: Request) -> Response:
        refusal = await _unreadable_form(request)
        if refusal is not None:
            return refusal
        form = await request.form(max_files=0, max_fields=10_000)
        check_csrf(request, form)
        try:
            return await run_in_threadpool(handler, request, form)
        except MailFathomError as exc:
            return error_page(request, exc)

    endpoint.checks_csrf = True  # type: ignore[attr-defined]
    return endpoint


async def _unreadable_form(request: Request) -> Response | None:
    """A 400 for a form that is not URL-encoded UTF-8 text; None when it is.

    Starlette would quietly replace bytes that are not UTF-8 (with U+FFFD, or read them
    as Latin-1 in a multipart form), changing what the operator typed; refuse instead.
    """
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind == "multipart/form-data":
        message = "send the form URL-encoded (application/x-www-form-urlencoded), as the page does"
        return PlainTextResponse(message, status_code=415)
    if kind != "application/x-www-form-urlencoded":
        return None  # no form fields at all: the CSRF check refuses it
    raw = await request.body()
    try:
        parse_qsl(raw.decode("utf-8"), keep_blank_values=True, encoding="utf-8", errors="strict")
    except UnicodeDecodeError:
        return PlainTextResponse(
            "refused: the form holds bytes that are not UTF-8 text; send it from the console's "
            "own page (or encode the values as UTF-8)",
            status_code=400,
        )
    return None


def form_values(form: FormData, *names: str) -> dict[str, Any]:
    """The named text fields of ``form`` (missing ones as None)."""
    found: dict[str, Any] = {}
    for name in names:
        value = form.get(name)
        found[name] = value if isinstance(value, str) else None
    return found
