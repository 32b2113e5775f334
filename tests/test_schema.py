"""The schema holds the invariants itself, and migrations are idempotent and race-safe."""

from __future__ import annotations

import multiprocessing
from datetime import timedelta

import pytest

from mailfathom import FakeClock, MailFathom, StoreError


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


def _migrate(url: str) -> list[str]:
    with MailFathom(url) as app:
        return app.migrate()


@pytest.mark.slow
def test_concurrent_migrations_apply_each_file_once(database_url: str, clock: FakeClock) -> None:
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(4) as pool:
        results = pool.map(_migrate, [database_url] * 4)
    applied = [name for result in results for name in result]
    with MailFathom(database_url, clock=clock) as app:
        assert sorted(applied) == sorted(set(applied))
        assert app.migrate() == []
        app.enqueue("k")
        app.queue.claim("w", 1, timedelta(seconds=1))


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
