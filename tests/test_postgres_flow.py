"""PostgreSQL: limited claims on two connections wait for each other (the flow lock), so
two claimers can never both see the last free slot of a limit."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import pytest

from mailfathom import JobContext, MailFathom
from mailfathom.clock import FakeClock
from mailfathom.testing import claim
from raw_database import raw_reading, raw_transaction

LEASE = timedelta(seconds=30)


def waiting_on_flow_lock(app: MailFathom) -> bool:
    """Whether some session waits for the flow lock (flow_lock's advisory lock)."""
    with raw_reading(app) as cur:
        cur.execute(
            "SELECT count(*) AS n FROM pg_stat_activity "
            "WHERE wait_event = 'advisory' AND query LIKE '%.mf_flow%'"
        )
        return int(cur.fetchone()["n"]) > 0


def test_a_second_claimer_waits_and_then_sees_the_slot_taken(
    postgres_schema_url: str, clock: FakeClock
) -> None:
    with (
        MailFathom(postgres_schema_url, clock=clock) as first,
        MailFathom(postgres_schema_url, clock=clock) as second,
    ):
        first.migrate()

        @first.job("one", max_running=1)
        def one(ctx: JobContext) -> None: ...

        first.limits.sync()
        first.enqueue_many("one", [{}] * 3)
        got: list[int] = []
        now = clock.now()
        with raw_transaction(first) as cur:  # a claim that has not committed yet
            limits = first.store.flow.active(cur)
            held = first.store.flow.claim(
                cur, limits, owner="a", limit=5, now=now, lease_until=now + LEASE, queues=None
            )
            assert len(held) == 1
            # committed meanwhile, first in claim order: not a row the first claim locks
            first.enqueue("one", {}, priority=10)
            claimer = threading.Thread(target=lambda: got.append(len(claim(second, "b", 5, LEASE))))
            claimer.start()
            deadline = time.monotonic() + 10
            while claimer.is_alive() and not waiting_on_flow_lock(first):
                assert time.monotonic() < deadline, "the second claim neither ended nor waited"
                time.sleep(0.01)
        claimer.join(10)
        assert got == [0]  # it waited for the first to commit, then found the slot taken


class _Explaining:
    """A cursor that EXPLAINs each statement reading due jobs in claim order just before
    running it, in the claim's transaction and with its parameters."""

    def __init__(self, cursor: Any, plans: list[str]) -> None:
        self._cursor = cursor
        self._plans = plans

    def execute(self, query: str, params: Any = None) -> Any:
        if "ORDER BY priority DESC, available_at, id" in query and "EXPLAIN" not in query:
            self._cursor.execute(f"EXPLAIN {query}", params)
            self._plans.append("\n".join(row["QUERY PLAN"] for row in self._cursor.fetchall()))
        return self._cursor.execute(query, params)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cursor, name)


def test_a_claim_with_limits_walks_the_claim_index_in_one_order(
    postgres_schema_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With limits, the claim reads limited and unlimited jobs in one claim order: each
    read walks the claim-order index and stops at its limit, even on statistics from
    before the backlog (no sort of every due job)."""
    with MailFathom(postgres_schema_url) as app:
        app.migrate()
        store = app.store
        with store.db.transaction() as cur:  # stale for sure: autovacuum may not analyze
            cur.execute("ALTER TABLE mf_jobs SET (autovacuum_enabled = false)")
        app.limit_kind("limited", max_running=50)
        app.limits.sync()
        app.enqueue_many("plain", [{} for _ in range(10_000)])
        app.enqueue_many("limited", [{} for _ in range(10_000)], priority=1)
        plans: list[str] = []
        transaction = store.db.transaction

        @contextmanager
        def explaining(connection: object | None = None, **options: Any) -> Iterator[Any]:
            with transaction(connection, **options) as cur:
                yield _Explaining(cur, plans)

        monkeypatch.setattr(store.db, "transaction", explaining)
        jobs = claim(app, "w", 100, LEASE)
        assert Counter(job.kind for job in jobs) == {"limited": 50, "plain": 50}
    assert len(plans) == 3, plans  # the look ahead, the limited jobs', the unlimited claim
    for plan in plans:
        assert "Index Scan using mf_jobs_claimable" in plan, plan
        assert "Bitmap" not in plan and "JIT" not in plan, plan
        assert "->  Sort  " not in plan and not plan.startswith("Sort"), plan
