"""``record(..., connection=)``: the record and its delivery job live or die with the
application's own transaction."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from email.message import EmailMessage
from typing import Any

import psycopg
import pytest

from mailfathom import MailFathom, StoreError
from raw_database import app_connection, raw_reading


@pytest.fixture
def app_conn(mf: MailFathom, database_url: str) -> Iterator[Any]:
    """The application's own connection to mailfathom's database, with a users table."""
    with app_connection(mf, database_url, "CREATE TABLE users (id INTEGER PRIMARY KEY)") as conn:
        yield conn


def _welcome(user: int) -> EmailMessage:
    msg = EmailMessage()
    msg["From"] = "app@example.com"
    msg["To"] = f"user{user}@example.com"
    msg["Subject"] = "Welcome"
    msg.set_content("Welcome aboard.")
    return msg


def _users(mf: MailFathom) -> int:
    with raw_reading(mf) as cur:
        cur.execute("SELECT count(*) AS n FROM users")
        return int(cur.fetchone()["n"])


def test_rolled_back_transaction_leaves_no_record_and_no_job(mf: MailFathom, app_conn: Any) -> None:
    app_conn.execute("INSERT INTO users (id) VALUES (1)")
    recorded = mf.outbox.record(_welcome(1), idempotency_key="welcome:1", connection=app_conn)
    assert recorded.created
    assert [r.address for r in recorded.recipients] == ["user1@example.com"]
    app_conn.rollback()
    assert mf.outbox.list() == []
    assert sum(mf.jobs.counts().values()) == 0
    assert _users(mf) == 0


def test_committed_transaction_makes_record_job_and_data_visible(
    mf: MailFathom, app_conn: Any
) -> None:
    app_conn.execute("INSERT INTO users (id) VALUES (1)")
    recorded = mf.outbox.record(_welcome(1), idempotency_key="welcome:1", connection=app_conn)
    assert mf.outbox.list() == [], "visible before the caller committed"
    assert sum(mf.jobs.counts().values()) == 0
    if isinstance(app_conn, sqlite3.Connection):
        assert app_conn.in_transaction
    else:
        assert app_conn.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
    app_conn.commit()
    stored = mf.outbox.get(recorded.id)
    assert stored.message_id == recorded.message_id
    assert mf.jobs.get(stored.job_id or 0).payload == {"email_id": recorded.id}
    assert _users(mf) == 1
    again = mf.outbox.record(_welcome(1), idempotency_key="welcome:1", connection=app_conn)
    assert not again.created and again.id == recorded.id
    app_conn.commit()
    assert sum(mf.jobs.counts().values()) == 1


def test_record_on_an_autocommit_connection_is_all_or_nothing(
    mf: MailFathom, database_url: str
) -> None:
    conn: Any
    if mf.store.dialect == "sqlite":
        conn = sqlite3.connect(database_url.removeprefix("sqlite:///"), isolation_level=None)
        conn.execute(
            "CREATE TRIGGER no_jobs BEFORE INSERT ON mf_jobs BEGIN SELECT RAISE(ABORT, 'no'); END"
        )
    else:
        conn = psycopg.connect(database_url, autocommit=True)
        conn.execute(
            "CREATE FUNCTION no_jobs() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            "RAISE EXCEPTION 'no'; END $$"
        )
        conn.execute(
            "CREATE TRIGGER no_jobs BEFORE INSERT ON mf_jobs "
            "FOR EACH ROW EXECUTE FUNCTION no_jobs()"
        )
    try:
        with pytest.raises(StoreError):
            mf.outbox.record(_welcome(1), connection=conn)
        assert mf.outbox.list() == [], "the record was committed without its delivery job"
    finally:
        conn.close()


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
def test_a_failed_record_in_a_transaction_of_an_autocommit_connection_leaves_it_usable(
    mf: MailFathom, database_url: str
) -> None:
    """An autocommit connection inside ``with conn.transaction()`` is in the caller's
    transaction, not in autocommit: the record goes in a savepoint there, so its failure
    leaves the caller's transaction going (only outside one is the statement sent alone)."""
    conn = psycopg.connect(database_url, autocommit=True)
    try:
        conn.execute(
            "CREATE FUNCTION no_jobs() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            "RAISE EXCEPTION 'no'; END $$"
        )
        conn.execute(
            "CREATE TRIGGER no_jobs BEFORE INSERT ON mf_jobs "
            "FOR EACH ROW EXECUTE FUNCTION no_jobs()"
        )
        conn.execute("CREATE TABLE notes (n integer)")
        with conn.transaction():
            conn.execute("INSERT INTO notes VALUES (1)")
            with pytest.raises(StoreError):
                mf.outbox.record(_welcome(1), connection=conn)
            conn.execute("INSERT INTO notes VALUES (2)")  # the transaction goes on
        notes = conn.execute("SELECT n FROM notes ORDER BY n").fetchall()
        assert [n for (n,) in notes] == [1, 2]
        assert mf.outbox.list() == []
    finally:
        conn.close()
