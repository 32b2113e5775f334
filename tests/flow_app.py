"""The app flow-control crash tests run in worker processes (``--app flow_app:mf``).

Each handler appends ``<kind> <key> start|end <monotonic> <pid> <job id>`` lines to the
file named in its payload, opened with O_APPEND so lines from every process interleave
whole; CLOCK_MONOTONIC is one clock for every process on the machine.
"""

from __future__ import annotations

import os
import time

from mailfathom import JobContext, MailFathom

#: The limits the test checks the log against.
MAX_RUNNING = 4
MAX_PER_KEY = 1

# No clock-skew margin: the SIGKILLed worker's leases return one lease after it died.
mf = MailFathom(clock_skew=0)


def _note(log: str, kind: str, key: object, what: str, job_id: int) -> None:
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(
            fd, f"{kind} {key} {what} {time.monotonic():.6f} {os.getpid()} {job_id}\n".encode()
        )
    finally:
        os.close(fd)


def register(app: MailFathom) -> None:
    """Declare the test's kinds on ``app`` (the test's own app computes the limit keys at
    enqueue, as a producer must: it registers the kinds too)."""

    @app.job(
        "flow.limited",
        max_running=MAX_RUNNING,
        limit_key=lambda payload: payload["key"],
        max_running_per_key=MAX_PER_KEY,
    )
    def limited(ctx: JobContext, key: int, log: str, seconds: float) -> None:
        """Note the start, run ``seconds``, note the end."""
        _note(log, "limited", key, "start", ctx.job_id)
        time.sleep(seconds)
        _note(log, "limited", key, "end", ctx.job_id)

    @app.job("flow.free")
    def free(ctx: JobContext, log: str, seconds: float) -> None:
        """An unlimited kind beside the limited one."""
        _note(log, "free", "-", "start", ctx.job_id)
        time.sleep(seconds)
        _note(log, "free", "-", "end", ctx.job_id)


register(mf)
