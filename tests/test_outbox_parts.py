"""One message, one handle, against a real SMTP server on every store: a message recorded
as several parts (one per recipient domain with ``domain_limits``, recipients a server
deferred) is one message to ``record``, ``get``, ``list`` and ``cancel``; its parts are
listed by ``parts``; every part keeps the message's expiry, priority and queue (and so
does a ``send_again`` replacement job); no body starts after the expiry, and an expired
record is settled by its delivery, never by a read."""

from __future__ import annotations

from datetime import timedelta
from email.message import EmailMessage
from typing import Any

import pytest

from mailfathom import FakeClock, IllegalTransition, JobState, MailFathom, OutgoingEmailStage
from mailfathom.store.migrate import load_migrations
from raw_database import own_database
from smtp_fixtures import FaultServer

RECORDED = OutgoingEmailStage.RECORDED
CANCELLED = OutgoingEmailStage.CANCELLED
SENT = OutgoingEmailStage.SENT
REFUSED = OutgoingEmailStage.REFUSED
LIMITS = {"*": {"connections": 5}}


def message(*to: str) -> EmailMessage:
    msg = EmailMessage()
    msg["From"] = "app@example.net"
    msg["To"] = ", ".join(to)
    msg["Subject"] = "parts"
    msg.set_content("hello\n")
    return msg


def deliver(app: MailFathom) -> None:
    app.worker(concurrency=1, queues=["mail", "bulk"]).run(burst=True)


def test_cancel_on_the_handle_withdraws_every_recorded_part(
    split_app: MailFathom, smtp: FaultServer
) -> None:
    recorded = split_app.outbox.record(message("a@gmail.com", "b@yahoo.com", "c@example.org"))
    assert len(recorded.parts) == 3
    result = split_app.outbox.cancel(recorded.id, actor="ops", reason="wrong list")
    assert sorted(p.id for p in result.cancelled) == sorted(p.id for p in recorded.parts)
    assert result.begun == () and result.finished == ()
    assert result.stage is CANCELLED
    assert [p.stage for p in split_app.outbox.parts(recorded.id)] == [CANCELLED] * 3
    assert [e.action for e in split_app.outbox.audit()] == ["cancel"] * 3
    deliver(split_app)
    assert smtp.received() == []  # no domain got it


def test_cancel_leaves_a_part_whose_transmission_began_and_says_so(
    split_app: MailFathom, smtp: FaultServer
) -> None:
    smtp.script(rcpt={"b@yahoo.com": "450 4.2.1 try later"})
    recorded = split_app.outbox.record(message("a@gmail.com", "b@yahoo.com"))
    deliver(split_app)  # gmail's part is Sent; yahoo's waits for a retry
    gmail, yahoo = split_app.outbox.parts(recorded.id)
    assert (gmail.stage, yahoo.stage) == (SENT, RECORDED)
    result = split_app.outbox.cancel(recorded.id, actor="ops")
    assert [p.id for p in result.cancelled] == [yahoo.id]
    assert [(p.id, p.stage) for p in result.begun] == [(gmail.id, SENT)]
    assert result.stage is SENT  # the root part was not cancelled: it was sent
    assert [p.stage for p in split_app.outbox.parts(recorded.id)] == [SENT, CANCELLED]
    # a second cancel finds nothing left to withdraw: a clear error, nothing changes
    with pytest.raises(IllegalTransition, match=rf"none of its parts.*part {gmail.id}: it is Sent"):
        split_app.outbox.cancel(recorded.id, actor="ops")
    assert [p.stage for p in split_app.outbox.parts(recorded.id)] == [SENT, CANCELLED]


def test_a_part_in_transmission_is_never_cancelled(
    split_app: MailFathom, smtp: FaultServer
) -> None:
    smtp.script(end="disconnect")  # every body goes out and no answer comes
    recorded = split_app.outbox.record(message("a@gmail.com", "b@yahoo.com"))
    deliver(split_app)
    assert [p.stage for p in split_app.outbox.parts(recorded.id)] == [
        OutgoingEmailStage.TRANSMISSION_BEGUN
    ] * 2
    with pytest.raises(IllegalTransition, match="none of its parts"):
        split_app.outbox.cancel(recorded.id, actor="ops")
    assert [p.stage for p in split_app.outbox.parts(recorded.id)] == [
        OutgoingEmailStage.TRANSMISSION_BEGUN
    ] * 2


def test_a_part_whose_body_went_out_is_never_cancelled_with_its_message(
    split_app: MailFathom, smtp: FaultServer
) -> None:
    smtp.script(end="451 4.7.1 greylisted, come back later")  # bodies out, back to Recorded
    recorded = split_app.outbox.record(message("a@gmail.com", "b@yahoo.com"))
    deliver(split_app)
    parts = split_app.outbox.parts(recorded.id)
    assert [(p.stage, p.body_transmissions) for p in parts] == [(RECORDED, 1)] * 2
    with pytest.raises(IllegalTransition, match="its body already went out"):
        split_app.outbox.cancel(recorded.id, actor="ops")
    assert [p.stage for p in split_app.outbox.parts(recorded.id)] == [RECORDED] * 2


def test_get_and_list_show_a_split_message_once_with_its_parts(
    split_app: MailFathom,
) -> None:
    recorded = split_app.outbox.record(message("a@gmail.com", "b@yahoo.com"))
    alone = split_app.outbox.record(message("c@gmail.com"))
    listed = split_app.outbox.list()
    assert [e.id for e in listed] == [alone.id, recorded.id]
    assert listed[1].parts == split_app.outbox.get(recorded.id).parts
    assert [r.address for r in listed[1].recipients] == ["a@gmail.com", "b@yahoo.com"]
    assert listed[0].parts == ()
    part = split_app.outbox.parts(recorded.id)[1]
    assert split_app.outbox.get(part.id).root_id == recorded.id
    assert [p.id for p in split_app.outbox.parts(part.id)] == [recorded.id, part.id]
    split_app.outbox.cancel(part.id, actor="ops")  # a part's own id: that part alone
    assert [e.id for e in split_app.outbox.list(OutgoingEmailStage.CANCELLED)] == [recorded.id]
    assert [e.id for e in split_app.outbox.list(RECORDED)] == [alone.id, recorded.id]


def test_every_part_keeps_the_messages_expiry_priority_and_queue(
    database_url: str, clock: FakeClock, smtp: FaultServer
) -> None:
    expiry = clock.now() + timedelta(hours=1)
    recording = _app(database_url, clock, smtp, delivery_queue="bulk", domain_limits=LIMITS)
    recorded = recording.outbox.record(
        message("a@gmail.com", "b@gmail.com", "c@yahoo.com"), priority=7, expires_at=expiry
    )
    recording.close()
    # delivered by an app whose own delivery queue is another one: the message keeps its own
    mf = _app(database_url, clock, smtp, domain_limits=LIMITS)
    try:
        smtp.script(rcpt={"b@gmail.com": "450 4.2.1 try later"})
        deliver(mf)
        root, domain_part, deferred = mf.outbox.parts(recorded.id)
        assert deferred.parent_id == root.id and deferred.root_id == root.id
        for part in (root, domain_part, deferred):
            assert (part.expires_at, part.priority, part.queue) == (expiry, 7, "bulk")
            job = mf.jobs.get(part.job_id or 0)
            assert (job.priority, job.queue) == (7, "bulk")
        # the deferred recipient's part is past its expiry: settled, never sent
        clock.advance(timedelta(hours=2))
        smtp.script()
        deliver(mf)
        settled = mf.outbox.get(deferred.id)
        assert (settled.stage, settled.reason) == (REFUSED, "expired")
        assert sorted(r for m in smtp.received() for r in m.rcpt_tos) == [
            "a@gmail.com",
            "c@yahoo.com",
        ]
    finally:
        mf.close()


def test_send_again_keeps_the_messages_priority_and_queue(
    database_url: str, clock: FakeClock, smtp: FaultServer
) -> None:
    mf = _app(database_url, clock, smtp, delivery_queue="bulk")
    try:
        smtp.script(end="disconnect")
        recorded = mf.outbox.record(message("a@example.org"), priority=5)
        deliver(mf)
        assert mf.outbox.get(recorded.id).stage is OutgoingEmailStage.TRANSMISSION_BEGUN
        old_job = mf.outbox.get(recorded.id).job_id or 0
        mf.jobs.drop(old_job, actor="ops")  # its job is gone: send_again writes a new one
    finally:
        mf.close()
    other = _app(database_url, clock, smtp)  # configured with another delivery queue
    try:
        again = other.outbox.resolve(recorded.id, "send_again", actor="ops")
        assert again.job_id not in (None, old_job)
        job = other.jobs.get(again.job_id or 0)
        assert (job.priority, job.queue, job.state) == (5, "bulk", JobState.PENDING)
    finally:
        other.close()


def test_no_body_starts_after_the_expiry(
    database_url: str, clock: FakeClock, smtp: FaultServer
) -> None:
    mf = _app(database_url, clock, smtp)
    try:
        recorded = mf.outbox.record(
            message("a@example.org"), expires_at=clock.now() + timedelta(seconds=30)
        )

        def late(point: str) -> None:
            if point == "after_354":  # the attempt began in time; the body would not
                clock.advance(31)

        mf.deliverer.on_phase = late
        deliver(mf)
        seen = mf.outbox.get(recorded.id)
        assert (seen.stage, seen.reason, seen.body_transmissions) == (REFUSED, "expired", 0)
        assert smtp.received() == []
    finally:
        mf.close()


def test_a_retry_never_waits_past_the_expiry(
    database_url: str, clock: FakeClock, smtp: FaultServer
) -> None:
    mf = _app(database_url, clock, smtp)
    try:
        expiry = clock.now() + timedelta(seconds=20)
        recorded = mf.outbox.record(message("a@example.org"), expires_at=expiry)
        smtp.script(rcpt={"a@example.org": "450 4.2.1 try later"})
        deliver(mf)
        job = mf.jobs.get(recorded.job_id or 0)
        assert job.state is JobState.PENDING and job.available_at == expiry
        clock.advance(20)
        deliver(mf)  # its delivery settles it at the expiry: no read has to
        assert [(e.stage, e.reason) for e in mf.outbox.list()] == [(REFUSED, "expired")]
        assert mf.outbox.counts()[RECORDED] == 0
    finally:
        mf.close()


def _app(database_url: str, clock: FakeClock, smtp: FaultServer, **settings: Any) -> MailFathom:
    mf = MailFathom(
        database_url, clock=clock, smtp_url=smtp.url(), smtp_data_timeout=1.0, **settings
    )
    mf.migrate()
    return mf


def test_the_pruner_settles_an_expired_record_no_delivery_reached(
    database_url: str, clock: FakeClock, smtp: FaultServer
) -> None:
    mf = _app(database_url, clock, smtp)
    try:
        expiry = clock.now() + timedelta(seconds=30)
        waiting = mf.outbox.record(message("a@example.org"), expires_at=expiry)
        later = mf.outbox.record(message("b@example.org"), expires_at=expiry + timedelta(hours=1))
        clock.advance(31)
        assert mf.prune(dry_run=True).rows["emails"]["Recorded"] == {"expired": 1}
        assert mf.outbox.get(waiting.id).stage is RECORDED  # a dry run changes nothing
        report = mf.prune()
        assert report.rows["emails"]["Recorded"] == {"expired": 1}
        seen = mf.outbox.get(waiting.id)
        assert (seen.stage, seen.reason) == (REFUSED, "expired")
        assert mf.outbox.get(later.id).stage is RECORDED
        assert mf.outbox.counts()[RECORDED] == 1
        deliver(mf)  # the expired record's delivery finds nothing to send
        assert [m.rcpt_tos for m in smtp.received()] == [["b@example.org"]]
    finally:
        mf.close()


def test_recipients_split_off_after_a_4xx_are_a_part_the_handle_cancels(
    database_url: str, clock: FakeClock, smtp: FaultServer
) -> None:
    mf = _app(database_url, clock, smtp)  # no domain_limits: one record until the 4xx
    try:
        smtp.script(rcpt={"b@example.org": "450 4.2.1 try later"})
        recorded = mf.outbox.record(message("a@example.org", "b@example.org"))
        assert recorded.parts == ()
        deliver(mf)
        root, deferred = mf.outbox.parts(recorded.id)
        assert (root.stage, deferred.stage, deferred.root_id) == (SENT, RECORDED, root.id)
        result = mf.outbox.cancel(recorded.id, actor="ops")
        assert [p.id for p in result.cancelled] == [deferred.id]
        assert [p.id for p in result.begun] == [root.id]
        clock.advance(timedelta(hours=1))
        smtp.script()
        deliver(mf)
        assert [m.rcpt_tos for m in smtp.received()] == [["a@example.org"]]  # b never sent
    finally:
        mf.close()


def test_the_migration_finds_each_records_message_and_what_it_was_recorded_with(
    database_url: str, clock: FakeClock, smtp: FaultServer
) -> None:
    """0013's backfill: records written before it (no root_id, priority or queue) get
    their message's root from the parent_id chain, and priority and queue from their
    delivery job."""
    mf = _app(database_url, clock, smtp, delivery_queue="bulk", domain_limits=LIMITS)
    try:
        smtp.script(rcpt={"b@gmail.com": "450 4.2.1 try later"})
        recorded = mf.outbox.record(
            message("a@gmail.com", "b@gmail.com", "c@yahoo.com"), priority=3
        )
        deliver(mf)  # a domain part, and a deferred split of the root
        with own_database(mf) as db:
            with db.transaction() as cur:
                cur.execute("UPDATE mf_outbox SET root_id = NULL, priority = 0, queue = NULL")
            (_, _, script) = load_migrations(db.dialect)[12]
            backfill = [s for s in script.split(";\n") if s.lstrip().startswith(("WITH", "UPDATE"))]
            assert len(backfill) == 2
            with db.transaction() as cur:
                for statement in backfill:
                    cur.execute(statement)
        root, *others = mf.outbox.parts(recorded.id)
        assert len(others) == 2 and {p.root_id for p in others} == {root.id}
        assert {(p.priority, p.queue) for p in [root, *others]} == {(3, "bulk")}
    finally:
        mf.close()
