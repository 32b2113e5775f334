"""A worker's database connections: one for each job thread and each thread of its own.

A pool smaller than the worker's threads makes jobs wait for one another's connections;
these tests hold a connection in every job at once, which only a large enough pool allows.
"""

from __future__ import annotations

import threading

from mailfathom import JobContext, JobState, MailFathom
from mailfathom.jobs.worker.worker import OWN_THREADS
from mailfathom.store.sql_store import SqlStore


def test_every_job_thread_holds_a_connection_at_once(mf: MailFathom) -> None:
    store = mf.store
    assert isinstance(store, SqlStore)
    concurrency = 16
    barrier = threading.Barrier(concurrency, timeout=30)

    @mf.job("k")
    def hold(ctx: JobContext) -> None:
        with store.db.reading() as cur:
            cur.execute("SELECT 1")
            barrier.wait()  # breaks unless all sixteen hold a connection at the same time

    mf.enqueue_many("k", [{} for _ in range(concurrency)])
    assert mf.worker(concurrency=concurrency).run(burst=True) == concurrency
    assert mf.jobs.counts()[JobState.SUCCEEDED] == concurrency
    if store.dialect == "postgresql":
        assert store.db.max_connections == concurrency + OWN_THREADS


def test_a_larger_pool_stays(postgres_schema_url: str) -> None:
    from mailfathom.store.postgres import PostgresDatabase

    database = PostgresDatabase(postgres_schema_url, max_connections=50)
    try:
        with database.reading() as cur:  # the pool is open
            cur.execute("SELECT 1")
        database.reserve_connections(20)
        assert database.max_connections == 50
        database.reserve_connections(60)
        assert database.max_connections == 60
        assert database._get_pool().max_size == 60
    finally:
        database.close()
