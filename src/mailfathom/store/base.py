"""The ``Store`` protocol: everything the queue and the outbox ask of a database.

Internal. Two stores implement it (SQLite and PostgreSQL) and one conformance
suite runs against both. Rows cross this boundary as typed dictionaries of
plain values (state names are strings) so that the store depends on nothing of
ours above it. Every method that depends on time takes ``now``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, TypedDict

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
    "Store",
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


class Store(Protocol):
    """A database holding the queue. Every write is one transaction."""

    dialect: str
    #: Whether writers run side by side (PostgreSQL) rather than one at a time (SQLite):
    #: the worker then records outcomes on a thread of its own, beside its claims.
    parallel_writes: bool

    def migrate(self) -> list[str]:
        """Apply pending migrations (safe when several processes race); return their names."""
        ...

    def close(self) -> None:
        """Release every connection."""
        ...

    def wait_for_jobs(self, timeout: float) -> bool:
        """Block until jobs may have arrived or ``timeout`` seconds pass; True when woken early.

        Cheap when idle: PostgreSQL waits on ``LISTEN``; SQLite watches the file's
        ``data_version``, which changes whenever another connection commits.
        """
        ...

    def enqueue(
        self, batch: NewJobs, *, now: datetime, connection: object | None = None
    ) -> list[int | JobRow]:
        """Insert a batch in one transaction; one entry per job, in order: the new job's
        id (its row is the batch's values and a new job's defaults, created at ``now``),
        or, where the idempotency key existed, the stored row of that job."""
        ...

    def claim(
        self,
        *,
        owner: str,
        limit: int,
        now: datetime,
        lease_until: datetime,
        queues: Sequence[str] | None = None,
        reap: bool = True,
        queue_limits: Mapping[str, int] | None = None,
        live: Sequence[tuple[int, int]] = (),
    ) -> list[JobRow]:
        """Lease up to ``limit`` due jobs to ``owner``, after returning expired leases
        (unless ``reap`` is False: a busy worker reaps on a timer, not on every claim),
        except ``owner``'s own ``live`` (id, attempt) leases, which it renews.
        ``queue_limits`` (per-queue slots) leases up to that many of each queue instead.
        Flow-control limits (``mf_flow_limits``) hold whichever way jobs are claimed."""
        ...

    def reap_expired(
        self, *, now: datetime, owner: str = "", live: Sequence[tuple[int, int]] = ()
    ) -> int:
        """Return leases that expired (by ``clock_skew`` before ``now``) to the queue, or
        to the dead letters; ``owner``'s ``live`` (id, attempt) leases, which it renews,
        are never reaped. Returns how many there were."""
        ...

    def renew_leases(
        self, *, owner: str, held: Sequence[tuple[int, int]], lease_until: datetime
    ) -> tuple[set[int], dict[int, str]]:
        """Renew the leases on ``(job id, attempt)`` pairs, never to an earlier expiry than
        they have, and in the same one statement learn which jobs an operator asked to
        abort: ``(ids still held, {id: abort reason})``."""
        ...

    def paused_queues(self) -> list[PausedQueueRow]:
        """Every paused queue, by name."""
        ...

    def pause_queue(
        self, queue: str, *, actor: str, reason: str | None, now: datetime
    ) -> PausedQueueRow | None:
        """Pause ``queue`` fleet-wide (audited); None when it was paused already."""
        ...

    def resume_queue(
        self, queue: str, *, actor: str, reason: str | None, now: datetime
    ) -> PausedQueueRow | None:
        """Resume ``queue`` (audited, idle workers woken); None when it was not paused."""
        ...

    def queue_events(self, *, queue: str | None, limit: int) -> list[QueueEventRow]:
        """Pauses and resumes, newest first."""
        ...

    def queue_summary(self) -> list[dict[str, Any]]:
        """Per queue with unfinished jobs: ``queue``, ``pending``, ``held``, ``running``."""
        ...

    def release_unstarted(
        self, *, owner: str, held: Sequence[tuple[int, int]], now: datetime
    ) -> set[int]:
        """Give back ``(job id, attempt)`` leases of jobs ``owner`` claimed and never
        started: Pending again at once, the claim's attempt not counted, no attempt
        recorded; a job an operator asked to abort meanwhile is dead-lettered at ``now``
        instead (it never starts). Returns the ids released (a lease that moved on is
        left alone)."""
        ...

    def record_outcomes(
        self,
        *,
        owner: str,
        now: datetime,
        succeeded: Sequence[tuple[int, int]] = (),
        failed: Sequence[FailedAttempt] = (),
    ) -> set[int]:
        """Record finished attempts in one transaction; return the ids whose lease was lost."""
        ...

    def record_and_claim(
        self,
        *,
        owner: str,
        now: datetime,
        succeeded: Sequence[tuple[int, int]],
        failed: Sequence[FailedAttempt],
        limit: int,
        lease_until: datetime,
        queues: Sequence[str] | None = None,
        reap: bool = True,
        queue_limits: Mapping[str, int] | None = None,
        live: Sequence[tuple[int, int]] = (),
    ) -> tuple[set[int], list[JobRow]]:
        """``record_outcomes`` then ``claim`` in one transaction: a busy worker's loop
        commits once per batch. Returns the lost ids and the claimed jobs."""
        ...

    def get_job(self, job_id: int) -> JobRow | None:
        """The job, or None."""
        ...

    def list_jobs(
        self, filter: JobFilter, *, limit: int, before_id: int | None = None
    ) -> list[JobRow]:
        """Jobs newest first, ``limit`` at most, older than ``before_id`` when given."""
        ...

    def count_jobs(self) -> dict[str, int]:
        """How many jobs are in each state (states with none are absent)."""
        ...

    def attempts(self, job_id: int) -> list[AttemptRow]:
        """The job's unsuccessful attempts, oldest first."""
        ...

    def events(self, job_id: int) -> list[EventRow]:
        """The job's audit trail, oldest first."""
        ...

    def recent_events(self, *, limit: int, before_id: int | None = None) -> list[EventRow]:
        """Every job's operator actions, newest first, older than ``before_id`` when given."""
        ...

    def count_held(self) -> int:
        """How many jobs are held (Pending, waiting for an operator's release)."""
        ...

    def throughput(self, *, since: datetime) -> list[ThroughputRow]:
        """Per minute since ``since``: jobs that ended, by final state, and failed attempts.

        ``outcome`` is a terminal job state name, or ``Failed`` for an attempt that
        failed and was retried or dead-lettered (attempt history rows).
        """
        ...

    def operator_move(
        self,
        job_id: int,
        move: OperatorAction,
        *,
        actor: str,
        reason: str | None,
        now: datetime,
    ) -> tuple[JobRow | None, JobRow | None]:
        """Perform ``move`` and audit it atomically.

        Returns ``(moved row, None)`` on success, ``(None, current row)`` when the job
        is in a state the move does not start from, ``(None, None)`` when it does not exist.
        """
        ...

    # -- the worker registry -----------------------------------------------------------

    def heartbeat(self, worker: WorkerRegistration, *, now: datetime) -> None:
        """Register ``worker`` or refresh its heartbeat (never dated before its start).

        Leases are renewed apart, by :meth:`renew_leases`, so that a registry failure
        never costs a running job its lease.
        """
        ...

    def deregister_worker(self, worker_id: str) -> None:
        """Remove a worker that stopped cleanly from the registry."""
        ...

    def list_workers(self) -> list[WorkerRow]:
        """Every registered worker, oldest first, the dead ones included."""
        ...

    def prune_workers(self, *, before: datetime) -> int:
        """Forget workers whose last heartbeat is older than ``before``; count them."""
        ...

    # -- recurring schedules -----------------------------------------------------------

    def declare_schedules(
        self, schedules: Sequence[ScheduleDefinition], *, now: datetime
    ) -> list[str]:
        """Insert or update schedules in one transaction; return the names written.

        An unchanged definition is not written. A new cron or time zone gets
        ``not_before = now`` (its past ticks never run); the paused state and the last
        tick are always kept.
        """
        ...

    def list_schedules(self) -> list[ScheduleRow]:
        """Every schedule, by name."""
        ...

    def get_schedule(self, name: str) -> ScheduleRow | None:
        """The schedule called ``name``, or None."""
        ...

    def pause_schedule(
        self, name: str, *, actor: str, reason: str | None, now: datetime
    ) -> ScheduleRow | None:
        """Pause a running schedule; None when there is no such schedule or it is paused."""
        ...

    def resume_schedule(self, name: str, *, now: datetime) -> ScheduleRow | None:
        """Resume a paused schedule (ticks from ``now`` on); None when not paused or absent."""
        ...

    def delete_schedule(self, name: str) -> bool:
        """Delete the schedule; False when there was none."""
        ...

    def fire_schedule(
        self,
        schedule: ScheduleRow,
        *,
        tick: datetime,
        idempotency_key: str,
        max_attempts: int,
        now: datetime,
    ) -> tuple[JobRow, bool] | None:
        """Enqueue ``schedule``'s job for ``tick`` unless that tick (or a later one) was
        enqueued already, the schedule is paused, or its definition changed.

        One transaction moves the schedule's last tick forward and inserts the job
        under ``idempotency_key``, so concurrent workers enqueue each tick once.
        Returns the job and whether it was created, or None when nothing was due.
        """
        ...


Row = Mapping[str, Any]
