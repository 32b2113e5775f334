"""The ``ControlsStore`` protocol: what callers ask of the controls repository.

Internal. :class:`~mailfathom.store.controls.repository.ControlsRepository` implements it for
every dialect; callers depend on this protocol, not on the class.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Protocol

from mailfathom.store.base import PausedQueueRow, QueueEventRow

__all__ = ["ControlsStore"]


class ControlsStore(Protocol):
    """Operator controls: queues paused and resumed fleet-wide."""

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
