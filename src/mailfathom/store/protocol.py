"""The ``Store`` protocol: the facade over one database's repositories.

Internal. Each concern has its own small protocol next to its repository
(:class:`~mailfathom.store.jobs.protocol.JobsStore`,
:class:`~mailfathom.store.claims.protocol.ClaimsStore` …); this one only names them,
with what belongs to the database as a whole.
"""

from __future__ import annotations

from typing import Protocol

from mailfathom.store.claims.protocol import ClaimsStore
from mailfathom.store.controls.protocol import ControlsStore
from mailfathom.store.jobs.protocol import JobsStore
from mailfathom.store.schedules.protocol import SchedulesStore
from mailfathom.store.workers.protocol import WorkersStore

__all__ = ["Store"]


class Store(Protocol):
    """A database holding the queue, by concern."""

    dialect: str
    #: Whether writers run side by side (PostgreSQL) rather than one at a time (SQLite):
    #: the worker then records outcomes on a thread of its own, beside its claims.
    parallel_writes: bool

    @property
    def jobs(self) -> JobsStore:
        """Enqueue, reads of jobs and their history, audited operator moves."""
        ...

    @property
    def claims(self) -> ClaimsStore:
        """Claims, leases and outcomes."""
        ...

    @property
    def workers(self) -> WorkersStore:
        """The registry of running workers."""
        ...

    @property
    def schedules(self) -> SchedulesStore:
        """Recurring schedules."""
        ...

    @property
    def controls(self) -> ControlsStore:
        """Paused queues."""
        ...

    def migrate(self) -> list[str]:
        """Apply pending migrations (safe when several processes race); return their names."""
        ...

    def close(self) -> None:
        """Release every connection."""
        ...

    def reserve_connections(self, count: int) -> None:
        """Let at least ``count`` calls hold a connection at once without waiting for
        one another (a worker reserves one per thread that touches the database)."""
        ...

    def wait_for_jobs(self, timeout: float) -> bool:
        """Block until jobs may have arrived or ``timeout`` seconds pass; True when woken early.

        Cheap when idle: PostgreSQL waits on ``LISTEN``; SQLite watches the file's
        ``data_version``, which changes whenever another connection commits.
        """
        ...
