"""The schema holds the invariants itself, and migrations are idempotent and race-safe."""

from __future__ import annotations

import multiprocessing
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest

from mailfathom import FakeClock, MailFathom, StoreError
from mailfathom.store.migrate import load_migrations


def _raw(mf: MailFathom, sql: str) -> None:
    with mf.store.db.transaction() as cur:
        cur.execute(sql)


@pytest.mark.parametrize(
    "sql",
    [
        "UPDATE mf_jobs SET state = 'Finished'",
        "UPDATE mf_jobs SET state = 'Succeeded'",  # terminal without finished_at
        "UPDATE mf_jobs SET finished_at = created_at",  # finished but Pending
        "UPDATE mf_jobs SET state = 'Claimed'",  # Claimed without a lease
        "UPDATE mf_jobs SET lease_owner = 'w', lease_expires_at = created_at",  # lease on Pending
        "UPDATE mf_jobs SET failure_class = 'Sometimes'",
        "UPDATE mf_jobs SET max_attempts = 0",
        "UPDATE mf_jobs SET state = 'DeadLettered', finished_at = created_at",  # no reason
        # a consistent row, but not a move of the state machine (Pending can only be claimed)
        "UPDATE mf_jobs SET state = 'Dropped', finished_at = created_at, "
        "failure_class = 'Permanent', failure_reason = 'x'",
        "UPDATE mf_jobs SET state = 'Succeeded', finished_at = created_at",
    ],
)
def test_check_constraints_refuse_impossible_rows(mf: MailFathom, sql: str) -> None:
    job = mf.enqueue("k", {"x": 1})
    before = mf.jobs.get(job.id)
    with pytest.raises(StoreError):
        _raw(mf, sql)
    assert mf.jobs.get(job.id) == before
    assert mf.jobs.get(job.id).state.value == "Pending"


def test_idempotency_key_is_unique_in_the_table(mf: MailFathom) -> None:
    mf.enqueue("k", idempotency_key="a")
    mf.enqueue("k", idempotency_key="b")
    with pytest.raises(StoreError):
        _raw(mf, "UPDATE mf_jobs SET idempotency_key = 'a'")


def test_migrate_is_idempotent(mf: MailFathom) -> None:
    assert mf.migrate() == []
    assert mf.migrate() == []


def _migrate_together(url: str, barrier: Any, results: Any) -> None:
    with MailFathom(url) as app:
        with app.store.db.reading() as cur:  # connect first, so only the migration races
            cur.execute("SELECT 1")
        barrier.wait()
        started = time.monotonic()
        applied = app.migrate()
        results.put((applied, started, time.monotonic()))


def _race(url: str, processes: int) -> list[tuple[list[str], float, float]]:
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(processes), ctx.Queue()
    procs = [
        ctx.Process(target=_migrate_together, args=(url, barrier, results))
        for _ in range(processes)
    ]
    for proc in procs:
        proc.start()
    got = [results.get(timeout=60) for _ in procs]
    for proc in procs:
        proc.join(30)
        assert proc.exitcode == 0
    return got


def _empty(url: str) -> None:
    """Drop everything the migrations made (the file, or the schema's contents)."""
    if url.startswith("sqlite:///"):
        for suffix in ("", "-wal", "-shm"):
            Path(url.removeprefix("sqlite:///") + suffix).unlink(missing_ok=True)
        return
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT current_schema()").fetchone()
        assert row is not None
        conn.execute(f'DROP SCHEMA "{row[0]}" CASCADE')
        conn.execute(f'CREATE SCHEMA "{row[0]}"')


@pytest.mark.slow
def test_concurrent_migrations_apply_each_file_once(database_url: str, clock: FakeClock) -> None:
    dialect = "sqlite" if database_url.startswith("sqlite") else "postgresql"
    every_file = [name for _, name, _ in load_migrations(dialect)]
    overlapped = False
    for _ in range(3):  # a loaded machine may serialise a race by chance; three tries
        _empty(database_url)
        got = _race(database_url, 4)
        applied = sorted(name for names, _, _ in got for name in names)
        assert applied == every_file, "a migration was applied twice, or never"
        latest_start = max(started for _, started, _ in got)
        first_end = min(ended for _, _, ended in got)
        if latest_start < first_end:
            overlapped = True
            break
    assert overlapped, "the migrations always ran one after another: they never raced"
    with MailFathom(database_url, clock=clock) as app:
        assert app.migrate() == []
        app.enqueue("k")
        assert len(app.queue.claim("w", 1, timedelta(seconds=1))) == 1


def test_only_the_queues_own_state_moves_are_possible(mf: MailFathom) -> None:
    job = mf.enqueue("k", {"x": 1})
    _raw(mf, "UPDATE mf_jobs SET state = 'Pending'")  # not a move: allowed
    with pytest.raises(StoreError, match="illegal job state move"):
        _raw(
            mf,
            "UPDATE mf_jobs SET state = 'Dropped', finished_at = created_at, "
            "failure_class = 'Permanent', failure_reason = 'x'",
        )
    assert mf.jobs.get(job.id).state.value == "Pending"
