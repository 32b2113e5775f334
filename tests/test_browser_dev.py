"""``mailfathom dev`` end to end, in headless Chromium: press "Send a test email", watch it
go Recorded → TransmissionBegun → Sent, and find it in the Inbox — within seconds."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from test_browser import CHROMIUM, CHROMIUM_ARGS

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def banner(process: subprocess.Popen[str]) -> list[str]:
    """The lines ``mailfathom dev`` prints when it has started (through "Press Ctrl-C")."""
    assert process.stdout is not None
    lines: list[str] = []
    while not lines or not lines[-1].startswith("Press Ctrl-C"):
        line = process.stdout.readline()
        if not line:
            raise AssertionError(f"mailfathom dev stopped: {lines} {process.communicate()}")
        lines.append(line.rstrip("\n"))
    return lines


def log_in(page: Any, lines: list[str]) -> None:
    """Open the one-time login link ``mailfathom dev`` printed, and press its button."""
    (link,) = [line.split()[2] for line in lines if line.strip().startswith("log in")]
    page.goto(link)
    page.click("button:has-text('Log in')")
    page.wait_for_url(link.partition("/login")[0] + "/")


@pytest.fixture
def dev(tmp_path: Path) -> Iterator[tuple[str, list[str]]]:
    """``mailfathom dev`` running in a fresh project folder; its console URL and banner."""
    port, smtp_port = _free_port(), _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAILFATHOM_")}
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mailfathom.cli",
            "dev",
            "--port",
            str(port),
            "--smtp-port",
            str(smtp_port),
        ],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    lines = banner(process)
    deadline = time.monotonic() + 30
    while True:
        try:
            urllib.request.urlopen(url + "/", timeout=2).close()
            break
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                raise AssertionError(
                    f"mailfathom dev did not start: {process.communicate()}"
                ) from None
            time.sleep(0.2)
    yield url, lines
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=30)
    assert f"console   {url}/" in "\n".join([*lines, out])
    assert "Traceback" not in err, err
    assert (tmp_path / "mailfathom.db").exists()  # the default SQLite database, migrated
    assert any((tmp_path / ".mailfathom-dev" / "inbox" / "new").iterdir())


def test_send_a_test_email_and_see_it_sent_and_captured(dev: tuple[str, list[str]]) -> None:
    from playwright.sync_api import sync_playwright

    url, lines = dev
    shots = Path(os.environ.get("MAILFATHOM_SCREENSHOTS") or Path(url.replace(":", "_")).name)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page: Any = browser.new_page(viewport={"width": 1280, "height": 900})
        page.set_default_timeout(10_000)
        log_in(page, lines)
        page.goto(url + "/outbox")
        started = time.monotonic()
        page.click("button:has-text('Send a test email')")
        assert "Recorded test email" in page.inner_text(".flash")
        while "Sent" not in page.inner_text("h1") and time.monotonic() - started < 10:
            page.wait_for_timeout(200)
            page.reload()
        assert "Sent" in page.inner_text("h1"), page.inner_text("main")
        history = page.inner_text("table:below(h2:has-text('Stage history'))")
        stages = [line.split("\t")[1] for line in history.splitlines()[1:] if "\t" in line]
        assert stages[:1] == ["Recorded"] and "TransmissionBegun" in stages
        assert stages[-1] == "Sent"
        seconds = time.monotonic() - started
        if os.environ.get("MAILFATHOM_SCREENSHOTS"):
            page.screenshot(path=str(shots / "dev_email.png"), full_page=True)
        page.goto(url + "/inbox")
        assert "mailfathom test email" in page.inner_text("table")
        if os.environ.get("MAILFATHOM_SCREENSHOTS"):
            page.screenshot(path=str(shots / "inbox.png"), full_page=True)
        page.click("table a:has-text('mailfathom test email')")
        assert "developer@example.com" in page.inner_text("dl.fields")
        frame = page.frame_locator("iframe.preview")
        assert frame.locator("h1").inner_text() == "It works."
        if os.environ.get("MAILFATHOM_SCREENSHOTS"):
            height = int(page.evaluate("document.documentElement.scrollHeight"))
            page.set_viewport_size({"width": 1280, "height": height})
            page.wait_for_timeout(300)
            page.screenshot(path=str(shots / "inbox_message.png"))
        browser.close()
    assert seconds < 10
