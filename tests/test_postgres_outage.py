"""PostgreSQL going away and coming back: the store reconnects, errors are clear, nothing is lost.

Runs against a private cluster (see ``private_cluster.py``), never the shared server.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import timedelta

import pytest

from mailfathom import FakeClock, JobState, MailFathom, StoreError
from mailfathom.testing import claim
from private_cluster import PrivateCluster, fresh_database, private_cluster

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster() -> Iterator[PrivateCluster]:
    """A private cluster for this module's tests, removed afterwards."""
    made = private_cluster()
    yield made
    made.remove()


@pytest.fixture
def url(cluster: PrivateCluster) -> str:
    """A fresh database on the private cluster; calls give up after 2 s without a server."""
    return fresh_database(cluster)


def _use_several_connections(app: MailFathom, n: int) -> None:
    """Make the pool open ``n`` connections, so that a restart leaves ``n`` dead ones."""
    barrier = threading.Barrier(n)

    def read() -> None:
        with app.store.db.reading() as cur:
            barrier.wait()
            cur.execute("SELECT 1")

    threads = [threading.Thread(target=read) for _ in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def test_the_first_call_after_a_restart_succeeds(cluster: PrivateCluster, url: str) -> None:
    with MailFathom(url, clock=FakeClock()) as app, MailFathom(url) as other:
        app.migrate()
        app.enqueue_many("k", [{"i": i} for i in range(50)])
        claimed = claim(app, "w", 10, timedelta(seconds=60))
        _use_several_connections(app, 4)
        assert app.store.wait_for_jobs(0) is True  # LISTEN is now open

        cluster.restart()

        counts = app.jobs.counts()
        assert (counts[JobState.PENDING], counts[JobState.CLAIMED]) == (40, 10)
        assert {job.state for job in (app.jobs.get(j.id) for j in claimed)} == {JobState.CLAIMED}
        assert app.enqueue("k", {"after": True}).created
        assert app.store.wait_for_jobs(5) is True  # the LISTEN connection was reopened
        assert app.store.wait_for_jobs(0.2) is False
        other.enqueue("k", {"from": "other"})
        assert app.store.wait_for_jobs(5) is True  # and hears announcements again


def test_calls_fail_clearly_during_an_outage_and_work_after_it(
    cluster: PrivateCluster, url: str
) -> None:
    with MailFathom(url, clock=FakeClock()) as app:
        app.migrate()
        before = app.enqueue_many("k", [{"i": i} for i in range(20)])
        assert app.store.wait_for_jobs(0) is True
        cluster.stop()
        try:
            started = time.monotonic()
            with pytest.raises(StoreError, match=r"unreachable.*check that the server runs"):
                app.enqueue("k", {"during": "outage"})
            assert time.monotonic() - started < 8, "an outage must fail the call, not hang it"
            with pytest.raises(StoreError, match="unreachable"):
                app.jobs.counts()
            with pytest.raises(StoreError, match="PostgreSQL"):
                app.store.wait_for_jobs(1)
        finally:
            cluster.start()

        after = app.enqueue("k", {"after": "outage"})
        assert after.created
        assert app.jobs.counts()[JobState.PENDING] == 21
        assert sum(app.jobs.counts().values()) == 21
        assert [app.jobs.get(job.id).payload for job in before] == [{"i": i} for i in range(20)]
        assert app.store.wait_for_jobs(5) is True
        claimed = claim(app, "w", 100, timedelta(seconds=60))
        assert sorted(job.id for job in claimed) == sorted([*(j.id for j in before), after.id])
