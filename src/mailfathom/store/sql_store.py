"""The store: a small facade over the repositories of one database.

Internal. ``SqlStore`` opens nothing itself: it composes, on one
:class:`~mailfathom.store.database.Database` (the SQLite or PostgreSQL one, where the
dialects differ), one repository per concern — ``jobs``, ``claims``, ``workers``,
``schedules``, ``controls``, ``flow``, ``retention``, ``console`` and the outbox's
``outbox``, ``outbox_moves`` and ``outbox_attempts``, and ``suppressions`` — and owns the database's
lifecycle (migrate, back up, wait for jobs, close). Callers use the repository they need.
"""

from __future__ import annotations

from datetime import timedelta

from mailfathom.clock import DEFAULT_CLOCK_SKEW, Clock
from mailfathom.store.claims.repository import ClaimsRepository
from mailfathom.store.console.reads import ConsoleReads
from mailfathom.store.controls.repository import ControlsRepository
from mailfathom.store.database import Database
from mailfathom.store.flow.repository import FlowClaims
from mailfathom.store.jobs.repository import JobsRepository
from mailfathom.store.jobs.rows import JobRows
from mailfathom.store.migrate import load_migrations
from mailfathom.store.outbox.attempts import OutboxAttempts
from mailfathom.store.outbox.moves import OutboxMoves
from mailfathom.store.outbox.records import OutboxRecords
from mailfathom.store.retention.repository import RetentionStore
from mailfathom.store.schedules.repository import SchedulesRepository
from mailfathom.store.suppressions.repository import SuppressionsRepository
from mailfathom.store.workers.repository import WorkersRepository

__all__ = ["SqlStore"]


class SqlStore:
    """The repositories of one database, and that database's lifecycle."""

    def __init__(
        self,
        database: Database,
        *,
        clock_skew: timedelta = DEFAULT_CLOCK_SKEW,
        enqueue_timeout: float | None = None,
        database_clock: Clock | None = None,
    ) -> None:
        self.db = database
        self.dialect = database.dialect
        #: PostgreSQL runs writers side by side; SQLite has one writer at a time.
        self.parallel_writes = database.dialect == "postgresql"
        #: A lease is expired only once ``lease_expires_at + clock_skew <= now``.
        self.clock_skew = clock_skew
        rows = JobRows(database)
        #: Flow control: limit definitions and the limited claim.
        #: Rate windows are judged on the database's clock, or on ``database_clock``.
        self.flow = FlowClaims(database, database_clock=database_clock)
        #: Enqueue, reads of jobs and their history, audited operator moves.
        self.jobs = JobsRepository(
            database, flow=self.flow, rows=rows, enqueue_timeout=enqueue_timeout
        )
        #: Claims, leases and outcomes (what a worker asks).
        self.claims = ClaimsRepository(database, flow=self.flow, rows=rows, clock_skew=clock_skew)
        #: The registry of running workers.
        self.workers = WorkersRepository(database)
        #: Recurring schedules.
        self.schedules = SchedulesRepository(database, rows=rows)
        #: Operator controls: paused queues.
        self.controls = ControlsRepository(database)
        #: Retention: the pruner lease, compaction and deletion in batches.
        self.retention = RetentionStore(database, clock_skew=clock_skew)
        #: The gauges' and the health check's reads.
        self.console = ConsoleReads(database, clock_skew=clock_skew, workers=self.workers)
        #: Outgoing emails: recorded, read and listed.
        self.outbox = OutboxRecords(database, clock_skew=clock_skew)
        #: Operator moves on outgoing emails.
        self.outbox_moves = OutboxMoves(self.outbox)
        #: Delivery attempts.
        self.outbox_attempts = OutboxAttempts(self.outbox)
        #: The suppression list: addresses never sent to again.
        self.suppressions = SuppressionsRepository(database)

    # -- lifecycle ---------------------------------------------------------------------

    def migrate(self) -> list[str]:
        """Apply pending migrations; returns the names applied now."""
        return self.db.apply_migrations(load_migrations(self.dialect))

    def close(self) -> None:
        """Release every connection."""
        self.db.close()

    def backup(self, target: str) -> None:
        """Copy the database to the new file ``target`` (SQLite; PostgreSQL refuses and
        points at ``pg_dump``)."""
        self.db.backup(target)

    def reserve_connections(self, count: int) -> None:
        """Let at least ``count`` calls hold a connection at once (PostgreSQL's pool
        grows to it; SQLite opens a connection per thread and changes nothing)."""
        self.db.reserve_connections(count)

    def wait_for_jobs(self, timeout: float) -> bool:
        """Block until jobs may have arrived, or ``timeout`` seconds pass."""
        return self.db.wait_for_jobs(timeout)
