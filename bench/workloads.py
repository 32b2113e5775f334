"""The job workloads, each on a fresh database, measured the same way for every system."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from bench.databases import Target, fresh_database
from bench.runner import DriverError, start_all
from bench.sizes import Sizes
from bench.systems import System
from bench.watch import CompletionWatch

__all__ = ["Bench", "Sample", "percentile"]

_MIB = 1024.0


@dataclass(frozen=True)
class Sample:
    """One measured figure of one system in one round."""

    system: str
    metric: str
    round: int
    value: float
    extra: dict[str, Any] = field(default_factory=dict)


def percentile(values: list[float], fraction: float) -> float:
    """Nearest-rank percentile (``fraction`` of 0.5 is the median)."""
    if not values:
        raise ValueError("no values")
    ordered = sorted(values)
    rank = max(1, round(fraction * len(ordered) + 0.5 - 1e-9))
    return ordered[min(rank, len(ordered)) - 1]


@dataclass
class Bench:
    """Runs workloads for systems, one after another, with their drivers in subprocesses."""

    sizes: Sizes
    admin_url: str
    data_dir: Path
    peers_python: str
    profile_dir: Path | None = None
    db_prefix: str = "bench_"
    django_python: str = ""
    """The Django email peers' interpreter (``bench/.peers/django-venv``), when they run."""

    def python(self, system: System) -> str:
        """The interpreter of the system's own virtual environment."""
        if system.venv == "django":
            return self.django_python
        return sys.executable if system.venv == "project" else self.peers_python

    def spec(self, system: System, target: Target, task: str, **fields: Any) -> dict[str, Any]:
        """A driver spec: the system's options, where its database is, the task."""
        return {**system.options, **target.spec(), "task": task, **fields}

    def fresh(self, system: System) -> Any:
        """A fresh database of the system's kind (a context manager yielding its Target)."""
        return fresh_database(
            system.database,
            system.key,
            admin_url=self.admin_url,
            data_dir=self.data_dir,
            prefix=self.db_prefix,
        )

    def one(self, system: System, spec: dict[str, Any], timeout: float) -> dict[str, Any]:
        """Run one driver through ready/go to its result."""
        (driver,) = start_all(self.python(system), system.driver, [spec])
        driver.go()
        return driver.result(timeout)

    # -- workloads ---------------------------------------------------------------------

    def enqueue_single(self, system: System, round_: int) -> list[Sample]:
        """Jobs per second, one job per committed transaction."""
        n = self.sizes.single_jobs
        with self.fresh(system) as target:
            spec = self.spec(system, target, "enqueue_single", n=n, install=True)
            result = self.one(system, spec, timeout=120 + n / 20)
        return [Sample(system.key, "enqueue_single", round_, n / _elapsed([result]))]

    def batch_and_process(
        self, system: System, round_: int, *, timed_batch: bool, processing: bool
    ) -> list[Sample]:
        """Batch-enqueue ``jobs`` (timed when the system has batches), then drain them."""
        n = self.sizes.jobs
        samples = []
        with self.fresh(system) as target:
            spec = self.spec(
                system, target, system.fill, n=n, batch=self.sizes.enqueue_batch, install=True
            )
            result = self.one(system, spec, timeout=120 + n / 50)
            if timed_batch:
                samples.append(Sample(system.key, "enqueue_batch", round_, n / _elapsed([result])))
            if processing:
                analyze(target)
                results = self._process(
                    system,
                    target,
                    n,
                    checkpoint=0,
                    label=f"r{round_}",
                    budget_s=self.sizes.process_budget_s,
                )
                done = sum(int(result["count"]) for result in results)
                extra = {"jobs": done} if done != n else {}
                rate = done / _elapsed(results)
                samples.append(Sample(system.key, "process", round_, rate, extra))
        return samples

    def _process(
        self,
        system: System,
        target: Target,
        n: int,
        *,
        checkpoint: int,
        label: str,
        budget_s: float = 0.0,
    ) -> list[dict[str, Any]]:
        spec = self.spec(
            system, target, "process", expect=n, checkpoint=checkpoint, budget_s=budget_s
        )
        profile = None
        if self.profile_dir is not None and system.role == "ours":
            profile = self.profile_dir / f"{system.key}-{label}"
        drivers = start_all(
            self.python(system), system.driver, [spec] * system.processes, profile=profile
        )
        watch = CompletionWatch(target, system.unfinished_sql) if system.unfinished_sql else None
        for driver in drivers:
            driver.go()
        if watch is not None:
            watch.start()
        try:
            results = [driver.result(timeout=120 + (budget_s or n / 20)) for driver in drivers]
        finally:
            for driver in drivers:
                driver.kill()
            seen = watch.stop() if watch is not None else None
        done = sum(int(result["count"]) for result in results)
        if any(result.get("stopped_early") for result in results):
            return results  # the budget ran out: the rate is over the jobs done by then
        if done != n:
            raise DriverError(f"{system.key}: {done} of {n} jobs were processed")
        if watch is not None and watch.error is not None:
            raise DriverError(f"{system.key}: watching for completion failed: {watch.error}")
        if watch is not None and seen is None:
            raise DriverError(f"{system.key}: the workers returned with jobs still unfinished")
        if seen is not None:  # the database saw the last completion before the worker returned
            for result in results:
                result["returned"] = result["end"]
                result["end"] = min(float(result["end"]), seen)
        return results

    def latency(self, system: System, round_: int) -> list[Sample]:
        """enqueue→start at a steady rate, with the worker idle and waiting before it starts."""
        count, rate = self.sizes.latency_jobs, self.sizes.latency_rate
        with self.fresh(system) as target:
            # The schema first, so the worker and the producer start on an installed database.
            setup = self.spec(system, target, "enqueue_single", n=0, install=True)
            self.one(system, setup, timeout=120)
            worker_spec = self.spec(system, target, "latency_worker", count=count)
            (worker,) = start_all(self.python(system), system.driver, [worker_spec])
            worker.go()
            try:
                time.sleep(1.0)  # the worker is idle before the first job arrives
                producer_spec = self.spec(system, target, "produce", count=count, rate=rate)
                self.one(system, producer_spec, timeout=120 + 2 * count / rate)
                result = worker.result(timeout=120)
            finally:
                worker.kill()
        latencies = [float(value) for value in result["latencies"]]
        if len(latencies) != count:
            raise DriverError(f"{system.key}: {len(latencies)} of {count} latencies came back")
        return [
            Sample(system.key, "latency_p50", round_, percentile(latencies, 0.50)),
            Sample(system.key, "latency_p99", round_, percentile(latencies, 0.99)),
        ]

    def memory(self, system: System, round_: int) -> list[Sample]:
        """One worker process through ``rss_jobs`` jobs: RSS at the checkpoint, at the end, peak."""
        n, checkpoint = self.sizes.rss_jobs, self.sizes.rss_checkpoint
        with self.fresh(system) as target:
            spec = self.spec(
                system, target, system.fill, n=n, batch=self.sizes.enqueue_batch, install=True
            )
            self.one(system, spec, timeout=300 + n / 50)
            analyze(target)
            (result,) = self._process(
                system,
                target,
                n,
                checkpoint=checkpoint,
                label="memory",
                budget_s=self.sizes.rss_budget_s,
            )
        extra = {"jobs": int(result["count"])} if result["count"] != n else {}
        at_end = result["memory_at_end"]["rss_kb"] / _MIB
        peak = result["memory_at_end"]["peak_kb"] / _MIB
        samples = [
            Sample(system.key, "rss_end", round_, at_end, extra),
            Sample(system.key, "rss_peak", round_, peak, extra),
        ]
        if result["memory_at_checkpoint"]:  # a system stopped before it has no growth figure
            at_checkpoint = result["memory_at_checkpoint"]["rss_kb"] / _MIB
            samples.append(Sample(system.key, "rss_checkpoint", round_, at_checkpoint))
        return samples


def analyze(target: Target) -> None:
    """Fresh planner statistics after the bulk fill, as autovacuum would soon give them.

    Without them PostgreSQL plans a just-filled table as if it were empty, and some
    queues' claim queries then scan the whole table per job.
    """
    if target.dialect == "postgresql":
        with psycopg.connect(target.url, autocommit=True) as conn:
            conn.execute("ANALYZE")


def _elapsed(results: list[dict[str, Any]]) -> float:
    """From the first driver's go to the last one's end."""
    start = min(float(result["start"]) for result in results)
    end = max(float(result["end"]) for result in results)
    return max(end - start, 1e-9)
