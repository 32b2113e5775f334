"""What the worker's per-attempt observability hook costs, alone, metrics off and on.

    python -m bench.metrics_hook                      # CPU time, best of --repeat runs
    python -m bench.metrics_hook --callgrind          # instruction counts (valgrind)

The worker calls ``attempt_started`` and ``attempt_ended`` (mailfathom.observability.
hooks) once each per attempt. This times ``--calls`` pairs of those calls on one real
attempt (a job enqueued into a temporary SQLite file), with nothing installed (the
default: a global read or two) and with the Prometheus metrics installed (one lock,
a dictionary look-up and two bisections). CPU time is the best of ``--repeat`` runs,
so that another process's burst on a shared machine cannot inflate it.

It also times what a scrape costs the worker's process (the families built and
written as text, the database gauges served from their cache; 20 kinds on 5 queues
with every outcome), a cost per second of scrape interval rather than per job.

``--callgrind`` counts instructions instead, which no other process can disturb: it
runs this script under ``valgrind --tool=callgrind`` with 0 and with ``--calls``
pairs for each setting, and divides the difference by ``--calls``. With
``--worker N`` it counts a whole worker's instructions per job instead: a burst worker
draining ``N`` no-op jobs from a SQLite file, metrics off and on, minus a run that
only enqueues them, divided by ``N`` (so the hook's share of a job can be read off).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from prometheus_client import generate_latest

from mailfathom import MailFathom
from mailfathom.jobs.worker.runner import Running
from mailfathom.observability import hooks, metrics
from mailfathom.observability.gauges import DatabaseGauges

_COLLECTED = re.compile(r"Collected\s*:\s*(\d+)")


def attempt() -> Running:
    """One real attempt in progress: a job enqueued and claimed on a temporary SQLite."""
    with (
        tempfile.TemporaryDirectory(prefix="mailfathom-hook-") as folder,
        MailFathom(f"sqlite:///{Path(folder) / 'hook.db'}") as mf,
    ):
        mf.migrate()
        mf.enqueue("bench.noop", {})
        (job,) = mf.queue.claim("bench", 1, timedelta(seconds=30))
        now = mf.clock.now()
    began = time.monotonic()
    return Running(job=job, kind=None, mode="thread", began=began, started_at=now, deadline=None)


def run_calls(running: Running, calls: int) -> float:
    """``calls`` start/end pairs; the CPU seconds they took."""
    started, ended = hooks.attempt_started, hooks.attempt_ended
    began = time.process_time()
    for _ in range(calls):
        started(running)
        ended(running, "Succeeded")
    return time.process_time() - began


def scrape_cost(repeat: int) -> float:
    """Microseconds of CPU one scrape takes: 100 series (20 kinds x 5 queues), each with
    every outcome, and the database gauges from their cache; best of ``repeat`` x 50."""
    with (
        tempfile.TemporaryDirectory(prefix="mailfathom-hook-") as folder,
        MailFathom(f"sqlite:///{Path(folder) / 'hook.db'}") as mf,
    ):
        mf.migrate()
        installed = metrics.install()
        try:
            installed.registry.register(DatabaseGauges(mf.store, mf.clock, min_interval=3600))
            now = mf.clock.now()
            for kind in range(20):
                for queue in range(5):
                    for outcome in ("Succeeded", "Failed", "ExecutionTimeout"):
                        installed.attempt_ended(f"k{kind}", f"q{queue}", outcome, 0.01, now, now)
            generate_latest(installed.registry)  # the gauges' one read, then cached
            best = float("inf")
            for _ in range(repeat):
                began = time.process_time()
                for _ in range(50):
                    generate_latest(installed.registry)
                best = min(best, (time.process_time() - began) / 50)
        finally:
            metrics.uninstall()
    return best * 1e6


def timed(calls: int, repeat: int) -> dict[str, float]:
    """Nanoseconds of CPU per attempt, best of ``repeat``, metrics off and on."""
    running = attempt()
    result: dict[str, float] = {}
    for name in ("off", "on"):
        if name == "on":
            metrics.install()
        try:
            best = min(run_calls(running, calls) for _ in range(repeat))
        finally:
            metrics.uninstall()
        result[f"{name}_ns"] = best * 1e9 / calls
    result["metrics_ns"] = result["on_ns"] - result["off_ns"]
    result["scrape_us"] = scrape_cost(repeat)
    return result


def drain(jobs: int, *, run: bool) -> None:
    """Enqueue ``jobs`` no-op jobs into a temporary SQLite file; drain them when ``run``."""
    with (
        tempfile.TemporaryDirectory(prefix="mailfathom-hook-") as folder,
        MailFathom(f"sqlite:///{Path(folder) / 'drain.db'}") as mf,
    ):
        mf.migrate()

        @mf.job("bench.noop")
        def noop(ctx: object) -> None:
            pass

        mf.enqueue_many("bench.noop", [{}] * jobs)
        if run and mf.worker(concurrency=10).run(burst=True) != jobs:
            raise RuntimeError("the worker did not run every job")


def _instructions(setting: str, calls: int, *extra: str) -> int:
    command = [
        "valgrind",
        "--tool=callgrind",
        "--callgrind-out-file=/dev/null",
        sys.executable,
        "-m",
        "bench.metrics_hook",
        "--inner",
        setting,
        "--calls",
        str(calls),
        *extra,
    ]
    environment = {**os.environ, "PYTHONHASHSEED": "0"}
    done = subprocess.run(command, capture_output=True, text=True, env=environment, check=True)
    found = _COLLECTED.search(done.stderr)
    if found is None:
        raise RuntimeError(f"callgrind printed no instruction count: {done.stderr[-500:]}")
    return int(found.group(1))


def counted(calls: int) -> dict[str, float]:
    """Instructions per attempt under callgrind, metrics off and on."""
    result: dict[str, float] = {}
    for setting in ("off", "on"):
        base = _instructions(setting, 0)
        result[f"{setting}_instructions"] = (_instructions(setting, calls) - base) / calls
    result["metrics_instructions"] = result["on_instructions"] - result["off_instructions"]
    return result


def counted_worker(jobs: int) -> dict[str, float]:
    """A worker's instructions per no-op job under callgrind, metrics off and on."""
    base = _instructions("off", jobs, "--inner-worker", "enqueue")
    result: dict[str, float] = {}
    for setting in ("off", "on"):
        drained = _instructions(setting, jobs, "--inner-worker", "drain")
        result[f"worker_{setting}_instructions"] = (drained - base) / jobs
    result["worker_ratio"] = result["worker_on_instructions"] / result["worker_off_instructions"]
    return result


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run the benchmark; print what it found; return the measurements."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--callgrind", action="store_true", help="count instructions")
    parser.add_argument("--inner", choices=("off", "on"), help=argparse.SUPPRESS)
    parser.add_argument("--inner-worker", choices=("enqueue", "drain"), help=argparse.SUPPRESS)
    parser.add_argument("--worker", type=int, default=0, help="with --callgrind: N jobs")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.inner_worker is not None:  # one worker run under callgrind
        if args.inner == "on":
            metrics.install()
        drain(args.calls, run=args.inner_worker == "drain")
        return {}
    if args.inner is not None:  # one run under callgrind
        running = attempt()
        if args.inner == "on":
            metrics.install()
        run_calls(running, args.calls)
        return {}
    if args.callgrind and args.worker:
        result: dict[str, Any] = {"jobs": args.worker, **counted_worker(args.worker)}
        text = (
            f"a burst worker under callgrind, per no-op job: "
            f"{result['worker_off_instructions']:,.0f} instructions with nothing installed, "
            f"{result['worker_on_instructions']:,.0f} with metrics on "
            f"(on/off {result['worker_ratio']:.3f})"
        )
    elif args.callgrind:
        result = {"calls": args.calls, **counted(args.calls)}
        text = (
            f"per attempt, under callgrind: {result['off_instructions']:,.0f} instructions "
            f"with nothing installed, {result['on_instructions']:,.0f} with metrics on: "
            f"metrics cost {result['metrics_instructions']:,.0f} instructions an attempt"
        )
    else:
        result = {"calls": args.calls, "repeat": args.repeat, **timed(args.calls, args.repeat)}
        text = (
            f"per attempt, best of {args.repeat} x {args.calls:,} calls: "
            f"{result['off_ns']:,.0f} ns of CPU with nothing installed, "
            f"{result['on_ns']:,.0f} ns with metrics on: metrics cost "
            f"{result['metrics_ns']:,.0f} ns an attempt; one scrape (100 series) "
            f"{result['scrape_us']:,.0f} µs of CPU"
        )
    print(json.dumps(result) if args.json else text)
    return result


if __name__ == "__main__":
    main()
