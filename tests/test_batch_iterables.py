"""``enqueue_many`` and ``outbox.record_many`` read any iterable chunk by chunk, in one
transaction, and return compact ids (``returning="ids"``) when asked: the input is read
only as the chunks are written, a failure in any chunk leaves nothing, and the ids say
which items the call created."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable, Iterator
from email.message import EmailMessage
from typing import Any

import psycopg
import pytest

from mailfathom import (
    AsyncMailFathom,
    BatchIds,
    InvalidInput,
    JobState,
    MailFathom,
    PayloadError,
)

CHUNK = 10


@pytest.fixture
def small(mf: MailFathom) -> MailFathom:
    """The app with chunks of ten, so that a batch of a few dozen spans several."""
    mf.queue.enqueue_chunk = CHUNK
    mf.outbox.record_chunk = CHUNK
    return mf


def _message(n: int) -> EmailMessage:
    msg = EmailMessage()
    msg["From"] = "shop@example.com"
    msg["To"] = f"user{n}@example.com"
    msg["Subject"] = f"Order {n}"
    msg.set_content(f"Order {n} has shipped.")
    return msg


def _written(mf: MailFathom) -> int:
    return sum(mf.jobs.counts().values()) + sum(mf.outbox.counts().values())


def _writing(url: str, table: str) -> bool:
    """Whether another connection holds an open write on ``table`` right now: SQLite's
    write lock taken, or a PostgreSQL session holding a row-insert lock on it."""
    if url.startswith("sqlite:///"):
        probe = sqlite3.connect(url.removeprefix("sqlite:///"), timeout=0, isolation_level=None)
        try:
            probe.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            assert "locked" in str(exc)
            return True
        finally:
            probe.close()
        return False
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_locks WHERE relation = %s::regclass "
            "AND mode = 'RowExclusiveLock' AND pid <> pg_backend_pid()",
            (table,),
        ).fetchone()
    assert row is not None
    return int(row[0]) > 0


# -- enqueue_many -----------------------------------------------------------------------


def test_a_generator_is_enqueued_in_order_and_ids_name_each_job(small: MailFathom) -> None:
    ids = small.enqueue_many("batch.job", ({"n": n} for n in range(35)), returning="ids")
    assert isinstance(ids, BatchIds)
    assert len(ids) == 35 and ids.created_count == 35
    assert [small.jobs.get(job_id).payload for job_id in ids] == [{"n": n} for n in range(35)]
    assert list(ids) == sorted(ids) and len(set(ids)) == 35
    assert ids[-1] == ids[34] and ids[2:4] == [ids[2], ids[3]]
    assert all(ids.created(i) for i in range(35)) and ids.created(-1)
    with pytest.raises(IndexError):
        ids.created(35)
    jobs = small.enqueue_many("batch.job", iter([{"n": n} for n in range(25)]))
    assert [job.payload for job in jobs] == [{"n": n} for n in range(25)]  # jobs by default
    assert small.enqueue_many("batch.job", iter([]), returning="ids") == BatchIds()


def test_ids_of_existing_keys_are_the_existing_jobs(small: MailFathom) -> None:
    first = small.enqueue("batch.job", {"n": 0}, idempotency_key="k12")
    keys = (f"k{n}" if n % 4 == 0 else None for n in range(30))
    ids = small.enqueue_many(
        "batch.job", ({"n": n} for n in range(30)), idempotency_keys=keys, returning="ids"
    )
    assert ids[12] == first.id and not ids.created(12)
    assert ids.created_count == 29
    assert [n for n in range(30) if not ids.created(n)] == [12]
    again = small.enqueue_many(
        "batch.job", [{"n": n} for n in range(30)], idempotency_keys=[f"k{n}" for n in range(30)]
    )
    assert [job.created for job in again] == [n % 4 != 0 for n in range(30)]
    assert [job.id for n, job in enumerate(again) if n % 4 == 0] == [
        ids[n] for n in range(0, 30, 4)
    ]


def test_the_input_is_read_as_the_chunks_are_written(small: MailFathom, database_url: str) -> None:
    seen: dict[int, bool] = {}

    def payloads() -> Iterator[dict[str, int]]:
        for n in range(3 * CHUNK):
            if n in (CHUNK - 1, CHUNK, CHUNK + 1, 2 * CHUNK + 1):
                seen[n] = _writing(database_url, "mf_jobs")
            yield {"n": n}

    small.enqueue_many("batch.job", payloads(), returning="ids")
    # the first chunk (and the one item that says more follow) is read before anything is
    # written; the rest of the second only once the first is written, in the transaction
    # that is still open while the third is read
    assert seen == {CHUNK - 1: False, CHUNK: False, CHUNK + 1: True, 2 * CHUNK + 1: True}
    assert small.jobs.counts()[JobState.PENDING] == 3 * CHUNK
    assert not _writing(database_url, "mf_jobs")


def _fails_in_chunk(k: int, error: BaseException) -> Callable[[], Iterator[Any]]:
    def payloads() -> Iterator[Any]:
        for n in range(5 * CHUNK):
            if n == k * CHUNK + 3:
                raise error
            yield {"n": n}

    return payloads


@pytest.mark.parametrize("returning", ["jobs", "ids"])
def test_a_failure_in_a_later_chunk_leaves_nothing(small: MailFathom, returning: Any) -> None:
    with pytest.raises(RuntimeError, match="the feed broke"):
        small.enqueue_many(
            "batch.job", _fails_in_chunk(2, RuntimeError("the feed broke"))(), returning=returning
        )
    assert _written(small) == 0
    bad = ({"n": n} if n != 3 * CHUNK + 1 else {"n": {1, 2}} for n in range(4 * CHUNK))
    with pytest.raises(PayloadError):
        small.enqueue_many("batch.job", bad, returning=returning)
    assert _written(small) == 0
    twice = (f"k{n % (2 * CHUNK)}" for n in range(3 * CHUNK))  # chunk 3 repeats chunk 1's
    with pytest.raises(InvalidInput, match="appears twice in one batch"):
        small.enqueue_many(
            "batch.job",
            ({"n": n} for n in range(3 * CHUNK)),
            idempotency_keys=twice,
            returning=returning,
        )
    assert _written(small) == 0


def test_keys_of_another_length_than_a_generator_leave_nothing(small: MailFathom) -> None:
    for count, word in ((3 * CHUNK - 1, "fewer"), (3 * CHUNK + 1, "more")):
        with pytest.raises(InvalidInput, match=f"idempotency_keys has {word} entries"):
            small.enqueue_many(
                "batch.job",
                ({"n": n} for n in range(3 * CHUNK)),
                idempotency_keys=(f"k{n}" for n in range(count)),
                returning="ids",
            )
        assert _written(small) == 0


def test_what_cannot_be_a_batch_is_refused(mf: MailFathom) -> None:
    with pytest.raises(InvalidInput, match='returning must be "jobs" or "ids"'):
        mf.enqueue_many("batch.job", [{}], returning="rows")  # type: ignore[call-overload]
    with pytest.raises(InvalidInput, match="payloads must be a list"):
        mf.enqueue_many("batch.job", 3)  # type: ignore[call-overload]
    with pytest.raises(InvalidInput, match="idempotency_keys must be a list"):
        mf.enqueue_many("batch.job", iter([{}]), idempotency_keys="k")
    assert _written(mf) == 0


# -- record_many ------------------------------------------------------------------------


def test_record_many_records_a_generator_and_returns_ids(small: MailFathom) -> None:
    first = small.outbox.record(_message(7), idempotency_key="m7")
    ids = small.outbox.record_many(
        (_message(n) for n in range(25)),
        idempotency_keys=(f"m{n}" for n in range(25)),
        returning="ids",
    )
    assert isinstance(ids, BatchIds) and len(ids) == 25 and ids.created_count == 24
    assert ids[7] == first.id and not ids.created(7)
    assert [small.outbox.get(i).subject for i in ids] == [f"Order {n}" for n in range(25)]
    assert small.jobs.counts()[JobState.PENDING] == 25
    records = small.outbox.record_many(
        (bytes(_message(n)) for n in range(100, 123)),
        envelopes=(("bulk@example.com", [f"r{n}@example.org"]) for n in range(23)),
    )
    assert [r.recipients[0].address for r in records] == [f"r{n}@example.org" for n in range(23)]
    assert small.outbox.record_many(iter([]), returning="ids") == BatchIds()


def test_record_many_reads_its_input_as_the_chunks_are_written(
    small: MailFathom, database_url: str
) -> None:
    seen: dict[int, bool] = {}

    def messages() -> Iterator[EmailMessage]:
        for n in range(3 * CHUNK):
            if n in (CHUNK, CHUNK + 1, 2 * CHUNK + 1):
                seen[n] = _writing(database_url, "mf_outbox")
            yield _message(n)

    small.outbox.record_many(messages(), returning="ids")
    assert seen == {CHUNK: False, CHUNK + 1: True, 2 * CHUNK + 1: True}
    assert sum(small.outbox.counts().values()) == 3 * CHUNK


@pytest.mark.parametrize("returning", ["records", "ids"])
def test_record_many_leaves_nothing_when_a_later_chunk_fails(
    small: MailFathom, returning: Any
) -> None:
    def messages(bad: int) -> Iterator[Any]:
        for n in range(4 * CHUNK):
            yield b"not a message" if n == bad else _message(n)

    with pytest.raises(InvalidInput, match=f"message {3 * CHUNK + 2} of the batch"):
        small.outbox.record_many(messages(3 * CHUNK + 2), returning=returning)
    assert _written(small) == 0

    def broken() -> Iterator[EmailMessage]:
        for n in range(4 * CHUNK):
            if n == 2 * CHUNK + 5:
                raise RuntimeError("the feed broke")
            yield _message(n)

    with pytest.raises(RuntimeError, match="the feed broke"):
        small.outbox.record_many(broken(), returning=returning)
    assert _written(small) == 0
    with pytest.raises(InvalidInput, match="envelopes has fewer entries than messages"):
        small.outbox.record_many(
            (bytes(_message(n)) for n in range(3 * CHUNK)),
            envelopes=(("a@example.com", ["b@example.com"]) for _ in range(2 * CHUNK + 1)),
            returning=returning,
        )
    assert _written(small) == 0
    with pytest.raises(InvalidInput, match="appears twice in one batch"):
        small.outbox.record_many(
            (_message(n) for n in range(3 * CHUNK)),
            idempotency_keys=(f"m{n % (2 * CHUNK)}" for n in range(3 * CHUNK)),
            returning=returning,
        )
    assert _written(small) == 0
    with pytest.raises(InvalidInput, match='returning must be "records" or "ids"'):
        small.outbox.record_many([_message(1)], returning="rows")  # type: ignore[call-overload]


# -- the async API ------------------------------------------------------------------------


def test_the_async_api_takes_generators_and_returns_ids(small: MailFathom) -> None:
    amf = AsyncMailFathom(small)

    async def main() -> tuple[BatchIds, BatchIds]:
        jobs = await amf.enqueue_many("batch.job", ({"n": n} for n in range(25)), returning="ids")
        emails = await amf.outbox.record_many((_message(n) for n in range(15)), returning="ids")
        return jobs, emails

    jobs, emails = asyncio.run(main())
    assert jobs.created_count == 25 and emails.created_count == 15
    assert small.jobs.get(jobs[24]).payload == {"n": 24}
    assert small.outbox.get(emails[14]).subject == "Order 14"


# -- in the caller's transaction ----------------------------------------------------------


def test_chunked_batches_join_the_callers_transaction(small: MailFathom, database_url: str) -> None:
    conn: Any = (
        sqlite3.connect(database_url.removeprefix("sqlite:///"))
        if database_url.startswith("sqlite:///")
        else psycopg.connect(database_url)
    )
    try:
        jobs = small.enqueue_many(
            "batch.job", ({"n": n} for n in range(25)), connection=conn, returning="ids"
        )
        emails = small.outbox.record_many(
            (_message(n) for n in range(25)), connection=conn, returning="ids"
        )
        assert len(jobs) == len(emails) == 25
        conn.rollback()
        assert _written(small) == 0  # rolled back with the caller's work: every chunk
        small.enqueue_many("batch.job", ({"n": n} for n in range(25)), connection=conn)
        small.outbox.record_many((_message(n) for n in range(25)), connection=conn)
        assert _written(small) == 0  # nothing committed on the caller's behalf
        conn.commit()
        assert small.jobs.counts()[JobState.PENDING] == 50
        assert sum(small.outbox.counts().values()) == 25
    finally:
        conn.close()
