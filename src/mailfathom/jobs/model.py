"""What the public API returns about jobs: ``Job``, ``EnqueuedJob``, ``Attempt``, ``JobEvent``.

Internal: not part of the public API (:mod:`mailfathom` lists the public modules).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from mailfathom.jobs.slots import positional_builder, row_builder
from mailfathom.jobs.state import AttemptOutcome, FailureClass, JobState
from mailfathom.store.base import AttemptRow, EventRow, JobRow, NewJobs

__all__ = ["Attempt", "EnqueuedJob", "Job", "JobEvent", "enqueued_jobs"]


@dataclass(frozen=True, slots=True)
class Job:
    """A snapshot of one job as stored.

    ``attempts`` counts every attempt ever made, including ones lost to a crash;
    ``attempt_base`` is how many had been made when an operator last requeued it,
    so the current budget is ``max_attempts - (attempts - attempt_base)``.
    """

    id: int
    kind: str
    queue: str
    payload: dict[str, Any]
    priority: int
    state: JobState
    idempotency_key: str | None
    available_at: datetime | None
    attempts: int
    attempt_base: int
    max_attempts: int
    lease_owner: str | None
    lease_expires_at: datetime | None
    claimed_by: str | None
    claimed_at: datetime | None
    failure_class: FailureClass | None
    failure_reason: str | None
    created_at: datetime
    finished_at: datetime | None
    #: The operator's abort request on a Claimed job ("aborted by <actor>: <reason>").
    abort_reason: str | None = field(default=None, kw_only=True)
    #: How many times a handler snoozed the job since it was enqueued or requeued.
    snoozes: int = field(default=0, kw_only=True)
    #: The W3C traceparent of the span that enqueued the job (None when tracing was off);
    #: its attempts' spans are that span's children (docs/observability.md).
    trace_context: str | None = field(default=None, kw_only=True)
    #: When retention compacted this terminal row: its payload is ``{}`` now, its result
    #: None, and its failed attempts keep one summary line each (no traceback). Its key still holds.
    compacted_at: datetime | None = field(default=None, kw_only=True)
    #: The flow-control limit key computed at enqueue (None: no per-key limit applies).
    limit_key: str | None = field(default=None, kw_only=True)
    #: What the handler returned, for a Succeeded job: the JSON value as decoded from the
    #: stored text (a dict, list, str, int, float, bool). None when the handler returned
    #: None, when the job has not succeeded, and once retention compacted the row.
    result: Any = field(default=None, kw_only=True)

    @property
    def compacted(self) -> bool:
        """Retention has compacted this row (payload, result and tracebacks are gone)."""
        return self.compacted_at is not None

    @property
    def held(self) -> bool:
        """Pending with no available instant: waits until an operator releases it."""
        return self.state is JobState.PENDING and self.available_at is None

    @property
    def attempts_left(self) -> int:
        """Attempts remaining in the current budget."""
        return max(self.max_attempts - (self.attempts - self.attempt_base), 0)

    @classmethod
    def from_row(cls, row: JobRow) -> Job:
        """Build from a stored row.

        The worker builds one per claimed job, so this fills the slots directly
        (:mod:`mailfathom.jobs.slots`: a third of the cost of the generated ``__init__``
        with 23 keyword arguments); a row whose keys are not exactly the fields goes
        through ``__init__`` and its error.
        """
        if cls is not Job or len(row) != _FIELD_COUNT:
            return cls(**_public(row))
        return _job_from_row(row)


@dataclass(frozen=True, slots=True)
class EnqueuedJob(Job):
    """The job an enqueue created or found: ``created`` is False when the key existed."""

    created: bool

    @classmethod
    def from_enqueue(cls, row: JobRow, created: bool) -> EnqueuedJob:
        """Build from a stored row and whether this call inserted it."""
        return cls(**_public(row), created=created)


def _state(value: str) -> JobState:
    return _STATES.get(value) or JobState(value)


def _failure(value: str | None) -> FailureClass | None:
    return None if value is None else _FAILURES.get(value) or FailureClass(value)


_STATES = {state.value: state for state in JobState}
_FAILURES = {failure.value: failure for failure in FailureClass}
_FIELD_COUNT = len(Job.__dataclass_fields__)
_job_from_row = row_builder(Job, {"state": _state, "failure_class": _failure})


_new_enqueued = positional_builder(EnqueuedJob, defaults=False)
_decode = json.JSONDecoder().decode  # json.loads without its per-call argument checks


def enqueued_jobs(
    batch: NewJobs,
    results: Sequence[int | JobRow],
    now: datetime,
    payloads: Sequence[dict[str, Any] | None] | None = None,
) -> list[EnqueuedJob]:
    """What ``enqueue_many`` returns: for each id in ``results`` the job it created, built
    from the batch's values and a new job's defaults (the schema's; ``tests/test_enqueue.py``
    checks it equals the row read back), and for each row the existing job (not created).

    Nothing is read back from the store for a new job. Its payload is ``payloads[i]`` when
    given (a copy equal to what decoding gives: :func:`~mailfathom.jobs.payload.encode_and_copy`),
    else decoded from the text sent: exactly what a later read returns either way, and
    never the caller's own object, which the caller may go on changing."""
    kind, queue, priority = batch.kind, batch.queue, batch.priority
    attempts, trace = batch.max_attempts, batch.trace_context
    created_at = now.astimezone(UTC)
    due = batch.available_at
    due = None if due is None else due.astimezone(UTC)
    nothing: list[None] = [None] * len(results)
    keys = batch.idempotency_keys or nothing
    limits = batch.limit_keys or nothing
    pending, build, decode = JobState.PENDING, _new_enqueued, _decode
    jobs: list[EnqueuedJob] = []
    copies = payloads or nothing
    for result, text, copy, key, limit in zip(
        results, batch.payloads, copies, keys, limits, strict=True
    ):
        if type(result) is int:
            jobs.append(
                build(
                    result, kind, queue, decode(text) if copy is None else copy, priority,
                    pending, key, due, 0, 0,
                    attempts, None, None, None, None, None, None, created_at, None,
                    None, 0, trace, None, limit, None, True,
                )
            )  # fmt: skip
        else:
            jobs.append(EnqueuedJob.from_enqueue(result, False))  # type: ignore[arg-type]
    return jobs


def _public(row: JobRow) -> dict[str, Any]:
    fields: dict[str, Any] = dict(row)
    fields["state"] = JobState(row["state"])
    failure = row["failure_class"]
    fields["failure_class"] = None if failure is None else FailureClass(failure)
    return fields


@dataclass(frozen=True, slots=True)
class Attempt:
    """One attempt at running a job and how it ended."""

    job_id: int
    attempt: int
    outcome: AttemptOutcome
    failure_class: FailureClass | None
    error_type: str | None
    message: str | None
    traceback: str | None
    worker: str | None
    started_at: datetime | None
    finished_at: datetime | None

    @classmethod
    def from_row(cls, row: AttemptRow) -> Attempt:
        """Build from a stored unsuccessful attempt."""
        return cls(
            job_id=row["job_id"],
            attempt=row["attempt"],
            outcome=AttemptOutcome(row["outcome"]),
            failure_class=FailureClass(row["failure_class"]),
            error_type=row["error_type"],
            message=row["message"],
            traceback=row["traceback"],
            worker=row["worker"],
            started_at=row["started_at"],
            finished_at=row["finished_at"],
        )

    @classmethod
    def success_of(cls, job: Job) -> Attempt:
        """The successful last attempt of a Succeeded job (kept on the job row itself)."""
        return cls(
            job_id=job.id,
            attempt=job.attempts,
            outcome=AttemptOutcome.SUCCEEDED,
            failure_class=None,
            error_type=None,
            message=None,
            traceback=None,
            worker=job.claimed_by,
            started_at=job.claimed_at,
            finished_at=job.finished_at,
        )


@dataclass(frozen=True, slots=True)
class JobEvent:
    """One audited operator action: who did what, when, why, from which state to which."""

    id: int
    job_id: int
    at: datetime
    actor: str
    action: str
    from_state: JobState
    to_state: JobState
    reason: str | None

    @classmethod
    def from_row(cls, row: EventRow) -> JobEvent:
        """Build from a stored audit row."""
        return cls(
            id=row["id"],
            job_id=row["job_id"],
            at=row["at"],
            actor=row["actor"],
            action=row["action"],
            from_state=JobState(row["from_state"]),
            to_state=JobState(row["to_state"]),
            reason=row["reason"],
        )
