"""``AsyncMailFathom``: the application's API, awaited from an event loop.

Internal: not part of the public API (:mod:`mailfathom` exports ``AsyncMailFathom``,
``AsyncJobs`` and ``AsyncOutbox``).

Each async method is the sync method of the same name, run without blocking the loop;
none is written twice. With an async ``connection=`` (psycopg's ``AsyncConnection``,
aiosqlite, a SQLAlchemy ``AsyncSession`` …) the sync implementation runs on the loop in
a greenlet and awaits each statement on the caller's connection, inside the caller's
transaction (:mod:`mailfathom.store.async_callers`). Without one it runs in a thread on
mailfathom's own connections (:func:`asyncio.to_thread`), as every read does.

The shape, a separate object whose methods keep their sync names (as SQLAlchemy's
``AsyncSession`` wraps a ``Session``), rather than ``a``-prefixed twins on every object:
the async API reads as the sync one with ``await`` in front, one documentation serves
both, and ``mf.outbox``, ``mf.jobs`` and the rest keep a single set of names each.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Coroutine
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, overload

from mailfathom.app import MailFathom
from mailfathom.delivery.outbox import Outbox
from mailfathom.errors import InvalidInput
from mailfathom.jobs.admin.admin import Jobs
from mailfathom.store.async_callers import joined
from mailfathom.store.bridge import run_bridged
from mailfathom.store.database import Database

__all__ = ["AsyncJobs", "AsyncMailFathom", "AsyncOutbox"]

P = ParamSpec("P")
R = TypeVar("R")


class _Runner:
    """Runs one sync call for a coroutine: on the caller's async connection when
    ``connection=`` is given, else in a thread."""

    def __init__(self, database: Database) -> None:
        self._db = database

    async def call(self, function: Callable[..., R], args: Any, kwargs: dict[str, Any]) -> R:
        connection = kwargs.get("connection")
        if connection is None:
            return await asyncio.to_thread(functools.partial(function, *args, **kwargs))
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


class AsyncOutbox(_Wrapper):
    """:class:`~mailfathom.Outbox` awaited: record (in the caller's async transaction
    with ``connection=``), read, and the operator moves on outgoing emails."""

    record = _Awaited(Outbox.record)
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

    enqueue = _Awaited(MailFathom.enqueue)
    enqueue_many = _Awaited(MailFathom.enqueue_many)
    migrate = _Awaited(MailFathom.migrate)
