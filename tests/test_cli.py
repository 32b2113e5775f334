"""The ``mailfathom`` command against real databases: tables, --json, bulk actions, errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from consolekit import dead_letters, register_demo_kinds
from mailfathom import JobState, MailFathom
from mailfathom.cli import cli


@pytest.fixture
def app(database_url: str) -> Iterator[MailFathom]:
    """A migrated app on the real clock (the CLI reads the real clock too)."""
    mf = MailFathom(database_url)
    mf.migrate()
    register_demo_kinds(mf)
    yield mf
    mf.close()


def run(url: str, *args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(cli, ["--database", url, *args], input=input)


def test_migrate_then_enqueue_and_show(database_url: str) -> None:
    assert run(database_url, "migrate").exit_code == 0
    again = run(database_url, "migrate")
    assert again.exit_code == 0 and "applied 0 migration(s)" in again.output
    made = run(database_url, "enqueue", "reports.build", "--payload", '{"id": 7}', "--key", "r:7")
    assert made.exit_code == 0, made.output
    assert "enqueued job 1 (reports.build, queue default, Pending)" in made.output
    same = run(database_url, "enqueue", "reports.build", "--key", "r:7", "--json")
    assert same.exit_code == 0
    assert json.loads(same.output)["created"] is False
    held = run(database_url, "enqueue", "reports.build", "--hold", "--priority", "3", "--json")
    assert json.loads(held.output)["held"] is True
    shown = run(database_url, "jobs", "show", "1")
    assert shown.exit_code == 0
    assert '"id": 7' in shown.output and "idempotency key  r:7" in shown.output


def test_bad_input_exits_non_zero_with_a_clear_message(app: MailFathom, database_url: str) -> None:
    cases = [
        (["enqueue", "x", "--payload", "{oops"], "payload is not valid JSON"),
        (["enqueue", "x", "--payload", "[1]"], "must be a JSON object"),
        (["enqueue", "bad kind!"], "job kind 'bad kind!' is not usable"),
        (["enqueue", "x", "--delay", "soon"], "not a duration"),
        (["enqueue", "x", "--hold", "--delay", "5m"], "at most one of"),
        (["enqueue", "x", "--run-at", "tomorrow"], "not a date and time"),
        (["jobs", "show", "424242"], "no job has id 424242"),
        (["jobs", "list", "--state", "Sleeping"], "unknown job state 'Sleeping'"),
        (["jobs", "list", "--older-than", "ages"], "not a duration"),
        (["jobs", "requeue"], "say which jobs"),
        (["jobs", "requeue", "1", "--kind", "demo.ok"], "not both"),
        (["jobs", "drop", "--state", "Pending", "--kind", "demo.ok"], "drop acts on DeadLettered"),
    ]
    for args, message in cases:
        result = run(database_url, *args)
        assert result.exit_code == 2, (args, result.output)
        assert message in result.output, (args, result.output)
    assert sum(app.jobs.counts().values()) == 0  # nothing was created


def test_bad_database_url_is_refused() -> None:
    result = CliRunner().invoke(cli, ["--database", "mysql://x/y", "jobs", "counts"])
    assert result.exit_code == 2
    assert "is not supported: use sqlite:///path/to.db or postgresql://" in result.output
    result = CliRunner().invoke(
        cli, ["--database", "sqlite:////no/such/dir/x.db", "jobs", "counts"]
    )
    assert result.exit_code == 2 and "does not exist" in result.output


def test_list_table_and_json_with_filters_and_pages(app: MailFathom, database_url: str) -> None:
    dead = dead_letters(app, 3, to="carol@example.com")
    app.enqueue_many("demo.ok", [{"i": i} for i in range(3)])
    table = run(database_url, "jobs", "list", "--state", "DeadLettered")
    assert table.exit_code == 0
    assert table.output.count("DeadLettered") == 3 and "mailbox <carol@example.com>" in table.output
    page = json.loads(run(database_url, "jobs", "list", "--limit", "4", "--json").output)
    assert len(page["jobs"]) == 4 and page["next_before"] == page["jobs"][-1]["id"]
    rest = run(database_url, "jobs", "list", "--before", str(page["next_before"]), "--json")
    assert len(json.loads(rest.output)["jobs"]) == 2
    text = json.loads(run(database_url, "jobs", "list", "--text", "CAROL", "--json").output)
    assert sorted(j["id"] for j in text["jobs"]) == sorted(dead)
    none = run(database_url, "jobs", "list", "--queue", "nowhere")
    assert "no jobs in queue nowhere" in none.output
    counts = json.loads(run(database_url, "jobs", "counts", "--json").output)
    assert counts == {
        "Pending": 3,
        "Claimed": 0,
        "Succeeded": 0,
        "DeadLettered": 3,
        "Dropped": 0,
        "Held": 0,
    }


def test_single_actions_and_illegal_moves(app: MailFathom, database_url: str) -> None:
    (job_id,) = dead_letters(app, 1)
    ok = run(database_url, "jobs", "requeue", str(job_id), "--reason", "fixed", "--actor", "ann")
    assert ok.exit_code == 0 and f"job {job_id}: requeued, now Pending" in ok.output
    again = run(database_url, "jobs", "requeue", str(job_id))
    assert again.exit_code == 2
    assert "only DeadLettered jobs can be requeued; nothing changed" in again.output
    held = app.enqueue("demo.ok", {}, hold=True)
    released = run(database_url, "jobs", "release", str(held.id), "--json")
    assert json.loads(released.output)["held"] is False
    (event,) = app.jobs.events(job_id)
    assert (event.actor, event.reason) == ("ann", "fixed")
    assert app.jobs.events(held.id)[0].actor.startswith("cli:")


def test_bulk_requeue_by_filter_confirms_and_reports(app: MailFathom, database_url: str) -> None:
    dead = dead_letters(app, 5)
    declined = run(database_url, "jobs", "requeue", "--kind", "demo.flaky", input="n\n")
    assert declined.exit_code == 1
    assert "requeue 5 DeadLettered jobs of kind demo.flaky?" in declined.output
    assert app.jobs.counts()[JobState.DEAD_LETTERED] == 5  # nothing changed
    done = run(database_url, "jobs", "requeue", "--text", "mailbox", input="y\n")
    assert done.exit_code == 0, done.output
    assert "requeued 5 job(s)" in done.output
    assert all(app.jobs.get(i).state is JobState.PENDING for i in dead)
    nothing = run(database_url, "jobs", "drop", "--all", "--yes")
    assert nothing.exit_code == 0 and "no DeadLettered jobs; nothing changed" in nothing.output


def test_bulk_drop_by_ids_lists_refusals(app: MailFathom, database_url: str) -> None:
    dead = dead_letters(app, 2)
    pending = app.enqueue("demo.ok", {})
    result = run(database_url, "jobs", "drop", *map(str, dead), str(pending.id), "--json")
    assert result.exit_code == 2
    report = json.loads(result.output[: result.output.rindex("}") + 1])
    assert sorted(report["done"]) == sorted(dead)
    assert [r["id"] for r in report["refused"]] == [pending.id]


def test_bulk_release_with_yes_and_age_filter(app: MailFathom, database_url: str) -> None:
    held = [app.enqueue("demo.ok", {"i": i}, hold=True).id for i in range(3)]
    old = run(database_url, "jobs", "release", "--older-than", "1h", "--yes")
    assert "no Held jobs enqueued more than 1h ago; nothing changed" in old.output
    new = run(database_url, "jobs", "release", "--newer-than", "1h", "--yes")
    assert new.exit_code == 0 and "released 3 job(s)" in new.output
    assert all(not app.jobs.get(i).held for i in held)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A folder with an app module, as a user's project would have."""
    (tmp_path / "shopapp.py").write_text(
        "from mailfathom import MailFathom\n"
        f"mf = MailFathom('sqlite:///{tmp_path}/shop.db')\n"
        "@mf.job('shop.ship')\n"
        "def ship(ctx, order):\n"
        "    pass\n"
    )
    return tmp_path


def test_the_installed_command_runs_and_fails_cleanly(project: Path) -> None:
    env = {**os.environ, "MAILFATHOM_DATABASE_URL": f"sqlite:///{project}/shop.db"}

    def mailfathom(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "mailfathom.cli", *args],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    migrated = mailfathom("migrate")
    assert migrated.returncode == 0, migrated.stderr
    made = mailfathom("enqueue", "shop.ship", "--app", "shopapp:mf", "--payload", '{"order": 1}')
    assert made.returncode == 0, made.stderr
    missing = mailfathom("jobs", "show", "99")
    assert missing.returncode == 2
    assert "no job has id 99" in missing.stderr and "Traceback" not in missing.stderr
    bad_app = mailfathom("enqueue", "x", "--app", "nosuchmodule:mf")
    assert bad_app.returncode == 2 and "cannot import 'nosuchmodule'" in bad_app.stderr
    not_app = mailfathom("enqueue", "x", "--app", "shopapp:ship")
    assert not_app.returncode == 2 and "is a function, not a MailFathom object" in not_app.stderr
    not_spec = mailfathom("enqueue", "x", "--app", "shopapp")
    assert not_spec.returncode == 2 and "is not MODULE:ATTR" in not_spec.stderr


def test_schedules_and_workers_commands(app: MailFathom, database_url: str) -> None:
    from consolekit import register_worker, store_schedule

    assert "no schedules stored" in run(database_url, "schedules", "list").output
    assert "no workers registered" in run(database_url, "workers").output
    store_schedule(app)
    register_worker(app, "w-[bold]1")
    table = run(database_url, "schedules", "list").output
    assert "reports/nightly" in table and "0 3 * * *" in table and "active" in table
    paused = run(database_url, "schedules", "pause", "reports/nightly", "--reason", "[b]x[/b]")
    assert paused.exit_code == 0 and "schedule reports/nightly paused" in paused.output
    assert "[b]x[/b]" in run(database_url, "schedules", "list").output  # markup shown literally
    again = run(database_url, "schedules", "pause", "reports/nightly")
    assert again.exit_code == 2 and "already paused" in again.output
    resumed = run(database_url, "schedules", "resume", "reports/nightly")
    assert resumed.exit_code == 0 and "next tick" in resumed.output
    missing = run(database_url, "schedules", "resume", "nope")
    assert missing.exit_code == 2 and "no schedule is called 'nope'" in missing.output
    (schedule,) = json.loads(run(database_url, "schedules", "list", "--json").output)
    assert schedule["paused"] is False and schedule["next_tick"] is not None
    assert "w-[bold]1" in run(database_url, "workers").output
    (worker,) = json.loads(run(database_url, "workers", "--json").output)
    assert worker["id"] == "w-[bold]1" and worker["alive"] is True
