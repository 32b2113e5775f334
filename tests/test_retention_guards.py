"""The database itself keeps compaction one-way: a compacted row stays terminal and
compacted, and never gets its payload (or bytes) back, whatever SQL is run.

The pruner never tries any of this; these tests write the forbidden rows on purpose and
check which guard refused each (tests/guard_probe.py), on SQLite and PostgreSQL.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from typing import Any

from guard_probe import check, insert_row, placeholders, refused_by, trigger
from mailfathom import FakeClock, JobContext, JobState, MailFathom, PermanentFailure
from raw_database import raw_time_param, raw_transaction

DAY = 86400.0


def _compacted_dead_letter(mf: MailFathom, clock: FakeClock) -> int:
    """A dead letter compacted by an app that opted in to compacting dead letters."""

    @mf.job("t.broken")
    def broken(ctx: JobContext, x: int) -> None:
        raise PermanentFailure("broken input")

    job = mf.enqueue("t.broken", {"x": 1}, idempotency_key="dead")
    mf.worker().run(burst=True)
    clock.advance(8 * DAY)
    settings = dataclasses.replace(mf.settings, retention={"DeadLettered": "7d"})
    with MailFathom(settings=settings, clock=clock) as other:
        assert other.prune().rows["jobs"]["DeadLettered"]["compacted"] == 1
    compacted = mf.jobs.get(job.id)
    assert compacted.state is JobState.DEAD_LETTERED and compacted.compacted
    return job.id


def _update(mf: MailFathom, table: str, assignments: str, row_id: int, *values: object) -> Any:
    """A write setting ``assignments`` (``values`` bound in order) on row ``row_id``."""
    mark = placeholders(mf, 1)
    return lambda cur: cur.execute(
        f"UPDATE {table} SET {assignments} WHERE id = {mark}", [*values, row_id]
    )


def test_the_database_keeps_a_compacted_job_terminal(mf: MailFathom, clock: FakeClock) -> None:
    job_id = _compacted_dead_letter(mf, clock)
    before = mf.jobs.get(job_id)
    # DeadLettered -> Pending is a move of the state machine (requeue): only the
    # compaction CHECK stands between a compacted dead letter and a run without payload
    rerun = _update(
        mf, "mf_jobs", "state = 'Pending', finished_at = NULL, available_at = created_at", job_id
    )
    assert refused_by(mf, "mf_jobs", rerun) == check("compacted_at", "state")
    assert mf.jobs.get(job_id) == before


def test_the_database_keeps_a_compacted_job_compacted(mf: MailFathom, clock: FakeClock) -> None:
    job_id = _compacted_dead_letter(mf, clock)
    before = mf.jobs.get(job_id)
    kept = trigger("a compacted job stays compacted")
    assert refused_by(mf, "mf_jobs", _update(mf, "mf_jobs", "compacted_at = NULL", job_id)) == kept
    earlier = raw_time_param(mf, clock.now() - timedelta(days=1))
    restamp = _update(mf, "mf_jobs", f"compacted_at = {placeholders(mf, 1)}", job_id, earlier)
    assert refused_by(mf, "mf_jobs", restamp) == kept
    payload = _update(mf, "mf_jobs", "payload = '{\"x\": 1}'", job_id)
    assert refused_by(mf, "mf_jobs", payload) == check("compacted_at", "payload")
    assert mf.jobs.get(job_id) == before


def test_the_database_keeps_a_compacted_email_compacted(mf: MailFathom) -> None:
    stamp = raw_time_param(mf, mf.clock.now())
    row: dict[str, object] = {
        "stage": "Sent",
        "message_id": "<a@example.com>",
        "sender": "a@example.com",
        "message": b"",
        "size": 0,
        "smtputf8": False,
        "eightbit": False,
        "attempts": 1,
        "created_at": stamp,
        "transmission_begun_at": stamp,
        "finished_at": stamp,
        "compacted_at": stamp,
    }
    with raw_transaction(mf) as cur:
        email_id = insert_row(cur, mf, "mf_outbox", row)
    kept = trigger("a compacted email stays compacted")
    # (clearing compacted_at is refused by the bytes CHECK already: restamping is the
    # write only the trigger refuses)
    earlier = raw_time_param(mf, mf.clock.now() - timedelta(days=1))
    restamp = _update(mf, "mf_outbox", f"compacted_at = {placeholders(mf, 1)}", email_id, earlier)
    assert refused_by(mf, "mf_outbox", restamp) == kept
    assert mf.outbox.get(email_id).compacted
