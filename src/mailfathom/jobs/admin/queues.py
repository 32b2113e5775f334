"""``mf.queues``: pause and resume queues fleet-wide, and see which are paused.

Internal: not part of the public API (:mod:`mailfathom` lists the public modules).

A pause is a row in ``mf_paused_queues``; every claim statement leaves those
queues out, so every worker on every machine stops taking their jobs at its
next claim (within its poll interval, a second by default) without being told.
Enqueueing goes on; running jobs finish. Each pause and resume is audited.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass
from datetime import datetime

from mailfathom.clock import Clock
from mailfathom.errors import IllegalTransition
from mailfathom.jobs.registry import check_name
from mailfathom.store.base import PausedQueueRow, QueueEventRow
from mailfathom.store.controls.protocol import ControlsStore
from mailfathom.validate import check_actor, check_limit

__all__ = ["PausedQueue", "QueueEvent", "QueueSummary", "Queues"]


@dataclass(frozen=True, slots=True)
class PausedQueue:
    """A queue no worker claims from until it is resumed: who paused it, when, why."""

    queue: str
    paused_at: datetime
    actor: str
    reason: str | None

    @classmethod
    def from_row(cls, row: PausedQueueRow) -> PausedQueue:
        """Build from a stored row."""
        return cls(row["queue"], row["paused_at"], row["actor"], row["reason"])


@dataclass(frozen=True, slots=True)
class QueueEvent:
    """One audited pause or resume of a queue."""

    id: int
    queue: str
    at: datetime
    actor: str
    action: str
    reason: str | None

    @classmethod
    def from_row(cls, row: QueueEventRow) -> QueueEvent:
        """Build from a stored audit row."""
        return cls(row["id"], row["queue"], row["at"], row["actor"], row["action"], row["reason"])


@dataclass(frozen=True, slots=True)
class QueueSummary:
    """A queue as the console lists it: its unfinished jobs, and its pause if paused."""

    queue: str
    pending: int
    held: int
    running: int
    paused: PausedQueue | None


class Queues:
    """Pause, resume and list queues."""

    def __init__(self, store: ControlsStore, clock: Clock) -> None:
        self._store = store
        self._clock = clock

    def paused(self) -> builtins.list[PausedQueue]:
        """Every paused queue, by name."""
        return [PausedQueue.from_row(row) for row in self._store.paused_queues()]

    def list(self) -> builtins.list[QueueSummary]:
        """Every queue with unfinished jobs or a pause, by name."""
        paused = {p.queue: p for p in self.paused()}
        found = {row["queue"]: row for row in self._store.queue_summary()}
        return [
            QueueSummary(
                queue=name,
                pending=found.get(name, {}).get("pending", 0),
                held=found.get(name, {}).get("held", 0),
                running=found.get(name, {}).get("running", 0),
                paused=paused.get(name),
            )
            for name in sorted(set(found) | set(paused))
        ]

    def pause(self, queue: str, *, actor: str, reason: str | None = None) -> PausedQueue:
        """Stop every worker claiming from ``queue`` (enqueueing goes on); audited.

        Refused with :class:`IllegalTransition` if it is paused already.
        """
        name = check_name("queue", queue, longest=100)
        check_actor(actor, reason)
        row = self._store.pause_queue(name, actor=actor, reason=reason, now=self._clock.now())
        if row is None:
            raise IllegalTransition(
                f"queue {name!r} is paused already: resume it first; nothing changed"
            )
        return PausedQueue.from_row(row)

    def resume(self, queue: str, *, actor: str, reason: str | None = None) -> PausedQueue:
        """Let workers claim from ``queue`` again (idle ones are woken); audited. Returns
        the pause it ended. Refused with :class:`IllegalTransition` if it is not paused."""
        name = check_name("queue", queue, longest=100)
        check_actor(actor, reason)
        row = self._store.resume_queue(name, actor=actor, reason=reason, now=self._clock.now())
        if row is None:
            raise IllegalTransition(f"queue {name!r} is not paused; nothing changed")
        return PausedQueue.from_row(row)

    def events(self, queue: str | None = None, *, limit: int = 100) -> builtins.list[QueueEvent]:
        """Pauses and resumes, newest first: of ``queue``, or of every queue."""
        check_limit(limit)
        name = None if queue is None else check_name("queue", queue, longest=100)
        return [
            QueueEvent.from_row(row) for row in self._store.queue_events(queue=name, limit=limit)
        ]
