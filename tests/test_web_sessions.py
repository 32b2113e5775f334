"""Console sessions: a random key kept in the database, server-side sessions, back-off, refusal log.

Every test runs the real app (Starlette's TestClient over ``create_app``) on each store,
with the fake clock for lifetimes and back-off.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import secrets
from base64 import b64encode
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import itsdangerous
import pytest

from consolekit import TOKEN, csrf_of, dead_letters, make_client, register_demo_kinds
from mailfathom import ConfigurationError, FakeClock, JobState, MailFathom
from mailfathom.web import Access
from mailfathom.web.sessions import SessionStore
from raw_database import raw_reading

AUTH = {"Authorization": f"Bearer {TOKEN}"}
SECURITY_LOG = "mailfathom.web.security"


def _login(client: Any, name: str = "alice") -> None:
    form = client.get("/login").text
    done = client.post(
        "/login",
        data={"csrf_token": csrf_of(form), "token": TOKEN, "name": name, "next": "/"},
        follow_redirects=False,
    )
    assert done.status_code == 303, done.text


def _events(caplog: pytest.LogCaptureFixture, event: str) -> list[logging.LogRecord]:
    return [
        r
        for r in caplog.records
        if r.name == SECURITY_LOG and getattr(r, "security_event", None) == event
    ]


# -- finding 1: the cookie is no token oracle, and no cookie where none belongs -------------


def test_a_cookie_signed_with_a_key_derived_from_the_token_is_worthless(mf: MailFathom) -> None:
    client = make_client(mf, token=TOKEN)
    derived = hmac.new(TOKEN.encode(), b"mailfathom console session", hashlib.sha256).hexdigest()
    for key in (derived, TOKEN):
        signer = itsdangerous.TimestampSigner(key)
        forged = signer.sign(b64encode(json.dumps({"auth": True}).encode())).decode()
        client.cookies.set("mailfathom_session", forged)
        answer = client.get("/jobs", follow_redirects=False)
        assert answer.status_code == 303 and answer.headers["location"].startswith("/login")


def test_the_signing_key_is_random_kept_in_the_database_and_rotated_with_the_token(
    mf: MailFathom,
) -> None:
    first = make_client(mf, token=TOKEN)
    _login(first)
    assert first.get("/jobs", follow_redirects=False).status_code == 200
    # Another console process on the same database (same token) accepts the cookie.
    second = make_client(mf, token=TOKEN)
    second.cookies = first.cookies
    assert second.get("/jobs", follow_redirects=False).status_code == 200
    with raw_reading(mf) as cur:
        cur.execute("SELECT secret FROM mf_console_secrets")
        (row,) = cur.fetchall()
    derived = hmac.new(TOKEN.encode(), b"mailfathom console session", hashlib.sha256).hexdigest()
    assert row["secret"] not in (derived, TOKEN) and len(row["secret"]) >= 32
    # A console started with a new token replaces the key: every old session ends.
    rotated = make_client(mf, token=secrets.token_urlsafe(32))
    rotated.cookies = first.cookies
    assert rotated.get("/jobs", follow_redirects=False).status_code == 303
    with raw_reading(mf) as cur:  # ended on the server, not only unverifiable
        cur.execute("SELECT count(*) AS n FROM mf_console_sessions")
        assert cur.fetchone()["n"] == 0
    back = make_client(mf, token=TOKEN)
    back.cookies = first.cookies
    assert back.get("/jobs", follow_redirects=False).status_code == 303


class _ActsAfterTheFirstRead:
    """The app's database, calling ``then`` once just after the first read ends: another
    console acting between this one's read of the key and its write."""

    def __init__(self, db: Any, then: Callable[[], None]) -> None:
        self._db = db
        self._then: Callable[[], None] | None = then

    def __getattr__(self, name: str) -> Any:
        return getattr(self._db, name)

    @contextmanager
    def reading(self) -> Iterator[Any]:
        with self._db.reading() as cur:
            yield cur
        then, self._then = self._then, None
        if then is not None:
            then()


def test_two_consoles_started_at_once_with_a_new_token_agree_on_one_key(mf: MailFathom) -> None:
    """Both read the old key; the second replaces it first. The first's replacement is a
    compare-and-swap on the key it read, so it fails, and the first takes the second's
    key instead of overwriting it (which would leave the two signing with different keys
    and end the session just begun under the second's)."""
    SessionStore(mf).secret_for(TOKEN)  # the key of the token both consoles replace
    new_token = secrets.token_urlsafe(32)
    first, second = SessionStore(mf), SessionStore(mf)
    seen: dict[str, str] = {}

    def second_console_starts() -> None:
        seen["second"] = second.secret_for(new_token)
        seen["session"] = second.start("bob")

    first.db = _ActsAfterTheFirstRead(mf.store.db, second_console_starts)
    seen["first"] = first.secret_for(new_token)
    with raw_reading(mf) as cur:
        cur.execute("SELECT secret FROM mf_console_secrets")
        (row,) = cur.fetchall()
    assert seen["first"] == seen["second"] == row["secret"]
    assert second.check(seen["session"]) is not None  # not ended by a second rotation


def test_no_cookie_on_api_or_unauthenticated_answers_except_login(mf: MailFathom) -> None:
    register_demo_kinds(mf)
    client = make_client(mf, token=TOKEN)
    assert "set-cookie" not in client.get("/api/jobs").headers  # 401
    assert "set-cookie" not in client.get("/api/jobs", headers=AUTH).headers  # 200
    posted = client.post("/api/jobs", json={"kind": "demo.ok"}, headers=AUTH)
    assert posted.status_code == 201 and "set-cookie" not in posted.headers
    away = client.get("/jobs", follow_redirects=False)
    assert away.status_code == 303 and "set-cookie" not in away.headers
    assert "set-cookie" not in client.post("/jobs/1/drop", data={}).headers  # 401
    assert "mailfathom_session=" in client.get("/login").headers["set-cookie"]


# -- finding 3: logout ends the session everywhere; absolute lifetime; idle timeout ---------


def test_a_cookie_saved_before_logout_no_longer_works(mf: MailFathom) -> None:
    register_demo_kinds(mf)
    (job_id,) = dead_letters(mf, 1)
    client = make_client(mf, token=TOKEN)
    _login(client)
    saved = dict(client.cookies)
    page = client.get(f"/jobs/{job_id}/requeue").text
    client.post("/logout", data={"csrf_token": csrf_of(page)})
    thief = make_client(mf, token=TOKEN)
    thief.cookies.update(saved)
    assert thief.get("/jobs", follow_redirects=False).status_code == 303
    refused = thief.post(f"/jobs/{job_id}/requeue", data={"csrf_token": csrf_of(page)})
    assert refused.status_code == 401
    assert mf.jobs.get(job_id).state is JobState.DEAD_LETTERED and mf.jobs.events(job_id) == []


def test_logging_in_again_ends_the_session_it_replaces(mf: MailFathom) -> None:
    client = make_client(mf, token=TOKEN)
    _login(client, "first")
    saved = dict(client.cookies)
    _login(client, "second")
    assert client.get("/jobs", follow_redirects=False).status_code == 200
    old = make_client(mf, token=TOKEN)
    old.cookies.update(saved)
    assert old.get("/jobs", follow_redirects=False).status_code == 303


def test_a_busy_session_still_ends_after_its_absolute_lifetime(
    mf: MailFathom, clock: FakeClock
) -> None:
    client = make_client(mf, token=TOKEN)
    _login(client)
    for _ in range(12 * 3 - 1):  # a request every 20 minutes for 11 h 40 min
        clock.advance(timedelta(minutes=20))
        assert client.get("/jobs", follow_redirects=False).status_code == 200
        page = client.get("/").text  # a POST must not extend the lifetime either
        client.post("/jobs/bulk", data={"csrf_token": csrf_of(page), "action": "x"})
    clock.advance(timedelta(minutes=20))
    assert client.get("/jobs", follow_redirects=False).status_code == 303


def test_an_idle_session_ends(mf: MailFathom, clock: FakeClock) -> None:
    client = make_client(mf, token=TOKEN)
    _login(client)
    clock.advance(timedelta(minutes=29))
    assert client.get("/jobs", follow_redirects=False).status_code == 200
    clock.advance(timedelta(minutes=29))  # seen 29 minutes ago: still alive
    assert client.get("/jobs", follow_redirects=False).status_code == 200
    clock.advance(timedelta(minutes=30))
    assert client.get("/jobs", follow_redirects=False).status_code == 303


# -- finding 4: back-off per client address, and a log line for each refusal --------------


def test_wrong_bearer_tokens_back_off_and_are_logged(
    mf: MailFathom, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, SECURITY_LOG)
    client = make_client(mf, token=TOKEN)
    for _ in range(5):
        wrong = client.get("/api/jobs", headers={"Authorization": "Bearer guess"})
        assert wrong.status_code == 401
    held = client.get("/api/jobs", headers={"Authorization": "Bearer guess"})  # too soon
    assert held.status_code == 429 and held.headers["retry-after"] == "1"
    assert held.json()["error"]["type"] == "TooManyRequests"
    refused = _events(caplog, "bad_token")
    assert len(refused) == 5 and all(r.client == "127.0.0.1" for r in refused)  # type: ignore[attr-defined]
    assert _events(caplog, "throttled")[0].path == "/api/jobs"  # type: ignore[attr-defined]
    clock.advance(timedelta(seconds=1))
    assert client.get("/api/jobs", headers={"Authorization": "Bearer guess"}).status_code == 401
    again = client.get("/api/jobs", headers={"Authorization": "Bearer x"})
    assert again.status_code == 429 and again.headers["retry-after"] == "2"  # doubled
    clock.advance(timedelta(seconds=2))
    assert client.get("/api/jobs", headers=AUTH).status_code == 200
    # Success forgets the failures: five more are free again.
    for _ in range(5):
        assert client.get("/api/jobs", headers={"Authorization": "Bearer x"}).status_code == 401
    assert client.get("/api/jobs", headers={"Authorization": "Bearer x"}).status_code == 429


def test_the_right_token_is_never_locked_out_by_anothers_guesses(
    mf: MailFathom, clock: FakeClock
) -> None:
    """A guesser at the owner's address (a shared proxy, the same machine) keeps it
    blocked with one guess per block; the right token still gets in at once, through
    the API, /metrics and the login form alike."""
    client = make_client(mf, token=TOKEN)
    form = client.get("/login").text

    def guess() -> int:
        status: int = client.get("/api/jobs", headers={"Authorization": "Bearer guess"}).status_code
        return status

    assert [guess() for _ in range(6)] == [401] * 5 + [429]
    for _ in range(12):  # one guess as each block ends: the address stays closed
        wait = client.get("/metrics", headers={"Authorization": "Bearer guess"})
        assert wait.status_code == 429
        clock.advance(timedelta(seconds=int(wait.headers["retry-after"])))
        assert guess() == 401
        assert (
            client.post("/login", data={"csrf_token": csrf_of(form), "token": "guess"}).status_code
            == 429
        )
    assert client.get("/api/jobs", headers=AUTH).status_code == 200
    assert [guess() for _ in range(6)] == [401] * 5 + [429]
    assert client.get("/metrics", headers=AUTH).status_code == 200
    assert [guess() for _ in range(6)] == [401] * 5 + [429]
    logged_in = client.post(
        "/login",
        data={"csrf_token": csrf_of(form), "token": TOKEN, "next": "/jobs"},
        follow_redirects=False,
    )
    assert logged_in.status_code == 303 and logged_in.headers["location"] == "/jobs"
    assert client.get("/jobs", follow_redirects=False).status_code == 200


def test_wrong_logins_back_off_and_are_logged(
    mf: MailFathom, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, SECURITY_LOG)
    client = make_client(mf, token=TOKEN)
    form = client.get("/login").text
    for _ in range(5):
        wrong = client.post("/login", data={"csrf_token": csrf_of(form), "token": "guess"})
        assert wrong.status_code == 401
    held = client.post(
        "/login", data={"csrf_token": csrf_of(form), "token": "guess"}, follow_redirects=False
    )
    assert held.status_code == 429 and held.headers["retry-after"] == "1"
    assert "Too many failed logins" in held.text
    assert len(_events(caplog, "login_failed")) == 5
    _login(client)  # the right token, even now


def test_csrf_origin_and_host_refusals_are_logged(
    mf: MailFathom, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, SECURITY_LOG)
    client = make_client(mf)  # an open loopback console
    assert client.post("/jobs/bulk", data={"action": "drop"}).status_code == 403
    (csrf,) = _events(caplog, "csrf")
    assert csrf.path == "/jobs/bulk" and csrf.method == "POST"  # type: ignore[attr-defined]
    rebound = client.get("/jobs", headers={"host": "evil.example:8025"})
    assert rebound.status_code == 421
    assert _events(caplog, "host")[0].host == "evil.example:8025"  # type: ignore[attr-defined]
    other = client.post("/jobs/bulk", data={}, headers={"origin": "https://evil.example"})
    assert other.status_code == 403 and _events(caplog, "origin")


# -- finding 5: weak tokens are refused at start, saying how to make one ------------------


@pytest.mark.parametrize(
    "weak",
    [
        "aaaaaaaaaaaaaaaa",
        " " * 16,
        "a" * 64,
        "abababababababababababababababab",
        "password12345678",
        "correct horse battery staple now",
        "short",
    ],
)
def test_weak_tokens_are_refused_with_how_to_make_one(weak: str) -> None:
    with pytest.raises(ConfigurationError) as refused:
        Access.for_bind("127.0.0.1", weak)
    assert 'python -c "import secrets; print(secrets.token_urlsafe(32))"' in str(refused.value)


def test_random_tokens_are_accepted() -> None:
    for token in (secrets.token_urlsafe(32), secrets.token_hex(16), TOKEN):
        assert Access.for_bind("10.1.2.3", token).protected


def test_an_open_console_on_the_same_database_ends_no_token_sessions(mf: MailFathom) -> None:
    """``mailfathom dev`` or a console mounted behind ``auth=`` beside a token console:
    starting it leaves the token console's key and logged-in sessions alone."""
    first = make_client(mf, token=TOKEN)
    _login(first)
    make_client(mf, token=None)  # an open loopback console starts on the same database
    again = make_client(mf, token=TOKEN)
    again.cookies = first.cookies
    assert again.get("/jobs", follow_redirects=False).status_code == 200
