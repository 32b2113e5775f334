"""Jobs per second for no-op jobs on SQLite, drained by one worker process.

    .venv/bin/python bench/worker_throughput.py                 # 20,000 jobs, concurrency 10
    .venv/bin/python bench/worker_throughput.py --jobs 2000 --concurrency 50 --json

Enqueues the jobs into a fresh SQLite file in a temporary folder (in batches of
1,000, untimed), then times ``mf.worker(concurrency=N).run(burst=True)`` — one
process claiming in batches, running each no-op handler on its thread pool and
recording outcomes in batches — until nothing is due. SQLite runs as
mailfathom always runs it: WAL and ``synchronous=FULL``, so every batch is a
real fsync. ``--database`` measures another database instead (it must be empty).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from mailfathom import JobContext, JobState, MailFathom

_BATCH = 1_000


@dataclass(frozen=True)
class Result:
    """One run: how many jobs, how long the worker took, and how many succeeded."""

    jobs: int
    concurrency: int
    seconds: float
    jobs_per_second: float
    succeeded: int


def measure(jobs: int, concurrency: int, database_url: str | None = None) -> Result:
    """Enqueue ``jobs`` no-op jobs, then time one burst worker draining them."""
    with tempfile.TemporaryDirectory(prefix="mailfathom-bench-") as folder:
        url = database_url or f"sqlite:///{Path(folder) / 'bench.db'}"
        with MailFathom(url) as mf:
            mf.migrate()

            @mf.job("bench.noop")
            def noop(ctx: JobContext) -> None:
                pass

            for start in range(0, jobs, _BATCH):
                mf.enqueue_many("bench.noop", [{}] * min(_BATCH, jobs - start))
            began = time.perf_counter()
            ran = mf.worker(concurrency=concurrency).run(burst=True)
            seconds = time.perf_counter() - began
            succeeded = mf.jobs.counts()[JobState.SUCCEEDED]
    if ran != jobs:
        raise RuntimeError(f"the worker ran {ran} attempts for {jobs} jobs")
    return Result(jobs, concurrency, seconds, jobs / seconds, succeeded)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark from the command line; prints one line (or JSON)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--database", default=None, help="an empty database URL")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    options = parser.parse_args(argv)
    result = measure(options.jobs, options.concurrency, options.database)
    if options.json:
        print(json.dumps(asdict(result)))
    else:
        print(
            f"{result.jobs} no-op jobs, concurrency {result.concurrency}: "
            f"{result.seconds:.2f} s, {result.jobs_per_second:,.0f} jobs/s "
            f"({result.succeeded} succeeded)"
        )
    return 0 if result.succeeded == result.jobs else 1


if __name__ == "__main__":
    sys.exit(main())
