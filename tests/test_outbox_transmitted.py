"""A record whose body ever went out keeps that evidence and can never be Cancelled.

Cancelled means "nothing was transmitted on its behalf". A 4xx to the end of data or
an operator's *send again* moves a record back to Recorded and clears
``transmission_begun_at``, but ``body_transmissions`` is never lowered, ``cancel``
refuses such a record (its way out is ``resolve(..., "give_up")`` → Refused), and the
database refuses the row itself, on every store.
"""

from __future__ import annotations

import re

import pytest

from mailfathom import (
    FakeClock,
    IllegalTransition,
    JobState,
    MailFathom,
    OutgoingEmail,
    OutgoingEmailStage,
    StoreError,
)
from mailfathom.store.migrate import load_migrations
from raw_database import raw_reading, raw_transaction
from smtp_fixtures import FaultServer
from test_outbox_operator import deliver, message

RECORDED = OutgoingEmailStage.RECORDED
BEGUN = OutgoingEmailStage.TRANSMISSION_BEGUN
SENT = OutgoingEmailStage.SENT
REFUSED = OutgoingEmailStage.REFUSED
CANCELLED = OutgoingEmailStage.CANCELLED


def _raw(app: MailFathom, sql: str) -> None:
    with raw_transaction(app) as cur:
        cur.execute(sql)


def _deferred_after_the_body(app: MailFathom, smtp: FaultServer) -> OutgoingEmail:
    """A record whose body went out and got 451: back in Recorded, to be retried."""
    smtp.script(end="451 4.3.0 try again later")
    recorded = app.outbox.record(message())
    assert recorded.body_transmissions == 0
    deliver(app)
    smtp.script()
    email = app.outbox.get(recorded.id)
    assert (email.stage, email.transmission_begun_at, email.body_transmissions) == (
        RECORDED,
        None,
        1,
    )
    assert [r.answer for r in smtp.received()] == ["451 4.3.0 try again later"]
    return email


def _sent_again(app: MailFathom, smtp: FaultServer) -> OutgoingEmail:
    """An unknown outcome (the connection dropped after the body), then *send again*."""
    smtp.script(end="disconnect")
    recorded = app.outbox.record(message())
    deliver(app)
    smtp.script()
    assert app.outbox.get(recorded.id).stage is BEGUN
    again = app.outbox.resolve(recorded.id, "send_again", actor="ops", reason="not in the log")
    assert (again.stage, again.transmission_begun_at, again.body_transmissions) == (
        RECORDED,
        None,
        1,
    )
    return again


def _refused_to_cancel(app: MailFathom, email: OutgoingEmail) -> None:
    before = app.outbox.get(email.id)
    with pytest.raises(IllegalTransition, match=r"body already went out once") as refused:
        app.outbox.cancel(email.id, actor="ops", reason="customer asked")
    assert "resolve(" in str(refused.value) and "'give_up'" in str(refused.value)
    assert (refused.value.current, refused.value.target) == ("Recorded", "Cancelled")
    assert app.outbox.get(email.id) == before
    assert "cancel" not in [e.action for e in app.outbox.events(email.id)]


def test_a_body_answered_4xx_cannot_be_cancelled_only_given_up(
    mail_app: MailFathom, smtp: FaultServer, clock: FakeClock
) -> None:
    email = _deferred_after_the_body(mail_app, smtp)
    _refused_to_cancel(mail_app, email)

    given_up = mail_app.outbox.resolve(email.id, "give_up", actor="ops", reason="stop it")
    assert (given_up.stage, given_up.body_transmissions) == (REFUSED, 1)
    assert given_up.reason == "give_up by ops: stop it" and given_up.finished_at == clock.now()
    (event,) = mail_app.outbox.events(email.id)
    assert (event.action, event.from_stage, event.to_stage) == ("give_up", RECORDED, REFUSED)
    clock.advance(3600)  # past the retry's backoff: its job runs and finds nothing to send
    deliver(mail_app)
    assert mail_app.jobs.get(email.job_id or 0).state is JobState.SUCCEEDED
    assert mail_app.outbox.get(email.id).stage is REFUSED
    assert len(smtp.received()) == 1, "a given-up email was offered again"


def test_send_again_then_cancel_is_refused(mail_app: MailFathom, smtp: FaultServer) -> None:
    email = _sent_again(mail_app, smtp)
    _refused_to_cancel(mail_app, email)
    assert mail_app.outbox.resolve(email.id, "give_up", actor="ops").stage is REFUSED
    deliver(mail_app)  # the requeued job finds it Refused
    assert mail_app.outbox.get(email.id).stage is REFUSED
    assert len(smtp.received()) == 1


def test_the_count_grows_with_each_transmission_and_a_fresh_record_still_cancels(
    mail_app: MailFathom, smtp: FaultServer, clock: FakeClock
) -> None:
    email = _deferred_after_the_body(mail_app, smtp)
    clock.advance(3600)
    deliver(mail_app)
    sent = mail_app.outbox.get(email.id)
    assert (sent.stage, sent.attempts, sent.body_transmissions) == (SENT, 2, 2)
    untouched = mail_app.outbox.record(message(to="carol@example.com"))
    assert mail_app.outbox.cancel(untouched.id, actor="ops").stage is CANCELLED


def test_give_up_does_not_apply_to_a_record_whose_body_never_went_out(
    mail_app: MailFathom,
) -> None:
    recorded = mail_app.outbox.record(message())
    with pytest.raises(IllegalTransition, match=r"cancel it instead") as refused:
        mail_app.outbox.resolve(recorded.id, "give_up", actor="ops")
    assert refused.value.allowed_from == ("TransmissionBegun",)
    assert mail_app.outbox.get(recorded.id).stage is RECORDED


def test_only_give_up_applies_to_a_transmitted_recorded_record(
    mail_app: MailFathom, smtp: FaultServer
) -> None:
    email = _deferred_after_the_body(mail_app, smtp)
    for resolution in ("delivered", "send_again"):
        with pytest.raises(IllegalTransition, match=r"only give_up") as refused:
            mail_app.outbox.resolve(email.id, resolution, actor="ops")
        assert refused.value.allowed_from == ("TransmissionBegun",)
    assert mail_app.outbox.get(email.id).stage is RECORDED
    assert mail_app.outbox.events(email.id) == []


# -- the database holds the rule itself ----------------------------------------------------


def test_the_database_refuses_cancelling_a_transmitted_record(
    mail_app: MailFathom, smtp: FaultServer
) -> None:
    email = _deferred_after_the_body(mail_app, smtp)
    guard = (  # SQLite names a failed CHECK by its expression, PostgreSQL by its name
        "stage <> 'Cancelled' OR body_transmissions = 0"
        if mail_app.store.dialect == "sqlite"
        else "mf_outbox_cancelled_never_transmitted"
    )
    with pytest.raises(StoreError, match=re.escape(guard)):
        _raw(
            mail_app,
            "UPDATE mf_outbox SET stage = 'Cancelled', finished_at = created_at, "
            f"reason = 'x' WHERE id = {email.id}",
        )
    assert mail_app.outbox.get(email.id).stage is RECORDED


def test_the_database_never_lowers_the_count(mail_app: MailFathom, smtp: FaultServer) -> None:
    email = _sent_again(mail_app, smtp)
    with pytest.raises(StoreError, match="body_transmissions never decreases"):
        _raw(mail_app, f"UPDATE mf_outbox SET body_transmissions = 0 WHERE id = {email.id}")
    assert mail_app.outbox.get(email.id).body_transmissions == 1


# -- the CHECK "Recorded and Cancelled have no transmission_begun_at" ---------------------

#: The guard, as each dialect's error names it: SQLite quotes an unnamed CHECK's
#: expression; PostgreSQL names the constraint (looked up by its definition below).
_SQLITE_BEGUN_AT_GUARD = "stage NOT IN ('Recorded', 'Cancelled') OR transmission_begun_at IS NULL"


def _begun_at_guard(app: MailFathom) -> str:
    """How the error of the CHECK "Recorded/Cancelled ⇒ transmission_begun_at IS NULL"
    names it on this store (fails if the store has no such CHECK)."""
    if app.store.dialect == "sqlite":
        with raw_reading(app) as cur:
            cur.execute("SELECT sql FROM sqlite_master WHERE name = 'mf_outbox'")
            assert _SQLITE_BEGUN_AT_GUARD in cur.fetchone()["sql"], "the CHECK is gone"
        return _SQLITE_BEGUN_AT_GUARD
    with raw_reading(app) as cur:
        cur.execute(
            "SELECT conname FROM pg_constraint WHERE conrelid = 'mf_outbox'::regclass "
            "AND contype = 'c' AND pg_get_constraintdef(oid) LIKE %s",
            ("%'Recorded'%'Cancelled'%transmission_begun_at IS NULL%",),
        )
        names = [row["conname"] for row in cur.fetchall()]
    assert len(names) == 1, f"expected one such CHECK, found {names}"
    return f'violates check constraint "{names[0]}"'


@pytest.mark.parametrize(
    "sql",
    [
        # a Recorded record claiming a transmission began
        "UPDATE mf_outbox SET transmission_begun_at = created_at WHERE stage = 'Recorded'",
        # a move back to Recorded that forgets to clear transmission_begun_at
        "UPDATE mf_outbox SET stage = 'Recorded' WHERE stage = 'TransmissionBegun'",
        # a Cancelled record claiming a transmission began
        "UPDATE mf_outbox SET transmission_begun_at = created_at WHERE stage = 'Cancelled'",
    ],
    ids=["recorded_with_begun_at", "back_to_recorded_keeping_begun_at", "cancelled_with_begun_at"],
)
def test_recorded_and_cancelled_have_no_transmission_begun_at(
    mail_app: MailFathom, smtp: FaultServer, sql: str
) -> None:
    recorded = mail_app.outbox.record(message())
    cancelled = mail_app.outbox.record(message(to="carol@example.com"))
    mail_app.outbox.cancel(cancelled.id, actor="ops")
    smtp.script(end="disconnect")
    begun = mail_app.outbox.record(message(to="dan@example.com"))
    deliver(mail_app)  # both Recorded ones go out, and their answers are lost
    assert [mail_app.outbox.get(e.id).stage for e in (recorded, cancelled, begun)] == [
        BEGUN,
        CANCELLED,
        BEGUN,
    ]
    mail_app.outbox.resolve(recorded.id, "send_again", actor="ops")  # Recorded again
    before = [mail_app.outbox.get(e.id) for e in (recorded, cancelled, begun)]
    with pytest.raises(StoreError, match=re.escape(_begun_at_guard(mail_app))):
        _raw(mail_app, sql)
    assert [mail_app.outbox.get(e.id) for e in (recorded, cancelled, begun)] == before


# -- migration 0005 counts what records made before it still show -----------------------

#: (name, stage, began, reason, send_again events) as a record left by migration 0004
#: shows it, and the count 0005 gives it.
_LEGACY = [
    ("untouched", "Recorded", False, None, 0, 0),
    ("4xx to the body", "Recorded", False, "the end of data was answered 451 4.3.0 later", 0, 1),
    ("sent again, waiting", "Recorded", False, "send_again by ops", 1, 1),
    ("in transmission", "TransmissionBegun", True, None, 0, 1),
    ("sent after a send_again", "Sent", True, None, 1, 2),
    ("refused after the body", "Refused", True, "the end of data was answered 554 no", 0, 1),
    ("cancelled after a send_again (the bug)", "Cancelled", False, "cancelled by ops", 1, 0),
]


def test_migration_0005_counts_the_bodies_existing_records_sent(
    database_url: str, clock: FakeClock
) -> None:
    with MailFathom(database_url, clock=clock) as app:
        db = app.store.db
        assert db.apply_migrations(load_migrations(app.store.dialect)[:4])
        sqlite = app.store.dialect == "sqlite"

        def named(name: str) -> str:
            return f":{name}" if sqlite else f"%({name})s"

        now = db.time_param(clock.now())
        ids = {}
        with db.transaction() as cur:
            for name, stage, began, reason, again, _ in _LEGACY:
                final = stage in ("Sent", "Refused", "Cancelled")
                cur.execute(
                    "INSERT INTO mf_outbox (stage, message_id, sender, message, size, smtputf8, "
                    "eightbit, created_at, transmission_begun_at, finished_at, reason) VALUES "
                    f"({named('stage')}, '<m@x>', 'a@x.org', {named('msg')}, 1, {named('no')}, "
                    f"{named('no')}, {named('now')}, {named('began')}, {named('done')}, "
                    f"{named('reason')}) RETURNING id",
                    {
                        "stage": stage,
                        "msg": b"x",
                        "no": False,
                        "now": now,
                        "began": now if began else None,
                        "done": now if final else None,
                        "reason": reason,
                    },
                )
                ids[name] = cur.fetchone()["id"]
                for _ in range(again):
                    cur.execute(
                        "INSERT INTO mf_outbox_events (email_id, at, actor, action, from_stage, "
                        f"to_stage) VALUES ({ids[name]}, {named('now')}, 'ops', 'send_again', "
                        "'TransmissionBegun', 'Recorded')",
                        {"now": now},
                    )
        assert app.migrate()[0] == "0005_transmissions.sql"
        counts = {name: app.outbox.get(ids[name]).body_transmissions for name in ids}
        assert counts == {name: expected for name, *_, expected in _LEGACY}
        with pytest.raises(IllegalTransition, match="body already went out once"):
            app.outbox.cancel(ids["4xx to the body"], actor="ops")
        assert app.outbox.cancel(ids["untouched"], actor="ops").stage is CANCELLED
