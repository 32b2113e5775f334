"""``mailfathom worker`` as a user runs it: clear errors for a bad app or URL, a burst run."""

from __future__ import annotations

from pathlib import Path

import pytest

from mailfathom import JobState, MailFathom
from worker_processes import run_cli

pytestmark = pytest.mark.slow


def test_unusable_apps_and_urls_are_clear_errors(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    for args, status, message in [
        (["--app", "no_such_module:mf"], 1, "cannot import 'no_such_module': no such module"),
        (["--app", "worker_app:nothing"], 1, "module 'worker_app' has no attribute 'nothing'"),
        (["--app", "worker_app:mark"], 1, "is a function, not a MailFathom object"),
        (["--app", "worker_app"], 2, "'worker_app' is not MODULE:ATTR"),
        (["--app", "worker_app:fixed"], 1, "uses the database 'sqlite:///mailfathom-fixed"),
        (["--app", "worker_app:mf", "--database", "mysql://db/x"], 2, "is not supported"),
        (
            ["--app", "worker_app:mf", "--database", "sqlite:////no/such/dir/x.db"],
            2,
            "which does not exist: create the folder",
        ),
    ]:
        given = args if "--database" in args else [*args, "--database", url]
        result = run_cli("worker", *given, "--burst")
        assert (result.returncode, message in result.stderr) == (status, True), result.stderr
    assert not (tmp_path / "db.sqlite").exists()  # nothing was created


def test_burst_runs_what_is_due_and_exits(database_url: str, tmp_path: Path) -> None:
    marker = tmp_path / "done"
    with MailFathom(database_url) as app:
        app.migrate()
        job = app.enqueue("test.sleep", {"marker": str(marker), "seconds": 0})
        result = run_cli(
            "worker",
            "--app",
            "worker_app:mf",
            "--database",
            database_url,
            "--burst",
            "--concurrency",
            "2",
            "--queues",
            "default,other",
            "--log-level",
            "info",
        )
        assert result.returncode == 0, result.stderr
        assert app.jobs.get(job.id).state is JobState.SUCCEEDED
        assert app.workers.list() == []
    assert marker.exists()
    assert f"attempt job_id={job.id} kind=test.sleep" in result.stderr
    assert "queues=default,other concurrency=2" in result.stderr


def test_a_burst_on_an_unmigrated_database_says_to_migrate(tmp_path: Path) -> None:
    result = run_cli(
        "worker",
        "--app",
        "worker_app:mf",
        "--database",
        f"sqlite:///{tmp_path / 'x.db'}",
        "--burst",
    )
    assert result.returncode == 2
    assert "run `mailfathom migrate` first" in result.stderr
