"""Recurring schedules: declared in code, persisted in the database, fired by every worker.

Internal; the public face is ``mf.schedule(...)`` and ``mf.schedules``. A
schedule (name, cron expression, time zone, kind, payload) enqueues its job at
each tick with the idempotency key ``schedule:<name>:<tick instant, ISO UTC>``.
Every worker runs the :class:`Scheduler`: the store moves the schedule's
``last_tick`` forward and inserts the job in one transaction, so any number of
workers enqueue each tick exactly once without talking to each other. Only the
latest due tick is considered, so after downtime one job runs, not a burst.
Ticks at or before ``not_before`` (the schedule's creation, its last change of
cron or time zone, or its resumption) never run.

Cron expressions are five fields, or six with seconds last (``* * * * * */10`` is
every ten seconds); :mod:`mailfathom.jobs.schedules.cron` reads them and works out their
ticks across daylight-saving changes the way cron does.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from mailfathom.clock import Clock
from mailfathom.errors import InvalidInput
from mailfathom.jobs.queue import JobQueue
from mailfathom.jobs.registry import DEFAULT_MAX_ATTEMPTS, DEFAULT_QUEUE, check_name
from mailfathom.jobs.schedules.cron import check_cron, latest_tick, next_tick, zone
from mailfathom.observability.logs import log_fields
from mailfathom.store.base import ScheduleDefinition, ScheduleRow

__all__ = [
    "ScheduleSpec",
    "Scheduler",
    "build_spec",
    "latest_tick",
    "next_tick",
    "tick_key",
]

logger = logging.getLogger(__name__)

#: Longest a scheduler waits before re-reading the schedules (to see new, paused
#: or resumed ones) when no tick is due sooner.
REFRESH_SECONDS = 5.0


@dataclass(frozen=True, slots=True)
class ScheduleSpec:
    """A schedule as declared with ``mf.schedule(...)``; ``payload`` is its encoded JSON text."""

    name: str
    cron: str
    timezone: str
    kind: str
    queue: str | None
    payload: str


def build_spec(
    queue: JobQueue,
    name: str,
    *,
    cron: str,
    kind: str,
    payload: Mapping[str, Any] | None,
    timezone: str,
    job_queue: str | None,
) -> ScheduleSpec:
    """Validate a declaration; every bad value gets a clear error naming it."""
    check_name("schedule name", name, longest=200)
    check_name("job kind", kind, longest=200)
    if job_queue is not None:
        check_name("queue", job_queue, longest=100)
    check_cron(cron)
    zone(timezone)
    text = queue.encode_payload(payload)  # the job payload rules; the same text each time
    return ScheduleSpec(
        name=name, cron=cron, timezone=timezone, kind=kind, queue=job_queue, payload=text
    )


def tick_key(name: str, tick: datetime) -> str:
    """The idempotency key of ``name``'s job for ``tick``: ``schedule:<name>:<ISO UTC>``."""
    return f"schedule:{name}:{tick.astimezone(UTC):%Y-%m-%dT%H:%M:%SZ}"


class Scheduler:
    """Enqueues each schedule's latest due tick; run by every worker."""

    def __init__(self, queue: JobQueue, clock: Clock) -> None:
        self._queue = queue
        self._store = queue.store.schedules
        self._registry = queue.registry
        self._clock = clock

    def check(self, specs: list[ScheduleSpec]) -> None:
        """Each schedule's kind obeys the rule of every enqueue
        (:meth:`~mailfathom.jobs.registry.Registry.check_enqueue`), checked once the app
        has registered its kinds (a worker's start, ``mf.schedules.sync()``): an app
        that registers kinds of its own does not schedule a kind it has no handler for."""
        for spec in specs:
            try:
                self._registry.check_enqueue(spec.kind)
            except InvalidInput as exc:
                raise InvalidInput(f"schedule {spec.name!r}: {exc}") from None

    def declare(self, specs: list[ScheduleSpec]) -> list[str]:
        """Write the declared schedules (unchanged ones are left alone); names written.
        Every one is checked first (:meth:`check`): a refused one writes nothing."""
        if not specs:
            return []
        self.check(specs)
        definitions = []
        for spec in specs:
            kind = self._registry.get(spec.kind)
            job_queue = spec.queue or (kind.queue if kind is not None else DEFAULT_QUEUE)
            definitions.append(
                ScheduleDefinition(
                    name=spec.name,
                    cron=spec.cron,
                    timezone=spec.timezone,
                    kind=spec.kind,
                    queue=job_queue,
                    payload=spec.payload,
                )
            )
        return self._store.declare_schedules(definitions, now=self._clock.now())

    def run_due(self) -> tuple[int, float]:
        """Enqueue every due tick; return how many jobs were created and the seconds
        until a tick may next be due."""
        now = self._clock.now()
        wait = REFRESH_SECONDS
        created = 0
        for schedule in self._store.list_schedules():
            if schedule["paused"]:
                continue
            try:
                created += self._fire(schedule, now)
                upcoming = next_tick(schedule["cron"], schedule["timezone"], now)
            except (InvalidInput, ValueError, KeyError) as exc:
                logger.error(
                    "schedule %r cannot be evaluated: %s",
                    schedule["name"],
                    exc,
                    extra=log_fields("schedule_invalid", schedule=schedule["name"], error=str(exc)),
                )
                continue
            wait = min(wait, (upcoming - now).total_seconds())
        return created, max(wait, 0.0) + 0.005

    def _fire(self, schedule: ScheduleRow, now: datetime) -> int:
        tick = latest_tick(schedule["cron"], schedule["timezone"], now)
        if tick <= schedule["not_before"]:
            return 0
        last = schedule["last_tick"]
        if last is not None and tick <= last:
            return 0
        kind = self._registry.get(schedule["kind"])
        fired = self._store.fire_schedule(
            schedule,
            tick=tick,
            idempotency_key=tick_key(schedule["name"], tick),
            max_attempts=kind.max_attempts if kind is not None else DEFAULT_MAX_ATTEMPTS,
            now=now,
        )
        if fired is None:
            return 0
        job, created = fired
        logger.info(
            "schedule=%s tick=%s job_id=%d kind=%s%s",
            schedule["name"],
            f"{tick:%Y-%m-%dT%H:%M:%SZ}",
            job["id"],
            job["kind"],
            "" if created else " (the job existed already)",
            extra=log_fields(
                "schedule_tick",
                schedule=schedule["name"],
                tick=f"{tick:%Y-%m-%dT%H:%M:%SZ}",
                job_id=job["id"],
                kind=job["kind"],
                created=created,
            ),
        )
        return 1 if created else 0
