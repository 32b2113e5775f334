"""``mf.schedules``: declare, list, pause, resume and remove recurring schedules.

Internal: not part of the public API (:mod:`mailfathom` lists the public modules).

Schedules are declared in code with ``mf.schedule(...)`` (validated at once, like
``@mf.job``) and written to the database when a worker starts, or by
:meth:`Schedules.sync`. The database is the truth every worker reads: pausing
a schedule there stops every worker from enqueueing it, and the paused state
survives deploys (a re-declaration never unpauses it).
"""

from __future__ import annotations

import builtins
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from mailfathom.clock import Clock
from mailfathom.errors import IllegalTransition, InvalidInput, NotFound
from mailfathom.jobs.queue import JobQueue
from mailfathom.jobs.registry import check_name
from mailfathom.jobs.schedules.schedules import Scheduler, ScheduleSpec, build_spec, next_tick
from mailfathom.observability.logs import log_fields
from mailfathom.store.base import ScheduleRow
from mailfathom.validate import check_actor

__all__ = ["Schedule", "Schedules"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Schedule:
    """A recurring schedule as stored: what it enqueues, when, and whether it is paused.

    ``last_tick`` is the latest tick enqueued (its job is ``last_job_id``); ticks at
    or before ``not_before`` never run (creation, new cron or time zone, resumption).
    """

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

    def next_tick(self, after: datetime) -> datetime:
        """The first tick after ``after`` (UTC), paused or not."""
        return next_tick(self.cron, self.timezone, after)

    @classmethod
    def from_row(cls, row: ScheduleRow) -> Schedule:
        """Build from a stored row."""
        return cls(**row)


class Schedules:
    """This app's declared schedules and the operator's view of the stored ones."""

    def __init__(self, queue: JobQueue, clock: Clock) -> None:
        self._queue = queue
        self._store = queue.store.schedules
        self._clock = clock
        self._declared: dict[str, ScheduleSpec] = {}

    def declare(
        self,
        name: str,
        *,
        cron: str,
        kind: str,
        payload: Mapping[str, Any] | None = None,
        timezone: str = "UTC",
        queue: str | None = None,
    ) -> ScheduleSpec:
        """Validate and remember a schedule; a worker writes it to the database at start."""
        spec = build_spec(
            self._queue,
            name,
            cron=cron,
            kind=kind,
            payload=payload,
            timezone=timezone,
            job_queue=queue,
        )
        if name in self._declared:
            raise InvalidInput(f"schedule {name!r} is declared twice: keep one declaration")
        self._declared[name] = spec
        return spec

    def declared(self) -> builtins.list[ScheduleSpec]:
        """The schedules this app declares, by name."""
        return [self._declared[name] for name in sorted(self._declared)]

    def sync(self) -> builtins.list[str]:
        """Write this app's declared schedules now; returns the names created or changed."""
        return Scheduler(self._queue, self._clock).declare(self.declared())

    def list(self) -> builtins.list[Schedule]:
        """Every stored schedule, by name (including ones other apps declared)."""
        return [Schedule.from_row(row) for row in self._store.list_schedules()]

    def get(self, name: str) -> Schedule:
        """The stored schedule called ``name``; :class:`NotFound` if there is none."""
        row = self._store.get_schedule(_check(name))
        if row is None:
            raise _missing(name)
        return Schedule.from_row(row)

    def pause(self, name: str, *, actor: str, reason: str | None = None) -> Schedule:
        """Stop enqueueing ``name`` on every worker until it is resumed."""
        check_actor(actor, reason)
        row = self._store.pause_schedule(
            _check(name), actor=actor, reason=reason, now=self._clock.now()
        )
        if row is None:
            current = self.get(name)
            raise IllegalTransition(
                f"schedule {name!r} is already paused (by {current.paused_by} at "
                f"{current.paused_at}); nothing changed"
            )
        logger.info(
            "schedule=%s paused by %s: %s",
            name,
            actor,
            reason or "no reason given",
            extra=log_fields("schedule_paused", schedule=name, actor=actor, reason=reason),
        )
        return Schedule.from_row(row)

    def resume(self, name: str, *, actor: str) -> Schedule:
        """Enqueue ``name`` again from its next tick on; ticks missed while paused are skipped."""
        check_actor(actor, None)
        row = self._store.resume_schedule(_check(name), now=self._clock.now())
        if row is None:
            self.get(name)
            raise IllegalTransition(f"schedule {name!r} is not paused; nothing changed")
        logger.info(
            "schedule=%s resumed by %s",
            name,
            actor,
            extra=log_fields("schedule_resumed", schedule=name, actor=actor),
        )
        return Schedule.from_row(row)

    def remove(self, name: str, *, actor: str) -> None:
        """Delete a stored schedule (a worker that still declares it writes it back at start)."""
        check_actor(actor, None)
        if not self._store.delete_schedule(_check(name)):
            raise _missing(name)
        logger.info(
            "schedule=%s removed by %s",
            name,
            actor,
            extra=log_fields("schedule_removed", schedule=name, actor=actor),
        )


def _check(name: object) -> str:
    return check_name("schedule name", name, longest=200)


def _missing(name: str) -> NotFound:
    return NotFound(f"no schedule is called {name!r}: list schedules to see the stored ones")
