"""``mailfathom jobs hold|run-now|abort`` and ``mailfathom queues list|pause|resume``
against real databases: by id, in bulk over a filter (with its progress bar), audited."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta

import pytest
from click.testing import CliRunner, Result

from mailfathom import JobState, MailFathom
from mailfathom.cli import cli
from mailfathom.testing import claim


@pytest.fixture
def app(database_url: str) -> Iterator[MailFathom]:
    """A migrated app on the real clock (the CLI reads the real clock too)."""
    mf = MailFathom(database_url)
    mf.migrate()
    yield mf
    mf.close()


def run(url: str, *args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(cli, ["--database", url, *args], input=input)


def test_hold_one_then_release_it(app: MailFathom, database_url: str) -> None:
    job = app.enqueue("k")
    held = run(database_url, "jobs", "hold", str(job.id), "--reason", "look first")
    assert held.exit_code == 0, held.output
    assert f"job {job.id}: held, now Pending (held)" in held.output
    (event,) = app.jobs.events(job.id)
    assert event.action == "hold" and event.reason == "look first"
    assert event.actor.startswith("cli:")
    again = run(database_url, "jobs", "hold", str(job.id))
    assert again.exit_code == 2 and "held already" in again.output
    assert run(database_url, "jobs", "release", str(job.id)).exit_code == 0
    assert not app.jobs.get(job.id).held


def test_bulk_hold_over_a_filter_shows_progress_and_skips_held_jobs(
    app: MailFathom, database_url: str
) -> None:
    mail = [app.enqueue("k", {"i": i}, queue="mail").id for i in range(30)]
    already = app.enqueue("k", queue="mail", hold=True)
    other = app.enqueue("k", queue="other")
    asked = run(database_url, "jobs", "hold", "--queue", "mail", input="y\n")
    assert asked.exit_code == 0, asked.output
    assert "hold 30 Pending jobs in queue mail?" in asked.output
    assert "30/30" in asked.output  # the progress bar (on stderr, mixed in by CliRunner)
    assert "held 30 job(s)" in asked.output
    assert all(app.jobs.get(i).held for i in mail)
    assert app.jobs.events(already.id) == []
    assert not app.jobs.get(other.id).held


def test_run_now_by_filter_takes_only_jobs_not_due(app: MailFathom, database_url: str) -> None:
    later = [app.enqueue("k", {"i": i}, delay=timedelta(hours=2)).id for i in range(3)]
    due = app.enqueue("k")
    result = run(database_url, "jobs", "run-now", "--all", "--yes", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.output[result.output.index("{") :])
    assert sorted(report["done"]) == sorted(later) and report["refused"] == []
    assert app.jobs.events(due.id) == []
    now = app.clock.now()
    assert all((app.jobs.get(i).available_at or now) <= now for i in later)


def test_abort_a_claimed_and_a_pending_job_and_refuse_a_finished_one(
    app: MailFathom, database_url: str
) -> None:
    done = app.enqueue("k")
    claim(app, "w", 1, timedelta(seconds=30))
    app.store.claims.record_outcomes(owner="w", now=app.clock.now(), succeeded=[(done.id, 1)])
    job = app.enqueue("k")
    pending = app.enqueue("k", delay=60)
    claim(app, "w", 1, timedelta(seconds=30))
    result = run(database_url, "jobs", "abort", str(job.id), "--reason", "runaway", "--json")
    assert result.exit_code == 0, result.output
    shown = json.loads(result.output)
    assert shown["state"] == "Claimed"
    reason = shown["abort_reason"]
    assert reason.startswith("aborted by cli:") and reason.endswith(": runaway")
    stopped = run(database_url, "jobs", "abort", str(pending.id), "--reason", "typo")
    assert stopped.exit_code == 0, stopped.output
    dead = app.jobs.get(pending.id)
    assert dead.state is JobState.DEAD_LETTERED and dead.failure_class is not None
    assert dead.failure_class.value == "Permanent"
    assert dead.failure_reason is not None and dead.failure_reason.startswith("aborted by cli:")
    assert dead.failure_reason.endswith(": typo (before it started)")
    dropped = run(database_url, "jobs", "drop", str(pending.id), "--reason", "cleared")
    assert dropped.exit_code == 0, dropped.output
    assert app.jobs.get(pending.id).state is JobState.DROPPED
    refused = run(database_url, "jobs", "abort", str(done.id))
    assert refused.exit_code == 2
    assert "only Pending or Claimed jobs can be aborted" in refused.output
    assert app.jobs.get(done.id).state is JobState.SUCCEEDED


def test_queues_pause_list_resume(app: MailFathom, database_url: str) -> None:
    app.enqueue("k", queue="mail")
    paused = run(database_url, "queues", "pause", "mail", "bulk", "--reason", "smtp down")
    assert paused.exit_code == 0, paused.output
    assert "queue mail paused" in paused.output and "queue bulk paused" in paused.output
    listed = run(database_url, "queues", "list", "--json")
    rows = {row["queue"]: row for row in json.loads(listed.output)}
    assert rows["mail"]["pending"] == 1
    assert rows["mail"]["paused"]["reason"] == "smtp down"
    assert rows["bulk"]["paused"]["actor"].startswith("cli:")
    table = run(database_url, "queues", "list")
    assert "paused by cli:" in table.output
    again = run(database_url, "queues", "pause", "mail")
    assert again.exit_code == 2 and "paused already" in again.output
    resumed = run(database_url, "queues", "resume", "mail", "bulk", "--json")
    assert resumed.exit_code == 0
    assert json.loads(resumed.output) == {
        "action": "resume",
        "done": ["mail", "bulk"],
        "refused": [],
    }
    assert app.queues.paused() == []
    assert [e.action for e in app.queues.events("mail")] == ["resume", "pause"]
