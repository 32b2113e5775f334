"""Fixtures shared by the whole suite: one store fixture parametrised over every database.

PostgreSQL tests run against ``MAILFATHOM_TEST_POSTGRES_URL`` (default
``postgresql://postgres@127.0.0.1:5432/postgres``), each in a schema of its own
that is dropped afterwards. When no server answers they are skipped with the
reason shown — except under ``CI=true``, where they fail.

Every test runs isolated from the shell that started pytest: no ``MAILFATHOM_*``
setting of the caller reaches it (only the suite's own ``MAILFATHOM_TEST_POSTGRES_URL``
and ``MAILFATHOM_SCREENSHOTS``, which ``make screenshots`` sets), and its working
directory is an empty temporary one, so no ``./mailfathom.toml`` is ever read.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from urllib.parse import quote

import psycopg
import pytest

from mailfathom import FakeClock, MailFathom

pytest_plugins = ["pytester", "smtp_fixtures", "fake_provider", "ses_fixtures", "sns_fixtures"]

STORES = ["sqlite", "postgresql"]
POSTGRES_URL = os.environ.get(
    "MAILFATHOM_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)


# The suite's own variables; every other MAILFATHOM_* is the caller's and is cleared.
KEPT_VARIABLES = ("MAILFATHOM_TEST_POSTGRES_URL", "MAILFATHOM_SCREENSHOTS")
STARTED_IN = Path.cwd()


def _absolute(paths: str) -> str:
    """``paths`` (os.pathsep-separated) with relative entries made absolute from where
    pytest started, so a child started in another directory imports the same code."""
    return os.pathsep.join(
        str(STARTED_IN / entry) if entry else entry for entry in paths.split(os.pathsep)
    )


@pytest.fixture(autouse=True)
def isolated_from_the_caller(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """Clear the caller's MAILFATHOM_* settings and run in an empty directory (returned),
    with ``XDG_STATE_HOME`` inside it (where ``mailfathom web`` keeps the token it makes).

    Subprocesses inherit all three: ``PYTHONPATH`` and ``MAILFATHOM_SCREENSHOTS`` are made
    absolute first, since they were given relative to where pytest started.
    """
    for name in list(os.environ):
        if name.startswith("MAILFATHOM_") and name not in KEPT_VARIABLES:
            monkeypatch.delenv(name)
    for name in ("PYTHONPATH", "MAILFATHOM_SCREENSHOTS"):
        value = os.environ.get(name)
        if value:
            monkeypatch.setenv(name, _absolute(value))
    workdir = tmp_path_factory.mktemp("cwd")
    monkeypatch.chdir(workdir)
    monkeypatch.setenv("XDG_STATE_HOME", str(workdir / ".state"))
    return workdir


@cache
def postgres_problem() -> str | None:
    """Why PostgreSQL cannot be used for tests, or None when it can."""
    try:
        with psycopg.connect(POSTGRES_URL, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        return f"no PostgreSQL at {POSTGRES_URL} ({exc}); set MAILFATHOM_TEST_POSTGRES_URL"
    return None


def require_postgres() -> None:
    """Skip (locally) or fail (in CI) when PostgreSQL is unreachable."""
    problem = postgres_problem()
    if problem is not None:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"CI requires PostgreSQL: {problem}")
        pytest.skip(problem)


@pytest.fixture
def postgres_schema_url() -> Iterator[str]:
    """A URL whose connections live in a fresh schema of their own, dropped afterwards."""
    require_postgres()
    schema = f"mf_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    separator = "&" if "?" in POSTGRES_URL else "?"
    yield f"{POSTGRES_URL}{separator}options={quote(f'-csearch_path={schema}')}"
    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


@pytest.fixture(params=STORES)
def database_url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A fresh, empty database of each kind."""
    if request.param == "postgresql":
        url: str = request.getfixturevalue("postgres_schema_url")
        return url
    path = tmp_path_factory.mktemp("db") / "mailfathom.db"
    return f"sqlite:///{path}"


@pytest.fixture
def clock() -> FakeClock:
    """Time that moves only when a test says so."""
    return FakeClock()


@pytest.fixture
def mf(database_url: str, clock: FakeClock) -> Iterator[MailFathom]:
    """A migrated app on a fresh database, with the fake clock."""
    app = MailFathom(database_url, clock=clock)
    app.migrate()
    yield app
    app.close()
