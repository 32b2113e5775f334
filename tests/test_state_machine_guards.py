"""One definition of each state machine: the database allows exactly the moves Python allows.

``jobs/state.py`` and ``delivery/stage.py`` hold the transition tables the code checks;
the migrations hold triggers that refuse every other move. For every pair of distinct
states, on each store, a row is written in the first state and moved to the second by a
direct UPDATE that also sets every other column the way the second state's CHECKs want
— so the transition guard alone decides. The database must allow exactly the pairs the
Python table allows, and each refusal must come from the transition trigger, not from
some CHECK that happened to fire.

An UPDATE that keeps the state is not a move and no trigger judges it (the queue
re-claims an expired lease that way: Claimed -> Claimed), so the diagonal is tested
apart: every store accepts it.
"""

from __future__ import annotations

from datetime import datetime
from functools import partial
from itertools import product
from typing import Any

import pytest

from guard_probe import insert_row, placeholders, refused_by, trigger
from mailfathom import JobState, MailFathom, OutgoingEmailStage
from mailfathom.delivery import stage as email_stages
from mailfathom.jobs import state as job_states
from mailfathom.jobs.admin import admin
from mailfathom.jobs.state import LEGAL_SOURCES
from mailfathom.store.base import OperatorAction
from raw_database import raw_reading, raw_time_param, raw_transaction

_T = datetime.fromisoformat("2026-01-01T00:00:00+00:00")

# For each job state, the columns that make a row in it satisfy every CHECK.
JOB_COLUMNS: dict[JobState, dict[str, object]] = {
    JobState.PENDING: {
        "finished_at": None,
        "lease_owner": None,
        "lease_expires_at": None,
        "failure_class": None,
        "failure_reason": None,
    },
    JobState.CLAIMED: {
        "finished_at": None,
        "lease_owner": "w",
        "lease_expires_at": _T,
        "failure_class": None,
        "failure_reason": None,
    },
    JobState.SUCCEEDED: {
        "finished_at": _T,
        "lease_owner": None,
        "lease_expires_at": None,
        "failure_class": None,
        "failure_reason": None,
    },
    JobState.DEAD_LETTERED: {
        "finished_at": _T,
        "lease_owner": None,
        "lease_expires_at": None,
        "failure_class": "Permanent",
        "failure_reason": "x",
        "abort_reason": "aborted by x",  # Pending -> DeadLettered only with one
    },
    JobState.DROPPED: {
        "finished_at": _T,
        "lease_owner": None,
        "lease_expires_at": None,
        "failure_class": "Permanent",
        "failure_reason": "x",
    },
}

# For each outgoing-email stage, the columns that make a row in it satisfy every CHECK.
EMAIL_COLUMNS: dict[OutgoingEmailStage, dict[str, object]] = {
    OutgoingEmailStage.RECORDED: {
        "transmission_begun_at": None,
        "finished_at": None,
        "reason": None,
    },
    OutgoingEmailStage.TRANSMISSION_BEGUN: {
        "transmission_begun_at": _T,
        "finished_at": None,
        "reason": None,
    },
    OutgoingEmailStage.SENT: {"transmission_begun_at": _T, "finished_at": _T, "reason": None},
    OutgoingEmailStage.REFUSED: {"transmission_begun_at": _T, "finished_at": _T, "reason": "x"},
    OutgoingEmailStage.CANCELLED: {
        "transmission_begun_at": None,
        "finished_at": _T,
        "reason": "x",
    },
}

JOB_PAIRS = [(a, b) for a, b in product(JobState, JobState) if a is not b]
EMAIL_PAIRS = [(a, b) for a, b in product(OutgoingEmailStage, OutgoingEmailStage) if a is not b]


def _values(mf: MailFathom, columns: dict[str, object]) -> dict[str, object]:
    return {
        name: raw_time_param(mf, value) if isinstance(value, datetime) else value
        for name, value in columns.items()
    }


def _update_in(
    cur: Any, mf: MailFathom, table: str, row_id: object, columns: dict[str, object]
) -> None:
    """UPDATE one row of ``table`` to ``columns`` on the open cursor ``cur``."""
    names = list(columns)
    mark = placeholders(mf, 1)
    assignments = ", ".join(f"{name} = {mark}" for name in names)
    cur.execute(
        f"UPDATE {table} SET {assignments} WHERE id = {mark}",
        [*(columns[name] for name in names), row_id],
    )


def _update(mf: MailFathom, table: str, row_id: object, columns: dict[str, object]) -> None:
    with raw_transaction(mf) as cur:
        _update_in(cur, mf, table, row_id, columns)


def _job_in(mf: MailFathom, state: JobState) -> object:
    row = {
        "kind": "k",
        "queue": "default",
        "payload": "{}",
        "priority": 0,
        "state": state.value,
        "available_at": raw_time_param(mf, _T),
        "attempts": 1,
        "attempt_base": 0,
        "max_attempts": 3,
        "created_at": raw_time_param(mf, _T),
        **_values(mf, JOB_COLUMNS[state]),
    }
    with raw_transaction(mf) as cur:
        return insert_row(cur, mf, "mf_jobs", row)


def _email_in(mf: MailFathom, stage: OutgoingEmailStage) -> object:
    body = b"Subject: x\r\n\r\nhello\r\n"
    row = {
        "stage": stage.value,
        "message_id": "<a@example.com>",
        "sender": "a@example.com",
        "message": body,
        "size": len(body),
        "smtputf8": False,
        "eightbit": False,
        "attempts": 1,
        "created_at": raw_time_param(mf, _T),
        **_values(mf, EMAIL_COLUMNS[stage]),
    }
    with raw_transaction(mf) as cur:
        return insert_row(cur, mf, "mf_outbox", row)


def _state_of(mf: MailFathom, table: str, column: str, row_id: object) -> str:
    with raw_reading(mf) as cur:
        cur.execute(f"SELECT {column} FROM {table} WHERE id = {placeholders(mf, 1)}", [row_id])
        value: str = cur.fetchone()[column]
        return value


def test_every_job_move_python_allows_the_database_allows_and_no_other(mf: MailFathom) -> None:
    allowed, refused = [], []
    for source, target in JOB_PAIRS:
        job_id = _job_in(mf, source)
        move = {"state": target.value, **_values(mf, JOB_COLUMNS[target])}
        legal = source in job_states.LEGAL_SOURCES[target]
        if legal:
            _update(mf, "mf_jobs", job_id, move)
            allowed.append((source, target))
            assert _state_of(mf, "mf_jobs", "state", job_id) == target.value
            continue
        write = partial(_update_in, mf=mf, table="mf_jobs", row_id=job_id, columns=move)
        fired = refused_by(mf, "mf_jobs", write)
        assert fired.startswith(trigger("illegal job state move")), (source, target, fired)
        assert _state_of(mf, "mf_jobs", "state", job_id) == source.value
        refused.append((source, target))
    # the table itself: seven moves, the other thirteen refused
    assert sorted(allowed) == sorted(
        (s, t) for t, sources in job_states.LEGAL_SOURCES.items() for s in sources if s is not t
    )
    assert len(allowed) == 7 and len(refused) == 13


def test_a_pending_job_is_dead_lettered_only_by_an_abort(mf: MailFathom) -> None:
    """Pending -> DeadLettered is an operator's abort: without an abort request on the row
    the database refuses it."""
    job_id = _job_in(mf, JobState.PENDING)
    move = {"state": "DeadLettered", **_values(mf, JOB_COLUMNS[JobState.DEAD_LETTERED])}
    move["abort_reason"] = None
    write = partial(_update_in, mf=mf, table="mf_jobs", row_id=job_id, columns=move)
    assert refused_by(mf, "mf_jobs", write).startswith(trigger("illegal job state move"))
    assert _state_of(mf, "mf_jobs", "state", job_id) == "Pending"


def test_every_email_move_python_allows_the_database_allows_and_no_other(mf: MailFathom) -> None:
    allowed, refused = [], []
    for source, target in EMAIL_PAIRS:
        email_id = _email_in(mf, source)
        move = {"stage": target.value, **_values(mf, EMAIL_COLUMNS[target])}
        if source in email_stages.LEGAL_SOURCES[target]:
            _update(mf, "mf_outbox", email_id, move)
            allowed.append((source, target))
            assert _state_of(mf, "mf_outbox", "stage", email_id) == target.value
            continue
        write = partial(_update_in, mf=mf, table="mf_outbox", row_id=email_id, columns=move)
        fired = refused_by(mf, "mf_outbox", write)
        assert fired.startswith(trigger("illegal outgoing-email stage move")), (
            source,
            target,
            fired,
        )
        assert _state_of(mf, "mf_outbox", "stage", email_id) == source.value
        refused.append((source, target))
    assert sorted(allowed) == sorted(
        (s, t) for t, sources in email_stages.LEGAL_SOURCES.items() for s in sources if s is not t
    )
    assert len(allowed) == 6 and len(refused) == 14


@pytest.mark.parametrize("state", list(JobState))
def test_an_update_that_keeps_the_job_state_is_not_a_move(mf: MailFathom, state: JobState) -> None:
    job_id = _job_in(mf, state)
    _update(mf, "mf_jobs", job_id, {"state": state.value, "priority": 5})
    assert _state_of(mf, "mf_jobs", "state", job_id) == state.value


@pytest.mark.parametrize("stage", list(OutgoingEmailStage))
def test_an_update_that_keeps_the_stage_is_not_a_move(
    mf: MailFathom, stage: OutgoingEmailStage
) -> None:
    email_id = _email_in(mf, stage)
    _update(mf, "mf_outbox", email_id, {"stage": stage.value, "attempts": 2})
    assert _state_of(mf, "mf_outbox", "stage", email_id) == stage.value


@pytest.mark.parametrize(
    "move",
    [admin.REQUEUE, admin.DROP, admin.RELEASE, admin.HOLD, admin.RUN_NOW, admin.ABORT],
    ids=lambda m: m.action,
)
def test_every_operator_action_is_a_legal_move(move: OperatorAction) -> None:
    """The operator actions (hold, run now, abort and the rest) only make legal moves."""
    target = JobState(move.to_state)
    for source in move.from_states:
        assert JobState(source) is target or JobState(source) in LEGAL_SOURCES[target]
