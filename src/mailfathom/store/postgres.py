"""The PostgreSQL database: psycopg 3 with a connection pool, ``SKIP LOCKED`` claims,
``LISTEN/NOTIFY`` wake-ups.

Internal. Connections run in autocommit mode and every write is an explicit
``conn.transaction()``, so the only transactions are the ones written here (or
the caller's, when ``connection=`` is given: the rules for writing on it are in
:mod:`mailfathom.store.postgres_callers`). The session time zone is UTC.

Outages: a pooled connection whose server went away (a restart closes every
session) is noticed before use, without a round trip, and replaced; while the
server is down every call raises :class:`StoreError` after at most
``pool_timeout`` seconds (the URL's ``connect_timeout``, else 10 s), and once it
is back the pool reconnects on its own. The ``LISTEN`` connection reconnects on
the next :meth:`PostgresDatabase.wait_for_jobs` after a failure. A network path that
goes silent is noticed by TCP keepalives and ``tcp_user_timeout``, and a call stalled
on it by a client-side deadline (:mod:`mailfathom.store.pg_network`).
"""

from __future__ import annotations

import json
import os
import re
import select
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import dict_row
from psycopg.types.json import set_json_loads
from psycopg_pool import ConnectionPool, PoolTimeout

from mailfathom import hints
from mailfathom.errors import ConfigurationError, StoreError
from mailfathom.store.callers import JoinedTransaction, driver_connection
from mailfathom.store.database import Cursor
from mailfathom.store.dialect import CAPABILITIES
from mailfathom.store.pg_network import PROBE_TIMEOUT, StallWatch, tcp_defaults
from mailfathom.store.postgres_callers import (
    CallersConnections,
    Ending,
    callers_cursor,
    pipelined_write,
    statements_prepared,
)
from mailfathom.store.queries import load_queries

__all__ = ["PostgresDatabase", "store_error"]

NOTIFY_CHANNEL = "mailfathom_jobs"
_DEFAULT_POOL_TIMEOUT = 10.0

Conn = psycopg.Connection[Any]


class PostgresDatabase:
    """Pooled connections and transactions on one PostgreSQL database."""

    dialect = "postgresql"

    def __init__(
        self, url: str, *, max_connections: int = 10, pool_timeout: float | None = None
    ) -> None:
        self.url = url
        self.queries: Mapping[str, str] = load_queries("postgresql")
        self.capabilities = CAPABILITIES["postgresql"]
        self._max = max_connections
        #: The pool's size: calls beyond it wait for a connection.
        self.max_connections = max_connections
        self.pool_timeout = _pool_timeout(url) if pool_timeout is None else pool_timeout
        self._pool: ConnectionPool[Conn] | None = None
        self._pid = 0
        self._lock = threading.Lock()
        self._listener: Conn | None = None
        self._listener_pid = 0
        self._listen_lock = threading.Lock()
        self._schema: str | None = None
        #: Callers' connections (``connection=``) already found on this database and
        #: schema, and the check that finds them (postgres_callers.py).
        self.callers = CallersConnections(self.reading)
        self._tcp = tcp_defaults(url)  # keepalives and tcp_user_timeout the URL leaves unset
        #: The client-side deadline on calls stalled on a silent network (pg_network.py).
        self.stall_watch = StallWatch(self._probe)

    # -- connections -------------------------------------------------------------------

    @staticmethod
    def _configure(conn: Conn) -> None:
        conn.execute("SET TIME ZONE 'UTC'")
        set_json_loads(_json_loads, conn)

    def _get_pool(self) -> ConnectionPool[Conn]:
        pool = self._pool
        if pool is not None and self._pid == os.getpid():
            return pool
        with self._lock:
            if self._pool is None or self._pid != os.getpid():
                self._refuse_wrong_settings()
                self._pool = ConnectionPool(
                    self.url,
                    min_size=1,
                    max_size=self._max,
                    kwargs={"autocommit": True, "row_factory": dict_row, **self._tcp},
                    configure=self._configure,
                    open=True,
                    name="mailfathom",
                    timeout=self.pool_timeout,
                    # Give up background reconnects quickly: the next call that needs a
                    # connection starts a fresh attempt at once, instead of waiting out a
                    # back-off that doubles up to minutes while the server is long back.
                    reconnect_timeout=max(1.0, self.pool_timeout / 2),
                )
                self._pid = os.getpid()
            return self._pool

    @contextmanager
    def _connection(self) -> Iterator[Conn]:
        """A live pooled connection: ones the server has hung up on are discarded first.

        A restart closes every session; checking the socket costs no round trip,
        and dropping all the dead connections here (instead of through the pool's
        own ``check``, which backs off a second per failed check) means the first
        call after a restart already gets a working connection.
        """
        pool = self._get_pool()
        try:
            for _ in range(self._max + 1):
                conn = pool.getconn()
                if not _server_hung_up(conn):
                    break
                conn.close()  # the pool replaces a closed connection when it comes back
                pool.putconn(conn)
            else:  # pragma: no cover - the pool kept handing out dead connections
                raise StoreError("every pooled PostgreSQL connection was dead; retry shortly")
        except PoolTimeout as exc:
            raise self._unavailable(exc) from exc
        try:
            with self.stall_watch.using(conn):
                yield conn
        finally:
            pool.putconn(conn)

    def reserve_connections(self, count: int) -> None:
        """Let at least ``count`` calls hold a pooled connection at once: the pool grows
        to ``count`` when smaller (an open pool is resized in place) and never shrinks,
        so a larger size chosen when the database was made stays. A worker reserves one
        per job thread and one per thread of its own, so none of them waits for another
        to give a connection back."""
        with self._lock:
            if count <= self._max:
                return
            self._max = count
            self.max_connections = count
            if self._pool is not None and self._pid == os.getpid():
                self._pool.resize(min_size=self._pool.min_size, max_size=count)

    def _refuse_wrong_settings(self) -> None:
        """Connect once before the pool opens: a database, role or password the server
        refuses fails at once with what to fix (:class:`ConfigurationError`), instead of
        being waited on for ``pool_timeout`` like an outage. Anything else (the server down
        or unreachable) is left to the pool, which waits and reconnects."""
        try:
            with psycopg.connect(self.url, connect_timeout=PROBE_TIMEOUT, **self._tcp):
                pass
        except psycopg.Error as exc:
            fix = _settings_fix(exc)
            if fix is not None:
                raise ConfigurationError(
                    f"PostgreSQL refused the connection ({_first_line_fatal(exc)}): {fix}; "
                    "this is a setting, not an outage, so nothing retries it"
                ) from None

    def _probe(self) -> None:
        """Connect afresh and run ``SELECT 1``; raises when the server cannot be reached
        (a server that answers that it has no connection slot left is reachable)."""
        try:
            with psycopg.connect(self.url, connect_timeout=PROBE_TIMEOUT, **self._tcp) as conn:
                conn.execute("SELECT 1")
        except psycopg.Error as exc:
            if not _no_slots(exc):
                raise

    def _unavailable(self, exc: PoolTimeout) -> StoreError:
        """Why no pooled connection came within ``pool_timeout``: the server, or the pool."""
        try:
            with psycopg.connect(self.url, connect_timeout=2):
                pass
        except psycopg.Error as down:
            if _no_slots(down):
                return _slots_error(down)
            return StoreError(
                f"PostgreSQL is unreachable ({_first_line(down)}): no connection for "
                f"{self.pool_timeout:g} s; check that the server runs and the URL is right — "
                "the pool reconnects on its own once it is back"
            )
        return StoreError(
            f"no PostgreSQL connection became free within {self.pool_timeout:g} s ({exc}): "
            f"all {self._max} pooled connections are busy; retry, or use fewer threads"
        )

    def close(self) -> None:
        """Close the pool and the listening connection."""
        with self._lock:
            pool, self._pool = self._pool, None
            listener, self._listener = self._listener, None
        self.stall_watch.close()
        if listener is not None and self._listener_pid == os.getpid():
            listener.close()
        if pool is not None and self._pid == os.getpid():
            pool.close()

    # -- transactions ------------------------------------------------------------------

    @contextmanager
    def transaction(
        self,
        connection: object | None = None,
        *,
        timeout: float | None = None,
        pipelined: bool = False,
    ) -> Iterator[Cursor]:
        """One transaction on a pooled connection, or the caller's own transaction.

        ``timeout``: its ``lock_timeout`` and ``statement_timeout`` (``SET LOCAL``, one
        round trip), so no statement in it waits longer; not applied to a caller's
        transaction, whose settings are its own. ``pipelined`` (for writes that read no
        ``rowcount`` before they fetch): the statements go out in pipeline mode, ``BEGIN``
        (or the savepoint) with the first statement and ``COMMIT`` (or its release) with
        the end, so a write costs a round trip per fetch plus one instead of two more: a
        claim (``BEGIN``, its plan setting, the claim, ``COMMIT``) is two instead of four,
        which is what an idle worker's wake-up waits for."""
        if isinstance(connection, JoinedTransaction):  # the async API's: the same writes
            with connection.write_for(self.dialect, pipelined=pipelined) as cursor:
                yield cursor
            return
        if connection is not None:
            caller = self.callers.checked(driver_connection(connection))
            try:
                # A savepoint inside the caller's open transaction (nothing is committed on
                # its behalf); BEGIN … COMMIT on an autocommit connection, so the write is
                # atomic either way.
                if pipelined:
                    with (
                        statements_prepared(caller),
                        pipelined_write(caller) as ending,
                        callers_cursor(caller) as cur,
                    ):
                        yield _WrappedCursor(cur, ending)
                else:
                    with (
                        statements_prepared(caller),
                        caller.transaction(),
                        callers_cursor(caller) as cur,
                    ):
                        yield _WrappedCursor(cur)
            except psycopg.Error as exc:
                raise store_error(exc) from exc
            return
        try:
            with (
                self._connection() as conn,
                pipelined_write(conn) if pipelined else conn.transaction(),
                conn.cursor() as cur,
            ):
                if timeout is not None:
                    limit = f"{max(1, round(timeout * 1000))}ms"
                    cur.execute(
                        "SELECT set_config('lock_timeout', %(t)s, true), "
                        "set_config('statement_timeout', %(t)s, true)",
                        {"t": limit},
                    )
                yield _WrappedCursor(cur)
        except psycopg.Error as exc:
            raise store_error(exc) from exc

    @contextmanager
    def single_write(self, connection: object | None = None) -> Iterator[Cursor]:
        """A cursor on a pooled autocommit connection: each statement is a transaction.

        With the caller's ``connection``: on an autocommit connection outside any
        transaction (Django's, outside ``atomic()``), its own cursor, whose one statement
        is atomic by itself and committed at once (no BEGIN, COMMIT nor savepoint to
        send); else the pipelined savepoint of :meth:`transaction`, inside the caller's
        open transaction."""
        if connection is None:
            with self.reading() as cur:
                yield cur
            return
        caller = driver_connection(connection)
        if (
            isinstance(caller, psycopg.Connection)
            and caller.autocommit
            and caller.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        ):
            checked = self.callers.checked(caller)
            try:
                with statements_prepared(checked), callers_cursor(checked) as cur:
                    yield _WrappedCursor(cur, callers=True)
            except psycopg.Error as exc:
                raise store_error(exc) from exc
            return
        with self.transaction(connection, pipelined=True) as cur:
            yield cur

    @contextmanager
    def reading(self) -> Iterator[Cursor]:
        """A cursor on a pooled autocommit connection."""
        try:
            with self._connection() as conn, conn.cursor() as cur:
                yield _WrappedCursor(cur)
        except psycopg.Error as exc:
            raise store_error(exc) from exc

    def backup(self, target: str) -> None:
        """PostgreSQL is backed up with its own tools: a clear error saying which."""
        raise ConfigurationError(
            "mailfathom backup copies SQLite files; back up PostgreSQL with its own tools: "
            'pg_dump --format=custom --file=mailfathom.dump "$MAILFATHOM_DATABASE_URL" '
            "(add --schema=<schema> when mailfathom has a schema of its own; restore with "
            "pg_restore), or the server's continuous archiving (docs/operations.md, "
            '"Backup and restore")'
        )

    # -- wake-ups ----------------------------------------------------------------------

    def wait_for_jobs(self, timeout: float) -> bool:
        """Block until a job is enqueued (NOTIFY) or ``timeout`` passes; True if notified.

        Also True right after the ``LISTEN`` connection was (re)opened: whatever was
        enqueued before it listened was not announced to it, so the caller should look.
        Only this schema's announcements count (the trigger sends the schema name). A
        lost connection is reopened at once; :class:`StoreError` only when that fails.
        """
        deadline = time.monotonic() + max(timeout, 0.0)
        if not self._listen_lock.acquire(timeout=max(timeout, 0.0)):
            return False  # another thread is already waiting
        try:
            listener = self._listener
            if listener is None or listener.closed or self._listener_pid != os.getpid():
                self._listener, self._listener_pid = None, os.getpid()
                self._listener = self._listen()
                return True
            try:
                while (left := deadline - time.monotonic()) > 0:
                    for notify in listener.notifies(timeout=left, stop_after=1):
                        if notify.payload == self._schema:
                            return True
                return False
            except psycopg.Error:
                with suppress(psycopg.Error):
                    listener.close()
                self._listener = None
                self._listener = self._listen()  # what was announced meanwhile is lost
                return True
        except psycopg.Error as exc:
            raise store_error(exc) from exc
        finally:
            self._listen_lock.release()

    def _listen(self) -> Conn:
        conn = psycopg.connect(self.url, autocommit=True, **self._tcp)
        try:
            conn.execute(f"LISTEN {NOTIFY_CHANNEL}")
            row = conn.execute("SELECT current_schema()").fetchone()
        except psycopg.Error:
            conn.close()
            raise
        self._schema = row[0] if row else None
        return conn

    # -- migrations --------------------------------------------------------------------

    def apply_migrations(self, migrations: Sequence[tuple[int, str, str]]) -> list[str]:
        """Apply unrecorded migrations in one transaction, under an advisory lock.

        The lock is per schema and transaction-scoped, so racing processes wait for
        the first one and then find every version recorded.
        """
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
        """json comes back parsed by psycopg with ``json.loads``, from the exact text stored."""
        value: dict[str, Any] = stored if isinstance(stored, dict) else json.loads(stored)
        return value

    def result_value(self, stored: Any) -> Any:
        """json comes back parsed by psycopg (a JSON string as a str): nothing to do."""
        return stored

    def list_param(self, values: Sequence[Any]) -> str:
        """A JSON array, read in SQL with ``jsonb_array_elements``."""
        return json.dumps(list(values), separators=(",", ":"))


_decode_json = json.JSONDecoder().decode


def _json_loads(data: str | bytes) -> Any:
    """A ``json``/``jsonb`` column's text (UTF-8, the session's client encoding) as
    Python: what psycopg's default ``json.loads`` gives, without its per-call checks and
    encoding detection — half the cost, paid for every job a worker claims (its payload)."""
    return _decode_json(data.decode() if isinstance(data, bytes) else data)


class _WrappedCursor:
    """A psycopg cursor whose driver errors become StoreError."""

    def __init__(
        self,
        cursor: psycopg.Cursor[Any],
        ending: Ending | None = None,
        *,
        callers: bool = False,
    ) -> None:
        self._cursor = cursor
        self._ending = ending
        #: On a caller's connection, whose prepared statements psycopg drops whenever the
        #: caller rolls back: a statement may have to be prepared again at any time.
        self._callers = callers

    @property
    def rowcount(self) -> int:
        return self._cursor.rowcount

    def execute(self, query: Any, params: Any = None, /) -> Any:
        try:
            return self._cursor.execute(query, params)
        except psycopg.errors.FeatureNotSupported as exc:
            if "cached plan" in str(exc):
                _forget_prepared(self._cursor.connection)
            raise store_error(exc) from exc
        except psycopg.Error as exc:
            raise store_error(exc) from exc

    def execute_each(
        self, query: Any, params_seq: Sequence[Any], *, last: bool = False
    ) -> list[list[Any]]:
        """Run ``query`` once per parameter set, pipelined (psycopg's ``executemany``: the
        statements go out without waiting for each other's results); the rows of each, in
        order.

        ``last``: nothing more is written in this transaction. In a pipelined write on a
        caller's connection its end (release or commit) then goes out with these
        statements, and their rows are read after it: the whole write is one round trip.
        """
        if not params_seq:
            return []
        if len(params_seq) == 1 and self._ending is None:
            return [self._execute_prepared(query, params_seq[0])]
        if last and self._ending is not None:
            return self._each_then_end(query, params_seq, self._ending)
        try:
            self._cursor.executemany(query, params_seq, returning=True)
            results = [self._cursor.fetchall()]
            while self._cursor.nextset():
                results.append(self._cursor.fetchall())
        except psycopg.Error as exc:
            raise store_error(exc) from exc
        return results

    def _execute_prepared(self, query: Any, params: Any) -> list[Any]:
        """One statement, run prepared: one round trip. On a caller's connection it goes in
        pipeline mode, so that when it has to be prepared (first, or again after the
        caller rolled back) the preparation travels with it instead of costing a round
        trip of its own."""
        cursor = self._cursor
        try:
            if self._callers:
                with cursor.connection.pipeline():
                    cursor.execute(query, params, prepare=True)
            else:
                cursor.execute(query, params, prepare=True)
            return cursor.fetchall()
        except psycopg.Error as exc:
            raise store_error(exc) from exc

    def _each_then_end(
        self, query: Any, params_seq: Sequence[Any], ending: Ending
    ) -> list[list[Any]]:
        """One cursor per statement, this one first (psycopg keeps a pipelined
        ``execute``'s rows on its cursor until they are read), then the end of the write
        and one sync for all."""
        connection = self._cursor.connection
        more = [callers_cursor(connection) for _ in params_seq[1:]]
        cursors = [self._cursor, *more]
        try:
            for cursor, params in zip(cursors, params_seq, strict=True):
                cursor.execute(query, params, prepare=True)  # as executemany does
            ending.send()
            return [cursor.fetchall() for cursor in cursors]
        except psycopg.Error as exc:
            raise store_error(exc) from exc
        finally:
            for cursor in more:
                cursor.close()

    def fetchone(self) -> Any:
        return self._cursor.fetchone()

    def fetchall(self) -> list[Any]:
        return self._cursor.fetchall()


def _server_hung_up(conn: Conn) -> bool:
    """Whether an idle pooled connection is dead, checked without a round trip.

    An idle session receives nothing unless the server is closing it (a restart
    or an administrator sends an error, then EOF), so a readable socket means:
    read what came, and the connection is dead if that fails.
    """
    if conn.closed or conn.broken:
        return True
    poller = select.poll()
    poller.register(conn.fileno(), select.POLLIN)
    if not poller.poll(0):
        return False
    try:
        conn.execute("")
    except psycopg.Error:
        return True
    return False


def _forget_prepared(conn: Conn) -> None:
    """Drop a connection's prepared statements after a migration changed what they return.

    A statement prepared before ``ALTER TABLE`` that changes ``SELECT *`` fails with
    "cached plan must not change result type" until it is prepared again. A failed
    transaction ends in ROLLBACK, which already makes psycopg start afresh; an
    autocommit read needs ``DEALLOCATE ALL``, which psycopg notices the same way.
    """
    if conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
        with suppress(psycopg.Error):
            conn.execute("DEALLOCATE ALL")


def _pool_timeout(url: str) -> float:
    """The URL's ``connect_timeout`` (seconds), else the default."""
    try:
        given = conninfo_to_dict(url).get("connect_timeout")
    except psycopg.Error as exc:
        # libpq quotes the offending part, which may be (part of) the password: mask any
        # quoted text taken from the user:password part or a password= option.
        options = re.findall(r"[?&](?:ssl)?password=([^&]*)", url, flags=re.IGNORECASE)
        secret = " ".join([url.partition("://")[2].rpartition("@")[0], *options])
        reason = re.sub(
            r'"([^"]*)"',
            lambda m: '"…"' if m.group(1) and m.group(1) in secret else m.group(0),
            _first_line(exc),
        )
        raise ConfigurationError(
            f"database_url is not a valid PostgreSQL URL ({reason}): write "
            "postgresql://user:password@host:port/dbname?option=value with libpq's options, "
            "and percent-encode any of % / @ : # ? in the password (%25 %2F %40 %3A %23 %3F)"
        ) from None
    port = conninfo_to_dict(url).get("port")
    if port is not None and not all(p.strip().isdigit() for p in str(port).split(",")):
        # Most often a password with an unencoded "/" or "#": never echo it.
        raise ConfigurationError(
            "database_url has a port that is not a number (not shown: it may be part of the "
            "password): percent-encode any of % / @ : # ? in the password "
            "(%25 %2F %40 %3A %23 %3F)"
        )
    if given is None:
        return _DEFAULT_POOL_TIMEOUT
    try:
        seconds = float(given)
    except ValueError:
        raise ConfigurationError(
            f"connect_timeout={given!r} in database_url is not a number of seconds: "
            "write for example connect_timeout=5"
        ) from None
    return seconds if seconds > 0 else _DEFAULT_POOL_TIMEOUT


#: Connection refusals that no waiting cures, by SQLSTATE, with what to fix.
_WRONG_SETTINGS = {
    "3D000": "the database does not exist: create it (createdb NAME, or `CREATE DATABASE`) "
    "or fix the database name in database_url",
    "28P01": "the password was refused: fix the password in database_url (or PGPASSWORD, "
    "~/.pgpass)",
    "28000": "the server does not accept this role: create it (`CREATE ROLE name LOGIN`) "
    "or fix the user name in database_url, and check pg_hba.conf",
}
#: The same refusals by the server's (English) message, for drivers that give no SQLSTATE
#: for a failed connection.
_WRONG_SETTINGS_TEXT = (
    (re.compile(r'database "[^"]*" does not exist'), "3D000"),
    (re.compile(r"password authentication failed"), "28P01"),
    (re.compile(r'role "[^"]*" does not exist|no pg_hba\.conf entry'), "28000"),
)


def _settings_fix(exc: psycopg.Error) -> str | None:
    """What to fix when ``exc`` is a connection refused for good (a missing database or
    role, a wrong password), else None."""
    state = exc.sqlstate or ""
    if state not in _WRONG_SETTINGS:
        text = str(exc)
        state = next((code for found, code in _WRONG_SETTINGS_TEXT if found.search(text)), "")
    return _WRONG_SETTINGS.get(state)


def _first_line_fatal(exc: BaseException) -> str:
    """The server's own words from a failed connection (its ``FATAL:`` line), else the
    first line."""
    for line in str(exc).splitlines():
        if "FATAL:" in line:
            return line[line.index("FATAL:") :].replace("FATAL:", "", 1).strip()
    return _first_line(exc)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def store_error(exc: psycopg.Error) -> StoreError:
    """A driver error as the :class:`StoreError` that says what happened and what to do."""
    state = exc.sqlstate or ""
    if isinstance(exc, psycopg.errors.UndefinedTable):
        return StoreError(
            f"PostgreSQL schema is missing ({exc}): run `{hints.command('migrate')}` first"
        )
    if "cached plan must not change result type" in str(exc):
        return StoreError(
            "the database schema changed under a prepared statement (a migration ran while "
            "this process was connected): nothing was written; retry, it is prepared afresh"
        )
    if _no_slots(exc):
        return _slots_error(exc)
    if state in ("55P03", "57014"):  # lock_not_available, query_canceled
        return StoreError(
            f"PostgreSQL cancelled the statement ({_first_line(exc)}): a lock or statement "
            "timeout (enqueue_timeout) ran out while another transaction held a lock, or "
            "an administrator cancelled it; nothing was written: retry, and look in "
            "pg_stat_activity for long transactions"
        )
    if state.startswith("40"):  # serialization failure, deadlock: the transaction was undone
        return StoreError(
            f"PostgreSQL rolled the transaction back ({_first_line(exc)}): nothing was written; "
            "retry it"
        )
    if isinstance(exc, psycopg.OperationalError) and (
        not state or state.startswith("08") or state in _SHUTTING_DOWN
    ):
        return StoreError(
            f"PostgreSQL connection failed ({_first_line(exc)}): check that the server runs "
            "and the URL is right; a write in flight may or may not have been committed, "
            "and the next call reconnects"
        )
    # class 22 (data exception) and 23 (integrity constraint violation): the row itself
    refused = state.startswith(("22", "23"))
    return StoreError(f"PostgreSQL failed: {exc}", refused=refused)


# admin_shutdown, crash_shutdown, cannot_connect_now
_SHUTTING_DOWN = frozenset({"57P01", "57P02", "57P03"})


def _no_slots(exc: psycopg.Error) -> bool:
    """The server turned the connection away for want of connection slots (53300): "too
    many clients already", "remaining connection slots are reserved", or a role's or
    database's connection limit."""
    text = str(exc)
    return exc.sqlstate == "53300" or (
        isinstance(exc, psycopg.OperationalError)
        and any(
            words in text
            for words in ("too many clients", "remaining connection slots", "too many connections")
        )
    )


def _slots_error(exc: psycopg.Error) -> StoreError:
    return StoreError(
        f"PostgreSQL refused the connection: it has no connection slot left "
        f"({_first_line(exc)}). The server runs, but its connections (max_connections, or "
        "the role's or database's CONNECTION LIMIT) are all taken: use fewer worker "
        "processes or a smaller concurrency, close idle clients, put a pooler such as "
        "PgBouncer in front, or raise the limit; the pool reconnects once a slot is free"
    )
