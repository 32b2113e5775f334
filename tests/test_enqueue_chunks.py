"""A batch larger than one chunk is still one call: one transaction, all or nothing, in order.

``enqueue_many`` validates, encodes and writes a large batch chunk by chunk
(``JobQueue.enqueue_chunk`` jobs at a time) inside its one transaction; these tests make
the chunk 3 jobs so that a batch of a few jobs crosses several chunk boundaries.
"""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from mailfathom import FakeClock, InvalidInput, MailFathom, PayloadError

CHUNK = 3


@pytest.fixture
def chunked(mf: MailFathom) -> Iterator[MailFathom]:
    mf.queue.enqueue_chunk = CHUNK
    yield mf


@pytest.mark.parametrize("bad", [CHUNK, 2 * CHUNK + 1], ids=["first-of-a-chunk", "last-item"])
def test_a_bad_item_in_a_later_chunk_writes_nothing(chunked: MailFathom, bad: int) -> None:
    payloads: list[Any] = [{"i": i} for i in range(2 * CHUNK + 2)]
    payloads[bad] = {"i": object()}
    with pytest.raises(PayloadError, match="payload"):
        chunked.enqueue_many("k", payloads)
    assert sum(chunked.jobs.counts().values()) == 0, "earlier chunks were rolled back"
    jobs = chunked.enqueue_many("k", [{"i": i} for i in range(2 * CHUNK + 2)])
    assert [job.payload["i"] for job in jobs] == list(range(2 * CHUNK + 2))


def test_a_bad_item_in_a_later_chunk_inside_the_callers_transaction_keeps_the_callers_work(
    chunked: MailFathom, database_url: str
) -> None:
    conn: Any
    if chunked.store.dialect == "sqlite":
        conn = sqlite3.connect(database_url.removeprefix("sqlite:///"))
    else:
        conn = psycopg.connect(database_url)
    try:
        chunked.enqueue("k", {"i": "mine"}, connection=conn)
        with pytest.raises(PayloadError):
            chunked.enqueue_many("k", [{"i": 1}] * CHUNK + [{"i": object()}], connection=conn)
        conn.commit()
    finally:
        conn.close()
    assert [job.payload for job in chunked.jobs.list()] == [{"i": "mine"}]


def test_a_limit_key_that_fails_late_names_its_index_and_writes_nothing(
    chunked: MailFathom,
) -> None:
    @chunked.job("keyed", limit_key=lambda payload: payload["customer"], max_running_per_key=1)
    def keyed(customer: int) -> None:
        """Never runs."""

    payloads: list[Any] = [{"customer": i} for i in range(2 * CHUNK)]
    payloads[2 * CHUNK - 1] = {}
    with pytest.raises(InvalidInput, match=f"payload #{2 * CHUNK - 1}"):
        chunked.enqueue_many("keyed", payloads)
    assert sum(chunked.jobs.counts().values()) == 0


def test_a_batch_across_chunks_returns_every_job_in_order_as_stored(
    chunked: MailFathom, clock: FakeClock
) -> None:
    existing = chunked.enqueue("k", {"i": -1}, idempotency_key="k4")
    n = 3 * CHUNK + 1
    keys = [f"k{i}" if i % 2 == 0 else None for i in range(n)]
    jobs = chunked.enqueue_many("k", [{"i": i} for i in range(n)], idempotency_keys=keys)
    assert [job.payload["i"] for job in jobs] == [-1 if i == 4 else i for i in range(n)]
    assert [job.created for job in jobs] == [i != 4 for i in range(n)]
    assert jobs[4].id == existing.id
    created = [job.id for job in jobs if job.created]
    assert created == sorted(created)
    for job in jobs:
        stored = dataclasses.asdict(chunked.jobs.get(job.id))
        assert stored == {k: v for k, v in dataclasses.asdict(job).items() if k != "created"}
    assert sum(chunked.jobs.counts().values()) == n
