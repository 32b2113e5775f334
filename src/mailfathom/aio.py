"""``AsyncMailFathom``: the application's API, awaited from an event loop.

Internal: not part of the public API (:mod:`mailfathom` exports ``AsyncMailFathom`` and
its views: ``AsyncJobs``, ``AsyncOutbox``, ``AsyncQueues``, ``AsyncSchedules``,
``AsyncLimits``, ``AsyncWorkers`` and ``AsyncSuppressions``).

Each async method is the sync method of the same name, run without blocking the loop;
none is written twice. With an async ``connection=`` (psycopg's ``AsyncConnection``,
aiosqlite, a SQLAlchemy ``AsyncSession`` …) the sync implementation runs on the loop in
a greenlet and awaits each statement on the caller's connection, inside the caller's
transaction (:mod:`mailfathom.store.async_callers`). Without one it runs in a thread on
mailfathom's own connections, as every read does: a thread of mailfathom's own executor,
as many threads as the store has connections, so its calls never queue behind the
application's other blocking work on the loop's default executor (a few threads), and
never start more at once than there are connections to run them.

The shape, a separate object whose methods keep their sync names (as SQLAlchemy's
``AsyncSession`` wraps a ``Session``), rather than ``a``-prefixed twins on every object:
the async API reads as the sync one with ``await`` in front, one documentation serves
both, and ``mf.outbox``, ``mf.jobs`` and the rest keep a single set of names each.
"""

from __future__ import annotations

import asyncio
import builtins
import contextvars
import functools
import os
import threading
import weakref
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from email.message import EmailMessage
from typing import TYPE_CHECKING, Any, Concatenate, Generic, Literal, ParamSpec, TypeVar, overload

from mailfathom.app import MailFathom
from mailfathom.batch_ids import BatchIds
from mailfathom.delivery.model import RecordedEmail
from mailfathom.delivery.outbox import Outbox
from mailfathom.delivery.suppressions import Suppressions
from mailfathom.errors import InvalidInput
from mailfathom.jobs.admin.admin import Jobs
from mailfathom.jobs.admin.limits import Limits
from mailfathom.jobs.admin.queues import Queues
from mailfathom.jobs.admin.workers import Workers
from mailfathom.jobs.model import EnqueuedJob
from mailfathom.jobs.schedules.schedule_admin import Schedules
from mailfathom.store.async_callers import joined
from mailfathom.store.bridge import run_bridged
from mailfathom.store.database import Database

__all__ = [
    "AsyncJobs",
    "AsyncLimits",
    "AsyncMailFathom",
    "AsyncOutbox",
    "AsyncQueues",
    "AsyncSchedules",
    "AsyncSuppressions",
    "AsyncWorkers",
]

P = ParamSpec("P")
R = TypeVar("R")


class _Runner:
    """Runs one sync call for a coroutine: on the caller's async connection when
    ``connection=`` is given, else in a thread of its own executor."""

    def __init__(self, database: Database) -> None:
        self._db = database
        self._threads: ThreadPoolExecutor | None = None
        self._pid = 0
        self._lock = threading.Lock()

    def executor(self) -> ThreadPoolExecutor:
        """The threads calls without ``connection=`` run in: one per connection of the
        store (more would only wait for one), made on first use (again after a fork)."""
        threads = self._threads
        if threads is not None and self._pid == os.getpid():
            return threads
        with self._lock:
            if self._threads is None or self._pid != os.getpid():
                self._threads = ThreadPoolExecutor(
                    max_workers=self._db.max_connections, thread_name_prefix="mailfathom-async"
                )
                self._pid = os.getpid()
                weakref.finalize(self, self._threads.shutdown, wait=False)
            return self._threads

    async def call(self, function: Callable[..., R], args: Any, kwargs: dict[str, Any]) -> R:
        connection = kwargs.get("connection")
        if connection is None:
            # as asyncio.to_thread does, the thread runs in the caller's context (its span)
            run = functools.partial(contextvars.copy_context().run, function, *args, **kwargs)
            return await asyncio.get_running_loop().run_in_executor(self.executor(), run)
        async with joined(self._db, connection) as transaction:
            given = {**kwargs, "connection": transaction}
            return await run_bridged(functools.partial(function, *args, **given))


class _Wrapper:
    """What an async view holds: the sync object it awaits, and how to run its calls."""

    def __init__(self, sync: Any, runner: _Runner) -> None:
        self._sync = sync
        self._runner = runner


class _Awaited(Generic[P, R]):
    """An async method: the sync ``method`` of the wrapped object, awaited (same
    parameters, same result, same errors)."""

    def __init__(self, method: Callable[Concatenate[Any, P], R]) -> None:
        self._method = method
        self.__doc__ = method.__doc__

    @overload
    def __get__(self, instance: None, owner: type) -> _Awaited[P, R]: ...

    @overload
    def __get__(self, instance: _Wrapper, owner: type) -> Callable[P, Coroutine[Any, Any, R]]: ...

    def __get__(
        self, instance: _Wrapper | None, owner: type
    ) -> _Awaited[P, R] | Callable[P, Coroutine[Any, Any, R]]:
        if instance is None:
            return self
        bound = functools.partial(self._method, instance._sync)
        runner = instance._runner

        async def call(*args: P.args, **kwargs: P.kwargs) -> R:
            return await runner.call(bound, args, kwargs)

        call.__doc__ = self._method.__doc__
        call.__name__ = self._method.__name__
        return call


class AsyncJobs(_Wrapper):
    """:class:`~mailfathom.Jobs` awaited: reads and operator moves on jobs."""

    get = _Awaited(Jobs.get)
    list = _Awaited(Jobs.list)
    counts = _Awaited(Jobs.counts)
    held_count = _Awaited(Jobs.held_count)
    attempts = _Awaited(Jobs.attempts)
    events = _Awaited(Jobs.events)
    audit = _Awaited(Jobs.audit)
    requeue = _Awaited(Jobs.requeue)
    drop = _Awaited(Jobs.drop)
    release = _Awaited(Jobs.release)
    hold = _Awaited(Jobs.hold)
    run_now = _Awaited(Jobs.run_now)
    abort = _Awaited(Jobs.abort)
    throughput = _Awaited(Jobs.throughput)


class AsyncOutbox(_Wrapper):
    """:class:`~mailfathom.Outbox` awaited: record (in the caller's async transaction
    with ``connection=``), read, and the operator moves on outgoing emails."""

    record = _Awaited(Outbox.record)
    if TYPE_CHECKING:  # the sync method's overloads (a ParamSpec keeps only the first)

        @overload
        async def record_many(
            self,
            messages: Iterable[EmailMessage | bytes],
            *,
            idempotency_keys: Iterable[str | None] | None = None,
            sender: str | None = None,
            recipients: Sequence[str] | None = None,
            run_at: datetime | None = None,
            priority: int = 0,
            expires_at: datetime | None = None,
            connection: object | None = None,
            envelopes: Iterable[tuple[str, Sequence[str]]] | None = None,
            returning: Literal["records"] = "records",
        ) -> builtins.list[RecordedEmail]: ...

        @overload
        async def record_many(
            self,
            messages: Iterable[EmailMessage | bytes],
            *,
            idempotency_keys: Iterable[str | None] | None = None,
            sender: str | None = None,
            recipients: Sequence[str] | None = None,
            run_at: datetime | None = None,
            priority: int = 0,
            expires_at: datetime | None = None,
            connection: object | None = None,
            envelopes: Iterable[tuple[str, Sequence[str]]] | None = None,
            returning: Literal["ids"],
        ) -> BatchIds: ...

        async def record_many(self, *args: Any, **kwargs: Any) -> Any:
            """:meth:`Outbox.record_many`, awaited."""

    else:
        record_many = _Awaited(Outbox.record_many)
    get = _Awaited(Outbox.get)
    parts = _Awaited(Outbox.parts)
    message_bytes = _Awaited(Outbox.message_bytes)
    list = _Awaited(Outbox.list)
    counts = _Awaited(Outbox.counts)
    events = _Awaited(Outbox.events)
    audit = _Awaited(Outbox.audit)
    cancel = _Awaited(Outbox.cancel)
    resolve = _Awaited(Outbox.resolve)
    unknown = _Awaited(Outbox.unknown)
    unknown_count = _Awaited(Outbox.unknown_count)
    record_again = _Awaited(Outbox.record_again)


class AsyncQueues(_Wrapper):
    """:class:`~mailfathom.Queues` awaited: list, pause and resume queues."""

    paused = _Awaited(Queues.paused)
    list = _Awaited(Queues.list)
    pause = _Awaited(Queues.pause)
    resume = _Awaited(Queues.resume)
    events = _Awaited(Queues.events)


class AsyncSchedules(_Wrapper):
    """:class:`~mailfathom.Schedules` awaited: the stored schedules and the operator's
    moves on them (declaring a schedule stays on the sync app: it touches no database)."""

    sync = _Awaited(Schedules.sync)
    list = _Awaited(Schedules.list)
    get = _Awaited(Schedules.get)
    pause = _Awaited(Schedules.pause)
    resume = _Awaited(Schedules.resume)
    remove = _Awaited(Schedules.remove)


class AsyncLimits(_Wrapper):
    """:class:`~mailfathom.Limits` awaited: the stored flow-control limits and their use
    (declaring a limit stays on the sync app: it touches no database)."""

    sync = _Awaited(Limits.sync)
    remove = _Awaited(Limits.remove)
    stored = _Awaited(Limits.stored)
    usage = _Awaited(Limits.usage)


class AsyncWorkers(_Wrapper):
    """:class:`~mailfathom.Workers` awaited: the fleet's workers as they report in."""

    list = _Awaited(Workers.list)


class AsyncSuppressions(_Wrapper):
    """:class:`~mailfathom.Suppressions` awaited: the addresses no email goes to."""

    add = _Awaited(Suppressions.add)
    lift = _Awaited(Suppressions.lift)
    get = _Awaited(Suppressions.get)
    is_suppressed = _Awaited(Suppressions.is_suppressed)
    list = _Awaited(Suppressions.list)
    counts = _Awaited(Suppressions.counts)
    ingest_dsn = _Awaited(Suppressions.ingest_dsn)
    ingest_events = _Awaited(Suppressions.ingest_events)
    ingest_ses = _Awaited(Suppressions.ingest_ses)
    events = _Awaited(Suppressions.events)
    soft_bounces = _Awaited(Suppressions.soft_bounces)
    event_counts = _Awaited(Suppressions.event_counts)
    among = _Awaited(Suppressions.among)


#: What stays on the sync object: declarations (which touch no database: a worker
#: writes them when it starts), the worker and pruner it runs, and closing it.
SYNC_ONLY: dict[type, frozenset[str]] = {
    MailFathom: frozenset(
        {"job", "schedule", "limit_queue", "limit_kind", "worker", "pruner", "close"}
    ),
    Schedules: frozenset({"declare", "declared"}),
    Limits: frozenset({"declare", "declare_values", "declared", "get"}),
}


class AsyncMailFathom(_Wrapper):
    """A :class:`~mailfathom.MailFathom`, awaited from an event loop.

    ``AsyncMailFathom(mf)`` shares everything with ``mf`` (its database, settings, job
    kinds and worker); each method is ``mf``'s method of the same name, with the same
    parameters and errors, and never blocks the loop. ``connection=`` takes the
    application's async connection (a psycopg ``AsyncConnection``, an aiosqlite
    connection, or a SQLAlchemy ``AsyncSession`` / ``AsyncConnection`` on either): the
    job or email is written in that transaction and commits or rolls back with it.
    """

    def __init__(self, mf: MailFathom) -> None:
        if not isinstance(mf, MailFathom):
            raise InvalidInput(
                f"AsyncMailFathom takes the app, not {type(mf).__name__}: write "
                "AsyncMailFathom(MailFathom(database_url))"
            )
        super().__init__(mf, _Runner(mf.store.db))
        #: The sync app this one awaits (register job kinds and run workers on it).
        self.sync = mf
        #: Operator reads and moves on jobs, awaited.
        self.jobs = AsyncJobs(mf.jobs, self._runner)
        #: The outbox, awaited.
        self.outbox = AsyncOutbox(mf.outbox, self._runner)
        #: Queues: list, pause, resume, awaited.
        self.queues = AsyncQueues(mf.queues, self._runner)
        #: The stored schedules, awaited (declare them on ``mf``).
        self.schedules = AsyncSchedules(mf.schedules, self._runner)
        #: The stored flow-control limits, awaited (declare them on ``mf``).
        self.limits = AsyncLimits(mf.limits, self._runner)
        #: The fleet's workers, awaited.
        self.workers = AsyncWorkers(mf.workers, self._runner)
        #: Suppressed addresses, awaited.
        self.suppressions = AsyncSuppressions(mf.suppressions, self._runner)

    enqueue = _Awaited(MailFathom.enqueue)
    if TYPE_CHECKING:  # the sync method's overloads (a ParamSpec keeps only the first)

        @overload
        async def enqueue_many(
            self,
            kind: str,
            payloads: Iterable[Mapping[str, Any] | None],
            *,
            idempotency_keys: Iterable[str | None] | None = None,
            queue: str | None = None,
            priority: int = 0,
            delay: timedelta | float | None = None,
            run_at: datetime | None = None,
            hold: bool = False,
            max_attempts: int | None = None,
            connection: object | None = None,
            returning: Literal["jobs"] = "jobs",
        ) -> list[EnqueuedJob]: ...

        @overload
        async def enqueue_many(
            self,
            kind: str,
            payloads: Iterable[Mapping[str, Any] | None],
            *,
            idempotency_keys: Iterable[str | None] | None = None,
            queue: str | None = None,
            priority: int = 0,
            delay: timedelta | float | None = None,
            run_at: datetime | None = None,
            hold: bool = False,
            max_attempts: int | None = None,
            connection: object | None = None,
            returning: Literal["ids"],
        ) -> BatchIds: ...

        async def enqueue_many(self, *args: Any, **kwargs: Any) -> Any:
            """:meth:`MailFathom.enqueue_many`, awaited."""

    else:
        enqueue_many = _Awaited(MailFathom.enqueue_many)
    migrate = _Awaited(MailFathom.migrate)
    prune = _Awaited(MailFathom.prune)
