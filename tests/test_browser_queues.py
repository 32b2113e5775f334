"""A queue named like a path, paused in a real headless Chromium: the confirmation names
the queue the operator chose, and that queue (not another) is paused.

Chromium resolves dot segments in a URL's path before it sends it (``/queues/reports/../
mail/pause`` becomes ``/queues/mail/pause``), so the console puts queue names in query
strings and form fields only.
"""

from __future__ import annotations

import shutil
import socket
import threading
import time
from pathlib import Path

import pytest
import uvicorn

from consolekit import register_demo_kinds
from mailfathom import MailFathom
from mailfathom.console import Console
from mailfathom.web import create_app
from test_browser import CHROMIUM, CHROMIUM_ARGS

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def test_pausing_reports_dot_dot_mail_pauses_that_queue_and_not_mail(tmp_path: Path) -> None:
    if not shutil.which(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing: apt-get install -y chromium (.ci/run does)")
    from playwright.sync_api import sync_playwright

    tricky = "reports/../mail"
    mf = MailFathom(f"sqlite:///{tmp_path}/console.db")
    mf.migrate()
    register_demo_kinds(mf)
    mf.enqueue("demo.ok", {}, queue=tricky)
    mf.enqueue("demo.ok", {}, queue="mail")
    port = _free_port()
    server = uvicorn.Server(
        uvicorn.Config(create_app(Console(mf)), host="127.0.0.1", port=port, log_level="warning")
    )
    serving = threading.Thread(target=server.run, daemon=True)
    serving.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert time.monotonic() < deadline and serving.is_alive(), "uvicorn did not start"
        time.sleep(0.02)
    url = f"http://127.0.0.1:{port}"
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page()
            page.set_default_timeout(10_000)
            # from the row's link
            page.goto(url + "/queues")
            row = page.locator("table.queues tr", has=page.locator(f"td a:text-is('{tricky}')"))
            row.locator("a:has-text('Pause…')").click()
            assert page.inner_text("h1") == f"Pause queue {tricky}?"
            page.fill("input[name=reason]", "from the row")
            page.click(f"button:has-text('Confirm: pause queue {tricky}')")
            assert f"Queue {tricky} paused" in page.inner_text(".flash")
            assert {q.queue for q in mf.queues.paused()} == {tricky}
            mf.queues.resume(tricky, actor="test")
            # from the name typed in
            page.goto(url + "/queues")
            page.fill("input[name=queue]", tricky)
            page.click("button:has-text('Pause…')")
            assert page.inner_text("h1") == f"Pause queue {tricky}?"
            page.click(f"button:has-text('Confirm: pause queue {tricky}')")
            assert {q.queue for q in mf.queues.paused()} == {tricky}
            # and resumed from its row
            page.goto(url + "/queues")
            row = page.locator("table.queues tr", has=page.locator(f"td a:text-is('{tricky}')"))
            row.locator("a:has-text('Resume…')").click()
            assert page.inner_text("h1") == f"Resume queue {tricky}?"
            page.click(f"button:has-text('Confirm: resume queue {tricky}')")
            assert mf.queues.paused() == []
            browser.close()
    finally:
        server.should_exit = True
        serving.join(10)
        mf.close()
