"""Enqueue: payload rules, idempotency keys, timing, priority, batches, transactions."""

from __future__ import annotations

import dataclasses
import math
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from mailfathom import (
    FakeClock,
    InvalidInput,
    JobState,
    MailFathom,
    PayloadError,
)
from mailfathom.testing import claim


def test_enqueue_creates_a_pending_job_due_now(mf: MailFathom, clock: FakeClock) -> None:
    job = mf.enqueue("reports.build", {"report_id": 7})
    assert job.created is True
    assert job.state is JobState.PENDING
    assert job.payload == {"report_id": 7}
    assert job.queue == "default"
    assert job.available_at == clock.now()
    assert job.attempts == 0
    assert job.finished_at is None
    assert mf.jobs.get(job.id).payload == {"report_id": 7}


def test_a_lone_enqueue_is_committed_when_it_returns(mf: MailFathom, database_url: str) -> None:
    """One job outside a caller's transaction is one self-committing statement: another
    connection sees it at once, and the writer holds nothing open afterwards."""
    job = mf.enqueue("k", {"n": 1})
    with MailFathom(database_url) as other:
        assert other.jobs.get(job.id).payload == {"n": 1}
        assert other.enqueue("k", {"n": 2}).id > job.id  # the write lock is free
    again = mf.enqueue("k", idempotency_key="once")
    assert mf.enqueue("k", idempotency_key="once").id == again.id


def test_same_idempotency_key_returns_the_existing_job(mf: MailFathom) -> None:
    first = mf.enqueue("reports.build", {"report_id": 7}, idempotency_key="report:7")
    second = mf.enqueue("reports.build", {"report_id": 8}, idempotency_key="report:7")
    assert first.created and not second.created
    assert second.id == first.id
    assert second.payload == {"report_id": 7}
    assert sum(mf.jobs.counts().values()) == 1


def test_key_stays_taken_after_the_job_finished(mf: MailFathom) -> None:
    @mf.job("noop")
    def noop(ctx: object) -> None:
        return None

    first = mf.enqueue("noop", idempotency_key="once")
    assert mf.worker().run(burst=True) == 1
    assert mf.jobs.get(first.id).state is JobState.SUCCEEDED
    again = mf.enqueue("noop", idempotency_key="once")
    assert again.created is False and again.id == first.id
    assert again.state is JobState.SUCCEEDED
    assert mf.worker().run(burst=True) == 0


@pytest.mark.parametrize(
    "payload",
    [
        {"when": datetime(2020, 1, 1, tzinfo=UTC)},
        {"value": math.nan},
        {"value": math.inf},
        {1: "integer key"},
        {"nested": {1, 2}},
    ],
    ids=["datetime", "nan", "inf", "int-key", "set"],
)
def test_non_json_payload_is_refused_and_nothing_is_written(
    mf: MailFathom, payload: dict[object, object]
) -> None:
    with pytest.raises(PayloadError, match="payload"):
        mf.enqueue("reports.build", payload)  # type: ignore[arg-type]
    assert sum(mf.jobs.counts().values()) == 0


@pytest.mark.parametrize("payload", [[1, 2], "text", 5], ids=["list", "str", "int"])
def test_payload_must_be_a_dict(mf: MailFathom, payload: object) -> None:
    with pytest.raises(PayloadError, match="dict of keyword arguments"):
        mf.enqueue("reports.build", payload)  # type: ignore[arg-type]


def test_oversized_payload_is_refused(database_url: str, clock: FakeClock) -> None:
    with MailFathom(database_url, clock=clock, max_payload_bytes=1000) as app:
        app.migrate()
        app.enqueue("k", {"blob": "x" * 900})
        with pytest.raises(PayloadError, match="over the 1000-byte limit"):
            app.enqueue("k", {"blob": "x" * 1000})
        assert sum(app.jobs.counts().values()) == 1


def test_unicode_payload_round_trips(mf: MailFathom) -> None:
    payload = {"name": "Zoë 🚀", "items": [1, 2.5, None, True, {"k": "v"}]}
    assert mf.jobs.get(mf.enqueue("k", payload).id).payload == payload


def test_delay_and_run_at(mf: MailFathom, clock: FakeClock) -> None:
    delayed = mf.enqueue("k", delay=timedelta(minutes=5))
    assert delayed.available_at == clock.now() + timedelta(minutes=5)
    in_seconds = mf.enqueue("k", delay=30)
    assert in_seconds.available_at == clock.now() + timedelta(seconds=30)
    at = clock.now() + timedelta(hours=2)
    assert mf.enqueue("k", run_at=at).available_at == at
    assert claim(mf, "w", 10, timedelta(seconds=30)) == []
    clock.advance(timedelta(seconds=30))
    assert [j.id for j in claim(mf, "w", 10, timedelta(seconds=30))] == [in_seconds.id]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"delay": -1}, "zero or positive"),
        ({"delay": math.inf}, "finite"),
        ({"delay": "soon"}, "timedelta or seconds"),
        ({"delay": 10**12}, "too far in the future"),
        ({"delay": 1e300}, "too far in the future"),
        ({"delay": timedelta.max}, "too far in the future"),
        ({"run_at": datetime.max.replace(tzinfo=timezone(-timedelta(hours=5)))}, "year 9999"),
        ({"run_at": datetime(2030, 1, 1)}, "naive datetime"),
        ({"delay": 1, "run_at": datetime(2030, 1, 1, tzinfo=UTC)}, "either delay or run_at"),
        ({"hold": True, "delay": 5}, "hold=True cannot be combined"),
        ({"priority": 2**40}, "32-bit"),
        ({"priority": True}, "32-bit"),
        ({"queue": ""}, "queue"),
        ({"queue": "bad queue"}, "queue"),
        ({"idempotency_key": ""}, "idempotency_key"),
        ({"idempotency_key": "k" * 513}, "idempotency_key"),
        ({"max_attempts": 0}, "max_attempts"),
    ],
)
def test_bad_enqueue_arguments_are_refused(
    mf: MailFathom, kwargs: dict[str, object], message: str
) -> None:
    with pytest.raises(InvalidInput, match=message):
        mf.enqueue("k", {}, **kwargs)  # type: ignore[arg-type]
    assert sum(mf.jobs.counts().values()) == 0


def test_bad_kind_is_refused(mf: MailFathom) -> None:
    with pytest.raises(InvalidInput, match="job kind"):
        mf.enqueue("", {})
    with pytest.raises(InvalidInput, match="job kind"):
        mf.enqueue("has space", {})


def test_hold_creates_a_job_that_waits_for_release(mf: MailFathom, clock: FakeClock) -> None:
    held = mf.enqueue("k", hold=True)
    assert held.held and held.available_at is None and held.state is JobState.PENDING
    clock.advance(timedelta(days=365))
    assert claim(mf, "w", 10, timedelta(seconds=30)) == []
    released = mf.jobs.release(held.id, actor="ops", reason="run now")
    assert released.available_at == clock.now() and not released.held
    assert [j.id for j in claim(mf, "w", 10, timedelta(seconds=30))] == [held.id]


def test_priority_and_queue_are_stored(mf: MailFathom) -> None:
    job = mf.enqueue("k", priority=-3, queue="emails")
    assert (job.priority, job.queue) == (-3, "emails")


def test_registered_kind_supplies_queue_and_attempts(mf: MailFathom) -> None:
    @mf.job("mail.send", queue="mail", max_attempts=3)
    def send(ctx: object) -> None:
        return None

    job = mf.enqueue("mail.send")
    assert (job.queue, job.max_attempts) == ("mail", 3)
    assert mf.enqueue("mail.send", queue="other").queue == "other"


def test_enqueue_many_keeps_order_and_reports_existing_keys(mf: MailFathom) -> None:
    existing = mf.enqueue("k", {"i": -1}, idempotency_key="k2")
    jobs = mf.enqueue_many(
        "k",
        [{"i": i} for i in range(5)],
        idempotency_keys=["k0", None, "k2", None, "k4"],
        priority=2,
    )
    assert [j.payload for j in jobs] == [{"i": 0}, {"i": 1}, {"i": -1}, {"i": 3}, {"i": 4}]
    assert [j.created for j in jobs] == [True, True, False, True, True]
    assert jobs[2].id == existing.id
    assert all(j.priority == 2 for j in jobs if j.created)
    assert sum(mf.jobs.counts().values()) == 5


def test_enqueue_many_is_all_or_nothing_on_bad_input(mf: MailFathom) -> None:
    with pytest.raises(PayloadError):
        mf.enqueue_many("k", [{"i": 1}, {"i": object()}])
    with pytest.raises(InvalidInput, match="appears twice"):
        mf.enqueue_many("k", [{}, {}], idempotency_keys=["same", "same"])
    with pytest.raises(InvalidInput, match="one key"):
        mf.enqueue_many("k", [{}, {}], idempotency_keys=["only-one"])
    assert sum(mf.jobs.counts().values()) == 0


def test_enqueue_many_of_a_thousand(mf: MailFathom) -> None:
    jobs = mf.enqueue_many("k", [{"i": i} for i in range(1000)])
    assert len({j.id for j in jobs}) == 1000
    assert [j.payload["i"] for j in jobs] == list(range(1000))
    assert mf.jobs.counts()[JobState.PENDING] == 1000


@pytest.mark.parametrize("when", ["due", "delayed", "held"])
def test_enqueue_many_returns_exactly_the_rows_stored(
    mf: MailFathom, clock: FakeClock, when: str
) -> None:
    """PostgreSQL builds the returned jobs from what it sent instead of reading them
    back: every field must still be what a later read finds."""
    options: dict[str, dict[str, Any]] = {
        "due": {},
        "delayed": {"delay": timedelta(seconds=90)},
        "held": {"hold": True},
    }
    timing = options[when]
    jobs = mf.enqueue_many(
        "k",
        [{"i": 1, "nested": {"x": [1.5, "é"]}}, None, {"i": 3}],
        idempotency_keys=["row-a", None, "row-c"],
        queue="rows",
        priority=-3,
        max_attempts=7,
        **timing,
    )
    assert [job.created for job in jobs] == [True, True, True]
    for job in jobs:
        stored = mf.jobs.get(job.id)
        assert dataclasses.asdict(stored) == {
            name: value for name, value in dataclasses.asdict(job).items() if name != "created"
        }


def test_a_keyless_batch_returns_each_job_under_its_own_id(mf: MailFathom) -> None:
    """Keyless batches get their ids back as one array: each returned job must be the
    row stored under its id, and the ids must follow the input (FIFO)."""
    jobs = mf.enqueue_many("k", [{"i": i, "nested": [i]} if i % 2 else {"i": i} for i in range(50)])
    assert [job.id for job in jobs] == sorted(job.id for job in jobs)
    for job in jobs:
        stored = mf.jobs.get(job.id)
        assert dataclasses.asdict(stored) == {
            name: value for name, value in dataclasses.asdict(job).items() if name != "created"
        }


def test_the_returned_payload_is_not_the_callers_object(mf: MailFathom) -> None:
    """A returned job is a snapshot: changing the dict passed in afterwards (flat or
    nested) changes neither it nor the stored job."""
    flat: dict[str, Any] = {"a": 1, "b": "x"}
    nested: dict[str, Any] = {"a": [1, {"b": 2}]}
    jobs = mf.enqueue_many("k", [flat, nested])
    flat["a"] = 2
    nested["a"][1]["b"] = 3
    assert [job.payload for job in jobs] == [{"a": 1, "b": "x"}, {"a": [1, {"b": 2}]}]
    assert jobs[0].payload is not flat and jobs[1].payload is not nested
    assert [mf.jobs.get(job.id).payload for job in jobs] == [job.payload for job in jobs]


@pytest.mark.parametrize("when", ["due", "delayed", "held"])
def test_a_lone_enqueue_returns_exactly_the_row_stored(
    mf: MailFathom, clock: FakeClock, when: str
) -> None:
    """A lone job is inserted by one self-committing statement and, like a batch, built
    from what was sent: every field must still be what a later read finds."""
    options: dict[str, dict[str, Any]] = {
        "due": {},
        "delayed": {"delay": timedelta(seconds=90)},
        "held": {"hold": True},
    }
    timing = options[when]
    for key in (None, "lone"):
        job = mf.enqueue(
            "k", {"i": 1, "n": {"x": [1.5]}}, idempotency_key=key, queue="q", priority=4, **timing
        )
        assert job.created
        assert dataclasses.asdict(mf.jobs.get(job.id)) == {
            name: value for name, value in dataclasses.asdict(job).items() if name != "created"
        }
