"""Claims and leases: order, batch size, queues, renewal, expiry, lost attempts, poison jobs,
and handing back jobs claimed and never started.

Leases are renewed and outcomes recorded with the calls a worker makes: its
:class:`~mailfathom.jobs.worker.heartbeat.Heartbeat` beats and its
:class:`~mailfathom.jobs.worker.recorder.OutcomeRecorder` flushes.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from mailfathom import AttemptOutcome, FailureClass, FakeClock, JobState, MailFathom
from mailfathom.clock import DEFAULT_CLOCK_SKEW
from mailfathom.jobs.model import Job
from mailfathom.jobs.queue import Finished
from mailfathom.jobs.worker.heartbeat import Heartbeat
from mailfathom.jobs.worker.outcomes import Outage
from mailfathom.jobs.worker.recorder import OutcomeRecorder
from mailfathom.jobs.worker.testsignal import Recorded, WorkerSignals
from mailfathom.store.base import WorkerRegistration
from mailfathom.store.sql_store import SqlStore
from mailfathom.testing import claim
from reaping import reap

LEASE = timedelta(seconds=30)


def renew(mf: MailFathom, owner: str, jobs: list[Job]) -> set[tuple[int, int]]:
    """One heartbeat of worker ``owner`` holding ``jobs``; returns the leases it lost."""
    lost: set[tuple[int, int]] = set()
    registration = WorkerRegistration(
        id=owner,
        host="test",
        pid=1,
        queues=None,
        kinds=("k",),
        concurrency=1,
        lease_seconds=LEASE.total_seconds(),
        started_at=mf.clock.now(),
    )
    Heartbeat(
        mf.store, mf.clock, registration, lease=LEASE, held=lambda: jobs, on_lost=lost.update
    ).beat()
    return lost


def succeed(mf: MailFathom, owner: str, job: Job) -> Recorded:
    """Record that ``job``'s attempt succeeded, as worker ``owner`` does; returns the batch."""
    signals = WorkerSignals().init()
    recorder = OutcomeRecorder(mf.queue, owner, outage=Outage(owner, limit=0.5), signals=signals)
    recorder.unrecorded.add(Finished(job, AttemptOutcome.SUCCEEDED))
    recorder.flush()
    assert recorder.unrecorded.empty()
    return signals.batch_recorded.wait()


def test_claim_order_is_priority_then_due_time_then_id(mf: MailFathom, clock: FakeClock) -> None:
    late_low = mf.enqueue("k", {"n": "late-low"})
    clock.advance(1)
    high = mf.enqueue("k", {"n": "high"}, priority=5)
    early = mf.enqueue("k", {"n": "early"}, run_at=clock.now() - timedelta(minutes=1))
    same_time_a = mf.enqueue("k", {"n": "a"}, priority=1)
    same_time_b = mf.enqueue("k", {"n": "b"}, priority=1)
    claimed = claim(mf, "w", 10, LEASE)
    assert [j.id for j in claimed] == [
        high.id,
        same_time_a.id,
        same_time_b.id,
        early.id,
        late_low.id,
    ]


def test_claim_is_limited_and_sets_the_lease(mf: MailFathom, clock: FakeClock) -> None:
    mf.enqueue_many("k", [{} for _ in range(5)])
    first = claim(mf, "w1", 3, LEASE)
    second = claim(mf, "w2", 3, LEASE)
    assert (len(first), len(second)) == (3, 2)
    assert not {j.id for j in first} & {j.id for j in second}
    job = mf.jobs.get(first[0].id)
    assert job.state is JobState.CLAIMED
    assert job.lease_owner == "w1"
    assert job.lease_expires_at == clock.now() + LEASE
    assert job.attempts == 1
    assert claim(mf, "w3", 3, LEASE) == []


def test_claim_only_from_the_requested_queues(mf: MailFathom) -> None:
    mail = mf.enqueue("k", queue="mail")
    mf.enqueue("k", queue="reports")
    assert [j.id for j in claim(mf, "w", 10, LEASE, queues=["mail", "other"])] == [mail.id]
    assert len(claim(mf, "w", 10, LEASE, queues=None)) == 1


def test_renewed_lease_keeps_the_job(mf: MailFathom, clock: FakeClock) -> None:
    mf.enqueue("k")
    (job,) = claim(mf, "w1", 1, LEASE)
    for _ in range(5):
        clock.advance(20)
        assert renew(mf, "w1", [job]) == set()
    assert claim(mf, "w2", 1, LEASE) == []
    assert mf.jobs.get(job.id).lease_expires_at == clock.now() + LEASE


def test_expired_lease_is_claimable_by_anyone_and_the_lost_attempt_counts(
    mf: MailFathom, clock: FakeClock
) -> None:
    mf.enqueue("k", max_attempts=3)
    (job,) = claim(mf, "w1", 1, LEASE)
    clock.advance(LEASE + DEFAULT_CLOCK_SKEW)
    (again,) = claim(mf, "w2", 1, LEASE)
    assert again.id == job.id and again.attempts == 2 and again.lease_owner == "w2"
    (lost,) = mf.jobs.attempts(job.id)
    assert lost.outcome is AttemptOutcome.LEASE_EXPIRED
    assert lost.attempt == 1 and lost.worker == "w1"
    assert lost.failure_class is FailureClass.TRANSIENT
    # The old owner can neither renew nor complete: its lease is gone.
    assert renew(mf, "w1", [job]) == {(job.id, 1)}
    assert succeed(mf, "w1", job).lost == {job.id}
    assert mf.jobs.get(job.id).state is JobState.CLAIMED
    assert succeed(mf, "w2", again) == Recorded(recorded=((job.id, 2),), lost=frozenset())
    assert mf.jobs.get(job.id).state is JobState.SUCCEEDED


def test_same_owner_cannot_complete_an_attempt_it_lost(mf: MailFathom, clock: FakeClock) -> None:
    mf.enqueue("k")
    (first,) = claim(mf, "w", 1, LEASE)
    clock.advance(LEASE + DEFAULT_CLOCK_SKEW)
    (second,) = claim(mf, "w", 1, LEASE)
    assert renew(mf, "w", [first]) == {(first.id, 1)}
    assert succeed(mf, "w", first).lost == {first.id}
    assert mf.jobs.get(first.id).state is JobState.CLAIMED
    assert succeed(mf, "w", second).lost == frozenset()
    assert mf.jobs.get(first.id).state is JobState.SUCCEEDED


def test_a_job_claimed_and_never_started_goes_back_unspent(
    mf: MailFathom, clock: FakeClock
) -> None:
    """What a worker does with jobs it claimed ahead and could not start in time."""
    job = mf.enqueue("k", max_attempts=1)
    (claimed,) = claim(mf, "w1", 1, LEASE)
    assert claimed.attempts == 1
    assert (
        mf.store.claims.release_unstarted(owner="w2", held=[(job.id, 1)], now=mf.clock.now())
        == set()
    )  # not its lease
    assert (
        mf.store.claims.release_unstarted(owner="w1", held=[(job.id, 2)], now=mf.clock.now())
        == set()
    )  # not this attempt
    assert mf.jobs.get(job.id).state is JobState.CLAIMED
    assert mf.store.claims.release_unstarted(
        owner="w1", held=[(job.id, 1)], now=mf.clock.now()
    ) == {job.id}
    back = mf.jobs.get(job.id)
    assert back.state is JobState.PENDING and back.attempts == 0
    assert (back.lease_owner, back.lease_expires_at) == (None, None)
    assert back.available_at == job.available_at  # due as before: first in line again
    assert mf.jobs.attempts(job.id) == []
    assert (
        mf.store.claims.release_unstarted(owner="w1", held=[(job.id, 1)], now=mf.clock.now())
        == set()
    )  # once only
    (again,) = claim(mf, "w2", 1, LEASE)  # at once, its one attempt still unspent
    assert (again.id, again.attempts, again.attempts_left) == (job.id, 1, 0)


def test_a_release_wakes_idle_workers(mf: MailFathom) -> None:
    """They wait on the store's wake-up, not for their next poll."""
    job = mf.enqueue("k")
    claim(mf, "w1", 1, LEASE)
    mf.store.wait_for_jobs(0.01)  # listening, and every earlier wake-up consumed
    while mf.store.wait_for_jobs(0.01):
        pass
    assert mf.store.claims.release_unstarted(
        owner="w1", held=[(job.id, 1)], now=mf.clock.now()
    ) == {job.id}
    assert mf.store.wait_for_jobs(10)


def test_a_job_released_after_its_lease_moved_on_stays_with_its_new_owner(
    mf: MailFathom, clock: FakeClock
) -> None:
    job = mf.enqueue("k")
    claim(mf, "w1", 1, LEASE)
    clock.advance(LEASE + DEFAULT_CLOCK_SKEW)
    (again,) = claim(mf, "w2", 1, LEASE)  # reaped, then claimed by w2
    assert again.id == job.id
    assert (
        mf.store.claims.release_unstarted(owner="w1", held=[(job.id, 1)], now=mf.clock.now())
        == set()
    )
    assert (
        mf.store.claims.release_unstarted(owner="w1", held=[(job.id, 2)], now=mf.clock.now())
        == set()
    )
    taken = mf.jobs.get(job.id)
    assert (taken.state, taken.lease_owner, taken.attempts) == (JobState.CLAIMED, "w2", 2)


def test_poison_job_dead_letters_after_max_attempts_lost_leases(
    mf: MailFathom, clock: FakeClock
) -> None:
    poison = mf.enqueue("k", max_attempts=3)
    for attempt in range(3):
        (job,) = claim(mf, f"w{attempt}", 1, LEASE)
        assert job.attempts == attempt + 1
        clock.advance(LEASE + DEFAULT_CLOCK_SKEW)
    healthy = mf.enqueue("k")
    assert [j.id for j in claim(mf, "w9", 10, LEASE)] == [healthy.id]
    dead = mf.jobs.get(poison.id)
    assert dead.state is JobState.DEAD_LETTERED
    assert dead.finished_at == clock.now()
    assert dead.failure_class is FailureClass.TRANSIENT
    assert dead.failure_reason is not None and "lease expired" in dead.failure_reason
    outcomes = [a.outcome for a in mf.jobs.attempts(poison.id)]
    assert outcomes == [AttemptOutcome.LEASE_EXPIRED] * 3


def test_reap_expired_without_claiming(mf: MailFathom, clock: FakeClock) -> None:
    job = mf.enqueue("k")
    claim(mf, "w", 1, LEASE)
    clock.advance(LEASE + DEFAULT_CLOCK_SKEW - timedelta(microseconds=1))
    assert reap(mf.store, now=mf.clock.now()) == 0
    clock.advance(timedelta(microseconds=1))
    assert reap(mf.store, now=mf.clock.now()) == 1
    back = mf.jobs.get(job.id)
    assert back.state is JobState.PENDING and back.available_at == clock.now()
    assert back.lease_owner is None


def test_a_claim_that_skips_reaping_leaves_expired_leases_for_the_next_reap(
    mf: MailFathom, clock: FakeClock
) -> None:
    """A busy worker reaps on a timer, not on every claim (one statement fewer each)."""
    job = mf.enqueue("k")
    claim(mf, "w1", 1, LEASE)
    clock.advance(LEASE + DEFAULT_CLOCK_SKEW)
    assert claim(mf, "w2", 1, LEASE, reap=False) == []
    assert mf.jobs.get(job.id).state is JobState.CLAIMED
    (again,) = claim(mf, "w2", 1, LEASE)
    assert again.id == job.id and again.attempts == 2


def test_sqlite_queue_claims_walk_each_queues_index_instead_of_sorting_the_backlog(
    tmp_path: Path,
) -> None:
    """A worker restricted to queues claims from each queue's claim-order range and
    stops at the limit: it never sorts every pending job of its queues per claim."""
    with MailFathom(f"sqlite:///{tmp_path / 'plan.db'}") as app:
        app.migrate()
        store = app.store
        assert isinstance(store, SqlStore)
        query = store.claims._queue_claim(2)
        select = query[query.index("SELECT id FROM (") : query.rindex(")\nRETURNING")]
        conn = sqlite3.connect(tmp_path / "plan.db")
        plan = [
            row[3]
            for row in conn.execute(
                f"EXPLAIN QUERY PLAN {select}",
                {"queue_0": "a", "queue_1": "b", "now": "2030", "limit": 10, "kinds": '["k"]'},
            )
        ]
        conn.close()
    walks = [step for step in plan if "USING INDEX mf_jobs_queue_claimable (queue=?" in step]
    assert len(walks) == 2, plan
    assert not any("mf_jobs_state" in step for step in plan), plan


def _subplan(plan: str, heading: str) -> str:
    """The lines of ``plan`` from ``heading`` to the end of the node it heads."""
    lines = plan.splitlines()
    start = next(n for n, line in enumerate(lines) if line.strip() == heading)
    indent = len(lines[start]) - len(lines[start].lstrip())
    end = next(
        (
            n
            for n in range(start + 1, len(lines))
            if len(lines[n]) - len(lines[n].lstrip()) <= indent
        ),
        len(lines),
    )
    return "\n".join(lines[start:end])


class _Explaining:
    """A cursor that EXPLAINs each claim statement just before running it, in the claim's
    transaction and with its parameters (so whatever the store set for the claim applies)."""

    def __init__(self, cursor: Any, plans: list[str]) -> None:
        self._cursor = cursor
        self._plans = plans

    def execute(self, query: str, params: Any = None) -> Any:
        if "SET state = 'Claimed'" in query:
            self._cursor.execute(f"EXPLAIN {query}", params)
            self._plans.append("\n".join(row["QUERY PLAN"] for row in self._cursor.fetchall()))
        return self._cursor.execute(query, params)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cursor, name)


def test_postgresql_claims_walk_the_claim_index_even_when_statistics_are_stale(
    postgres_schema_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Right after a burst of enqueues the statistics still say few jobs are due (a new
    table was never analyzed; a big one is not analyzed again for a 10 % change). Left to
    them, the planner read and sorted every due job on every claim: 169 ms instead of 4.4
    to claim 100 of 200,000 (python -m bench.claim_costs --part stale). A claim walks the
    claim-order index and stops at its limit, whatever the statistics say."""
    with MailFathom(postgres_schema_url) as app:
        app.migrate()
        store = app.store
        assert isinstance(store, SqlStore)
        with store.db.transaction() as cur:  # stale for sure: autovacuum may not analyze
            cur.execute("ALTER TABLE mf_jobs SET (autovacuum_enabled = false)")
        for queue in ("a", "b"):
            app.enqueue_many("k", [{} for _ in range(10_000)], queue=queue)
        plans: list[str] = []
        transaction = store.db.transaction

        @contextmanager
        def explaining(connection: object | None = None, **options: Any) -> Iterator[Any]:
            with transaction(connection, **options) as cur:
                yield _Explaining(cur, plans)

        monkeypatch.setattr(store.db, "transaction", explaining)
        assert len(claim(app, "w", 100, LEASE)) == 100
        assert len(claim(app, "w", 100, LEASE, queues=["a", "b"])) == 100
        now = app.clock.now()
        for queues in (None, ["a", "b"]):  # as a worker claims: only its kinds
            claimed = store.claims.claim(
                owner="w", limit=100, now=now, lease_until=now + LEASE, queues=queues,
                kinds=["k", "other.kind"],
            )  # fmt: skip
            assert len(claimed) == 100
    everything, in_queues, everything_kinds, in_queues_kinds = plans
    assert "Index Scan using mf_jobs_claimable" in everything, everything
    assert "Index Scan using mf_jobs_queue_claimable" in in_queues, in_queues
    assert "Index Scan using mf_jobs_claimable" in everything_kinds, everything_kinds
    assert "Index Scan using mf_jobs_queue_claimable" in in_queues_kinds, in_queues_kinds
    for plan, final_sorts in (
        (everything, 0),
        (in_queues, 1),
        (everything_kinds, 0),
        (in_queues_kinds, 1),
    ):
        assert "Bitmap" not in plan, plan
        assert "JIT" not in plan, plan  # never compiled: it took longer than the claim
        due = _subplan(plan, "CTE due")
        # Nothing sorted before the LIMIT of the due jobs, so nothing read past it (a
        # queue claim sorts only the few rows its queues' index walks returned).
        assert due.count("->  Sort  ") == final_sorts, plan
