"""What a dialect must provide so that :class:`~mailfathom.store.sql_store.SqlStore` can run.

Internal. A ``Database`` owns connections and transactions and converts values
to and from its own representation (SQLite keeps times as ISO-8601 text, JSON as
text and lists as JSON arrays; PostgreSQL has native types). All queue logic
lives once, in ``SqlStore``; only this seam differs per database.

``queries`` holds the dialect's named SQL blocks (see :mod:`mailfathom.store.queries`);
``capabilities`` says which ways of doing one thing the dialect's statements offer
(:mod:`mailfathom.store.dialect`). PostgreSQL, for instance, enqueues a whole batch in
one statement because a round trip per job is what costs there; SQLite runs
in-process, so it inserts row by row with ``insert_job`` and pays nothing for it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any, Protocol

from mailfathom.store.dialect import Capabilities

__all__ = ["Cursor", "Database"]


class Cursor(Protocol):
    """The DB-API cursor subset both drivers share; rows are name-indexable."""

    @property
    def rowcount(self) -> int:
        """Rows the last statement touched."""
        ...

    def execute(self, query: Any, params: Any = ..., /) -> Any:
        """Run one statement."""
        ...

    def fetchone(self) -> Any:
        """The next row, or None."""
        ...

    def fetchall(self) -> list[Any]:
        """Every remaining row."""
        ...


class Database(Protocol):
    """Connections, transactions and value conversion for one dialect."""

    dialect: str
    queries: Mapping[str, str]
    capabilities: Capabilities
    #: How many calls are worth running at once (the async API's thread count).
    max_connections: int

    def reserve_connections(self, count: int) -> None:
        """Let at least ``count`` calls hold a connection at once (a pool grows to it;
        a store without a pool changes nothing)."""
        ...

    def transaction(
        self,
        connection: object | None = None,
        *,
        timeout: float | None = None,
        pipelined: bool = False,
    ) -> AbstractContextManager[Cursor]:
        """A write transaction, committed on success and rolled back on error.

        With ``connection`` (the application's own), statements run inside the
        caller's transaction and nothing is committed on its behalf. ``timeout``: the
        most seconds it waits for locks before :class:`StoreError` (not applied to a
        caller's transaction). ``pipelined``: the write reads no ``rowcount``, so a
        server that can send a caller's statements without waiting for each may
        (PostgreSQL's pipeline mode); elsewhere it changes nothing.
        """
        ...

    def reading(self) -> AbstractContextManager[Cursor]:
        """A cursor for reads."""
        ...

    def single_write(self, connection: object | None = None) -> AbstractContextManager[Cursor]:
        """A cursor for a write that is one statement: it commits on its own, so it costs
        one round trip instead of three (BEGIN, the statement, COMMIT).

        With the caller's ``connection``: that statement alone on it when it is in
        autocommit mode outside a transaction (atomic and committed by itself), else
        inside the caller's transaction as :meth:`transaction` writes there."""
        ...

    def apply_migrations(self, migrations: Sequence[tuple[int, str, str]]) -> list[str]:
        """Apply ``(version, name, sql)`` migrations not yet recorded, under a lock."""
        ...

    def backup(self, target: str) -> None:
        """Copy the database to the new file ``target``, consistent as of one moment
        (SQLite); a dialect whose own tools do it raises :class:`ConfigurationError`
        naming them."""
        ...

    def close(self) -> None:
        """Release every connection."""
        ...

    def wait_for_jobs(self, timeout: float) -> bool:
        """Block until new jobs may be due (or ``timeout`` seconds pass); True when woken."""
        ...

    def time_param(self, moment: datetime | None) -> Any:
        """A UTC instant as this database stores it."""
        ...

    def time_value(self, stored: Any) -> datetime | None:
        """A stored instant back as an aware UTC datetime."""
        ...

    def json_value(self, stored: Any) -> dict[str, Any]:
        """A stored JSON object back as a dict."""
        ...

    def result_value(self, stored: Any) -> Any:
        """A stored job result (any JSON value, or NULL) back as Python (None for NULL)."""
        ...

    def list_param(self, values: Sequence[Any]) -> Any:
        """A list of scalars or pairs, as a single bound parameter."""
        ...
