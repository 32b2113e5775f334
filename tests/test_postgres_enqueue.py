"""Batch enqueue — one statement per batch on PostgreSQL, a loop on SQLite — behaves the same.

Run on both stores: results in input order, ``created`` right for keys that
already existed (before the batch, or committed by a racing batch), FIFO ids
within a batch, and two processes enqueueing overlapping keys in opposite
orders neither deadlock nor create a key twice. On PostgreSQL, statements are
prepared server-side once a pooled connection has run them a few times.
"""

from __future__ import annotations

import multiprocessing
import queue
import time
from collections import Counter
from datetime import timedelta
from typing import Any

import psycopg
import pytest

from mailfathom import FakeClock, JobState, MailFathom, StoreError
from mailfathom.store.base import NewJobs
from mailfathom.store.postgres import PostgresDatabase
from mailfathom.store.sql_store import SqlStore
from mailfathom.testing import claim


def test_mixed_batch_keeps_input_order_and_created_flags(mf: MailFathom, clock: FakeClock) -> None:
    old_b = mf.enqueue("k", {"old": "b"}, idempotency_key="b")
    old_d = mf.enqueue("k", {"old": "d"}, idempotency_key="d")
    clock.advance(5)
    keys = ["e", "d", None, "a", "b", None, "c"]
    jobs = mf.enqueue_many("k", [{"n": n} for n in range(len(keys))], idempotency_keys=keys)
    assert [job.idempotency_key for job in jobs] == keys
    assert [job.created for job in jobs] == [True, False, True, True, False, True, True]
    assert jobs[1].id == old_d.id and jobs[1].payload == {"old": "d"}
    assert jobs[4].id == old_b.id and jobs[4].payload == {"old": "b"}
    created = [job for job in jobs if job.created]
    assert [job.payload["n"] for job in created] == [0, 2, 3, 5, 6]
    assert [job.id for job in created] == sorted(job.id for job in created), "ids follow input"
    assert all(job.created_at == clock.now() for job in created)
    assert [j.id for j in claim(mf, "w", 10, timedelta(seconds=30))] == [
        old_b.id,
        old_d.id,
        *(job.id for job in created),
    ]


def test_a_large_batch_is_one_call(mf: MailFathom) -> None:
    jobs = mf.enqueue_many(
        "k", [{"n": n, "text": "é" * (n % 7)} for n in range(3000)], priority=3, delay=10
    )
    assert all(job.created for job in jobs)
    assert [job.payload["n"] for job in jobs] == list(range(3000))
    assert len({job.id for job in jobs}) == 3000
    assert mf.jobs.get(jobs[2999].id).payload == {"n": 2999, "text": "é" * (2999 % 7)}
    assert {(job.priority, job.available_at) for job in jobs} == {
        (3, jobs[0].created_at + timedelta(seconds=10))
    }
    assert mf.jobs.counts()[JobState.PENDING] == 3000


def test_awkward_values_survive_the_batch(mf: MailFathom, clock: FakeClock) -> None:
    payloads: list[dict[str, Any]] = [
        {"quote": '"', "backslash": "\\", "newline": "a\nb", "nul-ish": "\u0001", "emoji": "😀"},
        {"nested": {"list": [1, None, True, 2.5, "x"]}, "": "empty key"},
    ]
    keys = ['key "quoted" \\ and\nnewline', "ключ"]
    due = clock.now() + timedelta(microseconds=123457)
    jobs = mf.enqueue_many("k", payloads, idempotency_keys=keys, run_at=due, queue="q-1")
    again = mf.enqueue_many("k", payloads, idempotency_keys=keys[::-1])
    assert [job.created for job in again] == [False, False]
    assert [job.id for job in again] == [jobs[1].id, jobs[0].id]
    for job, payload, key in zip(jobs, payloads, keys, strict=True):
        stored = mf.jobs.get(job.id)
        assert (stored.payload, stored.idempotency_key) == (payload, key)
        assert (stored.available_at, stored.queue) == (due, "q-1")
    held = mf.enqueue_many("k", [{}, {}], hold=True)
    assert [mf.jobs.get(job.id).available_at for job in held] == [None, None]


def test_an_empty_batch_does_nothing(mf: MailFathom) -> None:
    assert mf.enqueue_many("k", []) == []
    assert sum(mf.jobs.counts().values()) == 0


def _enqueue_rounds(url: str, reverse: bool, barrier: Any, results: Any) -> None:
    created: list[str] = []
    with MailFathom(url) as app:
        for round_ in range(15):
            keys = [f"{round_}:{n}" for n in range(200)]
            if reverse:
                keys.reverse()
            barrier.wait(timeout=60)
            jobs = app.enqueue_many("k", [{} for _ in keys], idempotency_keys=keys)
            created.extend(job.idempotency_key or "" for job in jobs if job.created)
    results.put(created)


def _collect(results: Any, procs: list[Any], timeout: float = 120) -> list[Any]:
    """One result per process; fails at once when a process died instead of answering."""
    got: list[Any] = []
    deadline = time.monotonic() + timeout
    while len(got) < len(procs):
        try:
            got.append(results.get(timeout=0.5))
        except queue.Empty:
            died = [proc.exitcode for proc in procs if proc.exitcode not in (None, 0)]
            assert not died, f"a process failed with exit code {died[0]} (deadlock?)"
            assert time.monotonic() < deadline, "the processes did not finish in time"
    return got


@pytest.mark.slow
def test_racing_batches_with_shared_keys_create_each_once(database_url: str) -> None:
    with MailFathom(database_url) as app:
        app.migrate()
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(2), ctx.Queue()
    procs = [
        ctx.Process(target=_enqueue_rounds, args=(database_url, reverse, barrier, results))
        for reverse in (False, True)
    ]
    for proc in procs:
        proc.start()
    try:
        got = _collect(results, procs)
    finally:
        for proc in procs:
            proc.join(30)
            if proc.is_alive():
                proc.kill()
                proc.join()
    assert [proc.exitcode for proc in procs] == [0, 0], "a batch failed (deadlock?)"
    created = Counter(key for keys in got for key in keys)
    assert len(created) == 15 * 200 and set(created.values()) == {1}
    with MailFathom(database_url) as app:
        assert sum(app.jobs.counts().values()) == 15 * 200


def test_postgres_prepares_the_hot_statements(postgres_schema_url: str) -> None:
    store = SqlStore(PostgresDatabase(postgres_schema_url, max_connections=1))
    try:
        store.migrate()
        now = FakeClock().now()
        batch = NewJobs("k", "default", ["{}", "{}"], 0, now, 5)
        for _ in range(6):
            store.jobs.enqueue(batch, now=now)
            store.claims.claim(owner="w", limit=2, now=now, lease_until=now + timedelta(seconds=30))
        with store.db.reading() as cur:
            cur.execute("SELECT statement FROM pg_prepared_statements")
            prepared = [row["statement"] for row in cur.fetchall()]
        assert any("INSERT INTO mf_jobs" in sql and "unnest" in sql for sql in prepared)
        assert any("FOR UPDATE SKIP LOCKED" in sql and "'Claimed'" in sql for sql in prepared)
    finally:
        store.close()


def test_a_migration_under_prepared_statements_costs_one_retry(postgres_schema_url: str) -> None:
    store = SqlStore(PostgresDatabase(postgres_schema_url, max_connections=1))
    try:
        store.migrate()
        now = FakeClock().now()
        (job_id,) = store.jobs.enqueue(NewJobs("k", "default", ["{}"], 0, now, 5), now=now)
        assert isinstance(job_id, int)
        for _ in range(6):  # prepared from the fifth use on
            assert store.jobs.get_job(job_id) is not None
        with psycopg.connect(postgres_schema_url, autocommit=True) as other:
            other.execute("ALTER TABLE mf_jobs ADD COLUMN added_later integer")
        with pytest.raises(StoreError, match="schema changed under a prepared statement"):
            store.jobs.get_job(job_id)
        found = store.jobs.get_job(job_id)
        assert found is not None and found["id"] == job_id
        lease_until = now + timedelta(seconds=30)
        for _ in range(6):
            store.claims.claim(owner="w", limit=1, now=now, lease_until=lease_until)
        with psycopg.connect(postgres_schema_url, autocommit=True) as other:
            other.execute("ALTER TABLE mf_jobs ADD COLUMN added_even_later integer")
        store.jobs.enqueue(NewJobs("k", "default", ["{}"], 0, now, 5), now=now)
        with pytest.raises(StoreError, match="schema changed under a prepared statement"):
            store.claims.claim(owner="w", limit=1, now=now, lease_until=lease_until)
        assert len(store.claims.claim(owner="w", limit=1, now=now, lease_until=lease_until)) == 1
    finally:
        store.close()
