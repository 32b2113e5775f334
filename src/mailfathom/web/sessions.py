"""Browser sessions: a random signing key kept in the database, and live sessions checked there.

Internal. Two facts live in the database (migration 0007) so that every console
process and every restart agree:

* **The signing key** of the session cookie (``mf_console_secrets``): random,
  shared by every process of a console (a form one renders passes its CSRF check
  in another), never derived from the token, so a cookie is no oracle for guessing
  the token offline. It is stored with an HMAC of the token under the key; a console
  started with another token sees the mismatch and replaces the key, which ends
  every session.
* **Each logged-in session** (``mf_console_sessions``): the cookie carries a
  random session id; the database keeps only its SHA-256, the operator's name,
  when the session began and when it was last seen. A request is logged in only
  while that row exists, is younger than :data:`ABSOLUTE_LIFETIME` and was seen
  within :data:`IDLE_TIMEOUT`. Logout deletes the row, so a copy of the cookie is
  worthless afterwards.

:class:`SessionCookies` is the ASGI middleware that reads and writes the signed
cookie. It never sets a cookie on an API response, nor on an unauthenticated
response other than ``/login`` (which needs one for its CSRF token).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from base64 import b64decode, b64encode
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import itsdangerous
from starlette.datastructures import MutableHeaders
from starlette.requests import HTTPConnection
from starlette.types import ASGIApp, Message, Receive, Scope, Send

if TYPE_CHECKING:
    from mailfathom.app import MailFathom

__all__ = [
    "ABSOLUTE_LIFETIME",
    "COOKIE",
    "IDLE_TIMEOUT",
    "LOGGED_IN",
    "SHARED_KEY",
    "LoggedIn",
    "SessionCookies",
    "SessionStore",
]

COOKIE = "mailfathom_session"
#: Where the guard leaves the request's :class:`LoggedIn` in the ASGI scope.
LOGGED_IN = "mailfathom.logged_in"
#: A session ends this long after login, however busy it is.
ABSOLUTE_LIFETIME = timedelta(hours=12)
#: A session ends after this long without a request.
IDLE_TIMEOUT = timedelta(minutes=30)
#: How stale ``last_seen_at`` may get before a request writes it again (one write a minute).
_TOUCH_EVERY = timedelta(seconds=60)
_KEY_NAME = "session"
#: The key of consoles without login sessions (open, or behind the host's ``auth=``).
SHARED_KEY = "shared"


@dataclass(frozen=True, slots=True)
class LoggedIn:
    """A live session: who logged in, and when."""

    operator: str
    created_at: datetime


def _fingerprint(secret: str, token: str | None) -> str:
    return hmac.new(secret.encode(), (token or "").encode(), hashlib.sha256).hexdigest()


def _session_key(session_id: str) -> str:
    return hashlib.sha256(session_id.encode()).hexdigest()


class SessionStore:
    """The signing key and the live sessions, in the app's database."""

    def __init__(self, mf: MailFathom) -> None:
        self.db = mf.store.db
        self.clock = mf.clock

    def _now(self) -> datetime:
        return self.clock.now()

    def secret_for(self, token: str | None, *, name: str = _KEY_NAME) -> str:
        """The cookie-signing key ``name`` for ``token``: the stored one, or a new one if
        there is none or the token changed.

        Replacing the logged-in sessions' key ends every session (the key
        :data:`SHARED_KEY` of consoles without logins is made once and never replaced:
        its fingerprint is of no token). Two consoles starting at once agree: the
        first key is an insert that only one wins, a replacement a compare-and-swap on
        the old key.
        """
        q, now = self.db.queries, self.db.time_param(self._now())
        for _ in range(5):
            with self.db.reading() as cur:
                cur.execute(q["console_secret"], {"name": name})
                row = cur.fetchone()
            if row is not None and hmac.compare_digest(
                str(row["token_fingerprint"]), _fingerprint(str(row["secret"]), token)
            ):
                return str(row["secret"])
            secret = secrets.token_urlsafe(32)
            params = {
                "name": name,
                "secret": secret,
                "fingerprint": _fingerprint(secret, token),
                "now": now,
            }
            with self.db.transaction() as cur:
                if row is None:
                    cur.execute(q["console_secret_create"], params)
                else:
                    cur.execute(q["console_secret_rotate"], {**params, "old_secret": row["secret"]})
                if cur.rowcount == 1:
                    if name == _KEY_NAME:  # the logged-in sessions' key: they end with it
                        cur.execute(q["console_sessions_end_all"], {})
                    return secret
        raise RuntimeError("the console session key kept changing under us")  # pragma: no cover

    def start(self, operator: str) -> str:
        """Begin a session for ``operator``; returns the session id for the cookie."""
        session_id = secrets.token_urlsafe(32)
        now = self._now()
        with self.db.transaction() as cur:
            cur.execute(
                self.db.queries["console_sessions_expire"],
                {
                    "born_after": self.db.time_param(now - ABSOLUTE_LIFETIME),
                    "seen_after": self.db.time_param(now - IDLE_TIMEOUT),
                },
            )
            started = {"id": _session_key(session_id), "operator": operator}
            cur.execute(
                self.db.queries["console_session_start"],
                {**started, "now": self.db.time_param(now)},
            )
        return session_id

    def check(self, session_id: str) -> LoggedIn | None:
        """The live session with this id, seen now; None if it ended, expired or never was."""
        key = _session_key(session_id)
        now = self._now()
        with self.db.reading() as cur:
            cur.execute(self.db.queries["console_session_get"], {"id": key})
            row = cur.fetchone()
        if row is None:
            return None
        created = self.db.time_value(row["created_at"])
        seen = self.db.time_value(row["last_seen_at"])
        assert created is not None and seen is not None
        if now - created >= ABSOLUTE_LIFETIME or now - seen >= IDLE_TIMEOUT:
            self.end(session_id)
            return None
        if now - seen >= _TOUCH_EVERY:
            with self.db.single_write() as cur:
                cur.execute(
                    self.db.queries["console_session_touch"],
                    {"id": key, "now": self.db.time_param(now)},
                )
        return LoggedIn(operator=str(row["operator"]), created_at=created)

    def end(self, session_id: str) -> None:
        """End the session (logout): its cookie, and every copy of it, stops working."""
        with self.db.single_write() as cur:
            cur.execute(self.db.queries["console_session_end"], {"id": _session_key(session_id)})


class SessionCookies:
    """ASGI middleware: the signed session cookie in, ``scope["session"]``, the cookie out.

    The cookie is written only when the session changed, and only on a page for a
    logged-in user (or on any page of an open loopback console) or on ``/login``;
    never on the API, which authenticates each request with the bearer token.
    """

    def __init__(self, app: ASGIApp, *, secret: str, protected: bool, secure: bool = False) -> None:
        self.app = app
        self.signer = itsdangerous.TimestampSigner(secret)
        self.protected = protected
        self.flags = "path=/; httponly; samesite=strict" + ("; secure" if secure else "")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        connection = HTTPConnection(scope)
        had_cookie = COOKIE in connection.cookies
        scope["session"] = self._load(connection.cookies.get(COOKIE, ""))
        before = json.dumps(scope["session"], sort_keys=True)
        path: str = scope["path"]

        async def sender(message: Message) -> None:
            if message["type"] == "http.response.start" and self._may_write(scope, path):
                session: dict[str, Any] = scope["session"]
                headers = MutableHeaders(scope=message)
                if session and json.dumps(session, sort_keys=True) != before:
                    headers.append("set-cookie", f"{COOKIE}={self._dump(session)}; {self.flags}")
                elif not session and had_cookie:
                    headers.append(
                        "set-cookie",
                        f"{COOKIE}=null; {self.flags}; expires=Thu, 01 Jan 1970 00:00:00 GMT",
                    )
            await send(message)

        await self.app(scope, receive, sender)

    def _may_write(self, scope: Scope, path: str) -> bool:
        if path == "/api" or path.startswith("/api/"):
            return False
        return not self.protected or path == "/login" or bool(scope.get(LOGGED_IN))

    def _load(self, cookie: str) -> dict[str, Any]:
        if not cookie:
            return {}
        try:
            data = self.signer.unsign(
                cookie.encode(), max_age=int(ABSOLUTE_LIFETIME.total_seconds())
            )
            loaded = json.loads(b64decode(data))
        except (itsdangerous.BadSignature, ValueError):
            return {}
        return loaded if isinstance(loaded, dict) else {}

    def _dump(self, session: dict[str, Any]) -> str:
        data = b64encode(json.dumps(session).encode())
        return self.signer.sign(data).decode()
