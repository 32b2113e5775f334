"""Operator actions: requeue, drop, release — audited, and refused from every other state."""

from __future__ import annotations

import sqlite3
import threading
import time
from datetime import timedelta

import psycopg
import pytest

from mailfathom import (
    EnqueuedJob,
    FakeClock,
    IllegalTransition,
    InvalidInput,
    Job,
    JobContext,
    JobState,
    MailFathom,
    NotFound,
    PermanentFailure,
)
from mailfathom.testing import claim


def _job_in(mf: MailFathom, state: JobState) -> Job:
    """A job brought to ``state`` through the real state machine."""
    if "test.fail" not in mf.registry.names():

        @mf.job("test.fail")
        def fail(ctx: JobContext, ok: bool) -> None:
            if not ok:
                raise PermanentFailure("broken input")

    job: EnqueuedJob = mf.enqueue("test.fail", {"ok": state is JobState.SUCCEEDED})
    if state is JobState.PENDING:
        return job
    if state is JobState.CLAIMED:
        (claimed,) = claim(mf, "w", 1, timedelta(seconds=30))
        return claimed
    mf.worker().run(burst=True)
    if state is JobState.DROPPED:
        mf.jobs.drop(job.id, actor="ops")
    found = mf.jobs.get(job.id)
    assert found.state is state
    return found


def test_requeue_gives_a_dead_letter_a_fresh_budget(mf: MailFathom, clock: FakeClock) -> None:
    dead = _job_in(mf, JobState.DEAD_LETTERED)
    clock.advance(60)
    job = mf.jobs.requeue(dead.id, actor="alice", reason="input fixed")
    assert job.state is JobState.PENDING
    assert job.available_at == clock.now() and job.finished_at is None
    assert job.attempts == 1 and job.attempts_left == job.max_attempts
    assert job.idempotency_key == dead.idempotency_key
    (event,) = mf.jobs.events(dead.id)
    assert (event.actor, event.action, event.reason) == ("alice", "requeue", "input fixed")
    assert (event.from_state, event.to_state) == (JobState.DEAD_LETTERED, JobState.PENDING)
    assert event.at == clock.now()
    # History is kept: the failed attempt is still there, and the next one is number 2.
    mf.worker().run(burst=True)
    assert [a.attempt for a in mf.jobs.attempts(dead.id)] == [1, 2]


def test_drop_only_from_dead_lettered(mf: MailFathom, clock: FakeClock) -> None:
    dead = _job_in(mf, JobState.DEAD_LETTERED)
    dropped = mf.jobs.drop(dead.id, actor="bob", reason="obsolete")
    assert dropped.state is JobState.DROPPED and dropped.finished_at == clock.now()
    assert dropped.failure_reason == "broken input"
    assert [e.to_state for e in mf.jobs.events(dead.id)] == [JobState.DROPPED]


ACTIONS = ["requeue", "drop", "release"]
REFUSED = {
    "requeue": [JobState.PENDING, JobState.CLAIMED, JobState.SUCCEEDED, JobState.DROPPED],
    "drop": [JobState.PENDING, JobState.CLAIMED, JobState.SUCCEEDED, JobState.DROPPED],
    "release": [
        JobState.PENDING,
        JobState.CLAIMED,
        JobState.SUCCEEDED,
        JobState.DEAD_LETTERED,
        JobState.DROPPED,
    ],
}


@pytest.mark.parametrize(
    ("action", "state"), [(a, s) for a in ACTIONS for s in REFUSED[a]], ids=str
)
def test_action_from_a_wrong_state_is_refused_and_changes_nothing(
    mf: MailFathom, action: str, state: JobState
) -> None:
    job = _job_in(mf, state)
    before = mf.jobs.get(job.id)
    events_before = mf.jobs.events(job.id)
    with pytest.raises(IllegalTransition, match=f"{state.value}|not held") as raised:
        getattr(mf.jobs, action)(job.id, actor="ops", reason="try")
    assert "nothing changed" in str(raised.value)
    assert mf.jobs.get(job.id) == before
    assert mf.jobs.events(job.id) == events_before


def test_release_is_audited(mf: MailFathom) -> None:
    job = mf.enqueue("k", hold=True)
    mf.jobs.release(job.id, actor="carol")
    (event,) = mf.jobs.events(job.id)
    assert (event.action, event.actor, event.reason) == ("release", "carol", None)


def test_actions_on_missing_jobs_and_bad_arguments(mf: MailFathom) -> None:
    with pytest.raises(NotFound, match="no job has id 999"):
        mf.jobs.requeue(999, actor="ops")
    with pytest.raises(NotFound):
        mf.jobs.get(999)
    job = _job_in(mf, JobState.DEAD_LETTERED)
    with pytest.raises(InvalidInput, match="actor"):
        mf.jobs.requeue(job.id, actor="  ")
    with pytest.raises(InvalidInput, match="positive integer"):
        mf.jobs.get(0)
    assert mf.jobs.get(job.id).state is JobState.DEAD_LETTERED


def test_list_filters_and_paginates(mf: MailFathom) -> None:
    mails = mf.enqueue_many("mail", [{} for _ in range(5)], queue="mail")
    mf.enqueue_many("report", [{} for _ in range(3)])
    dead = _job_in(mf, JobState.DEAD_LETTERED)
    assert [j.id for j in mf.jobs.list(kind="mail", limit=2)] == [mails[4].id, mails[3].id]
    page2 = mf.jobs.list(kind="mail", limit=2, before_id=mails[3].id)
    assert [j.id for j in page2] == [mails[2].id, mails[1].id]
    assert [j.id for j in mf.jobs.list(state=JobState.DEAD_LETTERED)] == [dead.id]
    assert [j.id for j in mf.jobs.list(state="DeadLettered")] == [dead.id]
    assert len(mf.jobs.list(queue="mail")) == 5
    with pytest.raises(InvalidInput, match="unknown job state 'Bogus'"):
        mf.jobs.list(state="Bogus")
    with pytest.raises(InvalidInput, match="limit"):
        mf.jobs.list(limit=0)
    counts = mf.jobs.counts()
    assert counts[JobState.PENDING] == 8 and counts[JobState.DEAD_LETTERED] == 1
    assert set(counts) == set(JobState)


class Blocker:
    """A third connection that holds the job's row (PostgreSQL) or the database's write
    lock (SQLite) so that two operators' actions start together and wait behind it."""

    def __init__(self, database_url: str, job_id: int) -> None:
        self._sqlite: sqlite3.Connection | None = None
        self._pg: psycopg.Connection[tuple[object, ...]] | None = None
        self._watch: psycopg.Connection[tuple[object, ...]] | None = None
        if database_url.startswith("sqlite:///"):
            self._sqlite = sqlite3.connect(database_url.removeprefix("sqlite:///"))
            self._sqlite.execute("BEGIN IMMEDIATE")
        else:
            self._pg = psycopg.connect(database_url)
            self._pg.execute("SELECT id FROM mf_jobs WHERE id = %s FOR UPDATE", (job_id,))
            self._watch = psycopg.connect(database_url, autocommit=True)

    def waiting(self) -> int:
        """How many sessions wait, directly or in a queue, behind this one (PostgreSQL)."""
        assert self._pg is not None and self._watch is not None
        row = self._watch.execute(
            "WITH RECURSIVE behind(pid) AS ("
            " SELECT pid FROM pg_stat_activity WHERE %(me)s = ANY(pg_blocking_pids(pid))"
            " UNION SELECT a.pid FROM pg_stat_activity a JOIN behind"
            " ON behind.pid = ANY(pg_blocking_pids(a.pid))) SELECT count(*) FROM behind",
            {"me": self._pg.info.backend_pid},
        ).fetchone()
        assert row is not None
        return int(str(row[0]))

    def release(self) -> None:
        """Let the waiting sessions go, changing nothing."""
        if self._sqlite is not None:
            self._sqlite.rollback()
            self._sqlite.close()
        if self._pg is not None and self._watch is not None:
            self._pg.rollback()
            self._pg.close()
            self._watch.close()


def test_the_loser_of_two_racing_operators_is_told_the_state_the_job_is_in_now(
    mf: MailFathom, database_url: str, clock: FakeClock
) -> None:
    """Two consoles (two apps, two connection pools) act on one dead letter at once:
    one requeues it, the other drops it. One wins; the other is refused, and its error
    names the state the winner left the job in — not DeadLettered, the state it read
    before its guarded UPDATE found the job gone from under it. On PostgreSQL both wait
    behind a third connection holding the row, so both read it before either moves it;
    SQLite reads and writes under one write lock, so there the race cannot arise."""
    dead = _job_in(mf, JobState.DEAD_LETTERED)
    with MailFathom(database_url, clock=clock) as other:
        blocker = Blocker(database_url, dead.id)
        started = [threading.Event(), threading.Event()]
        results: dict[str, Job | IllegalTransition] = {}

        def act(app: MailFathom, action: str, index: int) -> None:
            started[index].set()
            try:
                results[action] = getattr(app.jobs, action)(dead.id, actor=action)
            except IllegalTransition as exc:
                results[action] = exc

        threads = [
            threading.Thread(target=act, args=(mf, "requeue", 0)),
            threading.Thread(target=act, args=(other, "drop", 1)),
        ]
        try:
            for thread in threads:
                thread.start()
            assert all(event.wait(10) for event in started)
            if database_url.startswith("postgresql"):
                # Both have read the job as DeadLettered and wait to UPDATE it.
                deadline = time.monotonic() + 10
                while blocker.waiting() < 2:
                    assert time.monotonic() < deadline, "the two actions never queued up"
        finally:
            blocker.release()
            for thread in threads:
                thread.join(10)
    winners = [a for a, r in results.items() if isinstance(r, Job)]
    losers = {a: r for a, r in results.items() if isinstance(r, IllegalTransition)}
    assert len(winners) == 1 and len(losers) == 1, results
    now = mf.jobs.get(dead.id).state
    assert now is {"requeue": JobState.PENDING, "drop": JobState.DROPPED}[winners[0]]
    (error,) = losers.values()
    assert error.current == now.value
    assert f"it is {now.value}," in str(error)
    assert [e.action for e in mf.jobs.events(dead.id)] == winners
