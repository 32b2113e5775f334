"""The controls repository: paused queues and their audit trail, written once for every dialect.

Internal. Runs the
dialect's named queries (``jobs.sql``: ``pause_queue`` …) and converts values
through the :class:`~mailfathom.store.database.Database`. The claim queries read
``mf_paused_queues`` themselves, so a pause needs no worker to be told.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from mailfathom.store.base import PausedQueueRow, QueueEventRow
from mailfathom.store.database import Database

__all__ = ["ControlsRepository"]


class ControlsRepository:
    """Operator controls: queues paused and resumed fleet-wide, with their audit trail."""

    def __init__(self, database: Database) -> None:
        self.db = database
        self._q = database.queries
        self._caps = database.capabilities

    def paused_queues(self) -> list[PausedQueueRow]:
        """Every paused queue, by name."""
        with self.db.reading() as cur:
            cur.execute(self._q["paused_queues"])
            return [self._paused(row) for row in cur.fetchall()]

    def pause_queue(
        self, queue: str, *, actor: str, reason: str | None, now: datetime
    ) -> PausedQueueRow | None:
        """Pause ``queue`` with its audit row; None (nothing written) when already paused."""
        params = {"queue": queue, "now": self.db.time_param(now), "actor": actor}
        with self.db.transaction() as cur:
            cur.execute(self._q["pause_queue"], {**params, "reason": reason})
            row = cur.fetchone()
            if row is None:
                return None
            cur.execute(
                self._q["insert_queue_event"], {**params, "action": "pause", "reason": reason}
            )
            return self._paused(row)

    def resume_queue(
        self, queue: str, *, actor: str, reason: str | None, now: datetime
    ) -> PausedQueueRow | None:
        """Resume ``queue`` with its audit row and wake idle workers (``NOTIFY`` on
        PostgreSQL; SQLite's watchers see the commit); None when it was not paused."""
        params = {"queue": queue, "now": self.db.time_param(now), "actor": actor}
        with self.db.transaction() as cur:
            cur.execute(self._q["resume_queue"], {"queue": queue})
            row = cur.fetchone()
            if row is None:
                return None
            cur.execute(
                self._q["insert_queue_event"], {**params, "action": "resume", "reason": reason}
            )
            notify = self._q["notify_jobs"] if self._caps.notifies_workers else None
            if notify is not None:
                cur.execute(notify)
            return self._paused(row)

    def queue_events(self, *, queue: str | None, limit: int) -> list[QueueEventRow]:
        """Pauses and resumes, newest first (of ``queue``, or of every queue)."""
        with self.db.reading() as cur:
            cur.execute(self._q["queue_events"], {"queue": queue, "limit": limit})
            rows = [dict(row) for row in cur.fetchall()]
        for row in rows:
            row["at"] = self.db.time_value(row["at"])
        return rows  # type: ignore[return-value]

    def queue_summary(self) -> list[dict[str, Any]]:
        """Per queue with unfinished jobs: how many are due or delayed, held and running."""
        with self.db.reading() as cur:
            cur.execute(self._q["queue_names"])
            return [
                {
                    "queue": row["queue"],
                    "pending": int(row["pending"] or 0),
                    "held": int(row["held"] or 0),
                    "running": int(row["running"] or 0),
                }
                for row in cur.fetchall()
            ]

    def _paused(self, row: Any) -> PausedQueueRow:
        found: dict[str, Any] = dict(row)
        found["paused_at"] = self.db.time_value(found["paused_at"])
        return found  # type: ignore[return-value]
