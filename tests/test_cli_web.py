"""``mailfathom web`` as a real process: it serves, refuses an unsafe bind, hides passwords."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import quote

import pytest

from consolekit import TOKEN


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _mailfathom(*args: str, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "mailfathom.cli", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _get(url: str, headers: dict[str, str] | None = None) -> tuple[int, str]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=5) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _wait_for(url: str, process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"the console exited: {process.communicate()}")
        try:
            _get(url)
            return
        except OSError:
            time.sleep(0.1)
    raise AssertionError("the console did not start")


@pytest.mark.slow
def test_web_serves_and_never_shows_the_database_password(postgres_schema_url: str) -> None:
    user, _, rest = postgres_schema_url.partition("://")[2].partition("@")
    secret_url = f"postgresql://{user.split(':')[0]}:{quote('s3cret-pw')}@{rest}"
    port = _free_port()
    env = {**os.environ, "MAILFATHOM_DATABASE_URL": secret_url, "MAILFATHOM_WEB_TOKEN": TOKEN}
    migrated = subprocess.run(
        [sys.executable, "-m", "mailfathom.cli", "migrate"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert migrated.returncode == 0, migrated.stderr
    process = _mailfathom("web", "--port", str(port), env=env)
    try:
        url = f"http://127.0.0.1:{port}"
        _wait_for(url + "/login", process)
        assert _get(url + "/api/jobs")[0] == 401
        status, body = _get(url + "/api/jobs/counts", {"Authorization": f"Bearer {TOKEN}"})
        assert status == 200 and '"DeadLettered":' in body
        status, page = _get(url + "/login")
        assert status == 200 and "s3cret" not in page
    finally:
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=20)
    # uvicorn shuts down gracefully, then ends by the signal it was sent
    assert process.returncode in (0, -signal.SIGTERM), err
    assert "Traceback" not in err
    assert f"mailfathom console on http://127.0.0.1:{port}/" in out
    assert "token required" in out
    assert "s3cret" not in out + err and ":***@" in out


def test_web_refuses_a_public_address_without_a_token(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "MAILFATHOM_WEB_TOKEN"}
    env["MAILFATHOM_DATABASE_URL"] = f"sqlite:///{tmp_path}/x.db"
    refused = subprocess.run(
        [sys.executable, "-m", "mailfathom.cli", "web", "--host", "0.0.0.0"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert refused.returncode == 2
    assert "refusing to serve the console on 0.0.0.0" in refused.stderr
    assert "set MAILFATHOM_WEB_TOKEN" in refused.stderr
    short = subprocess.run(
        [sys.executable, "-m", "mailfathom.cli", "web", "--host", "10.0.0.1", "--token", "abc"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert short.returncode == 2 and "secrets.token_urlsafe(32)" in short.stderr
    port = subprocess.run(
        [sys.executable, "-m", "mailfathom.cli", "web", "--port", "70000"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert port.returncode == 2 and "70000" in port.stderr


def test_url_errors_and_banners_never_show_a_password() -> None:
    from mailfathom import ConfigurationError, MailFathom
    from mailfathom.delivery.smtp_url import parse_smtp_url
    from mailfathom.store import redact_url

    for url in (
        "postgresql://alice:Pg%zzSecret9@127.0.0.1/x",
        "postgresql://alice:Secret9/x@127.0.0.1:5432/x",
        "postgresql://alice@127.0.0.1/x?password=Pg%zzSecret9",
    ):
        with pytest.raises(ConfigurationError) as refused:
            MailFathom(url)
        assert "Secret9" not in str(refused.value) and "percent-encode" in str(refused.value)
    for url in ("smtp://alice:Secret9/x@host", "alice:Secret9@host", "smtp://a:Secret9@h:99x"):
        with pytest.raises(ConfigurationError) as refused:
            parse_smtp_url(url)
        assert "Secret9" not in str(refused.value)
    for url in (
        "postgresql://u@h/db?sslmode=require&password=Secret9",
        "postgresql://u:Secret9@h/db?sslpassword=Secret9",
        "postgresql://u:Secret9/x@h/db",
        "alice:Secret9@host/db",
    ):
        assert "Secret9" not in redact_url(url), url
    assert redact_url("sqlite:///x.db") == "sqlite:///x.db"
    assert redact_url("postgresql://u@h/db?password=p&sslmode=require") == (
        "postgresql://u@h/db?password=***&sslmode=require"
    )


def _web_refusal(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "MAILFATHOM_WEB_TOKEN"}
    env["MAILFATHOM_DATABASE_URL"] = f"sqlite:///{tmp_path}/x.db"
    return subprocess.run(
        [sys.executable, "-m", "mailfathom.cli", "web", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_token_on_the_command_line_is_deprecated_and_weak_tokens_are_refused(
    tmp_path: Path,
) -> None:
    weak = _web_refusal(tmp_path, "--token", "a" * 20)
    assert weak.returncode == 2
    assert "--token is deprecated" in weak.stderr and "--token-file" in weak.stderr
    assert 'python -c "import secrets; print(secrets.token_urlsafe(32))"' in weak.stderr
    token_file = tmp_path / "token"
    token_file.write_text(" " * 16 + "\n")
    spaces = _web_refusal(tmp_path, "--token-file", str(token_file))
    assert spaces.returncode == 2 and "deprecated" not in spaces.stderr
    token_file.write_text("aaaaaaaaaaaaaaaa\n")
    same = _web_refusal(tmp_path, "--token-file", str(token_file))
    assert same.returncode == 2 and "different characters" in same.stderr
    missing = _web_refusal(tmp_path, "--token-file", str(tmp_path / "nowhere"))
    assert missing.returncode == 2 and "cannot read the console token" in missing.stderr


@pytest.mark.slow
def test_web_reads_its_token_from_a_file_and_masks_a_password_in_the_query(
    postgres_schema_url: str, tmp_path: Path
) -> None:
    joiner = "&" if "?" in postgres_schema_url else "?"
    secret_url = f"{postgres_schema_url}{joiner}password=s3cret-q"
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    env = {k: v for k, v in os.environ.items() if k != "MAILFATHOM_WEB_TOKEN"}
    env["MAILFATHOM_DATABASE_URL"] = secret_url
    migrated = subprocess.run(
        [sys.executable, "-m", "mailfathom.cli", "migrate"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert migrated.returncode == 0, migrated.stderr
    port = _free_port()
    process = _mailfathom("web", "--port", str(port), "--token-file", str(token_file), env=env)
    try:
        url = f"http://127.0.0.1:{port}"
        _wait_for(url + "/login", process)
        status, _ = _get(url + "/api/jobs/counts", {"Authorization": f"Bearer {TOKEN}"})
        assert status == 200
    finally:
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=20)
    assert "token required" in out and "password=***" in out
    assert "s3cret" not in out + err and "deprecated" not in err
