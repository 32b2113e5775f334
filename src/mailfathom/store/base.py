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
    "OperatorAction",
    "Store",
    "ThroughputRow",
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


@dataclass(frozen=True, slots=True)
class JobFilter:
    """Which jobs a listing shows; None means any.

    ``held`` keeps only held jobs (Pending with no available instant). ``text`` is a
    case-insensitive substring of the failure reason, the idempotency key or the
    payload's JSON. ``created_before`` / ``created_after`` bound the enqueue instant.
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
        self, jobs: Sequence[NewJob], *, now: datetime, connection: object | None = None
    ) -> list[tuple[JobRow, bool]]:
        """Insert jobs in one transaction; an existing key returns its job with ``False``."""
        ...

    def claim(
        self,
        *,
        owner: str,
        limit: int,
        now: datetime,
        lease_until: datetime,
        queues: Sequence[str] | None = None,
    ) -> list[JobRow]:
        """Lease up to ``limit`` due jobs to ``owner``, after returning expired leases."""
        ...

    def reap_expired(self, *, now: datetime) -> int:
        """Return jobs whose lease expired to the queue (or dead-letter them); count them."""
        ...

    def extend_leases(
        self, *, owner: str, held: Sequence[tuple[int, int]], lease_until: datetime
    ) -> set[int]:
        """Renew the leases on ``(job id, attempt)`` pairs; return the ids still held."""
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


Row = Mapping[str, Any]
