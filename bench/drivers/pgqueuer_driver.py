"""PgQueuer under the benchmark (runs in the peers' venv).

``spec['driver']`` picks ``asyncpg`` (``AsyncpgDriver`` on one connection, as
PgQueuer's own benchmark does) or ``psycopg`` (``PsycopgDriver`` on an autocommit
``AsyncConnection``). The event loop is uvloop, as PgQueuer's CLI runs it. Workers
use ``QueueExecutionMode.drain``, which returns once the queue is empty and the
completion log buffer is flushed.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import pgqueuer
import uvloop
from pgqueuer.domain.types import QueueExecutionMode
from pgqueuer.queries import Queries

from bench.drivers.protocol import Spec, Tally, await_go, pace, run_driver

ENTRYPOINT = "noop"


async def _driver(spec: Spec) -> Any:
    if spec["driver"] == "asyncpg":
        import asyncpg

        return pgqueuer.AsyncpgDriver(await asyncpg.connect(dsn=spec["url"]))
    import psycopg

    conn = await psycopg.AsyncConnection.connect(conninfo=spec["url"], autocommit=True)
    return pgqueuer.PsycopgDriver(conn)


async def _queries(spec: Spec) -> Any:
    queries = Queries(await _driver(spec))
    if spec.get("install"):
        await queries.install()
    return queries


async def _enqueue_single(spec: Spec) -> dict[str, Any]:
    queries = await _queries(spec)
    start = await_go()
    for i in range(spec["n"]):
        await queries.enqueue(ENTRYPOINT, str(i).encode())
    return {"start": start, "end": time.monotonic(), "count": spec["n"]}


async def _enqueue_batch(spec: Spec) -> dict[str, Any]:
    queries = await _queries(spec)
    n, batch = spec["n"], spec["batch"]
    start = await_go()
    for first in range(0, n, batch):
        size = min(n, first + batch) - first
        await queries.enqueue(
            [ENTRYPOINT] * size, [str(first + k).encode() for k in range(size)], [0] * size
        )
    return {"start": start, "end": time.monotonic(), "count": n}


async def _produce(spec: Spec) -> dict[str, Any]:
    queries = await _queries(spec)
    start = await_go()
    for _ in pace(spec["count"], spec["rate"]):
        await queries.enqueue(ENTRYPOINT, repr(time.monotonic()).encode())
    return {"start": start, "end": time.monotonic(), "count": spec["count"]}


async def _work(spec: Spec, *, latency: bool) -> dict[str, Any]:
    pgq = pgqueuer.PgQueuer(await _driver(spec))
    tally = Tally(spec)
    tally.on_stop = pgq.shutdown.set

    async def noop(job: Any) -> None:
        tally.handle(float(job.payload.decode()) if latency else None)

    pgq.entrypoint(ENTRYPOINT)(noop)
    start = await_go()
    tally.started(start)
    await pgq.run(
        batch_size=spec["batch"],
        mode=QueueExecutionMode.continuous if latency else QueueExecutionMode.drain,
        dequeue_timeout=timedelta(seconds=30),
    )
    return tally.report(start, time.monotonic())


async def _process(spec: Spec) -> dict[str, Any]:
    return await _work(spec, latency=False)


async def _latency_worker(spec: Spec) -> dict[str, Any]:
    return await _work(spec, latency=True)


def _sync(coroutine_function: Any) -> Any:
    def run(spec: Spec) -> dict[str, Any]:
        result: dict[str, Any] = uvloop.run(coroutine_function(spec))
        return result

    return run


if __name__ == "__main__":
    run_driver(
        {
            "enqueue_single": _sync(_enqueue_single),
            "enqueue_batch": _sync(_enqueue_batch),
            "process": _sync(_process),
            "latency_worker": _sync(_latency_worker),
            "produce": _sync(_produce),
        }
    )
