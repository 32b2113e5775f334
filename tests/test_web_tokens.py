"""The console token: strength, private token files, one-time login links, and the cookie
key that every process of a console shares."""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path
from typing import Any

import pytest
from starlette.requests import Request
from starlette.testclient import TestClient

from consolekit import LOOPBACK_PEER, TOKEN, csrf_of, make_client, register_demo_kinds
from mailfathom import ConfigurationError, FakeClock, JobState, MailFathom
from mailfathom.web import ConsoleUser, create_app
from mailfathom.web.login_links import LINK_LIFETIME, login_link
from mailfathom.web.tokens import check_token, own_token_file, read_token_file

MAKE_TOKEN = 'python -c "import secrets; print(secrets.token_urlsafe(32))"'


@pytest.mark.parametrize(
    ("weak", "pattern"),
    [
        ("changeme-changeme-changeme-changeme", "a repeat"),
        ("Password1!Password1!Password1!", "a repeat"),
        ("1234567890" * 4, "a "),
        ("9876543210" * 4, "a "),
        ("0" * 40, "a repeat"),
        ("qwertyuiopasdfghjklzxcvbnm1234567890", "a word or common password"),
        ("2024-01-01-2024-01-01-2024-01-01-2024", "a "),
    ],
)
def test_patterned_tokens_are_refused_by_a_real_estimate(weak: str, pattern: str) -> None:
    with pytest.raises(ConfigurationError) as refused:
        check_token(weak)
    message = str(refused.value)
    assert f"the console token is easy to guess (it is made of {pattern}" in message
    assert "at least 10^20 are needed" in message and MAKE_TOKEN in message
    assert weak not in message


def test_generated_tokens_pass() -> None:
    for _ in range(200):
        check_token(secrets.token_urlsafe(32))
    for _ in range(50):
        check_token(secrets.token_hex(16))  # 128 random bits in hex
    check_token(TOKEN)


def test_a_token_file_readable_by_its_group_is_used_with_a_warning(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o640)
    found = read_token_file(token_file)
    assert found.token == TOKEN
    assert found.warning is not None and "readable by the group" in found.warning
    assert f"chmod 600 {token_file}" in found.warning
    token_file.chmod(0o600)
    assert read_token_file(token_file).warning is None
    token_file.chmod(0o604)
    with pytest.raises(ConfigurationError, match=r"can be read or changed by other users"):
        read_token_file(token_file)


def test_the_token_made_for_you_is_private_and_kept(tmp_path: Path) -> None:
    path = tmp_path / "state" / "mailfathom" / "console-token"
    made = own_token_file(path)
    assert made.created and made.warning is None
    check_token(made.token)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    kept = own_token_file(path)
    assert (kept.token, kept.created) == (made.token, False)
    path.chmod(0o644)  # someone loosened it: refused, and the token is not shown
    with pytest.raises(ConfigurationError) as refused:
        own_token_file(path)
    assert "chmod 600" in str(refused.value) and made.token not in str(refused.value)


def test_the_token_is_never_written_through_a_link(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    path = tmp_path / "console-token"
    os.symlink(target, path)
    with pytest.raises(ConfigurationError):
        own_token_file(path)
    assert not target.exists()


def _press(client: Any, link: str) -> Any:
    shown = client.get(link.removeprefix("http://127.0.0.1:8025"))
    assert shown.status_code == 200 and "one-time login link" in shown.text
    code = link.partition("code=")[2]
    return client.post(
        "/login",
        data={"csrf_token": csrf_of(shown.text), "code": code, "next": "/", "name": "ada"},
        follow_redirects=False,
    )


def test_a_login_link_works_once_within_its_lifetime(mf: MailFathom, clock: FakeClock) -> None:
    client = make_client(mf, token=TOKEN)
    app = client.app
    link = login_link(app, "http://127.0.0.1:8025/")
    assert link.startswith("http://127.0.0.1:8025/login?code=")
    assert _press(client, link).status_code == 303
    assert client.get("/jobs", follow_redirects=False).status_code == 200
    other = TestClient(app, base_url="http://127.0.0.1:8025", client=LOOPBACK_PEER)  # no cookie
    spent = _press(other, link)
    assert spent.status_code == 401 and "used already or has expired" in spent.text
    assert other.get("/jobs", follow_redirects=False).status_code == 303
    late = login_link(app, "http://127.0.0.1:8025")
    clock.advance(LINK_LIFETIME)
    assert _press(other, late).status_code == 401
    assert _press(other, late.replace("code=", "code=x")).status_code == 401


def _two_processes(mf: MailFathom, **options: Any) -> tuple[Any, Any]:
    """Two consoles on one database, as two processes of a host application build them."""
    first, second = (
        TestClient(create_app(mf, **options), base_url="http://127.0.0.1", client=LOOPBACK_PEER)
        for _ in range(2)
    )
    return first, second


def _operator(request: Request) -> ConsoleUser:
    return ConsoleUser("ada")


@pytest.mark.parametrize("options", [{}, {"auth": _operator}], ids=["open", "auth"])
def test_a_form_from_one_process_is_accepted_by_another(
    mf: MailFathom, options: dict[str, Any]
) -> None:
    register_demo_kinds(mf)
    first, second = _two_processes(mf, **options)
    form = first.get("/jobs/new").text
    second.cookies = first.cookies
    created = second.post(
        "/jobs/new",
        data={"csrf_token": csrf_of(form), "kind": "demo.ok", "payload": "{}"},
        follow_redirects=False,
    )
    assert created.status_code == 303, created.text
    assert mf.jobs.counts().get(JobState.PENDING) == 1
