"""huey's ``SqliteHuey`` under the benchmark (runs in the peers' venv).

Its defaults: WAL, SQLite's default ``synchronous`` (FULL), one ``INSERT`` per
enqueue. The consumer runs in this process with ``spec['workers']`` threads. huey
deletes a task when it dequeues it and writes nothing when a task returning None
finishes, so its "completion" is the end of the handler: there is no completion
write to wait for (and no way to find a task again if the worker dies mid-run).
huey has no batch enqueue.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from typing import Any

from huey import SqliteHuey

from bench.drivers.protocol import Spec, Tally, await_go, pace, run_driver


def _huey(spec: Spec, tally: Tally) -> tuple[Any, Any]:
    huey = SqliteHuey("bench", filename=spec["path"])

    def noop(i: int = 0, t: float | None = None) -> None:
        tally.handle(t)

    return huey, huey.task(name="noop")(noop)


def enqueue_single(spec: Spec) -> dict[str, Any]:
    """One task per call, each its own committed INSERT."""
    _, task = _huey(spec, Tally(spec))
    start = await_go()
    for i in range(spec["n"]):
        task(i)
    return {"start": start, "end": time.monotonic(), "count": spec["n"]}


def fill(spec: Spec) -> dict[str, Any]:
    """Untimed set-up for the processing runs: huey's own rows, in one transaction.

    huey has no batch enqueue, so the rows its ``enqueue`` would write (the same
    serialised messages) are inserted with one commit instead of one per task.
    """
    huey, task = _huey(spec, Tally(spec))
    rows = [(huey.name, huey.serialize_task(task.s(i)), 0) for i in range(spec["n"])]
    start = await_go()
    conn = sqlite3.connect(spec["path"], isolation_level=None, timeout=30.0)
    conn.execute("BEGIN IMMEDIATE")
    conn.executemany("INSERT INTO task (queue, data, priority) VALUES (?, ?, ?)", rows)
    conn.execute("COMMIT")
    conn.close()
    return {"start": start, "end": time.monotonic(), "count": spec["n"]}


def produce(spec: Spec) -> dict[str, Any]:
    """Enqueue at a steady rate for the latency run."""
    _, task = _huey(spec, Tally(spec))
    start = await_go()
    for i in pace(spec["count"], spec["rate"]):
        task(i, time.monotonic())
    return {"start": start, "end": time.monotonic(), "count": spec["count"]}


def _consume(spec: Spec) -> dict[str, Any]:
    tally = Tally({**spec, "count": spec.get("count") or spec.get("expect") or 0})
    finished = threading.Event()
    tally.on_stop = finished.set
    huey, _ = _huey(spec, tally)
    consumer = huey.create_consumer(workers=spec["workers"], worker_type="thread", periodic=False)
    start = await_go()
    tally.started(start)
    consumer.start()
    finished.wait()
    end = tally.last  # huey writes nothing at completion: the last handler's return is the end
    consumer.stop(graceful=True)
    return tally.report(start, end)


def process(spec: Spec) -> dict[str, Any]:
    """Run the consumer until ``spec['expect']`` tasks have finished."""
    return _consume(spec)


def latency_worker(spec: Spec) -> dict[str, Any]:
    """An idle consumer that records enqueue→start for ``spec['count']`` tasks."""
    return _consume(spec)


if __name__ == "__main__":
    run_driver(
        {
            "enqueue_single": enqueue_single,
            "fill": fill,
            "process": process,
            "latency_worker": latency_worker,
            "produce": produce,
        }
    )
