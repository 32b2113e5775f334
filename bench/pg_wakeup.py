"""Enqueue-to-claim latency with an idle waiter on ``wait_for_jobs`` (LISTEN/NOTIFY).

A waiter process blocks in ``store.wait_for_jobs`` — what an idle worker does —
and claims as soon as it is woken. The main process enqueues one job at a time,
pausing between jobs so the waiter is idle every time, and the job carries the
instant its enqueue began. Printed as p50/p99 in milliseconds: the enqueue call
(its commit included), enqueue→woken, enqueue→claimed (the claim's own commit
included), and from the moment enqueue returned to the claim — what a caller
sees as "enqueue-to-start" (``time.monotonic`` is one clock for every process
on Linux).

    python -m bench.pg_wakeup                     # 300 jobs on PostgreSQL
    python -m bench.pg_wakeup --database sqlite   # the same on a SQLite file
"""

from __future__ import annotations

import argparse
import multiprocessing
import random
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from bench.pg_common import conditions, quantile_ms, schema_url, scratch_schema
from mailfathom import MailFathom


def waiter(url: str, ready: Any, results: Any, expected: int) -> None:
    """Wait, claim what woke us, report (enqueue began, woken, claimed) per job."""
    with MailFathom(url) as app:
        app.store.wait_for_jobs(0)  # open the LISTEN connection before the first job
        ready.set()
        seen = 0
        while seen < expected:
            if not app.store.wait_for_jobs(5):
                continue
            woken = time.monotonic()
            jobs = app.queue.claim("waiter", 10, timedelta(seconds=30))
            claimed = time.monotonic()
            for job in jobs:
                results.put((job.payload["began"], woken, claimed))
            done = [(job.id, job.attempts) for job in jobs]
            app.store.claims.record_outcomes(owner="waiter", now=app.clock.now(), succeeded=done)
            seen += len(jobs)


def measure(url: str, jobs: int) -> dict[str, list[float]]:
    """Enqueue ``jobs`` one by one to an idle waiter; the latencies of each."""
    ctx = multiprocessing.get_context("spawn")
    ready, results = ctx.Event(), ctx.Queue()
    proc = ctx.Process(target=waiter, args=(url, ready, results, jobs))
    proc.start()
    took: dict[str, list[float]] = {
        "enqueue call (includes its commit)": [],
        "enqueue began → waiter woken": [],
        "enqueue began → job claimed": [],
        "enqueue returned → waiter woken": [],
        "enqueue returned → job claimed": [],
    }
    try:
        if not ready.wait(60):
            raise RuntimeError("the waiter did not start")
        with MailFathom(url) as app:
            for _ in range(jobs):
                time.sleep(random.uniform(0.01, 0.03))  # let the waiter go idle again
                began = time.monotonic()
                app.enqueue("bench.noop", {"began": began})
                committed = time.monotonic()
                began_again, woken, claimed = results.get(timeout=30)
                assert began_again == began, "jobs came back out of order"
                took["enqueue call (includes its commit)"].append(committed - began)
                took["enqueue began → waiter woken"].append(woken - began)
                took["enqueue began → job claimed"].append(claimed - began)
                took["enqueue returned → waiter woken"].append(woken - committed)
                took["enqueue returned → job claimed"].append(claimed - committed)
    finally:
        proc.join(30)
        if proc.is_alive():
            proc.kill()
    return took


def main() -> None:
    """Measure on the chosen database and print p50/p99."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=300)
    parser.add_argument("--database", choices=["postgresql", "sqlite"], default="postgresql")
    args = parser.parse_args()
    print(conditions())
    if args.database == "postgresql":
        with scratch_schema("wakeup") as schema:
            took = measure(schema_url(schema), args.jobs)
    else:
        with tempfile.TemporaryDirectory() as folder:
            url = f"sqlite:///{Path(folder) / 'wakeup.db'}"
            with MailFathom(url) as app:
                app.migrate()
            took = measure(url, args.jobs)
    print(f"{args.jobs} jobs, one at a time, to an idle waiter ({args.database}):\n")
    print("| | p50 ms | p99 ms |\n|---|---|---|")
    for name, values in took.items():
        print(f"| {name} | {quantile_ms(values, 0.5):.2f} | {quantile_ms(values, 0.99):.2f} |")


if __name__ == "__main__":
    main()
