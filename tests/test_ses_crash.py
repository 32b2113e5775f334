"""A real delivery worker process SIGKILLed at each point of an SES submission
(``SesTransport`` to moto's SES server on loopback), on every store: a crash before
TransmissionBegun is durable leaves the record Recorded and it is sent once later; a
crash after it leaves an unknown outcome (TransmissionBegun) that is never re-sent on
its own, whether SES took the message or not; no record says Sent for a message SES
did not accept."""

from __future__ import annotations

from email.message import EmailMessage

import pytest

from mailfathom import JobState, MailFathom, OutgoingEmailStage, SesTransport
from outbox_kit import kill_worker_at, lease_lapsed
from outbox_kit import message as outbox_kit_message
from ses_fixtures import ACCESS_KEY, REGION, SENDER, MotoSes, SesProxy

pytestmark = pytest.mark.slow

RECORDED = OutgoingEmailStage.RECORDED
BEGUN = OutgoingEmailStage.TRANSMISSION_BEGUN
SENT = OutgoingEmailStage.SENT

#: The points an SES submission passes, where the record stands after a crash there,
#: and how many messages SES took by then.
AFTER_CRASH = {
    "after_354": (RECORDED, 0),  # signed, TransmissionBegun not committed
    "after_begun": (BEGUN, 0),  # committed, the request not handed to the connection
    "after_reply": (BEGUN, 1),  # accepted by SES, not written
}


def message() -> EmailMessage:
    """The crash tests' one message, from the sender moto has verified."""
    return outbox_kit_message(
        "bob@example.org",
        sender=SENDER,
        subject="Your order has shipped",
        body="It is on its way.\n",
    )


@pytest.mark.parametrize("point", list(AFTER_CRASH))
def test_worker_killed_mid_ses_submission(
    database_url: str, ses_proxy: SesProxy, moto_ses: MotoSes, point: str
) -> None:
    expected, taken = AFTER_CRASH[point]
    transport = SesTransport(
        REGION,
        endpoint_url=ses_proxy.url,
        timeout=5.0,
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=ACCESS_KEY,
    )
    with MailFathom(database_url, transport=transport, clock_skew=0) as app:
        app.migrate()
        recorded = app.outbox.record(message())
        job_id = recorded.job_id or 0
        target = f"ses:{ses_proxy.url}"
        kill_worker_at(database_url, target, point)
        assert app.outbox.get(recorded.id).stage is expected
        assert len(moto_ses.accepted()) == taken
        assert ses_proxy.sends == taken, "a request went out before TransmissionBegun"

        lease_lapsed(app, job_id)
        app.worker(concurrency=1, lease=1.0).run(burst=True)  # a healthy worker takes over
        email = app.outbox.get(recorded.id)
        if expected is RECORDED:
            assert email.stage is SENT and email.attempts == 2
            assert moto_ses.delivered() == [email.message_id]
            return
        # Transmission had begun: an unknown outcome, never re-sent automatically.
        assert email.stage is BEGUN and email.attempts == 1
        job = app.jobs.get(job_id)
        assert job.state is JobState.DEAD_LETTERED
        assert (job.failure_reason or "").startswith("unknown outcome")
        assert ses_proxy.sends == taken and len(moto_ses.accepted()) == taken
