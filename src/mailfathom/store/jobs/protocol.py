"""The ``JobsStore`` protocol: what callers ask of the jobs repository.

Internal. :class:`~mailfathom.store.jobs.repository.JobsRepository` implements it for
every dialect; callers depend on this protocol, not on the class.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Protocol

from mailfathom.store.base import (
    AttemptRow,
    EventRow,
    JobFilter,
    JobRow,
    NewJobs,
    OperatorAction,
    ThroughputRow,
)

__all__ = ["JobsStore"]


class JobsStore(Protocol):
    """Jobs: enqueue, reads of jobs and their history, audited operator moves."""

    def enqueue(
        self, batch: NewJobs, *, now: datetime, connection: object | None = None
    ) -> list[int | JobRow]:
        """Insert a batch in one transaction; one entry per job, in order: the new job's
        id (its row is the batch's values and a new job's defaults, created at ``now``),
        or, where the idempotency key existed, the stored row of that job."""
        ...

    def enqueue_chunks(
        self,
        chunks: Iterable[NewJobs],
        *,
        now: datetime,
        connection: object | None = None,
        done: Callable[[NewJobs, list[int | JobRow]], None],
    ) -> None:
        """Insert the chunks of one large batch in ONE transaction, handing each chunk's
        results (as :meth:`enqueue` returns them) to ``done`` in turn; an error raised by
        ``chunks`` itself (a bad item found late) rolls back every chunk before it."""
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
