"""The rows and requests that cross the store's boundary.

Internal. Every repository (``store/jobs``, ``store/claims`` …) takes and returns
these, for SQLite and PostgreSQL alike, and one conformance suite runs against
both. Rows cross this boundary as typed dictionaries of
plain values (state names are strings) so that the store depends on nothing of
ours above it. Every method that depends on time takes ``now``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypedDict

__all__ = [
    "AttemptRow",
    "EventRow",
    "FailedAttempt",
    "JobFilter",
    "JobRow",
    "NewJob",
    "NewJobs",
    "OperatorAction",
    "PausedQueueRow",
    "QueueEventRow",
    "ScheduleDefinition",
    "ScheduleRow",
    "ThroughputRow",
    "WorkerRegistration",
    "WorkerRow",
]


class JobRow(TypedDict):
    """One job as stored."""

    id: int
    kind: str
    queue: str
    payload: dict[str, Any]
    priority: int
    state: str
    idempotency_key: str | None
    available_at: datetime | None
    attempts: int
    attempt_base: int
    max_attempts: int
    lease_owner: str | None
    lease_expires_at: datetime | None
    claimed_by: str | None
    claimed_at: datetime | None
    failure_class: str | None
    failure_reason: str | None
    created_at: datetime
    finished_at: datetime | None
    #: When retention compacted the row (payload emptied, tracebacks gone); None: whole.
    compacted_at: datetime | None
    abort_reason: str | None
    snoozes: int
    trace_context: str | None
    #: The flow-control limit key computed at enqueue (None: no per-key limit applies).
    limit_key: str | None
    #: What the handler returned, for a Succeeded job (None: nothing, or compacted).
    result: Any


class AttemptRow(TypedDict):
    """One attempt that did not succeed."""

    job_id: int
    attempt: int
    outcome: str
    failure_class: str
    error_type: str | None
    message: str
    traceback: str | None
    worker: str | None
    started_at: datetime | None
    finished_at: datetime


class PausedQueueRow(TypedDict):
    """A queue no worker claims from until it is resumed."""

    queue: str
    paused_at: datetime
    actor: str
    reason: str | None


class QueueEventRow(TypedDict):
    """One pause or resume of a queue."""

    id: int
    queue: str
    at: datetime
    actor: str
    action: str
    reason: str | None


class EventRow(TypedDict):
    """One operator action on a job."""

    id: int
    job_id: int
    at: datetime
    actor: str
    action: str
    from_state: str
    to_state: str
    reason: str | None


class WorkerRow(TypedDict):
    """One registered worker as stored (``queues`` None means every queue)."""

    id: str
    host: str
    pid: int
    queues: list[str] | None
    kinds: list[str]
    concurrency: int
    lease_seconds: float
    started_at: datetime
    last_heartbeat_at: datetime


class ScheduleRow(TypedDict):
    """One recurring schedule as stored."""

    name: str
    cron: str
    timezone: str
    kind: str
    queue: str
    payload: dict[str, Any]
    paused: bool
    paused_by: str | None
    paused_at: datetime | None
    pause_reason: str | None
    not_before: datetime
    last_tick: datetime | None
    last_job_id: int | None
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True, slots=True)
class WorkerRegistration:
    """Who a worker is, written when it starts and refreshed by its heartbeat."""

    id: str
    host: str
    pid: int
    queues: tuple[str, ...] | None
    kinds: tuple[str, ...]
    concurrency: int
    lease_seconds: float
    started_at: datetime


@dataclass(frozen=True, slots=True)
class ScheduleDefinition:
    """A schedule as declared in code; ``payload`` is already-validated JSON text."""

    name: str
    cron: str
    timezone: str
    kind: str
    queue: str
    payload: str


@dataclass(frozen=True, slots=True)
class NewJob:
    """A job to insert; ``payload`` is already-validated JSON text."""

    kind: str
    queue: str
    payload: str
    priority: int
    idempotency_key: str | None
    available_at: datetime | None
    max_attempts: int
    #: The W3C traceparent of the span that enqueued it (OpenTelemetry), if any.
    trace_context: str | None = None
    #: Its flow-control limit key (a customer, a recipient domain), if any.
    limit_key: str | None = None


@dataclass(frozen=True, slots=True)
class NewJobs:
    """One ``enqueue_many`` batch: jobs that share everything but payload and keys.

    ``payloads`` are already-validated compact JSON texts (so none holds a newline:
    JSON escapes every control character). ``idempotency_keys`` and ``limit_keys``
    are None when no job has one, else one entry (or None) per payload.
    """

    kind: str
    queue: str
    payloads: Sequence[str]
    priority: int
    available_at: datetime | None
    max_attempts: int
    idempotency_keys: Sequence[str | None] | None = None
    #: The W3C traceparent of the span that enqueued them (OpenTelemetry), if any.
    trace_context: str | None = None
    #: Their flow-control limit keys (a customer, a recipient domain), if any.
    limit_keys: Sequence[str | None] | None = None

    def job(self, index: int) -> NewJob:
        """The ``index``-th job on its own."""
        keys, limits = self.idempotency_keys, self.limit_keys
        return NewJob(
            kind=self.kind,
            queue=self.queue,
            payload=self.payloads[index],
            priority=self.priority,
            idempotency_key=None if keys is None else keys[index],
            available_at=self.available_at,
            max_attempts=self.max_attempts,
            trace_context=self.trace_context,
            limit_key=None if limits is None else limits[index],
        )

    def jobs(self) -> list[NewJob]:
        """Every job on its own, in order (for inserting row by row)."""
        return [self.job(index) for index in range(len(self.payloads))]


@dataclass(frozen=True, slots=True)
class FailedAttempt:
    """The end of an attempt that did not succeed, and what happens next.

    ``retry_at`` None means the job is dead-lettered.
    """

    job_id: int
    attempt: int
    outcome: str
    failure_class: str
    error_type: str | None
    message: str
    traceback: str | None
    started_at: datetime | None
    retry_at: datetime | None
    #: A snooze (``raise Snooze``): back to Pending at ``retry_at``, no attempt spent.
    snoozed: bool = False


@dataclass(frozen=True, slots=True)
class JobFilter:
    """Which jobs a listing shows; None means any.

    ``held`` keeps only held jobs (Pending with no available instant). ``text`` is a
    substring, ignoring ASCII case, of the failure reason, the idempotency key, or
    a key or a string or number value anywhere in the payload (the same on every
    dialect). ``created_before`` / ``created_after`` bound the enqueue instant.
    """

    state: str | None = None
    kind: str | None = None
    queue: str | None = None
    held: bool = False
    text: str | None = None
    created_before: datetime | None = None
    created_after: datetime | None = None


class ThroughputRow(TypedDict):
    """Jobs that ended (or attempts that failed) in one minute, ``YYYY-MM-DDTHH:MM`` UTC."""

    minute: str
    outcome: str
    n: int


@dataclass(frozen=True, slots=True)
class OperatorAction:
    """An audited operator move: ``query`` names the conditional update that performs it."""

    action: str
    query: str
    from_states: tuple[str, ...]
    to_state: str


Row = Mapping[str, Any]
