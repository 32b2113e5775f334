"""Helpers for the console's tests: an app with demo kinds and jobs in every state."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from mailfathom import JobContext, JobState, MailFathom, PermanentFailure


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
    assert all(mf.jobs.get(i).state is JobState.DEAD_LETTERED for i in ids)
    return ids


TOKEN = "test-token-0123456789abcdef"


def make_client(mf: MailFathom, *, token: str | None = None) -> Any:
    """A test client for the console on ``mf`` (as if bound to 127.0.0.1)."""
    from starlette.testclient import TestClient

    from mailfathom.console import Console
    from mailfathom.web import Access, create_app

    app = create_app(Console(mf), access=Access.for_bind("127.0.0.1", token))
    return TestClient(app, base_url="http://127.0.0.1:8025")


def csrf_of(html: str) -> str:
    """The CSRF token in a rendered page."""
    import re

    found = re.search(r'name="csrf_token" value="([^"]+)"', html)
    assert found is not None, "the page has no CSRF field"
    return found.group(1)
