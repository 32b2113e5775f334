"""The operator console inside a Django project, behind Django's staff login.

Internal: not part of the public API (:mod:`mailfathom` lists the public modules).

``staff_user`` is the console's ``auth=`` callable (:func:`mailfathom.web.create_app`):
it reads the visitor's Django session (the admin's login), and lets in active staff
users only. Those holding the ``mailfathom.operate_console`` permission (superusers
hold every permission) act on jobs and email (requeue, drop, release, resolve, …);
other staff only look. Each action is written to the audit trail with the username
(``web:<username>`` from the pages, ``api:<username>`` from the JSON API).
Anyone else is sent to the admin's login page.

``with_console(application)`` serves the console under a prefix of the project's ASGI
application (``asgi.py``), in the same process and on the same sessions.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any
from urllib.parse import quote

from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, load_backend
from django.db import close_old_connections
from django.urls import NoReverseMatch, reverse
from django.utils.crypto import constant_time_compare
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import RedirectResponse
from starlette.routing import Mount
from starlette.types import ASGIApp

from mailfathom.contrib.django.app import get_app
from mailfathom.web import create_app
from mailfathom.web.delegated import ConsoleUser

__all__ = ["OPERATE_PERMISSION", "staff_user", "with_console"]

#: The Django permission that lets a staff user act in the console, not only look.
OPERATE_PERMISSION = "mailfathom.operate_console"


def staff_user(request: Request) -> ConsoleUser | RedirectResponse | None:
    """The console user for the Django user logged in on this request: an active staff
    user (read-only without ``mailfathom.operate_console``); a redirect to the admin's
    login page for anyone else."""
    close_old_connections()  # this runs in a worker thread, outside Django's request cycle
    try:
        user = _session_user(request.cookies.get(settings.SESSION_COOKIE_NAME))
        if user is None or not user.is_active or not user.is_staff:
            return _to_login(request)
        return ConsoleUser(
            name=str(user.get_username()), read_only=not user.has_perm(OPERATE_PERMISSION)
        )
    finally:
        close_old_connections()


def _session_user(session_key: str | None) -> Any:
    """The user of the Django session ``session_key`` (as ``django.contrib.auth.get_user``
    finds it: same backend, same password hash), or None."""
    if not session_key:
        return None
    session = import_module(settings.SESSION_ENGINE).SessionStore(session_key)
    user_id = session.get(SESSION_KEY)
    backend_path = session.get(BACKEND_SESSION_KEY)
    if user_id is None or backend_path not in settings.AUTHENTICATION_BACKENDS:
        return None
    backend = load_backend(backend_path)
    user = backend.get_user(user_id)
    if user is None:
        return None
    expected = getattr(user, "get_session_auth_hash", None)
    if expected is not None and not constant_time_compare(
        str(session.get(HASH_SESSION_KEY, "")), expected()
    ):
        return None  # the password changed since this session logged in
    return user


def _to_login(request: Request) -> RedirectResponse:
    """The admin's login page (``settings.LOGIN_URL`` without the admin), then back here."""
    try:
        login = reverse("admin:login")
    except NoReverseMatch:
        login = str(settings.LOGIN_URL)
    here = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return RedirectResponse(f"{login}?next={quote(here)}", status_code=302)


def with_console(application: ASGIApp, *, prefix: str = "/mailfathom") -> ASGIApp:
    """``application`` (Django's ``get_asgi_application()``) with the console under
    ``prefix``, for Django's staff (:func:`staff_user`); everything else goes to Django."""
    if not prefix.startswith("/") or prefix.endswith("/") or prefix == "/":
        raise ValueError(f"prefix must look like '/mailfathom', not {prefix!r}")
    console = create_app(get_app(), auth=staff_user)
    return Starlette(routes=[Mount(prefix, app=console), Mount("", app=application)])
