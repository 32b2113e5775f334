"""One-time login links: what ``mailfathom web`` and ``mailfathom dev`` print instead of the token.

Internal. A link carries a random code (256 bits) that logs one browser in, once,
within :data:`LINK_LIFETIME` of being printed; the console keeps only the code's
SHA-256, in memory. Opening the link shows a page with a button (a GET never logs
in: browsers prefetch links); pressing it posts the code with the page's CSRF token
and starts an ordinary session. A used or expired code is refused like a wrong
token, and the login page says to use the token instead.
"""

from __future__ import annotations

import hashlib
import secrets
import threading
from collections.abc import Callable
from datetime import datetime, timedelta
from urllib.parse import quote

from starlette.applications import Starlette

__all__ = ["LINK_LIFETIME", "LoginLinks", "login_link"]

#: A printed link works once, within this long.
LINK_LIFETIME = timedelta(minutes=15)


def _key(code: str) -> str:
    return hashlib.sha256(code.encode()).hexdigest()


class LoginLinks:
    """The login codes this console process has issued and not yet seen used."""

    def __init__(self, now: Callable[[], datetime]) -> None:
        self._now = now
        self._expires: dict[str, datetime] = {}
        self._lock = threading.Lock()

    def issue(self) -> str:
        """A new code, good once within :data:`LINK_LIFETIME`."""
        code = secrets.token_urlsafe(32)
        with self._lock:
            self._expires[_key(code)] = self._now() + LINK_LIFETIME
        return code

    def redeem(self, code: str) -> bool:
        """True, once, for a code issued here that has not expired; False for any other."""
        now = self._now()
        with self._lock:
            for key in [k for k, expires in self._expires.items() if expires <= now]:
                del self._expires[key]
            return self._expires.pop(_key(code), None) is not None


def login_link(app: Starlette, base_url: str) -> str:
    """A one-time login link to ``app`` (a console with a token) served at ``base_url``."""
    links: LoginLinks = app.state.login_links
    return f"{base_url.rstrip('/')}/login?code={quote(links.issue(), safe='')}"
