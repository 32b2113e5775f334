"""The schema holds the invariants itself, and migrations are idempotent and race-safe."""

from __future__ import annotations

import multiprocessing
import queue
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import psycopg
import pytest

from guard_probe import check, insert_row, refused_by
from mailfathom import FakeClock, JobState, MailFathom, OutgoingEmailStage, StoreError
from mailfathom.store.migrate import load_migrations
from mailfathom.store.sqlite import SQLiteDatabase
from mailfathom.testing import claim
from raw_database import raw_reading, raw_time_param, raw_transaction


def _raw(mf: MailFathom, sql: str) -> None:
    with raw_transaction(mf) as cur:
        cur.execute(sql)


@pytest.mark.parametrize(
    "sql",
    [
        "UPDATE mf_jobs SET state = 'Finished'",
        "UPDATE mf_jobs SET state = 'Succeeded'",  # terminal without finished_at
        "UPDATE mf_jobs SET finished_at = created_at",  # finished but Pending
        "UPDATE mf_jobs SET state = 'Claimed'",  # Claimed without a lease
        "UPDATE mf_jobs SET lease_owner = 'w', lease_expires_at = created_at",  # lease on Pending
        "UPDATE mf_jobs SET failure_class = 'Sometimes'",
        "UPDATE mf_jobs SET max_attempts = 0",
        "UPDATE mf_jobs SET state = 'DeadLettered', finished_at = created_at",  # no reason
        # a consistent row, but not a move of the state machine (Pending can only be claimed)
        "UPDATE mf_jobs SET state = 'Dropped', finished_at = created_at, "
        "failure_class = 'Permanent', failure_reason = 'x'",
        "UPDATE mf_jobs SET state = 'Succeeded', finished_at = created_at",
    ],
)
def test_check_constraints_refuse_impossible_rows(mf: MailFathom, sql: str) -> None:
    job = mf.enqueue("k", {"x": 1})
    before = mf.jobs.get(job.id)
    with pytest.raises(StoreError):
        _raw(mf, sql)
    assert mf.jobs.get(job.id) == before
    assert mf.jobs.get(job.id).state.value == "Pending"


def test_idempotency_key_is_unique_in_the_table(mf: MailFathom) -> None:
    mf.enqueue("k", idempotency_key="a")
    mf.enqueue("k", idempotency_key="b")
    with pytest.raises(StoreError):
        _raw(mf, "UPDATE mf_jobs SET idempotency_key = 'a'")


def test_migrate_is_idempotent(mf: MailFathom) -> None:
    assert mf.migrate() == []
    assert mf.migrate() == []


def _migrate_together(url: str, barrier: Any, results: Any) -> None:
    with MailFathom(url) as app:
        with raw_reading(app) as cur:  # connect first, so only the migration races
            cur.execute("SELECT 1")
        barrier.wait()
        started = time.monotonic()
        applied = app.migrate()
        results.put((applied, started, time.monotonic()))


def _race(url: str, processes: int) -> list[tuple[list[str], float, float]]:
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(processes), ctx.Queue()
    procs = [
        ctx.Process(target=_migrate_together, args=(url, barrier, results))
        for _ in range(processes)
    ]
    for proc in procs:
        proc.start()
    got: list[tuple[list[str], float, float]] = []
    deadline = time.monotonic() + 60
    while len(got) < len(procs):  # a process that died says so at once, not at the deadline
        try:
            got.append(results.get(timeout=0.2))
        except queue.Empty:
            failed = [proc.exitcode for proc in procs if proc.exitcode not in (None, 0)]
            assert not failed, f"a migrating process failed (exit codes {failed})"
            assert time.monotonic() < deadline, "the migrations did not finish"
    for proc in procs:
        proc.join(30)
        assert proc.exitcode == 0
    return got


def _empty(url: str) -> None:
    """Drop everything the migrations made (the file, or the schema's contents)."""
    if url.startswith("sqlite:///"):
        for suffix in ("", "-wal", "-shm"):
            Path(url.removeprefix("sqlite:///") + suffix).unlink(missing_ok=True)
        return
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT current_schema()").fetchone()
        assert row is not None
        conn.execute(f'DROP SCHEMA "{row[0]}" CASCADE')
        conn.execute(f'CREATE SCHEMA "{row[0]}"')


@pytest.mark.slow
def test_concurrent_migrations_apply_each_file_once(database_url: str, clock: FakeClock) -> None:
    dialect = "sqlite" if database_url.startswith("sqlite") else "postgresql"
    every_file = [name for _, name, _ in load_migrations(dialect)]
    overlapped = False
    for _ in range(3):  # a loaded machine may serialise a race by chance; three tries
        _empty(database_url)
        got = _race(database_url, 4)
        applied = sorted(name for names, _, _ in got for name in names)
        assert applied == every_file, "a migration was applied twice, or never"
        latest_start = max(started for _, started, _ in got)
        first_end = min(ended for _, _, ended in got)
        if latest_start < first_end:
            overlapped = True
            break
    assert overlapped, "the migrations always ran one after another: they never raced"
    with MailFathom(database_url, clock=clock) as app:
        assert app.migrate() == []
        app.enqueue("k")
        assert len(claim(app, "w", 1, timedelta(seconds=1))) == 1


def test_only_the_queues_own_state_moves_are_possible(mf: MailFathom) -> None:
    job = mf.enqueue("k", {"x": 1})
    _raw(mf, "UPDATE mf_jobs SET state = 'Pending'")  # not a move: allowed
    with pytest.raises(StoreError, match="illegal job state move"):
        _raw(
            mf,
            "UPDATE mf_jobs SET state = 'Dropped', finished_at = created_at, "
            "failure_class = 'Permanent', failure_reason = 'x'",
        )
    assert mf.jobs.get(job.id).state.value == "Pending"


# -- each CHECK on its own: a row that breaks exactly one, refused by exactly that one ------

_NOW = "2026-01-01T00:00:00+00:00"


def _stamp(mf: MailFathom) -> object:
    return raw_time_param(mf, datetime.fromisoformat(_NOW))


def _job_row(mf: MailFathom, **changes: object) -> dict[str, object]:
    """A valid Pending job row, then ``changes`` (the string "now" stands for a time)."""
    row: dict[str, object] = {
        "kind": "k",
        "queue": "default",
        "payload": "{}",
        "priority": 0,
        "state": "Pending",
        "available_at": "now",
        "attempts": 1,
        "attempt_base": 0,
        "max_attempts": 3,
        "created_at": "now",
    }
    row.update(changes)
    return {name: _stamp(mf) if value == "now" else value for name, value in row.items()}


# (case, the columns given, the CHECK that must refuse it: the columns it reads)
JOB_CHECK_CASES: list[tuple[str, dict[str, object], tuple[str, ...]]] = [
    ("kind_length", {"kind": ""}, ("kind",)),
    ("queue_length", {"queue": ""}, ("queue",)),
    ("payload_object", {"payload": "[1]"}, ("payload",)),
    ("state_names", {"state": "Finished"}, ("state",)),
    ("attempt_base_range", {"attempt_base": 2}, ("attempt_base", "attempts")),
    ("max_attempts_positive", {"max_attempts": 0}, ("max_attempts",)),
    ("failure_class_names", {"failure_class": "Sometimes"}, ("failure_class",)),
    ("terminal_means_finished", {"finished_at": "now"}, ("finished_at", "state")),
    (
        "finished_means_terminal",
        {"state": "Succeeded"},
        ("finished_at", "state"),
    ),
    (
        "claimed_means_a_lease",
        {"state": "Claimed"},
        ("lease_expires_at", "lease_owner", "state"),
    ),
    (
        "a_lease_means_claimed",
        {"lease_owner": "w", "lease_expires_at": "now"},
        ("lease_expires_at", "lease_owner", "state"),
    ),
    ("lease_owner_and_expiry_together", {"lease_owner": "w"}, ("lease_expires_at", "lease_owner")),
    (
        "a_dead_letter_says_why",
        {"state": "DeadLettered", "finished_at": "now", "failure_class": "Permanent"},
        ("failure_class", "failure_reason", "state"),
    ),
    (
        "a_dropped_job_says_why",
        {"state": "Dropped", "finished_at": "now", "failure_reason": "x"},
        ("failure_class", "failure_reason", "state"),
    ),
    (
        "a_claimed_job_used_an_attempt",
        {"state": "Claimed", "lease_owner": "w", "lease_expires_at": "now", "attempt_base": 1},
        ("attempt_base", "attempts", "state"),
    ),
    ("trace_context_length", {"trace_context": ""}, ("trace_context",)),
    ("compacted_means_terminal", {"compacted_at": "now"}, ("compacted_at", "state")),
    (
        "compacted_has_no_payload",
        {"state": "Succeeded", "finished_at": "now", "compacted_at": "now", "payload": '{"x":1}'},
        ("compacted_at", "payload"),
    ),
]


@pytest.mark.parametrize(
    ("changes", "guard"),
    [pytest.param(changes, guard, id=case) for case, changes, guard in JOB_CHECK_CASES],
)
def test_each_job_check_refuses_the_row_it_is_for(
    mf: MailFathom, changes: dict[str, object], guard: tuple[str, ...]
) -> None:
    with raw_transaction(mf) as cur:  # the same row without the change is fine
        insert_row(cur, mf, "mf_jobs", _job_row(mf))
    row = _job_row(mf, **changes)
    fired = refused_by(mf, "mf_jobs", lambda cur: insert_row(cur, mf, "mf_jobs", row))
    assert fired == check(*guard)
    assert mf.jobs.counts()[JobState.PENDING] == 1


@pytest.mark.parametrize(
    ("column", "longest"),
    [("kind", 200), ("queue", 100), ("trace_context", 512), ("limit_key", 200)],
)
def test_job_text_checks_allow_exactly_their_lengths(
    mf: MailFathom, column: str, longest: int
) -> None:
    """Both ends of each length bound are allowed and one past either is refused (the
    PostgreSQL CHECK is a range test since 0019: its ends must stay inclusive)."""
    with raw_transaction(mf) as cur:
        for length in (1, longest):
            insert_row(cur, mf, "mf_jobs", _job_row(mf, **{column: "x" * length}))
    for length in (0, longest + 1):
        row = _job_row(mf, **{column: "x" * length})
        write = partial(insert_row, mf=mf, table="mf_jobs", row=row)
        assert refused_by(mf, "mf_jobs", write) == check(column)
    assert mf.jobs.counts()[JobState.PENDING] == 2


@pytest.mark.parametrize(
    ("state", "allowed"),
    [
        ("Pending", True),
        ("Succeeded", True),
        ("DeadLettered", True),
        ("Dropped", True),
        ("pending", False),
        ("Finished", False),
    ],
)
def test_job_state_check_allows_exactly_the_five_states(
    mf: MailFathom, state: str, allowed: bool
) -> None:
    """Each state name inserts (with what its other CHECKs ask for), anything else is
    refused by the state CHECK itself."""
    ended = {"finished_at": "now", "failure_class": "Permanent", "failure_reason": "x"}
    terminal = state in ("Succeeded", "DeadLettered", "Dropped")
    row = _job_row(mf, state=state, **(ended if terminal else {}))
    if allowed:
        with raw_transaction(mf) as cur:
            insert_row(cur, mf, "mf_jobs", row)
        assert mf.jobs.counts()[JobState(state)] == 1
    else:
        assert refused_by(mf, "mf_jobs", lambda cur: insert_row(cur, mf, "mf_jobs", row)) == (
            check("state")
        )


def _email_row(mf: MailFathom, **changes: object) -> dict[str, object]:
    """A valid Recorded outbox row, then ``changes`` ("now" stands for a time)."""
    body = b"Subject: x\r\n\r\nhello\r\n"
    row: dict[str, object] = {
        "stage": "Recorded",
        "message_id": "<a@example.com>",
        "sender": "a@example.com",
        "message": body,
        "size": len(body),
        "smtputf8": False,
        "eightbit": False,
        "attempts": 0,
        "created_at": "now",
    }
    row.update(changes)
    return {name: _stamp(mf) if value == "now" else value for name, value in row.items()}


EMAIL_CHECK_CASES: list[tuple[str, dict[str, object], tuple[str, ...]]] = [
    ("stage_names", {"stage": "Delivered"}, ("stage",)),
    ("message_id_length", {"message_id": "<>"}, ("message_id",)),
    ("size_is_the_length", {"size": 3}, ("message", "size")),
    ("attempts_nonnegative", {"attempts": -1}, ("attempts",)),
    ("reply_code_range", {"reply_code": 99}, ("reply_code",)),
    (
        "final_means_finished",
        {"stage": "Sent", "transmission_begun_at": "now"},
        ("finished_at", "stage"),
    ),
    ("finished_means_final", {"finished_at": "now"}, ("finished_at", "stage")),
    (
        "transmission_begun_has_its_instant",
        {"stage": "TransmissionBegun"},
        ("stage", "transmission_begun_at"),
    ),
    (
        "sent_has_the_instant_of_its_transmission",
        {"stage": "Sent", "finished_at": "now"},
        ("stage", "transmission_begun_at"),
    ),
    (
        "recorded_owes_a_fresh_start",
        {"transmission_begun_at": "now"},
        ("stage", "transmission_begun_at"),
    ),
    (
        "cancelled_means_nothing_was_transmitted",
        {"stage": "Cancelled", "finished_at": "now", "transmission_begun_at": "now"},
        ("stage", "transmission_begun_at"),
    ),
    ("a_refusal_says_why", {"stage": "Refused", "finished_at": "now"}, ("reason", "stage")),
    (
        "compacted_means_final",
        {"compacted_at": "now", "message": b"", "size": 0},
        ("compacted_at", "stage"),
    ),
    (
        "compacted_means_no_bytes",
        {"stage": "Cancelled", "finished_at": "now", "compacted_at": "now"},
        ("compacted_at", "message"),
    ),
]


@pytest.mark.parametrize(
    ("changes", "guard"),
    [pytest.param(changes, guard, id=case) for case, changes, guard in EMAIL_CHECK_CASES],
)
def test_each_outbox_check_refuses_the_row_it_is_for(
    mf: MailFathom, changes: dict[str, object], guard: tuple[str, ...]
) -> None:
    with raw_transaction(mf) as cur:
        insert_row(cur, mf, "mf_outbox", _email_row(mf))
    row = _email_row(mf, **changes)
    fired = refused_by(mf, "mf_outbox", lambda cur: insert_row(cur, mf, "mf_outbox", row))
    assert fired == check(*guard)
    assert mf.outbox.counts()[OutgoingEmailStage.RECORDED] == 1


def test_sqlite_keeps_outbox_flags_to_zero_or_one(tmp_path: Path) -> None:
    with MailFathom(f"sqlite:///{tmp_path / 'mf.db'}") as mf:
        mf.migrate()
        for flag in ("smtputf8", "eightbit"):
            write = partial(insert_row, mf=mf, table="mf_outbox", row=_email_row(mf, **{flag: 2}))
            assert refused_by(mf, "mf_outbox", write) == check(flag)
        text = _email_row(mf, message="Subject: x\r\n\r\nhello\r\n")  # text, not bytes
        fired = refused_by(mf, "mf_outbox", partial(insert_row, mf=mf, table="mf_outbox", row=text))
        assert fired == check("message", "size")


def test_sqlite_checks_each_version_under_the_write_lock(tmp_path: Path) -> None:
    """Two migrators, interleaved deterministically through SQLite's statement trace:
    the first stops at its check of version 1; the second goes as far as it can — to its
    own check and the BEGIN IMMEDIATE after it, or, when the first holds the write lock,
    to the BEGIN IMMEDIATE it will wait at — and stops there until the first has run its
    check. Checked under the lock, the second can only find version 1 applied; checked
    outside it, both find it missing and it is applied twice.

    Two database objects in one process behave as two processes would: the second
    reaches the file through a symlink, so the process's own writer lock (keyed by path)
    does not serialise them and only SQLite's file lock does.
    """
    path, alias = tmp_path / "mf.db", tmp_path / "alias.db"
    alias.symlink_to(path)
    first, second = SQLiteDatabase(str(path)), SQLiteDatabase(str(alias))
    with first.reading() as cur:  # the file exists, in WAL mode, before either opens it
        cur.execute("SELECT 1")
    first.close()
    migrations = load_migrations("sqlite")
    paused, first_checked, second_stopped = threading.Event(), threading.Event(), threading.Event()
    seen: dict[str, bool] = {}
    results: dict[str, list[str] | BaseException] = {}

    def checks_version_1(statement: str) -> bool:
        return statement.startswith("SELECT 1 FROM mf_migrations WHERE version = 1")

    def trace_first(statement: str) -> None:
        if seen.get("first checking") and not first_checked.is_set():
            first_checked.set()  # the check has run: this is the statement after it
        if checks_version_1(statement) and "first checking" not in seen:
            seen["first checking"] = True
            seen["first holds the lock"] = first._connection().in_transaction
            paused.set()
            second_stopped.wait(30)

    def trace_second(statement: str) -> None:
        if second_stopped.is_set() or not paused.is_set():
            return
        if checks_version_1(statement):
            seen["second checked"] = True
        if statement == "BEGIN IMMEDIATE" and (
            seen["first holds the lock"] or seen.get("second checked")
        ):
            second_stopped.set()
            first_checked.wait(30)

    def migrate(name: str, db: SQLiteDatabase, trace: Callable[[str], None]) -> None:
        db._connection().set_trace_callback(trace)
        try:
            if name == "second":
                assert paused.wait(30), "the first migrator never checked version 1"
            results[name] = db.apply_migrations(migrations)
        except BaseException as exc:
            results[name] = exc

    threads = [
        threading.Thread(target=migrate, args=("first", first, trace_first)),
        threading.Thread(target=migrate, args=("second", second, trace_second)),
    ]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
            assert not thread.is_alive()
    finally:
        first.close()
        second.close()
    assert second_stopped.is_set() and first_checked.is_set(), "the interleaving never happened"
    by_first, by_second = results["first"], results["second"]
    assert not isinstance(by_first, BaseException), by_first
    assert not isinstance(by_second, BaseException), by_second
    assert sorted(by_first + by_second) == [name for _, name, _ in migrations]
    assert seen["first holds the lock"], "the version check ran outside the write lock"
