"""``connection=``: the job is written in the application's own transaction."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from mailfathom import FakeClock, InvalidInput, MailFathom, StoreError
from raw_database import app_connection, raw_reading


@pytest.fixture
def app_conn(mf: MailFathom, database_url: str) -> Iterator[Any]:
    """The application's own connection to mailfathom's database, with an orders table."""
    with app_connection(mf, database_url, "CREATE TABLE orders (id INTEGER PRIMARY KEY)") as conn:
        yield conn


def _orders(mf: MailFathom) -> int:
    with raw_reading(mf) as cur:
        cur.execute("SELECT count(*) AS n FROM orders")
        return int(cur.fetchone()["n"])


def test_rolled_back_transaction_leaves_no_job(mf: MailFathom, app_conn: Any) -> None:
    app_conn.execute("INSERT INTO orders (id) VALUES (1)")
    job = mf.enqueue("orders.confirm", {"order": 1}, connection=app_conn)
    assert job.created
    app_conn.rollback()
    assert sum(mf.jobs.counts().values()) == 0
    assert _orders(mf) == 0


def test_committed_transaction_makes_job_and_data_visible(mf: MailFathom, app_conn: Any) -> None:
    app_conn.execute("INSERT INTO orders (id) VALUES (1)")
    jobs = mf.enqueue_many("orders.confirm", [{"order": 1}, {"order": 2}], connection=app_conn)
    assert sum(mf.jobs.counts().values()) == 0, "visible before the caller committed"
    app_conn.commit()
    assert [mf.jobs.get(j.id).payload for j in jobs] == [{"order": 1}, {"order": 2}]
    assert _orders(mf) == 1


def test_nothing_is_committed_on_the_callers_behalf(mf: MailFathom, app_conn: Any) -> None:
    mf.enqueue("k", connection=app_conn)
    if isinstance(app_conn, sqlite3.Connection):
        assert app_conn.in_transaction
    else:
        assert app_conn.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
    app_conn.rollback()
    assert sum(mf.jobs.counts().values()) == 0


def test_connection_to_another_sqlite_database_is_refused(tmp_path: Path) -> None:
    with MailFathom(f"sqlite:///{tmp_path / 'mf.db'}") as app:
        app.migrate()
        other = sqlite3.connect(tmp_path / "other.db")
        with pytest.raises(InvalidInput, match="not on"):
            app.enqueue("k", connection=other)
        other.close()
        assert sum(app.jobs.counts().values()) == 0


def test_connection_of_the_wrong_type_is_refused(mf: MailFathom) -> None:
    with pytest.raises(InvalidInput, match="connection="):
        mf.enqueue("k", connection=object())


def _install_boom(conn: Any) -> None:
    """A trigger that makes the store's insert of a job whose payload has a "boom" key
    fail: a store-level failure in the middle of a batch."""
    if isinstance(conn, sqlite3.Connection):
        conn.execute(
            "CREATE TRIGGER boom BEFORE INSERT ON mf_jobs "
            "WHEN json_extract(NEW.payload, '$.boom') IS NOT NULL "
            "BEGIN SELECT RAISE(ABORT, 'boom'); END"
        )
    else:
        conn.execute(
            "CREATE FUNCTION boom() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            "IF NEW.payload::jsonb ? 'boom' THEN RAISE EXCEPTION 'boom'; END IF; RETURN NEW; END $$"
        )
        conn.execute(
            "CREATE TRIGGER boom BEFORE INSERT ON mf_jobs FOR EACH ROW EXECUTE FUNCTION boom()"
        )
    conn.commit()


@pytest.fixture
def autocommit_conn(mf: MailFathom, database_url: str) -> Iterator[Any]:
    """The application's own autocommit connection to mailfathom's database."""
    conn: Any
    if mf.store.dialect == "sqlite":
        conn = sqlite3.connect(database_url.removeprefix("sqlite:///"), isolation_level=None)
    else:
        conn = psycopg.connect(database_url, autocommit=True)
    _install_boom(conn)
    yield conn
    conn.close()


def test_a_batch_on_an_autocommit_connection_is_all_or_nothing(
    mf: MailFathom, autocommit_conn: Any
) -> None:
    with pytest.raises(StoreError, match="boom"):
        mf.enqueue_many("k", [{"n": 1}, {"n": 2}, {"boom": 3}], connection=autocommit_conn)
    assert sum(mf.jobs.counts().values()) == 0
    jobs = mf.enqueue_many("k", [{"n": 1}, {"n": 2}], connection=autocommit_conn)
    assert [mf.jobs.get(j.id).payload for j in jobs] == [{"n": 1}, {"n": 2}], "committed"


def test_a_failed_batch_inside_the_callers_transaction_keeps_the_callers_work(
    mf: MailFathom, app_conn: Any
) -> None:
    _install_boom(app_conn)
    app_conn.execute("INSERT INTO orders (id) VALUES (1)")
    mf.enqueue("k", {"n": 1}, connection=app_conn)
    with pytest.raises(StoreError, match="boom"):
        mf.enqueue_many("k", [{"n": 2}, {"boom": 3}], connection=app_conn)
    mf.enqueue("k", {"n": 4}, connection=app_conn)
    assert sum(mf.jobs.counts().values()) == 0, "visible before the caller committed"
    app_conn.commit()
    assert _orders(mf) == 1
    payloads = [job.payload for job in mf.jobs.list()]
    assert sorted(p["n"] for p in payloads) == [1, 4]


def test_connection_to_another_postgresql_schema_is_refused(
    postgres_schema_url: str, clock: FakeClock
) -> None:
    with MailFathom(postgres_schema_url, clock=clock) as app:
        app.migrate()
        other = psycopg.connect(postgres_schema_url.partition("?")[0], autocommit=True)
        try:
            with pytest.raises(InvalidInput, match="not on"):
                app.enqueue("k", connection=other)
        finally:
            other.close()
        assert sum(app.jobs.counts().values()) == 0
