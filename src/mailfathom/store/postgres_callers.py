"""Writes on a PostgreSQL connection the application owns (``connection=``).

Internal: not part of the public API. The sync path
(:meth:`~mailfathom.store.postgres.PostgresDatabase.transaction` with ``connection=``)
and the async one (:mod:`mailfathom.store.async_callers`) share what is here, so that
both write on a caller's connection alike: the check that the connection is on this
store's database and schema, made once per connection (:class:`CallersConnections`);
the savepoint each write opens in the caller's transaction, sent with the write in
pipeline mode (:func:`pipelined_write`, :func:`async_pipelined_write`); and a cursor
that reads and binds as the pooled ones do, whatever the application did to its
connection (:func:`callers_cursor`, :func:`callers_loaders`). It is apart from
:mod:`mailfathom.store.postgres`, which owns the pool, because these are rules about a
connection mailfathom does not own.

Prepared statements. A framework may keep psycopg from preparing anything on its
connections (Django leaves ``prepare_threshold`` at None): while a write of ours runs
there, the statements it asks to prepare (``execute(..., prepare=True)``: the record
of an outgoing email) are prepared all the same, as on mailfathom's own pooled
connections, and nothing of the caller's is (:func:`statements_prepared`). Planning
the record's statement afresh costs the server more than running it.
"""

from __future__ import annotations

import weakref
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import (
    AbstractContextManager,
    AsyncExitStack,
    ExitStack,
    asynccontextmanager,
    contextmanager,
    suppress,
)
from typing import Any

import psycopg
from psycopg.pq import Format
from psycopg.rows import dict_row

from mailfathom.errors import InvalidInput
from mailfathom.store.callers import ASYNC_HINT, is_async
from mailfathom.store.database import Cursor

__all__ = [
    "WHERE",
    "AsyncEnding",
    "CallersConnections",
    "Ending",
    "async_pipelined_write",
    "callers_cursor",
    "callers_loaders",
    "pipelined_write",
    "statements_prepared",
    "where",
]

#: Where a connection is open: its database and schema (``search_path``).
WHERE = "SELECT current_database() AS database, current_schema() AS schema"


class CallersConnections:
    """The callers' connections found on one store's database and schema.

    A connection's database never changes, and its schema (search_path) is set when it
    connects: each connection is checked once, and forgotten with it. ``reading`` gives
    a cursor on the store's own pool, to read the store's place once."""

    def __init__(self, reading: Callable[[], AbstractContextManager[Cursor]]) -> None:
        self._reading = reading
        self._identity: tuple[str, str] | None = None  # current_database(), current_schema()
        self._checked: weakref.WeakKeyDictionary[object, tuple[str, str]] = (
            weakref.WeakKeyDictionary()
        )

    def checked(self, connection: object) -> psycopg.Connection[Any]:
        """The caller's connection, once it is known to be on this store's database."""
        if not isinstance(connection, psycopg.Connection):
            raise InvalidInput(
                f"connection= must be a psycopg.Connection (or a SQLAlchemy Session or "
                f"Connection on the postgresql+psycopg driver) for a PostgreSQL store, not "
                f"{type(connection).__name__}" + ASYNC_HINT * is_async(connection)
            )
        # The check is made once per connection. Except until a non-autocommit
        # connection has begun its transaction: then the check is what begins it
        # (psycopg sends BEGIN first), so the write below is a savepoint inside it rather
        # than a transaction of its own that psycopg would commit on the caller's behalf.
        idle = connection.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        known = self._checked.get(connection)
        theirs = (
            where(connection) if known is None or (idle and not connection.autocommit) else known
        )
        self.check_place(theirs)
        self._checked[connection] = theirs
        return connection

    def known_place(self, connection: object) -> tuple[str, str] | None:
        """Where a caller's connection (sync or async) was found open, if it was checked
        already: its database never changes, and its schema is set when it connects."""
        return self._checked.get(connection)

    def remember_place(self, connection: object, place: tuple[str, str]) -> None:
        """Keep ``place`` (checked) as long as ``connection`` lives."""
        self._checked[connection] = place

    @property
    def known_identity(self) -> tuple[str, str] | None:
        """:meth:`identity` when it was read already, else None (no round trip)."""
        return self._identity

    def identity(self) -> tuple[str, str]:
        """The store's ``(current_database(), current_schema())``, read once."""
        ours = self._identity
        if ours is None:
            with self._reading() as cur:
                cur.execute(WHERE)
                row = cur.fetchone()
            ours = self._identity = (row["database"], row["schema"])
        return ours

    def check_place(self, theirs: tuple[str, str]) -> None:
        """Refuse a caller's connection open on ``theirs`` (database, schema) unless it is
        this store's (the sync and the async ``connection=`` alike)."""
        ours = self.identity()
        if theirs != ours:
            raise InvalidInput(
                f"connection= is open on database {theirs[0]!r} schema {theirs[1]!r}, not on "
                f"this store's database {ours[0]!r} schema {ours[1]!r}: pass a connection "
                "to mailfathom's database with the same search_path"
            )


def where(connection: psycopg.Connection[Any]) -> tuple[str, str]:
    """The database and schema a caller's connection is open on (:data:`WHERE`)."""
    try:
        with connection.cursor(row_factory=dict_row) as cur:
            cur.execute(WHERE)
            row = cur.fetchone()
    except psycopg.Error as exc:
        raise InvalidInput(f"connection= is not usable: {exc}") from exc
    if row is None:  # pragma: no cover - the query always returns one row
        raise InvalidInput("connection= did not say which database it is on")
    return row["database"], row["schema"]


#: Types whose loaders a framework may replace on its connections (Django reads jsonb
#: as text and timestamptz in its TIME_ZONE); the caller's cursor gets psycopg's own back.
_OUR_LOADERS = ("json", "jsonb", "timestamptz")


def callers_cursor(connection: psycopg.Connection[Any]) -> psycopg.Cursor[dict[str, Any]]:
    """A cursor on the caller's connection that reads and binds as our pooled ones do:
    a plain server-binding cursor (not the connection's ``cursor_factory``, which may
    bind on the client) with psycopg's default loaders for the types we read back."""
    cursor = psycopg.Cursor(connection, row_factory=dict_row)
    callers_loaders(cursor)
    return cursor


def callers_loaders(cursor: psycopg.Cursor[Any] | psycopg.AsyncCursor[Any]) -> None:
    """Give a cursor on a caller's connection psycopg's own loaders for the types we read
    back (a framework may have replaced them on its connections)."""
    for name in _OUR_LOADERS:
        info = psycopg.adapters.types[name]
        for fmt in (Format.TEXT, Format.BINARY):
            loader = psycopg.adapters.get_loader(info.oid, fmt)
            if loader is not None:
                cursor.adapters.register_loader(info.oid, loader)


#: psycopg's ``prepare_threshold`` while a write of ours runs on a connection that has none:
#: never reached, so only the statements the write asks to prepare are prepared.
ONLY_ASKED = 2**62


@contextmanager
def statements_prepared(
    connection: psycopg.Connection[Any] | psycopg.AsyncConnection[Any],
) -> Iterator[None]:
    """While the block runs, the statements executed with ``prepare=True`` on the caller's
    connection are prepared (or run prepared) even when the caller turned preparing off
    (``prepare_threshold=None``, Django's default); the caller's own statements, before
    and after, stay unprepared. A connection that prepares already is left as it is."""
    if connection.prepare_threshold is not None:
        yield
        return
    connection.prepare_threshold = ONLY_ASKED
    try:
        yield
    finally:
        connection.prepare_threshold = None


class Ending:
    """How a pipelined write on a caller's connection ends: its release (or commit) is
    sent and the pipeline closed (one sync, every result read), once — by the write's
    last statements (the cursor's ``execute_each`` with ``last=True``, in the same round
    trip as them) or when the block ends."""

    def __init__(self, connection: psycopg.Connection[Any], end: str) -> None:
        self._connection = connection
        self._end = end
        #: The pipeline the write runs in, closed by :meth:`send`.
        self.pipeline = ExitStack()
        self._sent = False

    def send(self) -> None:
        """Send the end of the write, close the pipeline and read every result (raises
        the first statement's error, if one failed)."""
        if self._sent:
            return
        self._sent = True
        self._connection.execute(self._end)
        self.pipeline.close()


@contextmanager
def pipelined_write(connection: psycopg.Connection[Any]) -> Iterator[Ending]:
    """A savepoint in the caller's open transaction (on an autocommit connection outside
    one: BEGIN … COMMIT), its statements sent in pipeline mode: the savepoint goes with
    the first statement, the release with the final sync. A one-statement write is two
    round trips (psycopg's ``transaction()`` waits for each of them instead), or one when
    its statements are sent as the last of the write (``execute_each(..., last=True)``):
    then the release goes with them and their rows are read after it."""
    start, end, undo = _write_bounds(connection)
    try:
        ending = Ending(connection, end)
        with ending.pipeline:
            ending.pipeline.enter_context(connection.pipeline())
            connection.execute(start)
            yield ending
            ending.send()
    except BaseException:
        if connection.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            with suppress(psycopg.Error):
                for statement in undo:
                    connection.execute(statement)
        raise


class AsyncEnding:
    """:class:`Ending` on a caller's async connection: the same statements, awaited."""

    def __init__(self, connection: psycopg.AsyncConnection[Any], end: str) -> None:
        self._connection = connection
        self._end = end
        #: The pipeline the write runs in, closed by :meth:`send`.
        self.pipeline = AsyncExitStack()
        self._sent = False

    async def send(self) -> None:
        """Send the end of the write, close the pipeline and read every result."""
        if self._sent:
            return
        self._sent = True
        await self._connection.execute(self._end)
        await self.pipeline.aclose()


@asynccontextmanager
async def async_pipelined_write(
    connection: psycopg.AsyncConnection[Any],
) -> AsyncIterator[AsyncEnding]:
    """:func:`pipelined_write` on a caller's async connection (the async API's): the
    same statements, awaited, in the same round trips."""
    start, end, undo = _write_bounds(connection)
    try:
        ending = AsyncEnding(connection, end)
        async with ending.pipeline:
            await ending.pipeline.enter_async_context(connection.pipeline())
            await connection.execute(start)
            yield ending
            await ending.send()
    except BaseException:
        if connection.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            with suppress(psycopg.Error):
                for statement in undo:
                    await connection.execute(statement)
        raise


def _write_bounds(
    connection: psycopg.Connection[Any] | psycopg.AsyncConnection[Any],
) -> tuple[str, str, list[str]]:
    """How a write on a caller's connection starts, ends and is undone: a savepoint in
    its open transaction, else (autocommit, outside one) a transaction of its own."""
    if connection.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
        return "BEGIN", "COMMIT", ["ROLLBACK"]
    return (
        "SAVEPOINT mf_write",
        "RELEASE SAVEPOINT mf_write",
        ["ROLLBACK TO SAVEPOINT mf_write", "RELEASE SAVEPOINT mf_write"],
    )
