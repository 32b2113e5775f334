"""A real delivery worker process SIGKILLed at each phase of the submission, on every store.

The worker (tests/delivery_worker.py) installs a phase hook that kills it at the point
named on its command line; the production code only calls the hook.

For each phase: the server never receives a message twice unless an operator chose
``send_again``; no record says Sent for a message the server did not accept; a crash
once transmission has begun is reported as an unknown outcome, never re-sent.
"""

from __future__ import annotations

import pytest

from mailfathom import JobState, MailFathom, OutgoingEmailStage, Resolution
from mailfathom.delivery.phases import PHASE_POINTS
from outbox_kit import kill_worker_at, lease_lapsed, shipped
from smtp_fixtures import FaultServer

pytestmark = pytest.mark.slow

RECORDED = OutgoingEmailStage.RECORDED
BEGUN = OutgoingEmailStage.TRANSMISSION_BEGUN
SENT = OutgoingEmailStage.SENT

#: Where the record stands right after the crash, and what the operator then decides.
AFTER_CRASH: dict[str, tuple[OutgoingEmailStage, Resolution | None]] = {
    "before_rcpt": (RECORDED, None),  # nothing went out: retried automatically
    "after_354": (RECORDED, None),  # 354 read, TransmissionBegun not committed: retried
    "after_begun": (BEGUN, Resolution.SEND_AGAIN),  # committed, no body: unknown to us
    "after_body": (BEGUN, Resolution.DELIVERED),  # body out, no answer read: unknown
    "after_reply": (BEGUN, Resolution.SEND_AGAIN),  # accepted, not written: a 2nd copy
}


def test_every_crash_point_is_covered() -> None:
    assert set(AFTER_CRASH) == set(PHASE_POINTS)


@pytest.mark.parametrize("point", list(AFTER_CRASH))
def test_worker_killed_mid_submission(database_url: str, smtp: FaultServer, point: str) -> None:
    expected, decision = AFTER_CRASH[point]
    with MailFathom(database_url, smtp_url=smtp.url(), smtp_data_timeout=5, clock_skew=0) as app:
        app.migrate()
        recorded = app.outbox.record(shipped())
        job_id = recorded.job_id or 0
        kill_worker_at(database_url, smtp.url(), point)
        after_crash = app.outbox.get(recorded.id)
        assert after_crash.stage is expected
        assert after_crash.attempts == 1
        if expected is RECORDED or point == "after_begun":
            assert smtp.received() == [], "a body went out before TransmissionBegun was durable"

        lease_lapsed(app, job_id)
        app.worker(concurrency=1, lease=1.0).run(burst=True)  # a healthy worker takes over
        email = app.outbox.get(recorded.id)
        accepted = smtp.accepted()
        assert len(accepted) <= 1, "the server received the message twice"
        if email.stage is SENT:
            assert len(accepted) == 1, "Sent, but the server never accepted it"
        if expected is RECORDED:
            assert email.stage is SENT and email.attempts == 2
            assert len(accepted) == 1
            return

        # Transmission had begun: an unknown outcome, never re-sent automatically.
        assert email.stage is BEGUN and email.attempts == 1
        assert [e.id for e in app.outbox.unknown()] == [recorded.id]
        job = app.jobs.get(job_id)
        assert job.state is JobState.DEAD_LETTERED
        assert (job.failure_reason or "").startswith("unknown outcome")
        if point == "after_begun":
            assert smtp.received() == []
        if point == "after_reply":
            assert len(accepted) == 1  # it did arrive; only the answer was never written

        assert decision is not None
        app.outbox.resolve(recorded.id, decision, actor="ops", reason=f"checked after {point}")
        app.worker(concurrency=1, lease=1.0).run(burst=True)
        final = app.outbox.get(recorded.id)
        assert final.stage is SENT
        copies = len(smtp.accepted())
        if decision is Resolution.SEND_AGAIN:
            assert copies == len(accepted) + 1, "send_again must send exactly one more copy"
        else:
            assert copies == len(accepted)
