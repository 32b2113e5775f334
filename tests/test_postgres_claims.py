"""Claims restricted to queues, the case PostgreSQL answers per queue (on both stores).

PostgreSQL reads each requested queue through its own index range and merges
them; these tests pin what that must still mean: global claim order across the
queues, the limit over all of them, repeated queue names, nothing else leased,
and racing claimers never sharing a job.
"""

from __future__ import annotations

import multiprocessing
import queue
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import pytest

from mailfathom import FakeClock, JobState, MailFathom
from mailfathom.store.flow import repository as flow_repository
from mailfathom.store.postgres import PostgresDatabase
from mailfathom.testing import claim
from pg_trace import round_trips, traced

LEASE = timedelta(seconds=30)


def test_claim_order_holds_across_queues(mf: MailFathom, clock: FakeClock) -> None:
    mail_old = mf.enqueue("k", queue="mail", run_at=clock.now() - timedelta(minutes=5))
    other = mf.enqueue("k", queue="other", priority=9)
    default_high = mf.enqueue("k", queue="default", priority=5)
    mail_mid = mf.enqueue("k", queue="mail", priority=1)
    default_low = mf.enqueue("k", queue="default")
    claimed = claim(mf, "w", 3, LEASE, queues=["mail", "default", "mail"])
    assert [job.id for job in claimed] == [default_high.id, mail_mid.id, mail_old.id]
    assert mf.jobs.get(default_low.id).state is JobState.PENDING
    assert mf.jobs.get(other.id).state is JobState.PENDING
    rest = claim(mf, "w2", 10, LEASE, queues=["default", "mail"])
    assert [job.id for job in rest] == [default_low.id]


def test_the_limit_spans_every_queue(mf: MailFathom, clock: FakeClock) -> None:
    mail = mf.enqueue_many("k", [{} for _ in range(5)], queue="mail")
    clock.advance(1)
    default = mf.enqueue_many("k", [{} for _ in range(5)], queue="default")
    first = claim(mf, "w", 4, LEASE, queues=["default", "mail"])
    assert [job.id for job in first] == [job.id for job in mail[:4]]
    second = claim(mf, "w", 4, LEASE, queues=["default", "mail"])
    assert [job.id for job in second] == [mail[4].id, *(job.id for job in default[:3])]


def _claim_queues(url: str, owner: str, barrier: Any, results: Any) -> None:
    claimed: list[int] = []
    idle = 0
    with MailFathom(url) as app:
        app.jobs.counts()  # connected: only the claims race
        barrier.wait(timeout=60)
        while idle < 3:
            jobs = claim(app, owner, 7, timedelta(seconds=60), queues=["b", "a"])
            if not jobs:
                idle += 1
                continue
            idle = 0
            claimed.extend(job.id for job in jobs)
            time.sleep(0.002)  # as if running them: lets the other claimers take turns
            done = [(j.id, j.attempts) for j in jobs]
            app.store.claims.record_outcomes(owner=owner, now=app.clock.now(), succeeded=done)
    results.put(claimed)


@pytest.mark.slow
def test_racing_queue_claimers_never_share_a_job(database_url: str) -> None:
    with MailFathom(database_url) as app:
        app.migrate()
        for name in ("a", "b", "c"):
            app.enqueue_many("k", [{"n": n} for n in range(200)], queue=name)
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(3), ctx.Queue()
    procs = [
        ctx.Process(target=_claim_queues, args=(database_url, f"w{n}", barrier, results))
        for n in range(3)
    ]
    for proc in procs:
        proc.start()
    got: list[list[int]] = []
    deadline = time.monotonic() + 120
    try:
        while len(got) < len(procs):
            try:
                got.append(results.get(timeout=0.5))
            except queue.Empty:
                assert all(proc.exitcode in (None, 0) for proc in procs), "a claimer crashed"
                assert time.monotonic() < deadline, "the claimers did not finish"
    finally:
        for proc in procs:
            proc.join(30)
            if proc.is_alive():
                proc.kill()
    claims = Counter(job_id for ids in got for job_id in ids)
    assert len(claims) == 400 and set(claims.values()) == {1}
    assert sum(1 for ids in got if ids) >= 2, "the claimers did not actually race"
    with MailFathom(database_url) as app:
        counts = app.jobs.counts()
        assert (counts[JobState.SUCCEEDED], counts[JobState.PENDING]) == (400, 200)


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
def test_a_postgresql_claim_is_two_round_trips(
    mf: MailFathom, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Counted in libpq's trace of the pooled connection: BEGIN, the plan setting and the
    claim go out together, COMMIT with the end — what an idle worker's wake-up waits
    for — whether the claim leases jobs or finds none (limits already read, no reaping)."""
    monkeypatch.setattr(flow_repository, "REFRESH_SECONDS", 3600.0)
    store = mf.store
    assert isinstance(store.db, PostgresDatabase)
    taken = store.db._connection
    trips: list[int] = []

    @contextmanager
    def traced_connection() -> Iterator[Any]:
        with taken() as conn:
            with traced(conn.pgconn) as lines:
                yield conn
            trips.append(round_trips(conn.pgconn, lines))

    now = clock.now()
    store.claims.claim(owner="w", limit=10, now=now, lease_until=now + LEASE)  # reads limits
    mf.enqueue_many("k", [{}, {}])
    monkeypatch.setattr(store.db, "_connection", traced_connection)
    claimed = store.claims.claim(owner="w", limit=10, now=now, lease_until=now + LEASE, reap=False)
    empty = store.claims.claim(owner="w", limit=10, now=now, lease_until=now + LEASE, reap=False)
    assert (len(claimed), len(empty)) == (2, 0)
    assert trips == [2, 2]
