"""The Python transition table (jobs/state.py) and the database's guard agree, on every
store: each legal move is accepted by the guard, every other move is refused. The
operator actions (hold, run now, abort and the rest) only make legal moves."""

from __future__ import annotations

from datetime import timedelta
from itertools import count, product

import pytest

from mailfathom import JobState, MailFathom, StoreError
from mailfathom.jobs import admin
from mailfathom.jobs.state import LEGAL_SOURCES
from mailfathom.store.base import FailedAttempt, OperatorAction

#: Columns that make a row consistent with each state (so only the guard can object).
_SHAPE = {
    JobState.PENDING: "finished_at = NULL, lease_owner = NULL, lease_expires_at = NULL",
    JobState.CLAIMED: "finished_at = NULL, lease_owner = 'w', lease_expires_at = created_at, "
    "attempts = attempt_base + 1",
    JobState.SUCCEEDED: "finished_at = created_at, lease_owner = NULL, lease_expires_at = NULL",
    JobState.DEAD_LETTERED: "finished_at = created_at, lease_owner = NULL, "
    "lease_expires_at = NULL, failure_class = 'Permanent', failure_reason = 'x'",
    JobState.DROPPED: "finished_at = created_at, lease_owner = NULL, lease_expires_at = NULL, "
    "failure_class = 'Permanent', failure_reason = 'x'",
}


def _job_in(mf: MailFathom, state: JobState) -> int:
    """A job brought to ``state`` by the queue's own statements (enqueued with the highest
    priority yet, so the claim takes it and not an earlier test row)."""
    job = mf.enqueue("k", priority=next(_PRIORITY))
    if state is JobState.PENDING:
        return job.id
    now = mf.clock.now()
    mf.store.claim(owner="w", limit=1, now=now, lease_until=now + timedelta(seconds=30))
    if state is JobState.SUCCEEDED:
        mf.store.record_outcomes(owner="w", now=now, succeeded=[(job.id, 1)])
    elif state in (JobState.DEAD_LETTERED, JobState.DROPPED):
        failure = FailedAttempt(job.id, 1, "Failed", "Permanent", None, "x", None, now, None)
        mf.store.record_outcomes(owner="w", now=now, failed=[failure])
        if state is JobState.DROPPED:
            mf.jobs.drop(job.id, actor="ops")
    assert mf.jobs.get(job.id).state is state
    return job.id


_PRIORITY = count(1)
MOVES = [(a, b) for a, b in product(JobState, JobState) if a is not b]


def test_the_guard_allows_exactly_the_legal_moves(mf: MailFathom) -> None:
    """Every ordered pair of states, one job each (one database for the whole table)."""
    allowed, refused = [], []
    for source, target in MOVES:
        job_id = _job_in(mf, source)
        update = (
            f"UPDATE mf_jobs SET state = '{target.value}', {_SHAPE[target]} WHERE id = {job_id}"
        )
        try:
            with mf.store.db.transaction() as cur:
                cur.execute(update)
        except StoreError as exc:
            assert "illegal job state move" in str(exc), exc
            assert mf.jobs.get(job_id).state is source
            refused.append((source, target))
        else:
            assert mf.jobs.get(job_id).state is target
            allowed.append((source, target))
    legal = [(a, b) for a, b in MOVES if a in LEGAL_SOURCES[b]]
    assert allowed == legal
    assert refused == [move for move in MOVES if move not in legal]


@pytest.mark.parametrize(
    "move",
    [admin.REQUEUE, admin.DROP, admin.RELEASE, admin.HOLD, admin.RUN_NOW, admin.ABORT],
    ids=lambda m: m.action,
)
def test_every_operator_action_is_a_legal_move(move: OperatorAction) -> None:
    target = JobState(move.to_state)
    for source in move.from_states:
        assert JobState(source) is target or JobState(source) in LEGAL_SOURCES[target]
