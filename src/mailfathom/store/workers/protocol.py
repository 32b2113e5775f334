"""The ``WorkersStore`` protocol: what callers ask of the workers repository.

Internal. :class:`~mailfathom.store.workers.repository.WorkersRepository` implements it for
every dialect; callers depend on this protocol, not on the class.
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from mailfathom.store.base import WorkerRegistration, WorkerRow

__all__ = ["WorkersStore"]


class WorkersStore(Protocol):
    """The registry of running workers."""

    def heartbeat(self, worker: WorkerRegistration, *, now: datetime) -> None:
        """Register ``worker`` or refresh its heartbeat (never dated before its start).

        Leases are renewed apart, by :meth:`renew_leases`, so that a registry failure
        never costs a running job its lease.
        """
        ...

    def deregister_worker(self, worker_id: str) -> None:
        """Remove a worker that stopped cleanly from the registry."""
        ...

    def list_workers(self) -> list[WorkerRow]:
        """Every registered worker, oldest first, the dead ones included."""
        ...

    def prune_workers(self, *, before: datetime) -> int:
        """Forget workers whose last heartbeat is older than ``before``; count them."""
        ...
