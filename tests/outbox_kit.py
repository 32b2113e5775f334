"""Helpers the outbox's tests share, over SMTP and over HTTP alike: the messages they
record, a delivery worker process killed at a named point, the wait for its lease to
lapse, and the state of a delivery paused by a configuration error."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from email.message import EmailMessage
from pathlib import Path

from mailfathom import JobState, MailFathom, OutgoingEmail, OutgoingEmailStage

#: The delivery worker process (tests/delivery_worker.py) that kills itself at a point.
WORKER = Path(__file__).with_name("delivery_worker.py")


def message(
    *to: str, sender: str = "app@example.net", subject: str = "hello", body: str = "hello\n"
) -> EmailMessage:
    """A small text message from ``sender`` to ``to``."""
    msg = EmailMessage()
    msg["From"] = sender
    msg["To"] = ", ".join(to)
    msg["Subject"] = subject
    msg.set_content(body)
    return msg


def shipped() -> EmailMessage:
    """The one message the crash tests record."""
    return message(
        "bob@example.com",
        sender="alice@example.com",
        subject="Your order has shipped",
        body="It is on its way.\n",
    )


def invoice(n: int, *, sender: str = "app@example.net") -> EmailMessage:
    """Message ``n`` of a batch, each to its own recipient."""
    return message(
        f"user{n}@example.com",
        sender=sender,
        subject=f"Invoice {n}",
        body="Your invoice is attached.\n",
    )


def kill_worker_at(database_url: str, target_url: str, point: str) -> None:
    """Run the delivery worker process against ``target_url`` (an SMTP server's or a
    provider's) until it kills itself at ``point``; fails unless it was SIGKILLed."""
    crashed = subprocess.run(
        [sys.executable, str(WORKER), database_url, target_url, point],
        timeout=60,
        check=False,
    )
    assert crashed.returncode == -signal.SIGKILL, "the worker was not killed at " + point


def lease_lapsed(app: MailFathom, job_id: int) -> None:
    """Wait (10 s at most) until the killed worker's lease on ``job_id`` has lapsed."""
    deadline = time.monotonic() + 10
    while True:
        job = app.jobs.get(job_id)
        if job.lease_expires_at is not None and job.lease_expires_at < app.clock.now():
            return
        assert time.monotonic() < deadline, "the killed worker's lease never lapsed"
        time.sleep(0.05)


def assert_paused(app: MailFathom, count: int, error: str, says: str) -> list[OutgoingEmail]:
    """Every message (``count``) Recorded with no attempt spent, waiting on ``error``
    (e.g. "SMTP configuration error") and saying ``says``; every job Pending. Returns
    the messages."""
    emails = app.outbox.list()
    assert len(emails) == count
    for email in emails:
        assert (email.stage, email.attempts) == (OutgoingEmailStage.RECORDED, 0), email
        assert f"waiting, no attempt spent: {error}" in (email.reason or "")
        assert says in (email.reason or ""), email.reason
        job = app.jobs.get(email.job_id or 0)
        assert job.state is JobState.PENDING
        assert job.attempts - job.snoozes == 0, "a job attempt was spent"
        assert job.available_at is not None and job.available_at > app.clock.now()
    return emails
