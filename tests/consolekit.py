"""Helpers for the console's tests: an app with demo kinds and jobs in every state."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from mailfathom import (
    FakeClock,
    JobContext,
    JobState,
    MailFathom,
    PermanentFailure,
    TransientFailure,
)


@dataclass
class Switch:
    """Whether the flaky kind is "fixed" yet (a deploy, in real life)."""

    fixed: threading.Event = field(default_factory=threading.Event)


def register_demo_kinds(mf: MailFathom, switch: Switch | None = None) -> Switch:
    """``demo.ok`` succeeds; ``demo.flaky`` fails permanently until ``switch.fixed`` is set."""
    switch = switch or Switch()

    @mf.job("demo.ok", queue="default", max_attempts=3)
    def ok(ctx: JobContext, **payload: Any) -> None:
        return None

    @mf.job("demo.sometimes", queue="reports", max_attempts=5)
    def sometimes(ctx: JobContext, **payload: Any) -> None:
        if ctx.attempt == 1 and payload.get("n", 0) % 3 == 0:
            raise TransientFailure("upstream timed out; retrying")

    @mf.job("demo.flaky", queue="mail", max_attempts=2)
    def flaky(ctx: JobContext, **payload: Any) -> None:
        if not switch.fixed.is_set():
            raise PermanentFailure(f"SMTP relay refused: 550 mailbox <{payload.get('to')}> unknown")

    return switch


def dead_letters(mf: MailFathom, count: int, *, to: str = "a@example.com") -> list[int]:
    """Enqueue ``count`` flaky jobs and run them into the dead letters; their ids."""
    jobs = mf.enqueue_many("demo.flaky", [{"to": to, "n": i} for i in range(count)])
    mf.worker(concurrency=50).run(burst=True)
    ids = [job.id for job in jobs]
    # Another worker (the browser tests run one) may still hold some: wait for it.
    deadline = time.monotonic() + 10
    while not all(mf.jobs.get(i).state is JobState.DEAD_LETTERED for i in ids):
        assert time.monotonic() < deadline, "the flaky jobs did not all dead-letter"
        time.sleep(0.02)
    return ids


TOKEN = "mailfathom-test-Jq7vX2kLp9RwT4zN8cYb"  # strong enough for check_token
#: Where the test client connects from: a loopback peer, as a local browser would.
LOOPBACK_PEER = ("127.0.0.1", 50000)


def make_client(mf: MailFathom, *, token: str | None = None) -> Any:
    """A test client for the console on ``mf`` (as if bound to 127.0.0.1)."""
    from starlette.testclient import TestClient

    from mailfathom.console import Console
    from mailfathom.web import Access, create_app

    app = create_app(Console(mf), access=Access.for_bind("127.0.0.1", token))
    return TestClient(app, base_url="http://127.0.0.1:8025", client=LOOPBACK_PEER)


def csrf_of(html: str) -> str:
    """The CSRF token in a rendered page."""
    import re

    found = re.search(r'name="csrf_token" value="([^"]+)"', html)
    assert found is not None, "the page has no CSRF field"
    return found.group(1)


def fill_history(database_url: str, minutes: int = 60) -> int:
    """An hour of work that ended before now (real time), minute by minute; jobs run."""
    start = datetime.now(UTC) - timedelta(minutes=minutes)
    clock = FakeClock(start)
    done = 0
    with MailFathom(database_url, clock=clock) as mf:
        register_demo_kinds(mf)
        for minute in range(minutes):
            load = 6 + (minute * 7) % 11 + (12 if 20 <= minute < 28 else 0)
            mf.enqueue_many("demo.ok", [{"minute": minute, "i": i} for i in range(load)])
            mf.enqueue_many("demo.sometimes", [{"n": i} for i in range(minute % 5)])
            done += mf.worker(concurrency=50).run(burst=True)
            clock.advance(timedelta(minutes=1))
    return done


def register_worker(
    mf: MailFathom, worker_id: str, *, queues: tuple[str, ...] | None = None
) -> None:
    """Write a worker's registration (and heartbeat) as a running worker does, at the app's now."""
    from mailfathom.store.base import WorkerRegistration

    registration = WorkerRegistration(
        worker_id, "host-a", 4242, queues, ("demo.ok",), 8, 30.0, mf.clock.now()
    )
    mf.store.workers.heartbeat(registration, now=mf.clock.now())


def store_schedule(mf: MailFathom, name: str = "reports/nightly") -> None:
    """Declare a schedule and write it to the database, as a worker does at start."""
    mf.schedule(name, cron="0 3 * * *", kind="demo.ok", payload={"report": "daily"})
    mf.schedules.sync()
