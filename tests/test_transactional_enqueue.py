"""``connection=``: the job is written in the application's own transaction."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from mailfathom import InvalidInput, MailFathom


@pytest.fixture
def app_conn(mf: MailFathom, database_url: str) -> Iterator[Any]:
    """The application's own connection to mailfathom's database, with an orders table."""
    conn: Any
    if mf.store.dialect == "sqlite":
        conn = sqlite3.connect(database_url.removeprefix("sqlite:///"))
    else:
        conn = psycopg.connect(database_url)
    conn.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY)")
    conn.commit()
    yield conn
    conn.close()


def _orders(mf: MailFathom) -> int:
    with mf.store.db.reading() as cur:
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
