"""The worker in one process: capacity, threads and the event loop, timeouts, leases,
shutdown, the attempt log and the registry.

Workers that must run while the test acts run on a thread (so they install no
signal handlers); ``Worker.stop()`` is what the first SIGTERM does. Tests wait on
the worker's test signals (``worker.signals``), never on sleeps.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

import pytest

from mailfathom import (
    AttemptOutcome,
    FakeClock,
    InvalidInput,
    JobContext,
    JobState,
    MailFathom,
    StoreError,
)
from mailfathom.jobs.worker.claim_ahead import MOST
from mailfathom.jobs.worker.worker import Worker
from mailfathom.store.base import WorkerRegistration
from mailfathom.testing import claim
from raw_database import raw_transaction


@contextmanager
def running(worker: Worker, *, burst: bool = False) -> Iterator[Worker]:
    """Run ``worker`` (its test signals on) on a thread for the ``with`` block; stop it
    and wait at the end."""
    worker.signals.init()
    thread = threading.Thread(target=lambda: worker.run(burst=burst))
    thread.start()
    try:
        yield worker
    finally:
        worker.stop()
        thread.join(30)
        assert not thread.is_alive(), "the worker did not stop"


def test_claims_never_exceed_free_capacity_while_run_times_are_unknown(mf: MailFathom) -> None:
    gate = threading.Event()
    started: list[int] = []

    @mf.job("k")
    def blocked(ctx: JobContext) -> None:
        started.append(ctx.job_id)
        assert gate.wait(10)

    mf.enqueue_many("k", [{} for _ in range(5)])
    with running(mf.worker(concurrency=3), burst=True) as worker:
        # Two passes of the loop with every slot busy: a wrong extra claim would be made
        # in the second at the latest.
        for _ in range(2):
            worker.signals.loop_waits.wait_for(lambda load: load.running == 3)
        assert len(started) == 3
        counts = mf.jobs.counts()
        assert (counts[JobState.CLAIMED], counts[JobState.PENDING]) == (3, 2)
        gate.set()
        ran = worker.signals.stopped.wait()
    assert ran == 5
    assert mf.jobs.counts()[JobState.SUCCEEDED] == 5


def test_short_jobs_are_claimed_ahead_of_the_free_slots(mf: MailFathom) -> None:
    leased: list[int] = []
    ended: set[int] = set()  # handlers that returned (their outcome may not be recorded yet)

    @mf.job("k")
    def quick(ctx: JobContext) -> None:
        claimed = {job.id for job in mf.jobs.list(JobState.CLAIMED, limit=100)}
        leased.append(len(claimed - ended))  # leased and not over: running or claimed ahead
        ended.add(ctx.job_id)

    mf.enqueue_many("k", [{} for _ in range(80)])
    assert mf.worker(concurrency=2).run(burst=True) == 80
    assert max(leased) > 2, "never held more leases than slots: nothing was claimed ahead"
    assert max(leased) <= 2 + MOST * 2  # never more than that beyond the slots
    assert mf.jobs.counts()[JobState.SUCCEEDED] == 80


def test_long_jobs_are_never_claimed_ahead(mf: MailFathom) -> None:
    leased: list[int] = []
    ended: set[int] = set()  # handlers that returned (their outcome may not be recorded yet)

    @mf.job("k")
    def slow(ctx: JobContext) -> None:
        claimed = {job.id for job in mf.jobs.list(JobState.CLAIMED, limit=100)}
        leased.append(len(claimed - ended))  # leased and not over: running or claimed ahead
        time.sleep(0.15)  # 2 slots x 0.05 s horizon / 0.15 s: less than one job ahead
        ended.add(ctx.job_id)

    mf.enqueue_many("k", [{} for _ in range(8)])
    assert mf.worker(concurrency=2).run(burst=True) == 8
    assert max(leased) == 2


def test_jobs_claimed_ahead_go_back_unspent_when_a_worker_stops(mf: MailFathom) -> None:
    worker = mf.worker(concurrency=2)
    ran: list[int] = []

    @mf.job("k")
    def quick(ctx: JobContext) -> None:
        ran.append(ctx.job_id)
        if len(ran) == 30:
            worker.stop()

    mf.enqueue_many("k", [{} for _ in range(300)])
    with running(worker):
        result = worker.signals.stopped.wait()
    counts = mf.jobs.counts()
    assert counts[JobState.CLAIMED] == 0, "a job claimed ahead was left holding its lease"
    assert counts[JobState.SUCCEEDED] == len(ran) == result
    assert counts[JobState.PENDING] == 300 - len(ran)
    assert all(job.attempts == 0 for job in mf.jobs.list(JobState.PENDING, limit=500))
    # Once stopping, nothing more starts: the 30th's sibling in the other slot may end,
    # and a pass of the loop already past its check may fill the two slots, no more.
    assert len(ran) <= 30 + 1 + 2


def test_sync_handlers_run_at_once_on_pool_threads(mf: MailFathom) -> None:
    barrier = threading.Barrier(4, timeout=10)
    threads: set[str] = set()

    @mf.job("k")
    def meet(ctx: JobContext) -> None:
        threads.add(threading.current_thread().name)
        barrier.wait()  # breaks unless all four run at the same time

    mf.enqueue_many("k", [{} for _ in range(4)])
    assert mf.worker(concurrency=4).run(burst=True) == 4
    assert mf.jobs.counts()[JobState.SUCCEEDED] == 4
    assert len(threads) == 4 and threading.main_thread().name not in threads


def test_a_pool_thread_runs_the_next_job_itself_never_beyond_the_slots(mf: MailFathom) -> None:
    # A plain attempt's thread takes the next job claimed ahead in its place: plain ones
    # it runs itself, others (async here) start as usual; never more than the slots.
    lock = threading.Lock()
    now = [0]
    most = [0]
    threads: dict[str, int] = {}

    def enter() -> None:
        with lock:
            now[0] += 1
            most[0] = max(most[0], now[0])

    def leave() -> None:
        with lock:
            now[0] -= 1

    @mf.job("plain")
    def plain(ctx: JobContext) -> None:
        enter()
        name = threading.current_thread().name
        threads[name] = threads.get(name, 0) + 1
        time.sleep(0.0005)
        leave()

    @mf.job("coroutine")
    async def coroutine(ctx: JobContext) -> None:
        enter()
        await asyncio.sleep(0.0005)
        leave()

    mf.enqueue_many("plain", [{} for _ in range(200)])
    mf.enqueue_many("coroutine", [{} for _ in range(100)])
    assert mf.worker(concurrency=3).run(burst=True) == 300
    assert mf.jobs.counts()[JobState.SUCCEEDED] == 300
    assert most[0] <= 3
    assert len(threads) <= 3 and threading.main_thread().name not in threads
    assert max(threads.values()) > 1


def test_a_pool_thread_hands_its_slot_to_the_next_plain_job_on_itself(mf: MailFathom) -> None:
    """One slot is held by an ``async def`` job throughout (it needs no pool thread), the
    other runs plain jobs back to back. Each plain attempt's thread takes the next job
    claimed ahead and runs it itself, so one pool thread runs them all: were the next
    job handed to the pool instead, it would be submitted while that thread is still
    busy, and the pool would start a second thread for it."""
    plains = 150
    names: list[str] = []
    alive: set[str] = set()  # the pool's threads, as the plain jobs saw them
    done = threading.Event()

    @mf.job("plain")
    def plain(ctx: JobContext) -> None:
        name = threading.current_thread().name
        names.append(name)
        pool = name.rpartition("-")[0] + "-"
        alive.update(t.name for t in threading.enumerate() if t.name.startswith(pool))
        time.sleep(0.0005)
        if len(names) == plains:
            done.set()

    @mf.job("holder")
    async def holder(ctx: JobContext) -> None:
        deadline = time.monotonic() + 60
        while not done.is_set():  # holds its slot until every plain job has run
            assert time.monotonic() < deadline, "the plain jobs did not run"
            await asyncio.sleep(0.005)

    mf.enqueue("holder", {}, priority=1)
    mf.enqueue_many("plain", [{} for _ in range(plains)])
    worker = mf.worker(concurrency=2)
    assert worker.run(burst=True) == plains + 1
    assert mf.jobs.counts()[JobState.SUCCEEDED] == plains + 1
    assert len(names) == plains
    assert set(names) == {f"mailfathom-{worker.id}-0"}
    assert alive == {f"mailfathom-{worker.id}-0"}, "the pool started a second thread"


def test_async_handlers_share_the_workers_event_loop(mf: MailFathom) -> None:
    seen: list[tuple[int, str]] = []

    @mf.job("k")
    async def meet(ctx: JobContext) -> None:
        seen.append((id(asyncio.get_running_loop()), threading.current_thread().name))
        await asyncio.wait_for(barrier.wait(), 10)  # all three must be awaiting at once

    barrier = asyncio.Barrier(3)
    mf.enqueue_many("k", [{} for _ in range(3)])
    assert mf.worker(concurrency=3).run(burst=True) == 3
    assert mf.jobs.counts()[JobState.SUCCEEDED] == 3
    assert len(set(seen)) == 1
    assert seen[0][1].startswith("mailfathom-loop-")


def test_an_async_handler_is_cancelled_at_its_timeout(mf: MailFathom) -> None:
    cancelled: list[bool] = []

    @mf.job("k", timeout=0.1, max_attempts=2)
    async def slow(ctx: JobContext) -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    job = mf.enqueue("k")
    began = time.monotonic()
    mf.worker().run(burst=True)
    assert time.monotonic() - began < 5
    assert cancelled == [True]
    (attempt,) = mf.jobs.attempts(job.id)
    assert attempt.outcome is AttemptOutcome.EXECUTION_TIMEOUT
    assert attempt.message == "ran past its 0.1 s timeout"
    assert mf.jobs.get(job.id).state is JobState.PENDING  # retried by the policy


def test_an_overrunning_thread_keeps_its_lease_until_it_returns(database_url: str) -> None:
    with MailFathom(database_url) as app, MailFathom(database_url) as rival:
        app.migrate()
        calls: list[int] = []

        @app.job("k", timeout=0.2, max_attempts=1)
        def slow(ctx: JobContext) -> None:
            calls.append(ctx.attempt)
            time.sleep(6.0)  # thirty times its timeout, three times its lease

        @rival.job("k")
        def stolen(ctx: JobContext) -> None:
            calls.append(-ctx.attempt)

        job = app.enqueue("k")
        # Leases of 2 s, renewed every 0.67 s: a scheduling stall on a busy
        # machine must last 1.3 s before the rival can take the job.
        with running(app.worker(lease=2.0), burst=True) as worker:
            worker.signals.started.wait()
            with running(rival.worker(lease=2.0, poll_interval=0.05)):
                worker.signals.stopped.wait(timeout=30)
        assert calls == [1], "the job ran twice"
        (attempt,) = app.jobs.attempts(job.id)
        assert attempt.outcome is AttemptOutcome.EXECUTION_TIMEOUT
        assert app.jobs.get(job.id).state is JobState.DEAD_LETTERED


def test_the_heartbeat_keeps_a_job_five_leases_long(database_url: str) -> None:
    with MailFathom(database_url) as app, MailFathom(database_url) as rival:
        app.migrate()
        calls: list[int] = []

        @app.job("k")
        def long(ctx: JobContext) -> None:
            calls.append(ctx.attempt)
            time.sleep(10.0)  # five leases

        @rival.job("k")
        def stolen(ctx: JobContext) -> None:
            calls.append(-ctx.attempt)

        job = app.enqueue("k")
        with running(app.worker(lease=2.0), burst=True) as worker:
            worker.signals.started.wait()
            with running(rival.worker(lease=2.0, poll_interval=0.05)):
                result = worker.signals.stopped.wait(timeout=30)
        assert result == 1
        assert calls == [1], "the job ran twice"
        done = app.jobs.get(job.id)
        assert done.state is JobState.SUCCEEDED and done.attempts == 1
        assert [a.outcome for a in app.jobs.attempts(job.id)] == [AttemptOutcome.SUCCEEDED]


def test_a_lost_lease_stops_an_async_handler_and_drops_its_outcome(
    mf: MailFathom, clock: FakeClock
) -> None:
    started = threading.Event()
    cancelled: list[bool] = []

    @mf.job("k")
    async def wait(ctx: JobContext) -> None:
        started.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    job = mf.enqueue("k")
    with running(mf.worker(lease=0.3), burst=True) as worker:
        assert started.wait(10)
        with raw_transaction(mf) as cur:  # another worker took it over
            cur.execute("UPDATE mf_jobs SET lease_owner = 'thief', claimed_by = 'thief'")
        assert worker.signals.lease_lost.wait() == {(job.id, 1)}
        worker.signals.stopped.wait()
    assert cancelled == [True]
    taken = mf.jobs.get(job.id)
    assert taken.state is JobState.CLAIMED and taken.lease_owner == "thief"
    assert mf.jobs.attempts(job.id) == []


def test_stop_waits_for_running_jobs_to_finish(mf: MailFathom) -> None:
    started = threading.Event()

    @mf.job("k")
    def short(ctx: JobContext) -> None:
        started.set()
        time.sleep(0.3)

    job = mf.enqueue("k")
    worker = mf.worker(shutdown_timeout=10)
    with running(worker):
        assert started.wait(10)
        worker.stop()
        result = worker.signals.stopped.wait()
    assert result == 1
    assert mf.jobs.get(job.id).state is JobState.SUCCEEDED
    assert mf.workers.list() == []  # a clean stop leaves the registry


def test_shutdown_timeout_releases_what_still_runs_at_once(
    mf: MailFathom, clock: FakeClock
) -> None:
    gate = threading.Event()
    began = threading.Semaphore(0)
    ended: list[str] = []

    @mf.job("sync")
    def stuck(ctx: JobContext) -> None:
        began.release()
        gate.wait(30)
        ended.append("sync")

    @mf.job("async")
    async def forever(ctx: JobContext) -> None:
        began.release()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            ended.append("async cancelled")
            raise

    sync_job = mf.enqueue("sync")
    async_job = mf.enqueue("async")
    worker = mf.worker(shutdown_timeout=0.2)
    with running(worker):
        assert began.acquire(timeout=10) and began.acquire(timeout=10)
        stopped = time.monotonic()
        worker.stop()
        worker.signals.stopped.wait()
        assert time.monotonic() - stopped < 5
    for job in (sync_job, async_job):
        released = mf.jobs.get(job.id)
        assert released.state is JobState.PENDING
        assert released.available_at == clock.now()  # claimable at once, not after the lease
        (attempt,) = mf.jobs.attempts(job.id)
        assert attempt.outcome is AttemptOutcome.SHUTDOWN_TIMEOUT
        assert attempt.message is not None and "0.2 s shutdown grace period" in attempt.message
    assert ended == ["async cancelled"]
    claimed = claim(mf, "another", 10, timedelta(seconds=30))
    assert {j.id for j in claimed} == {sync_job.id, async_job.id}
    gate.set()  # the abandoned thread returns: its outcome must change nothing
    assert worker.signals.outcome_discarded.wait().id == sync_job.id
    assert ended == ["async cancelled", "sync"]
    assert worker.unrecorded == 0, "the outcome of an attempt given up was kept"
    assert mf.jobs.get(sync_job.id).lease_owner == "another"
    assert len(mf.jobs.attempts(sync_job.id)) == 1


def test_one_log_line_per_attempt_and_the_traceback_on_failure(
    mf: MailFathom, caplog: pytest.LogCaptureFixture
) -> None:
    @mf.job("ok")
    def fine(ctx: JobContext) -> None:
        pass

    @mf.job("bad")
    def broken(ctx: JobContext) -> None:
        raise ConnectionError("upstream down")

    good = mf.enqueue("ok")
    bad = mf.enqueue("bad")
    with caplog.at_level(logging.INFO, logger="mailfathom.jobs"):
        mf.worker().run(burst=True)
    lines = [r for r in caplog.records if r.getMessage().startswith("attempt ")]
    assert len(lines) == 2
    by_job = {r.mailfathom["job_id"]: r for r in lines}  # type: ignore[attr-defined]
    ok_line = by_job[good.id].getMessage()
    assert f"job_id={good.id} kind=ok queue=default attempt=1 outcome=Succeeded" in ok_line
    assert "duration=" in ok_line
    failed = by_job[bad.id]
    assert failed.levelno == logging.WARNING
    text = failed.getMessage()
    assert f"job_id={bad.id} kind=bad" in text and "outcome=Failed" in text
    assert "Traceback (most recent call last)" in text and "ConnectionError: upstream down" in text


def test_workers_register_and_show_dead_when_silent(mf: MailFathom, clock: FakeClock) -> None:
    seen = []

    @mf.job("k", queue="mail")
    def look(ctx: JobContext) -> None:
        seen.extend(mf.workers.list())

    mf.enqueue("k")
    worker = mf.worker(concurrency=3, queues=["mail"], lease=45)
    worker.run(burst=True)
    (me,) = seen
    assert me.id == worker.id and me.alive
    assert (me.queues, me.kinds, me.concurrency) == (("mail",), ("k", "mailfathom.deliver"), 3)
    assert me.lease == timedelta(seconds=45) and me.started_at == clock.now()
    assert mf.workers.list() == []

    gone = WorkerRegistration(
        id="host:1:dead",
        host="host",
        pid=1,
        queues=None,
        kinds=(),
        concurrency=1,
        lease_seconds=30,
        started_at=clock.now(),
    )
    mf.store.workers.heartbeat(gone, now=clock.now())
    clock.advance(40)  # its 30 s lease plus the 10 s clock-skew margin
    assert [w.alive for w in mf.workers.list()] == [True]
    clock.advance(timedelta(microseconds=1))
    (dead,) = mf.workers.list()
    assert dead.id == "host:1:dead" and not dead.alive and dead.queues is None
    assert [w.alive for w in mf.workers.list(dead_after=3600)] == [True]
    clock.advance(timedelta(days=1))
    mf.worker().run(burst=True)  # a starting worker forgets workers silent for a day
    assert mf.workers.list() == []


def test_bad_worker_settings_are_refused(mf: MailFathom) -> None:
    for kwargs, message in [
        ({"concurrency": 0}, "concurrency must be a positive integer"),
        ({"queues": []}, "queues must be a non-empty list"),
        ({"queues": "mail"}, "queues must be a non-empty list"),
        ({"queues": ["bad queue"]}, "queue 'bad queue' is not usable"),
        ({"lease": 0}, "lease must be positive"),
        ({"shutdown_timeout": -1}, "shutdown_timeout must be zero or more"),
    ]:
        with pytest.raises(InvalidInput, match=message):
            mf.worker(**kwargs)  # type: ignore[arg-type]
    worker = mf.worker()
    worker.run(burst=True)
    with pytest.raises(InvalidInput, match="a Worker runs once"):
        worker.run(burst=True)
    with pytest.raises(InvalidInput, match="module-level function"):
        mf.job("nested", isolation="process")(lambda ctx: None)


def test_a_burst_on_an_unmigrated_database_fails_clearly(database_url: str) -> None:
    with MailFathom(database_url) as app, pytest.raises(StoreError, match="migrate"):
        app.worker().run(burst=True)


def test_an_object_with_an_async_call_runs_on_the_event_loop(mf: MailFathom) -> None:
    seen: list[str] = []

    class Handler:
        async def __call__(self, ctx: JobContext, n: int) -> None:
            await asyncio.sleep(0)
            seen.append(f"{threading.current_thread().name}:{n}")

    mf.job("k")(Handler())
    mf.enqueue("k", {"n": 4})
    mf.worker().run(burst=True)
    assert len(seen) == 1 and seen[0].startswith("mailfathom-loop-") and seen[0].endswith(":4")


def test_the_start_up_heap_is_left_out_of_full_collections_while_the_worker_works(
    mf: MailFathom,
) -> None:
    # gc.freeze: a full collection then walks only what the work allocated, not the
    # whole heap, and pauses the wake-up path less; given back when the worker ends.
    frozen: list[int] = []

    @mf.job("k")
    def look(ctx: JobContext) -> None:
        frozen.append(gc.get_freeze_count())

    assert gc.get_freeze_count() == 0
    mf.enqueue("k")
    assert mf.worker().run(burst=True) == 1
    assert frozen and frozen[0] > 1000
    assert gc.get_freeze_count() == 0
