"""Enqueue cost: PostgreSQL's one-statement batch against a row-by-row loop, and SQLite.

For each batch size, enqueues ``--jobs`` jobs through ``mf.enqueue_many`` (each
batch one transaction) and prints jobs/s and the median time per batch:

* ``postgresql batch`` — the store as shipped: one ``insert_jobs`` statement;
* ``postgresql loop``  — the same store made to insert row by row (``insert_job``
  per job, one round trip each), which is what SQLite does;
* ``sqlite loop``      — SQLite as shipped, in-process, no round trips.

Then the effect of server-side prepared statements on the hot claim statement
(psycopg prepares a statement on a connection after ``prepare_threshold`` = 5
executions; the pool keeps connections, so a worker's claims run prepared).

    python -m bench.pg_enqueue
    python -m bench.pg_enqueue --jobs 2000 --sizes 1 100
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
from psycopg.rows import dict_row

from bench.pg_common import conditions, quantile_ms, schema_url, scratch_schema
from mailfathom import MailFathom
from mailfathom.store.queries import load_queries


@contextmanager
def app_for(setup: str) -> Iterator[MailFathom]:
    """A migrated, empty app for one setup."""
    if setup == "sqlite loop":
        with (
            tempfile.TemporaryDirectory() as folder,
            MailFathom(f"sqlite:///{Path(folder) / 'bench.db'}") as app,
        ):
            app.migrate()
            yield app
        return
    with scratch_schema("enqueue") as schema, MailFathom(schema_url(schema)) as app:
        if setup == "postgresql loop":
            # the row-by-row path SQLite takes: PostgreSQL's batch statements turned off
            jobs = app.store.jobs
            jobs._caps = dataclasses.replace(
                jobs._caps, batch_insert_returning_ids=False, keyless_batch_insert=False
            )
        yield app


def enqueue_rate(setup: str, jobs: int, size: int) -> tuple[float, float]:
    """(jobs/s, median seconds per batch) enqueueing ``jobs`` in batches of ``size``."""
    with app_for(setup) as app:
        per_batch = []
        started = time.perf_counter()
        for first in range(0, jobs, size):
            began = time.perf_counter()
            app.enqueue_many(
                "bench.noop",
                [{"n": n} for n in range(first, min(jobs, first + size))],
                idempotency_keys=[f"k{n}" for n in range(first, min(jobs, first + size))],
            )
            per_batch.append(time.perf_counter() - began)
        return jobs / (time.perf_counter() - started), statistics.median(per_batch)


def prepared_effect(runs: int) -> dict[str, list[float]]:
    """Seconds per claim of 10 from 1,000 due jobs, unprepared vs prepared (rolled back)."""
    queries = load_queries("postgresql")
    now = datetime(2030, 1, 1, tzinfo=UTC)
    params = {
        "owner": "b",
        "limit": 10,
        "now": now,
        "lease_until": now + timedelta(30),
        "kinds": None,
    }
    took: dict[str, list[float]] = {"claim 10, unprepared": [], "claim 10, prepared": []}
    with (
        scratch_schema("prepare") as schema,
        MailFathom(schema_url(schema)) as app,
        psycopg.connect(schema_url(schema), autocommit=True, row_factory=dict_row) as conn,
    ):
        app.enqueue_many("bench.noop", [{} for _ in range(1000)], run_at=now - timedelta(1))
        conn.execute("VACUUM ANALYZE mf_jobs")
        for name, prepare in (("claim 10, unprepared", False), ("claim 10, prepared", True)):
            for _ in range(runs):
                with conn.transaction(force_rollback=True):
                    began = time.perf_counter()
                    conn.execute(queries["claim_jobs"], params, prepare=prepare).fetchall()
                    took[name].append(time.perf_counter() - began)
    return took


def main() -> None:
    """Print the enqueue table and the prepared-statement comparison."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 10, 100, 1000])
    parser.add_argument("--runs", type=int, default=500)
    args = parser.parse_args()
    print(conditions())
    print(f"\n{args.jobs:,} keyed jobs per cell; each batch is one enqueue_many transaction\n")
    setups = ["postgresql batch", "postgresql loop", "sqlite loop"]
    print("| batch size | " + " | ".join(f"{s}: jobs/s (ms/batch)" for s in setups) + " |")
    print("|---|" + "---|" * len(setups))
    for size in args.sizes:
        jobs = min(args.jobs, size * 500)  # size 1 would take long; 500 batches is plenty
        cells = []
        for setup in setups:
            rate, median = enqueue_rate(setup, jobs, size)
            cells.append(f"{rate:,.0f} ({median * 1000:.2f})")
        print(f"| {size} | " + " | ".join(cells) + " |")
    print()
    for name, values in prepared_effect(args.runs).items():
        print(
            f"{name}: p50 {quantile_ms(values, 0.5):.3f} ms, p99 {quantile_ms(values, 0.99):.3f} ms"
        )


if __name__ == "__main__":
    main()
