"""PostgreSQL: limited claims on two connections wait for each other (the flow lock), so
two claimers can never both see the last free slot of a limit."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

from mailfathom import JobContext, MailFathom
from mailfathom.clock import FakeClock

LEASE = timedelta(seconds=30)


def waiting_on_flow_lock(app: MailFathom) -> bool:
    """Whether some session waits for the flow lock (flow_lock's advisory lock)."""
    with app.store.db.reading() as cur:
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
        with first.store.db.transaction() as cur:  # a claim that has not committed yet
            limits = first.store.flow.active(cur)
            held = first.store.flow.claim(
                cur, limits, owner="a", limit=5, now=now, lease_until=now + LEASE, queues=None
            )
            assert len(held) == 1
            # committed meanwhile, first in claim order: not a row the first claim locks
            first.enqueue("one", {}, priority=10)
            claimer = threading.Thread(
                target=lambda: got.append(len(second.queue.claim("b", 5, LEASE)))
            )
            claimer.start()
            deadline = time.monotonic() + 10
            while claimer.is_alive() and not waiting_on_flow_lock(first):
                assert time.monotonic() < deadline, "the second claim neither ended nor waited"
                time.sleep(0.01)
        claimer.join(10)
        assert got == [0]  # it waited for the first to commit, then found the slot taken
