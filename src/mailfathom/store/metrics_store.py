"""What the database gauges and the health check read: a few read-only queries.

Internal. :func:`read_snapshot` runs the ``metrics_*`` queries (and the outbox's
counts) on one reading cursor; :func:`read_history` counts the Succeeded and Dropped
rows (the read that grows with history, run far less often);
:func:`applied_migrations` lists the migration versions a database has, for
``mailfathom health``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from mailfathom.store.sql_store import SqlStore

__all__ = ["Snapshot", "applied_migrations", "read_history", "read_snapshot"]


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


def read_snapshot(store: SqlStore, now: datetime) -> Snapshot:
    """Read every gauge's number in one go (a handful of statements on one cursor)."""
    db, queries = store.db, store.db.queries
    stamp = db.time_param(now)
    cutoff = db.time_param(now - store.clock_skew)
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
    for worker in store.list_workers():
        limit = timedelta(seconds=worker["lease_seconds"]) + store.clock_skew
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


def read_history(store: SqlStore) -> dict[tuple[str, str], int]:
    """(state, queue) -> how many Succeeded and Dropped jobs (every such row is read)."""
    with store.db.reading() as cur:
        cur.execute(store.db.queries["metrics_jobs_history"])
        return {(row["state"], row["queue"]): int(row["n"]) for row in cur.fetchall()}


def applied_migrations(store: SqlStore) -> list[int]:
    """The migration versions the database records as applied (raises StoreError when
    it cannot be read, e.g. a database never migrated)."""
    with store.db.reading() as cur:
        cur.execute(store.db.queries["metrics_migrations"])
        return [int(row["version"]) for row in cur.fetchall()]
