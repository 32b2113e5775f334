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
