"""mailfathom's crash-safe email pipeline under the benchmark (project venv, public API).

``record``: ``mf.outbox.record_many`` in batches of ``spec['batch']`` messages (one
transaction per batch: the frozen bytes and the delivery jobs), or with ``batch`` 1
``mf.outbox.record`` one message per call (each its own transaction). ``deliver``:
a worker drains the delivery jobs with ``run(burst=True)``; each message goes
Recorded → TransmissionBegun (committed before the body) → Sent (committed after
the server's 2xx). The messages are the very bytes the smtplib ceiling sends.
"""

from __future__ import annotations

import time
from typing import Any

from bench.drivers.protocol import Spec, await_go, run_driver
from bench.drivers.smtp_loop import RECIPIENT, SENDER, message
from mailfathom import MailFathom, OutgoingEmailStage


def _app(spec: Spec) -> MailFathom:
    mf = MailFathom(spec["url"], smtp_url=f"smtp://127.0.0.1:{spec['port']}?starttls=off")
    if spec.get("install"):
        mf.migrate()
    mf.jobs.counts()  # opens the connection before the clock starts
    return mf


def record(spec: Spec) -> dict[str, Any]:
    """Record ``spec['n']`` 4 KB messages: ``record_many`` per ``spec['batch']`` of them,
    or one ``record`` call (transaction) each when the batch is 1."""
    mf = _app(spec)
    payloads = [message(i) for i in range(spec["n"])]
    batch = int(spec.get("batch", 1))
    start = await_go()
    if batch == 1:
        for payload in payloads:
            mf.outbox.record(payload, sender=SENDER, recipients=[RECIPIENT])
    else:
        for first in range(0, len(payloads), batch):
            mf.outbox.record_many(
                payloads[first : first + batch], sender=SENDER, recipients=[RECIPIENT]
            )
    end = time.monotonic()
    mf.close()
    return {"start": start, "end": end, "count": spec["n"]}


def deliver(spec: Spec) -> dict[str, Any]:
    """Deliver everything recorded; returns once the last Sent is committed."""
    mf = _app(spec)
    worker = mf.worker(concurrency=spec["concurrency"])
    start = await_go()
    worker.run(burst=True)
    end = time.monotonic()
    sent = mf.outbox.counts()[OutgoingEmailStage.SENT]
    mf.close()
    return {"start": start, "end": end, "count": sent}


if __name__ == "__main__":
    run_driver({"record": record, "deliver": deliver})
