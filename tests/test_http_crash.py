"""A real delivery worker process SIGKILLed at each point of an HTTP submission
(``HttpJsonTransport`` to the fake provider on loopback), on every store.

The same guarantees as over SMTP: a crash before TransmissionBegun is durable leaves
the record Recorded and it is sent once later; a crash after it leaves an unknown
outcome (TransmissionBegun), never re-sent on its own; no record says Sent for a
message the provider did not accept. And because every attempt of a record carries
the same ``Idempotency-Key``, an operator's "send again" after any crash makes the
provider accept the message exactly once.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from email.message import EmailMessage
from pathlib import Path

import pytest

from fake_provider import FakeProvider
from mailfathom import HttpJsonTransport, JobState, MailFathom, OutgoingEmailStage
from storm import lease_lapsed

pytestmark = pytest.mark.slow

WORKER = Path(__file__).with_name("delivery_worker.py")
RECORDED = OutgoingEmailStage.RECORDED
BEGUN = OutgoingEmailStage.TRANSMISSION_BEGUN
SENT = OutgoingEmailStage.SENT

#: The points an HTTP submission passes, and where the record stands after a crash there.
AFTER_CRASH = {
    "after_354": RECORDED,  # the connection is open, TransmissionBegun not committed
    "after_begun": BEGUN,  # committed, no request sent
    "after_body": BEGUN,  # the request went out, no answer read
    "after_reply": BEGUN,  # accepted, not written
}


def message() -> EmailMessage:
    msg = EmailMessage()
    msg["From"] = "alice@example.com"
    msg["To"] = "bob@example.com"
    msg["Subject"] = "Your order has shipped"
    msg.set_content("It is on its way.\n")
    return msg


@pytest.mark.parametrize("point", list(AFTER_CRASH))
def test_worker_killed_mid_http_submission(
    database_url: str, provider: FakeProvider, point: str
) -> None:
    expected = AFTER_CRASH[point]
    transport = HttpJsonTransport(provider.url, timeout=5.0)
    with MailFathom(database_url, transport=transport, clock_skew=0) as app:
        app.migrate()
        recorded = app.outbox.record(message())
        job_id = recorded.job_id or 0
        crashed = subprocess.run(
            [sys.executable, str(WORKER), database_url, provider.url, point],
            timeout=60,
            check=False,
        )
        assert crashed.returncode == -signal.SIGKILL, "the worker was not killed at " + point
        after_crash = app.outbox.get(recorded.id)
        assert after_crash.stage is expected
        if point in ("after_354", "after_begun"):
            assert provider.requests == [], "a request went out before TransmissionBegun"

        lease_lapsed(app, job_id)
        app.worker(concurrency=1, lease=1.0).run(burst=True)  # a healthy worker takes over
        email = app.outbox.get(recorded.id)
        assert len(provider.accepted) <= 1
        if email.stage is SENT:
            assert len(provider.accepted) == 1, "Sent, but the provider never accepted it"
        if expected is RECORDED:
            assert email.stage is SENT and email.attempts == 2
            return

        # Transmission had begun: an unknown outcome, never re-sent automatically.
        assert email.stage is BEGUN and email.attempts == 1
        job = app.jobs.get(job_id)
        assert job.state is JobState.DEAD_LETTERED
        assert (job.failure_reason or "").startswith("unknown outcome")
        requests = len(provider.requests)
        assert requests == (0 if point == "after_begun" else 1)

        # Whatever happened, "send again" repeats the record's key: accepted exactly once.
        app.outbox.resolve(recorded.id, "send_again", actor="ops", reason=f"after {point}")
        app.worker(concurrency=1, lease=1.0).run(burst=True)
        assert app.outbox.get(recorded.id).stage is SENT
        assert len(provider.requests) == requests + 1
        assert len(provider.accepted) == 1, "the provider accepted the message twice"
        keys = {seen.headers["Idempotency-Key"] for seen in provider.requests}
        assert len(keys) == 1
