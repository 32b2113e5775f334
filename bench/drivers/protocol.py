"""The line protocol between the harness and a driver process (standard library only).

The harness starts ``python -m bench.drivers.<name> '<json spec>'``. The driver does
its untimed set-up (imports, connections, schema), prints ``ready``, and blocks until
the harness writes ``go``; it then does the timed work and prints one line
``result <json>``. Times are ``time.monotonic()`` readings, which on Linux come from
the system-wide ``CLOCK_MONOTONIC``: readings from different processes compare.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["Spec", "Tally", "await_go", "memory_kb", "pace", "run_driver"]

Spec = dict[str, Any]
Task = Callable[[Spec], dict[str, Any]]


def await_go() -> float:
    """Say ``ready``, wait for the harness's ``go``; returns the moment it came."""
    print("ready", flush=True)
    line = sys.stdin.readline()
    if line.strip() != "go":
        raise SystemExit(f"driver expected 'go' from the harness, got {line!r}")
    return time.monotonic()


def memory_kb() -> dict[str, int]:
    """This process's resident set now (``VmRSS``) and at its peak (``VmHWM``), in KiB."""
    found: dict[str, int] = {}
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            name, _, rest = line.partition(":")
            if name in ("VmRSS", "VmHWM"):
                found[name] = int(rest.split()[0])
    return {"rss_kb": found["VmRSS"], "peak_kb": found["VmHWM"]}


def run_driver(tasks: dict[str, Task]) -> None:
    """Read the spec from argv, run the task it names, print its result line."""
    if len(sys.argv) != 2:
        raise SystemExit("usage: python -m bench.drivers.<name> '<json spec>'")
    spec: Spec = json.loads(sys.argv[1])
    task = tasks.get(spec["task"])
    if task is None:
        raise SystemExit(f"this driver has no task {spec['task']!r}; it has {sorted(tasks)}")
    result = task(spec)
    print("result " + json.dumps(result), flush=True)


def pace(count: int, rate: float) -> Iterator[int]:
    """Yield ``0..count-1``, each no earlier than its slot at ``rate`` per second.

    A producer that falls behind catches up without sleeping, so the mean rate
    holds whenever the system can keep it.
    """
    start = time.monotonic()
    for index in range(count):
        due = start + index / rate
        wait = due - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        yield index


class Tally:
    """What a worker's handler keeps: jobs done, latencies, a memory checkpoint; when to stop.

    ``spec['count']`` stops the worker after that many jobs (the latency run);
    ``spec['budget_s']`` stops it that many seconds after ``go`` (the memory run of a
    system too slow to finish in time reports what it reached, and says so).
    Thread-safe: handlers may run on several threads.
    """

    def __init__(self, spec: Spec) -> None:
        self.done = 0
        self.last = 0.0
        self.latencies: list[float] = []
        self.checkpoint = int(spec.get("checkpoint", 0))
        self.memory_at_checkpoint: dict[str, int] = {}
        self.stop_after = int(spec.get("count", 0))
        self.budget = float(spec.get("budget_s", 0.0))
        self.deadline: float | None = None
        self.on_stop: Callable[[], None] | None = None
        self.stopped_early = False
        self._stopping = False
        self._lock = threading.Lock()

    def started(self, at: float) -> None:
        """The clock started at ``at``: the budget runs from here."""
        if self.budget > 0:
            self.deadline = at + self.budget

    def handle(self, t: float | None = None) -> None:
        """One job ran; ``t`` is its enqueue moment when latency is measured."""
        now = time.monotonic()
        with self._lock:
            if t is not None:
                self.latencies.append((now - t) * 1000.0)
            self.done += 1
            self.last = now
            if self.done == self.checkpoint:
                self.memory_at_checkpoint = memory_kb()
            over_budget = self.deadline is not None and now >= self.deadline
            stop = self.done == self.stop_after or over_budget
            if not stop or self._stopping:
                return
            self._stopping = True
            self.stopped_early = over_budget and self.done != self.stop_after
        if self.on_stop is not None:
            self.on_stop()

    def report(self, start: float, end: float) -> dict[str, Any]:
        """The result line's fields."""
        return {
            "start": start,
            "end": end,
            "count": self.done,
            "latencies": self.latencies,
            "memory_at_checkpoint": self.memory_at_checkpoint,
            "memory_at_end": memory_kb(),
            "stopped_early": self.stopped_early,
        }
