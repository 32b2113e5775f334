"""Real processes on one database: racing enqueues of one key, and racing claimers.

Each child writes its stderr to a file; the parent collects results while checking
the children's exit codes, so a child that dies fails the test at once with its
stderr instead of showing as a timeout.
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import time
from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from mailfathom import JobState, MailFathom
from mailfathom.testing import claim

pytestmark = pytest.mark.slow


def _child(target: Callable[..., None], stderr: str, *args: Any) -> None:
    """Run ``target(*args)`` with this process's stderr going to the file ``stderr``."""
    fd = os.open(stderr, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 2)
    target(*args)


def start(
    ctx: Any, tmp_path: Path, count: int, target: Callable[..., None], *args: Any
) -> list[tuple[Any, Path]]:
    """Start ``count`` children running ``target(*args, n)``; each with its stderr file."""
    children = []
    for n in range(count):
        stderr = tmp_path / f"child-{n}.stderr"
        proc = ctx.Process(target=_child, args=(target, str(stderr), *args, n))
        proc.start()
        children.append((proc, stderr))
    return children


def collect(children: list[tuple[Any, Path]], results: Any, timeout: float) -> list[Any]:
    """One result per child; fails at once, with its stderr, when a child exits badly."""
    got: list[Any] = []
    deadline = time.monotonic() + timeout
    while len(got) < len(children):
        try:
            got.append(results.get(timeout=0.1))
            continue
        except queue.Empty:
            pass
        for proc, stderr in children:
            if proc.exitcode not in (None, 0):
                text = stderr.read_text(errors="replace") if stderr.exists() else ""
                pytest.fail(f"child {proc.name} exited with {proc.exitcode}:\n{text}")
        assert time.monotonic() < deadline, f"only {len(got)} of {len(children)} children answered"
    for proc, stderr in children:
        proc.join(30)
        assert proc.exitcode == 0, stderr.read_text(errors="replace")
    return got


def _die_at_once(n: int) -> None:
    raise RuntimeError(f"child {n} broke before answering")


def test_a_child_that_dies_fails_the_test_at_once_with_its_stderr(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    results = ctx.Queue()
    children = start(ctx, tmp_path, 1, _die_at_once)
    began = time.monotonic()
    with pytest.raises(pytest.fail.Exception, match=r"(?s)exited with 1.*child 0 broke"):
        collect(children, results, 120)
    assert time.monotonic() - began < 30


def _enqueue_same_key(url: str, barrier: Any, results: Any, n: int) -> None:
    with MailFathom(url) as app:
        barrier.wait()
        job = app.enqueue("k", {"who": multiprocessing.current_process().name}, idempotency_key="x")
        results.put((job.id, job.created))


def test_eight_processes_enqueue_one_key_exactly_once(database_url: str, tmp_path: Path) -> None:
    with MailFathom(database_url) as app:
        app.migrate()
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(8)
    results = ctx.Queue()
    children = start(ctx, tmp_path, 8, _enqueue_same_key, database_url, barrier, results)
    got = collect(children, results, 60)
    ids = {job_id for job_id, _ in got}
    assert len(ids) == 1
    assert sorted(created for _, created in got) == [False] * 7 + [True]
    with MailFathom(database_url) as app:
        assert sum(app.jobs.counts().values()) == 1


def _claim_until_empty(url: str, barrier: Any, results: Any, n: int) -> None:
    owner = f"w{n}"
    claimed: list[tuple[int, int]] = []
    idle = 0
    with MailFathom(url) as app:
        barrier.wait()
        while idle < 3:
            jobs = claim(app, owner, 10, timedelta(seconds=60))
            if not jobs:
                idle += 1
                continue
            idle = 0
            claimed.extend((job.id, job.attempts) for job in jobs)
            done = [(job.id, job.attempts) for job in jobs]  # as the worker's recorder does
            lost = app.store.claims.record_outcomes(
                owner=owner, now=app.clock.now(), succeeded=done
            )
            assert not lost
            time.sleep(0.002)  # as a worker runs its handlers: the claimers take turns
    results.put(claimed)


def test_four_processes_claim_two_thousand_jobs_without_overlap(
    database_url: str, tmp_path: Path
) -> None:
    with MailFathom(database_url) as app:
        app.migrate()
        app.enqueue_many("k", [{"i": i} for i in range(2000)])
    ctx = multiprocessing.get_context("spawn")
    results = ctx.Queue()
    barrier = ctx.Barrier(4)
    children = start(ctx, tmp_path, 4, _claim_until_empty, database_url, barrier, results)
    batches = collect(children, results, 120)
    claims = Counter(job_id for batch in batches for job_id, _ in batch)
    assert len(claims) == 2000
    assert max(claims.values()) == 1, "a job was leased twice"
    assert all(attempt == 1 for batch in batches for _, attempt in batch)
    assert sum(1 for batch in batches if batch) >= 2, "the claimers did not actually race"
    with MailFathom(database_url) as app:
        assert app.jobs.counts()[JobState.SUCCEEDED] == 2000
