"""The ``SchedulesStore`` protocol: what callers ask of the schedules repository.

Internal. :class:`~mailfathom.store.schedules.repository.SchedulesRepository` implements it for
every dialect; callers depend on this protocol, not on the class.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from mailfathom.store.base import JobRow, ScheduleDefinition, ScheduleRow

__all__ = ["SchedulesStore"]


class SchedulesStore(Protocol):
    """Recurring schedules and the jobs their ticks enqueue."""

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
