"""The console in a real headless Chromium (Debian's package, driven by Playwright).

A real uvicorn server on a loopback port serves a token-protected console; a
worker thread runs jobs as the operator acts. Screenshots of each page go to
``$MAILFATHOM_SCREENSHOTS`` when set (``make screenshots`` → docs/screenshots/),
else to a temporary folder.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from consolekit import (
    TOKEN,
    Switch,
    dead_letters,
    fill_history,
    register_demo_kinds,
    register_worker,
    store_schedule,
)
from mailfathom import JobState, MailFathom
from mailfathom.console import Console
from mailfathom.web import Access, create_app
from smtp_fixtures import FaultServer, ServerProcess

pytestmark = pytest.mark.slow

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@dataclass
class Site:
    """A running console: its URL, its app, and the switch that "fixes" the flaky kind."""

    url: str
    mf: MailFathom
    switch: Switch
    shots: Path
    smtp: FaultServer


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory, smtp_process: ServerProcess) -> Iterator[Site]:
    if not shutil.which(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing: apt-get install -y chromium (.ci/run does)")
    folder = tmp_path_factory.mktemp("browser")
    url = f"sqlite:///{folder}/console.db"
    smtp = FaultServer(smtp_process)
    smtp.script()
    mf = MailFathom(url, smtp_url=smtp.url(), smtp_data_timeout=1.0)
    mf.migrate()
    fill_history(url)  # an hour of finished work for the throughput chart
    switch = register_demo_kinds(mf)
    port = _free_port()
    app = create_app(Console(mf), access=Access.for_bind("127.0.0.1", TOKEN))
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)
    )
    serving = threading.Thread(target=server.run, daemon=True)
    serving.start()
    stop = threading.Event()

    def work() -> None:
        while not stop.is_set():
            # a short lease: its heartbeat (a third of it) carries an operator's abort quickly
            mf.worker(concurrency=5, lease=3.0).run(burst=True)
            stop.wait(0.1)

    working = threading.Thread(target=work, daemon=True)
    working.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    shots = Path(os.environ.get("MAILFATHOM_SCREENSHOTS") or folder / "screenshots")
    shots.mkdir(parents=True, exist_ok=True)
    yield Site(f"http://127.0.0.1:{port}", mf, switch, shots, smtp)
    stop.set()
    server.should_exit = True
    serving.join(10)
    working.join(10)
    mf.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 860})
    opened = context.new_page()
    opened.set_default_timeout(10_000)
    yield opened
    context.close()


def log_in(page: Any, site: Site, name: str = "alice") -> None:
    page.goto(site.url + "/")
    assert page.url.startswith(site.url + "/login")
    page.fill("input[name=token]", TOKEN)
    page.fill("input[name=name]", name)
    page.click("button:has-text('Log in')")
    page.wait_for_url(site.url + "/")


def shot(page: Any, site: Site, name: str) -> None:
    """The whole page (a viewport as tall as the page: full-page captures miss the
    sandboxed preview frame, which Chromium renders in a process of its own)."""
    height = int(page.evaluate("document.documentElement.scrollHeight"))
    page.set_viewport_size({"width": 1280, "height": min(max(height, 860), 4000)})
    page.wait_for_timeout(300)
    page.screenshot(path=str(site.shots / f"{name}.png"))
    page.set_viewport_size({"width": 1280, "height": 860})


def test_requeue_a_dead_letter_and_see_it_succeed(page: Any, site: Site) -> None:
    dead = dead_letters(site.mf, 3, to="frank@example.com")
    site.mf.enqueue("demo.ok", {"report": 1}, hold=True)
    page.goto(site.url + "/login")
    shot(page, site, "login")
    log_in(page, site)
    assert page.locator(".attention").is_visible()
    shot(page, site, "overview")
    page.click(".attention a:has-text('dead-lettered jobs')")
    page.wait_for_url(re.compile(r".*/jobs\?state=DeadLettered$"))
    rows = page.locator("table.jobs tbody tr")
    assert rows.count() == 3
    shot(page, site, "jobs")
    target = dead[0]
    page.click(f"table.jobs a[href='/jobs/{target}']")
    assert "mailbox <frank@example.com> unknown" in page.inner_text("dl.fields")
    page.click("summary:has-text('Traceback')")
    shot(page, site, "job")
    site.switch.fixed.set()  # the relay is fixed: the next attempt succeeds
    page.click("a:has-text('Requeue…')")
    page.fill("input[name=reason]", "relay fixed")
    shot(page, site, "confirm")
    page.click("button:has-text('Confirm: requeue')")
    assert f"Job {target} requeued." in page.inner_text(".flash")
    deadline = time.monotonic() + 10
    while "Succeeded" not in page.inner_text("h1") and time.monotonic() < deadline:
        time.sleep(0.2)
        page.reload()
    assert "Succeeded" in page.inner_text("h1")
    audit = page.inner_text("main")
    assert "web:alice" in audit and "relay fixed" in audit
    assert site.mf.jobs.get(target).state is JobState.SUCCEEDED


def test_bulk_requeue_and_the_other_pages(page: Any, site: Site) -> None:
    site.switch.fixed.clear()
    dead_letters(site.mf, 2, to="grace@example.com")
    log_in(page, site, "bob")
    page.goto(site.url + "/jobs?state=DeadLettered&text=grace")
    page.click("a:has-text('Requeue all…')")
    assert "Requeue 2 jobs?" in page.inner_text("h1")
    shot(page, site, "bulk_confirm")
    page.click("button:has-text('Confirm: requeue 2 jobs')")
    assert "2 jobs requeued" in page.inner_text("h1")
    page.goto(site.url + "/jobs/new")
    page.select_option("select[name=kind]", "demo.ok")
    page.fill("textarea[name=payload]", '{"report": }')
    page.click("button:has-text('Create job')")
    assert "payload is not valid JSON" in page.inner_text(".error")
    shot(page, site, "new_job")
    page.fill("textarea[name=payload]", '{"report": 2}')
    page.click("button:has-text('Create job')")
    assert "held: press Run to start it" in page.inner_text(".flash")
    page.goto(site.url + "/audit")
    assert "web:bob" in page.inner_text("table")
    shot(page, site, "audit")
    store_schedule(site.mf)
    register_worker(site.mf, "worker-a", queues=("mail", "default"))
    page.goto(site.url + "/schedules")
    page.click("a:has-text('Pause…')")
    page.fill("input[name=reason]", "month-end freeze")
    page.click("button:has-text('Confirm: pause')")
    assert "month-end freeze" in page.inner_text("table")
    shot(page, site, "schedules")
    page.goto(site.url + "/workers")
    assert "worker-a" in page.inner_text("table")
    shot(page, site, "workers")


def test_a_post_without_the_csrf_token_is_refused(page: Any, site: Site) -> None:
    site.switch.fixed.clear()
    (job_id,) = dead_letters(site.mf, 1)
    log_in(page, site)
    page.goto(f"{site.url}/jobs/{job_id}/drop")
    page.evaluate("document.querySelector('main form input[name=csrf_token]').remove()")
    with page.expect_navigation() as navigation:
        page.click("button:has-text('Confirm: drop')")
    assert navigation.value.status == 403
    assert "no CSRF token" in page.inner_text("body")
    page.goto(f"{site.url}/jobs/{job_id}/drop")
    page.evaluate("document.querySelector('main form input[name=csrf_token]').value = 'forged'")
    with page.expect_navigation() as navigation:
        page.click("button:has-text('Confirm: drop')")
    assert navigation.value.status == 403
    assert site.mf.jobs.get(job_id).state is JobState.DEAD_LETTERED


def test_an_unauthenticated_request_is_refused(page: Any, site: Site) -> None:
    response = page.goto(site.url + "/jobs")
    assert page.url.startswith(site.url + "/login?next=")
    assert response is not None and "Log in" in page.inner_text("h1")
    api = page.request.get(site.url + "/api/jobs")
    assert api.status == 401
    post = page.request.post(site.url + "/jobs/1/drop", form={"reason": "x"})
    assert post.status == 401 and "log in first" in post.text()
    bearer = page.request.get(site.url + "/api/jobs", headers={"Authorization": f"Bearer {TOKEN}"})
    assert bearer.status == 200


def _invoice() -> EmailMessage:
    message = EmailMessage()
    message["From"] = "billing@example.com"
    message["To"] = "carol@example.com"
    message["Subject"] = "Invoice 2031-004"
    message.set_content("Your invoice is attached.\n")
    message.add_alternative("<p><b>Your invoice</b> is attached.</p>", subtype="html")
    return message


def test_resolve_an_unknown_outcome(page: Any, site: Site) -> None:
    site.smtp.script(end="disconnect")  # the body goes out; the answer never comes
    try:
        email = site.mf.outbox.record(_invoice())
        deadline = time.monotonic() + 15
        while not site.mf.outbox.unknown() and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        site.smtp.script()
    assert [e.id for e in site.mf.outbox.unknown()] == [email.id]
    log_in(page, site, "carol")
    page.click(".attention a:has-text('unknown outcome')")
    page.wait_for_url(site.url + "/outbox/unknown")
    assert "Invoice 2031-004" in page.inner_text("table")
    shot(page, site, "unknown")
    page.click("a:has-text('Resolve…')")
    page.check("input[value=delivered]")
    page.fill("input[name=reason]", "the relay's log shows 250 for this Message-ID")
    shot(page, site, "resolve")
    page.click("button:has-text('Confirm the decision')")
    assert f"Email {email.id} resolved as delivered: now Sent." in page.inner_text(".flash")
    history = page.inner_text("main")
    assert (
        "TransmissionBegun" in history
        and "web:carol (self-declared) decided: delivered: the relay's log shows 250" in history
    )
    shot(page, site, "email")
    resolved = site.mf.outbox.get(email.id)
    assert resolved.stage.value == "Sent"
    assert site.mf.outbox.unknown() == []


# -- security where the browser matters (issue 12) -----------------------------------------


def _schedule(site: Site, name: str) -> None:
    site.mf.schedule(name, cron="0 3 * * *", kind="demo.ok", payload={})
    site.mf.schedules.sync()


def test_a_schedule_named_like_a_path_pauses_itself_not_another(page: Any, site: Site) -> None:
    for name in ("other", "x/../../schedules/other", ".."):
        _schedule(site, name)
    log_in(page, site, "dora")
    for name in ("x/../../schedules/other", ".."):
        page.goto(site.url + "/schedules")
        row = page.locator("table tbody tr", has=page.locator(f"td:text-is('{name}')"))
        row.locator("a:has-text('Pause…')").click()
        assert f"Pause schedule {name}?" in page.inner_text("h1")
        page.fill("input[name=reason]", "path-like name")
        page.click("button:has-text('Confirm: pause')")
        assert f"Schedule {name} paused" in page.inner_text(".flash")
        assert site.mf.schedules.get(name).paused
    assert not site.mf.schedules.get("other").paused
    assert site.mf.schedules.get("..").paused_by == "web:dora (self-declared)"


def test_a_cookie_kept_from_before_logout_opens_nothing(
    page: Any, site: Site, browser: Any
) -> None:
    (job_id,) = dead_letters(site.mf, 1, to="erin@example.com")
    log_in(page, site, "erin")
    saved = page.context.cookies()
    page.click("button:has-text('Log out')")
    page.wait_for_url(site.url + "/login")
    thief = browser.new_context()
    try:
        thief.add_cookies(saved)
        stolen = thief.new_page()
        stolen.goto(f"{site.url}/jobs/{job_id}")
        assert stolen.url.startswith(site.url + "/login")
        answer = stolen.request.post(
            f"{site.url}/jobs/{job_id}/requeue", form={"reason": "x"}, max_redirects=0
        )
        assert answer.status == 401
    finally:
        thief.close()
    assert site.mf.jobs.events(job_id) == []
    assert TOKEN not in str(saved)


def _wait_for(check: Any, what: str, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def test_pause_a_queue_hold_run_now_and_abort(page: Any, site: Site) -> None:
    import asyncio

    from mailfathom import JobContext

    if "demo.wait" not in site.mf.registry.names():

        @site.mf.job("demo.wait", queue="slow")
        async def wait(ctx: JobContext) -> None:
            await asyncio.sleep(600)

    log_in(page, site, "carol")
    page.goto(site.url + "/queues")
    page.fill("input[name=queue]", "slow")
    page.click("button:has-text('Pause…')")
    page.fill("input[name=reason]", "upstream down")
    page.click("button:has-text('Confirm: pause queue slow')")
    assert "Queue slow paused" in page.inner_text(".flash")
    assert "upstream down" in page.inner_text("#queue-slow")
    shot(page, site, "queues")
    page.goto(site.url + "/")
    assert "queues paused" in page.inner_text(".attention")

    job = site.mf.enqueue("demo.wait")  # enqueue goes on while the queue is paused
    page.goto(site.url + "/queues")
    page.click("#queue-slow a:has-text('Resume…')")
    page.click("button:has-text('Confirm: resume queue slow')")
    _wait_for(lambda: site.mf.jobs.get(job.id).state is JobState.CLAIMED, "never claimed")
    page.goto(site.url + f"/jobs/{job.id}")
    page.click("a:has-text('Abort…')")
    page.fill("input[name=reason]", "runaway")
    page.click("button:has-text('Confirm: abort job')")
    assert "asked to abort" in page.inner_text(".flash")
    _wait_for(lambda: site.mf.jobs.get(job.id).state is JobState.DEAD_LETTERED, "not aborted")
    page.reload()
    fields = page.inner_text("dl.fields")
    assert "aborted by web:carol (self-declared): runaway" in fields
    assert "Aborted" in page.inner_text("ol.attempts")

    later = site.mf.enqueue("demo.ok", {}, delay=3600)
    page.goto(site.url + f"/jobs/{later.id}")
    page.click("a:has-text('Hold…')")
    page.click("button:has-text('Confirm: hold job')")
    assert "Held" in page.inner_text("h1")
    page.click("a:has-text('Run…')")
    page.click("button:has-text('Confirm: run job')")
    _wait_for(lambda: site.mf.jobs.get(later.id).state is JobState.SUCCEEDED, "not run")
    delayed = site.mf.enqueue("demo.ok", {}, delay=3600)
    page.goto(site.url + f"/jobs/{delayed.id}")
    page.click("a:has-text('Run now…')")
    page.click("button:has-text('Confirm: run now job')")
    assert "made due now" in page.inner_text(".flash")
    _wait_for(lambda: site.mf.jobs.get(delayed.id).state is JobState.SUCCEEDED, "not run now")
    events = [e.actor for e in site.mf.jobs.events(delayed.id)]
    assert events == ["web:carol (self-declared)"]


def test_bulk_hold_run_run_now_and_abort_over_a_filter(page: Any, site: Site) -> None:
    import asyncio

    from mailfathom import JobContext

    if "demo.wait" not in site.mf.registry.names():

        @site.mf.job("demo.wait", queue="slow")
        async def wait(ctx: JobContext) -> None:
            await asyncio.sleep(600)

    later = [site.mf.enqueue("demo.ok", {}, delay=3600, queue="bulk").id for _ in range(3)]
    log_in(page, site, "dave")
    page.goto(site.url + "/jobs?state=Pending&queue=bulk")
    page.click("a:has-text('Hold all pending…')")
    assert "Hold 3 jobs?" in page.inner_text("h1")
    page.fill("input[name=reason]", "freeze")
    page.click("button:has-text('Confirm: hold 3 jobs')")
    assert "3 jobs held" in page.inner_text("h1")
    assert all(site.mf.jobs.get(i).held for i in later)
    page.goto(site.url + "/jobs?state=Held&queue=bulk")
    assert page.locator("table.jobs tbody tr").count() == 3
    page.click("a:has-text('Run all held…')")
    page.click("button:has-text('Confirm: release 3 jobs')")
    assert "3 jobs released" in page.inner_text("h1")
    for i in later:
        _wait_for(lambda i=i: site.mf.jobs.get(i).state is JobState.SUCCEEDED, "not released")

    delayed = [site.mf.enqueue("demo.ok", {}, delay=3600, queue="bulk2").id for _ in range(3)]
    page.goto(site.url + "/jobs?queue=bulk2")
    for i in delayed[:2]:  # two of the three, ticked one by one
        page.check(f"input[name=id][value='{i}']")
    page.click("#bulk button[value=run_now]")
    assert "Run now 2 jobs?" in page.inner_text("h1")
    page.click("button:has-text('Confirm: run now 2 jobs')")
    assert "2 jobs made due now" in page.inner_text("h1")
    for i in delayed[:2]:
        _wait_for(lambda i=i: site.mf.jobs.get(i).state is JobState.SUCCEEDED, "not run now")
    assert site.mf.jobs.get(delayed[2]).state is JobState.PENDING  # not ticked: untouched

    running = [site.mf.enqueue("demo.wait", {}, queue="bulk3").id for _ in range(2)]
    for i in running:
        _wait_for(lambda i=i: site.mf.jobs.get(i).state is JobState.CLAIMED, "never claimed")
    page.goto(site.url + "/jobs?state=Claimed&queue=bulk3")
    page.click("a:has-text('Abort all running…')")
    assert "Abort 2 jobs?" in page.inner_text("h1")
    page.fill("input[name=reason]", "runaway batch")
    page.click("button:has-text('Confirm: abort 2 jobs')")
    assert "2 jobs asked to abort" in page.inner_text("h1")
    for i in running:
        _wait_for(lambda i=i: site.mf.jobs.get(i).state is JobState.DEAD_LETTERED, "not aborted")
    reason = site.mf.jobs.get(running[0]).failure_reason or ""
    assert "web:dave" in reason and "runaway batch" in reason
    page.goto(site.url + "/audit")
    assert "runaway batch" in page.inner_text("table")


def test_the_console_shows_what_retention_did(page: Any, site: Site) -> None:
    """A pruner whose clock is eight days ahead compacts what the worker finished: the
    overview says when it ran, what it did and the rows per state; the lists and pages
    mark the rows compacted."""
    from datetime import timedelta

    from mailfathom import FakeClock, OutgoingEmailStage

    done = site.mf.enqueue("demo.ok", {"report": 77}, idempotency_key="retained:77")
    _wait_for(lambda: site.mf.jobs.get(done.id).state is JobState.SUCCEEDED, "not run")
    email = site.mf.outbox.record(
        _invoice(), run_at=site.mf.clock.now() + timedelta(days=1), idempotency_key="inv:ret"
    )
    site.mf.outbox.cancel(email.id, actor="ops")
    ahead = FakeClock(site.mf.clock.now() + timedelta(days=40))
    with MailFathom(settings=site.mf.settings, clock=ahead) as pruning:
        report = pruning.prune()
    assert report.rows["jobs"]["Succeeded"]["compacted"] >= 1
    assert report.rows["emails"]["Cancelled"]["compacted"] >= 1
    log_in(page, site, "erin")
    section = page.locator("section[aria-label=Retention]")
    said = section.inner_text()
    assert f"Pruning last ran {ahead.now():%Y-%m-%d %H:%M:%S}" in said
    assert "jobs Succeeded compacted" in said and "emails Cancelled compacted" in said
    counts = site.mf.retention.counts()
    rows, compacted = counts["jobs"]["Succeeded"]
    row = section.locator("tr", has_text="Succeeded")
    assert row.inner_text().split("\t")[2:] == [f"{rows:,}", f"{compacted:,}"]
    assert compacted == rows  # every Succeeded job was finished before the cutoff
    shot(page, site, "retention")
    page.goto(site.url + "/jobs?state=Succeeded&text=retained")
    listed = page.locator("table.jobs tbody tr")
    assert listed.count() == 1 and "compacted" in listed.inner_text()
    page.click(f"table.jobs a[href='/jobs/{done.id}']")
    assert "compacted" in page.inner_text("h1")
    assert "Compacted by retention" in page.inner_text("main")
    assert "Removed by retention." in page.inner_text("main")
    assert '"report": 77' not in page.inner_text("main")
    page.goto(site.url + f"/outbox/{email.id}")
    assert "compacted" in page.inner_text("h1")
    assert "the message bytes and subject are gone" in page.inner_text("main")
    assert site.mf.outbox.get(email.id).stage is OutgoingEmailStage.CANCELLED


def test_abort_a_pending_job_then_drop_it(page: Any, site: Site) -> None:
    job = site.mf.enqueue("demo.ok", {}, hold=True)  # held: no worker starts it meanwhile
    log_in(page, site, "carol")
    page.goto(site.url + f"/jobs/{job.id}")
    page.click("a:has-text('Abort…')")
    assert "It never starts: it is dead-lettered at once" in page.inner_text("main")
    page.fill("input[name=reason]", "wrong customer")
    page.click("button:has-text('Confirm: abort job')")
    assert "dead-lettered, it never starts" in page.inner_text(".flash")
    dead = site.mf.jobs.get(job.id)
    assert dead.state is JobState.DEAD_LETTERED and dead.failure_class is not None
    assert dead.failure_class.value == "Permanent"
    reason = "aborted by web:carol (self-declared): wrong customer (before it started)"
    assert reason in page.inner_text("dl.fields")
    assert page.locator("a:has-text('Abort…')").count() == 0
    page.click("a:has-text('Drop…')")
    page.click("button:has-text('Confirm: drop job')")
    assert "dropped" in page.inner_text(".flash")
    assert site.mf.jobs.get(job.id).state is JobState.DROPPED
    assert [e.action for e in site.mf.jobs.events(job.id)] == ["abort", "drop"]
