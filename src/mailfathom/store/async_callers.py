"""The application's own async connection, as the async API's ``connection=`` receives it.

Internal: not part of the public API. :func:`joined` takes a psycopg
``AsyncConnection``, an ``aiosqlite`` connection, or a SQLAlchemy ``AsyncSession``,
``async_scoped_session`` or ``AsyncConnection`` on one of them; checks, with the sync
path's own rules, that it is on this store's database (on PostgreSQL once per
connection, as the sync path does); and yields a
:class:`~mailfathom.store.callers.JoinedTransaction` whose writes are savepoints inside
the caller's transaction, each statement awaited on the loop
(:func:`~mailfathom.store.bridge.await_on_loop`). On PostgreSQL each write opens its
savepoint as the sync path does, pipelined with the write where the sync one is, so
an async write costs the round trips of a sync one; on SQLite (no round trips) the
savepoint spans the call. The sync implementation,
run by :func:`~mailfathom.store.bridge.run_bridged`, writes through that cursor: one
implementation of the rules for both APIs. Nothing is committed on the caller's behalf.

Drivers and SQLAlchemy are looked at only when the application has imported them.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager, nullcontext, suppress
from typing import Any

from mailfathom.errors import InvalidInput, StoreError
from mailfathom.store.bridge import await_on_loop, entered_on_loop
from mailfathom.store.callers import JoinedTransaction
from mailfathom.store.database import Cursor, Database

__all__ = ["AwaitedCursor", "joined"]


@asynccontextmanager
async def joined(database: Database, connection: object) -> AsyncIterator[JoinedTransaction]:
    """The write, as a savepoint opened in the caller's async transaction: released when
    the block ends, rolled back to when it raises (the caller's transaction goes on)."""
    driver = await _async_driver_connection(connection)
    if _is(driver, "psycopg", "AsyncConnection"):
        if database.dialect != "postgresql":
            raise _wrong_store(driver, database.dialect)
        async with _psycopg(database, driver) as transaction:
            yield transaction
        return
    if _is(driver, "aiosqlite", "Connection"):
        if database.dialect != "sqlite":
            raise _wrong_store(driver, database.dialect)
        async with _aiosqlite(database, driver) as transaction:
            yield transaction
        return
    raise _refused(driver, database.dialect)


class AwaitedCursor:
    """An async driver's cursor as the sync :class:`~mailfathom.store.database.Cursor`
    the repositories call: each call awaits on the loop; driver errors become
    :class:`StoreError` as on the sync path."""

    def __init__(
        self, cursor: Any, error: type[Exception], convert: Callable[[Any], StoreError]
    ) -> None:
        self._cursor = cursor
        self._error = error
        self._convert = convert

    @property
    def rowcount(self) -> int:
        """Rows the last statement touched."""
        return int(self._cursor.rowcount)

    def execute(self, query: Any, params: Any = (), /) -> Any:
        """Run one statement, awaited on the loop."""
        try:
            await_on_loop(self._cursor.execute(query, params))
        except self._error as exc:
            raise self._convert(exc) from exc
        return self

    def fetchone(self) -> Any:
        """The next row, or None."""
        return await_on_loop(self._cursor.fetchone())

    def fetchall(self) -> list[Any]:
        """Every remaining row."""
        return list(await_on_loop(self._cursor.fetchall()))


class _PipelinedCursor(AwaitedCursor):
    """psycopg's async cursor: also runs one statement per parameter set, pipelined."""

    def __init__(
        self,
        cursor: Any,
        error: type[Exception],
        convert: Callable[[Any], StoreError],
        ending: Any = None,
    ) -> None:
        super().__init__(cursor, error, convert)
        self._ending = ending

    def execute_each(
        self, query: Any, params_seq: Sequence[Any], *, last: bool = False
    ) -> list[list[Any]]:
        """As the sync cursor's ``execute_each``: the rows of each run, in order; with
        ``last``, in a pipelined write, its end goes out with them (one round trip)."""
        if not params_seq:
            return []
        cursor = self._cursor
        ending = self._ending
        if last and ending is not None:
            return self._each_then_end(query, params_seq, ending)

        async def run() -> list[list[Any]]:
            await cursor.executemany(query, params_seq, returning=True)
            results = [await cursor.fetchall()]
            while cursor.nextset():
                results.append(await cursor.fetchall())
            return results

        try:
            return await_on_loop(run())
        except self._error as exc:
            raise self._convert(exc) from exc

    def _each_then_end(self, query: Any, params_seq: Sequence[Any], ending: Any) -> list[list[Any]]:
        """One cursor per statement, then the end of the write and one sync for all (as
        the sync cursor does)."""
        # here, not at the top: psycopg loads for PostgreSQL callers only
        import psycopg
        from psycopg.rows import dict_row

        from mailfathom.store.postgres_callers import callers_loaders

        connection = self._cursor.connection

        async def run() -> list[list[Any]]:
            cursors = []
            try:
                for params in params_seq:
                    cursor = psycopg.AsyncCursor(connection, row_factory=dict_row)
                    callers_loaders(cursor)
                    cursors.append(cursor)
                    await cursor.execute(query, params, prepare=True)
                await ending.send()
                return [await cursor.fetchall() for cursor in cursors]
            finally:
                for cursor in cursors:
                    await cursor.close()

        try:
            return await_on_loop(run())
        except self._error as exc:
            raise self._convert(exc) from exc


@asynccontextmanager
async def _psycopg(database: Any, connection: Any) -> AsyncIterator[JoinedTransaction]:
    # here, not at the top: psycopg (~0.4 s to import) loads for PostgreSQL callers only
    import psycopg
    from psycopg.rows import dict_row

    from mailfathom.store.postgres import PostgresDatabase, store_error
    from mailfathom.store.postgres_callers import (
        WHERE,
        async_pipelined_write,
        callers_loaders,
        statements_prepared,
    )

    assert isinstance(database, PostgresDatabase)  # its dialect said so
    callers = database.callers
    # As on the sync path, the check is made once per connection, except until a
    # connection not in autocommit mode has begun its transaction: then the check is
    # what begins it, so each write below is a savepoint inside it.
    place = callers.known_place(connection)
    idle = connection.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    if place is None or (idle and not connection.autocommit):
        try:
            async with connection.cursor(row_factory=dict_row) as cur:
                await cur.execute(WHERE)
                row = await cur.fetchone()
        except psycopg.Error as exc:
            raise InvalidInput(f"connection= is not usable: {exc}") from exc
        place = (row["database"], row["schema"])
    if callers.known_identity is None:  # read once, on the store's own pool
        await asyncio.to_thread(callers.identity)
    callers.check_place(place)
    callers.remember_place(connection, place)

    @contextmanager
    def write(pipelined: bool) -> Iterator[Cursor]:
        """One write, run in the bridge's greenlet: the sync path's statements (the
        savepoint goes with the first statement when ``pipelined``), each awaited."""
        opening: Any = async_pipelined_write(connection) if pipelined else connection.transaction()
        cursor = psycopg.AsyncCursor(connection, row_factory=dict_row)
        callers_loaders(cursor)
        try:
            with (
                statements_prepared(connection),
                entered_on_loop(opening) as opened,
                entered_on_loop(cursor),
            ):
                ending = opened if pipelined else None
                yield _PipelinedCursor(cursor, psycopg.Error, store_error, ending)
        except psycopg.Error as exc:
            raise store_error(exc) from exc

    yield JoinedTransaction(write, "postgresql")


@asynccontextmanager
async def _aiosqlite(database: Any, connection: Any) -> AsyncIterator[JoinedTransaction]:
    # here, not at the top: the SQLite store's module, for SQLite callers only
    import sqlite3

    from mailfathom.store.sqlite import (
        RELEASE,
        ROLLBACK_TO,
        SQLiteDatabase,
        savepoint_opening,
        store_error,
    )

    assert isinstance(database, SQLiteDatabase)  # its dialect said so
    try:
        files = await connection.execute_fetchall("PRAGMA database_list")
    except (sqlite3.Error, ValueError) as exc:
        raise InvalidInput(f"connection= is not usable: {exc}") from exc
    database.check_file(files)
    try:
        for statement in savepoint_opening(connection):
            await _run(connection, statement)
    except sqlite3.Error as exc:
        raise store_error(exc, database.path) from exc
    cursor = await connection.cursor()
    cursor.row_factory = sqlite3.Row
    try:
        awaited = AwaitedCursor(cursor, sqlite3.Error, store_error)
        yield JoinedTransaction(lambda pipelined: nullcontext(awaited), "sqlite")
    except BaseException:
        if connection.in_transaction:
            with suppress(sqlite3.Error):
                await _run(connection, ROLLBACK_TO)
                await _run(connection, RELEASE)
        raise
    finally:
        await cursor.close()
    try:
        await _run(connection, RELEASE)
    except sqlite3.Error as exc:
        raise store_error(exc, database.path) from exc


async def _run(connection: Any, statement: str) -> None:
    cursor = await connection.execute(statement)
    await cursor.close()


async def _async_driver_connection(connection: object) -> object:
    """The async driver connection under a SQLAlchemy ``AsyncSession``,
    ``async_scoped_session`` or ``AsyncConnection`` (itself otherwise). A session's
    transaction is begun if need be, as its first query would; so is a connection's."""
    if "sqlalchemy.ext.asyncio" not in sys.modules:
        return connection
    # here, not at the top: SQLAlchemy is optional (the sqlalchemy extra)
    from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession, async_scoped_session

    if isinstance(connection, async_scoped_session):
        connection = connection()
    if isinstance(connection, AsyncSession):
        connection = await connection.connection()
    if not isinstance(connection, AsyncConnection):
        return connection
    if connection.closed or connection.invalidated:
        raise InvalidInput(
            "connection= is a closed SQLAlchemy AsyncConnection: pass one that is open, "
            "inside the transaction the write belongs to"
        )
    if not connection.in_transaction():
        await connection.begin()
    raw = await connection.get_raw_connection()
    driver = raw.driver_connection
    if driver is None:  # pragma: no cover - an open, valid connection always has one
        raise InvalidInput("connection= has no driver connection: pass an open one")
    return driver


def _is(value: object, module: str, name: str) -> bool:
    """``value`` is an instance of ``module.name``, looked up only if already imported."""
    loaded = sys.modules.get(module)
    kind = getattr(loaded, name, None) if loaded is not None else None
    return isinstance(kind, type) and isinstance(value, kind)


_WANTED = {
    "postgresql": "a psycopg.AsyncConnection (or a SQLAlchemy AsyncSession or "
    "AsyncConnection on the postgresql+psycopg driver)",
    "sqlite": "an aiosqlite connection (or a SQLAlchemy AsyncSession or AsyncConnection on "
    "the sqlite+aiosqlite driver)",
}


def _wrong_store(driver: object, dialect: str) -> InvalidInput:
    return InvalidInput(
        f"connection= is a {type(driver).__module__}.{type(driver).__name__}, but this "
        f"store is {dialect}: pass {_WANTED[dialect]} on mailfathom's database"
    )


def _refused(driver: object, dialect: str) -> InvalidInput:
    name = f"{type(driver).__module__}.{type(driver).__name__}"
    sync = (
        _is(driver, "sqlite3", "Connection")
        or _is(driver, "psycopg", "Connection")
        or _is(driver, "sqlalchemy.orm", "Session")
        or _is(driver, "sqlalchemy.engine", "Connection")
    )
    if sync:
        return InvalidInput(
            f"connection= is a sync {name}: the async API awaits an async connection; "
            f"pass {_WANTED[dialect]}, or call the sync method (mf.enqueue) with this one"
        )
    if name.startswith("asyncpg."):
        return InvalidInput(
            "connection= is an asyncpg connection, which mailfathom does not write on: "
            "use psycopg's async mode (create_async_engine('postgresql+psycopg://…'))"
        )
    return InvalidInput(f"connection= must be {_WANTED[dialect]} for this store, not {name}")
