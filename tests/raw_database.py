"""A connection of the test's own to an app's database, for tests that check the database
itself: its schema, its triggers, the raw rows.

Such a test reads and writes rows the public API never shows or refuses to make; it does
so on connections it opens itself (from the app's URL), never through the app's store.
Each helper opens a database, uses it and closes it: nothing is shared with the app but
the file or server.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

import psycopg

from mailfathom import MailFathom
from mailfathom.store import open_store
from mailfathom.store.database import Cursor, Database
from mailfathom.store.sql_store import SqlStore

__all__ = [
    "app_connection",
    "own_database",
    "own_store",
    "raw_reading",
    "raw_time_param",
    "raw_transaction",
]


@contextmanager
def own_database(mf: MailFathom) -> Iterator[Database]:
    """A database of the test's own on ``mf``'s URL (connections of its own), closed after."""
    store = open_store(
        mf.settings.database_url, sqlite_busy_timeout=mf.settings.sqlite_busy_timeout
    )
    try:
        yield store.db
    finally:
        store.close()


@contextmanager
def app_connection(mf: MailFathom, database_url: str, *setup: str) -> Iterator[Any]:
    """A driver connection to ``mf``'s database (``sqlite3`` or ``psycopg``, in their
    default transaction modes), as an application holds its own for ``connection=``;
    the ``setup`` statements (the application's tables) run and are committed first.
    Closed after."""
    conn: Any
    if mf.store.dialect == "sqlite":
        conn = sqlite3.connect(database_url.removeprefix("sqlite:///"))
    else:
        conn = psycopg.connect(database_url)
    try:
        for statement in setup:
            conn.execute(statement)
        if setup:
            conn.commit()
        yield conn
    finally:
        conn.close()


@contextmanager
def own_store(mf: MailFathom) -> Iterator[SqlStore]:
    """A store of the test's own on ``mf``'s URL (connections of its own), closed after: for
    a test that drives one repository's statements directly (a half-done delivery attempt)."""
    store = open_store(
        mf.settings.database_url, sqlite_busy_timeout=mf.settings.sqlite_busy_timeout
    )
    try:
        yield store
    finally:
        store.close()


@contextmanager
def raw_reading(mf: MailFathom) -> Iterator[Cursor]:
    """A read-only transaction on ``mf``'s database, on a connection of the test's own."""
    with own_database(mf) as db, db.reading() as cursor:
        yield cursor


@contextmanager
def raw_transaction(mf: MailFathom) -> Iterator[Cursor]:
    """A write transaction on ``mf``'s database, on a connection of the test's own;
    committed at the end of the block, rolled back (and the error raised) on an error."""
    with own_database(mf) as db, db.transaction() as cursor:
        yield cursor


def raw_time_param(mf: MailFathom, moment: datetime | None) -> Any:
    """``moment`` as ``mf``'s database stores an instant (text on SQLite, a timestamp on
    PostgreSQL), to write it into a raw row."""
    with own_database(mf) as db:
        return db.time_param(moment)
