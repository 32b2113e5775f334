"""What the database gauges of ``/metrics`` cost on a big table.

Fills a fresh database with ``--rows`` jobs straight in SQL (the console listing
benchmark's mix: 95 % Succeeded, 3 % DeadLettered, 1 % Pending, 1 % Dropped; 20
kinds, 5 queues), then times one read of every database gauge (the collector's
refresh, every ``--min-interval`` seconds at most) and one recount of the Succeeded
and Dropped jobs (every ``--history-interval`` seconds at most), and says what
scraping every ``--scrape-every`` seconds costs: the share of one core the database
spends on it.

    python -m bench.metrics_gauges --rows 1000000 --database sqlite:////tmp/big.db
    python -m bench.metrics_gauges --rows 1000000 --database postgresql://postgres@127.0.0.1/postgres
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from bench.console_listing import NOW, fill
from mailfathom import FakeClock, MailFathom
from mailfathom.observability.gauges import DatabaseGauges


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the benchmark; print what it found; return the measurements."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--database", required=True, help="an empty database URL")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--scrape-every", type=float, default=5.0)
    parser.add_argument("--min-interval", type=float, default=10.0)
    parser.add_argument("--history-interval", type=float, default=300.0)
    parser.add_argument("--max-duty", type=float, default=0.02)
    args = parser.parse_args(argv)
    with MailFathom(args.database, clock=FakeClock(NOW)) as mf:
        mf.migrate()
        filled = fill(mf, args.rows)
        # the live read alone: the history counted once, then not again for the run
        gauges = DatabaseGauges(
            mf.store, mf.clock, min_interval=0, history_interval=1e9, max_duty=None
        )
        list(gauges.collect())
        samples = []
        for _ in range(args.repeat):
            began = time.perf_counter()
            families = list(gauges.collect())
            samples.append((time.perf_counter() - began) * 1000)
        recounts = []
        for _ in range(args.repeat):
            began = time.perf_counter()
            history = mf.store.console.history()
            recounts.append((time.perf_counter() - began) * 1000)
        cached = DatabaseGauges(mf.store, mf.clock, min_interval=3600, history_interval=3600)
        list(cached.collect())
        began = time.perf_counter()
        list(cached.collect())
        cached_ms = (time.perf_counter() - began) * 1000
        dialect = mf.store.dialect
    read_ms = statistics.median(samples)
    recount_ms = statistics.median(recounts)
    # the collector's spacing: the interval, or the read's time over the duty cap if longer
    reads_per_minute = 60 / max(
        args.scrape_every, args.min_interval, read_ms / 1000 / args.max_duty
    )
    recounts_per_minute = 60 / max(
        args.scrape_every, args.history_interval, recount_ms / 1000 / args.max_duty
    )
    share = (read_ms * reads_per_minute + recount_ms * recounts_per_minute) / 60_000
    uncapped = (
        read_ms * 60 / max(args.scrape_every, args.min_interval)
        + recount_ms * 60 / max(args.scrape_every, args.history_interval)
    ) / 60_000
    result = {
        "dialect": dialect,
        "rows": args.rows,
        "fill_seconds": filled,
        "read_ms": read_ms,
        "recount_ms": recount_ms,
        "succeeded_counted": sum(n for (state, _), n in history.items() if state == "Succeeded"),
        "recounts_per_minute": recounts_per_minute,
        "cached_scrape_ms": cached_ms,
        "families": len(families),
        "reads_per_minute": reads_per_minute,
        "core_share": share,
        "core_share_without_duty_cap": uncapped,
    }
    print(
        f"{dialect}, {args.rows:,} jobs (filled in {filled:.1f} s): one read of every gauge "
        f"{read_ms:.1f} ms (median of {args.repeat}); a recount of Succeeded and Dropped "
        f"{recount_ms:.1f} ms; a cached scrape {cached_ms:.2f} ms; scraping every "
        f"{args.scrape_every:g} s with a {args.min_interval:g} s cache, a "
        f"{args.history_interval:g} s recount and a {args.max_duty:.0%} duty cap reads "
        f"{reads_per_minute:.2g} and recounts "
        f"{recounts_per_minute:.2g} times a minute = {share:.2%} of one core "
        f"({uncapped:.2%} without the duty cap)"
    )
    return result


if __name__ == "__main__":
    main()
