"""The Python transition table (jobs/state.py) and the database's guard agree, on every
store: each legal move is accepted by the guard, every other move is refused. The
operator actions (hold, run now, abort and the rest) only make legal moves."""

from __future__ import annotations

from datetime import timedelta
from itertools import product

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
    """A job brought to ``state`` by the queue's own statements."""
    job = mf.enqueue("k")
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


MOVES = [(a, b) for a, b in product(JobState, JobState) if a is not b]


@pytest.mark.parametrize(("source", "target"), MOVES, ids=lambda s: s.value)
def test_the_guard_allows_exactly_the_legal_moves(
    mf: MailFathom, source: JobState, target: JobState
) -> None:
    job_id = _job_in(mf, source)
    update = f"UPDATE mf_jobs SET state = '{target.value}', {_SHAPE[target]} WHERE id = {job_id}"
    if source in LEGAL_SOURCES[target]:
        with mf.store.db.transaction() as cur:
            cur.execute(update)
        assert mf.jobs.get(job_id).state is target
    else:
        with (
            pytest.raises(StoreError, match="illegal job state move"),
            mf.store.db.transaction() as cur,
        ):
            cur.execute(update)
        assert mf.jobs.get(job_id).state is source


@pytest.mark.parametrize(
    "move",
    [admin.REQUEUE, admin.DROP, admin.RELEASE, admin.HOLD, admin.RUN_NOW, admin.ABORT],
    ids=lambda m: m.action,
)
def test_every_operator_action_is_a_legal_move(move: OperatorAction) -> None:
    target = JobState(move.to_state)
    for source in move.from_states:
        assert JobState(source) is target or JobState(source) in LEGAL_SOURCES[target]
