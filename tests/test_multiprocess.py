"""Real processes on one SQLite file: racing enqueues of one key, and racing claimers."""

from __future__ import annotations

import multiprocessing
import time
from collections import Counter
from datetime import timedelta
from typing import Any

import pytest

from mailfathom import JobState, MailFathom
from mailfathom.jobs.queue import Finished
from mailfathom.jobs.state import AttemptOutcome

pytestmark = pytest.mark.slow


def _enqueue_same_key(url: str, barrier: Any, results: Any) -> None:
    with MailFathom(url) as app:
        barrier.wait()
        job = app.enqueue("k", {"who": multiprocessing.current_process().name}, idempotency_key="x")
        results.put((job.id, job.created))


def test_eight_processes_enqueue_one_key_exactly_once(database_url: str) -> None:
    with MailFathom(database_url) as app:
        app.migrate()
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(8)
    results = ctx.Queue()
    procs = [
        ctx.Process(target=_enqueue_same_key, args=(database_url, barrier, results))
        for _ in range(8)
    ]
    for proc in procs:
        proc.start()
    got = [results.get(timeout=60) for _ in procs]
    for proc in procs:
        proc.join(30)
        assert proc.exitcode == 0
    ids = {job_id for job_id, _ in got}
    assert len(ids) == 1
    assert sorted(created for _, created in got) == [False] * 7 + [True]
    with MailFathom(database_url) as app:
        assert sum(app.jobs.counts().values()) == 1


def _claim_until_empty(url: str, owner: str, barrier: Any, results: Any) -> None:
    claimed: list[tuple[int, int]] = []
    idle = 0
    with MailFathom(url) as app:
        barrier.wait()
        while idle < 3:
            jobs = app.queue.claim(owner, 10, timedelta(seconds=60))
            if not jobs:
                idle += 1
                continue
            idle = 0
            claimed.extend((job.id, job.attempts) for job in jobs)
            lost = app.queue.finish(owner, [Finished(j, AttemptOutcome.SUCCEEDED) for j in jobs])
            assert not lost
            time.sleep(0.002)  # as a worker runs its handlers: the claimers take turns
    results.put(claimed)


def test_four_processes_claim_two_thousand_jobs_without_overlap(database_url: str) -> None:
    with MailFathom(database_url) as app:
        app.migrate()
        app.enqueue_many("k", [{"i": i} for i in range(2000)])
    ctx = multiprocessing.get_context("spawn")
    results = ctx.Queue()
    barrier = ctx.Barrier(4)
    procs = [
        ctx.Process(target=_claim_until_empty, args=(database_url, f"w{n}", barrier, results))
        for n in range(4)
    ]
    for proc in procs:
        proc.start()
    batches = [results.get(timeout=120) for _ in procs]
    for proc in procs:
        proc.join(30)
        assert proc.exitcode == 0
    claims = Counter(job_id for batch in batches for job_id, _ in batch)
    assert len(claims) == 2000
    assert max(claims.values()) == 1, "a job was leased twice"
    assert all(attempt == 1 for batch in batches for _, attempt in batch)
    assert sum(1 for batch in batches if batch) >= 2, "the claimers did not actually race"
    with MailFathom(database_url) as app:
        assert app.jobs.counts()[JobState.SUCCEEDED] == 2000
