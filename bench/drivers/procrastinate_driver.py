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

from bench.drivers.protocol import Spec, Tally, await_go, pace, run_driver


def _app(spec: Spec) -> Any:
    return procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=spec["url"]))


async def _with_task(spec: Spec, tally: Tally) -> tuple[Any, Any]:
    app = _app(spec)

    async def noop(i: int = 0, t: float | None = None) -> None:
        tally.handle(t)

    task = app.task(name="noop")(noop)
    await app.open_async()
    if spec.get("install"):
        await app.schema_manager.apply_schema_async()
    return app, task


async def _enqueue_single(spec: Spec) -> dict[str, Any]:
    app, task = await _with_task(spec, Tally(spec))
    start = await_go()
    for i in range(spec["n"]):
        await task.defer_async(i=i)
    end = time.monotonic()
    await app.close_async()
    return {"start": start, "end": end, "count": spec["n"]}


async def _enqueue_batch(spec: Spec) -> dict[str, Any]:
    app, task = await _with_task(spec, Tally(spec))
    n, batch = spec["n"], spec["batch"]
    start = await_go()
    for first in range(0, n, batch):
        await task.batch_defer_async(*({"i": i} for i in range(first, min(n, first + batch))))
    end = time.monotonic()
    await app.close_async()
    return {"start": start, "end": end, "count": n}


async def _produce(spec: Spec) -> dict[str, Any]:
    app, task = await _with_task(spec, Tally(spec))
    start = await_go()
    for i in pace(spec["count"], spec["rate"]):
        await task.defer_async(i=i, t=time.monotonic())
    end = time.monotonic()
    await app.close_async()
    return {"start": start, "end": end, "count": spec["count"]}


async def _work(spec: Spec, *, wait: bool) -> dict[str, Any]:
    """Run the worker until it drains (``wait=False``) or the tally says stop."""
    tally = Tally(spec)
    app, _ = await _with_task(spec, tally)
    stop = asyncio.Event()
    tally.on_stop = stop.set
    start = await_go()
    tally.started(start)
    worker = asyncio.create_task(
        app.run_worker_async(
            concurrency=spec["concurrency"], wait=wait, install_signal_handlers=False
        )
    )
    stopping = asyncio.create_task(stop.wait())
    await asyncio.wait({worker, stopping}, return_when=asyncio.FIRST_COMPLETED)
    if not worker.done():
        worker.cancel()  # procrastinate stops gracefully when its task is cancelled
    stopping.cancel()
    await asyncio.gather(worker, stopping, return_exceptions=True)
    end = time.monotonic()
    await app.close_async()
    return tally.report(start, end)


async def _process(spec: Spec) -> dict[str, Any]:
    return await _work(spec, wait=False)


async def _latency_worker(spec: Spec) -> dict[str, Any]:
    return await _work(spec, wait=True)


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
