"""``mailfathom web`` as a real process: it serves, refuses an unsafe bind, hides passwords."""

from __future__ import annotations

import http.cookiejar
import json
import os
import re
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import pytest

from consolekit import TOKEN
from mailfathom import MailFathom


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
    token_file.chmod(0o600)
    spaces = _web_refusal(tmp_path, "--token-file", str(token_file))
    assert spaces.returncode == 2 and "deprecated" not in spaces.stderr
    token_file.write_text("aaaaaaaaaaaaaaaa\n")
    same = _web_refusal(tmp_path, "--token-file", str(token_file))
    assert same.returncode == 2 and "too short (16 characters" in same.stderr
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
    token_file.chmod(0o600)
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


class _Output:
    """A running console's standard output, line by line, as it comes."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.lines: list[str] = []
        self._changed = threading.Condition()
        self._process = process
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self._process.stdout is not None
        for line in self._process.stdout:
            with self._changed:
                self.lines.append(line.rstrip("\n"))
                self._changed.notify_all()
        with self._changed:
            self.lines.append("")  # the end
            self._changed.notify_all()

    def line(self, starting: str, timeout: float = 60) -> str:
        """The first line that starts with ``starting`` (after stripping), once printed."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                found = [ln.strip() for ln in self.lines if ln.strip().startswith(starting)]
                if found:
                    return found[0]
                left = deadline - time.monotonic()
                if left <= 0 or self._process.poll() is not None:
                    raise AssertionError(f"no line {starting!r} in {self.lines}")
                self._changed.wait(min(left, 0.5))

    def text(self) -> str:
        """All of it, once the process has ended."""
        self._thread.join(30)
        assert self._process.stdout is not None
        self._process.stdout.close()
        return "\n".join(self.lines)


_NOBODY = ("runuser", "-u", "nobody", "--")
_CLI = (sys.executable, "-m", "mailfathom.cli")
_OTHER_USER_CLIENT = """
import json, sys, urllib.error, urllib.request
base, token_file = sys.argv[1], sys.argv[2]
def status(path, body=None):
    request = urllib.request.Request(base + path, data=body, method="POST" if body else "GET")
    if body:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, answer.url
    except urllib.error.HTTPError as exc:
        return exc.code, exc.url
try:
    open(token_file).read()
    read = "read it"
except OSError as exc:
    read = type(exc).__name__
job = json.dumps({"kind": "demo.ok", "payload": {}}).encode()
print(json.dumps({
    "api": status("/api/jobs"), "create": status("/api/jobs", job),
    "page": status("/jobs"), "metrics": status("/metrics"), "token_file": read,
}))
"""


def _as_nobody(base: str, token_file: Path) -> dict[str, Any]:
    """What another user of this machine (``nobody``) gets from the console."""
    done = subprocess.run(
        [*_NOBODY, "/usr/bin/python3", "-c", _OTHER_USER_CLIENT, base, str(token_file)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    found: dict[str, Any] = json.loads(done.stdout)
    return found


def _log_in_with(link: str) -> tuple[int, str]:
    """Open a one-time login link as a browser does and press its button: the status of
    the page it lands on, and that page."""
    jar = http.cookiejar.CookieJar()
    browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    with browser.open(link, timeout=10) as shown:
        form = shown.read().decode()
    fields = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', form))
    assert set(fields) == {"csrf_token", "next", "code"}, form
    posted = urllib.request.Request(
        link.partition("?")[0], data=urlencode({**fields, "name": "ada"}).encode()
    )
    try:
        with browser.open(posted, timeout=10) as landed:
            return landed.status, landed.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


@pytest.mark.slow
def test_web_without_a_token_makes_a_private_one_and_other_users_are_refused(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'web.db'}"
    with MailFathom(url) as app:
        app.migrate()
    state = tmp_path / "state"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAILFATHOM_")}
    env.update(MAILFATHOM_DATABASE_URL=url, XDG_STATE_HOME=str(state))
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    process = subprocess.Popen(
        [sys.executable, "-m", "mailfathom.cli", "web", "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    output = _Output(process)
    token_file = state / "mailfathom" / "console-token"
    try:
        link = output.line("log in").split()[2]
        _wait_for(base + "/healthz", process)
        assert link.startswith(f"{base}/login?code=")
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        assert stat.S_IMODE(token_file.parent.stat().st_mode) == 0o700
        token = token_file.read_text().strip()
        seen = _as_nobody(base, token_file)
        assert seen["api"][0] == 401 and seen["create"][0] == 401 and seen["metrics"][0] == 401
        assert seen["page"] == [200, f"{base}/login?next=%2Fjobs"]  # the login form, no more
        assert seen["token_file"] == "PermissionError"
        assert _get(base + "/api/jobs/counts", {"Authorization": f"Bearer {token}"})[0] == 200
        status, page = _log_in_with(link)
        assert status == 200 and "Log out" in page, page
        again, refused = _log_in_with(link)  # a link works once
        assert again == 401 and "used already or has expired" in refused
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(30)
    out = output.text()
    assert "token required" in out and f"token     {token_file} (made now" in out
    assert token not in out
    with MailFathom(url) as app:
        assert sum(app.jobs.counts().values()) == 0  # nobody created a job


@pytest.mark.slow
def test_dev_needs_its_token_too(tmp_path: Path) -> None:
    port, smtp_port = _free_port(), _free_port()
    base = f"http://127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAILFATHOM_")}
    process = subprocess.Popen(
        [*_CLI, "dev", "--port", str(port), "--smtp-port", str(smtp_port)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    output = _Output(process)
    token_file = tmp_path / ".mailfathom-dev" / "console-token"
    try:
        link = output.line("log in").split()[2]
        _wait_for(base + "/healthz", process)
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        seen = _as_nobody(base, token_file)
        assert seen["api"][0] == 401 and seen["create"][0] == 401
        assert seen["page"] == [200, f"{base}/login?next=%2Fjobs"]
        assert seen["token_file"] == "PermissionError"
        token = token_file.read_text().strip()
        assert _get(base + "/api/jobs", {"Authorization": f"Bearer {token}"})[0] == 200
        status, page = _log_in_with(link)
        assert status == 200 and "Log out" in page
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(30)
    assert token not in output.text()


@pytest.mark.parametrize(
    "weak",
    [
        "changeme-changeme-changeme-changeme",
        "Password1!Password1!Password1!",
        "1234567890123456789012345678901234567890",
        "9876543210" * 4,
        "1" * 40,
    ],
)
def test_web_refuses_a_weak_token_saying_why(tmp_path: Path, weak: str) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(weak + "\n")
    token_file.chmod(0o600)
    refused = _web_refusal(tmp_path, "--token-file", str(token_file))
    assert refused.returncode == 2
    assert "the console token is easy to guess (it is made of" in refused.stderr
    assert "at least 10^20 are needed" in refused.stderr
    assert 'python -c "import secrets; print(secrets.token_urlsafe(32))"' in refused.stderr
    assert weak not in refused.stderr + refused.stdout


@pytest.mark.parametrize(("mode", "refusal"), [(0o644, "read or changed"), (0o620, "changed")])
def test_web_refuses_a_token_file_other_users_can_read_or_change(
    tmp_path: Path, mode: int, refusal: str
) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(mode)
    refused = _web_refusal(tmp_path, "--token-file", str(token_file))
    assert refused.returncode == 2
    assert f"can be {refusal} by other users (mode {mode:04o})" in refused.stderr
    assert f"chmod 600 {token_file}" in refused.stderr and TOKEN not in refused.stderr
