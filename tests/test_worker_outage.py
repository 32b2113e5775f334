"""A worker outlives a database outage: a private PostgreSQL server stopped and restarted.

The shared server is never touched: the test runs its own cluster (initdb into a
temporary folder, a free port) and stops it with ``pg_ctl stop -m immediate``
while a job runs, so the job finishes while the database is gone.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mailfathom import JobState, MailFathom, StoreError
from worker_processes import start_worker, stop, wait_for

pytestmark = pytest.mark.slow


class PrivatePostgres:
    """A throwaway PostgreSQL cluster that a test may stop and start at will."""

    def __init__(self, bindir: Path, folder: Path, port: int) -> None:
        self.bindir, self.folder, self.port = bindir, folder, port
        self.data = folder / "data"
        self.url = f"postgresql://postgres@127.0.0.1:{port}/postgres"

    def _run(self, *command: str) -> None:
        prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        subprocess.run([*prefix, *command], check=True, capture_output=True, timeout=60)

    def init(self) -> None:
        self._run(str(self.bindir / "initdb"), "-D", str(self.data), "-U", "postgres",
                  "-A", "trust", "--no-sync")  # fmt: skip

    def start(self) -> None:
        options = f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-o", options,
                  "-l", str(self.folder / "server.log"), "-w", "start")  # fmt: skip

    def stop(self) -> None:
        self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "immediate",
                  "-w", "stop")  # fmt: skip


def _bindir() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def private_postgres() -> Iterator[PrivatePostgres]:
    bindir = _bindir()
    if bindir is None or (os.geteuid() == 0 and shutil.which("runuser") is None):
        reason = "no initdb (PostgreSQL server binaries) to run a private cluster"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"CI requires them: {reason}")
        pytest.skip(reason)
    folder = Path(tempfile.mkdtemp(prefix="mailfathom-pg-"))
    if os.geteuid() == 0:
        shutil.chown(folder, "postgres")
    server = PrivatePostgres(bindir, folder, _free_port())
    try:
        server.init()
        server.start()
        yield server
    finally:
        with contextlib.suppress(subprocess.CalledProcessError):
            server.stop()
        shutil.rmtree(folder, ignore_errors=True)


def _state(url: str, job_id: int) -> JobState | None:
    try:
        with MailFathom(url) as app:
            return app.jobs.get(job_id).state
    except StoreError:
        return None


def test_a_worker_survives_a_database_outage(
    private_postgres: PrivatePostgres, tmp_path: Path
) -> None:
    url, log = private_postgres.url, tmp_path / "worker.log"
    marker, later = tmp_path / "started", tmp_path / "later"
    with MailFathom(url) as app:
        app.migrate()
        job = app.enqueue("test.sleep", {"marker": str(marker), "seconds": 1})
    worker = start_worker(url, log, "--lease", "30")
    try:
        wait_for(marker.exists, 30, "the job to start", log)
        private_postgres.stop()  # the job finishes while the database is gone
        wait_for(lambda: "database failed while" in log.read_text(), 30, "a failure", log)
        time.sleep(1)
        assert worker.poll() is None, "the worker died with the database"
        private_postgres.start()
        wait_for(lambda: _state(url, job.id) is JobState.SUCCEEDED, 30, "the outcome", log)
        with MailFathom(url) as app:
            (attempt,) = app.jobs.attempts(job.id)
            assert attempt.attempt == 1  # recorded after the outage, not run again
            second = app.enqueue("test.sleep", {"marker": str(later), "seconds": 0})
        wait_for(lambda: _state(url, second.id) is JobState.SUCCEEDED, 30, "a new job", log)
    finally:
        assert stop(worker) == 0
    text = log.read_text()
    assert "the database answers again" in text
    assert "Traceback" not in text
