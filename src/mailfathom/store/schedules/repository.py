"""The schedules repository: recurring schedules and the jobs their ticks enqueue.

Internal. Runs the dialect's named queries (``schedules.sql``, ``jobs.sql``'s
``insert_job``) and converts values through the
:class:`~mailfathom.store.database.Database`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from mailfathom.store.base import JobRow, ScheduleDefinition, ScheduleRow
from mailfathom.store.database import Database
from mailfathom.store.jobs.rows import JobRows

__all__ = ["SchedulesRepository"]

_SCHEDULE_TIMES = ("paused_at", "not_before", "last_tick", "created_at", "updated_at")


class SchedulesRepository:
    """Schedules: declared, listed, paused and resumed, deleted, and fired once per tick."""

    def __init__(self, database: Database, *, rows: JobRows) -> None:
        self.db = database
        self._q = database.queries
        self._job = rows.job

    # -- recurring schedules -----------------------------------------------------------

    def declare_schedules(
        self, schedules: Sequence[ScheduleDefinition], *, now: datetime
    ) -> list[str]:
        """Upsert every definition; unchanged ones write nothing."""
        written: list[str] = []
        stamp = self.db.time_param(now)
        with self.db.transaction() as cur:
            for schedule in schedules:
                cur.execute(
                    self._q["upsert_schedule"],
                    {
                        "name": schedule.name,
                        "cron": schedule.cron,
                        "timezone": schedule.timezone,
                        "kind": schedule.kind,
                        "queue": schedule.queue,
                        "payload": schedule.payload,
                        "now": stamp,
                    },
                )
                if cur.fetchone() is not None:
                    written.append(schedule.name)
        return written

    def list_schedules(self) -> list[ScheduleRow]:
        """Every schedule, by name."""
        with self.db.reading() as cur:
            cur.execute(self._q["list_schedules"], {})
            return [self._schedule(row) for row in cur.fetchall()]

    def get_schedule(self, name: str) -> ScheduleRow | None:
        """The schedule, or None."""
        with self.db.reading() as cur:
            cur.execute(self._q["get_schedule"], {"name": name})
            row = cur.fetchone()
        return None if row is None else self._schedule(row)

    def pause_schedule(
        self, name: str, *, actor: str, reason: str | None, now: datetime
    ) -> ScheduleRow | None:
        """Pause it if it runs."""
        with self.db.transaction() as cur:
            cur.execute(
                self._q["pause_schedule"],
                {"name": name, "actor": actor, "reason": reason, "now": self.db.time_param(now)},
            )
            row = cur.fetchone()
        return None if row is None else self._schedule(row)

    def resume_schedule(self, name: str, *, now: datetime) -> ScheduleRow | None:
        """Resume it if it is paused."""
        with self.db.transaction() as cur:
            cur.execute(self._q["resume_schedule"], {"name": name, "now": self.db.time_param(now)})
            row = cur.fetchone()
        return None if row is None else self._schedule(row)

    def delete_schedule(self, name: str) -> bool:
        """Delete it; False when absent."""
        with self.db.transaction() as cur:
            cur.execute(self._q["delete_schedule"], {"name": name})
            return cur.fetchone() is not None

    def fire_schedule(
        self,
        schedule: ScheduleRow,
        *,
        tick: datetime,
        idempotency_key: str,
        max_attempts: int,
        now: datetime,
    ) -> tuple[JobRow, bool] | None:
        """Advance the schedule past ``tick`` and enqueue its job, atomically."""
        stamp = self.db.time_param(now)
        with self.db.transaction() as cur:
            cur.execute(
                self._q["advance_schedule"],
                {
                    "name": schedule["name"],
                    "cron": schedule["cron"],
                    "timezone": schedule["timezone"],
                    "kind": schedule["kind"],
                    "tick": self.db.time_param(tick),
                },
            )
            current = cur.fetchone()
            if current is None:
                return None
            payload = self.db.json_value(current["payload"])
            cur.execute(
                self._q["insert_job"],
                {
                    "kind": current["kind"],
                    "queue": current["queue"],
                    "payload": json.dumps(payload, separators=(",", ":"), ensure_ascii=False),
                    "priority": 0,
                    "idempotency_key": idempotency_key,
                    "available_at": self.db.time_param(min(tick, now)),
                    "max_attempts": max_attempts,
                    "now": stamp,
                    "trace_context": None,  # a tick has no enqueuing span
                },
            )
            inserted = cur.fetchone()
            created = inserted is not None
            if inserted is None:
                cur.execute(self._q["job_by_key"], {"idempotency_key": idempotency_key})
                inserted = cur.fetchone()
            job = self._job(inserted)
            cur.execute(
                self._q["set_schedule_job"], {"name": schedule["name"], "job_id": job["id"]}
            )
        return job, created

    def _schedule(self, row: Any) -> ScheduleRow:
        schedule: dict[str, Any] = dict(row)
        for key in _SCHEDULE_TIMES:
            schedule[key] = self.db.time_value(schedule[key])
        schedule["payload"] = self.db.json_value(schedule["payload"])
        schedule["paused"] = bool(schedule["paused"])
        return schedule  # type: ignore[return-value]
