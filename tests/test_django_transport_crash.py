"""A real delivery worker process SIGKILLed at each point of a submission through
``DjangoBackendTransport`` (Django's SMTP backend to the aiosmtpd test server), on every
store: a crash before TransmissionBegun is durable leaves the record Recorded and it is
sent once later; a crash after it leaves an unknown outcome (TransmissionBegun), never
re-sent on its own, whether or not the server got the message."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from email.message import EmailMessage
from pathlib import Path

import django
import pytest
from django.conf import settings

from mailfathom import JobState, MailFathom, OutgoingEmailStage
from mailfathom.contrib.django import DjangoBackendTransport
from smtp_fixtures import FaultServer

pytestmark = pytest.mark.slow

WORKER = Path(__file__).with_name("django_delivery_worker.py")
RECORDED = OutgoingEmailStage.RECORDED
BEGUN = OutgoingEmailStage.TRANSMISSION_BEGUN
SENT = OutgoingEmailStage.SENT

#: The points a submission through a Django backend passes, what the server has received
#: by then, and where the record stands after a crash there.
AFTER_CRASH = {
    "after_354": (RECORDED, 0),  # the backend is open, TransmissionBegun not committed
    "after_begun": (BEGUN, 0),  # committed, send_messages not called
    "after_reply": (BEGUN, 1),  # the server accepted it, the answer not written
}


@pytest.fixture(autouse=True, scope="module")
def django_settings() -> None:
    """Django configured as a project without settings of its own would be."""
    if not settings.configured:
        settings.configure()
    django.setup()


def message() -> EmailMessage:
    msg = EmailMessage()
    msg["From"] = "alice@example.com"
    msg["To"] = "bob@example.com"
    msg["Subject"] = "Your order has shipped"
    msg.set_content("It is on its way.\n")
    return msg


def _lease_lapsed(app: MailFathom, job_id: int) -> None:
    deadline = time.monotonic() + 10
    while True:
        job = app.jobs.get(job_id)
        if job.lease_expires_at is not None and job.lease_expires_at < app.clock.now():
            return
        assert time.monotonic() < deadline, "the killed worker's lease never lapsed"
        time.sleep(0.05)


@pytest.mark.parametrize("point", list(AFTER_CRASH))
def test_worker_killed_mid_django_backend_submission(
    database_url: str, smtp: FaultServer, point: str
) -> None:
    expected, received = AFTER_CRASH[point]
    transport = DjangoBackendTransport(
        "django.core.mail.backends.smtp.EmailBackend", host="127.0.0.1", port=smtp.port
    )
    with MailFathom(database_url, transport=transport, clock_skew=0) as app:
        app.migrate()
        recorded = app.outbox.record(message())
        job_id = recorded.job_id or 0
        crashed = subprocess.run(
            [sys.executable, str(WORKER), database_url, str(smtp.port), point],
            timeout=60,
            check=False,
        )
        assert crashed.returncode == -signal.SIGKILL, "the worker was not killed at " + point
        assert app.outbox.get(recorded.id).stage is expected
        assert len(smtp.accepted()) == received

        _lease_lapsed(app, job_id)
        app.worker(concurrency=1, lease=1.0).run(burst=True)  # a healthy worker takes over
        email = app.outbox.get(recorded.id)
        if expected is RECORDED:
            assert email.stage is SENT and email.attempts == 2
            assert len(smtp.accepted()) == 1
            return
        # Transmission had begun: an unknown outcome, never re-sent automatically.
        assert email.stage is BEGUN and email.attempts == 1
        assert len(smtp.accepted()) == received
        job = app.jobs.get(job_id)
        assert job.state is JobState.DEAD_LETTERED
        assert (job.failure_reason or "").startswith("unknown outcome")
