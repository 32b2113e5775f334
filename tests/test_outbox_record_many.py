"""``mf.outbox.record_many``: a batch of records and their delivery jobs in one transaction,
validated like ``record`` before anything is written."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from email.message import EmailMessage
from typing import Any

import pytest

from mailfathom import InvalidInput, InvalidMessage, JobState, MailFathom, OutgoingEmailStage
from pg_trace import round_trips, traced
from raw_database import app_connection, raw_transaction


def _message(n: int, to: str | None = None) -> EmailMessage:
    msg = EmailMessage()
    msg["From"] = "shop@example.com"
    msg["To"] = to or f"user{n}@example.com"
    msg["Subject"] = f"Order {n}"
    msg.set_content(f"Order {n} has shipped.")
    return msg


def _nothing_recorded(mf: MailFathom) -> bool:
    return mf.outbox.list() == [] and sum(mf.jobs.counts().values()) == 0


def test_a_batch_is_recorded_in_order_with_one_delivery_job_each(mf: MailFathom) -> None:
    recorded = mf.outbox.record_many([_message(n) for n in range(3)], priority=5)
    assert [r.created for r in recorded] == [True, True, True]
    assert [r.recipients[0].address for r in recorded] == [f"user{n}@example.com" for n in range(3)]
    assert all(r.stage is OutgoingEmailStage.RECORDED for r in recorded)
    for r in recorded:
        job = mf.jobs.get(r.job_id or 0)
        assert (job.kind, job.state, job.priority) == ("mailfathom.deliver", JobState.PENDING, 5)
        assert job.payload == {"email_id": r.id}
        assert b"Order" in mf.outbox.message_bytes(r.id)
    assert len({r.job_id for r in recorded}) == 3
    assert mf.outbox.record_many([]) == []


def test_bytes_take_the_shared_envelope(mf: MailFathom) -> None:
    raw = [bytes(_message(n)) for n in range(2)]
    recorded = mf.outbox.record_many(raw, sender="bulk@example.com", recipients=["x@example.org"])
    assert [(r.sender, r.recipients[0].address) for r in recorded] == [
        ("bulk@example.com", "x@example.org")
    ] * 2


def test_existing_keys_return_their_records_and_record_nothing(mf: MailFathom) -> None:
    first = mf.outbox.record(_message(1), idempotency_key="order:1")
    batch = mf.outbox.record_many(
        [_message(9), _message(2), _message(3)], idempotency_keys=["order:1", "order:2", None]
    )
    assert [r.created for r in batch] == [False, True, True]
    assert batch[0].id == first.id and batch[0].subject == "Order 1"
    assert [r.address for r in batch[0].recipients] == ["user1@example.com"]
    assert len(mf.outbox.list()) == 3
    assert sum(mf.jobs.counts().values()) == 3


@pytest.mark.parametrize(
    ("keys", "match"),
    [
        (["a", "a"], "appears twice"),
        (["a"], "1 entries for 2 messages"),
        ("ab", "a string"),
    ],
)
def test_bad_keys_are_refused_and_nothing_is_recorded(
    mf: MailFathom, keys: Any, match: str
) -> None:
    with pytest.raises(InvalidInput, match=match):
        mf.outbox.record_many([_message(1), _message(2)], idempotency_keys=keys)
    assert _nothing_recorded(mf)


def test_one_bad_message_refuses_the_whole_batch(mf: MailFathom) -> None:
    batch = [_message(0), _message(1, to="not an address"), _message(2)]
    with pytest.raises(InvalidMessage, match=r"message 1 of the batch: .*nothing was recorded"):
        mf.outbox.record_many(batch)
    assert _nothing_recorded(mf)


@pytest.mark.parametrize("given", [b"raw", "text", EmailMessage()])
def test_a_single_message_is_not_a_batch(mf: MailFathom, given: Any) -> None:
    with pytest.raises(InvalidInput, match="list of messages"):
        mf.outbox.record_many(given)
    assert _nothing_recorded(mf)


@pytest.fixture
def app_conn(mf: MailFathom, database_url: str) -> Iterator[Any]:
    """The application's own connection to mailfathom's database."""
    with app_connection(mf, database_url) as conn:
        yield conn


def test_the_batch_lives_or_dies_with_the_callers_transaction(
    mf: MailFathom, app_conn: Any
) -> None:
    recorded = mf.outbox.record_many([_message(n) for n in range(2)], connection=app_conn)
    assert [r.created for r in recorded] == [True, True]
    app_conn.rollback()
    assert _nothing_recorded(mf)
    mf.outbox.record_many([_message(n) for n in range(2)], connection=app_conn)
    app_conn.commit()
    assert len(mf.outbox.list()) == 2
    assert mf.jobs.counts()[JobState.PENDING] == 2


def _refuse_user2(mf: MailFathom) -> None:
    """A trigger that fails the insert of user2@example.com's recipient row."""
    with raw_transaction(mf) as cur:
        cur.execute(
            "CREATE TRIGGER mf_test_refuse BEFORE INSERT ON mf_outbox_recipients "
            "WHEN NEW.address = 'user2@example.com' BEGIN SELECT RAISE(ABORT, 'refused'); END"
            if mf.store.dialect == "sqlite"
            else "CREATE FUNCTION mf_test_refuse() RETURNS trigger LANGUAGE plpgsql AS $$ "
            "BEGIN IF NEW.address = 'user2@example.com' THEN RAISE EXCEPTION 'refused'; END IF; "
            "RETURN NEW; END $$"
        )
        if mf.store.dialect != "sqlite":
            cur.execute(
                "CREATE TRIGGER mf_test_refuse BEFORE INSERT ON mf_outbox_recipients "
                "FOR EACH ROW EXECUTE FUNCTION mf_test_refuse()"
            )


def test_a_write_that_fails_midway_leaves_nothing(mf: MailFathom) -> None:
    """The batch is one transaction: the third insert fails (the key's row is written by
    the second), and the first two are rolled back with it."""
    _refuse_user2(mf)
    with pytest.raises(Exception, match="refused"):
        mf.outbox.record_many([_message(n) for n in range(3)])
    assert _nothing_recorded(mf)


def test_a_failed_batch_on_the_callers_connection_leaves_its_transaction_usable(
    mf: MailFathom, app_conn: Any
) -> None:
    """The batch is a savepoint in the caller's transaction: when the database refuses its
    third message, none of it stays, and the caller's own write before it and its next
    batch commit."""
    _refuse_user2(mf)
    job = mf.enqueue("app.before", {}, connection=app_conn)
    with pytest.raises(Exception, match="refused"):
        mf.outbox.record_many([_message(n) for n in range(3)], connection=app_conn)
    mf.outbox.record_many([_message(n) for n in (4, 5)], connection=app_conn)
    app_conn.commit()
    assert mf.jobs.get(job.id).kind == "app.before"
    assert sorted(e.recipients[0].address for e in mf.outbox.list()) == [
        "user4@example.com",
        "user5@example.com",
    ]


def test_each_message_may_have_its_own_envelope(mf: MailFathom) -> None:
    """``envelopes``: one (sender, recipients) per message, Bcc-like recipients included;
    given with sender=/recipients= or of the wrong length, refused with nothing recorded."""
    raw = [_message(n).as_bytes() for n in range(2)]
    envelopes = [
        ("a@example.com", ["user0@example.com"]),
        ("b@example.com", ["user1@example.com", "hidden@example.com"]),
    ]
    recorded = mf.outbox.record_many(raw, envelopes=envelopes)
    assert [r.sender for r in recorded] == ["a@example.com", "b@example.com"]
    assert [r.address for r in recorded[1].recipients] == [
        "user1@example.com",
        "hidden@example.com",
    ]
    before = len(mf.outbox.list())
    with pytest.raises(InvalidInput, match="not both"):
        mf.outbox.record_many(raw, envelopes=envelopes, sender="c@example.com")
    with pytest.raises(InvalidInput, match="1 entries for 2 messages"):
        mf.outbox.record_many(raw, envelopes=envelopes[:1])
    with pytest.raises(InvalidInput, match="not a \\(sender, recipients\\) pair"):
        mf.outbox.record_many(raw, envelopes=[envelopes[0], "b@example.com"])  # type: ignore[list-item]
    with pytest.raises(InvalidInput, match="message 1 of the batch"):
        mf.outbox.record_many(raw, envelopes=[envelopes[0], ("b@example.com", ["x..y@z.com"])])
    assert len(mf.outbox.list()) == before


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
def test_a_batch_without_keys_is_one_statement_on_postgresql(mf: MailFathom, app_conn: Any) -> None:
    """Counted in libpq's trace of the caller's connection, in its open transaction: a
    batch without idempotency keys is one statement (its records, their recipients and
    their delivery jobs), sent with the savepoint and its release in one flight; each
    message keeps its own envelope, in input order."""
    app_conn.execute("SELECT 1")  # the caller's transaction has begun
    mf.outbox.record_many([_message(n) for n in range(2)], connection=app_conn)  # the check
    due = datetime.now(UTC).replace(microsecond=0) + timedelta(hours=1)
    with traced(app_conn.pgconn) as lines:
        recorded = mf.outbox.record_many(
            [_message(n) for n in range(5)],
            connection=app_conn,
            run_at=due,
            priority=3,
            expires_at=due + timedelta(hours=1),
        )
    executed = [line for line in lines if line.startswith("F\t") and "\tExecute\t" in line]
    assert round_trips(app_conn.pgconn, lines) == 1, lines
    assert len(executed) == 3, lines  # the savepoint, the batch, the release
    app_conn.commit()
    assert [r.recipients[0].address for r in recorded] == [f"user{n}@example.com" for n in range(5)]
    assert [r.id for r in recorded] == sorted(r.id for r in recorded)
    assert len(mf.outbox.list()) == 7
    for email in recorded:
        assert (email.priority, email.expires_at) == (3, due + timedelta(hours=1))
        assert email.job_id is not None
        job = mf.jobs.get(email.job_id)
        assert job.payload == {"email_id": email.id}
        assert (job.state, job.available_at, job.priority) == (JobState.PENDING, due, 3)


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
def test_a_batch_with_keys_is_one_statement_on_postgresql(mf: MailFathom, app_conn: Any) -> None:
    """Counted in libpq's trace of the caller's connection: a batch with idempotency keys
    is one statement too, in one flight with the savepoint and its release; a key that
    exists then costs the reads of its record, which comes back in its place
    (``created`` False), the others in input order."""
    first = mf.outbox.record(_message(1), idempotency_key="order:1")
    app_conn.execute("SELECT 1")  # the caller's transaction has begun
    mf.outbox.record_many([_message(7), _message(8)], connection=app_conn)  # the check
    with traced(app_conn.pgconn) as lines:
        batch = mf.outbox.record_many(
            [_message(n) for n in (2, 1, 3, 4)],
            idempotency_keys=["order:2", "order:1", None, "order:4"],
            connection=app_conn,
        )
    executed = [line for line in lines if line.startswith("F\t") and "\tExecute\t" in line]
    # the savepoint, the batch and the release; then the existing record, its recipients
    # and the records of its message
    assert len(executed) == 6, lines
    app_conn.commit()
    assert [r.created for r in batch] == [True, False, True, True]
    assert batch[1].id == first.id and batch[1].subject == "Order 1"
    assert [r.recipients[0].address for r in batch] == [
        f"user{n}@example.com" for n in (2, 1, 3, 4)
    ]
    assert [r.idempotency_key for r in batch] == ["order:2", "order:1", None, "order:4"]
    assert len(mf.outbox.list()) == 6
    assert sum(mf.jobs.counts().values()) == 6
