"""A worker stopped at any point of its start exits 0 and leaves nothing Claimed.

Real ``mailfathom worker`` processes on SQLite (signals concern the process, not the
store), each sent SIGTERM at a known point of its start:

* before the interpreter ran any code, started as the supervisor starts its worker
  processes (SIGTERM/SIGINT blocked until the worker's handlers are in): at once, and
  after delays that spread over the whole start;
* while the app is imported (``startup_app`` pauses there until told to go on);
* while it registers (the test holds SQLite's write lock, so registering waits);
* the supervisor, while it imports the app: it starts no worker process;
* started as the ``mailfathom`` command is, while it imports mailfathom itself.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from mailfathom import JobState, MailFathom
from mailfathom.cli import run
from mailfathom.cli.supervisor import spawn
from startup_app import PAUSE_DIR
from worker_processes import TESTS, Readiness, stop, wait_for

pytestmark = pytest.mark.slow

CLI = [sys.executable, "-c", "from mailfathom.cli import main; main()"]


@pytest.fixture
def app(tmp_path: Path) -> Iterator[MailFathom]:
    """A migrated SQLite database with three jobs due."""
    with MailFathom(f"sqlite:///{tmp_path / 'db.sqlite'}") as made:
        made.migrate()
        yield made


def _environ(app: MailFathom, pause: Path | None = None) -> dict[str, str]:
    environ = {**os.environ, "MAILFATHOM_DATABASE_URL": app.settings.database_url}
    environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(TESTS), environ.get("PYTHONPATH")]))
    environ.pop(PAUSE_DIR, None)
    if pause is not None:
        environ[PAUSE_DIR] = str(pause)
    return environ


def _worker(*options: str) -> list[str]:
    return [*CLI, "worker", "--app", "startup_app:mf", "--log-level", "info", *options]


def _enqueue(app: MailFathom, tmp_path: Path) -> list[int]:
    return [
        app.enqueue("startup.mark", {"marker": str(tmp_path / f"ran-{n}")}).id for n in range(3)
    ]


def _check_clean(app: MailFathom, jobs: list[int], status: int, log: Path) -> None:
    """Exit 0; no job Claimed (each untouched or done); no worker left registered."""
    assert status == 0, log.read_text()
    for job_id in jobs:
        job = app.jobs.get(job_id)
        assert job.state is not JobState.CLAIMED, log.read_text()
        assert (job.state, job.attempts) in {(JobState.PENDING, 0), (JobState.SUCCEEDED, 1)}
    assert app.workers.list() == []


def _has_open(pid: int, name: str) -> bool:
    """Whether process ``pid`` has a file called ``name`` open."""
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            if os.readlink(fd).endswith("/" + name):
                return True
    return False


def test_a_supervised_worker_signalled_at_any_moment_of_its_start_exits_cleanly(
    app: MailFathom, tmp_path: Path
) -> None:
    jobs = _enqueue(app, tmp_path)
    log = tmp_path / "worker.log"
    readiness = Readiness()
    try:
        # at once (before Python ran a line), then later and later, up to a ready worker
        for delay in (0.0, 0.05, 0.15, 0.3, 0.6, 1.0, 1.5, None):
            with log.open("ab") as out:
                worker = spawn(
                    _worker(), {**_environ(app), **readiness.env()}, stdout=out, stderr=out
                )
            try:
                if delay is None:
                    readiness.wait(worker, log=log)
                elif delay:
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        worker.wait(delay)  # the delay under test; it never exits by itself
                worker.send_signal(signal.SIGTERM)
                status = worker.wait(60)
                if delay is None:  # a ready worker says when it begins to stop
                    readiness.wait(worker, "STOPPING=1", log=log)
            finally:
                stop(worker)
            _check_clean(app, jobs, status, log)
    finally:
        readiness.close()
    assert "SIGTERM received: stopping gracefully" in log.read_text()


def _blocks_sigterm(pid: int) -> bool:
    """Whether process ``pid`` has SIGTERM blocked while no handler of its own catches it
    yet (``SigBlk`` and ``SigCgt`` in /proc/<pid>/status): the command's entry, before the
    worker's handler. A block seen later (CPython blocks every signal for an instant
    while it starts a subprocess) says nothing about the entry."""
    bit = 1 << (signal.SIGTERM - 1)
    with contextlib.suppress(OSError):
        fields = dict(
            line.split(":", 1)
            for line in Path(f"/proc/{pid}/status").read_text().splitlines()
            if line.startswith(("SigBlk:", "SigCgt:"))
        )
        blocked = int(fields["SigBlk"], 16) & bit
        caught = int(fields["SigCgt"], 16) & bit
        return bool(blocked and not caught)
    return False


def test_the_command_is_started_by_its_entry_point_module() -> None:
    (command,) = entry_points(group="console_scripts", name="mailfathom")
    assert command.value == "_mailfathom_command:main"


def test_a_worker_signalled_while_it_imports_mailfathom_exits_cleanly(
    app: MailFathom, tmp_path: Path
) -> None:
    """The command's entry blocks SIGTERM before the package's import (about a second),
    so a SIGTERM then waits for the worker's handler instead of killing the process."""
    jobs = _enqueue(app, tmp_path)
    log = tmp_path / "worker.log"
    command = [sys.executable, "-c", "from _mailfathom_command import main; main()"]
    with log.open("ab") as out:
        worker = subprocess.Popen(
            [*command, *_worker()[len(CLI) :]],
            env=_environ(app),
            cwd=TESTS,
            stdout=out,
            stderr=out,
        )
    try:
        deadline = time.monotonic() + 60
        while not _blocks_sigterm(worker.pid):  # polled: the window lasts the import
            assert worker.poll() is None, log.read_text()
            assert time.monotonic() < deadline, "SIGTERM was never blocked\n" + log.read_text()
            time.sleep(0.005)
        worker.send_signal(signal.SIGTERM)
        status = worker.wait(60)
    finally:
        stop(worker)
    _check_clean(app, jobs, status, log)
    assert "SIGTERM received: stopping gracefully" in log.read_text()


def test_a_worker_signalled_while_it_imports_the_app_exits_without_registering(
    app: MailFathom, tmp_path: Path
) -> None:
    jobs = _enqueue(app, tmp_path)
    log = tmp_path / "worker.log"
    with log.open("ab") as out:
        worker = subprocess.Popen(
            _worker(), env=_environ(app, tmp_path), cwd=TESTS, stdout=out, stderr=out
        )
    try:
        wait_for((tmp_path / f"importing-{worker.pid}").exists, 60, "the import", log, worker)
        worker.send_signal(signal.SIGTERM)
        (tmp_path / "go").write_text("")
        status = worker.wait(60)
    finally:
        stop(worker)
    _check_clean(app, jobs, status, log)
    assert [app.jobs.get(job_id).state for job_id in jobs] == [JobState.PENDING] * 3
    assert not list(tmp_path.glob("ran-*"))
    assert "SIGTERM received: stopping gracefully" in log.read_text()


def test_a_worker_signalled_while_it_registers_exits_before_its_first_claim(
    app: MailFathom, tmp_path: Path
) -> None:
    jobs = _enqueue(app, tmp_path)
    log = tmp_path / "worker.log"
    with log.open("ab") as out:
        worker = subprocess.Popen(
            _worker(), env=_environ(app, tmp_path), cwd=TESTS, stdout=out, stderr=out
        )
    lock = sqlite3.connect(tmp_path / "db.sqlite", isolation_level=None)
    try:
        wait_for((tmp_path / f"importing-{worker.pid}").exists, 60, "the import", log, worker)
        lock.execute("BEGIN IMMEDIATE")  # registering writes: it waits for this lock
        (tmp_path / "go").write_text("")
        # it opens the database to register, then waits for the lock
        wait_for(lambda: _has_open(worker.pid, "db.sqlite"), 60, "registering", log, worker)
        worker.send_signal(signal.SIGTERM)
        lock.execute("ROLLBACK")
        status = worker.wait(60)
    finally:
        lock.close()
        stop(worker)
    _check_clean(app, jobs, status, log)
    assert [app.jobs.get(job_id).state for job_id in jobs] == [JobState.PENDING] * 3


def test_a_supervisor_signalled_while_it_starts_starts_no_worker(
    app: MailFathom, tmp_path: Path
) -> None:
    jobs = _enqueue(app, tmp_path)
    log = tmp_path / "worker.log"
    with log.open("ab") as out:
        supervisor = subprocess.Popen(
            _worker("--processes", "2"),
            env=_environ(app, tmp_path),
            cwd=TESTS,
            stdout=out,
            stderr=out,
        )
    try:
        wait_for(
            (tmp_path / f"importing-{supervisor.pid}").exists,
            60,
            "the import",
            log,
            supervisor,
        )
        supervisor.send_signal(signal.SIGTERM)
        (tmp_path / "go").write_text("")
        status = supervisor.wait(60)
    finally:
        stop(supervisor)
    _check_clean(app, jobs, status, log)
    assert len(list(tmp_path.glob("importing-*"))) == 1  # no worker process was started


def test_other_commands_still_stop_at_once_on_sigterm(app: MailFathom, tmp_path: Path) -> None:
    log = tmp_path / "prune.log"
    with log.open("ab") as out:
        command = subprocess.Popen(
            [*CLI, "prune", "--app", "startup_app:mf", "--dry-run"],
            env=_environ(app, tmp_path),
            cwd=TESTS,
            stdout=out,
            stderr=out,
        )
    try:
        wait_for((tmp_path / f"importing-{command.pid}").exists, 60, "the import", log, command)
        command.send_signal(signal.SIGTERM)  # no "go": only the signal ends the pause
        status = command.wait(30)
    finally:
        stop(command)
    assert status == -signal.SIGTERM, log.read_text()


def test_the_cli_run_inside_a_program_leaves_its_signal_handlers_alone(app: MailFathom) -> None:
    def mine(signum: int, frame: object) -> None:
        pass

    previous = signal.signal(signal.SIGTERM, mine)
    try:
        assert run(["--database", app.settings.database_url, "migrate"]) == 0
        assert signal.getsignal(signal.SIGTERM) is mine
    finally:
        signal.signal(signal.SIGTERM, previous)
