"""``AsyncMailFathom``: enqueue, record and read from an event loop, inside the caller's
async transaction (psycopg ``AsyncConnection``, aiosqlite), never blocking the loop.

Every test runs on both stores, on real async connections of the test's own.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from email.message import EmailMessage
from typing import Any

import aiosqlite
import psycopg
import pytest

from mailfathom import (
    AsyncJobs,
    AsyncLimits,
    AsyncMailFathom,
    AsyncOutbox,
    AsyncQueues,
    AsyncSchedules,
    AsyncSuppressions,
    AsyncWorkers,
    IllegalTransition,
    InvalidInput,
    JobContext,
    Jobs,
    JobState,
    Limits,
    MailFathom,
    NotFound,
    Outbox,
    Queues,
    Schedules,
    StoreError,
    Suppressions,
    Workers,
)
from mailfathom.aio import SYNC_ONLY
from mailfathom.store.bridge import await_on_loop
from pg_trace import round_trips, traced
from raw_database import raw_reading, raw_transaction


@asynccontextmanager
async def async_connection(mf: MailFathom) -> AsyncIterator[Any]:
    """An async connection of the application's own on mailfathom's database (not in
    autocommit mode: its first statement opens a transaction that it commits or rolls
    back)."""
    if mf.store.dialect == "sqlite":
        async with aiosqlite.connect(mf.store.db.path) as conn:  # type: ignore[attr-defined]
            yield conn
    else:
        async with await psycopg.AsyncConnection.connect(mf.settings.database_url) as conn:
            yield conn


def message(to: str = "customer@example.org") -> EmailMessage:
    email = EmailMessage()
    email["From"] = "shop@example.com"
    email["To"] = to
    email["Subject"] = "Your order"
    email.set_content("Thank you.")
    return email


def committed_jobs(mf: MailFathom) -> list[dict[str, Any]]:
    """Every job's payload as another connection sees it (committed rows only)."""
    return [job.payload for job in mf.jobs.list(kind="orders.ship")]


def committed_emails(mf: MailFathom) -> int:
    with raw_reading(mf) as cur:
        cur.execute("SELECT count(*) AS n FROM mf_outbox")
        return int(cur.fetchone()["n"])


def test_a_rolled_back_transaction_leaves_no_job_and_no_email(mf: MailFathom) -> None:
    amf = AsyncMailFathom(mf)

    async def main() -> None:
        async with async_connection(mf) as conn:
            job = await amf.enqueue("orders.ship", {"order": 1}, connection=conn)
            jobs = await amf.enqueue_many(
                "orders.ship", [{"order": 2}, {"order": 3}], connection=conn
            )
            email = await amf.outbox.record(message(), connection=conn)
            emails = await amf.outbox.record_many(
                [message("a@example.org"), message("b@example.org")], connection=conn
            )
            assert job.created and [j.created for j in jobs] == [True, True]
            assert email.created and len(emails) == 2
            # written in the caller's transaction, which has not committed: unseen elsewhere
            assert committed_jobs(mf) == []
            assert committed_emails(mf) == 0
            await conn.rollback()
        assert committed_jobs(mf) == []
        assert committed_emails(mf) == 0
        with pytest.raises(NotFound):
            await amf.jobs.get(job.id)

    asyncio.run(main())


def test_a_committed_transaction_keeps_every_job_and_email(mf: MailFathom) -> None:
    amf = AsyncMailFathom(mf)

    async def main() -> None:
        async with async_connection(mf) as conn:
            job = await amf.enqueue("orders.ship", {"order": 1}, connection=conn)
            await amf.enqueue_many("orders.ship", [{"order": 2}, {"order": 3}], connection=conn)
            email = await amf.outbox.record(message(), connection=conn, idempotency_key="o-1")
            await amf.outbox.record_many(
                [message("a@example.org"), message("b@example.org")], connection=conn
            )
            assert committed_jobs(mf) == []
            await conn.commit()
        assert committed_jobs(mf) == [{"order": 3}, {"order": 2}, {"order": 1}]
        assert committed_emails(mf) == 3
        # the reads, awaited
        assert (await amf.jobs.get(job.id)).payload == {"order": 1}
        pending = await amf.jobs.list("Pending", kind="orders.ship")
        assert [j.payload for j in pending] == [{"order": 3}, {"order": 2}, {"order": 1}]
        counts = await amf.jobs.counts()
        assert counts[JobState.PENDING] == 6  # three orders, three deliveries
        recorded = await amf.outbox.get(email.id)
        assert recorded.recipients[0].address == "customer@example.org"
        assert len(await amf.outbox.list()) == 3
        # the same key again: the existing record, nothing new
        again = await amf.outbox.record(message(), idempotency_key="o-1")
        assert (again.id, again.created) == (email.id, False)

    asyncio.run(main())


def test_without_a_connection_each_call_commits_on_its_own(mf: MailFathom) -> None:
    amf = AsyncMailFathom(mf)

    async def main() -> None:
        first = await amf.enqueue("orders.ship", {"order": 1}, idempotency_key="k")
        again = await amf.enqueue("orders.ship", {"order": 9}, idempotency_key="k")
        assert (again.id, again.created) == (first.id, False)
        await amf.enqueue_many("orders.ship", [{"order": 2}])
        await amf.outbox.record(message())

    asyncio.run(main())
    assert committed_jobs(mf)[-2:] == [{"order": 2}, {"order": 1}]
    assert committed_emails(mf) == 1


def test_bad_input_inside_the_transaction_changes_nothing_and_the_transaction_goes_on(
    mf: MailFathom,
) -> None:
    amf = AsyncMailFathom(mf)

    async def main() -> None:
        async with async_connection(mf) as conn:
            await amf.enqueue("orders.ship", {"order": 1}, connection=conn)
            with pytest.raises(InvalidInput, match="priority"):
                await amf.enqueue("orders.ship", {"order": 2}, priority=2**40, connection=conn)
            with pytest.raises(InvalidInput, match="appears twice"):
                await amf.enqueue_many(
                    "orders.ship", [{}, {}], idempotency_keys=["a", "a"], connection=conn
                )
            await conn.commit()

    asyncio.run(main())
    assert committed_jobs(mf) == [{"order": 1}]


def test_a_connection_to_another_database_is_refused_and_nothing_is_written(
    mf: MailFathom, tmp_path: Any
) -> None:
    amf = AsyncMailFathom(mf)

    async def main() -> None:
        if mf.store.dialect == "sqlite":
            async with aiosqlite.connect(tmp_path / "other.db") as conn:
                with pytest.raises(InvalidInput, match=r"other\.db"):
                    await amf.enqueue("orders.ship", {}, connection=conn)
        else:
            url = mf.settings.database_url.partition("?")[0]  # the public schema
            async with await psycopg.AsyncConnection.connect(url) as conn:
                with pytest.raises(InvalidInput, match="schema 'public'"):
                    await amf.enqueue("orders.ship", {}, connection=conn)

    asyncio.run(main())
    assert committed_jobs(mf) == []


def test_a_sync_connection_or_the_other_stores_driver_is_refused_saying_what_to_pass(
    mf: MailFathom, tmp_path: Any
) -> None:
    amf = AsyncMailFathom(mf)

    async def main() -> None:
        if mf.store.dialect == "sqlite":
            sync = sqlite3.connect(mf.store.db.path)  # type: ignore[attr-defined]
            try:
                with pytest.raises(InvalidInput, match=r"sync sqlite3\.Connection.*aiosqlite"):
                    await amf.enqueue("orders.ship", {}, connection=sync)
            finally:
                sync.close()
            with pytest.raises(InvalidInput, match="must be an aiosqlite connection"):
                await amf.enqueue("orders.ship", {}, connection=object())
        else:
            async with aiosqlite.connect(tmp_path / "other.db") as conn:
                with pytest.raises(InvalidInput, match="this store is postgresql"):
                    await amf.enqueue("orders.ship", {}, connection=conn)

    asyncio.run(main())
    assert committed_jobs(mf) == []
    with pytest.raises(InvalidInput, match="AsyncMailFathom takes the app"):
        AsyncMailFathom(mf.store)  # type: ignore[arg-type]


def test_an_async_connection_given_to_the_sync_api_is_refused() -> None:
    with pytest.raises(RuntimeError, match="await the AsyncMailFathom method"):
        await_on_loop(asyncio.sleep(0))


# -- the loop is never blocked ----------------------------------------------------------


class Heartbeat:
    """A task that ticks every millisecond and keeps the longest gap between two ticks:
    any call that holds the loop shows up as that gap."""

    def __init__(self) -> None:
        self.ticks = 0
        self.longest = 0.0
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            before = loop.time()
            await asyncio.sleep(0.001)
            self.longest = max(self.longest, loop.time() - before - 0.001)
            self.ticks += 1

    async def beats(self, n: int) -> None:
        """Return once the heartbeat has ticked ``n`` more times."""
        target = self.ticks + n
        while self.ticks < target:
            await asyncio.sleep(0.001)

    def stop(self) -> None:
        assert self._task is not None
        self._task.cancel()


@asynccontextmanager
async def write_lock_held(mf: MailFathom) -> AsyncIterator[Any]:
    """Another connection holding the lock every enqueue needs, until the block ends."""
    if mf.store.dialect == "sqlite":
        holder = sqlite3.connect(mf.store.db.path, isolation_level=None)  # type: ignore[attr-defined]
        holder.execute("BEGIN IMMEDIATE")
        try:
            yield holder
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        return
    async with await psycopg.AsyncConnection.connect(mf.settings.database_url) as locker:
        await locker.execute("LOCK TABLE mf_jobs IN SHARE MODE")  # INSERT waits for it
        yield locker
        await locker.rollback()


async def waiting_on_the_lock(mf: MailFathom, holder: Any, heartbeat: Heartbeat) -> None:
    """Return once the enqueue is seen waiting for the holder's lock (PostgreSQL says so;
    SQLite's busy handler does not show: the enqueue has had a moment to reach it)."""
    if mf.store.dialect == "sqlite":
        await heartbeat.beats(20)
        return
    query = "SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = 'mf_jobs'::regclass"
    while True:
        row = await (await holder.execute(query)).fetchone()
        if row[0]:
            return
        await asyncio.sleep(0.002)


@pytest.mark.parametrize("joined", [True, False], ids=["callers_connection", "own_connection"])
def test_an_enqueue_waiting_on_a_lock_leaves_the_loop_running(mf: MailFathom, joined: bool) -> None:
    # (an enqueue that did block the loop would fail after enqueue_timeout, not hang)
    app = MailFathom(mf.settings.database_url, enqueue_timeout=5.0)
    amf = AsyncMailFathom(app)

    async def main() -> float:
        heartbeat = Heartbeat()
        heartbeat.start()
        async with async_connection(mf) as conn:
            async with write_lock_held(mf) as holder:
                enqueue = asyncio.create_task(
                    amf.enqueue("orders.ship", {"order": 1}, connection=conn if joined else None)
                )
                await waiting_on_the_lock(mf, holder, heartbeat)
                await heartbeat.beats(20)  # the loop runs while the enqueue waits
                assert not enqueue.done()
            job = await enqueue  # the lock is gone: the enqueue goes through
            await conn.commit()
        heartbeat.stop()
        assert job.created
        return heartbeat.longest

    try:
        longest = asyncio.run(main())
    finally:
        app.close()
    assert committed_jobs(mf) == [{"order": 1}]
    # a call that held the loop for the lock's duration would show here (a loaded machine
    # gives some lag of its own: the bound is far under the time the lock was held)
    assert longest < 0.25, f"the loop stalled for {longest * 1000:.0f} ms"


def test_a_failed_write_is_undone_alone_and_the_callers_transaction_goes_on(
    postgres_schema_url: str,
) -> None:
    """(PostgreSQL, where a failed statement would otherwise abort the whole transaction.)"""
    mf = MailFathom(postgres_schema_url)
    mf.migrate()
    amf = AsyncMailFathom(mf)

    async def main() -> None:
        async with async_connection(mf) as conn:
            await amf.enqueue("orders.ship", {"order": 1}, connection=conn)
            await conn.execute("SET lock_timeout = '200ms'")
            async with async_connection(mf) as holder:  # holds key "k", uncommitted
                await amf.enqueue("orders.ship", {}, idempotency_key="k", connection=holder)
                with pytest.raises(StoreError, match="cancelled the statement"):
                    await amf.enqueue(
                        "orders.ship", {"order": 2}, idempotency_key="k", connection=conn
                    )
                await holder.rollback()
            await amf.enqueue("orders.ship", {"order": 3}, connection=conn)
            await conn.commit()

    try:
        asyncio.run(main())
        assert committed_jobs(mf) == [{"order": 3}, {"order": 1}]
    finally:
        mf.close()


def test_the_operator_moves_and_reads_are_awaited_with_the_sync_rules(mf: MailFathom) -> None:
    amf = AsyncMailFathom(mf)

    async def main() -> None:
        job = await amf.enqueue("orders.ship", {"order": 1})
        held = await amf.jobs.hold(job.id, actor="ada", reason="check the address")
        assert held.state is JobState.PENDING and held.available_at is None
        assert await amf.jobs.held_count() == 1
        released = await amf.jobs.release(job.id, actor="ada")
        assert released.available_at is not None
        assert [e.action for e in await amf.jobs.events(job.id)] == ["hold", "release"]
        email = await amf.outbox.record(message())
        cancelled = await amf.outbox.cancel(email.id, actor="ada", reason="customer left")
        assert cancelled.cancelled
        with pytest.raises(NotFound):  # the same errors as the sync API
            await amf.jobs.get(10**6)
        assert amf.sync is mf

    asyncio.run(main())


def test_concurrent_requests_each_write_in_their_own_transaction(mf: MailFathom) -> None:
    """Requests interleave on one loop, each on its own connection: every commit keeps its
    own job and email, every rollback drops only its own."""
    amf = AsyncMailFathom(mf)

    async def request(n: int) -> None:
        async with async_connection(mf) as conn:
            await amf.enqueue("orders.ship", {"order": n}, connection=conn)
            await amf.outbox.record(message(f"c{n}@example.org"), connection=conn)
            await (conn.commit() if n % 2 == 0 else conn.rollback())

    async def main() -> None:
        await asyncio.gather(*(request(n) for n in range(8)))

    asyncio.run(main())
    assert sorted(job["order"] for job in committed_jobs(mf)) == [0, 2, 4, 6]
    assert committed_emails(mf) == 4


def test_on_an_autocommit_connection_the_write_is_a_transaction_of_its_own(
    mf: MailFathom,
) -> None:
    amf = AsyncMailFathom(mf)

    async def main() -> None:
        if mf.store.dialect == "sqlite":
            path = mf.store.db.path  # type: ignore[attr-defined]
            conn: Any = await aiosqlite.connect(path, isolation_level=None)
        else:
            url = mf.settings.database_url
            conn = await psycopg.AsyncConnection.connect(url, autocommit=True)
        try:
            await amf.enqueue_many("orders.ship", [{"order": 1}, {"order": 2}], connection=conn)
            assert committed_jobs(mf) == [{"order": 2}, {"order": 1}]  # no commit needed
        finally:
            await conn.close()

    asyncio.run(main())


def test_an_async_handler_enqueues_its_follow_up_without_blocking_the_workers_loop(
    mf: MailFathom,
) -> None:
    amf = AsyncMailFathom(mf)

    @mf.job("orders.pack")
    async def pack(ctx: JobContext, order: int) -> None:
        await amf.enqueue("orders.ship", {"order": order}, idempotency_key=f"ship-{order}")

    @mf.job("orders.ship")
    async def ship(ctx: JobContext, order: int) -> None:
        pass

    mf.enqueue_many("orders.pack", [{"order": 1}, {"order": 2}])
    assert mf.worker(concurrency=2).run(burst=True) == 4  # each pack, then its ship
    assert sorted(job["order"] for job in committed_jobs(mf)) == [1, 2]
    assert mf.jobs.counts()[JobState.SUCCEEDED] == 4


def test_the_queue_schedule_limit_worker_and_suppression_views_are_awaited(
    mf: MailFathom,
) -> None:
    """Each view's database methods, awaited, with the sync rules and errors; what is
    declared on ``mf`` is what ``sync()`` writes."""
    amf = AsyncMailFathom(mf)
    mf.job("orders.ship")(lambda order: None)
    mf.schedule("nightly", cron="0 3 * * *", kind="orders.ship", payload={"order": 0})
    mf.limit_queue("default", max_running=2)

    async def main() -> None:
        await amf.enqueue("orders.ship", {"order": 1})
        paused = await amf.queues.pause("default", actor="ada", reason="migration")
        assert paused.queue == "default" and [q.queue for q in await amf.queues.paused()] == [
            "default"
        ]
        assert [q.queue for q in await amf.queues.list()] == ["default"]
        with pytest.raises(IllegalTransition):
            await amf.queues.pause("default", actor="ada")
        await amf.queues.resume("default", actor="ada")
        assert [e.action for e in await amf.queues.events("default")] == ["resume", "pause"]

        assert await amf.schedules.sync() == ["nightly"]
        assert [s.name for s in await amf.schedules.list()] == ["nightly"]
        assert (await amf.schedules.pause("nightly", actor="ada")).paused_by == "ada"
        assert (await amf.schedules.resume("nightly", actor="ada")).paused_by is None
        await amf.schedules.remove("nightly", actor="ada")
        with pytest.raises(NotFound):
            await amf.schedules.get("nightly")

        await amf.limits.sync()
        assert [(row.scope, row.target) for row in await amf.limits.stored()] == [
            ("queue", "default")
        ]
        assert [use["max_running"] for use in await amf.limits.usage()] == [2]
        assert await amf.limits.remove("queue", "default") is True
        assert await amf.limits.stored() == []

        assert await amf.workers.list() == []

        await amf.suppressions.add("Bounced@Example.org", actor="ada", reason="hard_bounce")
        assert await amf.suppressions.is_suppressed("bounced@example.org")
        assert await amf.suppressions.counts() == {"hard_bounce": 1}
        assert list(await amf.suppressions.among(["bounced@example.org", "x@example.org"])) == [
            "bounced@example.org"
        ]
        await amf.suppressions.lift("bounced@example.org", actor="ada")
        assert await amf.suppressions.get("bounced@example.org") is None
        assert len(await amf.suppressions.events("bounced@example.org")) == 2
        with pytest.raises(NotFound):
            await amf.suppressions.lift("bounced@example.org", actor="ada")

    asyncio.run(main())
    assert mf.queues.paused() == [] and mf.schedules.list() == []  # the same database


@pytest.mark.parametrize(
    ("view", "sync"),
    [
        (AsyncMailFathom, MailFathom),
        (AsyncJobs, Jobs),
        (AsyncOutbox, Outbox),
        (AsyncQueues, Queues),
        (AsyncSchedules, Schedules),
        (AsyncLimits, Limits),
        (AsyncWorkers, Workers),
        (AsyncSuppressions, Suppressions),
    ],
)
def test_every_database_method_of_a_view_is_awaited(view: type, sync: type) -> None:
    """A method added to a sync view is awaited too, or deliberately left on ``mf`` (it
    touches no database): the async API cannot fall behind the sync one unnoticed."""
    public = {
        name for name in vars(sync) if not name.startswith("_") and callable(getattr(sync, name))
    }
    public -= {
        name
        for name in vars(sync)
        if isinstance(vars(sync)[name], classmethod | staticmethod | property)
    }
    awaited = {name for name in vars(view) if not name.startswith("_")}
    assert public - awaited == set(SYNC_ONLY.get(sync, ())), f"{view.__name__} misses some"
    assert awaited <= public, f"{view.__name__} awaits what {sync.__name__} does not have"
    mf_views = {"jobs", "outbox", "queues", "schedules", "limits", "workers", "suppressions"}
    if view is AsyncMailFathom:
        assert {"enqueue", "enqueue_many", "migrate"} <= awaited
        assert mf_views <= set(AsyncMailFathom.__init__.__code__.co_names)


def test_calls_without_a_connection_do_not_wait_for_the_loops_default_threads(
    mf: MailFathom,
) -> None:
    """The loop's default executor is taken by the application's own blocking work:
    mailfathom's calls run all the same, on threads of their own (one per connection)."""
    amf = AsyncMailFathom(mf)
    freed = threading.Event()

    async def main() -> None:
        loop = asyncio.get_running_loop()
        loop.set_default_executor(ThreadPoolExecutor(max_workers=1))
        taken = loop.run_in_executor(None, freed.wait)
        try:
            job = await asyncio.wait_for(amf.enqueue("orders.ship", {"order": 1}), 30)
            assert (await asyncio.wait_for(amf.jobs.get(job.id), 30)).id == job.id
            assert not taken.done()  # the default thread was busy the whole time
        finally:
            freed.set()
        await taken

    asyncio.run(main())
    assert amf._runner.executor()._max_workers == mf.store.db.max_connections


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
def test_an_async_write_in_the_callers_transaction_costs_the_round_trips_of_a_sync_one(
    mf: MailFathom,
) -> None:
    """Counted in libpq's trace of the caller's connection, in its open transaction: the
    database check is made on the first write only; an enqueue is then two round trips
    (the savepoint pipelined with the write, then its release) and a record one (the
    savepoint, the write and the release in one flight), on psycopg's AsyncConnection
    as on its sync Connection."""
    amf = AsyncMailFathom(mf)
    writes = ["enqueue", "enqueue again", "record", "record many"]

    def sync_trips() -> list[int]:
        counts = []
        with psycopg.connect(mf.settings.database_url) as conn:
            conn.execute("SELECT 1")  # the caller's transaction has begun
            for write in writes:
                with traced(conn.pgconn) as lines:
                    if write.startswith("enqueue"):
                        mf.enqueue("orders.ship", {"order": 1}, connection=conn)
                    elif write == "record":
                        mf.outbox.record(message(), connection=conn)
                    else:
                        mf.outbox.record_many([message(), message()], connection=conn)
                counts.append(round_trips(conn.pgconn, lines))
            conn.rollback()
        return counts

    async def async_trips() -> list[int]:
        counts = []
        async with await psycopg.AsyncConnection.connect(mf.settings.database_url) as conn:
            await conn.execute("SELECT 1")
            for write in writes:
                with traced(conn.pgconn) as lines:
                    if write.startswith("enqueue"):
                        await amf.enqueue("orders.ship", {"order": 1}, connection=conn)
                    elif write == "record":
                        await amf.outbox.record(message(), connection=conn)
                    else:
                        await amf.outbox.record_many([message(), message()], connection=conn)
                counts.append(round_trips(conn.pgconn, lines))
            await conn.commit()
        return counts

    awaited = asyncio.run(async_trips())
    assert awaited == sync_trips(), awaited
    assert awaited == [3, 2, 1, 1], awaited  # the check, then none
    assert len(committed_jobs(mf)) == 2 and committed_emails(mf) == 3  # only the async ones


def test_every_transaction_on_a_kept_connection_decides_its_own_writes(mf: MailFathom) -> None:
    """The database check is made once per connection, yet each new transaction on it
    is joined as the first was: a rollback after a commit leaves none of its writes."""
    amf = AsyncMailFathom(mf)

    async def main() -> None:
        async with async_connection(mf) as conn:
            for order, keep in ((1, True), (2, False), (3, False), (4, True)):
                await amf.enqueue("orders.ship", {"order": order}, connection=conn)
                await amf.outbox.record(message(f"c{order}@example.org"), connection=conn)
                await (conn.commit() if keep else conn.rollback())

    asyncio.run(main())
    assert sorted(job["order"] for job in committed_jobs(mf)) == [1, 4]
    assert committed_emails(mf) == 2


def test_a_failed_pipelined_batch_is_undone_alone_and_the_callers_transaction_goes_on(
    mf: MailFathom,
) -> None:
    """A ``record_many`` (on PostgreSQL its savepoint pipelined with the writes) that the
    database refuses midway leaves none of the batch; the caller's write before it and
    its next batch commit."""
    with raw_transaction(mf) as cur:  # a trigger refusing one recipient
        if mf.store.dialect == "sqlite":
            cur.execute(
                "CREATE TRIGGER mf_test_refuse BEFORE INSERT ON mf_outbox_recipients WHEN "
                "NEW.address = 'c2@example.org' BEGIN SELECT RAISE(ABORT, 'refused'); END"
            )
        else:
            cur.execute(
                "CREATE FUNCTION mf_test_refuse() RETURNS trigger LANGUAGE plpgsql AS $$ "
                "BEGIN IF NEW.address = 'c2@example.org' THEN RAISE EXCEPTION 'refused'; "
                "END IF; RETURN NEW; END $$"
            )
            cur.execute(
                "CREATE TRIGGER mf_test_refuse BEFORE INSERT ON mf_outbox_recipients "
                "FOR EACH ROW EXECUTE FUNCTION mf_test_refuse()"
            )
    amf = AsyncMailFathom(mf)

    async def main() -> None:
        async with async_connection(mf) as conn:
            await amf.enqueue("orders.ship", {"order": 1}, connection=conn)
            with pytest.raises(StoreError, match="refused"):
                batch = [message(f"c{n}@example.org") for n in range(3)]
                await amf.outbox.record_many(batch, connection=conn)
            await amf.outbox.record_many([message("c4@example.org")], connection=conn)
            await conn.commit()

    asyncio.run(main())
    assert committed_jobs(mf) == [{"order": 1}]
    assert [e.recipients[0].address for e in mf.outbox.list()] == ["c4@example.org"]
