"""What the database gauges and the health check read: a few read-only queries.

Internal. :meth:`ConsoleReads.snapshot` runs the ``metrics_*`` queries (and the
outbox's counts) on one reading cursor; :meth:`ConsoleReads.history` counts the
Succeeded and Dropped rows (the read that grows with history, run far less often);
:meth:`ConsoleReads.applied_migrations` lists the migration versions a database has,
for ``mailfathom health``; :meth:`ConsoleReads.unhandled_kinds` counts the due jobs of
kinds no live worker handles (health, the console and the gauges).
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
    #: kind -> due jobs of it that no live worker handles (see
    #: :meth:`ConsoleReads.unhandled_kinds`); empty while no worker is alive.
    unhandled: dict[str, int] = field(default_factory=dict)


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
        alive = self._live_kinds(now)
        return Snapshot(
            now=now,
            jobs=jobs,
            oldest_due=oldest,
            lease_expiries=expiries,
            emails=emails,
            unknown_outcomes=int(unknown_row["n"]) if unknown_row is not None else 0,
            workers_alive=len(alive),
            unhandled=self._unhandled(now, alive),
        )

    def unhandled_kinds(self, now: datetime) -> dict[str, int]:
        """Kind -> how many of its jobs are due at ``now`` (Pending, not held, due) while
        no live worker has a handler for it: they wait, no attempt spent, until a worker
        that knows the kind starts (a worker claims only its own kinds). Empty while no
        worker is alive (then nothing runs at all, which ``mailfathom_workers_alive``
        tells), and for every kind a live worker handles, whatever queue it serves."""
        return self._unhandled(now, self._live_kinds(now))

    def _live_kinds(self, now: datetime) -> list[tuple[str, ...]]:
        """The kinds of each live worker (alive until ``clock_skew`` after its lease)."""
        alive: list[tuple[str, ...]] = []
        for worker in self._workers.list_workers():
            limit = timedelta(seconds=worker["lease_seconds"]) + self.clock_skew
            if now - worker["last_heartbeat_at"] <= limit:
                alive.append(tuple(worker["kinds"]))
        return alive

    def _unhandled(self, now: datetime, alive: list[tuple[str, ...]]) -> dict[str, int]:
        if not alive:
            return {}
        handled = sorted({kind for kinds in alive for kind in kinds})
        params = {"now": self.db.time_param(now), "kinds": self.db.list_param(handled)}
        with self.db.reading() as cur:
            cur.execute(self.db.queries["metrics_unhandled_kinds"], params)
            return {row["kind"]: int(row["n"]) for row in cur.fetchall()}

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
