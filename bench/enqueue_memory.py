"""Peak memory of one large ``enqueue_many`` call, on SQLite and on PostgreSQL.

Each store and way of calling runs in a fresh Python process of its own (peak RSS is
per process) that enqueues ``--jobs`` payloads ``{"n": i}`` in ONE ``enqueue_many``
call (one transaction), in one of two ways:

* ``list-jobs``     — the payloads built as a list first, the call returning a list of
  ``EnqueuedJob`` (the default ``returning="jobs"``): both grow with the batch;
* ``generator-ids`` — the payloads given as a generator, read chunk by chunk, the call
  returning ``BatchIds`` (``returning="ids"``, 8 bytes a job): bounded by a chunk.

It reports, in MB:

* ``start``     — the process before the payloads (interpreter, mailfathom, a store);
* ``payloads``  — what the caller's own list of dicts took (0 for a generator);
* ``returned``  — what the process still holds after the call: what it returned;
* ``working``   — how far the call went above that while it ran (its chunk's payloads,
  texts, ids and parameters: bounded, whatever the batch size);
* ``peak``      — the process's peak resident memory (``VmHWM``);

and the call's time and jobs per second.

    python -m bench.enqueue_memory                 # 1,000,000 jobs, both stores, both ways
    python -m bench.enqueue_memory --jobs 100000 --stores sqlite --modes generator-ids --json
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

__all__ = ["MODES", "STORES", "main", "measure"]

STORES = ("sqlite", "postgresql")
MODES = ("list-jobs", "generator-ids")

_CHILD = """
import json, sys, time
from mailfathom import MailFathom

def status(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024

url, count, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
with MailFathom(url) as mf:
    mf.migrate()
    start = status("VmRSS")
    if mode == "list-jobs":
        payloads = [{"n": n} for n in range(count)]
    else:
        payloads = ({"n": n} for n in range(count))
    before = status("VmRSS")
    began = time.perf_counter()
    if mode == "list-jobs":
        result = mf.enqueue_many("memory.probe", payloads)
    else:
        result = mf.enqueue_many("memory.probe", payloads, returning="ids")
    seconds = time.perf_counter() - began
    after, peak = status("VmRSS"), status("VmHWM")
    assert len(result) == count
    if mode == "list-jobs":
        assert result[-1].payload == {"n": count - 1}
    else:
        assert result.created_count == count
        assert mf.jobs.get(result[-1]).payload == {"n": count - 1}
    assert mf.jobs.counts()["Pending"] == count
    print(json.dumps({
        "jobs": count, "seconds": seconds, "start": start,
        "payloads": before - start, "returned": after - before,
        "working": peak - after, "peak": peak,
    }))
"""


def measure(store: str, jobs: int, mode: str = "generator-ids") -> dict[str, Any]:
    """One ``enqueue_many`` of ``jobs`` jobs called the ``mode`` way on a new database of
    ``store``, in a child process."""
    if store == "sqlite":
        with tempfile.TemporaryDirectory() as folder:
            return _child(f"sqlite:///{Path(folder) / 'memory.db'}", jobs, mode)
    with scratch_schema("memory") as schema:
        return _child(schema_url(schema), jobs, mode)


def _child(url: str, jobs: int, mode: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, url, str(jobs), mode],
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
    parser = argparse.ArgumentParser(
        prog="python -m bench.enqueue_memory",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--jobs", type=int, default=1_000_000, help="jobs in the one call")
    parser.add_argument("--stores", nargs="+", choices=STORES, default=list(STORES))
    parser.add_argument(
        "--modes", nargs="+", choices=MODES, default=list(MODES), help="ways of calling"
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error("--jobs must be at least 1")
    reports = {
        store: {mode: measure(store, args.jobs, mode) for mode in args.modes}
        for store in args.stores
    }
    if args.json:
        print(json.dumps(reports, indent=2))
        return 0
    print(f"one enqueue_many of {args.jobs:,} jobs, MB (peak RSS of its own process)\n")
    print("| store | way | start | payloads | returned | working | peak | seconds | jobs/s |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for store, modes in reports.items():
        for mode, r in modes.items():
            figures = " | ".join(
                f"{r[name]:,.0f}" for name in ("start", "payloads", "returned", "working", "peak")
            )
            rate = r["jobs"] / r["seconds"]
            print(f"| {store} | {mode} | {figures} | {r['seconds']:.1f} | {rate:,.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
