"""A Django team's deployment of ``mailfathom.contrib.django``, as its first week runs it:
``manage.py test`` on PostgreSQL, ``manage.py migrate`` in a minimal project, every
``manage.py mailfathom`` command on the ``DATABASES`` alias, hints that name the
commands that work here, and the console behind Django's staff login.

Every step is a real ``manage.py`` (or ``django-admin``) process on a real database.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

from conftest import POSTGRES_URL, require_postgres
from doc_snippets import python_blocks
from mailfathom import JobState, MailFathom
from test_django import PROJECT, Project, _env

#: Each test starts real manage.py processes (tens of seconds in all): run with the slow
#: tests, which CI runs too.
pytestmark = pytest.mark.slow

DOCS = Path(__file__).parent.parent / "docs" / "django.md"


def _asgi_snippet() -> str:
    """docs/django.md's ``asgi.py``: the console behind Django's login."""
    blocks: list[str] = re.findall(r"```python\n(.*?)```", DOCS.read_text(), re.S)
    (asgi,) = [block for block in blocks if "with_console(" in block]
    return asgi


def _manage(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``manage.py ARGS`` with no terminal on stdin: a question (such as "delete the old
    test database?") fails the command instead of waiting."""
    return subprocess.run(
        [sys.executable, str(PROJECT / "manage.py"), *args],
        env=env,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _databases_named(prefix: str) -> list[str]:
    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT datname FROM pg_database WHERE datname LIKE %s", [f"%{prefix}%"]
        ).fetchall()
    return [str(name) for (name,) in rows]


# Two whole `manage.py test` runs (each creates, migrates and drops a database): on a
# loaded machine they outlast the suite's 120 s limit; each run's own 300 s deadline holds.
@pytest.mark.timeout(660)
def test_manage_py_test_on_postgresql_passes_twice_and_drops_its_test_database(
    tmp_path: Path,
) -> None:
    """The test database's creation (migrate) and a test that uses mailfathom leave no
    connection on it: Django's runner drops it, and the next run starts clean."""
    require_postgres()
    name = f"mf_django_{uuid.uuid4().hex[:10]}"  # this run's own: test_<name>
    url = urlunsplit(urlsplit(POSTGRES_URL)._replace(path=f"/{name}", query=""))
    env = _env(url)
    try:
        for _ in range(2):
            done = _manage(env, tmp_path, "test", "shop", "-v1")
            assert done.returncode == 0, done.stdout + done.stderr
            assert "Ran 2 tests" in done.stderr and "\nOK" in done.stderr, done.stderr
            assert _databases_named(name) == []
    finally:
        for leftover in _databases_named(name):
            with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{leftover}" WITH (FORCE)')


def test_health_checks_the_django_database(database_url: str, tmp_path: Path) -> None:
    """``manage.py mailfathom health``: the alias's database, never a mailfathom.db here;
    its hint names the command that fixes it."""
    project = Project(_env(database_url), tmp_path)
    if database_url.startswith("sqlite"):  # a database without mailfathom's tables
        Path(database_url.removeprefix("sqlite:///")).touch()
    before = project.run("mailfathom", "health", check=False)
    assert before.returncode == 1, before.stdout + before.stderr
    assert "FAIL migrations" in before.stdout
    assert "run python manage.py mailfathom migrate" in before.stdout
    project.run("migrate", "-v0")
    after = project.run("mailfathom", "health")
    assert after.stdout.splitlines()[0].startswith("ok database"), after.stdout
    assert "FAIL" not in after.stdout
    report = json.loads(project.run("mailfathom", "health", "--json").stdout)
    assert report["status"] == "ok"
    assert not (tmp_path / "mailfathom.db").exists()


def test_migrate_creates_the_tables_when_mailfathom_is_the_only_app(
    database_url: str, tmp_path: Path
) -> None:
    """A project whose only installed app is mailfathom's: ``migrate`` creates its tables."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "minimal.py").write_text(
        "import os\n"
        "from djproject.settings import _database\n"
        'SECRET_KEY = "minimal"\n'
        "USE_TZ = True\n"
        'INSTALLED_APPS = ["mailfathom.contrib.django"]\n'
        'DATABASES = {"default": _database(os.environ["MF_TEST_DATABASE_URL"])}\n'
    )
    env = _env(database_url, DJANGO_SETTINGS_MODULE="minimal")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), str(PROJECT), env["PYTHONPATH"]]))
    done = subprocess.run(
        [sys.executable, "-m", "django", "migrate"],
        env=env,
        cwd=site,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    with MailFathom(database_url) as mf:
        assert mf.migrate() == []  # every migration was applied by Django's migrate
        assert mf.jobs.counts() is not None


def test_help_offers_no_option_that_django_refuses(tmp_path: Path) -> None:
    """No ``manage.py mailfathom … --help`` shows ``--app`` or ``--database``; given
    anyway, they are refused with the reason."""
    project = Project(_env(f"sqlite:///{tmp_path / 'db.sqlite3'}"), tmp_path)
    (helps,) = project.shop("help")
    assert helps["offering"] == []
    assert helps["read"] > 20  # every command and subcommand
    top = project.run("mailfathom", "--help").stdout
    assert "worker" in top and "--database" not in top
    for args in (["--database", "sqlite:///x.db", "jobs", "list"], ["web", "--app", "a:b"]):
        refused = project.run("mailfathom", *args, check=False)
        assert refused.returncode == 2, refused.stderr
        assert "do not apply here" in refused.stderr


def test_hints_name_the_manage_py_commands(tmp_path: Path) -> None:
    """Under Django, hints say ``python manage.py mailfathom …`` and no ``--app``."""
    env = _env(f"sqlite:///{tmp_path / 'db.sqlite3'}", MF_TEST_ASGI=_asgi_snippet())
    project = Project(env, tmp_path)
    project.run("migrate", "-v0")
    workers = project.run("mailfathom", "workers").stdout
    assert "start one with python manage.py mailfathom worker\n" in workers, workers
    (pages,) = project.shop("console")
    assert pages["overview_hint"] is True


def test_the_console_lets_in_django_staff_only_and_audits_them_by_name(
    database_url: str, tmp_path: Path
) -> None:
    """``with_console``: anonymous visitors and customers go to the admin's login; staff look;
    staff with ``mailfathom.operate_console`` (and superusers) act, audited by username."""
    project = Project(_env(database_url, MF_TEST_ASGI=_asgi_snippet()), tmp_path)
    project.run("migrate", "-v0")
    (done,) = project.shop("console")
    login = "/admin/login/?next=/mailfathom/jobs"
    assert done["anonymous"] == [302, login]
    assert done["customer"] == [302, login]
    assert done["viewer"] == [200, 403]
    assert done["operator"] == [200, ["api:olga"]]
    assert done["admin"] == [200, ["api:boss"]]


def test_the_admin_shows_jobs_and_emails_and_moves_them_by_permission(
    database_url: str, tmp_path: Path
) -> None:
    """The admin's Jobs (with attempts) and Emails (with stages and recipients): staff with
    the view permissions look; each move needs its own permission and is audited as
    ``admin:<username>``; a user who is not staff is sent to the login page."""
    project = Project(_env(database_url), tmp_path)
    project.run("migrate", "-v0")
    (done,) = project.shop("admin_views")
    failed, held = done["failed"], done["held"]
    assert done["customer"] == 302
    assert done["index"] == [True, True]
    assert done["listed"] == sorted(failed)
    assert done["attempt_shown"] is True
    assert done["viewer_buttons"] == []
    assert done["viewer_requeue"] == 403
    assert done["operator_buttons"] == ["requeue"]
    assert [done["operator_requeue"], done["operator_drop"], done["operator_release"]] == [
        302,
        403,
        403,
    ]
    assert done["admin_buttons"] == ["drop", "requeue"]
    assert [done["admin_drop"], done["admin_release"]] == [302, 302]
    assert done["email_page"] == [True, True, False]  # the viewer may not resolve
    assert done["viewer_resolve"] == 403
    assert done["operator_resolve_form"] is True
    assert done["operator_resolve"] == 302
    assert done["states"] == ["Pending", "Dropped", "Pending"]
    assert done["stage"] == "Sent"
    assert done["job_actors"] == [["admin:rita"], ["admin:boss"], ["admin:boss"]]
    assert done["email_actors"] == ["admin:rita"]
    assert len({failed[0], failed[1], held}) == 3


def test_the_pytest_django_recipe_runs_as_a_users_suite(
    database_url: str, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/testing.md's pytest-django ``conftest.py`` and test, in the test project, on
    pytest-django's test database (each store), followed by a test that finds it empty."""
    *_, conftest, test = python_blocks("testing.md")
    if database_url.startswith("postgresql"):  # a test database of this run's own
        name = f"mf_pytest_{uuid.uuid4().hex[:10]}"
        database_url = urlunsplit(urlsplit(POSTGRES_URL)._replace(path=f"/{name}", query=""))
    for name, value in _env(database_url).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("DJANGO_SETTINGS_MODULE", "djproject.settings")
    paths = [str(PROJECT), os.environ["PYTHONPATH"]]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, paths)))
    pytester.makeconftest('pytest_plugins = ["mailfathom.testing"]\n\n' + conftest)
    pytester.makepyfile(
        test_1_orders=test,
        test_2_later="def test_a_later_test_starts_empty(mailfathom):\n"
        "    mailfathom.assert_nothing_enqueued()\n",
    )
    done = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-W", "error")
    done.assert_outcomes(passed=2)
    if database_url.startswith("postgresql"):
        assert _databases_named(urlsplit(database_url).path[1:]) == []


@pytest.mark.timeout(300)  # its own deadlines below: a stuck worker process is killed
def test_worker_processes_are_manage_py_workers_on_the_django_database(
    database_url: str, tmp_path: Path
) -> None:
    """``manage.py mailfathom worker --processes 2``: the supervisor starts two
    ``manage.py mailfathom worker`` processes (the project's settings, handlers and
    ``DATABASES``), which run the jobs enqueued through Django; one SIGTERM stops all."""
    project = Project(_env(database_url), tmp_path)
    _, enqueued = project.shop("migrate", "whoami")
    ids = enqueued["jobs"]
    command = ["mailfathom", "worker", "--processes", "2", "--concurrency", "1"]
    supervisor = subprocess.Popen(
        [sys.executable, str(PROJECT / "manage.py"), *command, "--log-level", "info"],
        env=project.env,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        with MailFathom(database_url) as mf:
            deadline = time.monotonic() + 120
            while any(mf.jobs.get(i).state is not JobState.SUCCEEDED for i in ids):
                assert supervisor.poll() is None, supervisor.communicate()[1]
                assert time.monotonic() < deadline, "the worker processes ran no job"
                time.sleep(0.1)
    finally:
        supervisor.send_signal(signal.SIGTERM)
        err = _stopped(supervisor)
    started = re.search(r"supervisor pid=(\d+) started 2 worker processes: (\d+), (\d+)", err)
    assert started is not None, err
    children = {int(started[2]), int(started[3])}
    assert supervisor.returncode == 0, err
    assert int(started[1]) == supervisor.pid
    (orders,) = project.shop("orders")
    ran = [note.split(":") for note in orders if note.startswith("whoami:")]
    assert sorted(int(n) for _, n, *_ in ran) == list(range(len(ids)))
    if database_url.startswith("sqlite"):
        database = f"sqlite:{database_url.removeprefix('sqlite:///')}"
    else:
        database = "postgresql:postgres"
    for _, _, pid, program, *where in ran:
        assert int(pid) in children  # a worker process, not the supervisor
        assert program == "manage.py"  # started as the project's own command
        assert ":".join(where) == database  # on the DATABASES alias


def _stopped(supervisor: subprocess.Popen[str]) -> str:
    """The supervisor's log once it has exited after a SIGTERM; if it has not within a
    minute, it and its worker processes are killed and the test fails."""
    try:
        return supervisor.communicate(timeout=60)[1]
    except subprocess.TimeoutExpired:
        for child in _children(supervisor.pid):  # they hold its stderr open
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGKILL)
        supervisor.kill()
        err = supervisor.communicate()[1]
        pytest.fail(f"one SIGTERM did not stop the worker processes within 60 s:\n{err}")


def _children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (Linux's /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            fields = stat.read_text().rpartition(")")[2].split()
            if int(fields[1]) == pid:
                found.append(int(stat.parent.name))
    return found
