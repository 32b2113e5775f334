"""``mailfathom.contrib.django`` in a real project (tests/django_project), on both stores.

Each step is a ``manage.py`` subprocess, as a deployment runs it: Django's
``migrate``, ``manage.py mailfathom migrate``, the project's ``shop`` command
(which writes an Order and sends mail, enqueues tasks or jobs inside one
``transaction.atomic()`` block, rolled back with ``--rollback``), and
``manage.py mailfathom worker --burst`` delivering to the test SMTP server.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from email import message_from_bytes
from pathlib import Path
from typing import Any

import pytest

from mailfathom import JobState, MailFathom, OutgoingEmailStage
from smtp_fixtures import FaultServer

PROJECT = Path(__file__).with_name("django_project")
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]
DOCS = Path(__file__).parent.parent / "docs" / "django.md"


@dataclass
class Project:
    """The test project on one database, run through its ``manage.py``."""

    env: dict[str, str]
    cwd: Path

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """``manage.py ARGS``; its output, and (with ``check``) success asserted."""
        done = subprocess.run(
            [sys.executable, str(PROJECT / "manage.py"), *args],
            env=self.env,
            cwd=self.cwd,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if check:
            assert done.returncode == 0, done.stdout + done.stderr
        return done

    def shop(self, *actions: str) -> list[Any]:
        """What each ``manage.py shop`` action did (one process runs them all, in order)."""
        return list(json.loads(self.run("shop", *actions).stdout.strip().splitlines()[-1]))


def _environ() -> dict[str, str]:
    """This process's environment without MAILFATHOM_* settings; PYTHONPATH made absolute,
    since the commands run in a temporary folder."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAILFATHOM_")}
    paths = [os.path.abspath(p) for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    return env


def _env(database_url: str, **extra: str) -> dict[str, str]:
    return {**_environ(), "MF_TEST_DATABASE_URL": database_url, **extra}


@pytest.fixture
def project(database_url: str, smtp: FaultServer, tmp_path: Path) -> Project:
    """The project on a fresh database (its first ``shop`` action is ``migrate``)."""
    return Project(_env(database_url, MF_TEST_SMTP_URL=smtp.url()), tmp_path)


@pytest.fixture
def mf(database_url: str) -> Iterator[MailFathom]:
    """The same database seen from outside Django (overrides the suite's migrating one)."""
    app = MailFathom(database_url)
    yield app
    app.close()


def _subject(data: bytes) -> str:
    return str(message_from_bytes(data)["Subject"])


def test_mail_commits_or_rolls_back_with_atomic_and_is_delivered_once(
    project: Project, mf: MailFathom, smtp: FaultServer
) -> None:
    counts = [1, 1, 1, 2, 0]  # send_mail, .send(), alternatives, send_mass_mail, no messages
    _, rolled, orders = project.shop("migrate", "mail:rollback", "orders")
    assert rolled == {"sent": counts, "rolled_back": True}
    assert orders == []
    assert mf.outbox.list() == []
    assert sum(mf.jobs.counts().values()) == 0

    assert project.shop("mail", "orders") == [{"sent": counts}, ["mail-order"]]
    assert len(mf.outbox.list()) == 5
    assert smtp.received() == []  # recording never talks to SMTP
    project.run("mailfathom", "worker", "--burst")
    received = smtp.received()
    assert sorted(_subject(m.data) for m in received) == [
        "alternatives",
        "mass 1",
        "mass 2",
        "message",
        "plain",
    ]
    assert all(m.accepted and m.mail_from == "shop@example.com" for m in received)
    (bcc,) = [m for m in received if _subject(m.data) == "message"]
    assert bcc.rcpt_tos == ["bob@example.com", "hidden@example.com"]
    assert b"hidden@example.com" not in bcc.data
    (rich,) = [m for m in received if _subject(m.data) == "alternatives"]
    assert b"multipart/alternative" in rich.data and b"<p>HTML part.</p>" in rich.data
    assert {e.stage for e in mf.outbox.list()} == {OutgoingEmailStage.SENT}
    listed = json.loads(project.run("mailfathom", "outbox", "list", "--json").stdout)
    assert sorted((e["subject"], e["stage"]) for e in listed["emails"]) == [
        (subject, "Sent") for subject in ["alternatives", "mass 1", "mass 2", "message", "plain"]
    ]
    assert {j.state for j in mf.jobs.list()} == {JobState.SUCCEEDED}  # nothing is owed again


def test_tasks_and_jobs_join_the_transaction_and_run_with_fresh_connections(
    project: Project, mf: MailFathom
) -> None:
    _, task, job, orders, typo = project.shop(
        "migrate", "task:rollback", "job:rollback", "orders", "typo"
    )
    assert task["status"] == "READY" and task["rolled_back"] and job["rolled_back"]
    assert orders == []
    # the one enqueue rule: the project registers kinds, so a typo is refused
    assert typo["refused"].startswith("job kind 'shop.nte' is not registered: registered kinds: ")
    assert "shop.note" in typo["refused"]
    assert sum(mf.jobs.counts().values()) == 0

    task, _, _ = project.shop("task", "job", "connections")
    assert task["status"] == "READY"
    ids = task["results"]
    assert sorted(job.kind for job in mf.jobs.list()) == [
        *["django.task"] * 2,
        *["shop.connection"] * 3,
        "shop.note",
    ]
    results = [f"result:{rid}" for rid in ids]
    first, second, _, orders, *after = project.shop(*results, "worker", "orders", *results)
    assert [first["status"], second["status"]] == ["READY", "READY"]
    assert after == [{"status": "SUCCESSFUL", "attempts": 1}] * 2
    assert orders == [
        "connections-order",
        "from-context-task:attempt1",
        "from-job",
        "from-task",
        "job-order",
        # one worker thread ran all three: Django's connection was closed after each job
        "job1:open=False",
        "job2:open=False",
        "job3:open=False",
        "task-order",
    ]


def test_a_task_result_return_value_is_what_the_task_returned(
    project: Project, mf: MailFathom
) -> None:
    _, ids = project.shop("migrate", "totals")
    returned = [f"returned:{rid}" for rid in ids]
    before = project.shop(*returned)
    assert before[0] == {
        "status": "READY",
        "attempts": 0,
        "refused": "Task has not finished yet",
        "errors": [],
    }
    _, summed, dated, nothing = project.shop("worker", *returned)
    # Django's normalize_json made the tuple a list, as Django's own backends do
    assert summed == {
        "status": "SUCCESSFUL",
        "attempts": 1,
        "return_value": {"total": 7, "prices": [3, 4]},
        "errors": [],
    }
    assert mf.jobs.get(int(ids[0])).result == {"total": 7, "prices": [3, 4]}
    # not JSON: failed at once, as Django's immediate backend fails it (no retries)
    assert dated == {
        "status": "FAILED",
        "attempts": 1,
        "refused": "Task failed",
        "errors": ["mailfathom.jobs.failures.ResultError"],
    }
    failure = mf.jobs.get(int(ids[1])).failure_reason
    assert failure is not None and "'shop.tasks.total_at' returned a datetime" in failure
    assert nothing == {"status": "SUCCESSFUL", "attempts": 1, "return_value": None, "errors": []}


def test_the_docs_task_is_the_one_the_project_runs() -> None:
    """docs/django.md's task is the project's ``total``, whose result the test above reads
    back as the page says (``{"total": 7, "prices": [3, 4]}``)."""
    blocks: list[str] = re.findall(r"```python\n(.*?)```", DOCS.read_text(), re.S)
    (shown,) = [block for block in blocks if "def total(" in block]
    definition = shown[shown.index("@task()") : shown.index("\nresult = ")].strip()
    assert definition in (PROJECT / "shop" / "tasks.py").read_text()
    assert 'done.return_value == {"total": 7, "prices": [3, 4]}' in shown


def test_async_views_write_the_order_and_its_job_together_and_never_block(
    project: Project, mf: MailFathom
) -> None:
    _, (placed, refused, reminded), _, orders = project.shop(
        "migrate", "async_views", "worker", "orders"
    )
    assert placed[0] == 200 and refused == [409, {"refused": True}] and reminded[0] == 200
    # the refused order and its job were rolled back together; the others ran
    assert orders == ["async-order", "async-order:job", "reminder"]
    assert sorted(job.payload["note"] for job in mf.jobs.list()) == [
        "async-order:job",
        "reminder",
    ]


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_django_test_runner_gets_the_app_on_its_test_database(
    database_url: str, tmp_path: Path
) -> None:
    """``manage.py test``: the test database's creation (migrate) creates mailfathom's tables,
    and the app, built at start-up on the real database, follows the alias to the test one
    (shop/tests.py asserts it from inside the run)."""
    done = Project(_env(database_url), tmp_path).run("test", "shop", "-v1")
    assert "Ran 2 tests" in done.stderr and "OK" in done.stderr, done.stderr
    assert not Path(database_url.removeprefix("sqlite:///")).exists()  # the real one untouched


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _get(url: str) -> tuple[int, str]:
    with urllib.request.urlopen(url, timeout=5) as response:
        return response.status, response.read().decode()


@pytest.mark.slow
@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_the_admin_links_to_the_console_in_a_browser(
    database_url: str, smtp: FaultServer, tmp_path: Path
) -> None:
    port = _free_port()
    project = Project(_env(database_url, MF_TEST_WEB_PORT=str(port)), tmp_path)
    _, admin = project.shop("migrate", "admin")
    assert admin["anonymous"] == 302  # the admin index (and so the link) is staff only
    links = re.findall(
        r'<div class="module" id="mailfathom-console">.*?href="([^"]+)"', admin["page"], re.S
    )
    assert links == [f"http://127.0.0.1:{port}/"]
    site = f"http://127.0.0.1:{_free_port()}"
    web = _serve(project, links[0], "mailfathom", "web")
    try:
        django = _serve(project, site + "/admin/login/", "runserver", "--noreload", site[7:])
        try:
            _click_through_the_admin(site, "ops", "pw", links[0])
        finally:
            django.send_signal(signal.SIGTERM)
            django.communicate(timeout=20)
    finally:
        web.send_signal(signal.SIGTERM)
        out, err = web.communicate(timeout=20)
    assert f"mailfathom console on http://127.0.0.1:{port}/" in out, err


def _serve(project: Project, url: str, *args: str) -> subprocess.Popen[str]:
    """``manage.py ARGS`` in the background, once ``url`` answers."""
    process = subprocess.Popen(
        [sys.executable, str(PROJECT / "manage.py"), *args],
        env=project.env,
        cwd=project.cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 30
    while True:  # neither server announces readiness at its log level: wait for the port
        try:
            status, _ = _get(url)
            assert status == 200
            return process
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                raise AssertionError(f"{args} did not start: {process.communicate()}") from None
            time.sleep(0.1)


def _click_through_the_admin(site: str, user: str, password: str, console: str) -> None:
    """In Chromium: log in to the admin, follow the mailfathom link, land on the console."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            page.set_default_timeout(10_000)
            page.goto(site + "/admin/")
            page.fill("input[name=username]", user)
            page.fill("input[name=password]", password)
            page.click("input[type=submit]")
            page.click("#mailfathom-console a")
            page.wait_for_url(console + "**")
            assert "mailfathom" in page.content()
        finally:
            browser.close()


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_bad_mailfathom_settings_are_refused_with_what_to_write(
    database_url: str, tmp_path: Path
) -> None:
    for extra, expected in [
        ({"DATABASE_URL": "sqlite:///x.db"}, "set MAILFATHOM['DATABASE'] to its name"),
        ({"CONCURENCY": 3}, "MAILFATHOM['CONCURENCY'] is not a setting: use ['DATABASE'"),
    ]:
        env = _env(database_url, MF_TEST_MAILFATHOM_EXTRA=json.dumps(extra))
        refused = Project(env, tmp_path).run("mailfathom", "jobs", "list", check=False)
        assert refused.returncode != 0
        assert expected in refused.stderr, refused.stderr


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_the_database_is_the_alias_whatever_the_environment_says(
    database_url: str, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere.db"
    env = _env(database_url, MAILFATHOM_DATABASE_URL=f"sqlite:///{elsewhere}")
    assert "applied" in Project(env, tmp_path).run("mailfathom", "migrate").stdout
    assert not elsewhere.exists()
    with MailFathom(database_url) as mf:  # the alias's file has mailfathom's tables
        assert mf.migrate() == []


def _docs_snippet() -> str:
    blocks: list[str] = re.findall(r"```python\n(.*?)```", DOCS.read_text(), re.S)
    (settings,) = [block for block in blocks if "MAILFATHOM = {" in block]
    return settings


def test_the_docs_settings_snippet_works_as_written(tmp_path: Path) -> None:
    """The page's settings, appended to a minimal project's, start the app and record mail."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "docsite.py").write_text(
        "from pathlib import Path\n"
        "BASE_DIR = Path(__file__).parent\n"
        'SECRET_KEY = "docs"\n'
        "USE_TZ = True\n"
        'INSTALLED_APPS = ["django.contrib.contenttypes", "django.contrib.auth"]\n'
        'DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3",'
        ' "NAME": BASE_DIR / "db.sqlite3"}}\n' + _docs_snippet()
    )
    env = _environ()
    env["DJANGO_SETTINGS_MODULE"] = "docsite"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), env["PYTHONPATH"]]))

    def admin(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "django", *args],
            env=env,
            cwd=site,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    admin("migrate", "-v0")
    admin(
        "shell",
        "-c",
        "from django.core.management import call_command; call_command('mailfathom', 'migrate');"
        "from django.core.mail import send_mail; "
        "send_mail('Docs', 'Hello.', 'app@example.com', ['ann@example.com'])",
    )
    with MailFathom(f"sqlite:///{site / 'db.sqlite3'}") as mf:  # beside Django's own tables
        assert [e.subject for e in mf.outbox.list()] == ["Docs"]


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
def test_a_send_is_one_round_trip_to_postgresql_and_a_list_one_record_many(
    project: Project, mf: MailFathom
) -> None:
    """Counted in libpq's trace of Django's connection: ``send_mail`` is one round trip
    (inside the caller's transaction the savepoint, the write and the release in one
    pipelined flight; in autocommit the one statement alone), and ``send_mass_mail`` of
    five is one as well (one ``record_many``). The database check is made once per
    connection: only the first send on a connection, and a transaction that the send
    itself begins, pay more. The record's statement runs prepared, Django's do not."""
    _, trips = project.shop("migrate", "trips")
    assert trips["autocommit_first"] <= 2, trips  # + the database check
    assert trips["autocommit"] <= 1, trips
    assert trips["atomic"] <= 1, trips
    assert trips["atomic_mass"] <= 1, trips
    assert trips["atomic_message"] <= 1, trips
    assert trips["atomic_first_statement"] <= 3, trips  # + BEGIN and the check
    assert trips["after_rollback"] <= 1, trips
    # the record's statement runs prepared on Django's connection; Django's own do not
    # (Django leaves psycopg's prepare_threshold at None, and so does mailfathom)
    prepared = trips["prepared"]
    assert [sql for sql in prepared if "INSERT INTO mf_outbox_recipients" in sql], prepared
    assert not [sql for sql in prepared if "shop_order" in sql], prepared
    assert trips["threshold"] is None
    assert len(mf.outbox.list()) == 11  # the send rolled back with its block is not there


def test_a_list_with_a_bad_message_records_none_of_it_and_the_block_goes_on(
    project: Project, mf: MailFathom
) -> None:
    """``send_mass_mail`` is one ``record_many``: a bad address in the middle of the list
    records none of it (raised, or 0 with ``fail_silently``), and the caller's
    ``atomic()`` block that caught the error still commits its own writes."""
    _, done, orders = project.shop("migrate", "badmail", "orders")
    assert "two..dots@example.com" in done["error"] and "nothing was recorded" in done["error"]
    assert done["silent"] == 0
    assert orders == ["badmail-after", "badmail-before"]
    assert mf.outbox.list() == []
    assert sum(mf.jobs.counts().values()) == 0


def test_the_docs_async_views_are_the_projects() -> None:
    """docs/django.md's async views compile, and the test project's views (which
    test_async_views_… serves) make the same calls."""
    blocks: list[str] = re.findall(r"```python\n(.*?)```", DOCS.read_text(), re.S)
    (snippet,) = [block for block in blocks if "async def checkout" in block]
    compile(snippet, "docs/django.md", "exec")
    views = (PROJECT / "shop" / "views.py").read_text()
    for call in (
        "@sync_to_async",
        "with transaction.atomic():",
        "order = Order.objects.create(note=note)",
        "await AsyncMailFathom(get_app()).enqueue(",
    ):
        assert call in snippet and call in views, call
