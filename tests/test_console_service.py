"""The console's service layer and the operator reads under it, on every store."""

from __future__ import annotations

import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from consolekit import dead_letters, register_demo_kinds
from mailfathom import FakeClock, IllegalTransition, InvalidInput, JobState, MailFathom, NotFound
from mailfathom.console import Console, JobQuery, format_duration, parse_duration


@pytest.fixture
def console(mf: MailFathom) -> Console:
    register_demo_kinds(mf)
    return Console(mf)


def test_durations_parse_and_format_round_trip() -> None:
    assert parse_duration("90s") == timedelta(seconds=90)
    assert parse_duration("1h30m") == timedelta(minutes=90)
    assert parse_duration(" 2 d ") == timedelta(days=2)
    assert format_duration(timedelta(days=8, minutes=5)) == "1w1d5m"
    for bad in ("", "5", "h", "5x", "-5m", "0s", "1000000w"):
        with pytest.raises(InvalidInput, match=r"duration|zero"):
            parse_duration(bad)


def test_query_parsing_refuses_bad_input_with_clear_messages() -> None:
    assert JobQuery.parse({"state": "deadlettered"}).state == "DeadLettered"
    assert JobQuery.parse({"state": "held"}).state == "Held"
    assert JobQuery.parse({"state": " ", "kind": ""}).empty
    with pytest.raises(InvalidInput, match=r"unknown job state 'Sleeping'.*Held"):
        JobQuery.parse({"state": "Sleeping"})
    with pytest.raises(InvalidInput, match="job kind"):
        JobQuery.parse({"kind": "bad kind!"})
    with pytest.raises(InvalidInput, match="unknown job filters"):
        JobQuery.parse({"colour": "red"})
    with pytest.raises(InvalidInput, match="match nothing"):
        JobQuery.parse({"older_than": "2d", "newer_than": "1d"})
    query = JobQuery.parse({"state": "Held", "kind": "demo.ok", "older_than": "90m"})
    assert JobQuery.parse(query.params()) == query
    assert query.describe() == "Held jobs of kind demo.ok enqueued more than 1h30m ago"


def test_listing_filters_by_text_held_and_age(console: Console, clock: FakeClock) -> None:
    mf = console.mf
    old = mf.enqueue("demo.ok", {"note": "100% done_here"}, idempotency_key="order:7", hold=True)
    clock.advance(timedelta(hours=3))
    new = mf.enqueue("demo.ok", {"note": "fresh"})

    def ids(query: dict[str, str | None]) -> list[int]:
        return [j.id for j in console.jobs(JobQuery.parse(query)).jobs]

    assert ids({"text": "ORDER:7"}) == [old.id]  # idempotency key, any ASCII case
    assert ids({"text": "100%"}) == [old.id]  # wildcards are literal
    assert ids({"text": "0% d"}) == [old.id]
    assert ids({"text": "_"}) == [old.id]
    assert ids({"text": "x%x"}) == []
    assert ids({"state": "Held"}) == [old.id]
    assert ids({"older_than": "2h"}) == [old.id]
    assert ids({"newer_than": "2h"}) == [new.id]
    assert ids({"state": "Pending"}) == [new.id, old.id]
    assert ids({"queue": "mail"}) == []


def test_text_matches_failure_reasons(console: Console) -> None:
    dead = dead_letters(console.mf, 2, to="bob@example.com")
    console.mf.enqueue("demo.ok", {})
    found = console.jobs(JobQuery.parse({"text": "mailbox <bob@"}))
    assert sorted(j.id for j in found.jobs) == sorted(dead)


def test_keyset_pages_walk_every_job_once(console: Console) -> None:
    created = [j.id for j in console.mf.enqueue_many("demo.ok", [{"i": i} for i in range(23)])]
    seen: list[int] = []
    before = None
    pages = 0
    while True:
        page = console.jobs(JobQuery(), before_id=before, limit=10)
        seen.extend(j.id for j in page.jobs)
        pages += 1
        if page.next_before is None:
            break
        before = page.next_before
    assert seen == sorted(created, reverse=True)
    assert pages == 3


def test_overview_counts_throughput_and_attention(console: Console, clock: FakeClock) -> None:
    mf = console.mf
    dead_letters(mf, 3)
    clock.advance(timedelta(minutes=2))
    mf.enqueue_many("demo.ok", [{}] * 4)
    mf.enqueue("demo.ok", {}, hold=True)
    mf.worker().run(burst=True)
    overview = console.overview()
    assert overview.job_counts[JobState.DEAD_LETTERED] == 3
    assert overview.job_counts[JobState.SUCCEEDED] == 4
    assert overview.held == 1
    assert overview.total_jobs == 8
    assert [(a.key, a.count) for a in overview.attention] == [("dead_lettered", 3), ("held", 1)]
    minutes = overview.throughput
    assert len(minutes) == 60
    assert minutes[-1].minute == clock.now().replace(second=0, microsecond=0)
    assert (minutes[-1].succeeded, minutes[-1].dead_lettered) == (4, 0)
    assert (minutes[-3].succeeded, minutes[-3].dead_lettered) == (0, 3)
    assert [m.failed_attempts for m in minutes[-3:]] == [3, 0, 0]  # each dead letter's last
    clock.advance(timedelta(minutes=61))
    assert sum(m.succeeded + m.dead_lettered for m in console.overview().throughput) == 0


def test_failed_attempts_are_counted_per_minute(mf: MailFathom, clock: FakeClock) -> None:
    @mf.job("demo.retry", max_attempts=3)
    def retry(ctx: object) -> None:
        raise RuntimeError("try later")

    mf.enqueue("demo.retry", {})
    mf.worker().run(burst=True)
    assert sum(m.failed_attempts for m in mf.jobs.throughput(5)) == 1


def test_actions_and_audit_log(console: Console) -> None:
    a, b = dead_letters(console.mf, 2)
    console.act("requeue", a, actor="ops", reason="relay fixed")
    with pytest.raises(IllegalTransition, match="only DeadLettered"):
        console.act("drop", a, actor="ops")
    console.act("drop", b, actor="ops")
    with pytest.raises(InvalidInput, match="unknown action"):
        console.act("explode", a, actor="ops")
    log = console.audit(limit=1)
    assert [(e.job_id, e.action) for e in log.events] == [(b, "drop")]
    assert log.next_before is not None
    rest = console.audit(before_id=log.next_before)
    assert [(e.job_id, e.action, e.actor, e.reason) for e in rest.events] == [
        (a, "requeue", "ops", "relay fixed")
    ]
    assert rest.next_before is None


def test_bulk_by_filter_acts_on_each_match_and_reports_refusals(console: Console) -> None:
    mf = console.mf
    dead = dead_letters(mf, 4)
    other = mf.enqueue("demo.ok", {"to": "a@example.com"})
    ids = console.matching_ids("requeue", JobQuery.parse({"kind": "demo.flaky"}))
    assert sorted(ids) == sorted(dead)
    with pytest.raises(InvalidInput, match="requeue acts on DeadLettered jobs only"):
        console.matching_ids("requeue", JobQuery.parse({"state": "Pending"}))
    ticks: list[int] = []
    result = console.bulk(
        "requeue", [*ids[:3], other.id, 999_999], actor="ops", progress=ticks.append
    )
    assert sorted(result.done) == sorted(ids[:3])
    assert set(result.refused) == {other.id, 999_999}
    assert "only DeadLettered" in result.refused[other.id]
    assert "no job has id 999999" in result.refused[999_999]
    assert len(ticks) == 5
    with pytest.raises(InvalidInput, match="positive integer"):
        console.bulk("drop", [ids[3], -1], actor="ops")
    assert mf.jobs.get(ids[3]).state is JobState.DEAD_LETTERED  # nothing changed
    with pytest.raises(InvalidInput, match="actor"):
        console.bulk("drop", [ids[3]], actor=" ")


def test_release_by_filter_runs_held_jobs(console: Console) -> None:
    held = [console.mf.enqueue("demo.ok", {"i": i}, hold=True).id for i in range(3)]
    ids = console.matching_ids("release", JobQuery())
    assert sorted(ids) == sorted(held)
    result = console.bulk("release", ids, actor="ops")
    assert sorted(result.done) == sorted(held)
    assert console.mf.worker().run(burst=True) == 3


def test_create_job_is_held_unless_a_time_is_given(console: Console, clock: FakeClock) -> None:
    held = console.create_job("demo.ok", '{"report_id": 7}', priority=5)
    assert held.held and held.payload == {"report_id": 7} and held.priority == 5
    later = console.create_job("demo.ok", {}, run_at="2030-01-02T09:30")
    assert not later.held
    assert later.available_at is not None and later.available_at.isoformat() == (
        "2030-01-02T09:30:00+00:00"
    )
    zoned = console.create_job("demo.flaky", None, run_at="2030-01-02T09:30+02:00", queue="q2")
    assert zoned.available_at is not None and zoned.available_at.hour == 7
    assert zoned.queue == "q2"
    with pytest.raises(
        InvalidInput, match=r"not registered: registered kinds: demo\.flaky, demo\.ok"
    ):
        console.create_job("demo.typo", {})
    with pytest.raises(InvalidInput, match=r"not valid JSON \(line 1, column 2"):
        console.create_job("demo.ok", "{nope}")
    with pytest.raises(InvalidInput, match="must be a JSON object"):
        console.create_job("demo.ok", "[1, 2]")
    with pytest.raises(InvalidInput, match="not a date and time"):
        console.create_job("demo.ok", {}, run_at="tomorrow")
    assert console.mf.jobs.counts()[JobState.PENDING] == 3


def test_the_listing_benchmark_runs(database_url: str) -> None:
    root = Path(__file__).resolve().parent.parent
    ran = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.console_listing",
            "--rows",
            "2000",
            "--repeat",
            "1",
            "--plans",
            "--database",
            database_url,
        ],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr
    assert "filled 2,000 jobs" in ran.stdout and "overview (all of it)" in ran.stdout
    assert "mf_jobs_state" in ran.stdout  # the state filter walks its index


def test_overview_counts_workers_and_schedules(console: Console, clock: FakeClock) -> None:
    from consolekit import register_worker, store_schedule

    store_schedule(console.mf)
    register_worker(console.mf, "w-old")
    clock.advance(timedelta(seconds=45))  # past the 30 s lease: w-old is dead
    register_worker(console.mf, "w-new")
    overview = console.overview()
    assert (overview.workers_alive, overview.workers_dead) == (1, 1)
    assert ("dead_workers", 1) in [(a.key, a.count) for a in overview.attention]
    assert (overview.schedules, overview.schedules_paused) == (1, 0)
    paused = console.pause_schedule("reports/nightly", actor="ops", reason=" audit ")
    assert paused.paused and paused.paused_by == "ops" and paused.pause_reason == "audit"
    assert console.overview().schedules_paused == 1
    with pytest.raises(IllegalTransition, match="already paused"):
        console.pause_schedule("reports/nightly", actor="ops")
    assert not console.resume_schedule("reports/nightly", actor="ops").paused
    with pytest.raises(NotFound, match="no schedule is called 'nope'"):
        console.resume_schedule("nope", actor="ops")
