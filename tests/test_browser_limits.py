"""The limits pages in a real headless Chromium, while a real worker runs limited jobs.

A uvicorn server on a loopback port serves a token-protected console on an SQLite
file; a worker thread runs handlers that hold until the test lets them go, so the
limits are in use and jobs wait on them as the operator looks. Screenshots go to
``$MAILFATHOM_SCREENSHOTS`` when set (``make screenshots`` → docs/screenshots/).
"""

from __future__ import annotations

import os
import shutil
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from consolekit import TOKEN
from mailfathom import MailFathom
from mailfathom.console import Console
from mailfathom.jobs.context import JobContext
from mailfathom.web import Access, create_app
from test_browser import CHROMIUM, CHROMIUM_ARGS

pytestmark = pytest.mark.slow

#: How long a test waits for a signal before failing.
WAIT = 10.0
#: How long a handler holds at most (the test lets it go long before; a failed attempt
#: would be retried and count twice).
HOLD = 120.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _shot(page: Any, shots: Path, name: str) -> None:
    height = int(page.evaluate("document.documentElement.scrollHeight"))
    page.set_viewport_size({"width": 1280, "height": min(max(height, 860), 4000)})
    page.wait_for_timeout(300)
    page.screenshot(path=str(shots / f"{name}.png"))
    page.set_viewport_size({"width": 1280, "height": 860})


def test_the_operator_sees_each_limit_its_keys_and_who_waits(tmp_path: Path) -> None:
    if not shutil.which(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing: apt-get install -y chromium (.ci/run does)")
    from playwright.sync_api import sync_playwright

    mf = MailFathom(f"sqlite:///{tmp_path}/console.db")
    mf.migrate()
    started = threading.Semaphore(0)
    gate = threading.Event()

    def hold(ctx: JobContext, **payload: Any) -> None:
        started.release()
        assert gate.wait(HOLD), "the test never let the handler go"

    mf.job(
        "sync.account",
        max_running=4,
        rate="100/min",
        limit_key=lambda payload: payload["account"],
        max_running_per_key=1,
    )(hold)
    mf.job(
        "mail.send",
        queue="mail",
        limit_key=lambda payload: payload["to"].rpartition("@")[2],
        max_running_per_key=5,
        key_limits={"gmail.com": {"max_running": 2, "rate": "20/min"}},
    )(hold)
    mf.limit_queue("mail", rate="600/min")
    accounts = ["acme", "acme", "acme", "globex", "globex", "initech"]
    sync_jobs = mf.enqueue_many("sync.account", [{"account": a} for a in accounts])
    rcpts = ["a@gmail.com", "b@gmail.com", "c@gmail.com", "d@gmail.com", "e@example.org"]
    mail_jobs = mf.enqueue_many("mail.send", [{"to": r} for r in rcpts])
    app = create_app(Console(mf), access=Access.for_bind("127.0.0.1", TOKEN))
    port = _free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)
    )
    serving = threading.Thread(target=server.run, daemon=True)
    serving.start()
    worker = mf.worker(concurrency=10, lease=5.0)  # writes the limits when it starts
    working = threading.Thread(target=lambda: worker.run(burst=True), daemon=True)
    working.start()
    shots = Path(os.environ.get("MAILFATHOM_SCREENSHOTS") or tmp_path / "screenshots")
    shots.mkdir(parents=True, exist_ok=True)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(6):  # acme, globex, initech; two to gmail.com, one to example.org
            assert started.acquire(timeout=WAIT), "the limited jobs did not start"
        deadline = time.monotonic() + WAIT
        while not server.started:
            assert time.monotonic() < deadline and serving.is_alive(), "uvicorn did not start"
            time.sleep(0.02)
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_context(viewport={"width": 1280, "height": 860}).new_page()
            page.set_default_timeout(10_000)
            page.goto(url + "/login")
            page.fill("input[name=token]", TOKEN)
            page.fill("input[name=name]", "alice")
            page.click("button:has-text('Log in')")
            page.wait_for_url(url + "/")
            page.click("header nav a:has-text('Limits')")
            page.wait_for_url(url + "/limits")
            sections = page.locator("section.limit")
            assert [sections.nth(i).get_attribute("data-limit") for i in range(3)] == [
                "kind:mail.send",
                "kind:sync.account",
                "queue:mail",
            ]
            mail = page.locator("section[data-limit='kind:mail.send']")
            assert "1 key blocked" in mail.locator("h2").inner_text()
            gmail = mail.locator("tr[data-key='gmail.com']").inner_text().split("\t")
            assert gmail == ["gmail.com", "2", "20/min", "2", "2", "blocked"]
            org = mail.locator("tr[data-key='example.org']").inner_text().split("\t")
            assert org == ["example.org", "5", "—", "1", "0", "room"]
            sync = page.locator("section[data-limit='kind:sync.account']")
            whole = sync.locator("tr.whole").inner_text().split("\t")
            assert whole == ["whole kind", "4", "100/min", "3", "3", "room"]
            waiting = sync.locator("p.waiting a[href^='/jobs/']")
            expected = [sync_jobs[i].id for i in (1, 2, 4)]  # acme twice, globex once
            assert [waiting.nth(i).inner_text() for i in range(waiting.count())] == [
                str(job_id) for job_id in expected
            ]
            _shot(page, shots, "limits")

            waiting.first.click()
            page.wait_for_url(url + f"/jobs/{expected[0]}")
            assert (
                page.inner_text("dd.holding")
                == "waiting on kind:sync.account key acme: 1 of 1 running"
            )
            _shot(page, shots, "job_waiting")
            page.click("dd.holding a")
            page.wait_for_url(url + "/limits/kind%3Async.account")
            assert page.inner_text("h1") == "kind:sync.account"
            assert page.locator("table.limit-keys tbody tr").count() == 3
            _shot(page, shots, "limit")

            page.goto(url + "/limits/kind:mail.send")
            mail_waiting = page.locator("p.waiting a[href^='/jobs/']")
            assert [mail_waiting.nth(i).inner_text() for i in range(mail_waiting.count())] == [
                str(mail_jobs[2].id),
                str(mail_jobs[3].id),
            ]

            gate.set()  # the handlers finish; the waiting jobs run; the burst ends
            working.join(WAIT * 3)
            assert not working.is_alive(), "the worker did not drain the limited jobs"
            page.goto(url + "/limits")
            for name in ("kind:mail.send", "kind:sync.account"):
                section = page.locator(f"section[data-limit='{name}']")
                assert section.locator("p.waiting").inner_text() == "No due job waits on it."
                assert section.locator("tr.whole td").nth(2).inner_text() == "0"
            browser.close()
    finally:
        gate.set()
        worker.stop()
        working.join(WAIT)
        server.should_exit = True
        serving.join(WAIT)
        mf.close()
