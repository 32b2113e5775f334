"""Many concurrent ``await amf.enqueue(...)`` without ``connection=`` on PostgreSQL.

Starts ``--requests`` enqueues at once on one event loop (as a burst of web requests
would) and prints the p50 / p99 latency of each and the time for all of them; with
``--busy`` the loop's default thread pool is first given that many unrelated blocking
calls of ``--busy-seconds`` each (a slow ``to_thread`` elsewhere in the application),
which mailfathom's calls must not queue behind.

    python -m bench.async_concurrency
    python -m bench.async_concurrency --requests 200 --busy 8
"""

from __future__ import annotations

import argparse
import asyncio
import time

from bench.pg_common import quantile_ms, schema_url, scratch_schema
from mailfathom import AsyncMailFathom, MailFathom

__all__ = ["main"]


async def burst(amf: AsyncMailFathom, requests: int, busy: int, busy_seconds: float) -> None:
    async def one(n: int) -> float:
        started = time.perf_counter()
        await amf.enqueue("bench.async", {"n": n})
        return time.perf_counter() - started

    await amf.enqueue("bench.async", {"n": -1})  # the pool is open and warm
    unrelated = [
        asyncio.create_task(asyncio.to_thread(time.sleep, busy_seconds)) for _ in range(busy)
    ]
    await asyncio.sleep(0)  # they have taken their threads
    started = time.perf_counter()
    latencies = await asyncio.gather(*(one(n) for n in range(requests)))
    total = time.perf_counter() - started
    await asyncio.gather(*unrelated)
    print(
        f"{requests} concurrent enqueues, {busy} busy threads: "
        f"p50 {quantile_ms(latencies, 0.5):.1f} ms, p99 {quantile_ms(latencies, 0.99):.1f} ms, "
        f"all in {total * 1000:.0f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--busy", type=int, default=0)
    parser.add_argument("--busy-seconds", type=float, default=0.5)
    args = parser.parse_args()
    with scratch_schema("async") as schema, MailFathom(schema_url(schema)) as mf:
        mf.job("bench.async")(lambda payload: None)
        asyncio.run(burst(AsyncMailFathom(mf), args.requests, args.busy, args.busy_seconds))


if __name__ == "__main__":
    main()
