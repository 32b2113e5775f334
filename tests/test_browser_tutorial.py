"""A newcomer follows the tutorial alone, in headless Chromium: from the site's home page
to a job seen in the console and a delivered email in its inbox.

The site is built (``mkdocs build --strict``) and served over HTTP; the test clicks from
the home page to the first tutorial, copies the code blocks the page *shows* (not the
Markdown source: what the reader sees is what runs), runs them with the snippet rules
(tests/docs_snippets.py), starts ``mailfathom dev --app tasks:mf`` as the page says,
finds the job in the console, follows the link to the email tutorial and does what it
says there: Outbox, "Send a test email", Sent, then the Inbox.
"""

from __future__ import annotations

import functools
import http.server
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from docs_snippets import ROOT, Block, prepare, run_page
from test_browser import CHROMIUM, CHROMIUM_ARGS
from test_browser_dev import banner, log_in

pytestmark = pytest.mark.slow

_SHOWN_BLOCKS = """() => Array.from(document.querySelectorAll("article div.highlight")).map(el => {
  let before = el.previousSibling;
  while (before && before.nodeType === 3 && !before.textContent.trim()) {
    before = before.previousSibling;
  }
  const skip = before && before.nodeType === 8 && /^\\s*skip:/.test(before.textContent)
    ? before.textContent.trim() : null;
  const language = (Array.from(el.classList).find(c => c.startsWith("language-")) || "");
  const title = el.querySelector(".filename");
  return {language: language.slice(9), skip, title: title ? title.textContent : null,
          code: el.querySelector("code").innerText};
})"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _wait_for(url: str, process: subprocess.Popen[str] | None = None) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            urllib.request.urlopen(url, timeout=2).close()
            return
        except OSError:
            if (process is not None and process.poll() is not None) or time.monotonic() > deadline:
                raise AssertionError(f"{url} did not answer") from None
            time.sleep(0.2)


@pytest.fixture(scope="module")
def docs_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The documentation site, built strictly and served on a free port; its URL."""
    site = tmp_path_factory.mktemp("site")
    subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(site)],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        check=True,
        capture_output=True,
        timeout=110,
    )

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *_: Any) -> None:
            """No access log on the test's stderr."""

    handler = functools.partial(Quiet, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _shown_blocks(page: Any, name: str) -> list[Block]:
    """The code blocks as the page renders them, in order, tagged as the snippet test does."""
    blocks = []
    for number, found in enumerate(page.evaluate(_SHOWN_BLOCKS), start=1):
        code = found["code"] if found["code"].endswith("\n") else found["code"] + "\n"
        title = found["title"] if found["language"] == "python" else None
        blocks.append(Block(name, number, found["language"], "", code, found["skip"], title))
    return blocks


@pytest.fixture
def page() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        tab = browser.new_page(viewport={"width": 1280, "height": 900})
        tab.set_default_timeout(10_000)
        yield tab
        browser.close()


def test_a_newcomer_follows_the_tutorial_to_a_job_and_an_email_in_the_console(
    docs_site: str, page: Any, tmp_path: Path
) -> None:
    page.goto(docs_site + "/")
    page.click("article a:has-text('Your first job in five minutes')")
    page.wait_for_url("**/tutorial/first-job/")
    page.wait_for_selector("article div.highlight .filename")
    blocks = _shown_blocks(page, "first-job (as shown)")
    assert [b.file for b in blocks if b.file] == ["tasks.py"]
    assert sum(b.runs for b in blocks) >= 6
    run_page(blocks, tmp_path)

    assert "mailfathom dev --app tasks:mf" in page.inner_text("article")
    port, smtp_port = _free_port(), _free_port()
    command = ["mailfathom", "dev", "--app", "tasks:mf", "--port", str(port)]
    dev = subprocess.Popen(
        [*command, "--smtp-port", str(smtp_port)],
        cwd=tmp_path,
        env=prepare(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    console = f"http://127.0.0.1:{port}"
    try:
        lines = banner(dev)
        _wait_for(console + "/", dev)
        log_in(page, lines)  # the one-time link it printed
        page.goto(console + "/jobs")
        jobs = page.inner_text("table")
        assert "tutorial.greet" in jobs and "Succeeded" in jobs and "DeadLettered" in jobs

        page.goto(docs_site + "/tutorial/first-job/")
        page.click("article a:has-text('send email that is never sent twice')")
        page.wait_for_url("**/tutorial/email/")
        assert "press Send a test email" in page.inner_text("article")

        page.goto(console + "/outbox")
        page.click("button:has-text('Send a test email')")
        started = time.monotonic()
        while "Sent" not in page.inner_text("h1") and time.monotonic() - started < 20:
            page.wait_for_timeout(200)
            page.reload()
        assert "Sent" in page.inner_text("h1"), page.inner_text("main")
        page.goto(console + "/inbox")
        assert "mailfathom test email" in page.inner_text("table")
    finally:
        dev.send_signal(signal.SIGINT)
        out, err = dev.communicate(timeout=30)
    # The only tracebacks are the tutorial's dead letter, requeued and failing again.
    assert err.count("Traceback") == err.count("PermanentFailure: nobody to greet"), err
    assert f"console   {console}/" in "\n".join([*lines, out])
