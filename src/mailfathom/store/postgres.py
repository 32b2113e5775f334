"""The PostgreSQL database: psycopg 3 with a connection pool, ``SKIP LOCKED`` claims,
``LISTEN/NOTIFY`` wake-ups.

Internal. Connections run in autocommit mode and every write is an explicit
``conn.transaction()``, so the only transactions are the ones written here (or
the caller's, when ``connection=`` is given). The session time zone is UTC.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import psycopg
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool, PoolTimeout

from mailfathom.errors import InvalidInput, StoreError
from mailfathom.store.database import Cursor
from mailfathom.store.queries import load_queries

__all__ = ["PostgresDatabase"]

_NOTIFY_CHANNEL = "mailfathom_jobs"


class PostgresDatabase:
    """Pooled connections and transactions on one PostgreSQL database."""

    dialect = "postgresql"

    def __init__(self, url: str, *, max_connections: int = 10) -> None:
        self.url = url
        self.queries: Mapping[str, str] = load_queries("postgresql")
        self._max = max_connections
        self._pool: ConnectionPool[psycopg.Connection[Any]] | None = None
        self._pid = 0
        self._lock = threading.Lock()
        self._listener: psycopg.Connection[Any] | None = None
        self._identity: tuple[str, str] | None = None  # current_database(), current_schema()

    # -- connections -------------------------------------------------------------------

    @staticmethod
    def _configure(conn: psycopg.Connection[Any]) -> None:
        conn.execute("SET TIME ZONE 'UTC'")

    def _get_pool(self) -> ConnectionPool[psycopg.Connection[Any]]:
        pool = self._pool
        if pool is not None and self._pid == os.getpid():
            return pool
        with self._lock:
            if self._pool is None or self._pid != os.getpid():
                self._pool = ConnectionPool(
                    self.url,
                    min_size=1,
                    max_size=self._max,
                    kwargs={"autocommit": True, "row_factory": dict_row},
                    configure=self._configure,
                    open=True,
                    name="mailfathom",
                    timeout=30.0,
                )
                self._pid = os.getpid()
            return self._pool

    def close(self) -> None:
        """Close the pool and the listening connection."""
        with self._lock:
            pool, self._pool = self._pool, None
            listener, self._listener = self._listener, None
        if listener is not None:
            listener.close()
        if pool is not None and self._pid == os.getpid():
            pool.close()

    # -- transactions ------------------------------------------------------------------

    @contextmanager
    def transaction(self, connection: object | None = None) -> Iterator[Cursor]:
        """One transaction on a pooled connection, or the caller's own transaction."""
        if connection is not None:
            caller = self._callers_connection(connection)
            try:
                # A savepoint inside the caller's open transaction (nothing is committed on
                # its behalf); BEGIN … COMMIT on an autocommit connection, so the write is
                # atomic either way.
                with caller.transaction(), caller.cursor(row_factory=dict_row) as cur:
                    yield _WrappedCursor(cur)
            except psycopg.Error as exc:
                raise _store_error(exc) from exc
            return
        try:
            with self._get_pool().connection() as conn, conn.transaction(), conn.cursor() as cur:
                yield _WrappedCursor(cur)
        except psycopg.Error as exc:
            raise _store_error(exc) from exc
        except PoolTimeout as exc:
            raise StoreError(f"no PostgreSQL connection available: {exc}") from exc

    @contextmanager
    def reading(self) -> Iterator[Cursor]:
        """A cursor on a pooled autocommit connection."""
        try:
            with self._get_pool().connection() as conn, conn.cursor() as cur:
                yield _WrappedCursor(cur)
        except psycopg.Error as exc:
            raise _store_error(exc) from exc
        except PoolTimeout as exc:
            raise StoreError(f"no PostgreSQL connection available: {exc}") from exc

    def _callers_connection(self, connection: object) -> psycopg.Connection[Any]:
        """The caller's connection, once it is known to be on this store's database."""
        if not isinstance(connection, psycopg.Connection):
            raise InvalidInput(
                f"connection= must be a psycopg.Connection for a PostgreSQL store, not "
                f"{type(connection).__name__}"
            )
        # On a non-autocommit connection this also opens the caller's transaction, so the
        # write below is a savepoint inside it.
        theirs = _where(connection)
        ours = self._identity
        if ours is None:
            with self.reading() as cur:
                cur.execute(_WHERE)
                row = cur.fetchone()
            ours = self._identity = (row["database"], row["schema"])
        if theirs != ours:
            raise InvalidInput(
                f"connection= is open on database {theirs[0]!r} schema {theirs[1]!r}, not on "
                f"this store's database {ours[0]!r} schema {ours[1]!r}: pass a connection "
                "to mailfathom's database with the same search_path"
            )
        return connection

    # -- wake-ups ----------------------------------------------------------------------

    def wait_for_jobs(self, timeout: float) -> bool:
        """Block until a job is enqueued (NOTIFY) or ``timeout`` passes; True if notified."""
        try:
            if self._listener is None or self._listener.closed:
                self._listener = psycopg.connect(self.url, autocommit=True)
                self._listener.execute(f"LISTEN {_NOTIFY_CHANNEL}")
            for _ in self._listener.notifies(timeout=timeout, stop_after=1):
                return True
            return False
        except psycopg.Error as exc:
            if self._listener is not None:
                self._listener.close()
            self._listener = None
            raise _store_error(exc) from exc

    # -- migrations --------------------------------------------------------------------

    def apply_migrations(self, migrations: Sequence[tuple[int, str, str]]) -> list[str]:
        """Apply unrecorded migrations under a transaction-scoped advisory lock."""
        applied: list[str] = []
        with self.transaction() as cur:
            cur.execute("SELECT pg_advisory_xact_lock(hashtext(current_schema() || '.mf'))")
            cur.execute(
                "CREATE TABLE IF NOT EXISTS mf_migrations (version INTEGER PRIMARY KEY, "
                "name TEXT NOT NULL, applied_at TIMESTAMPTZ NOT NULL)"
            )
            cur.execute("SELECT version FROM mf_migrations")
            done = {row["version"] for row in cur.fetchall()}
            for version, name, script in migrations:
                if version in done:
                    continue
                cur.execute(script)
                cur.execute(
                    "INSERT INTO mf_migrations (version, name, applied_at) "
                    "VALUES (%(v)s, %(n)s, %(at)s)",
                    {"v": version, "n": name, "at": datetime.now(UTC)},
                )
                applied.append(name)
        return applied

    # -- values ------------------------------------------------------------------------

    def time_param(self, moment: datetime | None) -> datetime | None:
        """Datetimes go to timestamptz as they are."""
        return moment

    def time_value(self, stored: Any) -> datetime | None:
        """timestamptz comes back aware; normalise to UTC."""
        if stored is None:
            return None
        moment: datetime = stored
        return moment.astimezone(UTC)

    def json_value(self, stored: Any) -> dict[str, Any]:
        """jsonb comes back already parsed."""
        value: dict[str, Any] = stored if isinstance(stored, dict) else json.loads(stored)
        return value

    def list_param(self, values: Sequence[Any]) -> str:
        """A JSON array, read in SQL with ``jsonb_array_elements``."""
        return json.dumps(list(values), separators=(",", ":"))


_WHERE = "SELECT current_database() AS database, current_schema() AS schema"


def _where(connection: psycopg.Connection[Any]) -> tuple[str, str]:
    try:
        with connection.cursor(row_factory=dict_row) as cur:
            cur.execute(_WHERE)
            row = cur.fetchone()
    except psycopg.Error as exc:
        raise InvalidInput(f"connection= is not usable: {exc}") from exc
    if row is None:  # pragma: no cover - the query always returns one row
        raise InvalidInput("connection= did not say which database it is on")
    return row["database"], row["schema"]


class _WrappedCursor:
    """A psycopg cursor whose driver errors become StoreError."""

    def __init__(self, cursor: psycopg.Cursor[Any]) -> None:
        self._cursor = cursor

    @property
    def rowcount(self) -> int:
        return self._cursor.rowcount

    def execute(self, query: Any, params: Any = None, /) -> Any:
        try:
            return self._cursor.execute(query, params)
        except psycopg.Error as exc:
            raise _store_error(exc) from exc

    def fetchone(self) -> Any:
        return self._cursor.fetchone()

    def fetchall(self) -> list[Any]:
        return self._cursor.fetchall()


def _store_error(exc: psycopg.Error) -> StoreError:
    if isinstance(exc, psycopg.errors.UndefinedTable):
        return StoreError(f"PostgreSQL schema is missing ({exc}): run `mailfathom migrate` first")
    if isinstance(exc, psycopg.OperationalError):
        return StoreError(
            f"PostgreSQL is unreachable ({exc}): check that the server runs and the URL is right"
        )
    return StoreError(f"PostgreSQL failed: {exc}")
