"""Peak memory of one large ``enqueue_many`` call, on SQLite and on PostgreSQL.

Each store runs in a fresh Python process of its own (peak RSS is per process) that
builds ``--jobs`` payloads ``{"n": i}`` as a list, as an application would, then
enqueues them in ONE ``enqueue_many`` call (one transaction). It reports, in MB:

* ``start``     — the process before the payloads (interpreter, mailfathom, a store);
* ``payloads``  — what the caller's own list of dicts took;
* ``returned``  — what the process still holds after the call: the returned list of
  ``EnqueuedJob``, each with its own copy of its payload;
* ``working``   — how far the call went above that while it ran (its chunk's texts,
  ids and parameters: bounded, whatever the batch size);
* ``peak``      — the process's peak resident memory (``VmHWM``).

    python -m bench.enqueue_memory                 # 1,000,000 jobs on both stores
    python -m bench.enqueue_memory --jobs 100000 --stores sqlite --json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.pg_common import schema_url, scratch_schema

__all__ = ["STORES", "main", "measure"]

STORES = ("sqlite", "postgresql")

_CHILD = """
import json, sys, time
from mailfathom import MailFathom

def status(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024

with MailFathom(sys.argv[1]) as mf:
    mf.migrate()
    start = status("VmRSS")
    payloads = [{"n": n} for n in range(int(sys.argv[2]))]
    before = status("VmRSS")
    began = time.perf_counter()
    jobs = mf.enqueue_many("memory.probe", payloads)
    seconds = time.perf_counter() - began
    after, peak = status("VmRSS"), status("VmHWM")
    assert len(jobs) == len(payloads) and jobs[-1].payload == payloads[-1]
    assert mf.jobs.counts()["Pending"] == len(payloads)
    print(json.dumps({
        "jobs": len(payloads), "seconds": seconds, "start": start,
        "payloads": before - start, "returned": after - before,
        "working": peak - after, "peak": peak,
    }))
"""


def measure(store: str, jobs: int) -> dict[str, Any]:
    """One ``enqueue_many`` of ``jobs`` jobs on a new database of ``store``, in a child."""
    if store == "sqlite":
        with tempfile.TemporaryDirectory() as folder:
            return _child(f"sqlite:///{Path(folder) / 'memory.db'}", jobs)
    with scratch_schema("memory") as schema:
        return _child(schema_url(schema), jobs)


def _child(url: str, jobs: int) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, url, str(jobs)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"the measuring process failed:\n{done.stderr}")
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def main(argv: list[str] | None = None) -> int:
    """Measure each store and print a table (or JSON with ``--json``)."""
    parser = argparse.ArgumentParser(prog="python -m bench.enqueue_memory", description=__doc__)
    parser.add_argument("--jobs", type=int, default=1_000_000, help="jobs in the one call")
    parser.add_argument("--stores", nargs="+", choices=STORES, default=list(STORES))
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error("--jobs must be at least 1")
    reports = {store: measure(store, args.jobs) for store in args.stores}
    if args.json:
        print(json.dumps(reports, indent=2))
        return 0
    print(f"one enqueue_many of {args.jobs:,} jobs, MB (peak RSS of its own process)\n")
    print("| store | start | payloads | returned | working | peak | jobs/s |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for store, r in reports.items():
        figures = " | ".join(
            f"{r[name]:,.0f}" for name in ("start", "payloads", "returned", "working", "peak")
        )
        print(f"| {store} | {figures} | {r['jobs'] / r['seconds']:,.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
