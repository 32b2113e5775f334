"""Serving the console with uvicorn, after the access rules have been checked.

Internal. :func:`build_console_app` refuses a non-loopback bind without a
token before anything listens; :func:`serve` runs uvicorn until interrupted.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import uvicorn
from starlette.applications import Starlette

from mailfathom.console import Console
from mailfathom.devmail import Inbox
from mailfathom.web.app import create_app
from mailfathom.web.features import Features
from mailfathom.web.limits import server_config
from mailfathom.web.security import Access

if TYPE_CHECKING:
    from mailfathom.app import MailFathom

__all__ = ["build_console_app", "console_url", "serve"]


def build_console_app(
    mf: MailFathom,
    *,
    host: str,
    token: str | None,
    inbox: Inbox | None = None,
    features: Features | None = None,
    secure_cookies: bool = False,
) -> Starlette:
    """The console app for ``mf`` bound to ``host``; no token on a public address is refused.

    ``secure_cookies`` marks the session cookie ``Secure``, for a console behind TLS.
    """
    access = Access.for_bind(host, token, secure_cookies=secure_cookies)
    return create_app(Console(mf, inbox=inbox), access=access, features=features)


def console_url(host: str, port: int) -> str:
    """The address to open in a browser."""
    shown = f"[{host}]" if ":" in host else host
    if host in ("0.0.0.0", "::"):  # noqa: S104 - naming the wildcard, not binding it
        shown = "127.0.0.1"
    return f"http://{shown}:{port}/"


def serve(app: Starlette, *, host: str, port: int, log_level: str = "warning") -> None:
    """Run the console until SIGINT / SIGTERM, with :func:`~mailfathom.web.limits.server_config`'s
    limits (off loopback, put a reverse proxy in front: docs/console.md)."""
    logging.getLogger("uvicorn.error").setLevel(log_level.upper())
    config = server_config(app, host=host, port=port, log_level=log_level)
    uvicorn.Server(config).run()
