"""Templates, and what every page is rendered with.

Internal. Jinja2 autoescapes every value (pages show payloads, error messages
and tracebacks that anyone who can enqueue a job controls). Helpers here build
links and format times; :func:`page` renders a template with the session's
CSRF token, the operator's name and the navigation.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import jinja2
from starlette.requests import Request
from starlette.responses import Response
from starlette.templating import Jinja2Templates

from mailfathom import hints
from mailfathom.console.limits import rate_text
from mailfathom.console.query import JobQuery
from mailfathom.web.delegated import user_of
from mailfathom.web.security import CSRF_FIELD, csrf_token, logged_in

__all__ = ["ANONYMOUS", "flash", "operator", "page", "templates"]

#: The stored operator name of a login that gave none.
ANONYMOUS = ""

HERE = Path(__file__).parent
_STATE_CLASS = {
    "Pending": "pending",
    "Claimed": "claimed",
    "Succeeded": "ok",
    "DeadLettered": "dead",
    "Dropped": "dropped",
}


def _time(value: datetime | None) -> str:
    return "—" if value is None else value.strftime("%Y-%m-%d %H:%M:%S")


def _jobs_link(query: JobQuery | None = None, **extra: Any) -> str:
    params: dict[str, Any] = {} if query is None else dict(query.params())
    params.update({k: v for k, v in extra.items() if v is not None})
    return "/jobs" + (f"?{urlencode(params)}" if params else "")


def _state_class(name: str) -> str:
    return _STATE_CLASS.get(name, "other")


_STAGE_CLASS = {
    "Recorded": "pending",
    "TransmissionBegun": "warn",
    "Sent": "ok",
    "Refused": "dead",
    "Cancelled": "dropped",
}


def _stage_class(name: str) -> str:
    return _STAGE_CLASS.get(name, "other")


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["time"] = _time
    env.filters["state_class"] = _state_class
    env.filters["stage_class"] = _stage_class
    env.filters["rate"] = rate_text
    env.globals["jobs_link"] = _jobs_link
    env.globals["urlencode"] = urlencode
    env.globals["command"] = hints.command
    return env


templates = Jinja2Templates(env=_environment())


def operator(request: Request) -> str:
    """Who acts in this session, for the audit trail.

    ``web:<name>`` when the host application's ``auth=`` said who this is;
    ``web:console`` on an open loopback console. Behind a token, everyone holds the
    same token, so the name typed at login is only what the operator said it was:
    ``web:<name> (self-declared)`` (``web:operator`` when no name was given).
    """
    user = user_of(request)
    if user is not None:
        return f"web:{user.name}"
    found = logged_in(request)
    if found is None:
        return "web:console"
    if found.operator == ANONYMOUS:
        return "web:operator"
    return f"web:{found.operator} (self-declared)"


def flash(request: Request, message: str) -> None:
    """Show ``message`` once, on the next page this session renders."""
    request.session["flash"] = message


def page(
    request: Request,
    name: str,
    context: Mapping[str, Any] | None = None,
    *,
    status_code: int = 200,
) -> Response:
    """Render ``name`` with the common context (CSRF token, operator, navigation, flash)."""
    state = request.app.state
    common = {
        "request": request,
        "csrf_field": CSRF_FIELD,
        "csrf_token": csrf_token(request.session),
        "operator": operator(request),
        "logged_in": logged_in(request) is not None,
        "protected": state.access.protected,
        "features": state.features,
        "flash": request.session.pop("flash", None),
        "path": request.url.path,
        "refresh": False,
        "error": None,
    }
    return templates.TemplateResponse(
        request, name, {**common, **(context or {})}, status_code=status_code
    )
