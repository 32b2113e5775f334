"""Retention's storage: the pruner lease, and compaction or deletion in small batches.

Internal. Every batch is one short transaction of at most ``limit`` rows, so a claim
never waits long behind the pruner; on PostgreSQL each batch first takes the schema's
pruner advisory lock (``pg_try_advisory_xact_lock``) and does nothing when another
pruner holds it. One pass at a time across the fleet is the lease row's job
(``mf_pruner``), which also keeps what the last pass did.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from mailfathom.clock import DEFAULT_CLOCK_SKEW
from mailfathom.store.database import Database

__all__ = ["Batch", "PrunerState", "RetentionStore"]

#: The dry runs with a statement of their own; every other batch counts what it could
#: prune (``count_prunable_<table>``).
_OWN_COUNTS = frozenset({"count_expire_emails"})

#: Which rows a job or email batch takes: every one, only keyless ones, only keyed ones.
Only = Literal["all", "keyless", "keyed"]
Table = Literal["jobs", "emails", "job_events", "email_events"]
#: ``expire``: settle Recorded emails past their expiry (Refused, "expired").
Action = Literal["compact", "delete", "expire"]


@dataclass(frozen=True, slots=True)
class Batch:
    """One kind of pruning work: rows of ``table`` in ``state`` finished before ``cutoff``.

    ``kind`` narrows jobs to one kind; with None, the kinds in ``except_kinds`` (which
    have rules of their own) are left out."""

    table: Table
    action: Action
    state: str
    cutoff: datetime
    kind: str | None = None
    except_kinds: tuple[str, ...] = ()
    only: Only = "all"


@dataclass(frozen=True, slots=True)
class PrunerState:
    """Who holds the pruner lease, and when the last pass started and ended, with its report."""

    holder: str | None
    lease_until: datetime | None
    last_started_at: datetime | None
    last_finished_at: datetime | None
    last_report: dict[str, Any] | None


class RetentionStore:
    """Runs the ``retention.sql`` blocks of one database."""

    def __init__(self, database: Database, *, clock_skew: timedelta = DEFAULT_CLOCK_SKEW) -> None:
        self.db = database
        self.clock_skew = clock_skew
        self._q = database.queries
        self._caps = database.capabilities

    # -- the lease ---------------------------------------------------------------------

    def acquire(self, holder: str, *, now: datetime, lease: timedelta) -> bool:
        """Take the pruner lease for ``lease``; False while another holder's is live."""
        with self.db.transaction() as cur:
            cur.execute(
                self._q["acquire_pruner"],
                {
                    "holder": holder,
                    "now": self.db.time_param(now),
                    "lease_until": self.db.time_param(now + lease),
                    "lease_cutoff": self.db.time_param(now - self.clock_skew),
                },
            )
            return cur.fetchone() is not None

    def renew(self, holder: str, *, now: datetime, lease: timedelta) -> bool:
        """Extend the lease ``holder`` holds; False if it was lost."""
        with self.db.transaction() as cur:
            cur.execute(
                self._q["renew_pruner"],
                {"holder": holder, "lease_until": self.db.time_param(now + lease)},
            )
            return cur.fetchone() is not None

    def finish(self, holder: str, *, now: datetime, report: dict[str, Any]) -> bool:
        """Give the lease back, keeping ``report`` as what the last pass did."""
        with self.db.transaction() as cur:
            cur.execute(
                self._q["finish_pruner"],
                {
                    "holder": holder,
                    "now": self.db.time_param(now),
                    "report": json.dumps(report, separators=(",", ":")),
                },
            )
            return cur.fetchone() is not None

    def state(self) -> PrunerState:
        """The lease and the last pass, as stored."""
        with self.db.reading() as cur:
            cur.execute(self._q["pruner_state"], {})
            row = cur.fetchone()
        if row is None:  # pragma: no cover - the migration inserts the row
            return PrunerState(None, None, None, None, None)
        report = row["last_report"]
        if isinstance(report, (str, bytes)):
            report = json.loads(report)
        return PrunerState(
            holder=row["holder"],
            lease_until=self.db.time_value(row["lease_until"]),
            last_started_at=self.db.time_value(row["last_started_at"]),
            last_finished_at=self.db.time_value(row["last_finished_at"]),
            last_report=report,
        )

    # -- batches -----------------------------------------------------------------------

    def count(self, batch: Batch) -> int:
        """How many rows ``batch`` would take in all (a dry run)."""
        with self.db.reading() as cur:
            name = f"count_{batch.action}_{batch.table}"
            if name not in _OWN_COUNTS:
                name = f"count_prunable_{batch.table}"
            cur.execute(self._q[name], self._params(batch, 0, None))
            return int(cur.fetchone()["n"])

    def run(self, batch: Batch, *, limit: int, now: datetime) -> int | None:
        """Prune up to ``limit`` rows of ``batch`` in one transaction; how many it took.

        The transaction commits without waiting for its own flush (SQLite's
        ``synchronous = NORMAL``, PostgreSQL's ``synchronous_commit = off``): pruning a
        row again after a power cut is harmless, and a claim never queues behind the
        pruner's fsync. None: another pruner is inside a batch right now (PostgreSQL's
        advisory lock)."""
        params = self._params(batch, limit, now)
        compacting_jobs = batch.table == "jobs" and batch.action == "compact"
        repack = compacting_jobs and self._caps.repack_jobs
        pruning = getattr(self.db, "pruning", None)
        with pruning(repack=repack) if pruning is not None else self.db.transaction() as cur:
            lock = self._q["prune_lock"] if self._caps.advisory_locks else None
            if lock is not None:
                cur.execute(lock, {})
                if not cur.fetchone()["locked"]:
                    return None
            cur.execute(self._q[f"{batch.action}_{batch.table}"], params)
            ids = [row["id"] for row in cur.fetchall()]
            if ids and compacting_jobs:
                listed = self.db.list_param(ids)
                cur.execute(self._q["compact_attempts"], {"ids": listed})
                if repack:
                    for step in ("repack_copy", "repack_jobs", "repack_restore", "repack_drop"):
                        cur.execute(self._q[step], {"ids": listed} if step == "repack_copy" else {})
            return len(ids)

    def claims_waiting(self, now: datetime) -> bool:
        """Whether a due job waits to be claimed (in a queue that is not paused): the
        claimers have work, so the pruner keeps to its busy duty cycle. A read of the
        claim index's first entry; it takes no lock."""
        with self.db.reading() as cur:
            cur.execute(self._q["claims_waiting"], {"now": self.db.time_param(now)})
            return bool(cur.fetchone()["waiting"])

    def _params(self, batch: Batch, limit: int, now: datetime | None) -> dict[str, Any]:
        return {
            "state": batch.state,
            "stage": batch.state,
            "cutoff": self.db.time_param(batch.cutoff),
            "kind": batch.kind,
            "except_kinds": self.db.list_param(list(batch.except_kinds)),
            "only": batch.only,
            "limit": limit,
            "now": self.db.time_param(now),
        }

    # -- what is there -----------------------------------------------------------------

    def counts(self) -> dict[str, dict[str, tuple[int, int]]]:
        """``{"jobs": {state: (rows, compacted)}, "emails": {stage: (rows, compacted)}}``."""
        found: dict[str, dict[str, tuple[int, int]]] = {}
        with self.db.reading() as cur:
            for table in ("jobs", "emails"):
                cur.execute(self._q[f"count_{table}_compacted"], {})
                found[table] = {
                    row["state"]: (int(row["n"]), int(row["compacted"])) for row in cur.fetchall()
                }
        return found

    def reclaim(self, pages: int) -> int:
        """Give up to ``pages`` free pages back to the file system (SQLite's incremental
        vacuum; PostgreSQL's autovacuum does this itself). How many were free before."""
        reclaim = getattr(self.db, "reclaim_space", None)
        return 0 if reclaim is None else int(reclaim(pages))
