"""What a claim and a completion cost per job in the database, and what bounds them.

    python -m bench.claim_costs                       # both parts, 20,000 jobs
    python -m bench.claim_costs --part guards --jobs 5000 --json
    python -m bench.claim_costs --part stale --backlog 200000
    python -m bench.claim_costs --part kinds --backlog 100000 --skipped 1000

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

**kinds** (SQLite and PostgreSQL). What the kind filter costs a claim (a worker
claims only the kinds it registers): a claim of ``--batch`` out of ``--backlog`` due
jobs spread over ten kinds, as the store runs it, without the filter (``kinds``
NULL) and with it (the ten kinds: nothing is filtered out, the common case); then
the same with ``--skipped`` due jobs of an eleventh kind ahead in claim order (a
kind no running worker knows, as in a rolling deploy), which the filtered claim
walks past. Transactions rolled back, so every claim sees the same table.

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
        claim = {
            "owner": "bench",
            "limit": batch,
            "now": _NOW,
            "lease_until": _NOW,
            "kinds": None,  # every kind
        }
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
            "kinds": None,  # every kind
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


#: The kinds the worker of the kinds part registers (every job of the backlog is one).
KINDS = [f"bench.kind{n}" for n in range(10)]
#: The cases of the kinds part, in order: (label, the claim's :kinds).
_KIND_CASES = [("without the filter", None), ("with the filter", json.dumps(KINDS))]


def _fill(url: str, backlog: int, skipped: int) -> None:
    """``backlog`` due jobs over ``KINDS`` and ``skipped`` of another kind ahead of them."""
    with MailFathom(url) as app:  # an app with no kind of its own enqueues any kind
        app.migrate()
        for first in range(0, backlog, 1000):
            size = min(1000, backlog - first)
            app.enqueue_many(KINDS[(first // 1000) % len(KINDS)], [{} for _ in range(size)])
        for first in range(0, skipped, 1000):
            size = min(1000, skipped - first)
            app.enqueue_many("bench.unknown", [{} for _ in range(size)], priority=1)


def _sqlite_claims(path: Path, batch: int, runs: int) -> dict[str, float]:
    """Median ms of SQLite's ``claim_jobs`` per case, each in a rolled-back transaction."""
    query = load_queries("sqlite")["claim_jobs"]
    times: dict[str, list[float]] = {label: [] for label, _ in _KIND_CASES}
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        for _ in range(runs):  # the cases alternate, so drift on a shared machine hits both
            for label, wanted in _KIND_CASES:
                params = {
                    "owner": "bench",
                    "limit": batch,
                    "now": _NOW,
                    "lease_until": _NOW,
                    "kinds": wanted,
                }
                conn.execute("BEGIN IMMEDIATE")
                began = time.perf_counter()
                claimed = conn.execute(query, params).fetchall()
                times[label].append(time.perf_counter() - began)
                conn.execute("ROLLBACK")
                assert len(claimed) == batch
    finally:
        conn.close()
    return {label: statistics.median(spent) * 1000 for label, spent in times.items()}


def _pg_claims(url: str, batch: int, runs: int) -> dict[str, float]:
    """Median ms of PostgreSQL's ``claim_jobs`` per case, as the store runs it (after
    ``plan_claims``), each in a rolled-back transaction."""
    queries = load_queries("postgresql")
    times: dict[str, list[float]] = {label: [] for label, _ in _KIND_CASES}
    with psycopg.connect(url, row_factory=dict_row) as conn:
        conn.execute("ANALYZE mf_jobs")
        conn.commit()
        now = conn.execute("SELECT now() + interval '1 hour' AS t").fetchone()
        assert now is not None
        for _ in range(runs):  # the cases alternate, so drift on a shared machine hits both
            for label, wanted in _KIND_CASES:
                params = {
                    "owner": "bench",
                    "limit": batch,
                    "now": now["t"],
                    "lease_until": now["t"],
                    "kinds": wanted,
                }
                began = time.perf_counter()
                conn.execute(queries["plan_claims"])
                claimed = conn.execute(queries["claim_jobs"], params).fetchall()
                times[label].append(time.perf_counter() - began)
                conn.rollback()
                assert len(claimed) == batch
    return {label: statistics.median(spent) * 1000 for label, spent in times.items()}


def kinds(backlog: int, batch: int, runs: int, skipped: int) -> dict[str, dict[str, float]]:
    """The kinds part: median ms per claim, per store and case (see the docstring)."""
    found: dict[str, dict[str, float]] = {}
    folder = Path(tempfile.mkdtemp(prefix="mf-claim-kinds-"))
    try:
        for ahead in (0, skipped):
            where = "" if not ahead else f", {ahead:,} of another kind ahead"
            path = folder / f"kinds-{ahead}.db"
            _fill(f"sqlite:///{path}", backlog, ahead)
            found[f"SQLite{where}"] = _sqlite_claims(path, batch, runs)
            with scratch_schema("kinds") as schema:
                url = schema_url(schema)
                _fill(url, backlog, ahead)
                found[f"PostgreSQL{where}"] = _pg_claims(url, batch, runs)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return found


def main(argv: list[str] | None = None) -> int:
    """Run the parts asked for; print a summary (or JSON)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=("guards", "stale", "kinds", "both"), default="both")
    parser.add_argument("--jobs", type=int, default=20_000, help="jobs drained (guards)")
    parser.add_argument("--backlog", type=int, default=200_000, help="due jobs (stale)")
    parser.add_argument("--batch", type=int, default=100, help="jobs per claim")
    parser.add_argument("--runs", type=int, default=5, help="claims timed per case (stale, kinds)")
    parser.add_argument(
        "--skipped", type=int, default=1000, help="due jobs of an unknown kind ahead (kinds)"
    )
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    options = parser.parse_args(argv)
    report: dict[str, Any] = {}
    if options.part in ("guards", "both"):
        report["guards"] = guards(options.jobs, options.batch)
    if options.part in ("stale", "both"):
        report["stale"] = stale(options.backlog, options.batch, options.runs)
        report["conditions"] = conditions()
    if options.part == "kinds":
        report["kinds"] = kinds(options.backlog, options.batch, options.runs, options.skipped)
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
    if "kinds" in report:
        print(f"\n{report['conditions']}")
        print(f"Claim of {options.batch} out of {options.backlog:,} due jobs (median ms):")
        print("| store | without the kind filter | with it |\n|---|---:|---:|")
        for name, cost in report["kinds"].items():
            print(f"| {name} | {cost['without the filter']:.2f} | {cost['with the filter']:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
