"""``connection=``: the job is written in the application's own transaction."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from mailfathom import FakeClock, InvalidInput, MailFathom


def _sqlite_path(mf: MailFathom) -> str:
    if mf.store.dialect != "sqlite":
        pytest.skip("this test drives a sqlite3.Connection")
    return mf.settings.database_url.removeprefix("sqlite:///")


def test_rolled_back_transaction_leaves_no_job(mf: MailFathom) -> None:
    conn = sqlite3.connect(_sqlite_path(mf))
    conn.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY)")
    conn.commit()
    conn.execute("INSERT INTO orders (id) VALUES (1)")
    job = mf.enqueue("orders.confirm", {"order": 1}, connection=conn)
    assert job.created
    conn.rollback()
    conn.close()
    assert sum(mf.jobs.counts().values()) == 0


def test_committed_transaction_makes_job_and_data_visible(mf: MailFathom) -> None:
    conn = sqlite3.connect(_sqlite_path(mf))
    conn.execute("CREATE TABLE orders (id INTEGER PRIMARY KEY)")
    conn.execute("INSERT INTO orders (id) VALUES (1)")
    jobs = mf.enqueue_many("orders.confirm", [{"order": 1}, {"order": 2}], connection=conn)
    conn.commit()
    conn.close()
    assert [mf.jobs.get(j.id).payload for j in jobs] == [{"order": 1}, {"order": 2}]


def test_connection_to_another_database_is_refused(mf: MailFathom, tmp_path: Path) -> None:
    _sqlite_path(mf)
    other = sqlite3.connect(tmp_path / "other.db")
    with pytest.raises(InvalidInput, match="not on"):
        mf.enqueue("k", connection=other)
    other.close()


def test_connection_of_the_wrong_type_is_refused(mf: MailFathom) -> None:
    with pytest.raises(InvalidInput, match="connection="):
        mf.enqueue("k", connection=object())


def test_nothing_is_committed_on_the_callers_behalf(mf: MailFathom, clock: FakeClock) -> None:
    conn = sqlite3.connect(_sqlite_path(mf))
    mf.enqueue("k", connection=conn)
    assert conn.in_transaction
    conn.rollback()
    conn.close()
