"""A PostgreSQL URL the server refuses for good (no such database, no such role, a wrong
password) fails at start-up and in one-shot commands at once, saying what to fix, instead
of being waited on and retried like an outage."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from click.testing import CliRunner

from conftest import POSTGRES_URL, require_postgres
from mailfathom import ConfigurationError, MailFathom
from mailfathom.cli import cli
from private_cluster import PrivateCluster, private_cluster
from worker_processes import run_cli

#: Far below the 10 s an unreachable server is waited on: refused means answered at once.
_AT_ONCE = 3.0


def _with(url: str, *, user: str | None = None, database: str | None = None) -> str:
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    netloc = f"{user or parts.username}@{host}" if (user or parts.username) else host
    path = f"/{database}" if database is not None else parts.path
    return urlunsplit((parts.scheme, netloc, path, parts.query, parts.fragment))


@pytest.fixture
def no_such_database() -> str:
    require_postgres()
    return _with(POSTGRES_URL, database=f"nosuchdb_{uuid.uuid4().hex[:8]}")


@pytest.fixture
def no_such_role() -> str:
    require_postgres()
    return _with(POSTGRES_URL, user=f"nosuchrole_{uuid.uuid4().hex[:8]}")


def _fails_at_once(url: str, *, fix: str) -> ConfigurationError:
    started = time.monotonic()
    with pytest.raises(ConfigurationError) as refused, MailFathom(url) as mf:
        mf.migrate()
    assert time.monotonic() - started < _AT_ONCE
    message = str(refused.value)
    assert fix in message and "not an outage" in message
    assert "reconnects on its own" not in message
    return refused.value


def test_a_missing_database_fails_at_once_saying_to_create_it(no_such_database: str) -> None:
    refused = _fails_at_once(no_such_database, fix="the database does not exist: create it")
    assert urlsplit(no_such_database).path.lstrip("/") in str(refused)


def test_a_missing_role_fails_at_once_saying_to_create_it(no_such_role: str) -> None:
    refused = _fails_at_once(no_such_role, fix="the server does not accept this role")
    assert "CREATE ROLE" in str(refused)


@pytest.mark.parametrize("command", [["migrate"], ["jobs", "list"], ["enqueue", "k"]])
def test_one_shot_commands_fail_at_once_with_exit_status_2(
    no_such_database: str, command: list[str]
) -> None:
    started = time.monotonic()
    result = CliRunner().invoke(cli, ["--database", no_such_database, *command])
    assert time.monotonic() - started < _AT_ONCE
    assert result.exit_code == 2, result.output
    assert "the database does not exist: create it" in result.output
    assert "unreachable" not in result.output


def test_a_worker_fails_at_start_up_at_once(no_such_role: str) -> None:
    """As a user starts it (a process of its own): the pool would wait 60 s for this URL."""
    started = time.monotonic()
    result = run_cli(
        "worker", "--app", "worker_app:mf", "--database", no_such_role + "?connect_timeout=60"
    )
    assert time.monotonic() - started < 45  # the interpreter's start-up, not the pool's wait
    assert result.returncode == 2, result.stderr
    assert "the server does not accept this role" in result.stderr
    assert "unreachable" not in result.stderr


@pytest.fixture(scope="module")
def cluster() -> Iterator[PrivateCluster]:
    made = private_cluster()
    yield made
    made.remove()


def test_a_wrong_password_fails_at_once_saying_to_fix_it(cluster: PrivateCluster) -> None:
    """A role that must give a password (scram-sha-256 in pg_hba.conf) and a wrong one."""
    with psycopg.connect(cluster.url, autocommit=True) as conn:
        conn.execute("CREATE ROLE ada LOGIN SUPERUSER PASSWORD 'right-one'")
    hba = cluster.data / "pg_hba.conf"
    hba.write_text("host all ada 127.0.0.1/32 scram-sha-256\n" + hba.read_text())
    cluster._pg_ctl("reload")
    wrong = _with(cluster.url, user="ada:wrong-one")
    deadline = time.monotonic() + 30
    while True:  # the reload is asynchronous: wait until the server asks for the password
        try:
            psycopg.connect(wrong, connect_timeout=2).close()
        except psycopg.OperationalError as exc:
            if "password" in str(exc):
                break
        assert time.monotonic() < deadline, "pg_hba.conf was not reloaded"
        time.sleep(0.05)
    refused = _fails_at_once(wrong, fix="the password was refused")
    assert "wrong-one" not in str(refused)
    right = _with(cluster.url, user="ada:right-one")
    with MailFathom(right) as mf:  # the right password passes the same check
        assert mf.migrate()
        assert sum(mf.jobs.counts().values()) == 0
