"""Testing helpers for applications that use mailfathom: a pytest plugin, on the real store.

Installed with mailfathom, the plugin is registered as a ``pytest11`` entry point,
so its fixtures are there in every test suite (or name it: ``pytest_plugins =
["mailfathom.testing"]``, or ``pytest -p mailfathom.testing``). It only defines
fixtures, none of them ``autouse``: a suite that does not ask for them is untouched.

Everything runs on a real SQLite file in the test's temporary folder and a real SMTP
server capturing what is sent; there is no in-memory fake that could drift from
the SQL your production store runs.

Fixtures:

``mailfathom_database_url``
    ``sqlite:///<tmp>/mailfathom.db``, fresh for each test.
``mailfathom_capture``
    The capture SMTP server (one per test session, on a free loopback port);
    ``.url`` is the ``smtp_url`` that delivers to it.
``mailfathom_app``
    A migrated :class:`~mailfathom.MailFathom` on that file, delivering to that server,
    closed after the test. Override it in your ``conftest.py`` to build *your*
    application (its ``@mf.job`` handlers) on ``mailfathom_database_url`` and
    ``mailfathom_capture.url``.
``mailfathom_mail``
    :class:`CapturedMail`: what was delivered during this test, with assertions.
``mailfathom``
    :class:`MailFathomTester`: the app, :meth:`~MailFathomTester.drain`,
    :meth:`~MailFathomTester.assert_enqueued` and the captured mail in one.

The functions :func:`drain`, :func:`assert_enqueued`, :func:`enqueued` and
:func:`claim` work on any ``MailFathom``.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from mailfathom.app import MailFathom
from mailfathom.devmail import CaptureServer, Inbox, InboxMessage
from mailfathom.jobs.model import Job
from mailfathom.jobs.state import JobState
from mailfathom.jobs.worker.worker import Worker

__all__ = [
    "CapturedMail",
    "MailFathomTester",
    "assert_enqueued",
    "claim",
    "drain",
    "enqueued",
    "mailfathom",
    "mailfathom_app",
    "mailfathom_capture",
    "mailfathom_database_url",
    "mailfathom_mail",
]

_TIMEOUT = 30.0
_PAGE = 1000
_MISSING = object()


def drain(mf: MailFathom, *, concurrency: int = 1, timeout: float = _TIMEOUT) -> int:
    """Run every job that is due, inline, until none is; returns the attempts run.

    A burst worker (``mf.worker(...).run(burst=True)``) runs, again while the jobs it
    ran made more due ones (a job that enqueues another, the outbox's delivery job).
    Jobs not due yet (a delay, a retry's backoff, a held job) stay where they are.
    After ``timeout`` seconds the worker is stopped and an :class:`AssertionError`
    says so (a job that keeps enqueueing itself would otherwise never let it end).
    """
    deadline = time.monotonic() + timeout
    total = 0
    while True:
        worker = mf.worker(concurrency=concurrency)
        outcome: list[int | BaseException] = []

        def run(worker: Worker = worker, outcome: list[int | BaseException] = outcome) -> None:
            try:
                outcome.append(worker.run(burst=True))
            except BaseException as exc:  # handed to the caller below
                outcome.append(exc)

        thread = threading.Thread(target=run, name="mailfathom-drain", daemon=True)
        thread.start()
        thread.join(max(deadline - time.monotonic(), 0.0))
        if thread.is_alive():
            worker.stop()
            thread.join()
            raise AssertionError(
                f"drain() was still running jobs after {timeout:g} s: a job keeps enqueueing "
                "new work, or runs too long (pass a longer timeout= if it should)"
            )
        (ran,) = outcome
        if isinstance(ran, BaseException):
            raise ran
        if ran == 0:
            return total
        total += ran


def claim(
    mf: MailFathom,
    owner: str,
    limit: int,
    lease: timedelta,
    queues: Sequence[str] | None = None,
    *,
    reap: bool = True,
) -> list[Job]:
    """Lease up to ``limit`` due jobs to worker id ``owner`` for ``lease``, as a worker's
    claim does, and run none of them; returns the claimed jobs.

    What a worker would take, in the order it would take it (queues, priorities, pauses,
    flow limits, expired leases returned first unless ``reap`` is False), seen without a
    worker; the jobs stay Claimed by ``owner`` until their lease runs out, as if that
    worker had died holding them. ``queues``: only these (None: every queue).
    """
    return mf.queue.claim(owner, limit, lease, queues, reap=reap)


def enqueued(mf: MailFathom, kind: str, **payload_subset: Any) -> list[Job]:
    """Every job of ``kind`` (any state) whose payload contains ``payload_subset``, oldest first."""
    found: list[Job] = []
    before: int | None = None
    while True:
        page = mf.jobs.list(kind=kind, limit=_PAGE, before_id=before)
        found.extend(job for job in page if _contains(job.payload, payload_subset))
        if len(page) < _PAGE:
            return found[::-1]
        before = page[-1].id


def assert_enqueued(mf: MailFathom, kind: str, **payload_subset: Any) -> Job:
    """The one job of ``kind`` whose payload has these keys with these values.

    Fails (listing what *was* enqueued) when there is none, or more than one: pass
    more of the payload to single one out, or use :func:`enqueued` for all of them.
    """
    matching = enqueued(mf, kind, **payload_subset)
    if len(matching) == 1:
        return matching[0]
    others = mf.jobs.list(limit=20)
    seen = "; ".join(f"#{j.id} {j.kind} {j.payload} ({j.state.value})" for j in others) or "none"
    wanted = f"{kind} whose payload contains {payload_subset}"
    if not matching:
        raise AssertionError(f"no job {wanted} was enqueued. Latest jobs: {seen}")
    raise AssertionError(
        f"{len(matching)} jobs {wanted} were enqueued (ids {[j.id for j in matching]}); "
        "pass more of the payload to single one out"
    )


def _contains(payload: Mapping[str, Any], subset: Mapping[str, Any]) -> bool:
    return all(payload.get(key, _MISSING) == value for key, value in subset.items())


class CapturedMail:
    """The messages the capture server received during one test, oldest first."""

    def __init__(self, inbox: Inbox) -> None:
        self.inbox = inbox

    @property
    def messages(self) -> list[InboxMessage]:
        """Every captured message (envelope, headers, raw bytes; ``.parsed()`` for the rest)."""
        # the inbox lists heads only (a console page must stay cheap): read each whole
        heads = self.inbox.messages(limit=10_000)[::-1]
        return [self.inbox.get(head.key) for head in heads]

    def clear(self) -> None:
        """Forget what was captured so far."""
        self.inbox.clear()

    def sent(self, *, to: str | None = None, subject: str | None = None) -> list[InboxMessage]:
        """The messages delivered to envelope recipient ``to`` and/or with ``subject``."""
        return [
            message
            for message in self.messages
            if (to is None or to in message.rcpt_to)
            and (subject is None or message.subject == subject)
        ]

    def assert_sent(
        self, *, to: str | None = None, subject: str | None = None, count: int = 1
    ) -> list[InboxMessage]:
        """Exactly ``count`` messages matched ``to`` / ``subject``; returns them.

        Delivery is a job: call ``drain()`` first, or nothing will have been sent.
        """
        found = self.sent(to=to, subject=subject)
        if len(found) != count:
            seen = "; ".join(f"{m.rcpt_to} {m.subject!r}" for m in self.messages) or "nothing"
            raise AssertionError(
                f"expected {count} message(s) to={to!r} subject={subject!r}, found "
                f"{len(found)}. Captured: {seen} (did you drain() the outbox?)"
            )
        return found

    def assert_nothing_sent(self) -> None:
        """No message was delivered."""
        self.assert_sent(count=0)


class MailFathomTester:
    """The app under test with its helpers: ``drain()``, ``assert_enqueued()``, ``mail``."""

    __test__ = False  # not a test class, whatever pytest thinks of its name

    def __init__(self, mf: MailFathom, mail: CapturedMail) -> None:
        self.mf = mf
        self.mail = mail

    def drain(self, *, concurrency: int = 1, timeout: float = _TIMEOUT) -> int:
        """:func:`drain` on this app."""
        return drain(self.mf, concurrency=concurrency, timeout=timeout)

    def assert_enqueued(self, kind: str, **payload_subset: Any) -> Job:
        """:func:`assert_enqueued` on this app."""
        return assert_enqueued(self.mf, kind, **payload_subset)

    def enqueued(self, kind: str, **payload_subset: Any) -> list[Job]:
        """:func:`enqueued` on this app."""
        return enqueued(self.mf, kind, **payload_subset)

    def assert_nothing_enqueued(self) -> None:
        """No job at all is in the database (the outbox's delivery jobs included)."""
        jobs = self.mf.jobs.list(limit=20)
        if jobs:
            raise AssertionError(
                "expected no job, found: " + "; ".join(f"#{j.id} {j.kind}" for j in jobs)
            )

    def counts(self) -> dict[JobState, int]:
        """How many jobs are in each state."""
        return self.mf.jobs.counts()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.fixture
def mailfathom_database_url(tmp_path: Path) -> str:
    """A fresh SQLite file in the test's temporary folder."""
    return f"sqlite:///{tmp_path / 'mailfathom.db'}"


@pytest.fixture(scope="session")
def mailfathom_capture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CaptureServer]:
    """A capture SMTP server for the test session (nothing is relayed anywhere)."""
    inbox = Inbox(tmp_path_factory.mktemp("mailfathom-mail") / "inbox")
    server = CaptureServer(inbox, port=_free_port())
    server.start()
    yield server
    server.stop()


@pytest.fixture
def mailfathom_mail(mailfathom_capture: CaptureServer) -> CapturedMail:
    """What is delivered to the capture server during this test."""
    mail = CapturedMail(mailfathom_capture.inbox)
    mail.clear()
    return mail


@pytest.fixture
def mailfathom_app(
    mailfathom_database_url: str, mailfathom_capture: CaptureServer
) -> Iterator[MailFathom]:
    """A migrated app on a fresh SQLite file, delivering to the capture server."""
    app = MailFathom(mailfathom_database_url, smtp_url=mailfathom_capture.url)
    app.migrate()
    yield app
    app.close()


@pytest.fixture
def mailfathom(mailfathom_app: MailFathom, mailfathom_mail: CapturedMail) -> MailFathomTester:
    """The app under test, ``drain()``, ``assert_enqueued()`` and the captured ``mail``."""
    return MailFathomTester(mailfathom_app, mailfathom_mail)
