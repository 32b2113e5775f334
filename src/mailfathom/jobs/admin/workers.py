"""``mf.workers``: who is working — every registered worker, alive or dead.

Internal: not part of the public API (:mod:`mailfathom` lists the public modules).

A worker registers when it starts and refreshes its row with every heartbeat
(a third of its lease). One whose heartbeat is older than its lease plus the
clock-skew margin is dead: it was killed or lost the database, and its jobs are
claimable again (the margin keeps a viewer whose clock runs ahead from calling
a live worker dead). A worker
that stops cleanly removes its row; dead rows are forgotten after a day.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass
from datetime import datetime, timedelta

from mailfathom.clock import DEFAULT_CLOCK_SKEW, Clock
from mailfathom.errors import InvalidInput
from mailfathom.store.base import WorkerRow
from mailfathom.store.workers.protocol import WorkersStore

__all__ = ["WorkerInfo", "Workers"]


@dataclass(frozen=True, slots=True)
class WorkerInfo:
    """One registered worker: where it runs, what it takes, and when it last spoke.

    ``queues`` None means every queue; ``kinds`` are the kinds it has handlers for.
    """

    id: str
    host: str
    pid: int
    queues: tuple[str, ...] | None
    kinds: tuple[str, ...]
    concurrency: int
    lease: timedelta
    started_at: datetime
    last_heartbeat_at: datetime
    alive: bool

    @classmethod
    def from_row(
        cls,
        row: WorkerRow,
        *,
        now: datetime,
        dead_after: timedelta | None,
        clock_skew: timedelta = DEFAULT_CLOCK_SKEW,
    ) -> WorkerInfo:
        """Build from a stored row; dead when silent longer than ``dead_after`` (by
        default its lease plus ``clock_skew``: when its jobs become claimable again)."""
        lease = timedelta(seconds=row["lease_seconds"])
        limit = dead_after if dead_after is not None else lease + clock_skew
        return cls(
            id=row["id"],
            host=row["host"],
            pid=row["pid"],
            queues=None if row["queues"] is None else tuple(row["queues"]),
            kinds=tuple(row["kinds"]),
            concurrency=row["concurrency"],
            lease=lease,
            started_at=row["started_at"],
            last_heartbeat_at=row["last_heartbeat_at"],
            alive=now - row["last_heartbeat_at"] <= limit,
        )


class Workers:
    """The operator's view of the worker registry."""

    def __init__(
        self, store: WorkersStore, clock: Clock, *, clock_skew: timedelta = DEFAULT_CLOCK_SKEW
    ) -> None:
        self._store = store
        self._clock = clock
        self._clock_skew = clock_skew

    def list(self, *, dead_after: timedelta | float | None = None) -> builtins.list[WorkerInfo]:
        """Every registered worker, oldest first, dead ones included (``alive`` False).

        A worker is dead when its last heartbeat is older than ``dead_after``
        (default: its own lease plus the ``clock_skew`` margin, after which its jobs
        return to the queue).
        """
        if dead_after is not None and not isinstance(dead_after, timedelta):
            if isinstance(dead_after, bool) or not isinstance(dead_after, (int, float)):
                raise InvalidInput(f"dead_after must be seconds or a timedelta, not {dead_after!r}")
            dead_after = timedelta(seconds=dead_after)
        if dead_after is not None and dead_after <= timedelta(0):
            raise InvalidInput("dead_after must be positive")
        now = self._clock.now()
        return [
            WorkerInfo.from_row(row, now=now, dead_after=dead_after, clock_skew=self._clock_skew)
            for row in self._store.list_workers()
        ]
