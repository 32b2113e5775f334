"""The SQLite database: one file, WAL, ``BEGIN IMMEDIATE`` writes, ``synchronous=FULL``.

Internal. Each thread (and each process after a fork) gets its own connection
in autocommit mode, so transactions are exactly the ones written here. Times are
ISO-8601 UTC text with microseconds, which sorts as it compares.

A connection that failed with a read-only, cannot-open or I/O error is closed and
the next call opens a new one (a file that was read-only when a connection opened
it stays read-only to that connection, whatever its permissions become). Before
each commit the path is checked to still name the file first opened
(:class:`~mailfathom.store.sqlite_file.FileIdentity`).
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from mailfathom import hints
from mailfathom.errors import ConfigurationError, InvalidInput, StoreError
from mailfathom.store.callers import ASYNC_HINT, JoinedTransaction, driver_connection, is_async
from mailfathom.store.database import Cursor
from mailfathom.store.dialect import CAPABILITIES
from mailfathom.store.migrate import split_statements
from mailfathom.store.queries import load_queries
from mailfathom.store.sqlite_file import (
    FileIdentity,
    backup,
    create_private,
    io_error_hint,
    needs_reopen,
)

__all__ = ["RELEASE", "ROLLBACK_TO", "SQLiteDatabase", "savepoint_opening", "store_error"]

_WATCH_INTERVAL = 0.005  # seconds between data_version polls while idle


# One writer lock per database file and process. SQLite lets one connection write at a
# time; threads of one process that queue on a Python lock are handed the file the
# moment it is free, where SQLite's busy handler would have them sleep and poll (1, 2,
# 5 … 100 ms), which made writers wait far longer than the writes took. Other
# processes still meet the busy handler, as before.
class _WriterLocks:
    """The locks by file; forgotten in a forked child, where a lock that another thread
    held at the fork would never open."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}

    def of(self, path: str) -> threading.Lock:
        with self._guard:
            lock = self._locks.get(path)
            if lock is None:
                lock = self._locks[path] = threading.Lock()
            return lock

    def forget(self) -> None:
        self._guard = threading.Lock()
        self._locks = {}


_WRITERS = _WriterLocks()
os.register_at_fork(after_in_child=_WRITERS.forget)


class SQLiteDatabase:
    """Connections and transactions on one SQLite file."""

    dialect = "sqlite"
    #: Calls worth running at once: each thread has its own connection, writes take
    #: turns on the file's one lock and reads go on beside them (WAL).
    max_connections = 4

    def __init__(self, path: str, *, busy_timeout: float = 30.0) -> None:
        """``busy_timeout``: seconds a write waits for another process's write lock
        (setting ``sqlite_busy_timeout``)."""
        if path in ("", ":memory:") or path.startswith("file::memory:"):
            raise ConfigurationError(
                "an in-memory SQLite database cannot be shared by workers: "
                "use a file, for example sqlite:///mailfathom.db"
            )
        self.path = os.path.abspath(path)
        parent = os.path.dirname(self.path)
        if not os.path.isdir(parent):
            raise ConfigurationError(
                f"database_url points into {parent!r}, which does not exist: create the folder "
                "or choose another path"
            )
        self.queries: Mapping[str, str] = load_queries("sqlite")
        self.capabilities = CAPABILITIES["sqlite"]
        self._busy_ms = int(busy_timeout * 1000)
        self._file = FileIdentity(self.path)
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._all_lock = threading.Lock()

    # -- connections -------------------------------------------------------------------

    def _connection(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is not None and self._local.pid == os.getpid():
            return conn
        create_private(self.path)  # when first opened: a store never used makes no file
        conn = None
        try:
            conn = sqlite3.connect(
                self.path, isolation_level=None, check_same_thread=False, cached_statements=256
            )
            conn.row_factory = sqlite3.Row
            conn.execute(f"PRAGMA busy_timeout = {self._busy_ms}")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = FULL")
            conn.execute("PRAGMA foreign_keys = ON")
            self._file.opened()
        except (sqlite3.Error, StoreError) as exc:
            if conn is not None:
                conn.close()
            if isinstance(exc, StoreError):
                raise
            raise StoreError(
                f"cannot open SQLite database {self.path!r}: {exc}; check the path and "
                "permissions (of the file, its -wal and -shm, and its folder)"
            ) from exc
        self._local.conn = conn
        self._local.pid = os.getpid()
        with self._all_lock:
            self._all.append(conn)
        return conn

    def _failed(self, exc: sqlite3.Error) -> StoreError:
        """``exc`` as a StoreError; first, when it may have broken this thread's connection
        for good, that connection is closed so that the next call opens a new one."""
        if needs_reopen(exc):
            for name in ("conn", "watcher"):
                conn = getattr(self._local, name, None)
                if conn is None:
                    continue
                setattr(self._local, name, None)
                with self._all_lock:
                    if conn in self._all:
                        self._all.remove(conn)
                with contextlib.suppress(sqlite3.Error):
                    conn.close()
        return store_error(exc, self.path)

    def reserve_connections(self, count: int) -> None:
        """Nothing to do: each thread opens a connection of its own when it first needs
        one, so no thread waits for another's."""

    def close(self) -> None:
        """Close every connection this process opened."""
        with self._all_lock:
            conns, self._all = self._all, []
        for conn in conns:
            with contextlib.suppress(sqlite3.Error):
                conn.close()
        self._local = threading.local()

    # -- wake-ups ----------------------------------------------------------------------

    def wait_for_jobs(self, timeout: float) -> bool:
        """Poll ``PRAGMA data_version`` (a shared-memory read) until another connection
        commits or ``timeout`` passes: near-immediate wake-ups at almost no idle cost."""
        try:
            return self._wait_for_jobs(timeout)
        except sqlite3.Error as exc:
            raise self._failed(exc) from exc

    def _wait_for_jobs(self, timeout: float) -> bool:
        watcher: sqlite3.Connection | None = getattr(self._local, "watcher", None)
        if watcher is None or self._local.watcher_pid != os.getpid():
            create_private(self.path)
            watcher = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            self._local.watcher = watcher
            self._local.watcher_pid = os.getpid()
            with self._all_lock:
                self._all.append(watcher)
            self._local.seen = watcher.execute("PRAGMA data_version").fetchone()[0]
        deadline = time.monotonic() + timeout
        while True:
            version = watcher.execute("PRAGMA data_version").fetchone()[0]
            if version != self._local.seen:
                self._local.seen = version
                return True
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            time.sleep(min(_WATCH_INTERVAL, left))

    # -- transactions ------------------------------------------------------------------

    @contextmanager
    def transaction(
        self,
        connection: object | None = None,
        *,
        timeout: float | None = None,
        pipelined: bool = False,
    ) -> Iterator[Cursor]:
        """``BEGIN IMMEDIATE`` … ``COMMIT``, or the caller's own transaction.

        ``timeout``: wait at most that many seconds for the write lock (this process's
        other threads', then other processes'), instead of the busy timeout; then
        :class:`StoreError`, nothing written. Not applied to a caller's transaction.
        ``pipelined`` changes nothing here (a file has no round trips to save)."""
        if isinstance(connection, JoinedTransaction):  # the async API's
            with connection.write_for(self.dialect, pipelined=pipelined) as cursor:
                yield cursor
            return
        if connection is not None:
            with self._callers_savepoint(driver_connection(connection)) as cursor:
                yield cursor
            return
        conn = self._connection()
        writer = _WRITERS.of(self.path)
        if not writer.acquire(timeout=-1 if timeout is None else timeout):
            raise StoreError(
                f"SQLite database is locked: another thread of this process held the write "
                f"lock for more than {timeout:g} s (enqueue_timeout); nothing was written, retry"
            )
        try:
            if timeout is not None:
                conn.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise self._failed(exc) from exc
            finally:
                if timeout is not None:
                    with contextlib.suppress(sqlite3.Error):
                        conn.execute(f"PRAGMA busy_timeout = {self._busy_ms}")
            try:
                cursor = conn.cursor()
                yield cursor
                self._file.check()
                conn.execute("COMMIT")
            except BaseException as exc:
                if conn.in_transaction:
                    with contextlib.suppress(sqlite3.Error):
                        conn.execute("ROLLBACK")
                if isinstance(exc, sqlite3.Error):
                    raise self._failed(exc) from exc
                raise
        finally:
            writer.release()

    @contextmanager
    def pruning(self, *, repack: bool) -> Iterator[Cursor]:
        """A write transaction for one pruning batch: committed without its own fsync
        (``synchronous = NORMAL``; WAL stays consistent, and a batch lost to a power cut
        is only pruned again by the next pass, while the next ordinary commit makes it
        durable anyway), and with ``repack`` foreign keys off as well (the rows it takes
        out and writes back unchanged must cascade nothing: ``repack_jobs``). Both
        pragmas change only outside a transaction, so they are set just before it and
        put back just after, on this thread's connection."""
        conn = self._connection()
        with _WRITERS.of(self.path):
            try:
                conn.execute("PRAGMA synchronous = NORMAL")
                if repack:
                    conn.execute("PRAGMA foreign_keys = OFF")
            except sqlite3.Error as exc:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("PRAGMA synchronous = FULL")
                raise self._failed(exc) from exc
        try:
            with self.transaction() as cursor:
                yield cursor
        finally:
            # (a connection closed after an I/O error has nothing left to put back)
            with _WRITERS.of(self.path), contextlib.suppress(sqlite3.Error):
                conn.execute("PRAGMA foreign_keys = ON")
                conn.execute("PRAGMA synchronous = FULL")

    @contextmanager
    def single_write(self, connection: object | None = None) -> Iterator[Cursor]:
        """A cursor in autocommit mode, holding this process's writer lock. Closing it
        finishes its last statement, which commits it, before the lock is let go. With
        the caller's ``connection``: :meth:`transaction`'s savepoint on it."""
        if connection is not None:
            with self.transaction(connection) as cursor:
                yield cursor
            return
        with _WRITERS.of(self.path):
            cursor = self._connection().cursor()
            self._file.check()
            try:
                yield cursor
                cursor.close()
            except sqlite3.Error as exc:
                raise self._failed(exc) from exc

    @contextmanager
    def reading(self) -> Iterator[Cursor]:
        """A cursor outside any explicit transaction (each statement sees committed data)."""
        try:
            yield self._connection().cursor()
        except sqlite3.Error as exc:
            raise self._failed(exc) from exc

    def backup(self, target: str) -> None:
        """Copy the database to the new file ``target``, consistent as of one moment,
        while other connections go on writing (SQLite's online backup API)."""
        backup(self._connection(), self.path, target)

    @contextmanager
    def _callers_savepoint(self, connection: object) -> Iterator[Cursor]:
        """The write as one savepoint on the caller's connection: atomic on an autocommit
        connection too, and inside the caller's transaction when one is open (or, in
        Python's implicit-transaction mode, one is opened for the caller to commit)."""
        cursor = self._callers_cursor(connection)
        assert isinstance(connection, sqlite3.Connection)  # checked by _callers_cursor
        try:
            for statement in savepoint_opening(connection):
                connection.execute(statement)
        except sqlite3.Error as exc:
            raise store_error(exc, self.path) from exc
        try:
            yield cursor
        except BaseException:
            if connection.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    connection.execute(ROLLBACK_TO)
                    connection.execute(RELEASE)
            raise
        try:
            connection.execute(RELEASE)
        except sqlite3.Error as exc:
            raise store_error(exc, self.path) from exc

    def _callers_cursor(self, connection: object) -> Cursor:
        if not isinstance(connection, sqlite3.Connection):
            raise InvalidInput(
                f"connection= must be a sqlite3.Connection (or a SQLAlchemy Session or "
                f"Connection) for a SQLite store, not "
                f"{type(connection).__name__}" + ASYNC_HINT * is_async(connection)
            )
        try:
            files = connection.execute("PRAGMA database_list").fetchall()
        except sqlite3.Error as exc:
            raise InvalidInput(f"connection= is not usable: {exc}") from exc
        self.check_file(files)
        cursor = connection.cursor()
        cursor.row_factory = sqlite3.Row
        return _WrappedCursor(cursor)

    def check_file(self, database_list: Sequence[Any]) -> None:
        """Refuse a caller's connection unless its ``PRAGMA database_list`` names this
        store's file as ``main`` (the sync and the async ``connection=`` alike)."""
        main = next((row[2] for row in database_list if row[1] == "main"), "")
        if not main or os.path.realpath(main) != os.path.realpath(self.path):
            raise InvalidInput(
                f"connection= is open on {main or 'an in-memory database'!r}, not on "
                f"{self.path!r}: pass a connection to mailfathom's database file"
            )

    # -- migrations --------------------------------------------------------------------

    def apply_migrations(self, migrations: Sequence[tuple[int, str, str]]) -> list[str]:
        """Apply unrecorded migrations, each in its own ``BEGIN IMMEDIATE`` transaction."""
        applied: list[str] = []
        self._incremental_when_new()
        with self.transaction() as cur:
            cur.execute(
                "CREATE TABLE IF NOT EXISTS mf_migrations ("
                "version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)"
            )
        for version, name, script in migrations:
            with self.transaction() as cur:
                cur.execute("SELECT 1 FROM mf_migrations WHERE version = ?", (version,))
                if cur.fetchone() is not None:
                    continue
                for statement in split_statements(script):
                    cur.execute(statement)
                cur.execute(
                    "INSERT INTO mf_migrations (version, name, applied_at) VALUES (?, ?, ?)",
                    (version, name, self.time_param(datetime.now(UTC))),
                )
                applied.append(name)
        return applied

    def _incremental_when_new(self) -> None:
        """A new file gets ``auto_vacuum = INCREMENTAL`` before its first table (the mode
        can only change on an empty file, or with a VACUUM that rewrites it), so pruning
        can give freed pages back (:meth:`reclaim_space`). On a connection of its own:
        VACUUM refuses to run beside a statement still open on the same connection."""
        create_private(self.path)  # before sqlite3 makes the file with the umask's mode
        with _WRITERS.of(self.path), contextlib.closing(sqlite3.connect(self.path)) as conn:
            conn.isolation_level = None
            try:
                conn.execute(f"PRAGMA busy_timeout = {self._busy_ms}")
                empty = conn.execute("SELECT count(*) FROM sqlite_master").fetchall()[0][0] == 0
                if empty and conn.execute("PRAGMA auto_vacuum").fetchall()[0][0] != 2:
                    conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
                    conn.execute("VACUUM")
            except sqlite3.Error as exc:
                raise store_error(exc) from exc

    def reclaim_space(self, pages: int) -> int:
        """``PRAGMA incremental_vacuum(pages)``: hand up to ``pages`` free pages back to the
        file system (none when ``pages`` is 0). Returns how many pages were free before
        (a file made before auto_vacuum was set keeps them for reuse; :meth:`vacuum`
        converts it)."""
        conn = self._connection()
        with _WRITERS.of(self.path):
            try:
                free = int(conn.execute("PRAGMA freelist_count").fetchall()[0][0])
                step = min(int(pages), free)  # 0 would mean "every free page"
                if step > 0 and conn.execute("PRAGMA auto_vacuum").fetchall()[0][0] == 2:
                    # each step of the statement frees one page, and execute() takes only
                    # the first step of a statement that returns no rows: executescript
                    # runs it to the end (step is an int)
                    conn.executescript(f"PRAGMA incremental_vacuum({step});")
                    # the file shrinks when the WAL is written back: do it now, as far as
                    # readers allow (PASSIVE waits for nobody)
                    conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
            except sqlite3.Error as exc:
                raise self._failed(exc) from exc
        return free

    def vacuum(self) -> None:
        """Switch the file to incremental auto-vacuum and rewrite it (``VACUUM``): the one
        way an existing file starts giving space back. It blocks writers while it runs
        and needs free disk space about the file's size: run it in a quiet moment."""
        conn = self._connection()
        with _WRITERS.of(self.path):
            try:
                conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
                conn.execute("VACUUM")
            except sqlite3.Error as exc:
                raise self._failed(exc) from exc

    # -- values ------------------------------------------------------------------------

    def time_param(self, moment: datetime | None) -> str | None:
        """ISO-8601 UTC text with microseconds (so text order is time order)."""
        if moment is None:
            return None
        return moment.astimezone(UTC).isoformat(timespec="microseconds")

    def time_value(self, stored: Any) -> datetime | None:
        """Parse what :meth:`time_param` wrote."""
        return None if stored is None else datetime.fromisoformat(stored)

    def json_value(self, stored: Any) -> dict[str, Any]:
        """JSON text back to a dict."""
        value: dict[str, Any] = json.loads(stored)
        return value

    def result_value(self, stored: Any) -> Any:
        """JSON text back to its value (NULL: None)."""
        return None if stored is None else json.loads(stored)

    def list_param(self, values: Sequence[Any]) -> str:
        """A JSON array, read in SQL with ``json_each``."""
        return json.dumps(list(values), separators=(",", ":"))


SAVEPOINT = "SAVEPOINT mf_write"
RELEASE = "RELEASE mf_write"
ROLLBACK_TO = "ROLLBACK TO mf_write"


def savepoint_opening(connection: Any) -> list[str]:
    """The statements that open a write on a caller's connection (a ``sqlite3`` one, or an
    async driver's proxy with the same attributes): a savepoint, atomic on an autocommit
    connection too, first opening the transaction Python's implicit-transaction mode
    would have opened, so that the caller's commit or rollback decides it."""
    level = connection.isolation_level
    implicit = level is not None
    if implicit and getattr(connection, "autocommit", -1) is True:
        implicit = False  # Python 3.12+: autocommit=True ignores isolation_level
    begin = [f"BEGIN {level}"] if implicit and not connection.in_transaction else []
    return [*begin, SAVEPOINT]


class _WrappedCursor:
    """A caller's cursor whose driver errors become StoreError."""

    def __init__(self, cursor: sqlite3.Cursor) -> None:
        self._cursor = cursor

    @property
    def rowcount(self) -> int:
        return self._cursor.rowcount

    def execute(self, query: Any, params: Any = (), /) -> Any:
        try:
            return self._cursor.execute(query, params)
        except sqlite3.Error as exc:
            raise store_error(exc) from exc

    def fetchone(self) -> Any:
        return self._cursor.fetchone()

    def fetchall(self) -> list[Any]:
        return self._cursor.fetchall()


def store_error(exc: sqlite3.Error, path: str | None = None) -> StoreError:
    """A driver error as the :class:`StoreError` that says what happened and what to do."""
    if isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc):
        return StoreError(
            f"SQLite database is locked ({exc}): another process held the write lock past the "
            "busy timeout (sqlite_busy_timeout; enqueue_timeout for an enqueue): nothing was "
            "written; retry, or move busy deployments to PostgreSQL"
        )
    if isinstance(exc, sqlite3.OperationalError) and "no such table" in str(exc):
        return StoreError(
            f"SQLite schema is missing ({exc}): run `{hints.command('migrate')}` first"
        )
    if getattr(exc, "sqlite_errorcode", 0) & 0xFF == 8:  # SQLITE_READONLY
        where = f" {path!r}" if path else ""
        return StoreError(
            f"SQLite database{where} is read-only to this process ({exc}): check the "
            "permissions and owner of the file, its -wal and -shm files and its folder; "
            "nothing was written, and the next call opens the file again"
        )
    hint = io_error_hint(path) if path is not None and needs_reopen(exc) else None
    if hint is not None:
        return StoreError(f"SQLite failed: {exc}: {hint}")
    refused = isinstance(exc, sqlite3.IntegrityError | sqlite3.DataError)
    return StoreError(f"SQLite failed: {exc}", refused=refused)
