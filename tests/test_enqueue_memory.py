"""``enqueue_many`` and ``outbox.record_many`` hold a bounded amount of memory, whatever
the batch size.

The bounds (docs/operations.md, "Large batches"): returning jobs, besides the caller's
payloads, about 0.5 KiB per job (its returned ``EnqueuedJob``, its payload's JSON text and
the copy it returns) on either store; the test allows 0.75 KiB. SQLite used to keep every
inserted row whole until the call returned: 5.2 KiB per job, 5.4 GB for a million tiny
jobs. Given a generator and returning ids, a chunk's worth (about 10 MB for chunks of
10,000 jobs) and 8 bytes a job; ``record_many`` likewise, a chunk of messages and 8 bytes
a message. Peak memory is the child process's ``VmHWM``, so each test runs the batch in a
process of its own (``ru_maxrss`` would keep the peak of the test process it was forked
from).
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


def _run(script: str, *args: str) -> dict[str, int]:
    """Run ``script`` in a process of its own; what it printed, as JSON."""
    done = subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report: dict[str, int] = json.loads(done.stdout)
    return report


def test_a_large_batch_holds_a_bounded_amount_per_job(database_url: str) -> None:
    report = _run(MEASURE, database_url, str(JOBS))
    assert report["jobs"] == JOBS
    per_job = report["grew_kib"] * 1024 / JOBS
    assert per_job < BYTES_PER_JOB, f"{per_job:.0f} bytes per job"


#: A chunk's worth (its payloads, texts, parameters; measured 10-12 MB, the same for
#: 100,000 jobs as for a million) and 16 bytes a job (each id takes 8); a list of the
#: generator's payloads adds 0.23 KiB a job, returned jobs 0.45 KiB.
CHUNK_KIB = 16 * 1024
ID_BYTES = 16

MEASURE_IDS = """
import json, sys
from mailfathom import MailFathom

def peak_kib():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))

count = int(sys.argv[2])
with MailFathom(sys.argv[1]) as mf:
    mf.migrate()
    before = peak_kib()
    ids = mf.enqueue_many("memory.probe", ({"n": n} for n in range(count)), returning="ids")
    after = peak_kib()
    assert len(ids) == ids.created_count == count
    assert mf.jobs.get(ids[-1]).payload == {"n": count - 1}
    print(json.dumps({"grew_kib": after - before, "jobs": mf.jobs.counts()["Pending"]}))
"""


def test_a_generator_returning_ids_holds_a_chunk_and_8_bytes_a_job(database_url: str) -> None:
    report = _run(MEASURE_IDS, database_url, str(JOBS))
    assert report["jobs"] == JOBS
    bound = CHUNK_KIB + JOBS * ID_BYTES // 1024
    assert report["grew_kib"] < bound, f"{report['grew_kib']} KiB (at most {bound})"


EMAILS = 12_000
#: A chunk of 50 messages (their bytes, frozen records, rows read back: measured 1-3 MB)
#: and 64 bytes a message; returned records add 0.8 KiB a message.
EMAIL_CHUNK_KIB = 4 * 1024
EMAIL_BYTES = 64

MEASURE_EMAILS = """
import json, sys
from email.message import EmailMessage
from mailfathom import MailFathom

def peak_kib():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))

msg = EmailMessage()
msg["From"] = "shop@example.com"
msg["To"] = "user0@example.com"
msg["Subject"] = "Your order"
msg.set_content("Your order has shipped.")
template = bytes(msg)
count = int(sys.argv[2])
with MailFathom(sys.argv[1]) as mf:
    mf.migrate()
    mf.outbox.record_chunk = 50
    mf.outbox.record_many([template], sender="shop@example.com", recipients=["a@example.org"])
    before = peak_kib()
    ids = mf.outbox.record_many(
        (template.replace(b"user0@", b"user%d@" % n) for n in range(count)),
        envelopes=(("shop@example.com", [f"user{n}@example.com"]) for n in range(count)),
        returning="ids",
    )
    after = peak_kib()
    assert len(ids) == ids.created_count == count
    assert mf.outbox.get(ids[-1]).recipients[0].address == f"user{count - 1}@example.com"
    print(json.dumps({"grew_kib": after - before, "emails": len(mf.outbox.list(limit=500))}))
"""


def test_record_many_of_a_generator_returning_ids_holds_a_chunk(database_url: str) -> None:
    report = _run(MEASURE_EMAILS, database_url, str(EMAILS))
    assert report["emails"] == 500
    bound = EMAIL_CHUNK_KIB + EMAILS * EMAIL_BYTES // 1024
    assert report["grew_kib"] < bound, f"{report['grew_kib']} KiB (at most {bound})"
