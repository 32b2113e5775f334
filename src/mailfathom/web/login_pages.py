"""Logging in to a console with a token, and out: the token form and one-time login links.

Internal. ``POST /login`` takes the console token, or the code of a one-time login
link (:mod:`mailfathom.web.login_links`), and starts a server-side session
(:mod:`mailfathom.web.sessions`) with a fresh cookie, against fixation. The right
token or code is checked first and always gets in; anything else counts as a failed
attempt of the client's address (:mod:`mailfathom.web.throttle`), which past a few
is answered 429 with ``Retry-After``.
"""

from __future__ import annotations

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from mailfathom.web.handlers import form_action, form_values, view
from mailfathom.web.login_links import LoginLinks
from mailfathom.web.render import page
from mailfathom.web.security import token_matches
from mailfathom.web.throttle import client_address, log_refusal

__all__ = ["routes"]

_WRONG_TOKEN = "That is not the console token: check MAILFATHOM_WEB_TOKEN or the token file."  # noqa: S105
_SPENT_LINK = (
    "This login link was used already or has expired (a link works once, within 15 "
    "minutes): log in with the console token, or restart the console for a new link."
)


def _next_target(raw: str | None) -> str:
    """Only a local path may follow the login (no open redirect)."""
    if raw and raw.startswith("/") and not raw.startswith("//") and "\\" not in raw:
        return raw
    return "/"


@view
def login_form(request: Request) -> Response:
    """The login form (only when the console has a token); with ``?code=``, the button
    that uses a one-time login link."""
    target = _next_target(request.query_params.get("next"))
    if not request.app.state.access.protected:
        return RedirectResponse(target, status_code=303)
    code = request.query_params.get("code") or None
    return page(request, "login.html", {"next": target, "error": None, "code": code})


@form_action
def login(request: Request, form: FormData) -> Response:
    """Check the token (or a login link's code); start a new server-side session.

    The right token or code gets in whatever came before it from the same address;
    failed attempts are counted per address, and past a few every further failed one
    is answered 429 with ``Retry-After``.
    """
    values = form_values(form, "token", "code", "name", "next")
    target = _next_target(values["next"])
    access = request.app.state.access
    if not access.protected:
        return RedirectResponse(target, status_code=303)
    throttle = request.app.state.throttle
    address = client_address(request)
    links: LoginLinks = request.app.state.login_links
    if token_matches(access.token, values["token"]) or (
        values["code"] is not None and links.redeem(values["code"])
    ):
        throttle.succeeded(address)
        return _start_session(request, values["name"], target)
    wait = throttle.retry_after(address)
    if wait is not None:
        message = f"Too many failed logins from {address}: wait {wait} s, then try again."
        log_refusal(request, "throttled", message, retry_after=wait)
        response = page(
            request,
            "login.html",
            {"next": target, "error": message, "code": None},
            status_code=429,
        )
        response.headers["retry-after"] = str(wait)
        return response
    throttle.failed(address)
    spent = values["code"] is not None and not values["token"]
    log_refusal(
        request,
        "login_failed",
        "the login form was given a spent or unknown login link"
        if spent
        else "the login form was given a wrong token",
    )
    error = _SPENT_LINK if spent else _WRONG_TOKEN
    return page(
        request, "login.html", {"next": target, "error": error, "code": None}, status_code=401
    )


def _start_session(request: Request, name: str | None, target: str) -> Response:
    operator = "".join(ch for ch in (name or "").strip() if ch.isprintable())[:60]
    sessions = request.app.state.sessions
    previous = request.session.get("sid")
    if isinstance(previous, str):  # logging in again ends the session it replaces
        sessions.end(previous)
    session_id = sessions.start(operator)
    request.session.clear()
    request.session["sid"] = session_id
    return RedirectResponse(target, status_code=303)


@form_action
def logout(request: Request, form: FormData) -> Response:
    """End the session on the server (every copy of its cookie stops working)."""
    session_id = request.session.get("sid")
    if isinstance(session_id, str):
        request.app.state.sessions.end(session_id)
    request.session.clear()
    target = "/login" if request.app.state.access.protected else "/"
    return RedirectResponse(target, status_code=303)


routes = [
    Route("/login", login_form, name="login_form"),
    Route("/login", login, methods=["POST"], name="login"),
    Route("/logout", logout, methods=["POST"], name="logout"),
]
