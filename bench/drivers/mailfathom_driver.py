"""mailfathom under the benchmark, through its public API only (runs in the project venv)."""

from __future__ import annotations

import time
from typing import Any

from bench.drivers.protocol import Spec, Tally, await_go, pace, run_driver
from mailfathom import MailFathom

KIND = "bench.noop"


def _app(spec: Spec, tally: Tally | None = None) -> MailFathom:
    mf = MailFathom(spec["url"])
    if spec.get("install"):
        mf.migrate()
    if tally is not None:

        def noop(ctx: Any, i: int = 0, t: float | None = None) -> None:
            tally.handle(t)

        # A fleet-wide limit (the "-limited" systems): every claim goes through flow control.
        mf.job(KIND, max_running=spec.get("max_running"))(noop)
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
    tally = Tally(spec)
    mf = _app(spec, tally)
    worker = mf.worker(concurrency=spec["concurrency"])
    tally.on_stop = worker.stop
    start = await_go()
    tally.started(start)
    worker.run(burst=True)
    end = time.monotonic()
    mf.close()
    return tally.report(start, end)


def latency_worker(spec: Spec) -> dict[str, Any]:
    """An idle worker that records enqueue→start for ``spec['count']`` jobs, then stops."""
    tally = Tally(spec)
    mf = _app(spec, tally)
    worker = mf.worker(concurrency=spec["concurrency"])
    tally.on_stop = worker.stop
    start = await_go()
    worker.run()
    end = time.monotonic()
    mf.close()
    return tally.report(start, end)


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
