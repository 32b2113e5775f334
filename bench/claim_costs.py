"""What a claim and a completion cost per job in the database, and what bounds them.

    python -m bench.claim_costs                       # both parts, 20,000 jobs
    python -m bench.claim_costs --part guards --jobs 5000 --json
    python -m bench.claim_costs --part stale --backlog 200000

**guards** (SQLite). The worker's claim cycle with no worker around it: on a fresh
migrated file holding ``--jobs`` due jobs, one connection repeats ``BEGIN
IMMEDIATE``, ``complete_jobs`` for the previous batch, ``claim_jobs`` for
``--batch`` more, ``COMMIT`` (WAL, ``synchronous = FULL``), until nothing is due,
and reports each step's microseconds per job. Then again on fresh copies of the
file with one of the schema's guards taken away each time (a trigger, the CHECK
constraints, a secondary index), and with all of them gone: what each guard costs
a job, and the floor under mailfathom's SQL on this machine. Only this benchmark's
copies lose them; the statements are the store's own.

**stale** (PostgreSQL). A claim of ``--batch`` out of ``--backlog`` due jobs in a
table whose statistics predate the enqueues (a scratch schema, autovacuum off for
its table), in transactions that are rolled back: as the store runs it (after
``plan_claims``) and without ``plan_claims``, then the same after ``ANALYZE``.

Figures are printed, never asserted (docs/benchmarks.md, *Where a job's time goes*;
docs/postgresql.md, *Schema and indexes*).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
from psycopg.rows import dict_row

from bench.pg_common import conditions, schema_url, scratch_schema
from mailfathom import MailFathom
from mailfathom.store.queries import load_queries

#: Each variant of the guards part: what it takes away from the shipped schema.
GUARDS: dict[str, list[str]] = {
    "as shipped": [],
    "without the state-move trigger": ["DROP TRIGGER mf_jobs_state_moves"],
    "without the stranded-email trigger": ["DROP TRIGGER mf_jobs_refuse_stranded_email"],
    "without CHECK constraints": ["PRAGMA ignore_check_constraints = ON"],
    "without mf_jobs_state": ["DROP INDEX mf_jobs_state"],
    "without mf_jobs_kind": ["DROP INDEX mf_jobs_kind"],
    "without mf_jobs_compactable": ["DROP INDEX mf_jobs_compactable"],
    "without mf_jobs_leases": ["DROP INDEX mf_jobs_leases"],
    "without mf_jobs_queue_claimable": ["DROP INDEX mf_jobs_queue_claimable"],
}
GUARDS["without all of these"] = [step for steps in GUARDS.values() for step in steps]
#: Any instant after the jobs became due: the statements compare it, nothing more.
_NOW = "2030-01-01T00:00:00.000000+00:00"


def _sqlite_cycle(path: Path, batch: int, undo: list[str]) -> dict[str, float]:
    """Drain ``path`` with claim cycles; microseconds per job for each step."""
    queries = load_queries("sqlite")
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    for statement in undo:
        conn.execute(statement)
    spent = {"complete": 0.0, "claim": 0.0, "commit": 0.0}
    held: list[list[int]] = []
    done = 0
    while True:
        conn.execute("BEGIN IMMEDIATE")
        began = time.perf_counter()
        if held:
            params = {"owner": "bench", "now": _NOW, "held": json.dumps(held)}
            conn.execute(queries["complete_jobs"], params).fetchall()
        completed = time.perf_counter()
        claim = {"owner": "bench", "limit": batch, "now": _NOW, "lease_until": _NOW}
        cursor = conn.execute(queries["claim_jobs"], claim)
        rows = cursor.fetchall()
        names = [column[0] for column in cursor.description or ()]
        claimed = time.perf_counter()
        conn.execute("COMMIT")
        spent["complete"] += completed - began
        spent["claim"] += claimed - completed
        spent["commit"] += time.perf_counter() - claimed
        done += len(held)
        if not rows:
            break
        at_id, at_attempts = names.index("id"), names.index("attempts")
        held = [[row[at_id], row[at_attempts]] for row in rows]
    conn.close()
    per_job = {step: seconds / done * 1e6 for step, seconds in spent.items()}
    per_job["total"] = sum(per_job.values())
    return per_job


def guards(jobs: int, batch: int) -> dict[str, dict[str, float]]:
    """The guards part: per-job microseconds of each step, per variant."""
    folder = Path(tempfile.mkdtemp(prefix="mf-claim-costs-"))
    try:
        source = folder / "source.db"
        with MailFathom(f"sqlite:///{source}") as app:
            app.migrate()
            for first in range(0, jobs, 1000):
                app.enqueue_many("bench.noop", [{} for _ in range(min(1000, jobs - first))])
        with sqlite3.connect(source) as conn:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # the copies get every job
        found: dict[str, dict[str, float]] = {}
        for name, undo in GUARDS.items():
            copy = folder / "copy.db"
            shutil.copyfile(source, copy)
            found[name] = _sqlite_cycle(copy, batch, undo)
            for leftover in folder.glob("copy.db*"):
                leftover.unlink()
        return found
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def stale(backlog: int, batch: int, runs: int) -> dict[str, float]:
    """The stale part: median milliseconds per claim, with and without ``plan_claims``,
    before and after ``ANALYZE``."""
    found: dict[str, float] = {}
    with scratch_schema("stale") as schema:
        url = schema_url(schema)
        with MailFathom(url) as app:
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute("ALTER TABLE mf_jobs SET (autovacuum_enabled = false)")
            for first in range(0, backlog, 1000):
                app.enqueue_many("bench.noop", [{} for _ in range(min(1000, backlog - first))])
            now = app.clock.now()
        queries = load_queries("postgresql")
        params = {
            "owner": "bench",
            "limit": batch,
            "now": now,
            "lease_until": now + timedelta(seconds=30),
        }
        with psycopg.connect(url, row_factory=dict_row) as conn:
            for statistics_state in ("stale statistics", "after ANALYZE"):
                if statistics_state == "after ANALYZE":
                    conn.execute("ANALYZE mf_jobs")
                    conn.commit()
                for planned in (True, False):
                    times: list[float] = []
                    for _ in range(runs):
                        began = time.perf_counter()
                        if planned:
                            conn.execute(queries["plan_claims"])
                        conn.execute(queries["claim_jobs"], params).fetchall()
                        times.append(time.perf_counter() - began)
                        conn.rollback()
                    label = "as the store claims" if planned else "without plan_claims"
                    found[f"{statistics_state}, {label}"] = statistics.median(times) * 1000
    return found


def main(argv: list[str] | None = None) -> int:
    """Run the parts asked for; print a summary (or JSON)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=("guards", "stale", "both"), default="both")
    parser.add_argument("--jobs", type=int, default=20_000, help="jobs drained (guards)")
    parser.add_argument("--backlog", type=int, default=200_000, help="due jobs (stale)")
    parser.add_argument("--batch", type=int, default=100, help="jobs per claim")
    parser.add_argument("--runs", type=int, default=5, help="claims timed per case (stale)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    options = parser.parse_args(argv)
    report: dict[str, Any] = {}
    if options.part in ("guards", "both"):
        report["guards"] = guards(options.jobs, options.batch)
    if options.part in ("stale", "both"):
        report["stale"] = stale(options.backlog, options.batch, options.runs)
        report["conditions"] = conditions()
    if options.json:
        json.dump(report, sys.stdout, indent=2)
        print()
        return 0
    if "guards" in report:
        print(f"SQLite claim cycle, {options.jobs:,} jobs, {options.batch} per claim (µs per job):")
        print("| schema | complete | claim | commit | total |\n|---|---:|---:|---:|---:|")
        for name, cost in report["guards"].items():
            steps = " | ".join(f"{cost[k]:.1f}" for k in ("complete", "claim", "commit", "total"))
            print(f"| {name} | {steps} |")
    if "stale" in report:
        print(f"\n{report['conditions']}")
        due = f"{options.backlog:,} due jobs"
        print(f"PostgreSQL claim of {options.batch} out of {due} (median ms):")
        for name, ms in report["stale"].items():
            print(f"- {name}: {ms:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
