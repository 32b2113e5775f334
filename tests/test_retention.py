"""Retention: old terminal rows are compacted in place and keep their keys forever.

Every test runs on SQLite and PostgreSQL with the fake clock: rows are brought to their
terminal state through the real worker, the clock moves past the retention period, and
``mf.prune()`` does the rest.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from email.message import EmailMessage
from typing import Any

import pytest

from mailfathom import (
    ConfigurationError,
    FakeClock,
    IllegalTransition,
    JobContext,
    JobState,
    MailFathom,
    PermanentFailure,
    Settings,
)
from raw_database import raw_reading

DAY = 86400.0

#: What compaction keeps of a job: every field but the payload and the result.
KEPT_JOB_FIELDS = {
    "id",
    "kind",
    "queue",
    "priority",
    "state",
    "idempotency_key",
    "available_at",
    "attempts",
    "attempt_base",
    "max_attempts",
    "lease_owner",
    "lease_expires_at",
    "claimed_by",
    "claimed_at",
    "failure_class",
    "failure_reason",
    "created_at",
    "finished_at",
}


def _app(mf: MailFathom, clock: FakeClock, **settings: Any) -> MailFathom:
    """Another app on ``mf``'s database with these settings (closed by the caller)."""
    return MailFathom(settings=dataclasses.replace(mf.settings, **settings), clock=clock)


def _register(mf: MailFathom) -> None:
    @mf.job("t.work", max_attempts=2)
    def work(ctx: JobContext, outcome: str, blob: str = "") -> dict[str, int]:
        if outcome == "fail":
            raise ValueError("line one of the failure\n" + "x" * 500)
        if outcome == "permanent":
            raise PermanentFailure("broken input")
        return {"blob_length": len(blob)}  # the result, compacted with the payload

    @mf.job("t.other")
    def other(ctx: JobContext, outcome: str = "ok") -> None:
        pass


def _finish(mf: MailFathom, clock: FakeClock) -> None:
    """Run everything due until nothing is left (failed attempts retry after backoff)."""
    for _ in range(5):
        mf.worker().run(burst=True)
        clock.advance(3600)


def test_compaction_keeps_exactly_the_listed_fields(mf: MailFathom, clock: FakeClock) -> None:
    _register(mf)
    ok = mf.enqueue("t.work", {"outcome": "ok", "blob": "b" * 1000}, idempotency_key="k:ok")
    failed = mf.enqueue("t.work", {"outcome": "fail"}, idempotency_key="k:fail")
    _finish(mf, clock)
    before_ok, before_failed = mf.jobs.get(ok.id), mf.jobs.get(failed.id)
    assert before_ok.state is JobState.SUCCEEDED
    assert before_failed.state is JobState.DEAD_LETTERED
    assert all(a.traceback for a in mf.jobs.attempts(failed.id))
    assert all(a.message and "\n" in a.message for a in mf.jobs.attempts(failed.id))

    clock.advance(8 * DAY)
    report = mf.prune()
    assert report.ran and report.rows["jobs"]["Succeeded"]["compacted"] == 1
    # DeadLettered is never compacted by default
    assert report.rows["jobs"].get("DeadLettered") is None
    after_ok = mf.jobs.get(ok.id)
    assert after_ok.compacted and after_ok.compacted_at == clock.now()
    assert after_ok.payload == {}
    assert before_ok.result == {"blob_length": 1000} and after_ok.result is None
    for name in KEPT_JOB_FIELDS:
        assert getattr(after_ok, name) == getattr(before_ok, name), name
    assert mf.jobs.get(failed.id) == before_failed  # untouched: it waits for an operator
    assert not before_failed.compacted

    # opted in: DeadLettered compacted too; attempts keep one summary line each
    with _app(mf, clock, retention={"DeadLettered": "7d"}) as other:
        other.prune()
        dead = other.jobs.get(failed.id)
        attempts = other.jobs.attempts(failed.id)
    assert dead.compacted and dead.payload == {}
    for name in KEPT_JOB_FIELDS:
        assert getattr(dead, name) == getattr(before_failed, name), name
    assert len(attempts) == 2
    for attempt in attempts:
        assert attempt.traceback is None
        assert attempt.message is not None
        assert attempt.message.endswith("ValueError: line one of the failure")
        assert attempt.error_type == "ValueError" and attempt.outcome.value == "Failed"
    # listing shows it too
    (listed,) = mf.jobs.list(state=JobState.SUCCEEDED)
    assert listed.compacted


def test_a_compacted_row_still_refuses_its_key(mf: MailFathom, clock: FakeClock) -> None:
    _register(mf)
    first = mf.enqueue("t.work", {"outcome": "ok"}, idempotency_key="once")
    _finish(mf, clock)
    clock.advance(30 * DAY)
    assert mf.prune().rows["jobs"]["Succeeded"]["compacted"] == 1
    again = mf.enqueue("t.work", {"outcome": "ok"}, idempotency_key="once")
    assert not again.created and again.id == first.id and again.compacted
    (batch_again,) = mf.enqueue_many("t.work", [{"outcome": "ok"}], idempotency_keys=["once"])
    assert not batch_again.created and batch_again.id == first.id


def test_nothing_is_pruned_before_its_period(mf: MailFathom, clock: FakeClock) -> None:
    _register(mf)
    job = mf.enqueue("t.work", {"outcome": "ok"})
    _finish(mf, clock)
    clock.advance(6 * DAY)
    assert mf.prune().total == 0
    assert not mf.jobs.get(job.id).compacted


def test_a_kind_can_have_its_own_retention(mf: MailFathom, clock: FakeClock) -> None:
    _register(mf)

    @mf.job("t.short", retention={"Succeeded": "1d"})
    def short(ctx: JobContext) -> None:
        pass

    quick = mf.enqueue("t.short", {})
    normal = mf.enqueue("t.other", {})
    _finish(mf, clock)
    clock.advance(2 * DAY)
    report = mf.prune()
    assert mf.jobs.get(quick.id).compacted
    assert not mf.jobs.get(normal.id).compacted
    assert report.rows["jobs"]["Succeeded"]["compacted"] == 1
    # and the settings mapping does the same for another kind, the other way round
    with _app(mf, clock, retention_kinds={"t.other": {"Succeeded": "never"}}) as other:
        clock.advance(30 * DAY)
        other.prune()
        assert not other.jobs.get(normal.id).compacted


def test_deletion_is_opt_in_and_only_for_keyless_rows(mf: MailFathom, clock: FakeClock) -> None:
    _register(mf)
    keyless = mf.enqueue("t.work", {"outcome": "ok"})
    keyed = mf.enqueue("t.work", {"outcome": "ok"}, idempotency_key="kept")
    _finish(mf, clock)
    clock.advance(8 * DAY)
    with _app(mf, clock, retention_delete_keyless=True) as other:
        dry = other.prune(dry_run=True)
        assert dry.rows["jobs"]["Succeeded"] == {"deleted": 1, "compacted": 1}
        report = other.prune()
        assert report.rows["jobs"]["Succeeded"] == {"deleted": 1, "compacted": 1}
    assert [j.id for j in mf.jobs.list()] == [keyed.id]
    assert mf.jobs.get(keyed.id).compacted
    assert keyless.id not in {j.id for j in mf.jobs.list()}
    assert not mf.enqueue("t.work", {"outcome": "ok"}, idempotency_key="kept").created


def test_a_compacted_dead_letter_cannot_be_requeued(mf: MailFathom, clock: FakeClock) -> None:
    _register(mf)
    job = mf.enqueue("t.work", {"outcome": "permanent"}, idempotency_key="p")
    _finish(mf, clock)
    clock.advance(8 * DAY)
    with _app(mf, clock, retention={"DeadLettered": "7d"}) as other:
        other.prune()
    with pytest.raises(IllegalTransition, match=r"compacted .* payload is gone"):
        mf.jobs.requeue(job.id, actor="ops")
    assert mf.jobs.get(job.id).state is JobState.DEAD_LETTERED
    assert mf.jobs.events(job.id) == []
    dropped = mf.jobs.drop(job.id, actor="ops", reason="cannot run again")
    assert dropped.state is JobState.DROPPED and dropped.compacted


def test_an_operators_moves_are_kept_as_long_as_the_row(mf: MailFathom, clock: FakeClock) -> None:
    """Who dropped a job (or cancelled an email), and why, outlives the audit period: a
    kept row keeps its events for as long as it exists; past the period each keeps its
    actor, action, states and time, and the first line of its reason."""
    _register(mf)
    job = mf.enqueue("t.work", {"outcome": "permanent"})
    _finish(mf, clock)
    why = "duplicate of the March run\n" + "the ticket says more " * 20
    mf.jobs.drop(job.id, actor="ops", reason=why)
    email = mf.outbox.record(invoice_email(), run_at=clock.now() + timedelta(days=1))
    mf.outbox.cancel(email.id, actor="ops", reason="x" * 300)
    (before,) = mf.jobs.events(job.id)
    (email_before,) = mf.outbox.events(email.id)
    clock.advance(300 * DAY)
    report = mf.prune()
    assert report.rows["job_events"]["all"] == {"compacted": 0}
    assert mf.jobs.events(job.id) == [before]  # within the period: untouched
    assert mf.jobs.get(job.id).compacted  # Dropped: 30 days
    clock.advance(70 * DAY)
    report = mf.prune()
    assert report.rows["job_events"]["all"] == {"compacted": 1}
    assert report.rows["email_events"]["all"] == {"compacted": 1}
    assert mf.jobs.events(job.id) == [
        dataclasses.replace(before, reason="duplicate of the March run")
    ]
    assert mf.outbox.events(email.id) == [dataclasses.replace(email_before, reason="x" * 200)]
    clock.advance(3650 * DAY)  # ten years on, the row and its events are still there
    report = mf.prune()
    assert report.rows["job_events"]["all"] == {"compacted": 0}
    (after,) = mf.jobs.events(job.id)
    assert (after.actor, after.action, after.from_state, after.to_state, after.at) == (
        "ops",
        "drop",
        JobState.DEAD_LETTERED,
        JobState.DROPPED,
        before.at,
    )
    assert mf.jobs.get(job.id).state is JobState.DROPPED


def test_a_dry_run_changes_nothing(mf: MailFathom, clock: FakeClock) -> None:
    _register(mf)
    jobs = [mf.enqueue("t.work", {"outcome": "ok"}) for _ in range(3)]
    _finish(mf, clock)
    clock.advance(8 * DAY)
    before = [mf.jobs.get(j.id) for j in jobs]
    state_before = mf.retention.state()
    report = mf.prune(dry_run=True)
    assert report.dry_run and report.rows["jobs"]["Succeeded"]["compacted"] == 3
    assert [mf.jobs.get(j.id) for j in jobs] == before
    assert mf.retention.state() == state_before
    assert mf.prune().rows["jobs"]["Succeeded"]["compacted"] == 3


def test_a_dry_run_counts_what_the_pass_then_does_with_deletion_on(
    mf: MailFathom, clock: FakeClock
) -> None:
    """A keyless row deleted by opt-in takes its audit events with it; a kept row keeps
    its own (events are never deleted by age). The events' own batch runs first, so the
    pass compacts the old events the dry run counted, those of deleted rows included."""
    _register(mf)
    dropped = mf.enqueue("t.work", {"outcome": "permanent"})  # keyless
    kept = mf.enqueue("t.work", {"outcome": "permanent"}, idempotency_key="kept:dead")
    _finish(mf, clock)
    # one audit event each; two of them with a reason to compact
    mf.jobs.drop(dropped.id, actor="ops", reason="not needed\nthe customer left")
    mf.jobs.drop(kept.id, actor="ops", reason="not needed")
    email = mf.outbox.record(invoice_email(), run_at=clock.now() + timedelta(days=1))  # keyless
    mf.outbox.cancel(email.id, actor="ops", reason="sent by hand\nsee the ticket")
    clock.advance(400 * DAY)  # past Dropped's 30 days, Cancelled's 30 and the audit's 365
    with _app(mf, clock, retention_delete_keyless=True) as other:
        dry = other.prune(dry_run=True)
        report = other.prune()
    expected = {
        "job_events": {"all": {"compacted": 1}},
        "email_events": {"all": {"compacted": 1}},
        "jobs": {"Dropped": {"deleted": 1, "compacted": 1}},
        "emails": {"Cancelled": {"deleted": 1, "compacted": 0}},
    }
    for rows in (dry.rows, report.rows):
        for table, states in expected.items():
            for state, actions in states.items():
                assert rows[table][state] == actions, (table, state, rows)
    # the kept row keeps its event; the deleted rows' events went with them
    assert [(e.actor, e.action) for e in mf.jobs.events(kept.id)] == [("ops", "drop")]
    with raw_reading(mf) as cur:
        cur.execute("SELECT count(*) AS n FROM mf_job_events")
        assert cur.fetchone()["n"] == 1
        cur.execute("SELECT count(*) AS n FROM mf_outbox_events")
        assert cur.fetchone()["n"] == 0
    assert mf.jobs.get(kept.id).compacted
    assert {j.id for j in mf.jobs.list() if j.kind == "t.work"} == {kept.id}


def invoice_email() -> EmailMessage:
    """The message the retention tests record (test_retention_interfaces.py too)."""
    msg = EmailMessage()
    msg["From"] = "alice@example.com"
    msg["To"] = "bob@example.com"
    msg["Subject"] = "Invoice 9"
    msg.set_content("Attached.\n")
    return msg


def test_batches_are_small_and_the_pass_takes_them_all(mf: MailFathom, clock: FakeClock) -> None:
    _register(mf)
    mf.enqueue_many("t.other", [{} for _ in range(7)])
    _finish(mf, clock)
    clock.advance(8 * DAY)
    seen: list[int] = []
    pruner = mf.pruner()
    pruner.batch_size = 3
    report = pruner.run(progress=lambda table, state, action, n: seen.append(n))
    assert seen == [3, 3, 1]
    assert report.rows["jobs"]["Succeeded"]["compacted"] == 7
    if mf.store.dialect == "sqlite":  # the repack turned foreign keys off only meanwhile
        with mf.store.db.reading() as cur:  # the app's own connection, not a new one
            assert cur.execute("PRAGMA foreign_keys").fetchall()[0][0] == 1
    state = mf.retention.state()
    assert state.holder is None and state.last_finished_at == clock.now()
    assert state.last_report is not None and state.last_report["rows"] == report.rows


def test_two_pruners_never_run_at_once(mf: MailFathom, clock: FakeClock) -> None:
    _register(mf)
    mf.enqueue("t.other", {})
    _finish(mf, clock)
    clock.advance(8 * DAY)
    with _app(mf, clock) as other:
        # one holds the lease (a pass in progress elsewhere): the other does nothing
        assert mf.retention.acquire("elsewhere", now=clock.now(), lease=timedelta(minutes=1))
        skipped = other.prune()
        assert not skipped.ran and skipped.total == 0
        assert not other.jobs.list()[0].compacted
        # a lease that ended (its pruner died) is taken over, a skew margin later
        clock.advance(60 + mf.settings.clock_skew + 1)
        assert other.prune().total == 1


def test_settings_are_validated_and_name_the_setting(tmp_path: Any) -> None:
    with pytest.raises(ConfigurationError, match=r"retention\['Succeeded'\]"):
        Settings(retention={"Succeeded": "7 fortnights"})
    with pytest.raises(ConfigurationError, match="only Succeeded, DeadLettered, Dropped"):
        Settings(retention={"Pending": "1d"})
    with pytest.raises(ConfigurationError, match="email_retention"):
        Settings(email_retention={"Recorded": "1d"})
    with pytest.raises(ConfigurationError, match="audit_retention"):
        Settings(audit_retention="-3d")
    with pytest.raises(ConfigurationError, match="prune_batch"):
        Settings(prune_batch=0)
    loaded = Settings.load(
        environ={
            "MAILFATHOM_RETENTION": '{"Succeeded": "1d"}',
            "MAILFATHOM_AUDIT_RETENTION": "2w",
            "MAILFATHOM_RETENTION_DELETE_KEYLESS": "yes",
        },
        toml_path=tmp_path / "none.toml",
    )
    policy = loaded.retention_policy()
    assert policy.jobs == {
        "Succeeded": timedelta(days=1),
        "Dropped": timedelta(days=30),
        "DeadLettered": None,
    }
    assert policy.audit == timedelta(weeks=2) and policy.delete_keyless
    toml = tmp_path / "mailfathom.toml"
    toml.write_text('[mailfathom.email_retention]\nSent = "90d"\n', encoding="utf-8")
    from_file = Settings.load(environ={}, toml_path=toml).retention_policy()
    assert from_file.emails["Sent"] == timedelta(days=90)
    assert from_file.emails["Refused"] == timedelta(days=30)
    with pytest.raises(ConfigurationError, match="MAILFATHOM_RETENTION"):
        Settings.load(environ={"MAILFATHOM_RETENTION": "7d"}, toml_path=toml)
