"""Jobs per second for no-op jobs on PostgreSQL, with 1 and 4 worker processes.

Enqueues ``--jobs`` no-op jobs (in batches of 1,000), starts each worker process
(``mf.worker(concurrency=...).run(burst=True)``), lines them up on a barrier
once connected, and times from the barrier until the last one has drained the
queue. Then checks that every job succeeded exactly once (one attempt each).

Then the enqueue-to-start latency of a real, idle worker process
(``mf.worker().run()``, woken by ``NOTIFY``): ``--latency`` jobs enqueued one at a
time, pauses between them, each handler noting when it started.

    python -m bench.pg_throughput                       # 20,000 jobs, 1 and 4 workers
    python -m bench.pg_throughput --jobs 2000 --workers 2 --latency 50
"""

from __future__ import annotations

import argparse
import multiprocessing
import random
import time
from typing import Any

from bench.pg_common import conditions, quantile_ms, schema_url, scratch_schema
from mailfathom import JobContext, JobState, MailFathom


def build_app(url: str) -> MailFathom:
    """The benchmark's app: one no-op job kind."""
    app = MailFathom(url)

    @app.job("bench.noop", max_attempts=1)
    def noop(ctx: JobContext, n: int) -> None:
        return None

    return app


def work(url: str, concurrency: int, barrier: Any, results: Any) -> None:
    """One worker process: connect, wait for the others, drain, report (jobs, start, end)."""
    with build_app(url) as app:
        with app.store.db.reading() as cur:
            cur.execute("SELECT 1")
        barrier.wait(timeout=120)
        started = time.monotonic()
        done = app.worker(concurrency=concurrency).run(burst=True)
        results.put((done, started, time.monotonic()))


def run(url: str, jobs: int, workers: int, concurrency: int) -> dict[str, float]:
    """Enqueue, drain with ``workers`` processes, verify; the figures."""
    with build_app(url) as app:
        started = time.monotonic()
        for first in range(0, jobs, 1000):
            app.enqueue_many(
                "bench.noop", [{"n": n} for n in range(first, min(jobs, first + 1000))]
            )
        enqueue_rate = jobs / (time.monotonic() - started)
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(workers), ctx.Queue()
    procs = [
        ctx.Process(target=work, args=(url, concurrency, barrier, results)) for _ in range(workers)
    ]
    for proc in procs:
        proc.start()
    try:
        got = [results.get(timeout=600) for _ in procs]
    finally:
        for proc in procs:
            proc.join(60)
            if proc.is_alive():
                proc.kill()
    wall = max(end for _, _, end in got) - min(start for _, start, _ in got)
    with MailFathom(url) as app:
        counts = app.jobs.counts()
        with app.store.db.reading() as cur:
            cur.execute("SELECT max(attempts) AS most FROM mf_jobs")
            row = cur.fetchone()
    ran = sum(done for done, _, _ in got)
    if counts[JobState.SUCCEEDED] != jobs or ran != jobs or row["most"] != 1:
        raise RuntimeError(f"not exactly once: ran {ran}, counts {counts}, max attempts {row}")
    return {"enqueue_rate": enqueue_rate, "wall": wall, "rate": jobs / wall}


def idle_worker(url: str, results: Any) -> None:
    """A worker whose one kind reports (enqueue began, handler started)."""
    app = MailFathom(url)

    @app.job("bench.timed")
    def timed(ctx: JobContext, began: float) -> None:
        results.put((began, time.monotonic()))

    with app:
        app.worker(concurrency=10).run()  # until the SIGTERM at the end


def latency(url: str, jobs: int) -> dict[str, list[float]]:
    """Enqueue ``jobs`` one at a time to an idle worker; seconds until each handler started."""
    ctx = multiprocessing.get_context("spawn")
    results = ctx.Queue()
    proc = ctx.Process(target=idle_worker, args=(url, results))
    proc.start()
    took: dict[str, list[float]] = {
        "enqueue began → handler started": [],
        "enqueue returned → handler started": [],
    }
    try:
        with MailFathom(url) as app:
            app.enqueue("bench.timed", {"began": time.monotonic()})
            results.get(timeout=60)  # the worker is up and idle after this one
            for _ in range(jobs):
                time.sleep(random.uniform(0.02, 0.05))
                began = time.monotonic()
                app.enqueue("bench.timed", {"began": began})
                returned = time.monotonic()
                reported, started = results.get(timeout=30)
                assert reported == began, "jobs came back out of order"
                took["enqueue began → handler started"].append(started - began)
                took["enqueue returned → handler started"].append(started - returned)
    finally:
        proc.terminate()
        proc.join(30)
        if proc.is_alive():
            proc.kill()
    return took


def main() -> None:
    """Measure each worker count on a fresh schema; print a Markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--concurrency", type=int, default=10, help="jobs claimed per batch")
    parser.add_argument("--latency", type=int, default=200, help="jobs for the latency run")
    args = parser.parse_args()
    print(conditions())
    print(f"\n{args.jobs:,} no-op jobs, worker concurrency {args.concurrency}\n")
    print("| worker processes | enqueue jobs/s | drain s | jobs/s |\n|---|---|---|---|")
    for workers in args.workers:
        with scratch_schema(f"tp{workers}") as schema:
            got = run(schema_url(schema), args.jobs, workers, args.concurrency)
        print(
            f"| {workers} | {got['enqueue_rate']:,.0f} | {got['wall']:.1f} | {got['rate']:,.0f} |"
        )
    if args.latency:
        with scratch_schema("latency") as schema:
            took = latency(schema_url(schema), args.latency)
        print(f"\n{args.latency} jobs, one at a time, to an idle worker process\n")
        print("| | p50 ms | p99 ms |\n|---|---|---|")
        for name, values in took.items():
            print(f"| {name} | {quantile_ms(values, 0.5):.2f} | {quantile_ms(values, 0.99):.2f} |")


if __name__ == "__main__":
    main()
