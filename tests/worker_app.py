"""Handlers and apps that worker tests run in other processes, so they live in a module.

Worker subprocesses import this module (``--app worker_app:mf``) and
process-isolated handlers are pickled by reference to it. Handlers report to the
test through files named in their payload. The apps read their database URL from
``MAILFATHOM_DATABASE_URL`` (the CLI's ``--database`` sets it).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from mailfathom import JobContext, MailFathom, PermanentFailure

TICK_LOG = "MF_TEST_TICK_LOG"


def mark(path: str, text: str = "") -> None:
    """Write ``text`` (default: this process's id) to ``path`` in one step."""
    partial = Path(f"{path}.partial")
    partial.write_text(text or str(os.getpid()))
    partial.replace(path)


def sleep_once(ctx: JobContext, marker: str, seconds: float) -> None:
    """The first attempt marks its start and sleeps ``seconds``; later attempts return."""
    if ctx.attempt == 1:
        mark(marker, f"{os.getpid()} {ctx.attempt}")
        time.sleep(seconds)


def sleep(ctx: JobContext, marker: str, seconds: float) -> None:
    """Mark the start, then sleep ``seconds``."""
    mark(marker)
    time.sleep(seconds)


def hang(ctx: JobContext, marker: str) -> None:
    """Mark the start with this process's id, then hang far past any test's timeout."""
    mark(marker)
    time.sleep(600)


def succeed(ctx: JobContext, marker: str) -> None:
    """Mark with this process's id and return."""
    mark(marker)


def refuse(ctx: JobContext, reason: str) -> None:
    """Fail permanently."""
    raise PermanentFailure(reason)


class Unpicklable(Exception):
    """An exception that cannot travel back from a child process as itself."""

    def __init__(self, code: int, detail: str) -> None:
        super().__init__(f"code {code}: {detail}")
        self.handle = lambda: None  # lambdas do not pickle


def raise_unpicklable(ctx: JobContext) -> None:
    """Raise an exception that does not pickle."""
    raise Unpicklable(7, "no way back")


def die(ctx: JobContext) -> None:
    """End the process abruptly, without a result."""
    os._exit(3)


def tick(ctx: JobContext) -> None:
    """Append the job's id to the file named by MF_TEST_TICK_LOG."""
    with open(os.environ[TICK_LOG], "a", encoding="utf-8") as log:
        log.write(f"{ctx.job_id} {ctx.job.idempotency_key}\n")


mf = MailFathom()
mf.job("test.sleep_once", max_attempts=3)(sleep_once)
mf.job("test.sleep", max_attempts=3)(sleep)
mf.job("test.hang", max_attempts=1, timeout=1, isolation="process")(hang)
mf.job("test.hang_isolated", isolation="process")(hang)

scheduled = MailFathom()
scheduled.job("test.tick")(tick)
scheduled.schedule("every-second", cron="* * * * * *", kind="test.tick")

fixed = MailFathom("sqlite:///mailfathom-fixed-url.db")  # a hard-coded URL (never opened)


def snooze_once(ctx: JobContext, seconds: float) -> None:
    """Snooze on the first attempt (from a child process, the exception is pickled back)."""
    from mailfathom import Snooze

    if ctx.job.snoozes == 0:
        raise Snooze(seconds)


def report(ctx: JobContext, rows: int) -> dict[str, object]:
    """Returns a result, made in the child process that ran it."""
    return {"rows": rows, "pid": os.getpid(), "ratio": -0.0}


async def report_async(ctx: JobContext, rows: int) -> list[int]:
    """An ``async def`` handler's result, from a child process."""
    return [rows, rows + 1]


def report_a_set(ctx: JobContext) -> set[int]:
    """Returns what JSON cannot hold: the child refuses it."""
    return {1, 2}
