"""mailfathom.web.create_app(mf, auth=...): what auth may return, and mounting under a prefix."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.sessions import SessionMiddleware
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.testclient import TestClient

from consolekit import LOOPBACK_PEER
from mailfathom import ConfigurationError, MailFathom
from mailfathom.console import Console
from mailfathom.web import Access, ConsoleUser, create_app
from mailfathom.web import app as console_app


@pytest.fixture
def mf(tmp_path: Path) -> Iterator[MailFathom]:
    with MailFathom(f"sqlite:///{tmp_path / 'mf.db'}") as app:
        app.migrate()
        yield app


def _mounted(console: object) -> TestClient:
    host = Starlette(routes=[Mount("/admin/queue", app=console)])  # type: ignore[arg-type]
    return TestClient(host, base_url="http://app.example.com")


def test_an_async_auth_and_a_plain_name(mf: MailFathom) -> None:
    async def auth(request: Request) -> str | None:
        return "ops" if request.headers.get("x-ok") else None

    client = _mounted(create_app(mf, auth=auth))
    assert client.get("/admin/queue/api/jobs").status_code == 401
    job = mf.enqueue("k", hold=True)
    done = client.post(f"/admin/queue/api/jobs/{job.id}/release", json={}, headers={"x-ok": "1"})
    assert done.status_code == 200
    assert [(e.action, e.actor) for e in mf.jobs.events(job.id)] == [("release", "api:ops")]


def test_auth_may_answer_with_its_own_response(mf: MailFathom) -> None:
    def auth(request: Request) -> Response:
        return RedirectResponse(f"/login?next={request.url.path}", status_code=303)

    answer = _mounted(create_app(mf, auth=auth)).get("/admin/queue/jobs", follow_redirects=False)
    assert answer.status_code == 303
    assert answer.headers["location"] == "/login?next=/admin/queue/jobs", "auth saw the full path"


def test_auth_sees_the_host_applications_session(mf: MailFathom) -> None:
    def auth(request: Request) -> ConsoleUser | None:
        name = request.session.get("user")
        return ConsoleUser(name, read_only=True) if isinstance(name, str) else None

    async def sign_in(request: Request) -> Response:
        request.session["user"] = "grace"
        return Response("ok")

    host = Starlette(
        routes=[Route("/sign-in", sign_in), Mount("/ops", app=create_app(mf, auth=auth))],
        middleware=[Middleware(SessionMiddleware, secret_key="s" * 32)],
    )
    client = TestClient(host)
    assert client.get("/ops/").status_code == 401
    client.get("/sign-in")
    assert client.get("/ops/").status_code == 200
    assert client.post("/ops/api/jobs", json={"kind": "k"}).status_code == 403


def test_a_wrong_return_from_auth_is_a_clear_error(mf: MailFathom) -> None:
    client = _mounted(create_app(mf, auth=lambda request: 42))  # type: ignore[arg-type,return-value]
    with pytest.raises(ConfigurationError, match="auth= returned int"):
        client.get("/admin/queue/")


def test_auth_and_access_are_alternatives(mf: MailFathom) -> None:
    with pytest.raises(ConfigurationError, match="not both"):
        create_app(mf, auth=lambda request: "x", access=Access.for_bind("127.0.0.1", None))
    with pytest.raises(ConfigurationError, match="non-empty name"):
        ConsoleUser(" ")


def test_the_delegated_guard_refuses_what_no_auth_let_through(mf: MailFathom) -> None:
    bare = console_app.create_app(Console(mf), delegated_auth=True)  # no Authenticated layer
    assert TestClient(bare).get("/").status_code == 401


def test_the_open_console_under_a_prefix(mf: MailFathom) -> None:
    client = TestClient(
        Starlette(routes=[Mount("/ops", app=create_app(mf))]),
        base_url="http://127.0.0.1",
        client=LOOPBACK_PEER,
    )
    page = client.get("/ops/jobs")
    assert page.status_code == 200
    assert 'href="/ops/static/console.css"' in page.text
    assert 'href="/jobs' not in page.text
    assert client.get("/ops/api/jobs").json()["jobs"] == []
