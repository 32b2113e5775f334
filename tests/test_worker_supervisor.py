"""``mailfathom worker --processes N``: N real worker processes under one supervisor.

They share the work, one SIGTERM to the supervisor stops them all gracefully (no job
lost), a second one stops them at once, a worker process that dies is restarted, and
a bad process count is a clear error.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from mailfathom import JobState, MailFathom
from mailfathom.cli.supervisor import Supervisor
from worker_processes import TESTS, Readiness, alive, run_cli, start_worker, stop, wait_for

pytestmark = pytest.mark.slow


def _worker_pids(app: MailFathom) -> set[int]:
    return {worker.pid for worker in app.workers.list() if alive(worker.pid)}


def test_processes_share_the_work_and_one_sigterm_stops_them_all(
    database_url: str, tmp_path: Path
) -> None:
    log = tmp_path / "worker.log"
    markers = [tmp_path / "first", tmp_path / "second"]
    with MailFathom(database_url) as app:
        app.migrate()
        supervisor = start_worker(
            database_url, log, "--processes", "2", "--concurrency", "1", "--log-level", "info"
        )
        try:
            wait_for(lambda: len(_worker_pids(app)) == 2, 60, "two workers", log, supervisor)
            jobs = [
                app.enqueue("test.sleep", {"marker": str(marker), "seconds": 3})
                for marker in markers
            ]
            wait_for(lambda: all(m.exists() for m in markers), 60, "both jobs", log, supervisor)
            ran_in = {int(marker.read_text()) for marker in markers}
            workers = _worker_pids(app)
            supervisor.send_signal(signal.SIGTERM)  # while both jobs run
            status = supervisor.wait(30)
        finally:
            stop(supervisor)
        text = log.read_text()
        assert status == 0, text
        assert len(ran_in) == 2 and ran_in == workers, text  # one job in each process
        assert supervisor.pid not in ran_in
        assert [app.jobs.get(job.id).state for job in jobs] == [JobState.SUCCEEDED] * 2, text
        assert not any(alive(pid) for pid in workers)
        assert app.workers.list() == []  # each deregistered on its way out
    assert "stopping 2 worker process(es) gracefully" in text


def test_a_second_sigterm_stops_every_worker_process_at_once(tmp_path: Path) -> None:
    # The supervisor never touches the database: its signals are tested on SQLite alone.
    database_url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    log = tmp_path / "worker.log"
    marker = tmp_path / "started"
    with MailFathom(database_url) as app:
        app.migrate()
        job = app.enqueue("test.sleep", {"marker": str(marker), "seconds": 600})
        supervisor = start_worker(database_url, log, "--processes", "2")
        try:
            wait_for(marker.exists, 60, "the job to start", log, supervisor)
            wait_for(lambda: len(_worker_pids(app)) == 2, 60, "two workers", log, supervisor)
            workers = _worker_pids(app)
            supervisor.send_signal(signal.SIGTERM)
            wait_for(lambda: "stopping 2 worker" in log.read_text(), 30, "the stop", log)
            supervisor.send_signal(signal.SIGTERM)
            status = supervisor.wait(30)
        finally:
            stop(supervisor)
        assert status == 128 + signal.SIGTERM, log.read_text()
        assert not any(alive(pid) for pid in workers)
        # it left at once, without an outcome: the lease brings the job back
        assert app.jobs.get(job.id).state is JobState.CLAIMED


def test_a_worker_process_that_dies_is_restarted(tmp_path: Path) -> None:
    database_url = f"sqlite:///{tmp_path / 'db.sqlite'}"  # as above: SQLite alone
    log = tmp_path / "worker.log"
    with MailFathom(database_url) as app:
        app.migrate()
        supervisor = start_worker(database_url, log, "--processes", "2")
        try:
            wait_for(lambda: len(_worker_pids(app)) == 2, 60, "two workers", log, supervisor)
            first = _worker_pids(app)
            victim = min(first)
            os.kill(victim, signal.SIGKILL)
            wait_for(
                lambda: len(_worker_pids(app) - first) == 1 and victim not in _worker_pids(app),
                60,
                "a new worker process in the dead one's place",
                log,
                supervisor,
            )
            workers = _worker_pids(app)
            marker = tmp_path / "done"
            job = app.enqueue("test.sleep", {"marker": str(marker), "seconds": 0})
            wait_for(marker.exists, 60, "the job to run", log, supervisor)
            status = stop(supervisor, timeout=60)
        finally:
            stop(supervisor)
        text = log.read_text()
        assert status == 0, text
        assert f"worker process pid={victim} exited with status -9 (killed by SIGKILL)" in text
        assert "restarting it in 1s" in text
        assert len(workers) == 2 and not any(alive(pid) for pid in workers)
        wait_for(lambda: app.jobs.get(job.id).state is JobState.SUCCEEDED, 10, "the outcome")


def test_bad_process_counts_are_clear_errors(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    for value in ["0", "abc", "-3", "1.5"]:
        result = run_cli(
            "worker", "--app", "worker_app:mf", "--database", url, "--processes", value
        )
        assert result.returncode == 2, result.stderr
        assert f"'{value}' is not a number of processes: give a whole number of 1 or more" in (
            result.stderr
        )
    result = run_cli(
        "worker", "--app", "worker_app:mf", "--database", url, "--processes", "2",
        "--metrics-port", "0",
    )  # fmt: skip
    assert result.returncode == 2
    assert "with --processes, run one worker command per process" in result.stderr
    assert not (tmp_path / "db.sqlite").exists()  # nothing was started or created


def _children(pid: int) -> list[int]:
    """The processes ``pid`` started that still run."""
    text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    return [int(child) for child in text.split()]


@pytest.mark.parametrize("given_as", ["environment", "option"])
def test_worker_processes_never_carry_the_database_password_on_their_command_line(
    postgres_schema_url: str, tmp_path: Path, given_as: str
) -> None:
    # trust authentication accepts any password: the URL carries one, as in production
    secret = "s3cret-pass"
    database_url = postgres_schema_url.replace("://postgres@", f"://postgres:{secret}@", 1)
    assert secret in database_url
    log = tmp_path / "worker.log"
    marker = tmp_path / "ran"
    readiness = Readiness()
    with MailFathom(database_url) as app:
        app.migrate()
        environ = {**os.environ, **readiness.env()}
        option: list[str] = []
        if given_as == "environment":  # the supervisor's own command line is clean too
            environ["MAILFATHOM_DATABASE_URL"] = database_url
        else:  # the operator put it on the supervisor's: it goes no further
            environ.pop("MAILFATHOM_DATABASE_URL", None)
            option = ["--database", database_url]
        environ["PYTHONPATH"] = os.pathsep.join(
            filter(None, [str(TESTS), environ.get("PYTHONPATH")])
        )
        with log.open("ab") as out:
            supervisor = subprocess.Popen(
                [sys.executable, "-c", "from mailfathom.cli import main; main()", "worker",
                 "--app", "worker_app:mf", "--processes", "2", *option],
                env=environ, cwd=TESTS, stdout=out, stderr=out,
            )  # fmt: skip
        try:
            readiness.wait(supervisor, log=log)
            wait_for(lambda: len(_worker_pids(app)) == 2, 60, "two workers", log, supervisor)
            children = _children(supervisor.pid)
            assert set(children) == _worker_pids(app)
            for pid in children if option else [supervisor.pid, *children]:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
                assert b"worker_app:mf" in cmdline  # the right processes were read
                assert secret.encode() not in cmdline, cmdline
            job = app.enqueue("test.sleep", {"marker": str(marker), "seconds": 0})
            wait_for(marker.exists, 60, "the job to run", log, supervisor)
            status = stop(supervisor)
        finally:
            stop(supervisor)
            readiness.close()
        assert status == 0, log.read_text()
        assert int(marker.read_text()) in children
        assert app.jobs.get(job.id).state is JobState.SUCCEEDED
    assert secret not in log.read_text()


def test_the_supervisor_refuses_a_secret_in_its_workers_arguments() -> None:
    for args in (
        ["--app", "worker_app:mf", "--database", "sqlite:///x.db"],
        ["--app", "worker_app:mf", "--database=sqlite:///x.db"],
        ["--app", "worker_app:mf", "--smtp", "smtp://user:s3cret@mail:587"],
    ):
        with pytest.raises(ValueError, match="go in environ, never in args"):
            Supervisor(args, 2, burst=False)
    Supervisor(["--app", "worker_app:mf", "--queues", "mail=5"], 2, burst=False)  # no secret
