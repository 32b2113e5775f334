"""procrastinate under the benchmark (runs in the peers' venv).

``PsycopgConnector`` (its default, psycopg 3 with a pool), an ``async`` no-op task,
``run_worker_async(concurrency=…)``; ``wait=False`` drains and returns, and every
job's completion is written before the worker returns. Jobs are kept on completion
(``delete_jobs="never"``, the default), as mailfathom keeps them.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import procrastinate

from bench.drivers.protocol import Spec, await_go, memory_kb, pace, run_driver


def _app(spec: Spec) -> Any:
    return procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=spec["url"]))


class Handler:
    """The task body's bookkeeping: count, latencies, memory checkpoint, stop."""

    def __init__(self, spec: Spec) -> None:
        self.done = 0
        self.latencies: list[float] = []
        self.checkpoint = int(spec.get("checkpoint", 0))
        self.memory_at_checkpoint: dict[str, int] = {}
        self.stop_after = int(spec.get("count", 0))
        self.finished = asyncio.Event()

    async def __call__(self, i: int = 0, t: float | None = None) -> None:
        now = time.monotonic()
        if t is not None:
            self.latencies.append((now - t) * 1000.0)
        self.done += 1
        if self.done == self.checkpoint:
            self.memory_at_checkpoint = memory_kb()
        if self.done == self.stop_after:
            self.finished.set()


async def _with_task(spec: Spec, handler: Handler) -> tuple[Any, Any]:
    app = _app(spec)

    async def noop(i: int = 0, t: float | None = None) -> None:
        await handler(i, t)

    task = app.task(name="noop")(noop)
    await app.open_async()
    if spec.get("install"):
        await app.schema_manager.apply_schema_async()
    return app, task


async def _enqueue_single(spec: Spec) -> dict[str, Any]:
    app, task = await _with_task(spec, Handler(spec))
    start = await_go()
    for i in range(spec["n"]):
        await task.defer_async(i=i)
    end = time.monotonic()
    await app.close_async()
    return {"start": start, "end": end, "count": spec["n"]}


async def _enqueue_batch(spec: Spec) -> dict[str, Any]:
    app, task = await _with_task(spec, Handler(spec))
    n, batch = spec["n"], spec["batch"]
    start = await_go()
    for first in range(0, n, batch):
        await task.batch_defer_async(*({"i": i} for i in range(first, min(n, first + batch))))
    end = time.monotonic()
    await app.close_async()
    return {"start": start, "end": end, "count": n}


async def _produce(spec: Spec) -> dict[str, Any]:
    app, task = await _with_task(spec, Handler(spec))
    start = await_go()
    for i in pace(spec["count"], spec["rate"]):
        await task.defer_async(i=i, t=time.monotonic())
    end = time.monotonic()
    await app.close_async()
    return {"start": start, "end": end, "count": spec["count"]}


async def _process(spec: Spec) -> dict[str, Any]:
    handler = Handler(spec)
    app, _ = await _with_task(spec, handler)
    start = await_go()
    await app.run_worker_async(
        concurrency=spec["concurrency"], wait=False, install_signal_handlers=False
    )
    end = time.monotonic()
    await app.close_async()
    return {
        "start": start,
        "end": end,
        "count": handler.done,
        "memory_at_checkpoint": handler.memory_at_checkpoint,
        "memory_at_end": memory_kb(),
    }


async def _latency_worker(spec: Spec) -> dict[str, Any]:
    handler = Handler(spec)
    app, _ = await _with_task(spec, handler)
    start = await_go()
    worker = asyncio.create_task(
        app.run_worker_async(concurrency=spec["concurrency"], install_signal_handlers=False)
    )
    await handler.finished.wait()
    worker.cancel()
    await asyncio.gather(worker, return_exceptions=True)
    end = time.monotonic()
    await app.close_async()
    return {"start": start, "end": end, "count": handler.done, "latencies": handler.latencies}


def _sync(coroutine_function: Any) -> Any:
    def run(spec: Spec) -> dict[str, Any]:
        result: dict[str, Any] = asyncio.run(coroutine_function(spec))
        return result

    return run


if __name__ == "__main__":
    logging.getLogger("procrastinate").setLevel(logging.WARNING)
    run_driver(
        {
            "enqueue_single": _sync(_enqueue_single),
            "enqueue_batch": _sync(_enqueue_batch),
            "process": _sync(_process),
            "latency_worker": _sync(_latency_worker),
            "produce": _sync(_produce),
        }
    )
