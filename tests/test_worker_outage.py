"""A worker outlives a database outage: a private PostgreSQL server stopped and restarted.

The shared server is never touched: the test runs its own cluster (initdb into a
temporary folder, a free port) and stops it with ``pg_ctl stop -m immediate``
while a job runs, so the job finishes while the database is gone.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mailfathom import JobState, MailFathom, StoreError
from private_cluster import PrivateCluster, private_cluster
from worker_processes import start_worker, stop, wait_for

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster() -> Iterator[PrivateCluster]:
    made = private_cluster()
    try:
        yield made
    finally:
        made.remove()


def _state(url: str, job_id: int) -> JobState | None:
    try:
        with MailFathom(url) as app:
            return app.jobs.get(job_id).state
    except StoreError:
        return None


def test_a_worker_survives_a_database_outage(cluster: PrivateCluster, tmp_path: Path) -> None:
    url, log = cluster.url, tmp_path / "worker.log"
    marker, later = tmp_path / "started", tmp_path / "later"
    with MailFathom(url) as app:
        app.migrate()
        job = app.enqueue("test.sleep", {"marker": str(marker), "seconds": 1})
    worker = start_worker(url, log, "--lease", "30")
    try:
        wait_for(marker.exists, 30, "the job to start", log)
        cluster.stop("immediate")  # the job finishes while the database is gone
        # a second failed call means the worker lived through its first failure and backoff
        wait_for(lambda: log.read_text().count("database failed while") >= 2, 30, "a retry", log)
        assert worker.poll() is None, "the worker died with the database"
        cluster.start()
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
