"""Jobs per second for no-op jobs on SQLite, drained by one worker process.

    .venv/bin/python bench/worker_throughput.py                 # 20,000 jobs, concurrency 10
    .venv/bin/python bench/worker_throughput.py --jobs 2000 --concurrency 50 --json
    .venv/bin/python bench/worker_throughput.py --metrics            # with /metrics scraped
    .venv/bin/python bench/worker_throughput.py --compare-metrics --rounds 5
    .venv/bin/python bench/worker_throughput.py --compare-metrics --stores sqlite,postgresql

Enqueues the jobs into a fresh SQLite file in a temporary folder (in batches of
1,000, untimed), then times ``mf.worker(concurrency=N).run(burst=True)`` — one
process claiming in batches, running each no-op handler on its thread pool and
recording outcomes in batches — until nothing is due. SQLite runs as
mailfathom always runs it: WAL and ``synchronous=FULL``, so every batch is a
real fsync. ``--database`` measures another database instead (it must be empty).

``--metrics`` installs the Prometheus metrics (counters, histograms and the cached
database gauges), serves them on a loopback port and scrapes ``/metrics`` every
``--scrape-interval`` seconds (default 1: five times harsher than a 5 s scrape)
from another process (as Prometheus does: its CPU is not the worker's) while the
worker drains. ``--compare-metrics`` runs ``--rounds`` rounds; each round
runs one pair per store of ``--stores`` (default ``sqlite``), metrics off and on,
which goes first alternating from round to round for each store so that neither
gains from going second, on a fresh database each run (PostgreSQL: ``bench_observe_ab`` on
``--postgres-url``'s server, dropped afterwards). It prints, per store side by side,
the median jobs/s of each, the median of the pairs' on/off ratios (each pair ran
back to back, so it shares the machine's load of the moment), and the CPU this
process spent per job, which the machine's other work disturbs far less.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg

from mailfathom import JobContext, JobState, MailFathom
from mailfathom.observability import metrics as observed
from mailfathom.observability.gauges import DatabaseGauges
from mailfathom.observability.health import check_store
from mailfathom.observability.server import MetricsServer

_BATCH = 1_000
STORES = ("sqlite", "postgresql")
#: The database each PostgreSQL run of --compare-metrics gets, fresh.
_AB_DATABASE = "bench_observe_ab"


@dataclass(frozen=True)
class Result:
    """One run: how many jobs, how long the worker took, and how many succeeded."""

    jobs: int
    concurrency: int
    seconds: float
    jobs_per_second: float
    succeeded: int
    metrics: bool = False
    scrapes: int = 0
    #: CPU seconds this process spent meanwhile (all its threads): steadier than the wall
    #: clock on a shared machine, and what the metrics would cost.
    cpu_seconds: float = 0.0


#: The scraper: a process of its own, as Prometheus is, so that its CPU is not counted
#: as the worker's; one line on stdout per scrape.
_SCRAPER = """
import sys, time, urllib.request
url, interval = sys.argv[1], float(sys.argv[2])
while True:
    with urllib.request.urlopen(url) as answer:
        answer.read()
    print(1, flush=True)
    time.sleep(interval)
"""


@contextmanager
def scraped(mf: MailFathom, interval: float) -> Iterator[list[int]]:
    """Metrics installed and served on a loopback port, scraped every ``interval`` s by
    another process for the block; yields a one-item list that ends up holding the
    scrape count. The first scrape has happened when the block begins."""
    installed = observed.install()
    installed.registry.register(DatabaseGauges(mf.store, mf.clock))
    server = MetricsServer(installed.registry, lambda: check_store(mf.store, mf.clock)).start()
    scraper = subprocess.Popen(
        [sys.executable, "-c", _SCRAPER, f"http://127.0.0.1:{server.port}/metrics", str(interval)],
        stdout=subprocess.PIPE,
        text=True,
    )
    count = [0]
    try:
        assert scraper.stdout is not None
        if scraper.stdout.readline():  # the first scrape answered
            count[0] = 1
        yield count
    finally:
        scraper.terminate()
        out, _ = scraper.communicate(timeout=10)
        count[0] += len(out.splitlines())
        server.stop()
        observed.uninstall()


def measure(
    jobs: int,
    concurrency: int,
    database_url: str | None = None,
    *,
    metrics: bool = False,
    scrape_interval: float = 1.0,
) -> Result:
    """Enqueue ``jobs`` no-op jobs, then time one burst worker draining them (with the
    metrics installed and scraped when ``metrics``)."""
    with tempfile.TemporaryDirectory(prefix="mailfathom-bench-") as folder:
        url = database_url or f"sqlite:///{Path(folder) / 'bench.db'}"
        with MailFathom(url) as mf:
            mf.migrate()

            @mf.job("bench.noop")
            def noop(ctx: JobContext) -> None:
                pass

            for start in range(0, jobs, _BATCH):
                mf.enqueue_many("bench.noop", [{}] * min(_BATCH, jobs - start))
            with scraped(mf, scrape_interval) if metrics else _nothing() as scrapes:
                began, cpu = time.perf_counter(), time.process_time()
                ran = mf.worker(concurrency=concurrency).run(burst=True)
                seconds = time.perf_counter() - began
                cpu = time.process_time() - cpu
            succeeded = mf.jobs.counts()[JobState.SUCCEEDED]
    if ran != jobs:
        raise RuntimeError(f"the worker ran {ran} attempts for {jobs} jobs")
    return Result(jobs, concurrency, seconds, jobs / seconds, succeeded, metrics, scrapes[0], cpu)


@contextmanager
def _nothing() -> Iterator[list[int]]:
    yield [0]


@contextmanager
def _fresh(store: str, database_url: str | None, postgres_url: str) -> Iterator[str | None]:
    """The URL one run measures: ``database_url`` when given, else a new temporary SQLite
    file (None: :func:`measure` makes it) or a fresh PostgreSQL database."""
    if database_url is not None or store == "sqlite":
        yield database_url
        return
    parts = urlsplit(postgres_url)
    url = urlunsplit(parts._replace(path=f"/{_AB_DATABASE}"))
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {_AB_DATABASE} WITH (FORCE)")
        admin.execute(f"CREATE DATABASE {_AB_DATABASE}")
    try:
        yield url
    finally:
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {_AB_DATABASE} WITH (FORCE)")


def compare(
    jobs: int,
    concurrency: int,
    rounds: int,
    database_url: str | None,
    scrape_interval: float,
    *,
    stores: tuple[str, ...] = ("sqlite",),
    postgres_url: str = "postgresql://postgres@127.0.0.1:5432/postgres",
) -> dict[str, Any]:
    """``rounds`` rounds of one pair of runs per store, metrics off and on (which goes
    first alternates from round to round): per store, the median jobs/s of each, the
    median of the pairs' on/off ratios, and the CPU per job of each."""
    runs: dict[str, dict[bool, list[Result]]] = {s: {False: [], True: []} for s in stores}
    for round_ in range(rounds):
        for store in stores:
            # per store, which run of its pair goes first alternates from round to round
            for metrics in (False, True) if round_ % 2 == 0 else (True, False):
                with _fresh(store, database_url, postgres_url) as url:
                    result = measure(
                        jobs, concurrency, url, metrics=metrics, scrape_interval=scrape_interval
                    )
                runs[store][metrics].append(result)
                print(  # progress, on stderr: a long series on a loaded machine
                    f"{store} metrics {'on' if metrics else 'off'}: "
                    f"{result.jobs_per_second:,.0f} jobs/s, "
                    f"{result.cpu_seconds * 1e6 / jobs:.0f} µs CPU a job",
                    file=sys.stderr,
                    flush=True,
                )
    return {
        "jobs": jobs,
        "rounds": rounds,
        "stores": {store: _summary(jobs, runs[store]) for store in stores},
    }


def _summary(jobs: int, runs: dict[bool, list[Result]]) -> dict[str, Any]:
    off = [r.jobs_per_second for r in runs[False]]
    on = [r.jobs_per_second for r in runs[True]]
    cpu_off = [r.cpu_seconds * 1e6 / jobs for r in runs[False]]
    cpu_on = [r.cpu_seconds * 1e6 / jobs for r in runs[True]]
    return {
        "off_jobs_per_second": statistics.median(off),
        "on_jobs_per_second": statistics.median(on),
        "ratio": statistics.median(on) / statistics.median(off),
        "pair_ratio": statistics.median(b / a for a, b in zip(off, on, strict=True)),
        "off_cpu_us_per_job": statistics.median(cpu_off),
        "on_cpu_us_per_job": statistics.median(cpu_on),
        "cpu_ratio": statistics.median(cpu_on) / statistics.median(cpu_off),
        "scrapes": sum(r.scrapes for r in runs[True]),
        "off_samples": [round(value) for value in off],
        "on_samples": [round(value) for value in on],
    }


def _table(row: dict[str, Any]) -> str:
    lines = [
        f"{row['jobs']} no-op jobs a run, {row['rounds']} pairs per store (medians):",
        "| store | jobs/s off | jobs/s on | on/off | pairs' on/off | CPU/job off | on | on/off |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for store, s in row["stores"].items():
        lines.append(
            f"| {store} | {s['off_jobs_per_second']:,.0f} | {s['on_jobs_per_second']:,.0f} | "
            f"{s['ratio']:.3f} | {s['pair_ratio']:.3f} | {s['off_cpu_us_per_job']:.0f} µs | "
            f"{s['on_cpu_us_per_job']:.0f} µs | {s['cpu_ratio']:.3f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark from the command line; prints one line (or JSON)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--database", default=None, help="an empty database URL")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--metrics", action="store_true", help="install and scrape /metrics")
    parser.add_argument("--scrape-interval", type=float, default=1.0, help="seconds [1]")
    parser.add_argument(
        "--compare-metrics", action="store_true", help="pairs of runs, metrics off and on"
    )
    parser.add_argument("--rounds", type=int, default=5, help="pairs for --compare-metrics")
    parser.add_argument(
        "--stores", default="sqlite", help="--compare-metrics: sqlite, postgresql or both [sqlite]"
    )
    parser.add_argument(
        "--postgres-url",
        default="postgresql://postgres@127.0.0.1:5432/postgres",
        help="the server whose fresh bench_observe_ab database PostgreSQL runs use",
    )
    options = parser.parse_args(argv)
    if options.compare_metrics:
        stores = tuple(name.strip() for name in options.stores.split(",") if name.strip())
        unknown = [name for name in stores if name not in STORES]
        if unknown or not stores:
            parser.error(f"--stores takes {' and/or '.join(STORES)}, comma-separated: {unknown}")
        row = compare(
            options.jobs,
            options.concurrency,
            options.rounds,
            options.database,
            options.scrape_interval,
            stores=stores,
            postgres_url=options.postgres_url,
        )
        print(json.dumps(row) if options.json else _table(row))
        return 0
    result = measure(
        options.jobs,
        options.concurrency,
        options.database,
        metrics=options.metrics,
        scrape_interval=options.scrape_interval,
    )
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
