"""``enqueue_many`` holds a bounded amount of memory per job, whatever the batch size.

The bound (docs/operations.md, "Large batches"): besides the caller's payloads, about
0.5 KiB per job (its returned ``EnqueuedJob``, its payload's JSON text and the copy it
returns) on either store; the test allows 0.75 KiB. SQLite used to keep every inserted row
whole until the call returned: 5.2 KiB per job, 5.4 GB for a million tiny jobs. Peak
memory is the child process's ``VmHWM``, so the test runs the batch in a process of its
own (``ru_maxrss`` would keep the peak of the test process it was forked from).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow

JOBS = 100_000
BYTES_PER_JOB = 768  # about 0.5 KiB measured; an inserted row kept per job adds 0.45 KiB

MEASURE = """
import json, sys
from mailfathom import MailFathom

def peak_kib():  # VmHWM starts anew at exec (ru_maxrss keeps the forking parent's peak)
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))

with MailFathom(sys.argv[1]) as mf:
    mf.migrate()
    payloads = [{"n": n} for n in range(int(sys.argv[2]))]
    before = peak_kib()
    jobs = mf.enqueue_many("memory.probe", payloads)
    after = peak_kib()
    assert len(jobs) == len(payloads) and jobs[-1].payload == payloads[-1]
    print(json.dumps({"grew_kib": after - before, "jobs": mf.jobs.counts()["Pending"]}))
"""


def test_a_large_batch_holds_a_bounded_amount_per_job(database_url: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, database_url, str(JOBS)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["jobs"] == JOBS
    per_job = report["grew_kib"] * 1024 / JOBS
    assert per_job < BYTES_PER_JOB, f"{per_job:.0f} bytes per job"
