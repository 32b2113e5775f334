"""mailfathom through its real command line: ``mailfathom worker --processes N --burst``.

The processing run starts one supervisor (the CLI) with ``spec['cli_processes']``
worker processes of ``spec['concurrency']`` each and waits for it to exit. The rate
is timed from the first job any worker ran (each notes it, see
``mailfathom_cli_app``) to the last completion, like the harness-started rows that
time from ``go`` after their start-up; ``startup_s`` says how long the supervisor
and its workers took to start. Enqueueing uses the library driver's tasks.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.drivers.mailfathom_driver import enqueue_batch, enqueue_single
from bench.drivers.protocol import Spec, await_go, run_driver
from mailfathom import JobState, MailFathom

ROOT = Path(__file__).resolve().parents[2]


def process(spec: Spec) -> dict[str, Any]:
    """Drain what is enqueued with ``mailfathom worker --processes N --burst``."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    command = [
        sys.executable,
        "-c",
        "from mailfathom.cli import main; main()",
        "worker",
        "--app",
        "bench.drivers.mailfathom_cli_app:mf",
        "--database",
        spec["url"],
        "--processes",
        str(spec["cli_processes"]),
        "--concurrency",
        str(spec["concurrency"]),
        "--burst",
        "--log-level",
        "warning",
    ]
    with tempfile.TemporaryDirectory(prefix="mf-bench-marks-") as marks:
        env["MF_BENCH_MARKS"] = marks
        go = await_go()
        status = subprocess.run(command, env=env, cwd=ROOT, check=False).returncode
        end = time.monotonic()
        firsts = [float(path.read_text()) for path in Path(marks).iterdir()]
    if status != 0:
        raise SystemExit(f"mailfathom worker --processes exited with status {status}")
    with MailFathom(spec["url"]) as mf:
        count = mf.jobs.counts()[JobState.SUCCEEDED]
    start = min(firsts) if firsts else go
    return {
        "start": start,
        "end": end,
        "count": count,
        "startup_s": start - go,
        "processes_that_ran_jobs": len(firsts),
        "stopped_early": False,
    }


if __name__ == "__main__":
    run_driver(
        {"enqueue_single": enqueue_single, "enqueue_batch": enqueue_batch, "process": process}
    )
