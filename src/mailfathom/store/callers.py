"""The application's own connection, as ``connection=`` receives it.

Internal. ``connection=`` takes a DB-API connection (``sqlite3`` / ``psycopg``) or a
SQLAlchemy ``Session``, ``scoped_session`` or ``Connection`` (sync): those are
unwrapped here to the driver connection underneath, so the write joins the
transaction SQLAlchemy holds open and commits or rolls back with it. The async API
passes a :class:`JoinedTransaction` instead: a write it has already opened on the
caller's async connection (:mod:`mailfathom.store.async_callers`). SQLAlchemy is
looked at only when the application has already imported it: this module never
imports it first, and mailfathom does not depend on it.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager

from mailfathom.errors import InvalidInput
from mailfathom.store.database import Cursor

__all__ = ["ASYNC_HINT", "JoinedTransaction", "driver_connection", "is_async"]

#: Added to the sync path's refusal of an async connection: where it is taken.
ASYNC_HINT = (
    "; an async connection or session goes to the async API: "
    "await AsyncMailFathom(mf).enqueue(..., connection=...)"
)


def is_async(connection: object) -> bool:
    """Whether ``connection`` looks like an async driver's connection or session (a
    coroutine method ``commit``), which only the async API takes."""
    commit = getattr(type(connection), "commit", None)
    return commit is not None and inspect.iscoroutinefunction(commit)


class JoinedTransaction:
    """The caller's async transaction, checked, as ``connection=``.

    The async API (:mod:`mailfathom.store.async_callers`) checks the caller's connection
    and passes this in place of it: ``transaction()`` then opens each write with
    :meth:`write_for` (a savepoint in the caller's transaction, each statement awaited on
    the loop), so the sync implementation writes there, as it would on a sync
    connection, round trip for round trip."""

    __slots__ = ("dialect", "write")

    def __init__(
        self, write: Callable[[bool], AbstractContextManager[Cursor]], dialect: str
    ) -> None:
        self.write = write
        self.dialect = dialect

    def write_for(self, dialect: str, *, pipelined: bool) -> AbstractContextManager[Cursor]:
        """One write's cursor (``pipelined`` as ``transaction()`` takes it), once the store
        is known to be of the same dialect."""
        if dialect != self.dialect:  # pragma: no cover - async_callers checks it first
            raise InvalidInput(f"connection= is a {self.dialect} connection: not this store's")
        return self.write(pipelined)


def driver_connection(connection: object) -> object:
    """The DB-API connection under ``connection`` (itself when it is one already).

    A SQLAlchemy ``Session`` gives the connection of its transaction (begun if need be);
    a ``Connection`` outside a transaction begins one, as its first statement would, so
    that ``conn.commit()`` / ``conn.rollback()`` decide the write's fate.
    """
    if "sqlalchemy" not in sys.modules:
        return connection
    # here, not at the top: SQLAlchemy is optional (the sqlalchemy extra)
    from sqlalchemy.engine import Connection
    from sqlalchemy.orm import Session, scoped_session

    if isinstance(connection, Session | scoped_session):
        connection = connection.connection()
    if not isinstance(connection, Connection):
        return connection
    if connection.closed or connection.invalidated:
        raise InvalidInput(
            "connection= is a closed SQLAlchemy Connection: pass one that is open, inside "
            "the transaction the job belongs to"
        )
    if not connection.in_transaction():
        connection.begin()
    driver = connection.connection.dbapi_connection
    if driver is None:  # pragma: no cover - an open, valid connection always has one
        raise InvalidInput("connection= has no driver connection: pass an open one")
    return driver
