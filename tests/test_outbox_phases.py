"""The guarantees around TransmissionBegun, driven through the submission's phase hook.

The hook (``mf.deliverer.on_phase``, a no-op in production) is told each point of a
real submission to a real SMTP server process; these tests use it to watch the
database at an exact point, and to make the TransmissionBegun save fail. On every
store: no body leaves before TransmissionBegun is durable, a failed save sends
nothing and retries, and a TransmissionBegun record is never attempted again.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from mailfathom import (
    FailureClass,
    FakeClock,
    JobState,
    MailFathom,
    OutgoingEmailStage,
    StoreError,
)
from mailfathom.delivery.phases import PHASE_POINTS, PhasePoint
from raw_database import own_store, raw_transaction
from smtp_fixtures import FaultServer
from test_outbox_operator import deliver, message

RECORDED = OutgoingEmailStage.RECORDED
BEGUN = OutgoingEmailStage.TRANSMISSION_BEGUN
SENT = OutgoingEmailStage.SENT


@pytest.fixture
def observer(database_url: str, clock: FakeClock) -> Iterator[MailFathom]:
    """A second app on the same database: reads through connections of its own."""
    app = MailFathom(database_url, clock=clock)
    yield app
    app.close()


def test_the_hook_is_told_every_point_in_order(mail_app: MailFathom) -> None:
    reached: list[PhasePoint] = []
    mail_app.deliverer.on_phase = reached.append
    mail_app.outbox.record(message())
    deliver(mail_app)
    assert reached == list(PHASE_POINTS)


def test_transmission_begun_is_durable_before_the_first_byte_of_the_body(
    mail_app: MailFathom, observer: MailFathom, smtp: FaultServer
) -> None:
    seen: dict[PhasePoint, tuple[OutgoingEmailStage, int, int]] = {}

    def look(point: PhasePoint) -> None:
        if point in ("after_354", "after_begun"):
            (email,) = observer.outbox.list()
            seen[point] = (email.stage, email.body_transmissions, len(smtp.received()))

    mail_app.deliverer.on_phase = look
    recorded = mail_app.outbox.record(message())
    deliver(mail_app)
    assert seen == {
        "after_354": (RECORDED, 0, 0),
        "after_begun": (BEGUN, 1, 0),  # committed, seen from elsewhere, and no body yet
    }
    assert mail_app.outbox.get(recorded.id).stage is SENT
    assert len(smtp.accepted()) == 1


_REFUSE_BEGUN = {
    "sqlite": [
        "CREATE TRIGGER test_refuse_begun BEFORE UPDATE OF stage ON mf_outbox "
        "WHEN NEW.stage = 'TransmissionBegun' "
        "BEGIN SELECT RAISE(ABORT, 'no space left on device (test)'); END"
    ],
    "postgresql": [
        "CREATE FUNCTION test_refuse_begun() RETURNS trigger LANGUAGE plpgsql AS $$ "
        "BEGIN RAISE EXCEPTION 'no space left on device (test)'; END $$",
        "CREATE TRIGGER test_refuse_begun BEFORE UPDATE OF stage ON mf_outbox FOR EACH ROW "
        "WHEN (NEW.stage = 'TransmissionBegun') EXECUTE FUNCTION test_refuse_begun()",
    ],
}
_ALLOW_BEGUN = {
    "sqlite": ["DROP TRIGGER test_refuse_begun"],
    "postgresql": [
        "DROP TRIGGER test_refuse_begun ON mf_outbox",
        "DROP FUNCTION test_refuse_begun",
    ],
}


def _run(app: MailFathom, statements: list[str]) -> None:
    with raw_transaction(app) as cur:
        for sql in statements:
            cur.execute(sql)


@pytest.mark.parametrize("failure", ["the hook raises", "the database refuses the write"])
def test_a_failed_transmission_begun_save_sends_no_body(
    mail_app: MailFathom, observer: MailFathom, smtp: FaultServer, clock: FakeClock, failure: str
) -> None:
    def save_fails(point: PhasePoint) -> None:
        if point == "after_354":
            raise StoreError("SQLite failed: disk I/O error (injected)")

    dialect = mail_app.store.dialect
    if failure == "the hook raises":
        mail_app.deliverer.on_phase = save_fails
    else:
        _run(observer, _REFUSE_BEGUN[dialect])
    recorded = mail_app.outbox.record(message())
    deliver(mail_app)
    assert smtp.received() == [], "a body went out although TransmissionBegun was not saved"
    email = mail_app.outbox.get(recorded.id)
    assert (email.stage, email.attempts, email.body_transmissions) == (RECORDED, 1, 0)
    assert email.transmission_begun_at is None
    assert "TransmissionBegun could not be saved, so the body was not sent" in (email.reason or "")
    job = mail_app.jobs.get(email.job_id or 0)
    assert (job.state, job.failure_class, job.attempts) == (
        JobState.PENDING,
        FailureClass.TRANSIENT,
        1,
    )
    assert job.available_at is not None and job.available_at > clock.now()

    mail_app.deliverer.on_phase = lambda point: None  # the database is back
    if failure != "the hook raises":
        assert "no space left on device (test)" in (email.reason or "")
        _run(observer, _ALLOW_BEGUN[dialect])
    clock.advance(121)
    deliver(mail_app)
    sent = mail_app.outbox.get(recorded.id)
    assert (sent.stage, sent.attempts, sent.body_transmissions) == (SENT, 2, 1)
    assert len(smtp.received()) == 1


def test_a_transmission_begun_record_is_never_attempted_again(
    mail_app: MailFathom, smtp: FaultServer
) -> None:
    smtp.script(end="disconnect")  # the body went out, the answer never came
    recorded = mail_app.outbox.record(message())
    deliver(mail_app)
    smtp.script()
    job_id = recorded.job_id or 0
    assert mail_app.outbox.get(recorded.id).stage is BEGUN
    with own_store(mail_app) as own:
        store = own.outbox_attempts
        start, current = store.begin_attempt(recorded.id, now=mail_app.clock.now())
        assert start is None and current is not None and current["stage"] == "TransmissionBegun"

    mail_app.jobs.requeue(job_id, actor="ops", reason="run it again, whatever it is")
    reached: list[PhasePoint] = []
    mail_app.deliverer.on_phase = reached.append
    deliver(mail_app)
    assert reached == [], "an SMTP transaction began for a TransmissionBegun record"
    email = mail_app.outbox.get(recorded.id)
    assert (email.stage, email.attempts, email.body_transmissions) == (BEGUN, 1, 1)
    job = mail_app.jobs.get(job_id)
    assert job.state is JobState.DEAD_LETTERED
    assert (job.failure_reason or "").startswith("unknown outcome")
    assert len(smtp.received()) == 1, "an unknown outcome was re-sent automatically"
