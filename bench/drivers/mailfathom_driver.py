"""mailfathom under the benchmark, through its public API only (runs in the project venv)."""

from __future__ import annotations

import time
from typing import Any

from bench.drivers.protocol import Spec, await_go, memory_kb, pace, run_driver
from mailfathom import MailFathom

KIND = "bench.noop"


class Counter:
    """Counts handled jobs; records latencies and memory checkpoints on the way."""

    def __init__(self, spec: Spec) -> None:
        self.done = 0
        self.last = 0.0
        self.latencies: list[float] = []
        self.checkpoint = int(spec.get("checkpoint", 0))
        self.memory_at_checkpoint: dict[str, int] = {}
        self.stop_after = int(spec.get("count", 0))
        self.on_last: Any = None

    def handle(self, t: float | None = None) -> None:
        now = time.monotonic()
        if t is not None:
            self.latencies.append((now - t) * 1000.0)
        self.done += 1
        self.last = now
        if self.done == self.checkpoint:
            self.memory_at_checkpoint = memory_kb()
        if self.done == self.stop_after and self.on_last is not None:
            self.on_last()


def _app(spec: Spec, counter: Counter | None = None) -> MailFathom:
    mf = MailFathom(spec["url"])
    if spec.get("install"):
        mf.migrate()
    if counter is not None:

        def noop(ctx: Any, i: int = 0, t: float | None = None) -> None:
            counter.handle(t)

        mf.job(KIND)(noop)
    mf.jobs.counts()  # opens the connection (pool) before the clock starts
    return mf


def enqueue_single(spec: Spec) -> dict[str, Any]:
    """One job per transaction."""
    mf = _app(spec)
    start = await_go()
    for i in range(spec["n"]):
        mf.enqueue(KIND, {"i": i})
    end = time.monotonic()
    mf.close()
    return {"start": start, "end": end, "count": spec["n"]}


def enqueue_batch(spec: Spec) -> dict[str, Any]:
    """``enqueue_many`` in batches of ``spec['batch']``."""
    mf = _app(spec)
    n, batch = spec["n"], spec["batch"]
    start = await_go()
    for first in range(0, n, batch):
        mf.enqueue_many(KIND, [{"i": i} for i in range(first, min(n, first + batch))])
    end = time.monotonic()
    mf.close()
    return {"start": start, "end": end, "count": n}


def process(spec: Spec) -> dict[str, Any]:
    """Drain what is enqueued with ``run(burst=True)``: it returns once completions are durable."""
    counter = Counter(spec)
    mf = _app(spec, counter)
    worker = mf.worker(concurrency=spec["concurrency"])
    start = await_go()
    worker.run(burst=True)
    end = time.monotonic()
    memory = memory_kb()
    mf.close()
    return {
        "start": start,
        "end": end,
        "count": counter.done,
        "memory_at_checkpoint": counter.memory_at_checkpoint,
        "memory_at_end": memory,
    }


def latency_worker(spec: Spec) -> dict[str, Any]:
    """An idle worker that records enqueue→start for ``spec['count']`` jobs, then stops."""
    counter = Counter(spec)
    mf = _app(spec, counter)
    worker = mf.worker(concurrency=spec["concurrency"])
    counter.on_last = worker.stop
    start = await_go()
    worker.run()
    end = time.monotonic()
    mf.close()
    return {"start": start, "end": end, "count": counter.done, "latencies": counter.latencies}


def produce(spec: Spec) -> dict[str, Any]:
    """Enqueue ``spec['count']`` jobs one per transaction at ``spec['rate']`` per second."""
    mf = _app(spec)
    start = await_go()
    for i in pace(spec["count"], spec["rate"]):
        mf.enqueue(KIND, {"i": i, "t": time.monotonic()})
    end = time.monotonic()
    mf.close()
    return {"start": start, "end": end, "count": spec["count"]}


if __name__ == "__main__":
    run_driver(
        {
            "enqueue_single": enqueue_single,
            "enqueue_batch": enqueue_batch,
            "process": process,
            "latency_worker": latency_worker,
            "produce": produce,
        }
    )
