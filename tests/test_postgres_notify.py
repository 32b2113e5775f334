"""PostgreSQL wake-ups: ``NOTIFY`` is sent when a job commits, never for a rolled-back one.

``wait_for_jobs`` is what an idle worker blocks on. These tests drive it directly
with the application's own ``psycopg.Connection`` (transactional enqueue).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from urllib.parse import quote

import psycopg
import pytest

from conftest import POSTGRES_URL, require_postgres
from mailfathom import JobState, MailFathom


@pytest.fixture
def app(postgres_schema_url: str) -> Iterator[MailFathom]:
    """A migrated app on a fresh schema, already listening."""
    with MailFathom(postgres_schema_url) as made:
        made.migrate()
        assert made.store.wait_for_jobs(0) is True, "a fresh LISTEN must ask the caller to look"
        yield made


@pytest.fixture
def app_conn(postgres_schema_url: str) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    """The application's own connection, in the same schema."""
    with psycopg.connect(postgres_schema_url) as conn:
        yield conn


@pytest.fixture
def other_schema_url() -> Iterator[str]:
    """A second mailfathom schema in the same database."""
    require_postgres()
    schema = f"mf_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    separator = "&" if "?" in POSTGRES_URL else "?"
    yield f"{POSTGRES_URL}{separator}options={quote(f'-csearch_path={schema}')}"
    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


def test_notify_arrives_on_commit_and_not_before(
    app: MailFathom, app_conn: psycopg.Connection[tuple[object, ...]]
) -> None:
    job = app.enqueue("orders.confirm", {"order": 1}, connection=app_conn)
    assert app.store.wait_for_jobs(0.3) is False, "woken before the caller committed"
    app_conn.commit()
    started = time.monotonic()
    assert app.store.wait_for_jobs(5) is True
    assert time.monotonic() - started < 1
    assert app.jobs.get(job.id).state is JobState.PENDING


def test_no_notify_for_a_rolled_back_enqueue(
    app: MailFathom, app_conn: psycopg.Connection[tuple[object, ...]]
) -> None:
    app.enqueue_many("orders.confirm", [{"order": 1}, {"order": 2}], connection=app_conn)
    app_conn.rollback()
    assert app.store.wait_for_jobs(0.5) is False
    assert sum(app.jobs.counts().values()) == 0


def test_no_notify_when_every_key_already_existed(app: MailFathom) -> None:
    app.enqueue_many("k", [{}, {}], idempotency_keys=["a", "b"])
    assert app.store.wait_for_jobs(5) is True
    again = app.enqueue_many("k", [{}, {}], idempotency_keys=["b", "a"])
    assert [job.created for job in again] == [False, False]
    assert app.store.wait_for_jobs(0.3) is False
    app.enqueue_many("k", [{}, {}], idempotency_keys=["a", "c"])
    assert app.store.wait_for_jobs(5) is True


def test_another_schemas_jobs_do_not_wake_this_one(app: MailFathom, other_schema_url: str) -> None:
    with MailFathom(other_schema_url) as other:
        other.migrate()
        other.enqueue("k")
        assert app.store.wait_for_jobs(0.3) is False
        app.enqueue("k")
        assert app.store.wait_for_jobs(5) is True


def test_a_killed_listen_connection_is_reopened(app: MailFathom) -> None:
    listener = app.store.db._listener  # type: ignore[attr-defined]
    with psycopg.connect(POSTGRES_URL, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (listener.info.backend_pid,))
    assert app.store.wait_for_jobs(5) is True, "reopened: what was announced meanwhile is lost"
    assert app.store.wait_for_jobs(0.2) is False
    app.enqueue("k")
    assert app.store.wait_for_jobs(5) is True
