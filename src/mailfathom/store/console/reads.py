"""What the database gauges and the health check read: a few read-only queries.

Internal. :meth:`ConsoleReads.snapshot` runs the ``metrics_*`` queries (and the
outbox's counts) on one reading cursor; :meth:`ConsoleReads.history` counts the
Succeeded and Dropped rows (the read that grows with history, run far less often);
:meth:`ConsoleReads.applied_migrations` lists the migration versions a database has,
for ``mailfathom health``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from mailfathom.store.database import Database
from mailfathom.store.workers.repository import WorkersRepository

__all__ = ["ConsoleReads", "Snapshot"]


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The database's numbers at ``now``."""

    now: datetime
    #: (state, queue) -> how many jobs.
    jobs: dict[tuple[str, str], int] = field(default_factory=dict)
    #: queue -> the earliest instant a claimable job of it became due.
    oldest_due: dict[str, datetime] = field(default_factory=dict)
    #: queue -> attempts lost to expired leases.
    lease_expiries: dict[str, int] = field(default_factory=dict)
    #: stage -> how many outgoing emails.
    emails: dict[str, int] = field(default_factory=dict)
    unknown_outcomes: int = 0
    workers_alive: int = 0


class ConsoleReads:
    """The read-only queries of the gauges and the health check, on one database."""

    def __init__(
        self, database: Database, *, clock_skew: timedelta, workers: WorkersRepository
    ) -> None:
        self.db = database
        #: A worker is alive until ``clock_skew`` after its lease would have ended.
        self.clock_skew = clock_skew
        self._workers = workers

    def snapshot(self, now: datetime) -> Snapshot:
        """Read every gauge's number in one go (a handful of statements on one cursor)."""
        db, queries = self.db, self.db.queries
        stamp = db.time_param(now)
        cutoff = db.time_param(now - self.clock_skew)
        with db.reading() as cur:
            cur.execute(queries["metrics_jobs"])
            jobs = {(row["state"], row["queue"]): int(row["n"]) for row in cur.fetchall()}
            cur.execute(queries["metrics_oldest_due"], {"now": stamp})
            oldest: dict[str, datetime] = {}
            for row in cur.fetchall():
                moment = db.time_value(row["oldest"])
                if moment is not None:
                    oldest[row["queue"]] = moment
            cur.execute(queries["metrics_lease_expiries"])
            expiries = {row["queue"]: int(row["n"]) for row in cur.fetchall()}
            cur.execute(queries["count_emails"])
            emails = {row["stage"]: int(row["n"]) for row in cur.fetchall()}
            cur.execute(queries["count_unknown_emails"], {"lease_cutoff": cutoff})
            unknown_row = cur.fetchone()
        alive = 0
        for worker in self._workers.list_workers():
            limit = timedelta(seconds=worker["lease_seconds"]) + self.clock_skew
            if now - worker["last_heartbeat_at"] <= limit:
                alive += 1
        return Snapshot(
            now=now,
            jobs=jobs,
            oldest_due=oldest,
            lease_expiries=expiries,
            emails=emails,
            unknown_outcomes=int(unknown_row["n"]) if unknown_row is not None else 0,
            workers_alive=alive,
        )

    def history(self) -> dict[tuple[str, str], int]:
        """(state, queue) -> how many Succeeded and Dropped jobs (every such row is read)."""
        with self.db.reading() as cur:
            cur.execute(self.db.queries["metrics_jobs_history"])
            return {(row["state"], row["queue"]): int(row["n"]) for row in cur.fetchall()}

    def applied_migrations(self) -> list[int]:
        """The migration versions the database records as applied (raises StoreError when
        it cannot be read, e.g. a database never migrated)."""
        with self.db.reading() as cur:
            cur.execute(self.db.queries["metrics_migrations"])
            return [int(row["version"]) for row in cur.fetchall()]
