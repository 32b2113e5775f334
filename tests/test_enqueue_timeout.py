"""``enqueue_timeout``: an enqueue waits at most that long for a lock held elsewhere, then
fails with nothing written; without it, it waits as long as the lock is held."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import psycopg
import pytest

from mailfathom import EnqueuedJob, MailFathom, StoreError


@contextmanager
def _lock_held(url: str) -> Iterator[None]:
    """Another session holding what an enqueue needs: SQLite's write lock, or an
    EXCLUSIVE lock on PostgreSQL's mf_jobs (as a long migration or a bulk load would)."""
    if url.startswith("sqlite:///"):
        holder = sqlite3.connect(url[len("sqlite:///") :], isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")
        try:
            yield
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        return
    with psycopg.connect(url) as conn:
        conn.execute("LOCK TABLE mf_jobs IN EXCLUSIVE MODE")
        try:
            yield
        finally:
            conn.rollback()


ENQUEUES: dict[str, Callable[[MailFathom], object]] = {
    "one": lambda mf: mf.enqueue("a.kind", {}),
    "keyed": lambda mf: mf.enqueue("a.kind", {}, idempotency_key="k"),
    "many": lambda mf: mf.enqueue_many("a.kind", [{}, {}]),
}


@pytest.mark.parametrize("how", sorted(ENQUEUES))
def test_an_enqueue_gives_up_after_enqueue_timeout(database_url: str, how: str) -> None:
    with MailFathom(database_url) as setup:
        setup.migrate()
    with MailFathom(database_url, enqueue_timeout=0.3) as mf:
        outcome: list[BaseException | object] = []

        def enqueue() -> None:
            try:
                outcome.append(ENQUEUES[how](mf))
            except StoreError as exc:
                outcome.append(exc)

        with _lock_held(database_url):
            started = time.monotonic()
            thread = threading.Thread(target=enqueue)
            thread.start()
            thread.join(10)  # the lock is let go after that at the latest, so no hang
            waited = time.monotonic() - started
        thread.join(60)
        assert 0.25 <= waited < 10, f"the enqueue waited {waited:.1f} s"
        (error,) = outcome
        assert isinstance(error, StoreError), error
        message = str(error)
        assert "timeout" in message and "nothing was written" in message, message
        assert mf.jobs.list() == []
        # the limit was the transaction's own: the connection works as before
        job = mf.enqueue("a.kind", {"after": True})
        assert isinstance(job, EnqueuedJob) and job.created


def test_without_it_an_enqueue_waits_for_the_lock(database_url: str) -> None:
    with MailFathom(database_url) as mf:
        mf.migrate()
        done: list[object] = []
        with _lock_held(database_url):
            thread = threading.Thread(target=lambda: done.append(mf.enqueue("a.kind", {})))
            thread.start()
            thread.join(1.0)
            assert thread.is_alive() and not done  # still waiting behind the lock
        thread.join(30)
        assert len(done) == 1 and len(mf.jobs.list()) == 1
