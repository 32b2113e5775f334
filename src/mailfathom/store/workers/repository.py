"""The workers repository: the registry of running workers and their heartbeats.

Internal. Runs the dialect's named queries (``workers.sql``) and converts values
through the :class:`~mailfathom.store.database.Database`.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from mailfathom.store.base import WorkerRegistration, WorkerRow
from mailfathom.store.database import Database

__all__ = ["WorkersRepository"]


class WorkersRepository:
    """Registered workers: registration and heartbeats, listing, pruning the silent."""

    def __init__(self, database: Database) -> None:
        self.db = database
        self._q = database.queries

    # -- the worker registry -----------------------------------------------------------

    def heartbeat(self, worker: WorkerRegistration, *, now: datetime) -> None:
        """Upsert the worker's registry row (leases are renewed apart: ``renew_leases``).

        A ``now`` before the worker's ``started_at`` (a clock stepped back) records
        ``started_at`` as its heartbeat.
        """
        with self.db.transaction() as cur:
            cur.execute(
                self._q["upsert_worker"],
                {
                    "id": worker.id,
                    "host": worker.host,
                    "pid": worker.pid,
                    "queues": None
                    if worker.queues is None
                    else self.db.list_param(list(worker.queues)),
                    "kinds": self.db.list_param(list(worker.kinds)),
                    "concurrency": worker.concurrency,
                    "lease_seconds": worker.lease_seconds,
                    "started_at": self.db.time_param(worker.started_at),
                    "now": self.db.time_param(now),
                },
            )

    def deregister_worker(self, worker_id: str) -> None:
        """Delete the worker's row."""
        with self.db.transaction() as cur:
            cur.execute(self._q["delete_worker"], {"id": worker_id})

    def list_workers(self) -> list[WorkerRow]:
        """Every registered worker, oldest first."""
        with self.db.reading() as cur:
            cur.execute(self._q["list_workers"], {})
            rows = cur.fetchall()
        workers = []
        for row in rows:
            worker: dict[str, Any] = dict(row)
            worker["queues"] = _json_list(worker["queues"])
            worker["kinds"] = _json_list(worker["kinds"])
            worker["lease_seconds"] = float(worker["lease_seconds"])
            worker["started_at"] = self.db.time_value(worker["started_at"])
            worker["last_heartbeat_at"] = self.db.time_value(worker["last_heartbeat_at"])
            workers.append(worker)
        return workers  # type: ignore[return-value]

    def prune_workers(self, *, before: datetime) -> int:
        """Delete workers silent since before ``before``."""
        with self.db.transaction() as cur:
            cur.execute(self._q["prune_workers"], {"before": self.db.time_param(before)})
            return max(cur.rowcount, 0)


def _json_list(stored: Any) -> list[Any] | None:
    if stored is None:
        return None
    value: list[Any] = json.loads(stored) if isinstance(stored, str) else list(stored)
    return value
